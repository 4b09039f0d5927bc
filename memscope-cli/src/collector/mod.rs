//! The collector: follows every traced process's stream in the spool directory while the job
//! runs, and turns each process into its output directory (dumps, log, config.json, reports).

pub mod layers;
pub mod plugin_typer;
pub mod process;
pub mod pystacks;
pub mod python;
pub mod stream;
pub mod torch;

use crate::logfile::LogFile;
use memscope_core::adapter::{descriptors, TypeCtx};
use memscope_core::bus::{Bus, BusError, Layer};
use memscope_core::config::{Format, RunConfig};
use memscope_core::event::Device;
use memscope_core::layout;
use memscope_core::sink::csv::{CsvFile, CsvSink};
use memscope_core::sink::sqlite::{DbFile, DbSink};
use process::{ProcessState, ProcessSummary};
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use stream::StreamReader;

/// How long records wait for slower threads before they are ordered and emitted, ns. A thread
/// that stamps an event and is descheduled for longer than this before committing it gets its
/// event emitted late (still with a unique ID).
pub const REORDER_WINDOW_NS: u64 = 150_000_000;

/// Builds the analysis layers of one process (the online analyses of `--analysis`), given the
/// run's configuration and the process's output directory.
pub type AnalysisFactory = Arc<dyn Fn(&RunConfig, &Path) -> Vec<Box<dyn Layer>> + Send + Sync>;

/// Follows a spool directory.
pub struct Collector {
    spool: PathBuf,
    cfg: Arc<RunConfig>,
    visible_devices: Vec<u32>,
    analyses: AnalysisFactory,
    seen: HashSet<PathBuf>,
    unready: Vec<StreamReader>,
    procs: BTreeMap<u32, (ProcessState, i64)>,
    done: Vec<ProcessSummary>,
}

fn monotonic_ns() -> u64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .map(|t| t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64)
        .unwrap_or(0)
}

fn pid_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => {
            let state = s
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next());
            !matches!(state, Some("Z") | Some("X") | None)
        }
        Err(_) => false,
    }
}

impl Collector {
    /// A collector over `spool` for a run configured by `cfg`.
    pub fn new(
        spool: PathBuf,
        cfg: Arc<RunConfig>,
        visible_devices: Vec<u32>,
        analyses: AnalysisFactory,
    ) -> Collector {
        Collector {
            spool,
            cfg,
            visible_devices,
            analyses,
            seen: HashSet::new(),
            unready: Vec::new(),
            procs: BTreeMap::new(),
            done: Vec::new(),
        }
    }

    /// Processes still being followed.
    pub fn live_processes(&self) -> usize {
        self.procs.len() + self.unready.len()
    }

    fn discover(&mut self) {
        let Ok(rd) = std::fs::read_dir(&self.spool) else {
            return;
        };
        for entry in rd.flatten() {
            let p = entry.path();
            if p.extension().and_then(|e| e.to_str()) != Some("stream") || self.seen.contains(&p) {
                continue;
            }
            self.seen.insert(p.clone());
            match StreamReader::open(&p) {
                Ok(r) => self.unready.push(r),
                Err(e) => eprintln!("memscope: cannot read {}: {e}", p.display()),
            }
        }
        let mut still = Vec::new();
        for mut r in std::mem::take(&mut self.unready) {
            match r.header() {
                Ok(Some(h)) => {
                    let h = h.clone();
                    match self.procs.get_mut(&h.pid) {
                        Some((p, _)) => p.add_stream(r),
                        None => match self.new_process(&h, r) {
                            Ok(p) => {
                                self.procs.insert(h.pid, (p, h.clock_offset));
                            }
                            Err(e) => eprintln!("memscope: pid {}: {e}", h.pid),
                        },
                    }
                }
                Ok(None) => {
                    // The probe creates the file, then locks it, then writes the header: a free
                    // lock alone does not mean the writer is gone. Only a dead process (pid from
                    // the file name `<pid>-<ns>.stream`) that never wrote a header has nothing.
                    let pid = r
                        .path()
                        .file_name()
                        .and_then(|n| n.to_str())
                        .and_then(|n| n.split('-').next())
                        .and_then(|p| p.parse::<u32>().ok());
                    if r.writer_gone() && !pid.is_some_and(pid_alive) {
                        continue;
                    }
                    still.push(r);
                }
                Err(e) => eprintln!("memscope: {e}"),
            }
        }
        self.unready = still;
    }

    fn new_process(
        &self,
        h: &stream::StreamHeader,
        r: StreamReader,
    ) -> Result<ProcessState, BusError> {
        let ts = layout::timestamp_name(h.start_ns);
        let project = layout::project_dir(&self.cfg.output_path, h.pid, &ts);
        let mut log = LogFile::new(&layout::log_path(&project, &ts), self.cfg.log_level);
        log.info(&format!(
            "tracing pid {} (parent {}): {}",
            h.pid, h.ppid, h.exe
        ));
        let mut layers: Vec<Box<dyn Layer>> = vec![
            Box::new(layers::CollectFilter::new(&self.cfg)),
            // ACCESS rows get the allocation_id of the block they touch (issue 10)
            Box::new(memscope_core::access_blocks::AccessBlocks::new()),
        ];
        layers.extend(memscope_adapter_host::leak_layer(&self.cfg)); // HOST leak summary (issue 4)
        layers.push(Box::new(memscope_adapter_hal::oom::OomLayer::new(
            &self.cfg,
        ))); // OOM snapshot + top-K rows (issue 5)
        layers.extend((self.analyses)(&self.cfg, &project));
        layers.push(Box::new(layers::WriteFilter::new(&self.cfg)));
        layers.push(sink(&self.cfg, &project, &ts));
        let mut typers: Vec<Box<dyn memscope_core::adapter::Typer>> =
            descriptors().into_iter().map(|d| (d.new_typer)()).collect();
        typers.push(Box::new(plugin_typer::PluginTyper::default()));
        let ctx = TypeCtx::new(h.pid, self.visible_devices.clone());
        Ok(ProcessState::new(process::ProcessSetup {
            pid: h.pid,
            project_dir: project,
            first: r,
            exe: h.exe.clone(),
            typers,
            ctx,
            bus: Bus::new(Some(h.pid), layers),
            log,
            config_json: memscope_core::config::msmemscope::to_text(&self.cfg),
            py_depth: self.cfg.call_stack.python,
        }))
    }

    /// One round: discover new streams, read every stream, emit what is old enough, finish
    /// processes that are gone. Returns whether anything was read.
    pub fn poll(&mut self) -> bool {
        self.discover();
        let mut progressed = false;
        let now = monotonic_ns();
        let mut finished = Vec::new();
        for (pid, (p, offset)) in self.procs.iter_mut() {
            let gone = p.writers_gone() && !pid_alive(*pid);
            progressed |= p.poll();
            let watermark = (now as i64 + *offset) as u64;
            p.release(watermark.saturating_sub(REORDER_WINDOW_NS));
            if gone {
                finished.push(*pid);
            }
        }
        if !finished.is_empty() {
            // A process that exec'd and died between this round's directory scan and its pid
            // check may have left a newer image's stream: scan again so it joins its process
            // instead of becoming a second one. The pid is dead, so every file it made exists.
            let before: Vec<usize> = finished.iter().map(|pid| self.images(*pid)).collect();
            self.discover();
            for (pid, n) in finished.into_iter().zip(before) {
                if self.images(pid) != n {
                    continue;
                }
                if let Some((p, _)) = self.procs.remove(&pid) {
                    self.done.push(p.finish());
                }
            }
        }
        progressed
    }

    fn images(&self, pid: u32) -> usize {
        self.procs.get(&pid).map_or(0, |(p, _)| p.images())
    }

    /// Flushes every process's sinks.
    pub fn flush(&mut self) {
        for (p, _) in self.procs.values_mut() {
            p.flush();
        }
    }

    /// Ends collection: finishes every process still followed (their writers may still be
    /// running, e.g. daemons left behind by the job) and returns all summaries in pid order.
    pub fn finish(mut self) -> Vec<ProcessSummary> {
        self.discover();
        for (_, (p, _)) in std::mem::take(&mut self.procs) {
            self.done.push(p.finish());
        }
        self.done.sort_by_key(|s| s.pid);
        self.done
    }
}

fn sink(cfg: &RunConfig, project: &Path, ts: &str) -> Box<dyn Layer> {
    let (project, ts) = (project.to_path_buf(), ts.to_owned());
    let dump_file = move |d: Device, ext: &str| -> Result<(std::fs::File, PathBuf), BusError> {
        let dir = d.dir_name().unwrap_or_else(|| "device_cpu".into());
        let path = layout::dump_path(&project, &dir, &ts, ext);
        let io = |e| BusError::Io {
            path: path.display().to_string(),
            source: e,
        };
        layout::create_dir_0750(path.parent().expect("dump dir")).map_err(io)?;
        layout::create_new_0600(&path).map_err(|e| BusError::Io {
            path: path.display().to_string(),
            source: e,
        })
    };
    match cfg.format {
        Format::Csv => Box::new(CsvSink::new(Box::new(move |d| {
            let (f, p) = dump_file(d, "csv")?;
            CsvFile::new(f, p)
        }))),
        Format::Db => Box::new(DbSink::new(Box::new(move |d| {
            let (_, p) = dump_file(d, "db")?;
            DbFile::open(p)
        }))),
    }
}
