//! memscope-analysis: analyses of memory events — leaks, step compare, inefficient memory,
//! decompose, gap (issue 6; behaviour spec §10), fragmentation, figures and thresholds, diff —
//! and the one "where" rule they all answer with ([`attribution`], [`sites`]).
//!
//! Every analysis that follows a run is a bus [`Layer`]: [`online_layers`] builds them for the
//! collector (`memscope run --analysis ...`); their `finish` adds [`ReportSection`]s that the
//! collector prints at the end of the run and writes to the log. Offline, [`offline::run_layers`]
//! feeds a dump's events through the same layers, in ID order. Compare works on two files and
//! is not a layer ([`compare`]).
//!
//! Layer order matters: the inefficient layer holds events back (to annotate MALLOC rows before
//! they reach the sinks), so it comes last; the others only watch and pass events on at once,
//! so they see each event together with its own bus context (step state).
//!
//! [`ReportSection`]: memscope_core::bus::ReportSection
#![forbid(unsafe_code)]

pub use memscope_core::cann_modules as cann;
pub mod aggregate;
pub mod attribution;
pub mod compare;
pub mod decompose;
pub mod diff;
pub mod figures;
pub mod fragmentation;
pub mod gap;
pub mod host_leaks;
pub mod inefficient;
pub mod inefficient_layer;
pub mod leak_range;
pub mod leaks;
pub mod levels;
pub mod live_points;
pub mod offline;
pub mod ops;
pub mod outfile;
pub mod peak;
pub mod role_timeline;
pub mod sites;
pub mod step_stats;
pub mod steps;
pub mod thresholds;
pub mod windows;

use std::path::PathBuf;

use memscope_core::bus::Layer;
use memscope_core::event::{EventType, Inefficiency};

pub use inefficient::IneffConfig;
pub use ops::OpTracker;

/// An analysis selectable with `--analysis`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AnalysisKind {
    /// Step-based pool leaks and HAL memory live at exit.
    Leaks,
    /// early_allocation / late_deallocation / temporary_idleness.
    Inefficient,
    /// Bytes per owner chain.
    Decompose,
    /// Min/max `used` per step.
    Gap,
    /// Cross-stream races (`memscope-races`).
    Races,
}

impl AnalysisKind {
    /// Parses `leaks`, `inefficient`, `decompose`, `gap` or `races` (spaces around are ignored).
    pub fn parse(s: &str) -> Option<AnalysisKind> {
        match s.trim() {
            "leaks" => Some(AnalysisKind::Leaks),
            "inefficient" => Some(AnalysisKind::Inefficient),
            "decompose" => Some(AnalysisKind::Decompose),
            "gap" => Some(AnalysisKind::Gap),
            "races" => Some(AnalysisKind::Races),
            _ => None,
        }
    }
}

/// Which online analyses run, and their settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AnalysisConfig {
    /// Analyses to run (default: leaks).
    pub kinds: Vec<AnalysisKind>,
    /// Settings of the inefficient analysis.
    pub inefficient: IneffConfig,
    /// Cap of the inefficient layer's held-back queue, in events.
    pub hold_back_cap: usize,
    /// Where `decompose_{ts}.csv` goes (none: console/log only).
    pub output_dir: Option<PathBuf>,
    /// The run does not trace driver memory (HAL): the leak report leaves HAL out.
    pub hal_untraced: bool,
}

impl Default for AnalysisConfig {
    fn default() -> Self {
        AnalysisConfig {
            kinds: vec![AnalysisKind::Leaks],
            inefficient: IneffConfig::default(),
            hold_back_cap: inefficient_layer::DEFAULT_HOLD_BACK_CAP,
            output_dir: None,
            hal_untraced: false,
        }
    }
}

impl AnalysisConfig {
    /// Parses a comma-separated `--analysis` list such as `leaks,decompose` (empty: none).
    ///
    /// # Errors
    /// An unknown name, worded for the user.
    pub fn parse_list(list: &str) -> Result<Vec<AnalysisKind>, String> {
        list.split(',')
            .filter(|s| !s.trim().is_empty())
            .map(|s| {
                AnalysisKind::parse(s).ok_or_else(|| {
                    format!(
                        "unknown analysis \"{}\" (expected leaks, inefficient, decompose, gap or races)",
                        s.trim()
                    )
                })
            })
            .collect()
    }

    fn has(&self, k: AnalysisKind) -> bool {
        self.kinds.contains(&k)
    }
}

/// The layers of the selected analyses, in the order they must run (watchers first, the
/// event-delaying inefficient layer last). Place them after attribution and before the sinks.
pub fn online_layers(cfg: &AnalysisConfig) -> Vec<Box<dyn Layer>> {
    let mut v: Vec<Box<dyn Layer>> = Vec::new();
    if cfg.has(AnalysisKind::Leaks) {
        v.push(Box::new(if cfg.hal_untraced {
            leaks::LeakLayer::without_hal()
        } else {
            leaks::LeakLayer::new()
        }));
    }
    if cfg.has(AnalysisKind::Gap) {
        v.push(Box::new(gap::GapLayer::new()));
    }
    if cfg.has(AnalysisKind::Races) {
        v.push(Box::new(memscope_races::RaceLayer::new()));
    }
    if cfg.has(AnalysisKind::Decompose) {
        v.push(Box::new(decompose::DecomposeLayer::new(
            cfg.output_dir.clone(),
        )));
    }
    if cfg.has(AnalysisKind::Inefficient) {
        v.push(Box::new(inefficient_layer::InefficientLayer::annotating(
            cfg.inefficient.clone(),
            cfg.hold_back_cap,
        )));
    }
    v
}

/// msMemScope's name of a framework pool in leak reports.
pub fn pool_name(t: EventType) -> &'static str {
    match t {
        EventType::Pta => "Pytorch Caching memory pool",
        EventType::PtaWorkspace => "Pytorch Workspace memory pool",
        EventType::Atb => "ATB memory pool",
        EventType::MindSpore => "Mindspore memory pool",
        EventType::Hal => "Hal memory",
        _ => "memory",
    }
}

/// Bytes in MiB (msMemScope prints these as `Mb(s)`).
pub fn mib(bytes: u64) -> f64 {
    bytes as f64 / 1_048_576.0
}

/// Parses a `--types` list (`early_allocation,late_deallocation,...`).
///
/// # Errors
/// An unknown type name.
pub fn parse_types(list: &str) -> Result<Vec<Inefficiency>, String> {
    list.split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| {
            Inefficiency::parse(s.trim()).ok_or_else(|| {
                format!("unknown inefficient type \"{}\" (expected early_allocation, late_deallocation or temporary_idleness)", s.trim())
            })
        })
        .collect()
}
