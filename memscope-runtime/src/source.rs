//! Recording an adapter's own records ([`memscope_wire::records!`]): the body is encoded on the
//! hook's stack and written in the per-source envelope, so the runtime needs no adapter's code.

use crate::guard::Guard;
use memscope_wire::source::MAX_BODY;
use memscope_wire::{Record, SourceId, SourceRecord};

/// Body bytes encoded without the large buffer: every record without long texts fits, so the
/// common hook clears and copies this little.
const SMALL_BODY: usize = 128;

/// Records `rec` of source `source` at time `ts` through `g` (preceded by the caller's C stack
/// when `with_stack` and C stacks are on, as [`crate::record_with_stack`]). A record whose body
/// does not fit [`MAX_BODY`] bytes is counted as dropped. Returns whether it was written.
#[inline]
pub fn record_source<R: SourceRecord + ?Sized>(
    g: &mut Guard,
    source: SourceId,
    ts: u64,
    rec: &R,
    with_stack: bool,
) -> bool {
    in_envelope(source, ts, rec, |env| {
        if with_stack {
            crate::stack::record_with_stack(g, env)
        } else {
            g.record(env)
        }
    })
}

/// Records `rec` of source `source` at time `ts` as [`crate::record`] does: no guard (the caller
/// holds one or runs where the probe cannot recurse), no stack.
#[inline]
pub fn record_source_bare<R: SourceRecord + ?Sized>(source: SourceId, ts: u64, rec: &R) -> bool {
    in_envelope(source, ts, rec, crate::writer::record)
}

/// Hands `write` the envelope of `rec`, its body encoded on the stack.
#[inline]
fn in_envelope<R: SourceRecord + ?Sized>(
    source: SourceId,
    ts: u64,
    rec: &R,
    write: impl FnOnce(&Record<&[u8]>) -> bool,
) -> bool {
    let mut buf = [0u8; SMALL_BODY];
    match memscope_wire::envelope(rec, source, ts, &mut buf) {
        Some(env) => write(&env),
        None => in_large_envelope(source, ts, rec, write),
    }
}

/// [`in_envelope`] of a record with long texts; a body past [`MAX_BODY`] is counted as dropped.
#[cold]
#[inline(never)]
fn in_large_envelope<R: SourceRecord + ?Sized>(
    source: SourceId,
    ts: u64,
    rec: &R,
    write: impl FnOnce(&Record<&[u8]>) -> bool,
) -> bool {
    let mut buf = [0u8; MAX_BODY];
    if let Some(env) = memscope_wire::envelope(rec, source, ts, &mut buf) {
        return write(&env);
    }
    crate::drops::count(&Record::Source {
        source,
        tag: rec.tag(),
        ts,
        body: &[],
    });
    false
}
