//! `memscope export --to <format> INPUT... -o OUT`: the events of runs and dumps in other
//! formats. Each format lives in its own module; this file only parses the command and
//! dispatches.
//!
//! * `memory-viz`, `perfetto`, `parquet`: `memscope_export` (viewer and engine formats), over
//!   run output directories (any tree of them), process directories and dump files.

use std::path::PathBuf;

use anyhow::{anyhow, Result};
use clap::{Args, ValueEnum};

use memscope_export::{ProcessInput, Summary};

#[path = "export/bar.rs"]
mod bar;

/// `--to` of `memscope export`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ExportFormat {
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
    /// Run output directories (searched for dump files), process directories or dump files
    /// (memscope_dump_*.csv or .db of memscope or msMemScope).
    #[arg(required = true, value_name = "INPUT")]
    pub inputs: Vec<PathBuf>,
    /// Output: the .pickle (a directory of them when the input holds several processes),
    /// the .pftrace, or the Parquet dataset directory. Never overwritten.
    #[arg(short = 'o', long = "output", value_name = "OUT")]
    pub output: PathBuf,
}

fn resolve(args: &ExportArgs, progress: &mut bar::Bar) -> Result<Vec<ProcessInput>> {
    let (procs, notes) =
        memscope_export::resolve(&args.inputs, None, progress).map_err(|e| anyhow!("{e}"))?;
    for n in notes {
        eprintln!("memscope: note: {n}");
    }
    Ok(procs)
}

#[cfg(feature = "parquet")]
fn parquet(procs: &[ProcessInput], args: &ExportArgs, bar: &mut bar::Bar) -> Result<Summary> {
    memscope_export::parquet::export(procs, &args.output, bar).map_err(|e| anyhow!("{e}"))
}

#[cfg(not(feature = "parquet"))]
fn parquet(_: &[ProcessInput], _: &ExportArgs, _: &mut bar::Bar) -> Result<Summary> {
    Err(anyhow!(
        "--to parquet: this memscope was built without Parquet support (cargo feature `parquet` of memscope-cli, on by default)"
    ))
}

/// Runs `memscope export`.
///
/// # Errors
/// Bad or unreadable inputs, an output that exists or cannot be written.
pub fn run_export(args: &ExportArgs) -> Result<()> {
    let mut bar = bar::Bar::new();
    let procs = resolve(args, &mut bar)?;
    let summary = match args.to {
        ExportFormat::MemoryViz => {
            memscope_export::memory_viz::export(&procs, &args.output, &mut bar)
                .map_err(|e| anyhow!("{e}"))?
        }
        ExportFormat::Perfetto => memscope_export::perfetto::export(&procs, &args.output, &mut bar)
            .map_err(|e| anyhow!("{e}"))?,
        ExportFormat::Parquet => parquet(&procs, args, &mut bar)?,
    };
    finish(&mut bar, summary)
}

fn finish(bar: &mut bar::Bar, s: Summary) -> Result<()> {
    use std::io::Write;
    bar.done();
    for n in &s.notes {
        eprintln!("memscope: note: {n}");
    }
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "exported {} event(s) of {} process(es): {} file(s), {} bytes",
        s.events,
        s.processes,
        s.files.len(),
        s.bytes
    );
    for f in &s.files {
        let _ = writeln!(out, "  {}", f.display());
    }
    Ok(())
}
