//! Python-API records of one process (issue 12): the `python_trace_{TID}_{ts}.csv` files and
//! the SNAPSHOT rows of `take_snapshot()`.
//!
//! **python_trace** (behaviour spec §5.4): header `FuncInfo,StartTime(ns),EndTime(ns),Thread
//! Id,Process Id`, one file per thread in `device_<n>/dump/` (n: the thread's current device,
//! else the last NPU the process used, else 0), a time of 0 written `N/A`. Rows, per thread:
//! * a call and its return: `file(line): func` (Python), the C function's description,
//!   `nn.Module: <Class>` (`Module._call_impl`), or the `RecordFunction` name; start..end;
//! * the return of a call made before tracing started: StartTime `N/A`;
//! * frames on the caller's stack at `tracer.start()`: `start: <info>`, start time, `N/A`;
//! * frames on the caller's stack at `tracer.stop()`: `stop: <info>`, stop time, `N/A`;
//! * calls still open at stop or at process end: their start time, EndTime `N/A`.
//!
//! Rows are written when the call ends (inner calls first, as msMemScope does); fields are
//! quoted per RFC 4180 where needed (msMemScope does not escape FuncInfo). With `--format db`
//! the files are moved into table `python_trace_<pid>` of the `.db` dump after the run
//! (`collect::python_warnings`).
//!
//! **SYSTEM** rows of `start()`/`stop()`/`step()` (`START_TRACE`, `STOP_TRACE` device-less;
//! `STEP` with the 1-based count as Name on the thread's current device, else the last NPU the
//! process used, else device-less).
//!
//! **SNAPSHOT** rows: Attr keys are the seed's `total_mem, free_mem, reserved, peak_reserved,
//! allocated, peak_allocated, device_utilization, pt_utilization`. Figures the framework did
//! not give come from the PTA pool accounting of this process (the `used`/`total` of its last
//! PTA row on that device, and their maxima so far); utilisations are percentages with 6
//! decimals (msMemScope's `std::to_string`). Device totals nobody could report are written 0,
//! as msMemScope does, and the log says so.

use crate::adapter::TypeCtx;
use memscope_core::event::{Attrs, Device, Event, EventType};
use memscope_dump::layout;
use memscope_wire::{snapshot_known as known, PyCodeKind, PyTraceEvent, Record, SystemCode};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

/// Header of a python_trace file (spec §5.4).
pub const TRACE_HEADER: [&str; 5] = [
    "FuncInfo",
    "StartTime(ns)",
    "EndTime(ns)",
    "Thread Id",
    "Process Id",
];

struct TraceFile {
    w: csv::Writer<std::io::BufWriter<std::fs::File>>,
    path: PathBuf,
    rows: u64,
}

#[derive(Clone, Copy, Default)]
struct Pool {
    used: u64,
    total: u64,
    peak_used: u64,
    peak_total: u64,
}

/// Calls open on a thread: code and start time.
type Open = Vec<(u32, u64)>;

/// Marks an open C-function call made by one of memscope's own frames (the `isinstance` or
/// `str.encode` its API calls): not the user's trace either. Code ids are small (the probe
/// numbers them from 1), so the top bit is free.
const INSIDE_MEMSCOPE: u32 = 1 << 31;

/// Python-API state of one process.
#[derive(Default)]
pub struct PythonState {
    codes: HashMap<(usize, u32), String>,
    /// `RecordFunction` names (user codes): a block, not a frame — a Python return does not
    /// close it, its own end does (issue 35: `__enter__` returning split it in two rows).
    blocks: HashSet<(usize, u32)>,
    /// memscope's own Python frames (its package, its bootstrap): not the user's trace.
    hidden: HashSet<(usize, u32)>,
    /// C functions (builtins): hidden when one of memscope's frames calls them.
    cfuncs: HashSet<(usize, u32)>,
    stacks: HashMap<u32, Open>,
    files: HashMap<u32, TraceFile>,
    pools: HashMap<u32, Pool>,
    last_npu: Option<u32>,
    steps: u64,
    errors: Vec<String>,
    /// Lines for the log: SNAPSHOT figures that could not be obtained (issue 27).
    warnings: Vec<String>,
    /// No python_trace file is written (the replay API types records without writing).
    dry: bool,
}

impl PythonState {
    /// Writes no python_trace file from now on (SYSTEM and SNAPSHOT events are still made).
    pub fn set_dry(&mut self) {
        self.dry = true;
    }

    /// Stores a `PyCodeDef` of process image `image` (called as records are read, before any
    /// record that uses it is released).
    pub fn define(&mut self, image: usize, rec: &Record<Box<[u8]>>) -> bool {
        let Record::PyCodeDef {
            id,
            kind,
            line,
            file,
            name,
        } = rec
        else {
            return false;
        };
        let name = String::from_utf8_lossy(name);
        match kind {
            PyCodeKind::User => {
                self.blocks.insert((image, *id));
            }
            PyCodeKind::Function
                if memscope_analysis::attribution::memscope_python_file(
                    &String::from_utf8_lossy(file),
                ) =>
            {
                self.hidden.insert((image, *id));
            }
            PyCodeKind::CFunction => {
                self.cfuncs.insert((image, *id));
            }
            _ => {}
        }
        let info = match kind {
            PyCodeKind::Function => {
                format!("{}({line}): {name}", String::from_utf8_lossy(file))
            }
            PyCodeKind::Module => format!("nn.Module: {name}"),
            PyCodeKind::CFunction | PyCodeKind::User => name.into_owned(),
        };
        self.codes.insert((image, *id), info);
        true
    }

    /// Follows the pool figures of every emitted event (PTA rows carry `used`/`total` after the
    /// event) and the last NPU the process used.
    pub fn observe(&mut self, ev: &Event) {
        if let Device::Npu(d) = ev.device {
            self.last_npu = Some(d);
            if ev.event_type == EventType::Pta {
                if let Some(m) = ev.memory() {
                    let p = self.pools.entry(d).or_default();
                    p.used = m.used.unwrap_or(0).max(0) as u64;
                    p.total = m.total.unwrap_or(0).max(0) as u64;
                    p.peak_used = p.peak_used.max(p.used);
                    p.peak_total = p.peak_total.max(p.total);
                }
            }
        }
    }

    /// Handles a Python record of thread `tid` of image `image` (trace rows are written to
    /// files under `project`, a SNAPSHOT row is pushed onto `out`). `false`: not a Python
    /// record.
    pub fn on_record(
        &mut self,
        ctx: &TypeCtx,
        project: &Path,
        image: usize,
        tid: u32,
        rec: &Record<Box<[u8]>>,
        out: &mut Vec<Event>,
    ) -> bool {
        match *rec {
            Record::PyCall { ts, code } => {
                let hidden = &self.hidden;
                let stack = self.stacks.entry(tid).or_default();
                // a builtin that memscope's own frame calls (not further down: a frame whose
                // return was lost must not hide what the user calls after it)
                let mark = self.cfuncs.contains(&(image, code))
                    && stack
                        .last()
                        .is_some_and(|&(c, _)| hidden.contains(&(image, c)));
                stack.push((if mark { code | INSIDE_MEMSCOPE } else { code }, ts));
            }
            Record::PyReturn { ts, code } if self.blocks.contains(&(image, code)) => {
                // a RecordFunction block ends: the frames above it stay open
                let stack = self.stacks.entry(tid).or_default();
                match stack.iter().rposition(|(c, _)| *c == code) {
                    Some(at) => {
                        let (_, start) = stack.remove(at);
                        self.row(ctx, project, image, tid, code, "", start, ts);
                    }
                    None => self.row(ctx, project, image, tid, code, "", 0, ts),
                }
            }
            Record::PyReturn { ts, code } => {
                let blocks = &self.blocks;
                let stack = self.stacks.entry(tid).or_default();
                match stack
                    .iter()
                    .rposition(|(c, _)| *c & !INSIDE_MEMSCOPE == code)
                {
                    Some(at) => {
                        let mut closed: Open = stack.drain(at..).collect();
                        let (c, start) = closed.remove(0);
                        // RecordFunction blocks opened in the returning frame stay open
                        let (kept, closed): (Open, Open) = closed
                            .into_iter()
                            .partition(|(oc, _)| blocks.contains(&(image, *oc)));
                        stack.extend(kept);
                        // Calls above the matched one lost their return: close them open.
                        for (oc, os) in closed.into_iter().rev() {
                            self.row(ctx, project, image, tid, oc, "", os, 0);
                        }
                        self.row(ctx, project, image, tid, c, "", start, ts);
                    }
                    None => self.row(ctx, project, image, tid, code, "", 0, ts),
                }
            }
            Record::PyTrace { ts, event, code } => match event {
                PyTraceEvent::Start => {}
                PyTraceEvent::FrameAtStart => {
                    self.row(ctx, project, image, tid, code, "start: ", ts, 0)
                }
                PyTraceEvent::FrameAtStop => {
                    self.row(ctx, project, image, tid, code, "stop: ", ts, 0)
                }
                PyTraceEvent::Stop => self.close_open(ctx, project, image),
            },
            Record::System {
                ts,
                code: code @ (SystemCode::StartTrace | SystemCode::StopTrace | SystemCode::Step),
                ..
            } => {
                // `start()`/`stop()` (device-less, like msMemScope) and `step()`: Name is the
                // 1-based step count, Device the thread's current device.
                let t = match code {
                    SystemCode::StartTrace => EventType::StartTrace,
                    SystemCode::StopTrace => EventType::StopTrace,
                    _ => EventType::Step,
                };
                let mut ev = Event::new(t, ts, ctx.pid, tid);
                if t == EventType::Step {
                    self.steps += 1;
                    ev.name = Some(self.steps.to_string());
                    // A thread without a device gives a device-less STEP (issue 27): copied
                    // into every dump of the process, like a device-less mark.
                    ev.device = ctx
                        .current_device(tid)
                        .or(self.last_npu)
                        .map_or(Device::NotApplicable, Device::Npu);
                }
                out.push(ev);
            }
            Record::Snapshot {
                ts,
                device,
                known: k,
                values,
                ref name,
            } => {
                let ev = self.snapshot(ctx, tid, ts, device, k, values, name);
                if k & (known::TOTAL | known::FREE) != known::TOTAL | known::FREE {
                    self.warnings.push(format!(
                        "SNAPSHOT {:?} (device {}): the device's total and free memory could not be obtained (no torch_npu, and the ACL runtime's aclrtGetMemInfo is not in the process or failed); total_mem, free_mem and device_utilization are written as 0",
                        String::from_utf8_lossy(name),
                        ev.device.to_text()
                    ));
                }
                out.push(ev);
            }
            _ => return false,
        }
        true
    }

    #[allow(clippy::too_many_arguments)]
    fn snapshot(
        &self,
        ctx: &TypeCtx,
        tid: u32,
        ts: u64,
        device: u32,
        k: u8,
        v: [u64; 6],
        name: &[u8],
    ) -> Event {
        let dev = if device == u32::MAX {
            ctx.current_device(tid).or(self.last_npu).unwrap_or(0)
        } else {
            ctx.map_device(device)
        };
        let pool = self.pools.get(&dev).copied().unwrap_or_default();
        let pick = |bit: u8, i: usize, fallback: u64| if k & bit != 0 { v[i] } else { fallback };
        let total = pick(known::TOTAL, 0, 0);
        let free = pick(known::FREE, 1, 0);
        let reserved = pick(known::RESERVED, 2, pool.total);
        let peak_reserved = pick(known::PEAK_RESERVED, 3, pool.peak_total.max(reserved));
        let allocated = pick(known::ALLOCATED, 4, pool.used);
        let peak_allocated = pick(known::PEAK_ALLOCATED, 5, pool.peak_used.max(allocated));
        let pct = |num: u64, den: u64| {
            if den == 0 {
                0.0
            } else {
                num as f64 / den as f64 * 100.0
            }
        };
        let device_util = pct(total.saturating_sub(free), total);
        let pt_util = pct(allocated, reserved);
        let mut ev = Event::new(EventType::Snapshot, ts, ctx.pid, tid);
        ev.name = Some(String::from_utf8_lossy(name).into_owned());
        ev.device = Device::Npu(dev);
        ev.attrs = Attrs::Pairs(vec![
            ("total_mem".into(), total.to_string()),
            ("free_mem".into(), free.to_string()),
            ("reserved".into(), reserved.to_string()),
            ("peak_reserved".into(), peak_reserved.to_string()),
            ("allocated".into(), allocated.to_string()),
            ("peak_allocated".into(), peak_allocated.to_string()),
            ("device_utilization".into(), format!("{device_util:.6}")),
            ("pt_utilization".into(), format!("{pt_util:.6}")),
        ]);
        ev
    }

    fn close_open(&mut self, ctx: &TypeCtx, project: &Path, image: usize) {
        let mut tids: Vec<u32> = self.stacks.keys().copied().collect();
        tids.sort_unstable();
        for tid in tids {
            let open = self.stacks.remove(&tid).unwrap_or_default();
            for (code, start) in open {
                self.row(ctx, project, image, tid, code, "", start, 0);
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn row(
        &mut self,
        ctx: &TypeCtx,
        project: &Path,
        image: usize,
        tid: u32,
        code: u32,
        prefix: &str,
        start: u64,
        end: u64,
    ) {
        if self.dry || code & INSIDE_MEMSCOPE != 0 || self.hidden.contains(&(image, code)) {
            return;
        }
        let info = match self.codes.get(&(image, code)) {
            Some(i) => format!("{prefix}{i}"),
            None => format!("{prefix}<code #{code}>"),
        };
        let file = match self.files.entry(tid) {
            std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
            std::collections::hash_map::Entry::Vacant(v) => {
                let dev = ctx.current_device(tid).or(self.last_npu).unwrap_or(0);
                let name = format!(
                    "python_trace_{tid}_{}.csv",
                    layout::timestamp_name(layout::now_ns())
                );
                let path = project
                    .join(format!("device_{dev}"))
                    .join("dump")
                    .join(name);
                let opened = path
                    .parent()
                    .map_or(Ok(()), layout::create_dir_0750)
                    .and_then(|()| layout::create_new_0600(&path));
                match opened {
                    Ok((f, path)) => {
                        let mut w = csv::Writer::from_writer(std::io::BufWriter::new(f));
                        if let Err(e) = w.write_record(TRACE_HEADER) {
                            self.errors.push(format!("{}: {e}", path.display()));
                        }
                        v.insert(TraceFile { w, path, rows: 0 })
                    }
                    Err(e) => {
                        if self.errors.len() < 10 {
                            self.errors.push(format!("{}: {e}", path.display()));
                        }
                        return;
                    }
                }
            }
        };
        let t = |ns: u64| {
            if ns == 0 {
                "N/A".to_owned()
            } else {
                ns.to_string()
            }
        };
        let rec = [info, t(start), t(end), tid.to_string(), ctx.pid.to_string()];
        match file.w.write_record(&rec) {
            Ok(()) => file.rows += 1,
            Err(e) => {
                if self.errors.len() < 10 {
                    self.errors.push(format!("{}: {e}", file.path.display()));
                }
            }
        }
    }

    /// Flushes the trace files.
    pub fn flush(&mut self) {
        for f in self.files.values_mut() {
            if let Err(e) = f.w.flush() {
                if self.errors.len() < 10 {
                    self.errors.push(format!("{}: {e}", f.path.display()));
                }
            }
        }
    }

    /// Errors met writing trace files since the last call (for the process log).
    pub fn take_errors(&mut self) -> Vec<String> {
        std::mem::take(&mut self.errors)
    }

    /// Whether a python_trace file has been written into the process's directory.
    pub fn wrote_files(&self) -> bool {
        !self.files.is_empty()
    }

    /// Takes the warnings for the log (SNAPSHOT figures that could not be obtained).
    pub fn take_warnings(&mut self) -> Vec<String> {
        std::mem::take(&mut self.warnings)
    }

    /// The process ended: writes the calls still open (EndTime `N/A`), flushes, and returns
    /// one line per trace file (path and rows) for the log.
    pub fn finish(&mut self, ctx: &TypeCtx, project: &Path) -> Vec<String> {
        self.close_open(ctx, project, ctx.image());
        self.flush();
        let mut lines: Vec<String> = self
            .files
            .values()
            .map(|f| format!("python trace: {} ({} rows)", f.path.display(), f.rows))
            .collect();
        lines.sort();
        lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(id: u32, kind: PyCodeKind, line: u32, file: &str, name: &str) -> Record<Box<[u8]>> {
        Record::PyCodeDef {
            id,
            kind,
            line,
            file: file.as_bytes().into(),
            name: name.as_bytes().into(),
        }
    }

    #[test]
    fn python_trace_rows_follow_calls_returns_and_start_stop_frames() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = TypeCtx::new(42, vec![]);
        let mut s = PythonState::default();
        s.define(0, &def(1, PyCodeKind::Function, 3, "/w/t.py", "main"));
        s.define(0, &def(2, PyCodeKind::Function, 9, "/w/t.py", "work"));
        s.define(
            0,
            &def(3, PyCodeKind::CFunction, 0, "", "<built-in function len>"),
        );
        s.define(0, &def(4, PyCodeKind::Module, 0, "", "Linear"));
        let mut out = Vec::new();
        let recs = [
            Record::PyTrace {
                ts: 100,
                event: PyTraceEvent::Start,
                code: 0,
            },
            Record::PyTrace {
                ts: 100,
                event: PyTraceEvent::FrameAtStart,
                code: 1,
            },
            Record::PyCall { ts: 110, code: 2 },
            Record::PyCall { ts: 111, code: 3 },
            Record::PyReturn { ts: 112, code: 3 },
            Record::PyCall { ts: 113, code: 4 },
            Record::PyReturn { ts: 114, code: 4 },
            Record::PyReturn { ts: 120, code: 2 },
            Record::PyCall { ts: 130, code: 2 },
            Record::PyTrace {
                ts: 140,
                event: PyTraceEvent::FrameAtStop,
                code: 1,
            },
            Record::PyTrace {
                ts: 140,
                event: PyTraceEvent::Stop,
                code: 0,
            },
        ];
        for r in &recs {
            assert!(s.on_record(&ctx, dir.path(), 0, 7, r, &mut out));
        }
        s.finish(&ctx, dir.path());
        let files: Vec<_> = std::fs::read_dir(dir.path().join("device_0/dump"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert_eq!(files.len(), 1);
        let name = files[0].file_name().unwrap().to_str().unwrap().to_owned();
        assert!(
            name.starts_with("python_trace_7_") && name.ends_with(".csv"),
            "{name}"
        );
        let text = std::fs::read_to_string(&files[0]).unwrap();
        assert_eq!(
            text,
            "FuncInfo,StartTime(ns),EndTime(ns),Thread Id,Process Id\n\
             start: /w/t.py(3): main,100,N/A,7,42\n\
             <built-in function len>,111,112,7,42\n\
             nn.Module: Linear,113,114,7,42\n\
             /w/t.py(9): work,110,120,7,42\n\
             stop: /w/t.py(3): main,140,N/A,7,42\n\
             /w/t.py(9): work,130,N/A,7,42\n"
        );
        assert!(out.is_empty());
    }

    #[test]
    fn snapshot_rows_have_the_seed_keys_and_take_pool_figures_when_unknown() {
        let ctx = TypeCtx::new(1, vec![]);
        let mut s = PythonState::default();
        let mut pta = Event::new(EventType::Pta, 5, 1, 1);
        pta.device = Device::Npu(0);
        pta.attrs = Attrs::Memory(memscope_core::event::MemoryAttrs {
            used: Some(3 << 20),
            total: Some(1 << 30),
            ..Default::default()
        });
        s.observe(&pta);
        let mut out = Vec::new();
        let rec = Record::Snapshot {
            ts: 9,
            device: u32::MAX,
            known: known::TOTAL | known::FREE,
            values: [4 << 30, 3 << 30, 0, 0, 0, 0],
            name: b"init".as_slice().into(),
        };
        assert!(s.on_record(&ctx, Path::new("/nonexistent"), 0, 1, &rec, &mut out));
        let Attrs::Pairs(p) = &out[0].attrs else {
            panic!("pairs")
        };
        let keys: Vec<_> = p.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            [
                "total_mem",
                "free_mem",
                "reserved",
                "peak_reserved",
                "allocated",
                "peak_allocated",
                "device_utilization",
                "pt_utilization"
            ]
        );
        let vals: Vec<_> = p.iter().map(|(_, v)| v.as_str()).collect();
        assert_eq!(vals[2], (1u64 << 30).to_string());
        assert_eq!(vals[4], (3u64 << 20).to_string());
        assert_eq!(vals[6], "25.000000");
        assert_eq!(vals[7], "0.292969");
        assert_eq!(out[0].name.as_deref(), Some("init"));
        assert_eq!(out[0].device, Device::Npu(0));
    }
}
