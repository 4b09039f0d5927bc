//! Per-process event streams that are not dump files (TEAM contract 3): the replay of a kept
//! capture is one (memscope-cli implements it). Reports and exports take these beside the dump
//! readers, so they work the same over dumps and over captures.

use std::path::Path;

use super::ConsumerError;
use memscope_core::event::Event;

/// One traced process's events, replayable: every [`replay`](ProcessEvents::replay) starts
/// again from the first event.
pub trait ProcessEvents: Send + Sync + std::fmt::Debug {
    /// The process id, when known.
    fn pid(&self) -> Option<u32>;
    /// Where the events come from (e.g. the capture file), for messages and reports.
    fn origin(&self) -> &Path;
    /// Bytes one replay reads (for progress).
    fn size(&self) -> u64;
    /// Calls `visit` with every event of the process, in ID order. An error from `visit`
    /// stops the replay and comes back as it was.
    ///
    /// # Errors
    /// The source cannot be read (one line naming it), or `visit`'s error.
    fn replay(
        &self,
        visit: &mut dyn FnMut(Event) -> Result<(), ConsumerError>,
    ) -> Result<(), ConsumerError>;
}
