//! Per-thread writer: the thread's current chunk, the reentrancy guard, and record encoding.
//!
//! All per-thread state lives in one const-initialised `thread_local!` without a destructor
//! (no lazy init, no TLS-dtor registration, no allocation), read with `try_with`. Thread exit is
//! observed through a pthread key destructor, which glibc runs after the C++/Rust TLS
//! destructors, so frees made by those are still recorded; the chunk is then parked on the
//! free list for the next thread.

use crate::stream;
use crate::sys::gettid;
use core::cell::Cell;
use core::ffi::c_void;
use core::marker::PhantomData;
use core::ptr::null_mut;
use core::sync::atomic::{AtomicU32, Ordering};
use memscope_core::wire::{ChunkState, Record, CHUNK_HEADER_SIZE, CHUNK_PAYLOAD};

struct ThreadState {
    /// A hook of this thread is running (reentrancy guard).
    busy: Cell<bool>,
    /// `record` is running on this thread (a signal handler re-entering it drops its record).
    writing: Cell<bool>,
    /// Between our atfork prepare handler and the parent/child handler.
    in_fork: Cell<bool>,
    /// Stream generation for which the exit key was set on this thread (0: not set).
    key_gen: Cell<u32>,
    /// Base of the current chunk (null: none).
    chunk: Cell<*mut u8>,
    /// Committed payload bytes of the current chunk.
    used: Cell<u32>,
    /// Delta state of the current chunk.
    st: Cell<ChunkState>,
    /// Stream generation the chunk belongs to.
    gen: Cell<u32>,
    /// Cached kernel tid and the generation it was read in (fork changes it).
    tid: Cell<u32>,
    tid_gen: Cell<u32>,
}

impl ThreadState {
    const fn new() -> ThreadState {
        ThreadState {
            busy: Cell::new(false),
            writing: Cell::new(false),
            in_fork: Cell::new(false),
            key_gen: Cell::new(0),
            chunk: Cell::new(null_mut()),
            used: Cell::new(0),
            st: Cell::new(ChunkState {
                last_ts: 0,
                last_addr: 0,
            }),
            gen: Cell::new(0),
            tid: Cell::new(0),
            tid_gen: Cell::new(0),
        }
    }
}

thread_local! {
    static TS: ThreadState = const { ThreadState::new() };
}

/// pthread key whose destructor parks the exiting thread's chunk (u32::MAX: not created).
static EXIT_KEY: AtomicU32 = AtomicU32::new(u32::MAX);

/// Creates the thread-exit key; called once at init.
pub(crate) fn init_exit_key() {
    if EXIT_KEY.load(Ordering::Relaxed) != u32::MAX {
        return;
    }
    let mut key: libc::pthread_key_t = 0;
    // SAFETY: `key` is writable; `thread_exit` has the destructor signature.
    if unsafe { libc::pthread_key_create(&mut key, Some(thread_exit)) } == 0 {
        EXIT_KEY.store(key, Ordering::Release);
    }
}

unsafe extern "C" fn thread_exit(_: *mut c_void) {
    let _ = TS.try_with(|ts| {
        ts.key_gen.set(0);
        if ts.writing.get() {
            return;
        }
        let base = ts.chunk.replace(null_mut());
        if base.is_null() || ts.gen.get() != stream::gen() {
            return;
        }
        if !stream::push_free(base, ts.st.get()) {
            // SAFETY: our chunk of the current stream, no longer referenced by this thread.
            unsafe { stream::seal_and_unmap(base) };
        }
    });
}

/// RAII reentrancy guard returned by [`enter`]: while it lives, nested hooks on this thread
/// (the probe's own `mmap`, a `malloc` inside a plugin's init, …) see "busy" and only forward.
/// Not `Send`: it belongs to the thread that took it.
#[must_use = "the guard releases the thread when dropped"]
pub struct Guard {
    _not_send: PhantomData<*const ()>,
}

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = TS.try_with(|ts| ts.busy.set(false));
    }
}

/// Enters a hook on this thread. `None` when the thread is already inside a hook (reentrancy),
/// or its TLS is being torn down: the hook must then forward and record nothing.
#[inline]
pub fn enter() -> Option<Guard> {
    TS.try_with(|ts| {
        (!ts.busy.replace(true)).then_some(Guard {
            _not_send: PhantomData,
        })
    })
    .ok()
    .flatten()
}

/// Whether this thread is inside a hook (or its TLS is gone).
pub(crate) fn in_guard() -> bool {
    TS.try_with(|ts| ts.busy.get()).unwrap_or(true)
}

/// Kernel thread id of the calling thread (cached per thread; refreshed after fork).
#[inline]
pub fn tid() -> u32 {
    TS.try_with(|ts| {
        let g = stream::gen();
        if ts.tid_gen.get() != g {
            ts.tid.set(gettid());
            ts.tid_gen.set(g);
        }
        ts.tid.get()
    })
    .unwrap_or_else(|_| gettid())
}

/// Encodes `rec` into this thread's chunk and publishes it. Never fails loudly: when the
/// record cannot be written (no stream, disk full, reentered from a signal handler, TLS gone)
/// it counts one drop in the stream header and returns `false`. Inside `fork()` (between the
/// probe's atfork handlers) records are silently skipped.
pub fn record(rec: &Record<&[u8]>) -> bool {
    crate::context::before_record(rec);
    let res = TS
        .try_with(|ts| {
            if ts.in_fork.get() {
                // Inside fork(): the header may be the parent's; record nothing, count nothing.
                return None;
            }
            if ts.writing.get() {
                return Some(false);
            }
            ts.writing.set(true);
            let was_busy = ts.busy.replace(true);
            let ok = write(ts, rec);
            ts.busy.set(was_busy);
            ts.writing.set(false);
            Some(ok)
        })
        .unwrap_or(Some(false));
    match res {
        Some(true) => true,
        Some(false) => {
            stream::count_drop(1);
            false
        }
        None => false,
    }
}

#[inline]
fn write(ts: &ThreadState, rec: &Record<&[u8]>) -> bool {
    let Some(gen) = stream::open_gen() else {
        return false;
    };
    if (ts.chunk.get().is_null() || ts.gen.get() != gen) && !take_chunk(ts, gen) {
        return false;
    }
    if append(ts, rec) {
        return true;
    }
    // Full: seal this one, continue in a fresh chunk.
    let base = ts.chunk.replace(null_mut());
    // SAFETY: `base` is this thread's chunk of the current stream, dropped from its state.
    unsafe { stream::seal_and_unmap(base) };
    take_chunk(ts, gen) && append(ts, rec)
}

/// Appends to the current chunk; `false` if the record does not fit.
#[inline]
fn append(ts: &ThreadState, rec: &Record<&[u8]>) -> bool {
    let base = ts.chunk.get();
    let used = ts.used.get() as usize;
    let Some(room) = CHUNK_PAYLOAD.checked_sub(used) else {
        return false;
    };
    // SAFETY: `base` maps CHUNK_SIZE bytes; [CHUNK_HEADER_SIZE + used, CHUNK_SIZE) is the
    // unpublished tail of the payload, written only by this thread (the chunk's owner) and read
    // by the collector only after `committed` covers it.
    let out = unsafe { core::slice::from_raw_parts_mut(base.add(CHUNK_HEADER_SIZE + used), room) };
    let mut st = ts.st.get();
    match rec.encode(&mut st, out) {
        Some(n) => {
            let end = (used + n) as u32;
            ts.st.set(st);
            ts.used.set(end);
            // SAFETY: `base` is the mapped chunk; release publishes the bytes just written.
            unsafe { stream::committed(base) }.store(end, Ordering::Release);
            true
        }
        None => false,
    }
}

/// Gives this thread a chunk: a parked one (continuing its delta state) or a fresh one, and
/// writes the `Thread` record that names the new writer.
fn take_chunk(ts: &ThreadState, gen: u32) -> bool {
    if ts.key_gen.get() != gen {
        let key = EXIT_KEY.load(Ordering::Acquire);
        if key != u32::MAX {
            let token = (&EXIT_KEY as *const AtomicU32).cast::<c_void>();
            // SAFETY: `key` was created by `pthread_key_create`; the value is a non-null token
            // (never dereferenced) so the destructor runs at thread exit.
            unsafe { libc::pthread_setspecific(key, token) };
        }
        ts.key_gen.set(gen);
    }
    let tid = tid();
    for _ in 0..3 {
        let (base, used, st) = match stream::pop_free() {
            // SAFETY: a parked chunk of the current stream, now owned by this thread.
            Some((b, st)) => (
                b,
                unsafe { stream::committed(b) }.load(Ordering::Acquire),
                st,
            ),
            None => match stream::new_chunk() {
                Some(b) => (b, 0, ChunkState::default()),
                None => return false,
            },
        };
        ts.chunk.set(base);
        ts.used.set(used);
        ts.st.set(st);
        ts.gen.set(gen);
        if append(ts, &Record::Thread { tid }) {
            return true;
        }
        ts.chunk.set(null_mut());
        // SAFETY: `base` is ours and no longer referenced.
        unsafe { stream::seal_and_unmap(base) };
    }
    false
}

/// Parks this thread's chunk on the free list now, as thread exit does (tests).
#[cfg(test)]
pub(crate) fn release_thread_chunk() {
    // SAFETY: runs our own destructor logic for the current thread; the argument is unused.
    unsafe { thread_exit(null_mut()) };
}

// ---- fork handlers ---------------------------------------------------------------------------

pub(crate) extern "C" fn fork_prepare() {
    let _ = TS.try_with(|ts| ts.in_fork.set(true));
}

pub(crate) extern "C" fn fork_parent() {
    let _ = TS.try_with(|ts| ts.in_fork.set(false));
}

/// Child side: drop this thread's chunk of the parent's stream (unmap, never write), then reset
/// the stream; the child's first record opens `<spool>/<child pid>-<ns>.stream`.
pub(crate) extern "C" fn fork_child() {
    let _ = TS.try_with(|ts| {
        let base = ts.chunk.replace(null_mut());
        if !base.is_null() && ts.gen.get() == stream::gen() {
            // SAFETY: this thread's chunk of the parent's stream, inherited; unmapping it only
            // affects the child's address space.
            unsafe { stream::unmap(base) };
        }
        ts.key_gen.set(0);
    });
    stream::after_fork_child();
    crate::state::after_fork_child();
    let _ = TS.try_with(|ts| {
        ts.in_fork.set(false);
        ts.writing.set(false);
    });
}
