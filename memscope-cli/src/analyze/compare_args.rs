//! The arguments of `memscope compare` (dump files or run directories).

use std::path::PathBuf;

use clap::Args;

use memscope_collect::config::LogLevel;

use super::LevelArg;

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
