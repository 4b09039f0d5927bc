//! What `memscope run`, `memscope collect`, `memscope recover` and `memscope export` share
//! about a collection: the online analyses each process's pipeline gets
//! ([`analysis_factory`]), and the run's configuration kept in the spool for `recover`
//! ([`RunInfo`], [`write_run_info`]).

use memscope_collect::config::{ConfigFile, RunConfig};
use memscope_collect::AnalysisFactory;
use memscope_stream::spool;
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::sync::Arc;

/// The online analyses of `--analysis` (memscope-analysis's layers), run in the
/// collector after attribution and before the dump is written; their reports end the run's
/// summary and the process log. `--steps` keeps them on (msMemScope turns every analysis off).
pub(crate) fn analysis_factory() -> AnalysisFactory {
    use memscope_analysis::{online_layers, AnalysisConfig, AnalysisKind};
    Arc::new(|cfg: &RunConfig, project: &Path| {
        let a = cfg.analysis;
        let selection = cfg.selection();
        // Leak and gap analyses judge pools and driver memory: without those sources they would
        // only print empty sections (HOST has its own leak summary).
        let device_memory = selection.adapters.iter().any(|d| d.device_memory);
        let mut kinds = Vec::new();
        for (on, k) in [
            (a.leaks && device_memory, AnalysisKind::Leaks),
            (a.gap && device_memory, AnalysisKind::Gap),
            (a.decompose, AnalysisKind::Decompose),
            (a.inefficient, AnalysisKind::Inefficient),
            (a.races, AnalysisKind::Races),
        ] {
            if on {
                kinds.push(k);
            }
        }
        let mut ac = AnalysisConfig {
            kinds,
            output_dir: Some(project.to_path_buf()),
            ..AnalysisConfig::default()
        };
        // driver memory is traced when a selected adapter makes HAL blocks (Event Type HAL)
        ac.hal_untraced = !selection
            .adapters
            .iter()
            .any(|d| d.events.contains(&"MALLOC/HAL"));
        ac.inefficient.idle_threshold = cfg.idle_threshold;
        ac.inefficient.rule = cfg.inefficient_rule;
        online_layers(&ac)
    })
}

/// What `run.json` in a spool holds.
#[derive(Debug, Serialize, Deserialize)]
pub struct RunInfo {
    /// memscope version of the run.
    pub memscope: String,
    /// The run's configuration (config.json keys).
    pub config: ConfigFile,
    /// `ASCEND_RT_VISIBLE_DEVICES` of the run.
    pub visible_devices: Vec<u32>,
    /// The job's command line (for the run index a recover writes; empty for `memscope
    /// collect`'s spool and in files of older versions).
    #[serde(default)]
    pub command: Vec<String>,
    /// When the run started, ns since the epoch (0: unknown).
    #[serde(default)]
    pub start_ns: u64,
}

/// Writes `<spool>/run.json` for `memscope recover`.
///
/// # Errors
/// The file cannot be written — one line naming it.
pub fn write_run_info(
    spool: &Path,
    cfg: &RunConfig,
    visible: &[u32],
    command: &[String],
) -> Result<(), String> {
    let info = RunInfo {
        memscope: env!("CARGO_PKG_VERSION").to_owned(),
        config: cfg.to_config_file(),
        visible_devices: visible.to_vec(),
        command: command.to_vec(),
        start_ns: crate::run_index::now_ns(),
    };
    let path = spool.join(spool::RUN_INFO);
    let text = serde_json::to_vec_pretty(&info).map_err(|e| e.to_string())?;
    memscope_dump::layout::create_new_0600(&path)
        .and_then(|(mut f, _)| std::io::Write::write_all(&mut f, &text))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}
