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
    let mut buf = [0u8; SMALL_BODY];
    match memscope_wire::envelope(rec, source, ts, &mut buf) {
        Some(env) => write(g, &env, with_stack),
        None => record_large(g, source, ts, rec, with_stack),
    }
}

/// [`record_source`] of a record with long texts.
#[cold]
#[inline(never)]
fn record_large<R: SourceRecord + ?Sized>(
    g: &mut Guard,
    source: SourceId,
    ts: u64,
    rec: &R,
    with_stack: bool,
) -> bool {
    let mut buf = [0u8; MAX_BODY];
    match memscope_wire::envelope(rec, source, ts, &mut buf) {
        Some(env) => write(g, &env, with_stack),
        None => too_large(source, ts, rec),
    }
}

#[inline]
fn write(g: &mut Guard, env: &Record<&[u8]>, with_stack: bool) -> bool {
    if with_stack {
        crate::stack::record_with_stack(g, env)
    } else {
        g.record(env)
    }
}

/// Counts a record whose body does not fit [`MAX_BODY`] as dropped.
#[cold]
fn too_large<R: SourceRecord + ?Sized>(source: SourceId, ts: u64, rec: &R) -> bool {
    crate::drops::count(&Record::Source {
        source,
        tag: rec.tag(),
        ts,
        body: &[],
    });
    false
}

/// Records `rec` of source `source` at time `ts` as [`crate::record`] does: no guard (the caller
/// holds one or runs where the probe cannot recurse), no stack.
#[inline]
pub fn record_source_bare<R: SourceRecord + ?Sized>(source: SourceId, ts: u64, rec: &R) -> bool {
    let mut buf = [0u8; SMALL_BODY];
    if let Some(env) = memscope_wire::envelope(rec, source, ts, &mut buf) {
        return crate::writer::record(&env);
    }
    bare_large(source, ts, rec)
}

/// [`record_source_bare`] of a record with long texts.
#[cold]
#[inline(never)]
fn bare_large<R: SourceRecord + ?Sized>(source: SourceId, ts: u64, rec: &R) -> bool {
    let mut buf = [0u8; MAX_BODY];
    match memscope_wire::envelope(rec, source, ts, &mut buf) {
        Some(env) => crate::writer::record(&env),
        None => too_large(source, ts, rec),
    }
}
