//! Step numbering shared by the leak and gap analyses (behaviour spec §10.1).
//!
//! * msTX: the bus counts `step start` ranges ([`memscope_core::bus::StepState`]); the range that opens
//!   step S is its boundary, its `Range_end` ends step S.
//! * Python `step()` (SYSTEM/STEP rows): call *k* ends step *k* and starts step *k + 1*, so the
//!   first boundary is step 2.
//!
//! The *allocation step* of a block is the last boundary at or before its MALLOC (0 if none).

use memscope_core::bus::BusCtx;
use memscope_core::event::{Event, EventKind, EventType};

/// Follows both step sources.
#[derive(Clone, Debug, Default)]
pub struct StepTracker {
    py_calls: u32,
    mstx_opened: u32,
    closed_max: u32,
}

impl StepTracker {
    /// Updates the state for `ev` (after the bus observed it); returns the step that `ev` ends.
    pub fn observe(&mut self, ev: &Event, ctx: &BusCtx) -> Option<u32> {
        self.mstx_opened = ctx.steps.opened;
        let mut closed = None;
        if ev.kind == EventKind::System && ev.event_type == EventType::Step {
            self.py_calls += 1;
            closed = Some(self.py_calls);
        } else if ctx.steps.closing {
            closed = ctx.steps.current;
        }
        if let Some(s) = closed {
            self.closed_max = self.closed_max.max(s);
        }
        closed
    }

    /// The step now in progress: the last boundary seen (0 before any).
    pub fn current(&self) -> u32 {
        if self.py_calls > 0 {
            self.py_calls + 1
        } else {
            self.mstx_opened
        }
    }

    /// Highest step that has ended.
    pub fn closed_max(&self) -> u32 {
        self.closed_max
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_step_calls_start_numbering_at_two() {
        let mut t = StepTracker::default();
        let ctx = BusCtx::default();
        assert_eq!(t.current(), 0);
        let step = Event::new(EventType::Step, 1, 1, 1);
        assert_eq!(t.observe(&step, &ctx), Some(1));
        assert_eq!(t.current(), 2);
        assert_eq!(t.observe(&step, &ctx), Some(2));
        assert_eq!((t.current(), t.closed_max()), (3, 2));
    }
}
