//! A source's fast path in the collector: records accounted straight from the stream, without
//! building events, when the source's rows are neither written nor analysed (issue 9: the bus
//! would move each malloc through every layer only to drop it). HOST's is the one today
//! (`adapters/host/src/fast.rs`); the pipeline drives it through [`FastPath`] so the
//! collector names no adapter.

use crate::adapter::TypeCtx;
use memscope_core::bus::ReportSection;
use memscope_core::event::Event;
use memscope_wire::Record;

/// The events one record stood for: `frees` FREE events, then `mallocs` MALLOC events (0 or
/// 1), numbered from the ID passed in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Typed {
    /// FREE events (real frees, synthetic ones of a reused address or of an exec).
    pub frees: u64,
    /// MALLOC events.
    pub mallocs: u64,
}

/// The Python stack of the thread that made a record (`--call-stack python:N`).
#[derive(Clone, Copy, Debug)]
pub struct PyStack<'a> {
    /// Identifies the stack in its process (`image << 32 | node`).
    pub key: u64,
    /// Its `Call Stack(Python)` text.
    pub text: &'a str,
}

/// Typing and leak/peak accounting of one source's records in one process, without events.
pub trait FastPath: Send {
    /// Whether `rec` is one this path accounts (`Module` records included: it symbolises the
    /// stacks of its own summaries).
    fn handles(&self, rec: &Record) -> bool;

    /// Accounts `rec` (of the image `ctx` is set to, made by a thread whose Python stack is
    /// `py`) whose first event, if any, gets ID `first_id`. Returns the events it stood for,
    /// or `None` when `rec` is not this path's.
    fn record(
        &mut self,
        ctx: &mut TypeCtx,
        rec: &Record,
        first_id: u64,
        py: Option<PyStack<'_>>,
    ) -> Option<Typed>;

    /// [`FastPath::record`] where the pipeline keeps the capture's reference to each
    /// allocation with the path's live block (`capture_ref`: the reference of `rec`'s
    /// allocation, 0 for none): returns with the events the reference of the block a free
    /// released (0 for none), so the capture keeps no map of its own. A path that keeps no
    /// tags hands back 0.
    fn record_tagged(
        &mut self,
        ctx: &mut TypeCtx,
        rec: &Record,
        first_id: u64,
        py: Option<PyStack<'_>>,
        capture_ref: u64,
    ) -> Option<(Typed, u64)> {
        let _ = capture_ref;
        self.record(ctx, rec, first_id, py).map(|t| (t, 0))
    }

    /// Bytes of the blocks live on this path now (the tracked part of a memory sample).
    fn live_bytes(&self) -> u64;

    /// Accounts an event of another source that this path's summaries count.
    fn observe(&mut self, ev: &Event);

    /// The path's report sections at the end of the process.
    fn report(&self, pid: Option<u32>) -> Vec<ReportSection>;
}
