//! Counting what the probe could not record: per event kind, in the stream header
//! (`FH_DROPPED` and the `FH_DROPPED_KINDS` table), which the collector reads even after the
//! process was killed.
//!
//! Drops counted before the header exists (init still running on another thread) are kept
//! aside and moved in when it is mapped. Drops of a fork child counted before the probe's child
//! handler ran (another library's atfork handler allocating) are kept apart from the parent's
//! header, which the child still has mapped, and become the child's own. Records that are not
//! events ([`Record::drop_slot`] is `None`) are never counted.

use crate::stream;
use core::sync::atomic::{AtomicU64, Ordering};
use memscope_wire::{Record, DROP_KINDS, DROP_KIND_UNKNOWN, FH_DROPPED, FH_DROPPED_KINDS};

/// Counted while no header was mapped.
static PENDING: [AtomicU64; DROP_KINDS] = [const { AtomicU64::new(0) }; DROP_KINDS];
/// Counted in a fork child before its stream was reset.
static CHILD: [AtomicU64; DROP_KINDS] = [const { AtomicU64::new(0) }; DROP_KINDS];
/// Hooks that gave up waiting for another thread's init, per adapter bit: only those of the
/// adapters the settings select are drops.
static WAITED: [AtomicU64; 32] = [const { AtomicU64::new(0) }; 32];

/// Counts one drop of `rec`'s kind (nothing when `rec` is not an event).
#[cold]
#[inline(never)]
pub(crate) fn count(rec: &Record<&[u8]>) {
    if let Some(i) = rec.drop_slot() {
        add(i, 1);
    }
}

/// Adds `n` drops to counter `i`.
pub(crate) fn add(i: usize, n: u64) {
    let i = i.min(DROP_KINDS - 1);
    let h = stream::header();
    if h.is_null() {
        PENDING[i].fetch_add(n, Ordering::Relaxed);
        // The header may have been published meanwhile, after its creator moved the pending
        // counts in: move ours too (each count is moved exactly once, by a swap).
        if !stream::header().is_null() {
            flush_pending();
        }
    } else {
        add_to_header(h, i, n);
    }
}

fn add_to_header(h: *mut u8, i: usize, n: u64) {
    // SAFETY: the header stays mapped while `stream::header()` returns it (only a fork child,
    // single threaded, unmaps it); FH_DROPPED and the table are 8-aligned u64 fields inside the
    // header (FH_DROPPED_KINDS + 8 * DROP_KINDS <= FH_EXE).
    unsafe {
        (*h.add(FH_DROPPED).cast::<AtomicU64>()).fetch_add(n, Ordering::Relaxed);
        (*h.add(FH_DROPPED_KINDS + 8 * i).cast::<AtomicU64>()).fetch_add(n, Ordering::Relaxed);
    }
}

/// Moves the pending counts into the header (called once it is published).
pub(crate) fn flush_pending() {
    let h = stream::header();
    if h.is_null() {
        return;
    }
    for (i, p) in PENDING.iter().enumerate() {
        let n = p.swap(0, Ordering::Relaxed);
        if n > 0 {
            add_to_header(h, i, n);
        }
    }
}

/// A record made in a fork child before the probe's child handler ran.
pub(crate) fn count_in_fork_child(rec: &Record<&[u8]>) {
    if let Some(i) = rec.drop_slot() {
        CHILD[i.min(DROP_KINDS - 1)].fetch_add(1, Ordering::Relaxed);
    }
}

/// A hook of adapter bit `bit` forwarded unrecorded because init ran on another thread for
/// longer than the hook waits.
pub(crate) fn count_init_wait(bit: u32) {
    let b = bit.trailing_zeros() as usize;
    if let Some(w) = WAITED.get(b) {
        w.fetch_add(1, Ordering::Relaxed);
    }
    if crate::state::init_state() != crate::InitState::Initializing {
        fold_init_waits();
    }
}

/// At the end of init (and after a late count): the waits of selected adapters become drops of
/// unknown kind, the others are forgotten.
pub(crate) fn fold_init_waits() {
    let selected = crate::settings::adapters() | crate::PLUGIN_BIT;
    let ready = crate::state::init_state() == crate::InitState::Ready;
    for (b, w) in WAITED.iter().enumerate() {
        if w.load(Ordering::Relaxed) == 0 {
            continue;
        }
        let n = w.swap(0, Ordering::Relaxed);
        if ready && selected & (1u32 << b) != 0 {
            add(DROP_KIND_UNKNOWN, n);
        }
    }
}

/// Fork child, in the probe's child handler: the parent's pending counts are not ours; what the
/// child counted before the handler is.
pub(crate) fn after_fork_child() {
    for (p, c) in PENDING.iter().zip(&CHILD) {
        p.store(c.swap(0, Ordering::Relaxed), Ordering::Relaxed);
    }
    for w in &WAITED {
        w.store(0, Ordering::Relaxed);
    }
}
