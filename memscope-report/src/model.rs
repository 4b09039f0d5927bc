//! The data embedded in the page: one JSON document (`<script type="application/json"
//! id="report-data">`), read by `assets/report.js`. Every time is ns since the run's first
//! event (`RunData::t0_ns`, a decimal string since it does not fit a JSON double); every size is
//! bytes. Lists that could grow with the run are capped, and say how many entries they left out.

use std::collections::BTreeMap;

use serde::Serialize;

#[path = "model_compare.rs"]
mod compare;
pub use compare::{CompareAgg, CompareData, CompareLevel, CompareRowData};

/// Version of this layout, checked by the page.
pub const SCHEMA: &str = "memscope-report/1";

/// The whole document.
#[derive(Clone, Debug, Serialize)]
pub struct ReportData {
    /// [`SCHEMA`].
    pub schema: &'static str,
    /// Local time the report was written (RFC 3339).
    pub generated: String,
    /// `memscope <version>`.
    pub tool: String,
    /// One run, or two (base first) for a compare report.
    pub runs: Vec<RunData>,
    /// Op/kernel compare of the two runs.
    pub compare: Option<CompareData>,
    /// The +/− view of the two runs: live memory by site and owner (issue 24).
    pub diff: Option<crate::diff_view::DiffData>,
    /// The caps the data was cut to.
    pub limits: Limits,
}

/// Caps applied to the data (see [`crate::Budget`]).
#[derive(Clone, Debug, Serialize)]
pub struct Limits {
    /// Time buckets per plotted series (each keeps its first, lowest, highest and last point).
    pub series_buckets: usize,
    /// Rows per table.
    pub table_rows: usize,
    /// Nodes per flame graph.
    pub tree_nodes: usize,
    /// Largest page allowed, bytes.
    pub max_bytes: usize,
}

/// One run: every process of a run output directory, or one dump file.
#[derive(Clone, Debug, Serialize)]
pub struct RunData {
    /// What the user named (directory or file).
    pub label: String,
    /// The dump files read.
    pub inputs: Vec<String>,
    /// Timestamp of the first event of the run, ns since the epoch, as a decimal string.
    pub t0_ns: String,
    /// From the first to the last event.
    pub duration_ns: u64,
    /// Rows read.
    pub events: u64,
    /// Processes with events, in input order.
    pub processes: Vec<ProcessData>,
    /// Peak of each process side by side.
    pub overview: Overview,
    /// Warnings about the inputs (a torn last row left out), for the command to print; not
    /// part of the page.
    #[serde(skip)]
    pub warnings: Vec<String>,
}

/// One traced process.
#[derive(Clone, Debug, Serialize)]
pub struct ProcessData {
    /// Process id (`None`: rows without one).
    pub pid: Option<u32>,
    /// `pid 1234`.
    pub label: String,
    /// Directory (or file) it was read from.
    pub source: String,
    /// Rows.
    pub events: u64,
    /// Rows per `Event` column value.
    pub counts: BTreeMap<String, u64>,
    /// First and last event.
    pub start: u64,
    /// Last event.
    pub end: u64,
    /// Devices seen (`0`, `cpu`).
    pub devices: Vec<String>,
    /// Whether MALLOC rows carried Python / C stacks.
    pub has_py_stacks: bool,
    /// See `has_py_stacks`.
    pub has_c_stacks: bool,
    /// Memory over time.
    pub series: Vec<SeriesData>,
    /// The process's device memory over time, for the overview (HAL, else pools, else HOST).
    pub headline: Option<SeriesData>,
    /// Steps.
    pub steps: Vec<StepData>,
    /// Steps left out of `steps` (evenly: every k-th step is kept).
    pub steps_omitted: u64,
    /// msTX marks and ranges.
    pub marks: Vec<MarkData>,
    /// Marks left out of `marks` (evenly).
    pub marks_omitted: u64,
    /// Leak analysis.
    pub leaks: LeakData,
    /// Where memory goes: peak and end of each allocator.
    pub allocators: Vec<AllocatorData>,
    /// Inefficient-memory analysis.
    pub inefficient: IneffData,
    /// What holds the memory: bytes by role over time, per step, at the peak (issue 25).
    pub roles: RolesData,
    /// The pools' fragmentation over time and the OOM verdicts (issue 25).
    pub fragmentation: FragData,
    /// The analyses' console text (as `memscope analyze` prints it).
    pub text: Vec<TextSection>,
}

/// A plotted level (see `memscope_analysis::levels`).
#[derive(Clone, Debug, Serialize)]
pub struct SeriesData {
    /// Device (`0`, `cpu`).
    pub device: String,
    /// Allocator label (`PTA`, `HAL`, `HOST pinned`).
    pub pool: String,
    /// `allocated`, `reserved`, or `sampled` (the memory samples of `--sample`: `RSS (sampled)`
    /// or `used (sampled)`, and `untracked`, on `cpu` or an NPU).
    pub what: &'static str,
    /// Times of the points.
    pub t: Vec<u64>,
    /// Values of the points.
    pub v: Vec<i64>,
    /// Time of the highest value.
    pub peak_t: u64,
    /// The highest value.
    pub peak_v: i64,
    /// The value at the end.
    pub last_v: i64,
    /// Points received before decimation.
    pub raw_points: u64,
}

/// One step.
#[derive(Clone, Debug, Serialize)]
pub struct StepData {
    /// Number, from 1.
    pub step: u32,
    /// Start.
    pub start: u64,
    /// End, `None` while open at the end of the run.
    pub end: Option<u64>,
    /// Figures per level.
    pub levels: Vec<StepLevelData>,
}

/// Figures of one level in one step.
#[derive(Clone, Debug, Serialize)]
pub struct StepLevelData {
    /// Device.
    pub device: String,
    /// Allocator label.
    pub pool: String,
    /// Highest allocated bytes.
    pub peak: i64,
    /// Allocated at the end of the step.
    pub end: i64,
    /// end − allocated at the start of the step.
    pub delta: i64,
    /// Highest reserved bytes (pools).
    pub reserved_peak: Option<i64>,
    /// MALLOC rows.
    pub mallocs: u64,
    /// FREE rows.
    pub frees: u64,
    /// Gap analysis: lowest `used` in the step (PTA, ATB, MindSpore; steps ≥ 2).
    pub gap_min: Option<i64>,
    /// Gap analysis: highest `used` in the step.
    pub gap_max: Option<i64>,
    /// Gap analysis: min/max in percent.
    pub gap_ratio: Option<f64>,
}

/// An msTX mark (or range edge) for the time axis.
#[derive(Clone, Debug, Serialize)]
pub struct MarkData {
    /// Time.
    pub t: u64,
    /// Message.
    pub name: String,
    /// `Mark`, `Range_start`, `Range_end`.
    pub kind: String,
}

/// Results of the leak analysis.
#[derive(Clone, Debug, Serialize, Default)]
pub struct LeakData {
    /// Pool leaks (capped).
    pub pool: Vec<LeakRow>,
    /// Pool leaks in all.
    pub pool_count: u64,
    /// Bytes of all pool leaks.
    pub pool_bytes: u64,
    /// Highest step that ended (blocks of step 1 and of the last ended step are not judged).
    pub steps_ended: u32,
    /// Whether any framework-pool block was recorded (else no leak was looked for: the report
    /// says "not recorded", never "0").
    pub pool_recorded: bool,
    /// HAL blocks live at exit (capped).
    pub hal: Vec<HalRow>,
    /// HAL blocks live at exit in all.
    pub hal_count: u64,
    /// Their bytes.
    pub hal_bytes: u64,
}

/// One pool leak.
#[derive(Clone, Debug, Serialize)]
pub struct LeakRow {
    /// MALLOC ID.
    pub id: u64,
    /// Time of the MALLOC.
    pub t: Option<u64>,
    /// Device.
    pub device: String,
    /// Pool.
    pub pool: String,
    /// Bytes.
    pub size: u64,
    /// `0x…`.
    pub addr: String,
    /// Step allocated in.
    pub step: u32,
    /// Op or kernel.
    pub under: String,
    /// Owner chain.
    pub owner: Option<String>,
    /// Python stack.
    pub py_stack: Option<String>,
    /// C stack.
    pub c_stack: Option<String>,
}

/// One HAL block live at exit.
#[derive(Clone, Debug, Serialize)]
pub struct HalRow {
    /// Device.
    pub device: String,
    /// `0x…`.
    pub addr: String,
    /// Bytes.
    pub size: u64,
    /// Where it was allocated (`frame ← caller`), when stacks were recorded.
    pub site: Option<String>,
}

/// Peak and end of one allocator on one device.
#[derive(Clone, Debug, Serialize)]
pub struct AllocatorData {
    /// Device.
    pub device: String,
    /// Allocator.
    pub pool: String,
    /// Bytes live at the peak.
    pub peak: u64,
    /// Time of the peak.
    pub peak_t: u64,
    /// Blocks live at the peak.
    pub peak_blocks: u64,
    /// Bytes live at the end.
    pub end: u64,
    /// Blocks live at the end.
    pub end_blocks: u64,
    /// Per moment (`peak`, `end`), the views of what was live.
    pub at: BTreeMap<&'static str, LiveView>,
}

/// What was live at one moment.
#[derive(Clone, Debug, Serialize)]
pub struct LiveView {
    /// By owner chain (from the decompose analysis).
    pub owners: Tree,
    /// By Python stack, outermost frame at the root (absent without stacks).
    pub py: Option<Tree>,
    /// By C stack.
    pub c: Option<Tree>,
    /// By Python stack, innermost frame (the allocation site) at the root.
    pub py_inverted: Option<Tree>,
    /// By C stack, innermost frame at the root.
    pub c_inverted: Option<Tree>,
    /// Top allocation sites.
    pub sites: Vec<SiteRow>,
    /// What a site is: `first frame of your code, by caller` or `op/kernel`.
    pub site_kind: &'static str,
    /// The largest blocks.
    pub blocks: Vec<BlockRow>,
}

/// A flame-graph node: name, bytes, blocks, children (largest first).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Tree {
    /// Frame or owner level.
    pub n: String,
    /// Bytes.
    pub v: u64,
    /// Blocks.
    pub b: u64,
    /// Children.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub c: Vec<Tree>,
}

/// An allocation site.
#[derive(Clone, Debug, Serialize)]
pub struct SiteRow {
    /// The first frame of the user's code (or the op name).
    pub site: String,
    /// The next frame of the user's code below it (its caller), if any.
    pub caller: Option<String>,
    /// The rule that chose the frame (`memscope_analysis::attribution::Rule::describe`; empty for
    /// ops).
    pub rule: &'static str,
    /// Bytes live.
    pub bytes: u64,
    /// Blocks live.
    pub blocks: u64,
    /// The stacks of the site's largest group (`Call Stack(Python):` and `Call Stack(C):`
    /// blocks), shown on demand.
    pub stack: String,
    /// Bytes of that group (not on the page).
    #[serde(skip)]
    pub top: u64,
}

/// A live block.
#[derive(Clone, Debug, Serialize)]
pub struct BlockRow {
    /// MALLOC ID.
    pub id: u64,
    /// Time of the MALLOC.
    pub t: u64,
    /// Bytes.
    pub size: u64,
    /// `0x…`.
    pub addr: String,
    /// Owner chain.
    pub owner: String,
    /// Op or kernel.
    pub under: String,
    /// Innermost frame (C, else Python).
    pub frame: String,
}

/// Results of the inefficient-memory analysis.
#[derive(Clone, Debug, Serialize, Default)]
pub struct IneffData {
    /// Blocks per class.
    pub counts: BTreeMap<&'static str, u64>,
    /// The annotated blocks (capped, largest first).
    pub blocks: Vec<IneffRow>,
    /// Annotated blocks in all.
    pub total: u64,
    /// Ops of idleness of the temporary_idleness rule.
    pub idle_threshold: u64,
}

/// One annotated block.
#[derive(Clone, Debug, Serialize)]
pub struct IneffRow {
    /// MALLOC ID.
    pub id: u64,
    /// Time of the MALLOC.
    pub t: u64,
    /// Device.
    pub device: String,
    /// Pool.
    pub pool: String,
    /// Bytes.
    pub size: u64,
    /// Op it was allocated in.
    pub op: String,
    /// Classes found.
    pub types: Vec<&'static str>,
}

/// One section of the console text.
#[derive(Clone, Debug, Serialize)]
pub struct TextSection {
    /// Heading.
    pub title: String,
    /// Lines.
    pub lines: Vec<String>,
}

/// Processes side by side.
#[derive(Clone, Debug, Serialize, Default)]
pub struct Overview {
    /// What `peak` measures (`HAL device memory`, …).
    pub metric: String,
    /// One row per process.
    pub rows: Vec<OverviewRow>,
    /// Imbalance of the peaks (two processes or more with device memory).
    pub imbalance: Option<Imbalance>,
}

/// One process in the overview.
#[derive(Clone, Debug, Serialize)]
pub struct OverviewRow {
    /// Index into `RunData::processes`.
    pub process: usize,
    /// Label.
    pub label: String,
    /// Devices.
    pub devices: Vec<String>,
    /// Peak of the headline series.
    pub peak: i64,
    /// Its time.
    pub peak_t: u64,
    /// End value of the headline series.
    pub end: i64,
    /// What the headline series is.
    pub metric: String,
    /// Rows.
    pub events: u64,
    /// Pool leaks.
    pub leaks: u64,
    /// Their bytes.
    pub leak_bytes: u64,
}

/// Spread of the per-process peaks.
#[derive(Clone, Debug, Serialize)]
pub struct Imbalance {
    /// Highest peak.
    pub max: i64,
    /// Its process label.
    pub max_label: String,
    /// Lowest peak.
    pub min: i64,
    /// Its process label.
    pub min_label: String,
    /// Mean of the peaks.
    pub mean: f64,
    /// (max − min) / max in percent.
    pub spread_pct: f64,
    /// max / mean.
    pub max_over_mean: f64,
}

/// Bytes by role, roles without bytes left out.
pub type RoleBytes = BTreeMap<&'static str, i64>;

/// Bytes by role at an allocator's peak and at the end.
#[derive(Clone, Debug, Serialize)]
pub struct RoleTotals {
    /// Device.
    pub device: String,
    /// Allocator.
    pub pool: String,
    /// At the allocator's peak.
    pub peak: RoleBytes,
    /// At the end.
    pub end: RoleBytes,
}

/// One allocator in one step: the role split at its highest and lowest moment.
#[derive(Clone, Debug, Serialize)]
pub struct RoleStep {
    /// Step number.
    pub step: u32,
    /// Device.
    pub device: String,
    /// Allocator.
    pub pool: String,
    /// Highest live bytes in the step.
    pub high: i64,
    /// Their split.
    pub high_roles: RoleBytes,
    /// Lowest live bytes in the step.
    pub low: i64,
    /// Their split.
    pub low_roles: RoleBytes,
}

/// The activations of one allocator at their own peak, by module path.
#[derive(Clone, Debug, Serialize)]
pub struct ActivationData {
    /// Device.
    pub device: String,
    /// Allocator.
    pub pool: String,
    /// Bytes in all.
    pub total: u64,
    /// (module path, bytes), largest first (capped).
    pub modules: Vec<(String, u64)>,
}

/// Roles of one process.
#[derive(Clone, Debug, Serialize, Default)]
pub struct RolesData {
    /// Whether any block has a role other than `temp`.
    pub any: bool,
    /// Bytes per role over time (`what` is the role): each time bucket's highest value.
    pub series: Vec<SeriesData>,
    /// Per allocator with roles.
    pub totals: Vec<RoleTotals>,
    /// Per step and allocator (capped, evenly).
    pub steps: Vec<RoleStep>,
    /// Per allocator with activations.
    pub activations: Vec<ActivationData>,
}

/// One OOM verdict (or the verdict on a request).
#[derive(Clone, Debug, Serialize)]
pub struct VerdictData {
    /// Time.
    pub t: u64,
    /// Device.
    pub device: String,
    /// Step, if any.
    pub step: Option<u32>,
    /// The verdict's words (`fragmentation`, `true shortage`, …).
    pub kind: &'static str,
    /// `asked R, free F in N extents, largest L: verdict`.
    pub headline: String,
    /// The request, bytes.
    pub request: Option<u64>,
    /// Free bytes in the pools' segments.
    pub free: u64,
    /// Free extents.
    pub extents: Option<u64>,
    /// The largest.
    pub largest: Option<u64>,
    /// Device memory: (total, free).
    pub device_mem: Option<(u64, u64)>,
    /// This process's HAL bytes.
    pub process_held: u64,
    /// Other processes' bytes.
    pub others: Option<u64>,
    /// Top holders by role, owner and frame.
    pub holders: [Vec<(String, u64)>; 3],
}

/// Fragmentation of one process.
#[derive(Clone, Debug, Serialize, Default)]
pub struct FragData {
    /// Per device and pool: `free`, `largest` (bytes) and `fragmentation` (parts per million)
    /// over time.
    pub series: Vec<SeriesData>,
    /// The OOM verdicts.
    pub verdicts: Vec<VerdictData>,
}
