//! What the Python package needs from the CLI (issue 12):
//!
//! * `memscope collect` (hidden): the collector of a plain `python train.py` whose first
//!   `memscope.start()` started it. It follows a spool directory the package created and set
//!   as `MEMSCOPE_SPOOL` for its own process, exactly as `memscope run` follows its job's: it
//!   holds `<spool>/collector.lock` (`flock(LOCK_EX)`, mode 0600, TEAM contract 1) for its whole
//!   life, prints `ready` on stdout once it does, ends when the Python process (`--pid`) is gone
//!   and its streams are read, prints the run summary (stderr), appends the run to the output
//!   folder's run index (`memscope_run.json`, as `memscope run` does) and removes the spool. A flush
//!   request of the job (`stop()`, its `atexit`: a `Barrier` record in its stream) is answered
//!   once everything before it is written, so the dump is on disk when `python train.py`
//!   returns (the summary follows when the process is gone).
//! * `memscope config check`: validates option values exactly as `memscope run` parses them and
//!   prints the configuration as memscope's config.json (the package's `config()` uses it).
//! * `memscope probe-path` (hidden): where the probe library is (`find_probe`).
//! * The Python side of a job (`crate::python_job`) is shared with `memscope run`.

use memscope_collect::config::{RawOptions, RunConfig};
use memscope_collect::Collector;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Options of `memscope collect`.
#[derive(clap::Args, Debug)]
pub struct CollectArgs {
    /// Spool directory the probe of the traced process writes its streams into.
    #[arg(long)]
    spool: PathBuf,
    /// The traced process: collection ends when it is gone.
    #[arg(long)]
    pid: u32,
    /// config.json (memscope's keys) of the collection.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Do not print the summary.
    #[arg(short, long)]
    quiet: bool,
    /// Append one JSON line per collection window (START_TRACE … STOP_TRACE) to FILE: per
    /// device and allocator, the peak and leaks of the memory allocated in it (the pytest
    /// plugin's per-test figures, issue 24).
    #[arg(long, value_name = "FILE")]
    windows: Option<PathBuf>,
}

/// Option values of `memscope config check` (the keys of the Python `config()`).
#[derive(clap::Args, Debug, Default)]
pub struct CheckArgs {
    /// As `memscope run --events`.
    #[arg(long)]
    events: Option<String>,
    /// As `memscope run --level`.
    #[arg(long)]
    level: Option<String>,
    /// As `memscope run --call-stack`.
    #[arg(long = "call-stack")]
    call_stack: Option<String>,
    /// As `memscope run --analysis`.
    #[arg(long)]
    analysis: Option<String>,
    /// As `memscope run --device`.
    #[arg(long)]
    device: Option<String>,
    /// As `memscope run --output-path`.
    #[arg(long = "output-path")]
    output_path: Option<String>,
    /// As `memscope run --format`.
    #[arg(long)]
    format: Option<String>,
    /// As `memscope run --collect-mode`.
    #[arg(long = "collect-mode")]
    collect_mode: Option<String>,
    /// As `memscope run --adapters`.
    #[arg(long)]
    adapters: Option<String>,
    /// As `memscope run --watch`.
    #[arg(long)]
    watch: Option<String>,
    /// As `memscope run --sample`.
    #[arg(long)]
    sample: Option<String>,
    /// As `memscope run --steps`.
    #[arg(long)]
    steps: Option<String>,
    /// As `memscope run --keep`.
    #[arg(long)]
    keep: Option<String>,
    /// As `memscope run --aggregate`.
    #[arg(long)]
    aggregate: bool,
    /// As `memscope run --host-rows`.
    #[arg(long = "host-rows")]
    host_rows: bool,
}

/// Runs `memscope config check`: prints the validated configuration (memscope's config.json
/// keys) on stdout.
///
/// # Errors
/// The first invalid value, worded like `memscope run`'s (`--events: unknown event type …`).
pub fn check(a: &CheckArgs) -> anyhow::Result<()> {
    let raw = RawOptions {
        events: a.events.clone(),
        level: a.level.clone(),
        call_stack: a.call_stack.clone(),
        analysis: a.analysis.clone(),
        device: a.device.clone(),
        output_path: a.output_path.clone(),
        format: a.format.clone(),
        collect_mode: a.collect_mode.clone(),
        adapters: a.adapters.clone(),
        watch: a.watch.clone(),
        sample: a.sample.clone(),
        steps: a.steps.clone(),
        keep: a.keep.clone(),
        aggregate: a.aggregate.then_some(true),
        host_rows: a.host_rows.then_some(true),
        ..RawOptions::default()
    };
    let cwd = std::env::current_dir()?;
    let cfg = raw.validate(&cwd).map_err(|e| anyhow::anyhow!(e.0))?;
    println!("{}", serde_json::to_string(&cfg.to_config_file())?);
    Ok(())
}

fn pid_alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .and_then(|(_, r)| r.split_whitespace().next().map(str::to_owned))
        })
        .is_some_and(|st| st != "Z" && st != "X")
}

fn fail(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("memscope collect: {msg}");
    ExitCode::from(2)
}

/// Runs `memscope collect`.
pub fn collect(a: &CollectArgs) -> ExitCode {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let raw = match &a.config {
        Some(p) => match RawOptions::from_file(p) {
            Ok(r) => r,
            Err(e) => return fail(e.0),
        },
        None => RawOptions::default(),
    };
    let cfg: RunConfig = match raw.validate(&cwd) {
        Ok(c) => c,
        Err(e) => return fail(e.0),
    };
    if !a.spool.is_dir() {
        return fail(format!("spool {}: not a directory", a.spool.display()));
    }
    if let Err(e) = memscope_dump::layout::create_dir_0750(&cfg.output_path) {
        return fail(format!("--output-path {}: {e}", cfg.output_path.display()));
    }
    // Once its collector lock is ours, the spool is ours: removed on every way out, a panic's
    // unwinding included, and the lock held until then, as `memscope run` holds its own (TEAM
    // contract 1); with the run information `memscope recover <spool>` needs if this process
    // is killed.
    let lock = match crate::run::hold_collector_lock(&a.spool) {
        Ok(f) => f,
        Err(e) => return fail(e),
    };
    let mut spool_guard = crate::run::SpoolGuard::new(a.spool.clone(), "memscope collect");
    spool_guard.hold(lock);
    let devices: Vec<u32> = std::env::var("ASCEND_RT_VISIBLE_DEVICES")
        .map(|v| v.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .unwrap_or_default();
    // the job's command line for the run index (its process is alive: it started us)
    let command = job_command(a.pid);
    let start_ns = crate::run_index::now_ns();
    if let Err(e) = crate::session::write_run_info(&a.spool, &cfg, &devices, &command) {
        return fail(e);
    }
    // The package waits for this line before it lets the job go on.
    println!("ready");
    let _ = std::io::stdout().flush();
    let cfg_used = cfg.clone();
    let analyses = match a.windows.clone() {
        Some(path) => with_windows(crate::session::analysis_factory(), path),
        None => crate::session::analysis_factory(),
    };
    let mut collector = Collector::new(
        a.spool.clone(),
        Arc::new(cfg),
        devices,
        analyses,
        crate::builtin::REGISTRY,
    );
    if a.windows.is_some() {
        // the per-window figures read every event, Python objects' and HOST blocks' too
        collector.account_events();
    }
    // SIGUSR2: a window of the flight recorder (--keep), as under `memscope run`
    let usr2 = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let _ = signal_hook::flag::register(signal_hook::consts::SIGUSR2, usr2.clone());
    let mut last_flush = Instant::now();
    let mut gone_at: Option<Instant> = None;
    let mut rss = crate::own_memory::RssWatch::new();
    loop {
        // the job's flush requests (its stop(), atexit, an analyzer) travel in its stream and
        // are answered inside poll() (`memscope_collect::Collector::poll`)
        let progressed = collector.poll();
        rss.sample(&collector.traced_pids());
        if usr2.swap(false, std::sync::atomic::Ordering::Relaxed) {
            memscope_collect::flight_recorder::request_window();
        }
        // The job passed exit(): its probe waits there (bounded) for this collector, so the
        // summary with its exit status comes before the process is gone (issue 23).
        let exited = collector.exited(a.pid) && pid_alive(a.pid);
        if gone_at.is_none() && (exited || !pid_alive(a.pid)) {
            rss.sample_now(&[a.pid]);
            gone_at = Some(Instant::now());
        }
        if let Some(t) = gone_at {
            let others = collector.live_processes() - usize::from(exited);
            if others == 0 || t.elapsed() > Duration::from_secs(5) {
                if exited {
                    spool_guard.ignore_writer(a.pid);
                }
                break;
            }
        }
        if last_flush.elapsed() > Duration::from_millis(500) {
            collector.flush();
            last_flush = Instant::now();
        }
        if !progressed {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    let mut summaries = collector.finish();
    crate::python_job::finish_python(&cfg_used, &summaries);
    let left_out = crate::helpers::set_aside(&mut summaries);
    // the job's own exit status, as its probe recorded it at exit()
    let code = summaries
        .iter()
        .find(|s| s.pid == a.pid)
        .and_then(|s| s.exit_status);
    // the run index, as `memscope run` writes it: a folder that holds several plain-python
    // runs (the default memscopeDumpResults/) keeps them apart (`--run N`), never as ranks
    let index_written = crate::run_index::write(
        &cfg_used.output_path,
        crate::run_index::entries(&cfg_used.output_path, &summaries, &Default::default()),
        &crate::run_index::RunFacts {
            command: &command,
            exit_code: code.unwrap_or(-1),
            interrupted_by: None,
            recovered: false,
            start_ns,
            memscope_pid: std::process::id(),
        },
    );
    if !a.quiet {
        crate::summary::print(&summaries, code, &left_out, &cfg_used.output_path);
        if let Some(l) = crate::own_memory::hint(
            &summaries,
            &rss,
            &cfg_used,
            &command,
            crate::own_memory::Launch::Python,
        ) {
            eprintln!("{l}");
        }
    }
    // outputs cut short (a full disk): the spool stays for `memscope recover`
    let code = crate::spool_guard::keep_after_write_failures(
        &mut spool_guard,
        &summaries,
        &cfg_used.output_path,
        0,
    );
    let code = crate::run_index::fail_if_unwritten(index_written, code);
    drop(spool_guard);
    ExitCode::from(code as u8)
}

/// The command line of process `pid` (`/proc/<pid>/cmdline`), empty when it cannot be read.
fn job_command(pid: u32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            b.split(|c| *c == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// `base`'s layers plus the per-window figures written to `path` (`--windows`).
fn with_windows(
    base: memscope_collect::AnalysisFactory,
    path: PathBuf,
) -> memscope_collect::AnalysisFactory {
    Arc::new(move |cfg: &RunConfig, project: &Path| {
        let mut v = base(cfg, project);
        // first: the inefficient layer holds events back, and a window's STOP_TRACE must be
        // handled as soon as the barrier makes the collector write everything
        v.insert(
            0,
            Box::new(memscope_analysis::windows::WindowsLayer::new(path.clone())),
        );
        v
    })
}
