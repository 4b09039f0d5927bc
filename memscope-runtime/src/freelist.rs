//! The free list of partly filled chunks: chunks a thread left behind at exit, ready to be
//! continued by another thread (so a program that starts many short threads keeps filling the
//! same few chunks and mappings). Fixed array of slots, each a tiny state machine; no
//! allocation, no locks, no waiting (usable from signal handlers).

use core::ptr::null_mut;
use core::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use memscope_wire::ChunkState;

const FREE_SLOTS: usize = 64;
const EMPTY: u32 = 0;
const BUSY: u32 = 1;
const FULL: u32 = 2;

struct Slot {
    state: AtomicU32,
    base: AtomicPtr<u8>,
    last_ts: AtomicU64,
    last_addr: AtomicU64,
}

static FREE: [Slot; FREE_SLOTS] = [const {
    Slot {
        state: AtomicU32::new(EMPTY),
        base: AtomicPtr::new(null_mut()),
        last_ts: AtomicU64::new(0),
        last_addr: AtomicU64::new(0),
    }
}; FREE_SLOTS];
static FREE_COUNT: AtomicUsize = AtomicUsize::new(0);

/// Parks a partly filled chunk with its delta state; `false` if the list is full.
pub(crate) fn push_free(base: *mut u8, st: ChunkState) -> bool {
    for s in &FREE {
        if s.state
            .compare_exchange(EMPTY, BUSY, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            s.base.store(base, Ordering::Relaxed);
            s.last_ts.store(st.last_ts, Ordering::Relaxed);
            s.last_addr.store(st.last_addr, Ordering::Relaxed);
            s.state.store(FULL, Ordering::Release);
            FREE_COUNT.fetch_add(1, Ordering::Relaxed);
            return true;
        }
    }
    false
}

/// Takes a parked chunk, if any.
pub(crate) fn pop_free() -> Option<(*mut u8, ChunkState)> {
    if FREE_COUNT.load(Ordering::Relaxed) == 0 {
        return None;
    }
    for s in &FREE {
        if s.state
            .compare_exchange(FULL, BUSY, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            let base = s.base.load(Ordering::Relaxed);
            let st = ChunkState {
                last_ts: s.last_ts.load(Ordering::Relaxed),
                last_addr: s.last_addr.load(Ordering::Relaxed),
            };
            s.state.store(EMPTY, Ordering::Release);
            FREE_COUNT.fetch_sub(1, Ordering::Relaxed);
            return Some((base, st));
        }
    }
    None
}

/// Fork child: empties the list, calling `unmap` for each parked chunk (the parent's, mapped in
/// the child's copy of the address space). Runs on the only thread of the child.
pub(crate) fn clear_after_fork(unmap: impl Fn(*mut u8)) {
    for s in &FREE {
        if s.state.load(Ordering::Relaxed) == FULL {
            let b = s.base.load(Ordering::Relaxed);
            if !b.is_null() {
                unmap(b);
            }
        }
        s.base.store(null_mut(), Ordering::Relaxed);
        s.state.store(EMPTY, Ordering::Relaxed);
    }
    FREE_COUNT.store(0, Ordering::Relaxed);
}
