//! `memscope compare` and `memscope analyze {leaks,inefficient,decompose,gap,fragmentation}`:
//! offline analyses of dump files (CSV or `.db`, memscope's or msMemScope's).
//!
//! Every error is one line that names the input or output at fault; `main` prints it as
//! `memscope: <error>` and exits 2.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Result};
use clap::{Args, Subcommand, ValueEnum};

use memscope_analysis::decompose::{write_decompose_csv, DecomposeLayer};
use memscope_analysis::gap::GapLayer;
use memscope_analysis::inefficient::IneffRule;
use memscope_analysis::inefficient_layer::InefficientLayer;
use memscope_analysis::leak_range::RangeLeakLayer;
use memscope_analysis::leaks::LeakLayer;
use memscope_analysis::offline::run_layers_in;
use memscope_analysis::{parse_types, IneffConfig};
use memscope_core::bus::{Layer, ReportSection};
use memscope_core::event::Inefficiency;
use memscope_core::sanitize::escape_controls;
use memscope_dump::reader::{DumpFile, Order, ReadOptions};

#[path = "analyze/annotate.rs"]
mod annotate;
#[path = "analyze/compare_args.rs"]
mod compare_args;
#[path = "analyze/compare_cmd.rs"]
mod compare_cmd;
#[path = "analyze/compare_runs.rs"]
mod compare_runs;
#[path = "analyze/fragmentation.rs"]
pub mod fragmentation;
#[path = "analyze/progress.rs"]
mod progress;
#[path = "analyze/races.rs"]
pub mod races;
#[path = "analyze/run_dir.rs"]
mod run_dir;

pub use compare_args::CompareArgs;
pub use compare_cmd::run_compare;

/// `--level` of `memscope compare`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LevelArg {
    /// ATEN/ATB operator START…END pairs.
    Op,
    /// Kernel launches (each until the next launch on its device).
    Kernel,
}

/// `--order` of the offline analyses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OrderArg {
    /// Replay rows in ID order (the order they happened in, as IDs are given).
    Id,
    /// Replay rows in timestamp order (for files whose IDs and timestamps disagree).
    Time,
}

/// How an offline analysis replays the rows of its file.
#[derive(Clone, Copy, Debug, Args)]
pub struct ReplayArgs {
    /// Replay order of the rows.
    #[arg(long, value_enum, default_value_t = OrderArg::Id)]
    pub order: OrderArg,
}

/// `memscope analyze leaks FILE|RUN_DIR [--mstx-info MSG [--start-index N]] [--full]`.
#[derive(Clone, Debug, Args)]
pub struct LeaksArgs {
    /// Dump or capture (`.mscap`) to analyse, or an output directory: every process in it,
    /// one line per rank.
    pub file: PathBuf,
    /// Print every line of long lists (top items only by default); with a directory, every
    /// process's own report before the per-rank table.
    #[arg(long)]
    pub full: bool,
    /// With an output directory that holds several runs: which one (its number as memscope
    /// lists them) [default: the newest].
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    pub run: Option<usize>,
    /// HAL leak check in the range given by the msTX marks with this exact message
    /// (msMemScope's check_leaks) instead of the step-based check.
    #[arg(long = "mstx-info", value_name = "MSG")]
    pub mstx_info: Option<String>,
    /// Index of the mark that opens the range (marks N, N+1, N+2 are used).
    #[arg(
        long = "start-index",
        value_name = "N",
        default_value_t = 0,
        requires = "mstx_info"
    )]
    pub start_index: usize,
    /// Exit 23 (--fail-exit-code) when an allocator of a process leaked more than SIZE (e.g.
    /// 1MiB) by msMemScope's step rule: pool blocks, and host blocks once a step ended (HAL
    /// memory live at exit is not a leak: `memscope run --fail-on hal_at_exit>SIZE`); the same
    /// check as `memscope run --fail-on leaks>SIZE`.
    #[arg(
        long = "fail-over",
        value_name = "SIZE",
        conflicts_with = "mstx_info",
        allow_hyphen_values = true
    )]
    pub fail_over: Option<String>,
    /// Exit code when --fail-over is crossed: 1 or 3–125, not 2 (memscope's own errors) [default:
    /// 23].
    #[arg(long = "fail-exit-code", value_name = "N", requires = "fail_over",
          value_parser = crate::ci::parse_exit_code)]
    pub fail_exit_code: Option<u8>,
    /// Replay order.
    #[command(flatten)]
    pub replay: ReplayArgs,
    /// Summary JSON.
    #[command(flatten)]
    pub summary: crate::ci::SummaryArgs,
}

/// `--inefficient-rule` of `memscope analyze inefficient`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum RuleArg {
    /// msMemScope's: each row is classified as it arrives.
    Msmemscope,
    /// memscope's stricter variant: rows inside an op are classified when the outermost op
    /// ends.
    OpEnd,
}

/// `memscope analyze inefficient FILE [--mem-size BYTES] [--types t1,t2] [--idle-threshold N]
/// [--inefficient-rule msmemscope|op-end]`.
#[derive(Clone, Debug, Args)]
pub struct InefficientArgs {
    /// Dump to analyse; an annotated copy is written next to it (or, with --in-place, over it).
    pub file: PathBuf,
    /// Only report blocks of at least this many bytes.
    #[arg(long = "mem-size", value_name = "BYTES", default_value_t = 0)]
    pub mem_size: u64,
    /// Types to report: early_allocation, late_deallocation, temporary_idleness (default all).
    #[arg(long, value_name = "T1,T2")]
    pub types: Option<String>,
    /// Ops between two uses of a block above which it counts as temporarily idle.
    #[arg(long = "idle-threshold", value_name = "N", default_value_t = 3000,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub idle_threshold: u64,
    /// Classification rule.
    #[arg(long = "inefficient-rule", value_enum, default_value_t = RuleArg::Msmemscope)]
    pub rule: RuleArg,
    /// Rewrite FILE itself with the annotations (msMemScope's check_inefficient, which the
    /// Python API's check_inefficient and analyze("inefficient") use) instead of writing a
    /// new annotated copy next to it. The annotated file replaces FILE in one rename.
    #[arg(long = "in-place")]
    pub in_place: bool,
    /// Replay order.
    #[command(flatten)]
    pub replay: ReplayArgs,
    /// Summary JSON.
    #[command(flatten)]
    pub summary: crate::ci::SummaryArgs,
}

/// `memscope analyze decompose FILE|RUN_DIR [-o DIR] [--full]`.
#[derive(Clone, Debug, Args)]
pub struct DecomposeArgs {
    /// Dump (or kept capture, .mscap) to analyse, or an output directory: every process in it
    /// (one CSV each), one line per rank.
    pub file: PathBuf,
    /// Print every line of long lists (top items only by default); with a directory, every
    /// process's own report before the per-rank table.
    #[arg(long)]
    pub full: bool,
    /// With an output directory that holds several runs: which one (its number as memscope
    /// lists them) [default: the newest].
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    pub run: Option<usize>,
    /// Output folder of decompose_{ts}.csv.
    #[arg(
        short = 'o',
        long = "output",
        value_name = "DIR",
        default_value = "memscopeDumpResults"
    )]
    pub output: PathBuf,
    /// Replay order.
    #[command(flatten)]
    pub replay: ReplayArgs,
    /// Summary JSON.
    #[command(flatten)]
    pub summary: crate::ci::SummaryArgs,
}

/// `memscope analyze gap FILE|RUN_DIR [--full]`.
#[derive(Clone, Debug, Args)]
pub struct GapArgs {
    /// Dump or capture (`.mscap`) to analyse, or an output directory: every process in it,
    /// one line per rank.
    pub file: PathBuf,
    /// Print every line of long lists (top items only by default); with a directory, every
    /// process's own report before the per-rank table.
    #[arg(long)]
    pub full: bool,
    /// With an output directory that holds several runs: which one (its number as memscope
    /// lists them) [default: the newest].
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    pub run: Option<usize>,
    /// Replay order.
    #[command(flatten)]
    pub replay: ReplayArgs,
    /// Summary JSON.
    #[command(flatten)]
    pub summary: crate::ci::SummaryArgs,
}

/// `memscope analyze ...`.
#[derive(Clone, Debug, Subcommand)]
pub enum AnalyzeCmd {
    /// Memory-pool leaks by step, HAL memory live at exit (or HAL leaks in an msTX range), and HOST memory at its peak and live at exit when the dump has HOST rows.
    Leaks(LeaksArgs),
    /// early_allocation, late_deallocation and temporary_idleness blocks; writes an annotated copy.
    Inefficient(InefficientArgs),
    /// Bytes per owner chain per device, at the peak and at the end.
    Decompose(DecomposeArgs),
    /// Min/max pool usage per step and the largest and smallest ratio.
    Gap(GapArgs),
    /// Pool extents over time (reserved, allocated, free, largest free extent, fragmentation)
    /// and a verdict at each OOM: fragmentation, held by other processes or true shortage.
    Fragmentation(fragmentation::FragmentationArgs),
    /// Cross-stream races: a write and another access on different streams with no
    /// synchronisation between them, or a freed block reused while another stream may still
    /// use it (happens-before per stream, as PyTorch's CUDA Sanitizer).
    Races(races::RacesArgs),
}

/// The adapters' own leak summaries over a dump's rows (HOST: its peak and what was live at
/// exit, as the run prints them), after the pool and HAL rule of `LeakLayer`.
pub(crate) fn adapter_leak_layers() -> Vec<Box<dyn Layer>> {
    crate::builtin::REGISTRY
        .descriptors
        .iter()
        .flat_map(|d| (d.offline_leaks)())
        .collect()
}

fn open(path: &Path) -> Result<DumpFile> {
    DumpFile::open(path).map_err(|e| anyhow!("{e}"))
}

/// Prints one line on stdout; a closed pipe (`| head`) is not an error of the analysis
/// (`crate::out`).
fn say(line: &str) {
    println!("{line}");
}

/// Prints report sections on stdout, each line escaped whole (text from the dump can neither
/// drive the terminal nor break a line); lists cut to their top items unless `full` (then a
/// note on stderr says how to get every line).
fn print_sections(sections: &[ReportSection], full: bool) {
    for s in sections {
        println!("==== {} ====", escape_controls(&s.title));
        let lines = if full { s.all_lines() } else { &s.lines };
        for l in lines {
            println!("{}", escape_controls(l));
        }
    }
    if !full && sections.iter().any(|s| s.full.is_some()) {
        eprintln!("memscope: long lists show their top items; --full prints every line");
    }
}

/// The report sections of `layers` over one input file: a kept capture (`.mscap`) replays as
/// the run typed it (its MEMORY_OWNER rows included), a dump is read in `replay`'s order.
fn sections_of(
    input: &Path,
    replay: ReplayArgs,
    make: &mut dyn FnMut() -> Vec<Box<dyn Layer>>,
) -> Result<Vec<ReportSection>> {
    if crate::capture_input::is_capture_file(input) {
        fragmentation::replay(input, make)
    } else {
        run_offline(&open(input)?, replay, make)
    }
}

fn run_offline(
    file: &DumpFile,
    replay: ReplayArgs,
    make: &mut dyn FnMut() -> Vec<Box<dyn Layer>>,
) -> Result<Vec<ReportSection>> {
    let mut opts = ReadOptions {
        progress: Some(progress::bar(file.name())),
        ..ReadOptions::default()
    };
    let order = match replay.order {
        OrderArg::Id => Order::ById,
        OrderArg::Time => Order::ByTime,
    };
    let (sections, stats) =
        run_layers_in(file, order, &mut opts, make).map_err(|e| anyhow!("{e}"))?;
    if let Some(w) = stats.torn_warning(file.name()) {
        eprintln!("memscope: warning: {w}");
    }
    if stats.time_disorder > 0 {
        eprintln!(
            "memscope: warning: {}: {} row(s) have an earlier timestamp than a row with a smaller ID (rows flushed out of time order); analyses replay in ID order, --order time replays by timestamp",
            file.name(),
            stats.time_disorder
        );
    }
    if stats.rows == 0 {
        say(&format!(
            "{}: no rows (the file holds a header only)",
            file.name()
        ));
    }
    Ok(sections)
}

/// Runs `memscope analyze ...`, then its `--fail-over` check and `--summary-json` (issue 24).
///
/// # Errors
/// An unreadable or malformed input, or an output that cannot be written;
/// [`crate::ci::LimitsCrossed`] when `--fail-over` is crossed.
pub fn run_analyze(cmd: &AnalyzeCmd) -> Result<()> {
    let (input, summary, limits, code) = match cmd {
        AnalyzeCmd::Fragmentation(a) => return fragmentation::run(a),
        AnalyzeCmd::Leaks(a) => (
            &a.file,
            &a.summary,
            match &a.fail_over {
                Some(t) => crate::ci::parse_limits("--fail-over", &format!("leaks>{t}"))
                    .map_err(|e| anyhow!("{e}"))?,
                None => Vec::new(),
            },
            a.fail_exit_code.unwrap_or(crate::ci::EXIT_LIMIT),
        ),
        AnalyzeCmd::Inefficient(a) => (&a.file, &a.summary, Vec::new(), crate::ci::EXIT_LIMIT),
        AnalyzeCmd::Decompose(a) => (&a.file, &a.summary, Vec::new(), crate::ci::EXIT_LIMIT),
        AnalyzeCmd::Gap(a) => (&a.file, &a.summary, Vec::new(), crate::ci::EXIT_LIMIT),
        AnalyzeCmd::Races(a) => (
            &a.file,
            &a.summary,
            match &a.fail_over {
                Some(n) => crate::ci::parse_limits("--fail-over", &format!("races>{n}"))
                    .map_err(|e| anyhow!("{e}"))?,
                None => Vec::new(),
            },
            a.fail_exit_code.unwrap_or(crate::ci::EXIT_LIMIT),
        ),
    };
    if let Some(p) = &summary.summary_json {
        crate::ci::check_summary_path(p).map_err(|e| anyhow!("{e}"))?;
    }
    crate::window_note::say(input);
    run_analysis(cmd)?;
    if limits.is_empty() && summary.summary_json.is_none() {
        return Ok(());
    }
    let run = [match cmd {
        AnalyzeCmd::Leaks(a) => a.run,
        AnalyzeCmd::Decompose(a) => a.run,
        AnalyzeCmd::Gap(a) => a.run,
        AnalyzeCmd::Races(a) => a.run,
        AnalyzeCmd::Inefficient(_) | AnalyzeCmd::Fragmentation(_) => None,
    }];
    let processes = crate::ci::compute(std::slice::from_ref(input), &run, &[])?;
    crate::ci::finish_offline(
        "analyze",
        &limits,
        Vec::new(),
        code,
        summary.summary_json.as_deref(),
        vec![crate::ci::Input {
            label: "input".into(),
            path: input.clone(),
            point: None,
            processes,
        }],
        None,
    )
}

fn run_analysis(cmd: &AnalyzeCmd) -> Result<()> {
    if let AnalyzeCmd::Races(a) = cmd {
        return races::run(a);
    }
    let here = Path::new(".");
    let dir = match cmd {
        AnalyzeCmd::Leaks(a) if a.file.is_dir() => {
            if a.mstx_info.is_some() {
                return Err(anyhow!(
                    "{}: --mstx-info takes one dump file, not a directory",
                    a.file.display()
                ));
            }
            Some((
                &a.file,
                run_dir::Which::Leaks,
                a.replay,
                (a.full, a.run),
                here,
            ))
        }
        AnalyzeCmd::Gap(a) if a.file.is_dir() => Some((
            &a.file,
            run_dir::Which::Gap,
            a.replay,
            (a.full, a.run),
            here,
        )),
        AnalyzeCmd::Decompose(a) if a.file.is_dir() => Some((
            &a.file,
            run_dir::Which::Decompose,
            a.replay,
            (a.full, a.run),
            a.output.as_path(),
        )),
        _ => None,
    };
    if let Some((d, which, replay, (full, run), out)) = dir {
        return run_dir::run(d, which, replay, (full, run), out);
    }
    let (file_run, full) = match cmd {
        AnalyzeCmd::Leaks(a) => (a.run.map(|_| &a.file), a.full),
        AnalyzeCmd::Gap(a) => (a.run.map(|_| &a.file), a.full),
        AnalyzeCmd::Decompose(a) => (a.run.map(|_| &a.file), a.full),
        AnalyzeCmd::Inefficient(_) | AnalyzeCmd::Fragmentation(_) | AnalyzeCmd::Races(_) => {
            (None, false)
        }
    };
    if let Some(f) = file_run {
        return Err(anyhow!(
            "{}: --run goes with an output directory that holds several runs",
            f.display()
        ));
    }
    let print_sections = |sections: &[ReportSection]| print_sections(sections, full);
    match cmd {
        AnalyzeCmd::Leaks(a) => match &a.mstx_info {
            Some(msg) => {
                let mut judged = Vec::new();
                let sections = sections_of(&a.file, a.replay, &mut || {
                    let layer = RangeLeakLayer::new(msg, a.start_index);
                    judged.push(layer.judged_flag());
                    vec![Box::new(layer)]
                })?;
                print_sections(&sections);
                if !judged
                    .iter()
                    .any(|j| j.load(std::sync::atomic::Ordering::Relaxed))
                {
                    return Err(anyhow!(
                        "{}: no device has the 3 msTX marks named {} from index {} that the range needs",
                        a.file.display(),
                        memscope_core::sanitize::quoted(msg),
                        a.start_index
                    ));
                }
            }
            None => print_sections(&sections_of(&a.file, a.replay, &mut || {
                let mut v: Vec<Box<dyn Layer>> = vec![Box::new(LeakLayer::new())];
                v.extend(adapter_leak_layers());
                v
            })?),
        },
        AnalyzeCmd::Inefficient(a) => run_inefficient(a)?,
        AnalyzeCmd::Decompose(a) => {
            let mut handles = Vec::new();
            let mut make = || -> Vec<Box<dyn Layer>> {
                let (layer, h) = DecomposeLayer::collecting();
                handles.push(h);
                vec![Box::new(layer)]
            };
            print_sections(&sections_of(&a.file, a.replay, &mut make)?);
            let mut rows = Vec::new();
            for h in handles {
                rows.extend(
                    h.lock()
                        .map_err(|_| anyhow!("decompose analysis failed"))?
                        .drain(..),
                );
            }
            let path = write_decompose_csv(&a.output, &rows)
                .map_err(|e| anyhow!("cannot write into {}: {e}", a.output.display()))?;
            say(&format!(
                "decompose: {} row(s) written to {}",
                rows.len(),
                path.display()
            ));
        }
        AnalyzeCmd::Gap(a) => print_sections(&sections_of(&a.file, a.replay, &mut || {
            vec![Box::new(GapLayer::new())]
        })?),
        AnalyzeCmd::Fragmentation(a) => fragmentation::run(a)?,
        AnalyzeCmd::Races(a) => races::run(a)?,
    }
    Ok(())
}

fn run_inefficient(a: &InefficientArgs) -> Result<()> {
    let types = match &a.types {
        Some(t) => parse_types(t).map_err(|e| anyhow!("--types: {e}"))?,
        None => Vec::new(),
    };
    let cfg = IneffConfig {
        idle_threshold: a.idle_threshold,
        mem_size: a.mem_size,
        types,
        rule: match a.rule {
            RuleArg::Msmemscope => IneffRule::MsMemScope,
            RuleArg::OpEnd => IneffRule::OpEnd,
        },
    };
    if crate::capture_input::is_capture_file(&a.file) {
        // the analysis annotates the rows of a dump: a capture has none to annotate
        return Err(anyhow!(
            "{}: is a capture; inefficient annotates a dump file (device_*/dump/memscope_dump_*.csv or .db beside it, or one made with memscope export --to csv)",
            a.file.display()
        ));
    }
    if a.in_place && a.file.is_symlink() {
        return Err(anyhow!(
            "{}: --in-place does not replace a symbolic link (give the real file)",
            a.file.display()
        ));
    }
    let file = open(&a.file)?;
    if a.in_place && file.format() == memscope_dump::reader::DumpFormat::Csv && torn_csv(&a.file) {
        // the rewrite holds the rows that were read: the cut row would be lost
        return Err(anyhow!(
            "{}: the last row is incomplete (no line end); --in-place would drop it, so nothing was changed (write an annotated copy without --in-place)",
            a.file.display()
        ));
    }
    let mut handles = Vec::new();
    let sections = run_offline(&file, a.replay, &mut || {
        let (layer, h) = InefficientLayer::collecting(cfg.clone());
        handles.push(h);
        vec![Box::new(layer)]
    })?;
    let mut found: HashMap<(Option<u32>, u64), Vec<Inefficiency>> = HashMap::new();
    for h in handles {
        let v = h
            .lock()
            .map_err(|_| anyhow!("inefficient analysis failed"))?;
        for f in v.iter() {
            found.insert((f.pid, f.malloc_id), f.types.clone());
        }
    }
    print_sections(&sections, true);
    let out = annotate::write_annotated(&file, &found)?;
    if a.in_place {
        annotate::replace_input(&out, &a.file)?;
        say(&format!(
            "{} MALLOC row(s) annotated; {} rewritten",
            found.len(),
            a.file.display()
        ));
        return Ok(());
    }
    say(&format!(
        "{} MALLOC row(s) annotated; annotated copy written to {}",
        found.len(),
        out.display()
    ));
    Ok(())
}

/// Whether the non-empty CSV at `path` ends without a line end (a writer stopped mid-row).
fn torn_csv(path: &std::path::Path) -> bool {
    use std::io::{Read, Seek, SeekFrom};
    let mut last = [0u8; 1];
    std::fs::File::open(path)
        .and_then(|mut f| {
            f.seek(SeekFrom::End(-1))?;
            f.read_exact(&mut last)
        })
        .is_ok_and(|_| last[0] != b'\n')
}
