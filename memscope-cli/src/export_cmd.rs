//! `memscope export --to <format> INPUT... -o OUT` (TEAM contract 2): views made from kept
//! captures. Each format lives in its own module under `export/`.

use std::path::PathBuf;

/// Options of `memscope export`.
#[derive(clap::Args, Debug)]
pub struct ExportArgs {
    /// Output format: csv or db (msMemScope dump files, the rows `memscope run` writes, HOST
    /// rows included).
    #[arg(long = "to", value_name = "FORMAT")]
    pub to: String,
    /// Captures (`*.mscap`), process directories (`msmemscope_<pid>_<ts>_ascend/`) or run
    /// output directories.
    #[arg(value_name = "INPUT", required = true, num_args = 1..)]
    pub inputs: Vec<PathBuf>,
    /// Output directory (created if missing); gets the run's layout.
    #[arg(short = 'o', long = "output", value_name = "OUT")]
    pub out: PathBuf,
    /// No summary.
    #[arg(short, long)]
    pub quiet: bool,
}

/// Runs `memscope export`.
///
/// # Errors
/// Bad format, input or output — one line naming it.
pub fn run(a: &ExportArgs) -> anyhow::Result<()> {
    match a.to.as_str() {
        "csv" => crate::export::dumps::export(a, memscope_core::config::Format::Csv),
        "db" => crate::export::dumps::export(a, memscope_core::config::Format::Db),
        other => anyhow::bail!("--to {other}: unknown format (expected csv or db)"),
    }
}
