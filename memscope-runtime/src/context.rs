//! Context records written before a row: a service of the record path for every adapter.
//!
//! A context provider (today the probe's Python stacks, `memscope-probe/src/python/stack.rs`)
//! registers one function; [`crate::record`] calls it on the writing thread just before each
//! record that becomes a row, with that record's time stamp. The provider writes what changed
//! since the thread's last row (a `PyStack` record, definitions first) through the runtime's
//! normal record path, so no adapter record format carries the context and every adapter gets
//! it. Definitions, the provider's own records and the Python tracer's call/return records do
//! not trigger it (that also keeps it from re-entering itself).

use core::sync::atomic::{AtomicUsize, Ordering};
use memscope_wire::Record;

/// A context provider: called with the time stamp of the row about to be written.
pub type ContextFn = fn(ts: u64);

static HOOK: AtomicUsize = AtomicUsize::new(0);

/// Registers `f` as the context provider (the last registration wins).
pub fn set_context_hook(f: ContextFn) {
    HOOK.store(f as usize, Ordering::Release);
}

/// Writes the `Shadow` record announcing `rec` when it is an allocation or a free (the memory
/// hooks record those outside windows too, see [`crate::tracking`]); `true` when it did.
#[cold]
fn shadow_marker(rec: &Record<&[u8]>) -> bool {
    use memscope_wire::EventKind;
    if !matches!(rec.event_kind(), Some(EventKind::Malloc | EventKind::Free)) {
        return false;
    }
    let Some(ts) = rec.ts() else {
        return false;
    };
    crate::writer::record_raw(&Record::Shadow { ts });
    true
}

/// Whether `rec` becomes a row that takes context (false for definitions, thread switches,
/// owner pushes, the tracer's call/return records and the context records themselves).
#[inline]
fn takes_context(rec: &Record<&[u8]>) -> bool {
    !matches!(
        rec,
        Record::Thread { .. }
            | Record::StackDef { .. }
            | Record::TextDef { .. }
            | Record::EventTypeDef { .. }
            | Record::Module { .. }
            | Record::ThreadDevice { .. }
            | Record::OwnerPush { .. }
            | Record::OwnerPop { .. }
            | Record::PyCodeDef { .. }
            | Record::PyCall { .. }
            | Record::PyReturn { .. }
            | Record::PyTrace { .. }
            | Record::PyFrameDef { .. }
            | Record::PyStack { .. }
            | Record::WatchDump { .. }
            | Record::ProcessSample { .. }
            | Record::DeviceSample { .. }
            | Record::Shadow { .. }
    )
}

/// Runs the provider for `rec`, if one is registered and `rec` takes context. An allocation or
/// free recorded outside a collection window gets a `Shadow` record instead (no context: the
/// collector writes no stacks on those rows).
#[inline]
pub(crate) fn before_record(rec: &Record<&[u8]>) {
    if !crate::state::recording() && shadow_marker(rec) {
        return;
    }
    let h = HOOK.load(Ordering::Acquire);
    if h == 0 || !takes_context(rec) {
        return;
    }
    if let Some(ts) = rec.ts() {
        // SAFETY: a non-zero HOOK was stored from a `ContextFn` by `set_context_hook`.
        let f: ContextFn = unsafe { core::mem::transmute::<usize, ContextFn>(h) };
        f(ts);
    }
}
