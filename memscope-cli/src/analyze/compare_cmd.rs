//! `memscope compare BASE COMPARE`: its arguments and its run over two dump files (two run
//! directories go to `compare_runs`).

use std::path::PathBuf;

use anyhow::{anyhow, Result};
use clap::Args;

use memscope_analysis::compare::{self, Level};
use memscope_collect::config::LogLevel;
use memscope_dump::reader::ReadOptions;

use super::{compare_runs, open, progress, say, LevelArg};

/// `memscope compare BASE COMPARE [--level op|kernel] [--ignore-device | --map-device C=B,..]
/// [-o DIR]`.
#[derive(Clone, Debug, Args)]
pub struct CompareArgs {
    /// Base dump (memscope_dump_*.csv or .db), or a run's output directory: its ranks are
    /// paired with the compare directory's by rank id.
    pub base: PathBuf,
    /// Dump (or output directory) compared with the base.
    pub compare: PathBuf,
    /// Align each side's only device with the other's (rank 0 on device 0 against rank 5 on
    /// device 5); rows carry the base's Device Id.
    #[arg(long = "ignore-device", conflicts_with = "map_device")]
    pub ignore_device: bool,
    /// Align compare-side device C with base-side device B (`5=0`, several comma-separated).
    #[arg(long = "map-device", value_name = "C=B[,C=B...]")]
    pub map_device: Option<String>,
    /// What is aligned: operators or kernels.
    #[arg(long, value_enum, default_value_t = LevelArg::Op)]
    pub level: LevelArg,
    /// Output folder; the result goes to DIR/compare/memory_compare_{ts}.csv.
    #[arg(
        short = 'o',
        long = "output",
        value_name = "DIR",
        default_value = "memscopeDumpResults"
    )]
    pub output: PathBuf,
    /// Add memscope's Step column (the step each op or kernel started in) after msMemScope's
    /// six columns; without it the file has msMemScope's exact header.
    #[arg(long = "step-column")]
    pub step_column: bool,
    /// Messages on stderr: debug or info (notes and warnings), warning (warnings only), error
    /// (neither); msMemScope's `--log-level`.
    #[arg(long = "log-level", value_name = "LEVEL", default_value = "info",
          value_parser = |s: &str| LogLevel::parse(s).map_err(|e| e.0))]
    pub log_level: LogLevel,
    /// Output directories that hold several runs: which run of each (`N,M`: base, compare;
    /// their numbers as memscope lists them) [default: the newest].
    #[arg(long, value_name = "N[,M]", allow_hyphen_values = true)]
    pub run: Option<String>,
}

impl CompareArgs {
    /// Prints a note on stderr unless `--log-level` is warning or error.
    pub(super) fn note(&self, msg: &str) {
        if self.log_level <= LogLevel::Info {
            eprintln!("memscope: note: {msg}");
        }
    }

    /// Prints a warning on stderr unless `--log-level` is error.
    pub(super) fn warn(&self, msg: &str) {
        if self.log_level <= LogLevel::Warning {
            eprintln!("memscope: warning: {msg}");
        }
    }
}

/// Runs `memscope compare`.
///
/// # Errors
/// An unreadable or malformed input, or an output that cannot be written.
pub fn run_compare(args: &CompareArgs) -> Result<()> {
    let level = match args.level {
        LevelArg::Op => Level::Op,
        LevelArg::Kernel => Level::Kernel,
    };
    let map = device_map(args)?;
    match (args.base.is_dir(), args.compare.is_dir()) {
        (true, true) => return compare_runs::run(args, level, &map),
        (false, false) if args.run.is_some() => {
            return Err(anyhow!(
                "--run goes with output directories that hold several runs, not dump files"
            ))
        }
        (false, false) => {}
        _ => {
            return Err(anyhow!(
                "{} and {}: give two dump files or two output directories",
                args.base.display(),
                args.compare.display()
            ))
        }
    }
    let base = open(&args.base)?;
    let cmp = open(&args.compare)?;
    let mut bo = ReadOptions {
        progress: Some(progress::bar(base.name())),
        ..ReadOptions::default()
    };
    let b = compare::collect(&base, level, &mut bo).map_err(|e| anyhow!("{e}"))?;
    let mut co = ReadOptions {
        progress: Some(progress::bar(cmp.name())),
        ..ReadOptions::default()
    };
    let mut c = compare::collect(&cmp, level, &mut co).map_err(|e| anyhow!("{e}"))?;
    let mapped = compare::map_devices(&b, &mut c, &map).map_err(|e| anyhow!("{e}"))?;
    let res = compare::compare(&b, &c, level);
    if let Some(n) = mapped {
        args.note(&n);
    }
    if res.rows.is_empty() {
        return Err(anyhow!(
            "{} and {}: no {} rows on any device; nothing to compare",
            base.name(),
            cmp.name(),
            if level == Level::Op {
                "ATEN/ATB START/END"
            } else {
                "KERNEL_LAUNCH"
            }
        ));
    }
    for (f, s) in [(&base, &b), (&cmp, &c)] {
        if let Some(w) = s.stats.torn_warning(f.name()) {
            args.warn(&w);
        }
    }
    for n in &res.notes {
        args.note(n);
    }
    let path = compare::write_compare_csv_as(&args.output, "", &res.rows, args.step_column)
        .map_err(|e| {
            anyhow!(
                "cannot write {}: {e}",
                args.output.join("compare").display()
            )
        })?;
    let matched = res
        .rows
        .iter()
        .filter(|r| r.base.is_some() && r.compare.is_some())
        .count();
    say(&format!(
        "memory compare: {} row(s) ({} matched, {} base only, {} compare only) written to {}",
        res.rows.len(),
        matched,
        res.rows.iter().filter(|r| r.compare.is_none()).count(),
        res.rows.iter().filter(|r| r.base.is_none()).count(),
        path.display()
    ));
    Ok(())
}

/// The device alignment of `--ignore-device` / `--map-device`.
fn device_map(args: &CompareArgs) -> Result<compare::DeviceMap> {
    Ok(match (&args.map_device, args.ignore_device) {
        (Some(m), _) => compare::DeviceMap::Map(
            compare::parse_device_map(m).map_err(|e| anyhow!("--map-device {m}: {e}"))?,
        ),
        (None, true) => compare::DeviceMap::Ignore,
        (None, false) => compare::DeviceMap::Same,
    })
}
