//! The options of `memscope run` and the configuration they make (with `--config`).

use memscope_collect::config::{LogLevel, RawOptions, RunConfig};
use std::path::PathBuf;

/// Options of `memscope run` (msMemScope's, plus `--adapters`, `--adapter-path`, `--config`).
#[derive(clap::Args, Debug, Default)]
#[command(trailing_var_arg = true)]
pub struct RunArgs {
    /// Events to collect: alloc,free,launch,access,traceback,none [default: alloc,free,launch].
    #[arg(long)]
    pub(crate) events: Option<String>,
    /// Launch levels: op,kernel [default: op].
    #[arg(long)]
    pub(crate) level: Option<String>,
    /// Call stacks: c[:N],python[:N] (N ≤ 1000, default 50) [default: none].
    #[arg(long = "call-stack")]
    pub(crate) call_stack: Option<String>,
    /// Online analyses: leaks,gap,decompose,inefficient,races,oom[:K],none [default: leaks,gap].
    #[arg(long)]
    pub(crate) analysis: Option<String>,
    /// Keep only these steps (≤ 5 numbers ≥ 1; a step is an msTX range named "step start").
    #[arg(long)]
    pub(crate) steps: Option<String>,
    /// Devices: npu,npu:<n>,cpu [default: npu].
    #[arg(long)]
    pub(crate) device: Option<String>,
    /// Output directory [default: ./memscopeDumpResults].
    #[arg(short = 'o', long = "output-path", visible_alias = "output")]
    pub(crate) output_path: Option<String>,
    /// Dump format: csv or db [default: csv].
    #[arg(long, visible_alias = "data-format")]
    pub(crate) format: Option<String>,
    /// Log level: debug, info, warning, error [default: info].
    #[arg(long = "log-level")]
    pub(crate) log_level: Option<String>,
    /// Quiet: log level error and no summary.
    #[arg(short, long)]
    pub(crate) quiet: bool,
    /// Verbose: log level debug.
    #[arg(short, long)]
    pub(crate) verbose: bool,
    /// immediate, or deferred (record only between memscope_start() and memscope_stop()).
    #[arg(long = "collect-mode")]
    pub(crate) collect_mode: Option<String>,
    // Adapters: the registration list's names, and those off by default.
    #[arg(long, help = crate::registry::adapters_help())]
    pub(crate) adapters: Option<String>,
    /// A third-party adapter library (repeatable).
    #[arg(long = "adapter-path")]
    pub(crate) adapter_path: Vec<String>,
    /// config.json with the same keys as these options (flags win).
    #[arg(long)]
    pub(crate) config: Option<PathBuf>,
    /// Ops of idleness for the temporary_idleness rule [default: 3000].
    #[arg(long = "idle-threshold")]
    pub(crate) idle_threshold: Option<u64>,
    /// Inefficient-memory rule: msmemscope (each row classified as it arrives) or op-end
    /// (memscope's stricter variant: rows classified when the outermost op ends)
    /// [default: msmemscope].
    #[arg(long = "inefficient-rule")]
    pub(crate) inefficient_rule: Option<String>,
    /// Memory watch: [start[:outid]],end[,full-content] (Aten operators of the Python package's
    /// torch hooks).
    #[arg(long)]
    pub(crate) watch: Option<String>,
    // Sample the process's resident memory on a timer and show what the hooks do not see.
    #[arg(long, value_name = "INTERVAL", help = crate::registry::sample_help())]
    pub(crate) sample: Option<String>,
    /// At the end, write a self-contained HTML report of the run into the output directory.
    #[arg(long)]
    pub(crate) report: bool,
    // Write the account-only sources' rows into the dumps too.
    #[arg(long = "host-rows", help = crate::registry::host_rows_help())]
    pub(crate) host_rows: bool,
    /// Per allocator, call site and owner totals instead of per-event rows: allocations, bytes,
    /// frees, what was live at each allocator's peak and at the end, in
    /// memscope_aggregate_<ts>.csv of each process; no dump rows and no capture, so the output
    /// grows with the number of sites, not of events (the console analyses run as usual)
    #[arg(long)]
    pub(crate) aggregate: bool,
    /// Flight recorder: keep only the last stretch of rows on disk — last:<duration> (30s, 5m,
    /// 2h), last:<size> (64MiB, 2GiB) or last:<rows> (1000000) — written as the run's dumps at
    /// exit, with the blocks live before it as history rows; at an OOM, a --fail-on crossing
    /// of live bytes or SIGUSR2 to memscope also as a window run (window_<ts>_<why>/ in the
    /// output path). No capture
    #[arg(long, value_name = "last:N")]
    pub(crate) keep: Option<String>,
    /// Fail the run when a memory limit is crossed: METRIC[.SCOPE]>SIZE, comma-separated, in
    /// quotes ('leaks>1MiB,peak.npu:0>40GiB,peak.host>2GiB'; metrics peak, leaks, live,
    /// hal_at_exit, dropped, races — a count of cross-stream races, which turns --analysis
    /// races on; a limit on nothing recorded says "not recorded").
    /// Exit code 23 (--fail-exit-code) unless the job itself failed: its code wins.
    #[arg(long = "fail-on", value_name = "LIMITS")]
    pub(crate) fail_on: Option<String>,
    /// Exit code when a --fail-on limit is crossed: 1 or 3–125, not 2 (memscope's own errors)
    /// [default: 23].
    #[arg(long = "fail-exit-code", value_name = "N", requires = "fail_on",
          value_parser = crate::ci::parse_exit_code)]
    pub(crate) fail_exit_code: Option<u8>,
    /// Summary JSON of the run (--summary-json FILE).
    #[command(flatten)]
    pub(crate) summary: crate::ci::SummaryArgs,
    /// The job and its arguments.
    #[arg(value_name = "PROGRAM", num_args = 0..)]
    pub(crate) program: Vec<String>,
}

/// The config() keys the flags and `--config` set explicitly (`MEMSCOPE_RUN_EXPLICIT`: those
/// win over the script's `memscope.config()`, issue 27).
fn explicit_keys(raw: &RawOptions) -> String {
    [
        ("events", raw.events.is_some()),
        ("level", raw.level.is_some()),
        ("call_stack", raw.call_stack.is_some()),
        ("analysis", raw.analysis.is_some()),
        ("device", raw.device.is_some()),
        ("output_path", raw.output_path.is_some()),
        ("format", raw.format.is_some()),
        ("watch", raw.watch.is_some()),
        ("sample", raw.sample.is_some()),
        ("keep", raw.keep.is_some()),
    ]
    .iter()
    .filter(|(_, set)| *set)
    .map(|(k, _)| *k)
    .collect::<Vec<_>>()
    .join(",")
}

pub(crate) fn configure(a: &RunArgs) -> Result<(RunConfig, String), String> {
    let flags = RawOptions {
        events: a.events.clone(),
        level: a.level.clone(),
        call_stack: a.call_stack.clone(),
        analysis: a.analysis.clone(),
        steps: a.steps.clone(),
        device: a.device.clone(),
        output_path: a.output_path.clone(),
        format: a.format.clone(),
        log_level: a.log_level.clone(),
        collect_mode: a.collect_mode.clone(),
        adapters: a.adapters.clone(),
        adapter_paths: a.adapter_path.clone(),
        idle_threshold: a.idle_threshold,
        inefficient_rule: a.inefficient_rule.clone(),
        host_rows: a.host_rows.then_some(true),
        watch: a.watch.clone(),
        sample: a.sample.clone(),
        aggregate: a.aggregate.then_some(true),
        keep: a.keep.clone(),
    };
    let cwd = std::env::current_dir().map_err(|e| format!("current directory: {e}"))?;
    let raw = match &a.config {
        Some(p) => {
            let file = RawOptions::from_file(p).map_err(|e| e.0)?;
            // Validate the file alone first, so a bad value in it is reported against it.
            file.clone()
                .validate(&cwd)
                .map_err(|e| format!("--config {}: {}", p.display(), e.0))?;
            file.overlay(flags)
        }
        None => flags,
    };
    let explicit_level = raw.log_level.is_some();
    let explicit = explicit_keys(&raw);
    let mut cfg = raw.validate(&cwd).map_err(|e| e.0)?;
    if !explicit_level {
        if a.verbose {
            cfg.log_level = LogLevel::Debug;
        } else if a.quiet {
            cfg.log_level = LogLevel::Error;
        }
    }
    Ok((cfg, explicit))
}
