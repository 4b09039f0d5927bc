//! Kept captures as export inputs (TEAM contract 3): a process whose events come from a
//! [`ProcessEvents`] source (memscope-cli's capture replay) instead of dump files.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;

use memscope_core::event::Device;
use memscope_core::reader::{ProcessEvents, ReadError};

use crate::error::ExportError;
use crate::input::{node_of, PidFilter, ProcessInput};
use crate::progress::Progress;
use crate::rank::{self, RankQuery, RunIndex};
use crate::replay::{outcome, pass, wanted, Consumer, Item, ReplayStats};

/// A capture found by the caller.
#[derive(Clone, Debug)]
pub struct Captured {
    /// The process directory holding it (`msmemscope_<pid>_<ts>_ascend/`), whose dumps are
    /// then not read; `None` for a capture outside that layout.
    pub dir: Option<PathBuf>,
    /// Its events.
    pub events: Arc<dyn ProcessEvents>,
}

/// The process of capture `c`: one replay finds its devices (for ranks and memory_viz's
/// device traces).
///
/// # Errors
/// The capture cannot be read.
pub fn process(
    c: &Captured,
    index: Option<&dyn RunIndex>,
    progress: &mut dyn Progress,
) -> Result<ProcessInput, ExportError> {
    let src = c.events.as_ref();
    progress.stage(&format!("scanning {}", src.origin().display()));
    progress.plan(src.size());
    let mut seen = BTreeSet::new();
    src.replay(&mut |ev| {
        if ev.device != Device::NotApplicable {
            seen.insert(ev.device);
        }
        Ok(())
    })
    .map_err(|e| ExportError::Other(e.to_string()))?;
    progress.advance(src.size());
    let devices: Vec<Device> = seen.into_iter().collect();
    let node = match &c.dir {
        Some(d) => node_of(d.parent()),
        None => node_of(src.origin().parent()),
    };
    let pid = src.pid();
    let rank = rank::resolve(
        &RankQuery {
            node: &node,
            dir: c.dir.as_deref(),
            pid,
            device_dirs: &[],
            device_rows: &devices,
        },
        index,
    );
    Ok(ProcessInput {
        pid,
        node,
        rank,
        dir: c.dir.clone(),
        files: Vec::new(),
        capture: Some(c.events.clone()),
        pid_filter: PidFilter::All,
        devices,
        synthetic_pid: 0,
    })
}

/// [`crate::replay::replay`] of a captured process: its events as the capture replay yields
/// them (in ID order), with `device`'s filter.
///
/// # Errors
/// The capture cannot be read, or `f`'s error.
pub(crate) fn replay(
    p: &ProcessInput,
    src: &dyn ProcessEvents,
    device: Option<Device>,
    progress: &mut dyn Progress,
    f: &mut Consumer<'_>,
) -> Result<ReplayStats, ExportError> {
    let mut stats = ReplayStats::default();
    let r = src.replay(&mut |ev| {
        if !wanted(p, device, &ev) {
            return Ok(());
        }
        stats.events += 1;
        pass(f(Item::Event(ev)))
    });
    let r = match r {
        Ok(()) => Ok(()),
        Err(e) if e.is::<ExportError>() || e.is::<crate::replay::Stopped>() => {
            Err(ReadError::Consumer(e))
        }
        // the source's own error names the capture
        Err(e) => Err(ReadError::Consumer(Box::new(ExportError::Other(
            e.to_string(),
        )))),
    };
    outcome(r, &mut stats)?;
    progress.advance(src.size());
    Ok(stats)
}
