//! The flight recorder (`memscope run --keep last:5m|last:2GiB|last:N`, issue 38): the rows of
//! the last stretch of the job only, on disk within the bound for a job of any length, written
//! as an ordinary run when it matters.
//!
//! * The layer takes the sink's place. Rows go into segment files (CSV, the dump's own row
//!   format) in the spool; a new segment starts every eighth of the bound, and the oldest is
//!   deleted once the others hold the bound (time: the last `T`; rows: the last `N`; bytes:
//!   at most `B` on disk).
//! * To rebuild the live blocks at any point of the window, the layer keeps the MALLOC rows
//!   (with their latest owner) of the blocks live now and of those freed inside the window
//!   that were allocated in an earlier segment; memory follows the live blocks, not the
//!   events.
//! * A window is written through the run's own sink (CSV or SQLite per device, as a full
//!   run): first the blocks live when it starts, as history MALLOC rows (`shadow:true`, as a
//!   collection window writes them), then its rows. At the process's end it becomes the
//!   process's dumps; at an OOM (`OOM_TRIGGER`) and on SIGUSR2 to the collector
//!   ([`request_window`]) a copy goes to `<output>/window_<ts>_<why>/`. `memscope_window.json`
//!   beside the dumps says what the window holds.

use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use memscope_analysis::thresholds::Limit;
use memscope_core::bus::{BusCtx, BusError, Flow, Layer, ReportSection};
use memscope_core::event::{Device, Event, EventKind, EventType};
use memscope_core::owner::OwnerChain;
use memscope_core::roles::OwnerTag;
use memscope_dump::layout;
use memscope_dump::reader::{parse_row, Columns, TimeUnit};
use memscope_dump::sink::csv::{header_line, write_row};

use crate::keep::KeepBound;

/// Windows asked for (SIGUSR2 to the collector); each recorder writes one per new request.
static WINDOW_REQUESTS: AtomicU32 = AtomicU32::new(0);
/// When the latest was asked for (ns since the epoch): every process's window of one request
/// goes to the same `window_<ts>_signal/`.
static REQUESTED_AT: AtomicU64 = AtomicU64::new(0);

fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Asks every flight recorder of this collector for a window run (the collector's SIGUSR2).
pub fn request_window() {
    REQUESTED_AT.store(now_ns(), Ordering::Relaxed);
    WINDOW_REQUESTS.fetch_add(1, Ordering::Relaxed);
}

/// Makes the sink a window is written through, for a process directory.
pub type SinkFactory = Box<dyn Fn(&Path) -> Box<dyn Layer> + Send>;

/// `memscope_window.json`: what a window holds.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct WindowFacts {
    /// The bound (`last:5m`).
    pub keep: String,
    /// Why it was written: `exit`, `oom`, `signal`.
    pub reason: String,
    /// Timestamp of its first and last row (ns).
    pub start_ns: u64,
    /// See `start_ns`.
    pub end_ns: u64,
    /// Its rows (history rows not counted).
    pub rows: u64,
    /// History MALLOC rows: blocks live when it starts.
    pub history_rows: u64,
    /// Rows of the process before the window (not written).
    pub earlier_rows: u64,
}

/// The name of [`WindowFacts`]' file in a process directory.
pub use memscope_dump::layout::WINDOW_FILE;

/// A segment file, counting the bytes that reach it.
struct Counted {
    f: BufWriter<File>,
    n: u64,
}

impl Write for Counted {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        let n = self.f.write(b)?;
        self.n += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.f.flush()
    }
}

struct Segment {
    k: u64,
    path: PathBuf,
    w: Option<Counted>,
    rows: u64,
    bytes: u64,
    first_ts: u64,
    last_ts: u64,
}

/// A MALLOC row kept for the history of a later window, and the segment it was written in.
struct Held {
    ev: Event,
    k: u64,
}

/// The flight recorder of one process.
pub struct FlightRecorder {
    bound: KeepBound,
    seg_dir: PathBuf,
    segs: VecDeque<Segment>,
    next_k: u64,
    live: HashMap<(EventType, u64), Held>,
    /// Blocks freed in segment `.1` that were allocated in an earlier one.
    spanning: Vec<(Held, u64)>,
    earlier_rows: u64,
    /// Bytes of the segments on disk.
    bytes: u64,
    sink: Option<Box<dyn Layer>>,
    project: PathBuf,
    output: PathBuf,
    windows: SinkFactory,
    pending: Option<&'static str>,
    requests_seen: u32,
    ooms: u32,
    pid: Option<u32>,
    /// `--fail-on` limits on live bytes, each with whether it was crossed already.
    limits: Vec<(Limit, bool)>,
    /// Live bytes per allocator, and the limits that look at it.
    totals: HashMap<(Device, EventType), (u64, Vec<usize>)>,
    scratch: String,
    line: Vec<u8>,
    failed: Option<String>,
}

impl FlightRecorder {
    /// A recorder of a process whose directory is `project` (in the run's output path);
    /// segments go to `seg_dir`; `sink` writes the process's dumps; `windows` makes the sinks
    /// of window runs.
    pub fn new(
        bound: KeepBound,
        seg_dir: PathBuf,
        project: PathBuf,
        sink: Box<dyn Layer>,
        windows: SinkFactory,
    ) -> FlightRecorder {
        let output = project.parent().map(Path::to_path_buf).unwrap_or_default();
        FlightRecorder {
            bound,
            seg_dir,
            segs: VecDeque::new(),
            next_k: 0,
            live: HashMap::new(),
            spanning: Vec::new(),
            earlier_rows: 0,
            bytes: 0,
            sink: Some(sink),
            project,
            output,
            windows,
            pending: None,
            requests_seen: WINDOW_REQUESTS.load(Ordering::Relaxed),
            ooms: 0,
            pid: None,
            limits: Vec::new(),
            totals: HashMap::new(),
            scratch: String::with_capacity(256),
            line: Vec::with_capacity(512),
            failed: None,
        }
    }

    fn io(&self, path: &Path, e: impl std::fmt::Display) -> BusError {
        BusError::Io {
            path: path.display().to_string(),
            source: std::io::Error::other(e.to_string()),
        }
    }

    /// Watches `--fail-on` limits on live bytes (`peak`, `live`): the first crossing of each
    /// writes a window run, as an OOM does.
    pub fn watch_limits(&mut self, limits: Vec<Limit>) {
        self.limits = limits.into_iter().map(|l| (l, false)).collect();
    }

    /// Adds `delta` bytes to allocator `key`'s live bytes; a limit crossed for the first time
    /// asks for a window.
    fn count(&mut self, key: (Device, EventType), delta: i64) {
        if self.limits.is_empty() {
            return;
        }
        let limits = &self.limits;
        let (live, watching) = self.totals.entry(key).or_insert_with(|| {
            let (device, pool) = (key.0.to_text(), key.1.as_str());
            let v = (0..limits.len())
                .filter(|i| limits[*i].0.scope.covers_names(&device, pool))
                .collect();
            (0, v)
        });
        *live = live.saturating_add_signed(delta);
        for i in watching.iter().copied() {
            let (l, crossed) = &mut self.limits[i];
            if !*crossed && *live > l.max {
                *crossed = true;
                self.pending = Some("failon");
            }
        }
    }

    /// The largest segment: an eighth of the bound (64 MiB at most for time and row bounds).
    fn segment_full(&self, s: &Segment, ts: u64) -> bool {
        match self.bound {
            KeepBound::Events(n) => s.rows >= (n / 8).max(1),
            KeepBound::Bytes(b) => s.bytes >= (rows_budget(b) / 8).max(1),
            KeepBound::Time(t) => {
                ts.saturating_sub(s.first_ts) >= (t / 8).max(1) || s.bytes >= 64 << 20
            }
        }
    }

    /// Deletes the oldest segments the others make unneeded.
    fn enforce(&mut self, ts: u64) {
        while self.segs.len() > 1 {
            let rows: u64 = self.segs.iter().map(|s| s.rows).sum();
            let first = &self.segs[0];
            let drop = match self.bound {
                KeepBound::Events(n) => rows - first.rows >= n,
                KeepBound::Bytes(b) => self.bytes > rows_budget(b),
                KeepBound::Time(t) => ts.saturating_sub(first.last_ts) > t,
            };
            if !drop {
                break;
            }
            let s = self.segs.pop_front().expect("segment");
            let _ = std::fs::remove_file(&s.path);
            self.bytes -= s.bytes;
            self.earlier_rows += s.rows;
            self.spanning.retain(|(_, freed)| *freed > s.k);
        }
    }

    /// The segment the next row goes to, starting one if needed.
    fn segment(&mut self, ts: u64) -> Result<&mut Segment, BusError> {
        let full = self
            .segs
            .back()
            .is_none_or(|s| s.w.is_none() || self.segment_full(s, ts));
        if full {
            if let Some(s) = self.segs.back_mut() {
                if let Some(mut w) = s.w.take() {
                    w.flush().map_err(|e| BusError::Io {
                        path: s.path.display().to_string(),
                        source: e,
                    })?;
                    // what the buffer still held counts too
                    let n = w.n;
                    self.bytes += n - s.bytes;
                    s.bytes = n;
                }
            }
            self.enforce(ts);
            layout::create_dir_0750(&self.seg_dir).map_err(|e| self.io(&self.seg_dir, e))?;
            let path = self.seg_dir.join(format!("segment-{:08}.csv", self.next_k));
            let (f, path) = layout::create_new_0600(&path).map_err(|e| self.io(&path, e))?;
            let mut w = Counted {
                f: BufWriter::with_capacity(1 << 16, f),
                n: 0,
            };
            w.write_all(header_line().as_bytes())
                .map_err(|e| self.io(&path, e))?;
            self.segs.push_back(Segment {
                k: self.next_k,
                path,
                w: Some(w),
                rows: 0,
                bytes: 0,
                first_ts: ts,
                last_ts: ts,
            });
            self.next_k += 1;
        }
        Ok(self.segs.back_mut().expect("segment"))
    }

    /// Keeps what a later window's history needs.
    fn track(&mut self, ev: &Event, k: u64) {
        if let Some(tag) = OwnerTag::from_event(ev) {
            if let Some(m) = self
                .live
                .get_mut(&(tag.pool, tag.addr))
                .and_then(|h| h.ev.memory_mut())
            {
                m.owner = Some(OwnerChain::parse(&tag.owner));
            }
            return;
        }
        if ev.event_type == EventType::OomTrigger {
            self.pending = Some("oom");
        }
        let Some(m) = ev.memory() else { return };
        let key = (ev.event_type, ev.ptr.unwrap_or(m.addr));
        match ev.kind {
            EventKind::Malloc => {
                if let Some(old) = self.live.insert(key, Held { ev: ev.clone(), k }) {
                    let size = old.ev.memory().map_or(0, |m| m.size);
                    self.count((old.ev.device, old.ev.event_type), -(size as i64));
                }
                self.count((ev.device, ev.event_type), m.size as i64);
            }
            EventKind::Free => {
                if let Some(h) = self.live.remove(&key) {
                    let size = h.ev.memory().map_or(0, |m| m.size);
                    self.count((h.ev.device, h.ev.event_type), -(size as i64));
                    if h.k < k {
                        self.spanning.push((h, k));
                    }
                }
            }
            _ => {}
        }
    }

    fn record(&mut self, ev: &Event) -> Result<(), BusError> {
        let ts = ev.ts_ns;
        let mut scratch = std::mem::take(&mut self.scratch);
        let mut line = std::mem::take(&mut self.line);
        let seg = self.segment(ts)?;
        let k = seg.k;
        let w = seg.w.as_mut().expect("open segment");
        line.clear();
        write_row(&mut line, ev, &mut scratch);
        w.write_all(&line).map_err(|e| BusError::Io {
            path: seg.path.display().to_string(),
            source: e,
        })?;
        let n = w.n - seg.bytes;
        seg.rows += 1;
        seg.bytes += n;
        seg.last_ts = seg.last_ts.max(ts);
        self.scratch = scratch;
        self.line = line;
        self.bytes += n;
        if matches!(self.bound, KeepBound::Bytes(b) if self.bytes > rows_budget(b)) {
            self.enforce(ts);
        }
        self.track(ev, k);
        Ok(())
    }

    /// Writes the window through `sink`: the history rows, then every kept row.
    fn write_window(
        &mut self,
        sink: &mut dyn Layer,
        ctx: &BusCtx,
        reason: &str,
    ) -> Result<WindowFacts, BusError> {
        for s in &mut self.segs {
            if let Some(w) = &mut s.w {
                w.flush().map_err(|e| BusError::Io {
                    path: s.path.display().to_string(),
                    source: e,
                })?;
            }
        }
        let first_k = self.segs.front().map_or(self.next_k, |s| s.k);
        let mut history: Vec<Event> = self
            .live
            .values()
            .chain(self.spanning.iter().map(|(h, _)| h))
            .filter(|h| h.k < first_k)
            .map(|h| {
                let mut ev = h.ev.clone();
                if let Some(m) = ev.memory_mut() {
                    m.shadow = true;
                }
                ev
            })
            .collect();
        history.sort_by_key(|e| e.id);
        let mut out = Vec::new();
        let mut facts = WindowFacts {
            keep: self.bound.to_text(),
            reason: reason.to_owned(),
            history_rows: history.len() as u64,
            earlier_rows: self.earlier_rows,
            ..WindowFacts::default()
        };
        for ev in history {
            sink.feed(ev, ctx, &mut out)?;
        }
        let cols = Columns::standard();
        for s in &self.segs {
            let f = File::open(&s.path).map_err(|e| self.io(&s.path, e))?;
            let mut r = csv::Reader::from_reader(std::io::BufReader::with_capacity(1 << 16, f));
            let mut rec = csv::StringRecord::new();
            while r.read_record(&mut rec).map_err(|e| self.io(&s.path, e))? {
                let cells: Vec<&str> = rec.iter().collect();
                let ev = parse_row(&cols, &cells, TimeUnit::Nanos, false)
                    .map_err(|e| self.io(&s.path, e))?;
                if facts.rows == 0 {
                    facts.start_ns = ev.ts_ns;
                }
                facts.end_ns = facts.end_ns.max(ev.ts_ns);
                facts.rows += 1;
                sink.feed(ev, ctx, &mut out)?;
            }
        }
        Ok(facts)
    }

    /// A window run at `<output>/window_<ts>_<why>/`, its process directory and facts.
    fn window_run(&mut self, ctx: &BusCtx, reason: &'static str) -> Result<PathBuf, BusError> {
        // one folder per request, shared by every process of the run (the request's number);
        // an OOM's is the process's own
        let (at, tag) = match reason {
            "signal" => (
                REQUESTED_AT.load(Ordering::Relaxed),
                format!("signal{}", self.requests_seen),
            ),
            _ => {
                self.ooms += 1;
                let pid = ctx.pid.unwrap_or(0);
                (now_ns(), format!("{reason}{}_pid{pid}", self.ooms))
            }
        };
        let root = self
            .output
            .join(format!("window_{}_{tag}", layout::timestamp_name(at)));
        let name = self
            .project
            .file_name()
            .map(|n| n.to_owned())
            .unwrap_or_default();
        let dir = root.join(name);
        layout::create_dir_0750(&dir).map_err(|e| self.io(&dir, e))?;
        let mut sink = (self.windows)(&dir);
        let facts = self.write_window(sink.as_mut(), ctx, reason)?;
        sink.finish(ctx, &mut Vec::new(), &mut Vec::new())?;
        write_facts(&dir, &facts).map_err(|e| self.io(&dir.join(WINDOW_FILE), e))?;
        Ok(root)
    }
}

/// The rows' share of a byte bound: the rest (an eighth, from 1 to 8 MiB, at most half) is
/// for what else the run keeps on disk meanwhile — the spool's unread chunks (256 KiB per
/// writing thread), the log, config.json — so the whole stays within the bound.
fn rows_budget(bound: u64) -> u64 {
    let reserve = (bound / 8).clamp(1 << 20, 8 << 20).min(bound / 2);
    bound - reserve
}

/// Writes `memscope_window.json` into `dir` (a new file).
fn write_facts(dir: &Path, facts: &WindowFacts) -> std::io::Result<()> {
    let (mut f, _) = layout::create_new_0600(&dir.join(WINDOW_FILE))?;
    let text = serde_json::to_vec_pretty(facts).map_err(std::io::Error::other)?;
    f.write_all(&text)
}

/// The facts of the window a process directory holds, if it holds one.
pub fn window_of(dir: &Path) -> Option<WindowFacts> {
    let text = std::fs::read(dir.join(WINDOW_FILE)).ok()?;
    serde_json::from_slice(&text).ok()
}

impl Layer for FlightRecorder {
    fn name(&self) -> &'static str {
        "flight recorder"
    }

    fn on_event(
        &mut self,
        ev: &mut Event,
        ctx: &BusCtx,
        _out: &mut Vec<Event>,
    ) -> Result<Flow, BusError> {
        self.pid = ctx.pid;
        if self.failed.is_none() {
            if let Err(e) = self.record(ev) {
                self.failed = Some(e.to_string());
                return Err(e);
            }
        }
        // the end of the chain: the recorder writes in the sink's place
        Ok(Flow::Stop)
    }

    fn flush(&mut self) -> Result<(), BusError> {
        let asked = WINDOW_REQUESTS.load(Ordering::Relaxed);
        let reason = if asked != self.requests_seen {
            self.requests_seen = asked;
            Some("signal")
        } else {
            self.pending.take()
        };
        // a process with nothing kept (a launcher, a shell) writes no window
        let empty = self.segs.iter().all(|s| s.rows == 0) && self.live.is_empty();
        if let Some(reason) = reason.filter(|_| !empty) {
            let ctx = BusCtx {
                pid: self.pid,
                ..BusCtx::default()
            };
            match self.window_run(&ctx, reason) {
                Ok(root) => eprintln!("memscope: window ({reason}) written: {}", root.display()),
                Err(e) => eprintln!("memscope: window ({reason}) not written: {e}"),
            }
        }
        for s in &mut self.segs {
            if let Some(w) = &mut s.w {
                let _ = w.flush();
            }
        }
        Ok(())
    }

    fn finish(
        &mut self,
        ctx: &BusCtx,
        out: &mut Vec<Event>,
        report: &mut Vec<ReportSection>,
    ) -> Result<(), BusError> {
        let Some(mut sink) = self.sink.take() else {
            return Ok(());
        };
        // an OOM just before the end (the usual case: the job dies of it) gets its window too
        if let Some(reason) = self.pending.take() {
            match self.window_run(ctx, reason) {
                Ok(root) => eprintln!("memscope: window ({reason}) written: {}", root.display()),
                Err(e) => eprintln!("memscope: window ({reason}) not written: {e}"),
            }
        }
        let facts = self.write_window(sink.as_mut(), ctx, "exit");
        let _ = std::fs::remove_dir_all(&self.seg_dir);
        let facts = facts?;
        sink.finish(ctx, out, report)?;
        // a job shorter than the bound: its dumps are the whole run, not a window
        if facts.earlier_rows > 0 {
            layout::create_dir_0750(&self.project).map_err(|e| self.io(&self.project, e))?;
            write_facts(&self.project, &facts)
                .map_err(|e| self.io(&self.project.join(WINDOW_FILE), e))?;
            let sfx = ctx.pid.map_or(String::new(), |p| format!(" (pid {p})"));
            report.push(ReportSection::new(
                format!("Window{sfx}"),
                vec![format!(
                    "--keep {}: the last {} row(s) kept, {} earlier row(s) not; {} block(s) live before the window written as history rows",
                    facts.keep, facts.rows, facts.earlier_rows, facts.history_rows
                )],
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "flight_recorder_tests.rs"]
mod tests;
