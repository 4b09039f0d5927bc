//! What happens to one process's records once their order is fixed: each is appended to the
//! capture, typed through the adapters' typers, given an ID and pushed through the process's
//! bus (filters, analyses, sinks). The live collector, `memscope recover` (both fed by the
//! spool merge) and `memscope export` (fed by a capture) drive the same pipeline, so they
//! write the same rows.

use crate::adapter::TypeCtx;
use crate::fast_path::FastPath;
use crate::logfile::LogFile;
use memscope_core::bus::Bus;
use memscope_core::event::{Event, EventKind};
use memscope_dump::sink::SharedStats;
use memscope_stream::capture::{CaptureEnd, CaptureStats, CaptureWriter, ImageHeader, ImageInfo};
use memscope_wire::{Record, StackFrames, SystemCode};
use std::collections::HashMap;
use std::path::PathBuf;

#[path = "pipeline_compact.rs"]
mod compact_records;
#[path = "pipeline_finish.rs"]
mod finish;
pub(crate) use finish::answer_barrier;
#[path = "pipeline_host.rs"]
mod host;
#[path = "reconfigure.rs"]
mod reconfigure;
#[path = "pipeline_sampled.rs"]
mod sampled;

/// Receives every typed event of a pipeline (the replay API).
pub type Observer = Box<dyn FnMut(&Event)>;

/// Index of MALLOC in `EventKind::ALL` (the per-kind counters).
const MALLOC_SLOT: usize = kind_slot(EventKind::Malloc);
/// Index of FREE in `EventKind::ALL`.
const FREE_SLOT: usize = kind_slot(EventKind::Free);

const fn kind_slot(k: EventKind) -> usize {
    let mut i = 0;
    while i < EventKind::ALL.len() {
        if EventKind::ALL[i] as u8 == k as u8 {
            return i;
        }
        i += 1;
    }
    0
}

/// File in a process's output directory while its outputs are being written.
pub const INCOMPLETE_MARKER: &str = ".memscope_incomplete";

pub use crate::process_summary::ProcessSummary;

/// The capture of a process while it is written.
pub struct CaptureOut {
    /// Writer (None once it failed).
    pub writer: Option<CaptureWriter>,
    /// Where it is moved when the process is finished (its output directory).
    pub final_path: PathBuf,
}

/// Everything a [`Pipeline`] is built from.
pub struct PipelineSetup {
    /// Process id.
    pub pid: u32,
    /// Its output directory (created on its first event).
    pub project_dir: PathBuf,
    /// Executable of the first image.
    pub exe: String,
    /// The adapters' typers.
    pub typers: crate::typers::Typers,
    /// Typing context.
    pub ctx: TypeCtx,
    /// Its bus (filters, analyses, sink).
    pub bus: Bus,
    /// Figures of the bus's dump sink.
    pub sink_stats: SharedStats,
    /// Its log (created with the directory).
    pub log: LogFile,
    /// config.json text written into the directory.
    pub config_json: String,
    /// The capture to write, if any.
    pub capture: Option<CaptureOut>,
    /// HOST rows are not written (summary note).
    pub host_rows_off: bool,
    /// Aggregate mode: the summary says so.
    pub aggregate: bool,
    /// When HOST rows are neither written nor analysed: the HOST fast path, which types and
    /// accounts HOST records without events (they would only be dropped by the bus), and
    /// takes the leak/peak summaries of the other host blocks.
    pub host_fast: Option<Box<dyn FastPath>>,
    /// Rows of account-only registered types are built (`--host-rows`, or an analysis that
    /// reads every row); otherwise they are only accounted.
    pub account_rows: bool,
    /// Python stack frames per row (`--call-stack python:N`; `None`: off).
    pub py_depth: Option<u32>,
    /// The frame its live-view layer publishes (`memscope top`).
    pub live: memscope_longjobs::live::LiveHandle,
}

/// Typing, IDs and the bus of one process.
pub struct Pipeline {
    typers: crate::typers::Typers,
    ctx: TypeCtx,
    texts: HashMap<(usize, u32), Box<[u8]>>,
    bus: Bus,
    sink_stats: SharedStats,
    next_id: u64,
    untyped: u64,
    log: LogFile,
    summary: ProcessSummary,
    failed: Option<String>,
    config_json: String,
    capture: Option<CaptureOut>,
    out: Vec<Event>,
    /// Every typed event is also handed to this observer (the replay API).
    observer: Option<Observer>,
    /// Nothing is written (no directory, log or config.json).
    dry: bool,
    host_fast: Option<Box<dyn FastPath>>,
    /// Account-only registered types' live accounts (issue 34).
    accounts: crate::account_summary::Accounts,
    /// Their rows are built (see [`PipelineSetup::account_rows`]).
    account_rows: bool,
    /// Typed events per kind (index in `EventKind::ALL`).
    typed: [u64; EventKind::ALL.len()],
    /// python_trace files and snapshots (issue 12).
    python: crate::python::PythonState,
    /// Python stacks of the rows (issue 13).
    pystacks: crate::pystacks::PyStacks,
    /// Rows of the package's torch hooks and watch files (issue 13).
    torch: crate::torch::TorchState,
    /// Blocks seen outside collection windows (issue 26).
    history: crate::history::History,
    /// Tracked host bytes and the memory samples' figures (issue 25).
    sampled: crate::sampled::SampledMemory,
    /// Highest flush request seen (`SystemCode::Barrier`) and the highest answered.
    barrier: (u32, u32),
    /// Its live-view frame (`memscope top`).
    live: memscope_longjobs::live::LiveHandle,
}

impl Pipeline {
    /// A pipeline for one process.
    pub fn new(p: PipelineSetup) -> Pipeline {
        Pipeline {
            typers: p.typers,
            ctx: p.ctx,
            texts: HashMap::new(),
            bus: p.bus,
            sink_stats: p.sink_stats,
            next_id: 0,
            untyped: 0,
            log: p.log,
            summary: ProcessSummary {
                pid: p.pid,
                project_dir: p.project_dir,
                exe: p.exe,
                host_rows_off: p.host_rows_off,
                aggregate: p.aggregate,
                ..ProcessSummary::default()
            },
            failed: None,
            config_json: p.config_json,
            capture: p.capture,
            out: Vec::new(),
            observer: None,
            dry: false,
            host_fast: p.host_fast,
            accounts: Default::default(),
            account_rows: p.account_rows,
            typed: [0; EventKind::ALL.len()],
            python: Default::default(),
            pystacks: crate::pystacks::PyStacks::new(p.py_depth),
            torch: Default::default(),
            history: Default::default(),
            sampled: Default::default(),
            barrier: (0, 0),
            live: p.live,
        }
    }

    /// Its live-view frame (`memscope top`, [`crate::live_view`]).
    pub fn live(&self) -> &memscope_longjobs::live::LiveHandle {
        &self.live
    }

    #[allow(dead_code)] // used by the replay API (TEAM contract 3)
    /// Writes nothing: no directory, log or config.json (typing only, for the replay API).
    pub fn set_dry(&mut self) {
        self.dry = true;
        self.python.set_dry();
        self.torch.set_dry();
    }

    /// Lets the typers emit what they hold at the end (without finishing the bus).
    pub fn finish_typers(&mut self) {
        let mut out = Vec::new();
        self.typers.finish(&mut self.ctx, &mut out);
        for ev in out {
            self.emit(ev);
        }
    }

    #[allow(dead_code)] // used by the replay API (TEAM contract 3)
    /// Hands every typed event (with its ID) to `f` as well (HOST records are then typed
    /// into events too: no fast path).
    pub fn observe(&mut self, f: Observer) {
        self.observer = Some(f);
        self.host_fast = None;
        self.account_rows = true;
    }

    /// The process's log.
    pub fn log(&mut self) -> &mut LogFile {
        &mut self.log
    }

    /// Sets the executable shown in the summary (a later image's).
    pub fn set_exe(&mut self, exe: String) {
        self.summary.exe = exe;
    }

    /// Takes a (new) image's rank environment: its `ASCEND_RT_VISIBLE_DEVICES`, when set,
    /// maps the devices of the rows from now on (issue 18, B3: `sh -c 'ASCEND_RT_VISIBLE_DEVICES=3
    /// exec python3 train.py'`).
    pub fn set_rank_env(&mut self, env: &[(String, String)]) {
        if env.is_empty() {
            return;
        }
        if let Some((_, v)) = env.iter().find(|(k, _)| k == "ASCEND_RT_VISIBLE_DEVICES") {
            self.ctx.visible_devices = memscope_wire::probe_env::parse_visible_devices(v);
        }
        let text: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v}")).collect();
        self.log
            .info(&format!("rank environment: {}", text.join(" ")));
        self.summary.rank_env = env.to_vec();
    }

    /// Sets the parent pid shown in the run index.
    pub fn set_ppid(&mut self, ppid: u32) {
        self.summary.ppid = ppid;
    }

    /// Declares image `image`'s header to the capture.
    pub fn set_image(&mut self, image: usize, h: ImageHeader) {
        if let Some(w) = self.capture.as_mut().and_then(|c| c.writer.as_mut()) {
            w.set_image(image, h);
        }
    }

    /// Handles one record of image `image`, thread `tid`, in emission order.
    pub fn record(&mut self, image: usize, tid: u32, rec: &Record<Box<[u8]>>) {
        // a flush request is not a row: the collector answers it (`take_barrier`)
        if let Record::System {
            code: SystemCode::Barrier,
            device: n,
            ..
        } = rec
        {
            self.barrier.0 = self.barrier.0.max(*n);
            return;
        }
        // records of the fast path (HOST's heap records): captured and accounted with one map
        if self.host_fast.as_ref().is_some_and(|f| f.handles(rec))
            && !matches!(rec, Record::Module { .. })
        {
            self.ctx.set_image(image);
            self.sampled.set_image(image);
            let shadow = self.history.is_shadow(image, tid, rec.ts());
            self.host_record(image, tid, rec, shadow);
            return;
        }
        self.capture_record(image, tid, rec);
        match rec {
            Record::StackDef { id, raw, .. } => {
                self.ctx
                    .define_stack(image, *id, StackFrames::new(raw).collect());
                return;
            }
            Record::TextDef { id, text } => {
                self.texts.insert((image, *id), text.clone());
                return;
            }
            rec @ Record::EventTypeDef { .. } => {
                self.ctx.types.define(image, rec);
                return;
            }
            rec @ Record::PyCodeDef { .. } => {
                self.pystacks.define(image, rec);
                self.python.define(image, rec);
                return;
            }
            rec @ Record::PyFrameDef { .. } => {
                self.pystacks.define(image, rec);
                return;
            }
            // the thread's Python stack for its next rows (millions with --call-stack python:N)
            rec @ Record::PyStack { .. } if self.pystacks.on_record(image, tid, rec) => return,
            _ => {}
        }
        self.ctx.set_image(image);
        self.sampled.set_image(image);
        if let Record::Shadow { ts } = rec {
            self.history.marker(image, tid, *ts);
            return;
        }
        let shadow = self.history.is_shadow(image, tid, rec.ts());
        if matches!(rec, Record::Compact { .. }) && self.compact_account(image, tid, rec, shadow) {
            return;
        }
        let resolved = self.resolve_text(image, rec);
        let rec = resolved.as_ref().unwrap_or(rec);
        match rec {
            Record::OwnerPush { label, .. } => {
                self.ctx
                    .push_owner(tid, String::from_utf8_lossy(label).into_owned());
                return;
            }
            Record::OwnerPop { .. } => {
                self.ctx.pop_owner(tid);
                return;
            }
            // The C stack service, for every adapter: the module map, and stacks the runtime
            // captured for the thread's next record.
            Record::Module {
                base,
                start,
                size,
                build_id,
                path,
                ..
            } => {
                self.ctx.add_module((*base, *start, *size), path, build_id);
                if let Some(fast) = &mut self.host_fast {
                    // the fast path symbolises the stacks of its leak/peak summaries itself
                    fast.record(&mut self.ctx, rec, self.next_id, None);
                }
                return;
            }
            Record::CallStack { ts, stack } => {
                self.ctx.set_call_stack(tid, *ts, *stack);
                return;
            }
            Record::ProcessSample { ts, rss, anon } => {
                self.host_sample(tid, *ts, *rss, *anon);
                return;
            }
            Record::DeviceSample {
                ts,
                device,
                used,
                free,
            } => {
                self.device_sample(tid, *ts, *device, *used, *free);
                return;
            }
            _ => {}
        }
        if self.pystacks.on_record(image, tid, rec) {
            return;
        }
        let mut out = std::mem::take(&mut self.out);
        // python_trace rows (written as the calls end), SYSTEM rows of the Python API and
        // SNAPSHOT rows
        let handled = self.python.on_record(
            &self.ctx,
            &self.summary.project_dir,
            image,
            tid,
            rec,
            &mut out,
        );
        if !handled
            && !self
                .torch
                .on_record(&mut self.ctx, &self.summary.project_dir, tid, rec, &mut out)
            && !self.typers.type_record(&mut self.ctx, tid, rec, &mut out)
        {
            // a framework hook's role tag (label `@…`, issue 25) of memory no source follows
            // (a CPU tensor without `--device cpu`) is no mistake of the job's
            match rec {
                Record::OwnerTag { addr, label, .. } if !label.starts_with(b"@") => {
                    self.ctx.warn(format!(
                        "describer(0x{addr:x}, owner=...): no live pool block starts there; ignored"
                    ));
                }
                _ => {}
            }
            self.untyped += 1;
        }
        let c_stack = self.ctx.take_call_stack(tid, rec.ts());
        // events are handled where the typer put them (an Event is 312 bytes: no moves)
        for ev in out.iter_mut() {
            if !shadow {
                self.pystacks.attach(image, tid, ev);
            }
            if ev.c_stack.is_none() {
                ev.c_stack.clone_from(&c_stack);
            }
            if !handled {
                self.python.observe(ev);
            }
            if shadow {
                if let Some(ev) = self.history.divert(image, ev.take()) {
                    self.emit(ev);
                }
                continue;
            }
            match self.history.touch(image, ev) {
                crate::history::Touch::Pass => {}
                crate::history::Touch::Drop => continue,
                crate::history::Touch::PromoteFirst(m) => self.emit(*m),
            }
            self.emit_in_place(ev);
        }
        out.clear();
        self.out = out;
        match rec {
            Record::System {
                ts,
                code: SystemCode::StartTrace,
                ..
            } => self.window_opened(image, *ts),
            Record::System {
                code: SystemCode::StopTrace,
                ..
            } => self.history.closed(),
            _ => {}
        }
    }

    /// Appends `rec` to the capture (its writer keeping the allocations' references).
    pub(super) fn capture_record(&mut self, image: usize, tid: u32, rec: &Record<Box<[u8]>>) {
        if let Some(c) = &mut self.capture {
            if let Some(w) = &mut c.writer {
                if let Err(e) = w.record(image, tid, rec) {
                    self.capture_failed(e);
                }
            }
        }
    }

    pub(super) fn capture_failed(&mut self, e: std::io::Error) {
        if let Some(c) = &mut self.capture {
            let path = c
                .writer
                .as_ref()
                .map(|w| w.path().display().to_string())
                .unwrap_or_default();
            let line = format!(
                "cannot write {path}: {e}{}; the capture stops here, the dumps go on",
                memscope_dump::sink::limit_name(&e)
            );
            eprintln!("memscope: pid {}: {line}", self.summary.pid);
            self.log.warn(&line);
            c.writer = None;
        }
    }

    /// Drains warnings of the typers and the sink into the log (and stderr for the sink's).
    pub fn drain_warnings(&mut self) {
        for w in self.ctx.take_warnings() {
            self.log.warn(&w);
        }
        for e in self.python.take_errors() {
            self.log.error(&format!("python trace: {e}"));
        }
        for w in self.python.take_warnings() {
            self.log.warn(&w);
        }
        for e in self.torch.take_errors() {
            self.log.error(&format!("memory watch: {e}"));
        }
        let lines = match self.sink_stats.lock() {
            Ok(mut s) => std::mem::take(&mut s.warnings),
            Err(_) => Vec::new(),
        };
        self.summary.write_failures += lines.len() as u64;
        for l in lines {
            eprintln!("memscope: pid {}: {l}", self.summary.pid);
            self.log.warn(&l);
        }
    }

    /// Creates the process's directory, config.json and log on its first event.
    fn materialize(&mut self) -> Result<(), String> {
        let dir = &self.summary.project_dir;
        // the error names the path (or the part of it) that failed
        memscope_dump::layout::create_dir_0750(dir).map_err(|e| e.to_string())?;
        // Removed when the process is finished: `memscope recover` redoes a directory that
        // still has it (its collector died).
        let _ = memscope_dump::layout::create_new_0600(&dir.join(INCOMPLETE_MARKER));
        let cfg = dir.join("config.json");
        if let Ok((mut f, _)) = memscope_dump::layout::create_new_0600(&cfg) {
            std::io::Write::write_all(&mut f, self.config_json.as_bytes())
                .map_err(|e| format!("cannot write {}: {e}", cfg.display()))?;
        }
        self.log.open();
        Ok(())
    }

    /// The record with its text inline for an interned-text reference of image `image`
    /// (so typers see one form); `None` for other records. An unknown id (definition lost)
    /// gives `<text #id>`.
    fn resolve_text(&self, image: usize, rec: &Record<Box<[u8]>>) -> Option<Record<Box<[u8]>>> {
        let text = |id: u32| -> Box<[u8]> {
            self.texts
                .get(&(image, id))
                .cloned()
                .unwrap_or_else(|| format!("<text #{id}>").into_bytes().into())
        };
        match *rec {
            Record::MarkRef {
                ts,
                stream,
                text: id,
            } => Some(Record::Mark {
                ts,
                stream,
                msg: text(id),
                null: false,
            }),
            Record::RangeStartRef {
                ts,
                id,
                stream,
                text: t,
            } => Some(Record::RangeStart {
                ts,
                id,
                stream,
                msg: text(t),
                null: false,
            }),
            _ => None,
        }
    }

    fn emit(&mut self, mut ev: Event) {
        self.emit_in_place(&mut ev);
    }

    /// As [`Pipeline::emit`], for an event left where it is (`ev` is spent afterwards).
    fn emit_in_place(&mut self, ev: &mut Event) {
        if self.failed.is_some() {
            return;
        }
        if self.next_id == 0 && !self.dry {
            if let Err(e) = self.materialize() {
                eprintln!("memscope: pid {}: {e}", self.summary.pid);
                self.failed = Some(e);
                return;
            }
        }
        ev.id = self.next_id;
        self.next_id += 1;
        let k = EventKind::ALL
            .iter()
            .position(|k| *k == ev.kind)
            .unwrap_or(0);
        self.typed[k] += 1;
        if ev.kind == EventKind::Malloc && matches!(ev.device, memscope_core::event::Device::Npu(_))
        {
            if let Some(used) = ev.memory().and_then(|m| m.used) {
                let peak = self
                    .summary
                    .peaks
                    .entry(ev.event_type.as_str().to_owned())
                    .or_default();
                *peak = (*peak).max(used.max(0) as u64);
            }
        }
        self.sampled.observe(ev);
        if let Some(f) = &mut self.observer {
            f(ev);
        }
        if let Some(fast) = &mut self.host_fast {
            // Host blocks of other sources (HAL, ACL) share the leak/peak summaries.
            fast.observe(ev);
        }
        if let Err(e) = self.bus.push_in_place(ev) {
            self.log.error(&e.to_string());
            eprintln!("memscope: pid {}: {e}", self.summary.pid);
            self.failed = Some(e.to_string());
        }
    }
}
