//! What a finished process leaves behind for the run's summary, index and views.

use memscope_core::bus::ReportSection;
use memscope_core::event::EventKind;
use memscope_stream::capture::CaptureStats;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// What a finished process leaves behind for the summary.
#[derive(Clone, Debug, Default)]
pub struct ProcessSummary {
    /// Process id.
    pub pid: u32,
    /// Its output directory.
    pub project_dir: PathBuf,
    /// Rows written, per kind (each event once, however many files it was copied into).
    pub counts: BTreeMap<EventKind, u64>,
    /// Events typed, per kind (written or not).
    pub typed: BTreeMap<EventKind, u64>,
    /// Device-less rows, each copied into every device file.
    pub device_less: u64,
    /// Dump files and their rows.
    pub files: Vec<(PathBuf, u64)>,
    /// Events the probe dropped.
    pub dropped: u64,
    /// Report sections of the layers (dump files, analyses).
    pub report: Vec<ReportSection>,
    /// Executable of the first image.
    pub exe: String,
    /// The kept capture and its figures.
    pub capture: Option<(PathBuf, CaptureStats)>,
    /// Whether HOST rows were left out of the dumps (`host_rows` off).
    pub host_rows_off: bool,
    /// The process's rank environment as its probe recorded it (`RANK`, `LOCAL_RANK`,
    /// `WORLD_SIZE`, `ASCEND_RT_VISIBLE_DEVICES`, …; the latest image's; issue 18).
    pub rank_env: Vec<(String, String)>,
    /// The device mapping used for its rows (logical index → physical id).
    pub visible_devices: Vec<u32>,
    /// The status its last image passed to `exit`, if it exited through `exit`.
    pub exit_status: Option<i32>,
    /// Parent process id (of its first image).
    pub ppid: u32,
    /// Executable of each image, in exec order.
    pub image_exes: Vec<String>,
    /// A launcher or wrapper helper of the job (`memscope-cli/src/helpers.rs`): no directory, no console
    /// line.
    pub helper: bool,
    /// Peak `used` bytes per device-memory pool (`Event Type`: PTA, HAL, …; the highest of its
    /// devices), over every MALLOC typed (the per-rank table, issue 18).
    pub peaks: BTreeMap<String, u64>,
    /// Aggregate mode (`--aggregate`, issue 38): per-site totals, no rows.
    pub aggregate: bool,
    /// Outputs that could not be written (a dump file cut short by a full disk or an I/O
    /// error, a layer that failed at its end): the process's directory keeps its
    /// incomplete marker, so `memscope recover` redoes it from the spool.
    pub write_failures: u64,
    /// Stream chunks that did not decode (their rest skipped): a damaged spool.
    pub corrupt_chunks: u64,
}
