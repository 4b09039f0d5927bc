//! `memscope run`: validate the configuration, launch the job with the probe preloaded, collect
//! its streams live, and print the summary. Exit code: the job's own (128+N if killed by signal
//! N); 2 for bad input, with nothing launched.

use memscope_collect::config::RunConfig;
use memscope_collect::{AnalysisFactory, Collector};
use memscope_dump::layout;
use memscope_dump::safe_fs::{Dir, DIR_MODE};
use memscope_wire::probe_env as env;
use signal_hook::iterator::exfiltrator::WithOrigin;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub(crate) use crate::locate::{add_shipped_plugins, find_probe, resolve_program};
use crate::run_args::configure;
pub(crate) use crate::run_args::RunArgs;
pub(crate) use crate::spool_guard::{hold_collector_lock, SpoolGuard};

fn usage_error(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("memscope: {msg}");
    ExitCode::from(2)
}

/// The collector's own `ASCEND_RT_VISIBLE_DEVICES`: the mapping of processes whose probe did
/// not record one of their own.
fn visible_devices() -> Vec<u32> {
    std::env::var("ASCEND_RT_VISIBLE_DEVICES")
        .map(|v| memscope_wire::probe_env::parse_visible_devices(&v))
        .unwrap_or_default()
}

/// Runs `memscope run`.
pub fn run(a: RunArgs) -> ExitCode {
    let (mut cfg, explicit) = match configure(&a) {
        Ok(c) => c,
        Err(e) => return usage_error(e),
    };
    let gate = crate::ci::RunGate {
        limits: match &a.fail_on {
            Some(t) => match crate::ci::parse_limits("--fail-on", t) {
                Ok(l) => l,
                Err(e) => return usage_error(e),
            },
            None => Vec::new(),
        },
        summary_json: a.summary.summary_json.clone(),
        exit_code: a.fail_exit_code.unwrap_or(crate::ci::EXIT_LIMIT),
    };
    if let Some(p) = &gate.summary_json {
        if let Err(e) = crate::ci::check_summary_path(p) {
            return usage_error(e);
        }
    }
    // aggregate mode keeps per-site totals, not the rows these read after the job (issue 38)
    if cfg.aggregate {
        if let Some(e) = gate.aggregate_conflict(a.report, cfg.host_rows) {
            return usage_error(e);
        }
    }
    // --keep: a crossing of a limit on live bytes writes a window while the job runs
    if cfg.keep.is_some() {
        use memscope_analysis::thresholds::Metric;
        cfg.keep_limits = gate
            .limits
            .iter()
            .filter(|l| matches!(l.metric, Metric::Peak | Metric::Live))
            .cloned()
            .collect();
    }
    // a races limit needs what the race check reads recorded (launches with their streams,
    // the stream and event calls, accesses): it turns the analysis on
    if gate
        .limits
        .iter()
        .any(|l| l.metric == memscope_analysis::thresholds::Metric::Races)
    {
        cfg.analysis.races = true;
    }
    let Some(program) = a.program.first() else {
        return usage_error(
            "no program given (usage: memscope run [OPTIONS] [--] PROGRAM [ARGS]...)",
        );
    };
    let Some(program_path) = resolve_program(program) else {
        return usage_error(format!("program {program:?} not found"));
    };
    if program_path.is_dir() {
        return usage_error(format!("program {program:?} is a directory"));
    }
    // refused before the output directory is made, so a typo leaves nothing behind
    if std::fs::metadata(&program_path)
        .is_ok_and(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o111 == 0)
    {
        return usage_error(format!(
            "program {program:?} is not executable (no execute permission)"
        ));
    }
    // The adapters' checks of the program (HOST's: statically linked programs and, with HOST,
    // programs with their own malloc; issue 4).
    for d in crate::builtin::REGISTRY.descriptors {
        if let Some(check) = d.preflight {
            for w in check(&program_path, cfg.has_source(d.source)) {
                eprintln!("{w}");
            }
        }
    }
    let probe = match find_probe() {
        Ok(p) => p,
        Err(e) => return usage_error(e),
    };
    // Shipped plugins (descriptors with a library) load like any plugin, from next to the probe.
    if let Err(e) = add_shipped_plugins(&mut cfg, &probe) {
        return usage_error(e);
    }
    for p in &cfg.adapter_paths {
        if let Err(e) = crate::plugin_check::check(p) {
            return usage_error(e);
        }
    }
    // Created without following any symbolic link (issue 17, M1): a link as or inside the
    // output path, or planted there, is refused before anything is launched.
    let out_dir = match Dir::create_all(&cfg.output_path, DIR_MODE) {
        Ok(d) => d,
        Err(e) => return usage_error(format!("--output-path {}: {e}", cfg.output_path.display())),
    };
    let spool = layout::spool_dir(&cfg.output_path, std::process::id());
    if let Err(e) = out_dir.create_dir_new(&layout::spool_name(std::process::id()), DIR_MODE) {
        return usage_error(format!(
            "--output-path {}: cannot create the spool: {e}",
            cfg.output_path.display()
        ));
    }
    // Removed on every way out from here on, a panic's unwinding included.
    let mut spool_guard = SpoolGuard::new(spool.clone(), "memscope");
    // The collector's liveness lock (TEAM contract 1), held until the spool is gone, and what
    // `memscope recover` needs to redo the run from the spool if this process is killed.
    match hold_collector_lock(&spool) {
        Ok(f) => spool_guard.hold(f),
        Err(e) => return usage_error(e),
    }
    if let Err(e) = crate::session::write_run_info(&spool, &cfg, &visible_devices(), &a.program) {
        return usage_error(e);
    }
    let opts = Finish {
        quiet: a.quiet,
        report: a.report,
        gate,
        explicit,
    };
    launch_and_collect(
        &cfg,
        &probe,
        &spool,
        &a.program,
        opts,
        crate::session::analysis_factory(),
        &mut spool_guard,
    )
}

fn preload_value(probe: &Path, cfg: &RunConfig) -> String {
    let mut parts: Vec<String> = vec![probe.display().to_string()];
    parts.extend(cfg.adapter_paths.iter().map(|p| p.display().to_string()));
    if let Ok(old) = std::env::var("LD_PRELOAD") {
        if !old.is_empty() {
            parts.push(old);
        }
    }
    parts.join(":")
}

/// The job's command: `program args...` with the probe's environment (and the Python
/// bootstrap of `--events traceback`, [`crate::python_job::python_env`]).
///
/// # Errors
/// The Python bootstrap cannot be written (one line naming it).
fn job_command(
    cfg: &RunConfig,
    probe: &Path,
    spool: &Path,
    program: &std::ffi::OsStr,
    args: &[std::ffi::OsString],
) -> Result<Command, String> {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .env("LD_PRELOAD", preload_value(probe, cfg))
        .env(env::ENV_SPOOL, spool)
        .env(env::ENV_ADAPTERS, cfg.adapter_mask().to_string())
        .env(
            env::ENV_COLLECT_MODE,
            match cfg.collect_mode {
                memscope_collect::config::CollectMode::Immediate => "immediate",
                memscope_collect::config::CollectMode::Deferred => "deferred",
            },
        )
        .env(env::ENV_C_STACK, cfg.call_stack.c.unwrap_or(0).to_string())
        .env(env::ENV_SAMPLE_NS, cfg.sample_ns.unwrap_or(0).to_string()) // issue 25
        .env("MSTX_INJECTION_PATH", probe);
    // the adapters' probe settings the run decides (ACL's kernel launches, issue 5)
    for s in crate::builtin::REGISTRY
        .descriptors
        .iter()
        .flat_map(|d| d.settings)
    {
        if let Some(value) = s.value {
            cmd.env(s.env, value(cfg));
        }
    }
    crate::python_job::python_env(&mut cmd, cfg, spool)?;
    if !cfg.adapter_paths.is_empty() {
        let joined: Vec<String> = cfg
            .adapter_paths
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        cmd.env(env::ENV_PLUGINS, joined.join(":"));
    }
    Ok(cmd)
}

/// Starts the job. A program the kernel cannot execute (`ENOEXEC`: a script without a `#!`
/// line) is run with `/bin/sh`, as POSIX shells and `execvp` do.
///
/// # Errors
/// The job cannot be started, or its environment prepared: one line.
fn spawn_job(
    cfg: &RunConfig,
    probe: &Path,
    spool: &Path,
    argv: &[String],
    explicit: &str,
) -> Result<std::process::Child, String> {
    let args: Vec<std::ffi::OsString> = argv[1..].iter().map(Into::into).collect();
    let spawn = |program: &std::ffi::OsStr, args: &[std::ffi::OsString]| {
        job_command(cfg, probe, spool, program, args).map(|mut c| {
            c.env("MEMSCOPE_RUN_EXPLICIT", explicit);
            c.spawn()
        })
    };
    let spawned = match spawn(argv[0].as_ref(), &args)? {
        Err(e) if e.raw_os_error() == Some(nix::errno::Errno::ENOEXEC as i32) => {
            let path = resolve_program(&argv[0]).unwrap_or_else(|| PathBuf::from(&argv[0]));
            let mut sh_args = vec![path.into_os_string()];
            sh_args.extend(args);
            spawn("/bin/sh".as_ref(), &sh_args)?
        }
        other => other,
    };
    spawned.map_err(|e| format!("cannot run {:?}: {e}", argv[0]))
}

/// What happens after the job: the summary (unless quiet) and the HTML report (`--report`);
/// and the keys the flags set explicitly, for the job's environment.
struct Finish {
    quiet: bool,
    report: bool,
    /// `--fail-on` and `--summary-json` (issue 24).
    gate: crate::ci::RunGate,
    explicit: String,
}

fn launch_and_collect(
    cfg: &RunConfig,
    probe: &Path,
    spool: &Path,
    argv: &[String],
    opts: Finish,
    analyses: AnalysisFactory,
    spool_guard: &mut SpoolGuard,
) -> ExitCode {
    // Signals for the job (issue 18, B2): read with their origin, so a terminal's Ctrl-C
    // (sent by the kernel to the whole foreground group) is not delivered a second time.
    let mut signals = match signal_hook::iterator::SignalsInfo::<WithOrigin>::new([
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
        signal_hook::consts::SIGUSR2,
    ]) {
        Ok(s) => s,
        Err(e) => return usage_error(format!("cannot install signal handlers: {e}")),
    };
    let grace = match crate::job::grace() {
        Ok(g) => g,
        Err(e) => return usage_error(e),
    };
    crate::job::become_subreaper();
    let start_ns = crate::run_index::now_ns();
    let mut child = match spawn_job(cfg, probe, spool, argv, &opts.explicit) {
        Ok(c) => c,
        Err(e) => return usage_error(e),
    };
    let mut collector = Collector::new(
        spool.to_path_buf(),
        Arc::new(cfg.clone()),
        visible_devices(),
        analyses,
        crate::builtin::REGISTRY,
    );
    // the job's probe selects exactly the configuration's adapters
    collector.type_selected_only();
    let mut status = None;
    let mut last_flush = Instant::now();
    let mut exited_at: Option<Instant> = None;
    let mut teardown = crate::job::Teardown::new(child.id(), spool, grace);
    let mut last_reap = Instant::now();
    let mut rss = crate::own_memory::RssWatch::new();
    loop {
        let progressed = collector.poll();
        rss.sample(&collector.traced_pids());
        for origin in signals.pending() {
            if origin.signal == signal_hook::consts::SIGUSR2 {
                // --keep: a window run of every process now (issue 38)
                if cfg.keep.is_some() {
                    memscope_collect::flight_recorder::request_window();
                } else {
                    eprintln!("memscope: SIGUSR2 asks for a flight-recorder window; this run keeps every row (no --keep), so there is none to write");
                }
                continue;
            }
            teardown.on_signal(&origin, &collector);
        }
        // a /proc scan: a few times a second is enough to reap reparented ranks
        if last_reap.elapsed() > Duration::from_millis(200) {
            for (pid, how) in crate::job::reap_orphans(child.id()) {
                collector.note_ended(pid, how);
            }
            last_reap = Instant::now();
        }
        teardown.check(&collector);
        if status.is_none() {
            match child.try_wait() {
                Ok(Some(s)) => {
                    use std::os::unix::process::ExitStatusExt;
                    let how = match s.signal() {
                        Some(sig) => crate::job::Ended::Signaled(sig),
                        None => crate::job::Ended::Exited(s.code().unwrap_or(0)),
                    };
                    collector.note_ended(child.id(), how);
                    status = Some(s);
                    exited_at = Some(Instant::now());
                }
                Ok(None) => {}
                Err(e) => {
                    eprintln!("memscope: waiting for the job: {e}");
                    break;
                }
            }
        }
        if let Some(t) = exited_at {
            if collector.live_processes() == 0 {
                break;
            }
            // After a forwarded signal the job has its grace period (then SIGKILL) to end;
            // otherwise processes left behind by a job that exited get 5 s.
            let wait = teardown.wait_after_exit();
            if t.elapsed() > wait {
                eprintln!(
                    "memscope: {} process(es) of the job still running {} s after it exited; writing what they recorded so far",
                    collector.live_processes(),
                    wait.as_secs()
                );
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
    let reaped = collector.ended().clone();
    // the job's process (a pyenv shim execs python in it) after its last sample
    rss.job_peak(child.id(), crate::own_memory::children_peak_kib());
    let mut summaries = collector.finish();
    // launcher/wrapper helpers: no directory, no console line (issue 23)
    let left_out = crate::helpers::set_aside(&mut summaries);
    crate::python_job::finish_python(cfg, &summaries);
    let code = match status {
        Some(s) => {
            use std::os::unix::process::ExitStatusExt;
            match (s.code(), s.signal()) {
                (Some(c), _) => c,
                (None, Some(sig)) => 128 + sig,
                _ => 1,
            }
        }
        None => 1,
    };
    let entries = crate::run_index::entries(&cfg.output_path, &summaries, &reaped);
    let index_written = crate::run_index::write(
        &cfg.output_path,
        entries.clone(),
        &crate::run_index::RunFacts {
            command: argv,
            exit_code: code,
            interrupted_by: teardown.signal().map(|s| s.as_str().to_owned()),
            recovered: false,
            start_ns,
            memscope_pid: std::process::id(),
        },
    );
    if !opts.quiet {
        if crate::rank_table::wanted(&summaries) {
            crate::rank_table::print(&summaries, &entries, code, &cfg.output_path, &left_out);
        } else {
            crate::summary::print(&summaries, Some(code), &left_out, &cfg.output_path);
        }
        if let Some(l) =
            crate::own_memory::hint(&summaries, &rss, cfg, argv, crate::own_memory::Launch::Run)
        {
            eprintln!("{l}");
        }
        if let Some(sig) = teardown.signal() {
            eprintln!("memscope: the job was interrupted by {sig}; everything it recorded until it ended is written");
        }
    }
    if opts.report {
        // the job's exit code stays the run's; a report that cannot be made is said, not fatal
        let dirs = crate::helpers::recorded_dirs(&summaries);
        match crate::report_cmd::run_report(&cfg.output_path, &dirs) {
            Ok(p) if !opts.quiet => eprintln!("memscope: report: {}", p.display()),
            Ok(_) => {}
            Err(e) => eprintln!("memscope: report: {e:#}"),
        }
    }
    let code = if opts.gate.active() {
        let dirs = crate::helpers::recorded_dirs(&summaries);
        let known: Vec<crate::ci::summary::Known> = summaries
            .iter()
            .map(|p| crate::ci::summary::Known {
                pid: p.pid,
                exe: p.exe.clone(),
                dropped: p.dropped,
            })
            .collect();
        let facts = crate::ci::summary::JobFacts {
            command: argv,
            exit_code: code,
            output: &cfg.output_path,
            known: &known,
        };
        crate::ci::after_run(&opts.gate, &dirs, &facts, opts.quiet)
    } else {
        code
    };
    // outputs cut short (a full disk): the spool stays for `memscope recover`
    let code = crate::spool_guard::keep_after_write_failures(
        spool_guard,
        &summaries,
        &cfg.output_path,
        code,
    );
    let code = crate::run_index::fail_if_unwritten(index_written, code);
    ExitCode::from(code.clamp(0, 255) as u8)
}
