//! The collector: follows every traced process's stream in the spool directory while the job
//! runs, and turns each process into its output directory (dumps, log, config.json, reports).

use crate::adapter::LayerSlot;
use crate::adapter::TypeCtx;
use crate::config::RunConfig;
use crate::logfile::LogFile;
use crate::pipeline::{CaptureOut, Pipeline, PipelineSetup};
use crate::process::{ProcessState, ProcessSummary, ROUND_BUDGET};
use crate::registry::Registry;
use crate::{api_config, layers, plugin_typer};
use memscope_core::bus::{Bus, Layer};
use memscope_dump::sink::SharedStats;
use memscope_dump::{layout, run_index};
use memscope_longjobs::live::LiveHandle;
use memscope_stream::capture::{CaptureInfo, CaptureWriter};
use memscope_stream::spool::{StreamFile, StreamHeader};
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

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
    registry: Registry,
    /// [`PipelineFactory::selected_typers_only`].
    selected_typers_only: bool,
    /// [`PipelineFactory::account_events`].
    account_events: bool,
    seen: HashSet<PathBuf>,
    unready: Vec<StreamFile>,
    procs: BTreeMap<u32, (ProcessState, i64)>,
    done: Vec<ProcessSummary>,
    skip: HashSet<u32>,
    /// How processes reaped by `memscope run` ended (its direct child and reparented ranks).
    ended: BTreeMap<u32, Ended>,
    /// `memscope.config()` of the job's Python processes (issue 27).
    api: api_config::ApiConfigs,
    /// Whether the last round left records old enough to emit unread (a process hit its
    /// budget): a barrier is not met until a round catches up.
    behind: bool,
    /// Frames for `memscope top`.
    live: crate::live_view::LiveViews,
}

fn monotonic_ns() -> u64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .map(|t| t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64)
        .unwrap_or(0)
}

/// How a process ended, as its parent's `wait` saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// `exit(code)`.
    Exited(i32),
    /// Killed by this signal number.
    Signaled(i32),
}

/// Whether process `pid` exists and is not a zombie.
pub fn pid_alive(pid: u32) -> bool {
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
    /// A collector over `spool` for a run configured by `cfg`, typing with the adapters of
    /// `registry`.
    pub fn new(
        spool: PathBuf,
        cfg: Arc<RunConfig>,
        visible_devices: Vec<u32>,
        analyses: AnalysisFactory,
        registry: Registry,
    ) -> Collector {
        Collector {
            spool,
            cfg,
            visible_devices,
            analyses,
            registry,
            selected_typers_only: false,
            account_events: false,
            seen: HashSet::new(),
            unready: Vec::new(),
            procs: BTreeMap::new(),
            done: Vec::new(),
            skip: HashSet::new(),
            ended: BTreeMap::new(),
            api: api_config::ApiConfigs::default(),
            behind: false,
            live: Default::default(),
        }
    }

    /// Types with the selected adapters' typers only: the caller launched the job with the
    /// configuration's selection (`memscope run`), so no other adapter's records can come.
    /// Without it every typer is asked (a collector of a job started elsewhere cannot know its
    /// probe's selection).
    pub fn type_selected_only(&mut self) {
        self.selected_typers_only = true;
    }

    /// Builds the events of account-only sources (HOST's heap, PYMEM's objects) even when their
    /// rows are not written, for online layers that read every event (the pytest plugin's
    /// per-test figures, `memscope collect --windows`).
    pub fn account_events(&mut self) {
        self.account_events = true;
    }

    /// Ignores the streams of these processes (`memscope recover`: outputs already complete).
    pub fn skip_pids(&mut self, pids: HashSet<u32>) {
        self.skip = pids;
    }

    /// Processes still being followed.
    pub fn live_processes(&self) -> usize {
        self.procs.len() + self.unready.len()
    }

    /// Whether process `pid` is followed and has passed `exit()` (it may be waiting at exit
    /// for this collector, [`crate::process::ProcessState::exited`]).
    pub fn exited(&self, pid: u32) -> bool {
        self.procs.get(&pid).is_some_and(|(p, _)| p.exited())
    }

    /// Pids of every traced process being followed (streams found in the spool).
    pub fn traced_pids(&self) -> Vec<u32> {
        let mut v: Vec<u32> = self.procs.keys().copied().collect();
        v.extend(self.unready.iter().filter_map(|r| {
            let name = r.path().file_name()?.to_str()?;
            memscope_stream::spool::pid_of_stream_name(name)
        }));
        v
    }

    /// Records how process `pid` ended (its parent, `memscope run`, reaped it).
    pub fn note_ended(&mut self, pid: u32, how: Ended) {
        self.ended.insert(pid, how);
    }

    /// How the processes `memscope run` reaped ended ([`Collector::note_ended`]).
    pub fn ended(&self) -> &BTreeMap<u32, Ended> {
        &self.ended
    }

    fn discover(&mut self) {
        let Ok(rd) = std::fs::read_dir(&self.spool) else {
            return;
        };
        let paths: Vec<PathBuf> = rd.flatten().map(|e| e.path()).collect();
        // Images of one pid in creation order (`<pid>-<start ns>.stream`).
        let mut new: Vec<(u32, u64, PathBuf)> = paths
            .iter()
            .filter(|p| {
                p.extension().and_then(|e| e.to_str()) == Some("stream")
                    && !self.seen.contains(p.as_path())
            })
            .cloned()
            .map(|p| {
                let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
                let pid = memscope_stream::spool::pid_of_stream_name(name).unwrap_or(0);
                let ns = name
                    .strip_suffix(".stream")
                    .and_then(|n| n.split('-').nth(1))
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(0);
                (pid, ns, p)
            })
            .collect();
        new.sort();
        for (pid, _, p) in new {
            if self.skip.contains(&pid) {
                self.seen.insert(p);
                continue;
            }
            self.seen.insert(p.clone());
            match StreamFile::open(&p) {
                Ok(mut r) => {
                    // --keep: what is read leaves the disk, so the spool stays bounded too
                    if self.cfg.keep.is_some() {
                        let _ = r.punch_consumed();
                    }
                    self.unready.push(r)
                }
                Err(e) => eprintln!("memscope: cannot read {}: {e}", p.display()),
            }
        }
        let mut still = Vec::new();
        for mut r in std::mem::take(&mut self.unready) {
            // Liveness first, then the header (issue 39): the probe creates the file, then
            // locks it, then writes the header, so a free lock alone does not mean the writer
            // is gone; and a short-lived process may write its header, record everything and
            // be reaped between a header read and a liveness check made after it — its whole
            // stream was dropped (1 rank in ~270 runs of 32 on a loaded machine). A writer seen
            // gone with its process dead (pid from the file name `<pid>-<ns>.stream`) before
            // the read cannot write after it: a header still missing then means nothing was
            // recorded.
            let dead = r.writer_gone()
                && !r
                    .path()
                    .file_name()
                    .and_then(|n| n.to_str())
                    .and_then(|n| n.split('-').next())
                    .and_then(|p| p.parse::<u32>().ok())
                    .is_some_and(pid_alive);
            match r.header() {
                Ok(Some(h)) => {
                    let h = h.clone();
                    match self.procs.get_mut(&h.pid) {
                        Some((p, _)) => p.add_stream(r),
                        None => {
                            let p = ProcessState::new(r, self.new_pipeline(&h));
                            self.procs.insert(h.pid, (p, h.clock_offset));
                        }
                    }
                }
                Ok(None) if dead => {}
                Ok(None) => still.push(r),
                Err(e) => eprintln!("memscope: {e}"),
            }
        }
        self.unready = still;
        self.api_configs(&paths);
    }

    /// Applies the `memscope.config()` requests found in the spool (issue 27): to the
    /// process's pipeline if it is followed already, else when its first stream appears.
    fn api_configs(&mut self, paths: &[PathBuf]) {
        for (pid, req) in self.api.new_requests(paths) {
            let answer = match api_config::config_for(&self.cfg, &req) {
                Err(e) => Err(e),
                Ok(cfg) => {
                    let cfg = Arc::new(cfg);
                    let done = match self.procs.get_mut(&pid) {
                        Some((p, _)) => match p.first_header() {
                            Some(h) => {
                                let factory = PipelineFactory {
                                    cfg: &cfg,
                                    visible_devices: &self.visible_devices,
                                    analyses: &self.analyses,
                                    registry: &self.registry,
                                    selected_typers_only: self.selected_typers_only,
                                    account_events: self.account_events,
                                };
                                let setup = factory.setup(&h, None);
                                let r = p.pipeline_mut().reconfigure(setup);
                                if r.is_ok() {
                                    p.pipeline_mut().log().info(&api_config::applied_line(&req));
                                }
                                r
                            }
                            None => Ok(()),
                        },
                        None => Ok(()),
                    };
                    if done.is_ok() {
                        self.api.set(pid, cfg);
                    }
                    done
                }
            };
            api_config::answer(&req, &answer);
        }
    }

    fn new_pipeline(&self, h: &StreamHeader) -> Pipeline {
        let setup = PipelineFactory {
            cfg: self.api.get(h.pid).unwrap_or(&self.cfg),
            visible_devices: &self.visible_devices,
            analyses: &self.analyses,
            registry: &self.registry,
            selected_typers_only: self.selected_typers_only,
            account_events: self.account_events,
        };
        setup.build(h, Some(&self.spool))
    }

    /// One round: discover new streams, read every stream, emit what is old enough, finish
    /// processes that are gone. Returns whether anything was read.
    pub fn poll(&mut self) -> bool {
        self.discover();
        let mut progressed = false;
        self.behind = false;
        let now = monotonic_ns();
        let mut finished = Vec::new();
        for (pid, (p, offset)) in self.procs.iter_mut() {
            let gone = p.writers_gone() && !pid_alive(*pid);
            progressed |= p.poll();
            let watermark = (now as i64 + *offset) as u64;
            let n = p.release(watermark.saturating_sub(REORDER_WINDOW_NS), ROUND_BUDGET);
            if let Some(req) = p.pipeline_mut().take_barrier() {
                p.pipeline_mut().flush_for_readers();
                crate::pipeline::answer_barrier(&self.spool, *pid, req);
            }
            // A full budget means more is waiting: come back at once.
            self.behind |= n == ROUND_BUDGET;
            progressed |= n == ROUND_BUDGET;
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
        if self.live.due() {
            let procs = self
                .procs
                .iter_mut()
                .map(|(pid, (p, _))| (*pid, p.pipeline_mut().live().clone()));
            self.live.tick(&self.spool, procs);
        }
        progressed
    }

    fn images(&self, pid: u32) -> usize {
        self.procs.get(&pid).map_or(0, |(p, _)| p.images())
    }

    /// Whether the last [`Collector::poll`] stopped at a process's budget with records old
    /// enough to emit still waiting; after a round that started one reorder window past a
    /// moment and is not behind, everything committed before that moment has been emitted.
    pub fn behind(&self) -> bool {
        self.behind
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

/// Builds the pipeline of one process as `memscope run` does (same layers, same sink), for
/// the live collector, `memscope recover` and `memscope export`.
pub struct PipelineFactory<'a> {
    /// The run's configuration.
    pub cfg: &'a RunConfig,
    /// `ASCEND_RT_VISIBLE_DEVICES` of the run.
    pub visible_devices: &'a [u32],
    /// The online analyses.
    pub analyses: &'a AnalysisFactory,
    /// The adapters to type with.
    pub registry: &'a Registry,
    /// Build typers for the selected adapters only ([`Collector::type_selected_only`]); else
    /// for every adapter of the registry.
    pub selected_typers_only: bool,
    /// Events of account-only sources are built even without their rows
    /// ([`Collector::account_events`]): no fast path.
    pub account_events: bool,
}

impl PipelineFactory<'_> {
    /// The pipeline of the process whose first image has header `h`; with `capture_dir`, its
    /// capture is written there while the process is followed (moved into the process's output
    /// directory at the end).
    pub fn build(&self, h: &StreamHeader, capture_dir: Option<&Path>) -> Pipeline {
        let mut p = Pipeline::new(self.setup(h, capture_dir));
        p.set_rank_env(&h.rank_env);
        p.set_ppid(h.ppid);
        p
    }

    /// What [`PipelineFactory::build`] builds its pipeline from.
    pub fn setup(&self, h: &StreamHeader, capture_dir: Option<&Path>) -> PipelineSetup {
        let cfg = self.cfg;
        let ts = layout::timestamp_name(h.start_ns);
        let project = layout::project_dir(&cfg.output_path, h.pid, &ts);
        let mut log = LogFile::new(&layout::log_path(&project, &ts), cfg.log_level);
        log.info(&format!(
            "tracing pid {} (parent {}): {}",
            h.pid, h.ppid, h.exe
        ));
        let collect = layers::CollectFilter::new(cfg);
        // The rows of a selected adapter with a fast path (HOST's) that are neither written nor
        // analysed take it (typed and accounted without events; issue 9: the bus would move
        // each malloc through every layer only to drop it), which also makes its leak and peak
        // summaries.
        let selection = cfg.selection();
        let fast = !cfg.host_rows
            && !cfg.aggregate
            && !self.account_events
            && collect.keeps_memory()
            && !cfg.analysis.decompose
            && !cfg.analysis.inefficient;
        let fast_paths: Vec<_> = selection
            .adapters
            .iter()
            .filter_map(|d| d.fast_path.filter(|_| fast).map(|f| (d.name, f)))
            .collect();
        let slot = |slot: LayerSlot| {
            self.registry
                .descriptors
                .iter()
                .filter(move |d| d.layer_slot == slot)
                .filter(|d| !fast_paths.iter().any(|(n, _)| *n == d.name))
                .flat_map(|d| (d.layers)(cfg))
                .collect::<Vec<_>>()
        };
        let mut layers: Vec<Box<dyn Layer>> = vec![
            Box::new(collect),
            // ACCESS rows get the allocation_id of the block they touch (issue 10)
            Box::new(crate::access_blocks::AccessBlocks::new()),
        ];
        // HOST leak summary (issue 4)
        layers.extend(slot(LayerSlot::Summary));
        // (account-only registered types, e.g. PYMEM's objects, are summed up by the
        // pipeline's accounts, `account_summary`, on both paths)
        // pool extents and the OOM verdict (issue 25): before the OOM layer rewrites the
        // snapshot, whose request size it needs
        layers.push(Box::new(
            memscope_analysis::fragmentation::FragmentationLayer::new(false),
        ));
        // OOM (issue 5)
        layers.extend(slot(LayerSlot::AfterExtents));
        layers.extend((self.analyses)(cfg, &project));
        // what is live now, for `memscope top` (issue 38)
        let rank_env = h.rank_env.iter().cloned().collect();
        let live = LiveHandle::new(h.pid, &h.exe, run_index::rank_identity(&rank_env).0);
        layers.push(Box::new(memscope_longjobs::live::LiveLayer::new(
            live.clone(),
        )));
        let sink_stats = if cfg.aggregate {
            // per-site totals instead of rows (issue 38): of what would be written
            // (`--events`, `--steps`), HOST's too; the aggregate ends the chain
            layers.push(Box::new(layers::WriteFilter::for_aggregate(cfg)));
            layers.push(Box::new(memscope_analysis::aggregate::AggregateLayer::new(
                project.join(format!("memscope_aggregate_{ts}.csv")),
            )));
            SharedStats::default()
        } else if let Some(bound) = cfg.keep {
            // the flight recorder in the sink's place: segments in the spool (issue 38)
            layers.push(Box::new(layers::WriteFilter::new(cfg)));
            let (sink, sink_stats) = crate::dump_sink::sink(cfg, &project, &ts);
            let seg_dir = capture_dir.map_or_else(
                || project.join(".memscope_window"),
                |d| d.join(format!("window-{}-{}", h.pid, h.start_ns)),
            );
            let (c, t) = (cfg.clone(), ts.clone());
            let windows: crate::flight_recorder::SinkFactory =
                Box::new(move |dir: &Path| crate::dump_sink::sink(&c, dir, &t).0);
            let mut recorder = crate::flight_recorder::FlightRecorder::new(
                bound,
                seg_dir,
                project.clone(),
                sink,
                windows,
            );
            recorder.watch_limits(cfg.keep_limits.clone());
            layers.push(Box::new(recorder));
            sink_stats
        } else {
            layers.push(Box::new(layers::WriteFilter::new(cfg)));
            let (sink, sink_stats) = crate::dump_sink::sink(cfg, &project, &ts);
            layers.push(sink);
            sink_stats
        };
        let mut typers = if self.selected_typers_only {
            self.registry.typers_of(&selection)
        } else {
            self.registry.typers()
        };
        typers.push((None, Box::new(plugin_typer::PluginTyper::default())));
        let typers = crate::typers::Typers::new(typers);
        // The process's own ASCEND_RT_VISIBLE_DEVICES (issue 18, B3), else the run's.
        let visible = h
            .visible_devices()
            .unwrap_or_else(|| self.visible_devices.to_vec());
        let ctx = TypeCtx::new(h.pid, visible.clone());
        // msMemScope's config.json key set (issue 12); `memscopeOptions` keeps memscope's own
        let config_json = crate::config::msmemscope::to_text(cfg);
        // no capture in aggregate mode nor with --keep: its size would grow with the events
        let capture = capture_dir
            .filter(|_| !cfg.aggregate && cfg.keep.is_none())
            .and_then(|dir| {
                let info = CaptureInfo {
                    pid: h.pid,
                    ppid: h.ppid,
                    exe: h.exe.clone(),
                    start_ns: h.start_ns,
                    memscope: env!("CARGO_PKG_VERSION").to_owned(),
                    config: serde_json::to_value(cfg.to_config_file()).unwrap_or_default(),
                    visible_devices: visible.clone(),
                    rank_env: h.rank_env.clone(),
                };
                let tmp = dir.join(format!(
                    "{}-{}.{}",
                    h.pid,
                    h.start_ns,
                    memscope_stream::capture::EXTENSION
                ));
                let made = layout::create_new_0600(&tmp)
                    .and_then(|(f, p)| CaptureWriter::new(f, p, &info));
                match made {
                    Ok(w) => Some(CaptureOut {
                        writer: Some(w),
                        final_path: project.join(format!(
                            "memscope_capture_{ts}.{}",
                            memscope_stream::capture::EXTENSION
                        )),
                    }),
                    Err(e) => {
                        eprintln!(
                            "memscope: pid {}: cannot create the capture {}: {e}",
                            h.pid,
                            tmp.display()
                        );
                        None
                    }
                }
            });
        PipelineSetup {
            pid: h.pid,
            project_dir: project,
            exe: h.exe.clone(),
            typers,
            ctx,
            bus: Bus::new(Some(h.pid), layers),
            sink_stats,
            log,
            config_json,
            capture,
            // a selected built-in account-only adapter's rows (HOST's) left out of the dumps
            host_rows_off: selection.adapters.iter().any(|d| {
                d.built_in() && matches!(d.volume, crate::adapter::Volume::Account { .. })
            }) && !cfg.host_rows
                && !cfg.aggregate,
            aggregate: cfg.aggregate,
            host_fast: fast_paths.first().map(|(_, f)| f(cfg)),
            account_rows: !fast,
            py_depth: cfg.call_stack.python,
            live,
        }
    }
}
