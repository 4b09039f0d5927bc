//! The consumer's side of a replay: what it is handed ([`Item`]), what it answers ([`Flow`]),
//! and how its answers pass through a dump reader or a capture replay.

use memscope_core::event::{Device, Event};
use memscope_dump::reader::{ConsumerError, ReadError};

use crate::error::ExportError;
use crate::process::{PidFilter, ProcessInput};

/// What a replay hands its consumer.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)] // moved once per event; a box would allocate per event
pub enum Item {
    /// The next event.
    Event(Event),
    /// Everything handed over so far is void: the file turned out not to be in ID order, and
    /// its events come again from the first, sorted. The consumer drops what it built.
    Restart,
}

/// What the consumer wants after an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    /// Go on.
    Continue,
    /// Stop the replay (the consumer will replay again, e.g. in another mode).
    Stop,
}

/// What a replay went through.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplayStats {
    /// Events passed to the consumer.
    pub events: u64,
    /// Whether the consumer stopped the replay.
    pub stopped: bool,
}

#[derive(Debug)]
pub(crate) struct Stopped;

impl std::fmt::Display for Stopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("replay stopped")
    }
}

impl std::error::Error for Stopped {}

pub(crate) type Consumer<'a> = dyn FnMut(Item) -> Result<Flow, ExportError> + 'a;

/// Whether `ev` is a row of process `p` (and of `device`, or device-less, when given).
pub(crate) fn wanted(p: &ProcessInput, device: Option<Device>, ev: &Event) -> bool {
    if let PidFilter::Only(pid) = p.pid_filter {
        if ev.pid != pid {
            return false;
        }
    }
    match device {
        Some(d) => ev.device == d || ev.device == Device::NotApplicable,
        None => true,
    }
}

/// Turns the consumer's outcome into the reader's callback result.
pub(crate) fn pass(r: Result<Flow, ExportError>) -> Result<(), ConsumerError> {
    match r {
        Ok(Flow::Continue) => Ok(()),
        Ok(Flow::Stop) => Err(Box::new(Stopped)),
        Err(e) => Err(Box::new(e)),
    }
}

/// The replay's outcome from the reader's: a stop is not an error, the consumer's own error
/// comes back as it was.
pub(crate) fn outcome(
    r: Result<(), ReadError>,
    stats: &mut ReplayStats,
) -> Result<(), ExportError> {
    match r {
        Ok(()) => Ok(()),
        Err(ReadError::Consumer(e)) => {
            if e.is::<Stopped>() {
                stats.stopped = true;
                return Ok(());
            }
            match e.downcast::<ExportError>() {
                Ok(e) => Err(*e),
                Err(e) => Err(ExportError::Read(ReadError::Consumer(e))),
            }
        }
        Err(e) => Err(ExportError::Read(e)),
    }
}
