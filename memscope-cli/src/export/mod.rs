//! The formats of `memscope export`, one module each ([`dumps`] makes both csv and db), and
//! what the viewer formats share: the processes of the inputs ([`processes`]) and the
//! progress bar ([`bar`]). The arguments ([`ExportArgs`]) are here too, so each format reads
//! them without going back to the command (`crate::export_cmd` parses and dispatches).

pub mod bar;
pub mod dumps;
pub mod memory_viz;
pub mod parquet;
pub mod perfetto;
pub mod processes;

use std::path::PathBuf;

use clap::{Args, ValueEnum};

/// `--to` of `memscope export`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ExportFormat {
    /// msMemScope CSV dumps, the rows `memscope run` writes (HOST rows included), from captures.
    Csv,
    /// memscope's SQLite dumps, as `--format db` writes them, from captures.
    Db,
    /// PyTorch memory snapshot pickle for pytorch.org/memory_viz and MindStudio Insight.
    MemoryViz,
    /// Perfetto trace (protobuf TrackEvent) for ui.perfetto.dev.
    Perfetto,
    /// Hive-partitioned Parquet dataset (events/rank=R/pid=P/part-N.parquet) for SQL engines.
    Parquet,
}

/// `memscope export --to FORMAT INPUT... -o OUT`.
#[derive(Clone, Debug, Args)]
pub struct ExportArgs {
    /// Output format.
    #[arg(long = "to", value_enum, value_name = "FORMAT")]
    pub to: ExportFormat,
    /// Run output directories, process directories (`msmemscope_<pid>_<ts>_ascend/`), captures
    /// (`*.mscap`) or, for the viewer formats, dump files (memscope_dump_*.csv or .db of
    /// memscope or msMemScope). The viewer formats read a process directory that holds a
    /// capture from the capture, not from its dumps (the capture also holds the HOST rows
    /// `memscope run` writes only with --host-rows).
    #[arg(required = true, value_name = "INPUT")]
    pub inputs: Vec<PathBuf>,
    /// Output: for csv|db the directory that gets the run's layout (created if missing); else
    /// the .pickle (a directory of them when the input holds several processes), the .pftrace,
    /// or the Parquet dataset directory, never overwritten.
    #[arg(short = 'o', long = "output", value_name = "OUT")]
    pub output: PathBuf,
    /// No summary.
    #[arg(short, long)]
    pub quiet: bool,
    /// Which run of an output directory that holds several (`N`, or `N,M,…`: one per input,
    /// the runs' numbers as memscope lists them) [default: the newest].
    #[arg(long, value_name = "N[,M]", allow_hyphen_values = true)]
    pub run: Option<String>,
}
