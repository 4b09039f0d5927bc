//! memscope-export: memscope's events in the formats of the viewers and engines people already
//! use (`memscope export --to memory-viz|perfetto|parquet`).
//!
//! * [`input`] finds the traced processes of the inputs (run output directories, dump files)
//!   and what is known of each: pid, devices, rank ([`rank`]), node.
//! * [`captured`]: kept captures as inputs, replayed by the caller's
//!   [`memscope_dump::reader::ProcessEvents`] (memscope-cli's capture replay).
//! * [`replay`] feeds one process's [`memscope_core::event::Event`]s in ID order, merging the
//!   process's per-device dump files (device-less rows, copied into every file, come once).
//!   Exporters are consumers of these per-process streams, so a capture replay plugs in as one
//!   more source of the same events.
//! * [`memory_viz`]: a PyTorch memory snapshot pickle (`torch.cuda.memory._snapshot()` layout)
//!   for `pytorch.org/memory_viz` and MindStudio Insight.
//! * [`perfetto`]: a Perfetto protobuf trace (TrackEvent): memory counters, op and kernel
//!   slices, marks, flows.
//! * [`parquet`] (cargo feature `parquet`): a hive-partitioned Parquet dataset for DuckDB, Spark
//!   and DataFusion. Without the feature (arrow/parquet are a third of a release build) the
//!   module's `export` says in one line how to get it, so callers need no feature of their own.
//!
//! Every exporter streams: memory depends on the live blocks, open slices and distinct names of
//! a process, never on the number of events. Outputs are written under a temporary name and
//! renamed when complete; an existing output is never overwritten.
#![forbid(unsafe_code)]

pub mod captured;
pub mod error;
pub mod feed;
pub mod frames;
pub mod input;
pub mod memory_viz;
pub mod out_file;
#[cfg(feature = "parquet")]
pub mod parquet;
#[cfg(not(feature = "parquet"))]
#[path = "parquet_absent.rs"]
pub mod parquet;
pub mod perfetto;
pub mod process;
pub mod progress;
pub mod rank;
pub mod replay;

pub use captured::Captured;
pub use error::ExportError;
pub use input::{resolve, resolve_with, ProcessInput};
pub use progress::Progress;

/// What an export wrote, for the command's summary line.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Processes exported.
    pub processes: usize,
    /// Events read from the inputs (every pass counted once per process).
    pub events: u64,
    /// Files written.
    pub files: Vec<std::path::PathBuf>,
    /// Bytes written.
    pub bytes: u64,
    /// Remarks for the user (fallbacks taken, rows that could not be represented).
    pub notes: Vec<String>,
}
