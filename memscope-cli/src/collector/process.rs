//! One traced process (all images of one pid): merges its threads' records by time, types them
//! through the adapters' typers, assigns IDs and drives the process's bus.

use super::stream::{RawEvent, StreamReader};
use crate::logfile::LogFile;
use memscope_core::adapter::{TypeCtx, Typer};
use memscope_core::bus::{Bus, ReportSection};
use memscope_core::event::{Event, EventKind};
use memscope_core::wire::{Record, StackFrames};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::path::PathBuf;

struct Pending {
    key: (u64, usize, u64),
    ev: RawEvent,
}

impl PartialEq for Pending {
    fn eq(&self, o: &Self) -> bool {
        self.key == o.key
    }
}
impl Eq for Pending {}
impl PartialOrd for Pending {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Pending {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.key.cmp(&o.key)
    }
}

/// What a finished process leaves behind for the summary.
#[derive(Debug, Default)]
pub struct ProcessSummary {
    /// Process id.
    pub pid: u32,
    /// Its output directory.
    pub project_dir: PathBuf,
    /// Events written, per kind.
    pub counts: BTreeMap<EventKind, u64>,
    /// Events the probe dropped.
    pub dropped: u64,
    /// Report sections of the layers (dump files, analyses).
    pub report: Vec<ReportSection>,
    /// Executable of the first image.
    pub exe: String,
}

/// State of one traced process.
pub struct ProcessState {
    streams: Vec<StreamReader>,
    pending: BinaryHeap<Reverse<Pending>>,
    scratch: Vec<RawEvent>,
    typers: Vec<Box<dyn Typer>>,
    ctx: TypeCtx,
    texts: HashMap<(usize, u32), Box<[u8]>>,
    bus: Bus,
    next_id: u64,
    untyped: u64,
    log: LogFile,
    summary: ProcessSummary,
    failed: Option<String>,
    config_json: String,
    /// python_trace files and snapshots (issue 12).
    python: super::python::PythonState,
    /// Python stacks of the rows (issue 13).
    pystacks: super::pystacks::PyStacks,
    /// Rows of the package's torch hooks and watch files (issue 13).
    torch: super::torch::TorchState,
}

/// Everything a new [`ProcessState`] is built from.
pub struct ProcessSetup {
    /// Process id.
    pub pid: u32,
    /// Its output directory (created on its first event).
    pub project_dir: PathBuf,
    /// The stream of its first image.
    pub first: StreamReader,
    /// Executable of that image.
    pub exe: String,
    /// One typer per adapter.
    pub typers: Vec<Box<dyn Typer>>,
    /// Typing context.
    pub ctx: TypeCtx,
    /// Its bus (filters, analyses, sink).
    pub bus: Bus,
    /// Its log (created with the directory).
    pub log: LogFile,
    /// config.json text written into the directory.
    pub config_json: String,
    /// Python stack frames per row (`--call-stack python:N`; `None`: off).
    pub py_depth: Option<u32>,
}

impl ProcessState {
    /// A process with its first stream, typers, bus and log.
    pub fn new(p: ProcessSetup) -> ProcessState {
        let ProcessSetup {
            pid,
            project_dir,
            first,
            exe,
            typers,
            ctx,
            bus,
            log,
            config_json,
            py_depth,
        } = p;
        ProcessState {
            streams: vec![first],
            pending: BinaryHeap::new(),
            scratch: Vec::new(),
            typers,
            ctx,
            texts: HashMap::new(),
            bus,
            next_id: 0,
            untyped: 0,
            log,
            summary: ProcessSummary {
                pid,
                project_dir,
                exe,
                ..ProcessSummary::default()
            },
            failed: None,
            config_json,
            python: Default::default(),
            pystacks: super::pystacks::PyStacks::new(py_depth),
            torch: Default::default(),
        }
    }

    /// Number of process images (exec'd programs) seen for this pid.
    pub fn images(&self) -> usize {
        self.streams.len()
    }

    /// Adds another image (after exec) of the same pid.
    pub fn add_stream(&mut self, mut s: StreamReader) {
        if let Ok(Some(h)) = s.header() {
            self.summary.exe = h.exe.clone();
        }
        self.log
            .info(&format!("new process image: {}", s.path().display()));
        self.streams.push(s);
    }

    /// Reads new records of every image. Returns whether anything was read.
    pub fn poll(&mut self) -> bool {
        let mut progressed = false;
        for (i, s) in self.streams.iter_mut().enumerate() {
            match s.poll(&mut self.scratch) {
                Ok(p) => progressed |= p,
                Err(e) => {
                    if self.failed.is_none() {
                        self.log
                            .error(&format!("reading {}: {e}", s.path().display()));
                        self.failed = Some(e.to_string());
                    }
                }
            }
            for ev in self.scratch.drain(..) {
                match &ev.rec {
                    Record::StackDef { id, raw, .. } => {
                        self.ctx
                            .define_stack(i, *id, StackFrames::new(raw).collect());
                    }
                    Record::TextDef { id, text } => {
                        self.texts.insert((i, *id), text.clone());
                    }
                    rec @ Record::PyCodeDef { .. } => {
                        self.pystacks.define(i, rec);
                        self.python.define(i, rec);
                    }
                    rec @ Record::PyFrameDef { .. } => {
                        self.pystacks.define(i, rec);
                    }
                    rec => {
                        let ts = rec.ts().unwrap_or(0);
                        self.pending.push(Reverse(Pending {
                            key: (ts, i, ev.seq),
                            ev,
                        }));
                    }
                }
            }
        }
        progressed
    }

    /// Whether every image's writer is gone (process exited, was killed, or exec'd away with no
    /// new image yet).
    pub fn writers_gone(&self) -> bool {
        self.streams.iter().all(StreamReader::writer_gone)
    }

    /// Types and emits every pending record stamped at or before `watermark_ns`.
    pub fn release(&mut self, watermark_ns: u64) {
        let mut out = Vec::new();
        while let Some(Reverse(p)) = self.pending.peek() {
            if p.key.0 > watermark_ns {
                break;
            }
            let Reverse(p) = self.pending.pop().expect("peeked");
            let image = p.key.1;
            let (tid, rec) = (p.ev.tid, self.resolve_text(image, p.ev.rec));
            self.ctx.set_image(p.key.1);
            match &rec {
                Record::OwnerPush { label, .. } => {
                    self.ctx
                        .push_owner(tid, String::from_utf8_lossy(label).into_owned());
                    continue;
                }
                Record::OwnerPop { .. } => {
                    self.ctx.pop_owner(tid);
                    continue;
                }
                _ => {}
            }
            if self.pystacks.on_record(image, tid, &rec) {
                continue;
            }
            let project = &self.summary.project_dir;
            if self
                .python
                .on_record(&self.ctx, project, image, tid, &rec, &mut out)
            {
                for mut ev in out.drain(..) {
                    self.pystacks.attach(image, tid, &mut ev);
                    self.emit(ev);
                }
                continue;
            }
            let typed = self
                .torch
                .on_record(&mut self.ctx, project, tid, &rec, &mut out)
                || self
                    .typers
                    .iter_mut()
                    .any(|t| t.type_record(&mut self.ctx, tid, &rec, &mut out));
            if !typed {
                if let Record::OwnerTag { addr, .. } = rec {
                    self.ctx.warn(format!(
                        "describer(0x{addr:x}, owner=...): no live pool block starts there; ignored"
                    ));
                }
                self.untyped += 1;
            }
            for mut ev in out.drain(..) {
                self.pystacks.attach(image, tid, &mut ev);
                self.python.observe(&ev);
                self.emit(ev);
            }
        }
        for w in self.ctx.take_warnings() {
            self.log.warn(&w);
        }
        for e in self.python.take_errors() {
            self.log.error(&format!("python trace: {e}"));
        }
        for e in self.torch.take_errors() {
            self.log.error(&format!("memory watch: {e}"));
        }
    }

    /// Creates the process's directory, config.json and log on its first event.
    fn materialize(&mut self) -> Result<(), String> {
        let dir = &self.summary.project_dir;
        memscope_core::layout::create_dir_0750(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let cfg = dir.join("config.json");
        if let Ok((mut f, _)) = memscope_core::layout::create_new_0600(&cfg) {
            std::io::Write::write_all(&mut f, self.config_json.as_bytes())
                .map_err(|e| format!("cannot write {}: {e}", cfg.display()))?;
        }
        self.log.open();
        Ok(())
    }

    /// Replaces an interned-text reference of image `image` by the record with its text
    /// inline, so typers see one form. An unknown id (definition lost) gives `<text #id>`.
    fn resolve_text(&self, image: usize, rec: Record<Box<[u8]>>) -> Record<Box<[u8]>> {
        let text = |id: u32| -> Box<[u8]> {
            self.texts
                .get(&(image, id))
                .cloned()
                .unwrap_or_else(|| format!("<text #{id}>").into_bytes().into())
        };
        match rec {
            Record::MarkRef {
                ts,
                stream,
                text: id,
            } => Record::Mark {
                ts,
                stream,
                msg: text(id),
                null: false,
            },
            Record::RangeStartRef {
                ts,
                id,
                stream,
                text: t,
            } => Record::RangeStart {
                ts,
                id,
                stream,
                msg: text(t),
                null: false,
            },
            other => other,
        }
    }

    fn emit(&mut self, mut ev: Event) {
        if self.failed.is_some() {
            return;
        }
        if self.next_id == 0 {
            if let Err(e) = self.materialize() {
                eprintln!("memscope: pid {}: {e}", self.summary.pid);
                self.failed = Some(e);
                return;
            }
        }
        ev.id = self.next_id;
        self.next_id += 1;
        *self.summary.counts.entry(ev.kind).or_default() += 1;
        if let Err(e) = self.bus.push(ev) {
            self.log.error(&e.to_string());
            eprintln!("memscope: pid {}: {e}", self.summary.pid);
            self.failed = Some(e.to_string());
        }
    }

    /// Periodic flush of the sinks.
    pub fn flush(&mut self) {
        self.python.flush();
        self.torch.flush();
        if self.failed.is_none() {
            if let Err(e) = self.bus.flush() {
                self.log.error(&e.to_string());
                self.failed = Some(e.to_string());
            }
        }
    }

    /// Ends the process: emits everything pending, lets typers and layers finish, writes the
    /// report to the log and returns the summary.
    pub fn finish(mut self) -> ProcessSummary {
        self.poll();
        self.release(u64::MAX);
        let mut out = Vec::new();
        for t in &mut self.typers {
            t.finish(&mut self.ctx, &mut out);
        }
        for ev in out {
            self.emit(ev);
        }
        self.torch.flush();
        for line in self.python.finish(&self.ctx, &self.summary.project_dir) {
            self.log.info(&line);
        }
        for e in self.python.take_errors() {
            self.log.error(&format!("python trace: {e}"));
        }
        for s in &self.streams {
            self.summary.dropped += s.dropped().unwrap_or(0);
            let flags = s.flags().unwrap_or(0);
            if flags & memscope_core::wire::FLAG_HOST_UNAVAILABLE != 0 {
                self.log.warn("host allocator tracing was unavailable in this process (static binary or a replaced malloc)");
            }
            if flags & memscope_core::wire::FLAG_EXITED == 0 {
                self.log.info(&format!(
                    "{}: the process did not end through exit() (killed, _exit, exec or still running); everything it committed was read",
                    s.path().display()
                ));
            }
            if s.corrupt_chunks > 0 {
                self.log.warn(&format!(
                    "{}: {} corrupt chunk(s) skipped",
                    s.path().display(),
                    s.corrupt_chunks
                ));
            }
        }
        if self.untyped > 0 {
            self.log.debug(&format!(
                "{} records of unselected or unknown sources ignored",
                self.untyped
            ));
        }
        match self.bus.finish() {
            Ok(report) => self.summary.report = report,
            Err(e) => {
                self.log.error(&e.to_string());
                eprintln!("memscope: pid {}: {e}", self.summary.pid);
            }
        }
        if self.summary.dropped > 0 {
            self.log.warn(&format!(
                "the probe dropped {} event(s)",
                self.summary.dropped
            ));
        }
        for sec in &self.summary.report {
            self.log.info(&sec.title);
            for l in &sec.lines {
                self.log.info(&format!("  {l}"));
            }
        }
        self.summary
    }
}
