//! `memscope export --to <format> INPUT... -o OUT` (TEAM contract 2): the events of runs in
//! other forms. This file only parses the command and dispatches; each format lives in its own
//! module under `export/`:
//!
//! * `csv`, `db` ([`crate::export::dumps`]): the dump files `memscope run` writes, made again
//!   from kept captures (HOST rows included).
//! * `memory-viz`, `perfetto`, `parquet` ([`crate::export::memory_viz`],
//!   [`crate::export::perfetto`], [`crate::export::parquet`]; the formats themselves are in
//!   `memscope_export`): viewer and engine formats, over run output directories (any tree of
//!   them), process directories, dump files and captures (replayed through
//!   [`crate::capture_input`]; a process directory holding a capture is read from it).

use crate::export::{self, ExportArgs, ExportFormat};

/// Runs `memscope export`.
///
/// # Errors
/// Bad or unreadable inputs, an output that exists or cannot be written — one line naming it.
pub fn run(a: &ExportArgs) -> anyhow::Result<()> {
    match a.to {
        ExportFormat::Csv => export::dumps::export(a, memscope_collect::config::Format::Csv),
        ExportFormat::Db => export::dumps::export(a, memscope_collect::config::Format::Db),
        ExportFormat::MemoryViz => export::memory_viz::export(a),
        ExportFormat::Perfetto => export::perfetto::export(a),
        ExportFormat::Parquet => export::parquet::export(a),
    }
}
