//! Per-thread writer: the thread's two write slots (each with its current chunk) and record
//! encoding.
//!
//! All per-thread state lives in one const-initialised `thread_local!` without a destructor
//! (no lazy init, no TLS-dtor registration, no allocation; about 150 bytes of static TLS),
//! read with `try_with`. Larger per-thread buffers are mapped on first use
//! ([`crate::scratch`]). Thread exit is observed through a pthread key destructor, which glibc
//! runs after the C++/Rust TLS destructors, so frees made by those are still recorded; the
//! chunks are then parked on the free list for the next thread.
//!
//! # Two write slots: records from signal handlers
//! A record is encoded past the chunk's committed length and published with a release store.
//! A signal handler that interrupts a record on its thread and records too (its hook is a
//! genuine event of the program, see [`crate::guard`]) cannot use that chunk: its state is
//! half updated. It writes to the thread's second slot instead — a chunk of its own, which
//! starts with its own `Thread` record like every chunk. Only a third level (a handler
//! interrupting a handler's record) finds both slots busy; that record is counted as dropped.
//! Every path of [`record`] that does not write counts the event (per kind) in the stream
//! header, so nothing is lost silently. The record path makes no call that can reach a hook:
//! chunks are mapped with raw system calls.

use crate::guard::internal;
use crate::sys::gettid;
use crate::{drops, scratch, stream};
use core::cell::Cell;
use core::ffi::c_void;
use core::ptr::null_mut;
use core::sync::atomic::{compiler_fence, AtomicPtr, AtomicU32, Ordering};
use memscope_wire::{ChunkState, Record, CHUNK_HEADER_SIZE, CHUNK_PAYLOAD};

/// One write slot: a chunk and the delta state of its last record.
pub(crate) struct Slot {
    /// A record is being encoded into this slot's chunk right now.
    writing: Cell<bool>,
    /// Base of the current chunk (null: none).
    chunk: Cell<*mut u8>,
    /// Committed payload bytes of the current chunk.
    used: Cell<u32>,
    /// Delta state of the current chunk.
    st: Cell<ChunkState>,
    /// Stream generation the chunk belongs to.
    gen: Cell<u32>,
}

impl Slot {
    const fn new() -> Slot {
        Slot {
            writing: Cell::new(false),
            chunk: Cell::new(null_mut()),
            used: Cell::new(0),
            st: Cell::new(ChunkState {
                last_ts: 0,
                last_addr: 0,
            }),
            gen: Cell::new(0),
        }
    }
}

/// Everything the runtime keeps per thread.
pub(crate) struct ThreadState {
    /// Hooks of this thread currently running (see [`crate::guard`]).
    pub(crate) depth: Cell<u32>,
    /// The runtime runs code of its own that may reach hooks (see [`crate::guard::internal`]).
    pub(crate) internal: Cell<bool>,
    /// Between our atfork prepare handler and the parent/child handler.
    in_fork: Cell<bool>,
    /// Pid of the process that called `fork` (read in the prepare handler).
    fork_pid: Cell<u32>,
    /// Stream generation for which the exit key was set on this thread (0: not set).
    pub(crate) key_gen: Cell<u32>,
    /// Slot 0 for ordinary records, slot 1 for records of a handler that interrupted one.
    slots: [Slot; 2],
    /// This thread's mapped scratch block (null: not mapped yet). Atomic only so that a signal
    /// handler's hook that maps one while the interrupted hook does cannot lose either.
    pub(crate) block: AtomicPtr<scratch::Block>,
    /// Cached kernel tid and the generation it was read in (fork changes it).
    tid: Cell<u32>,
    tid_gen: Cell<u32>,
}

impl ThreadState {
    const fn new() -> ThreadState {
        ThreadState {
            depth: Cell::new(0),
            internal: Cell::new(false),
            in_fork: Cell::new(false),
            fork_pid: Cell::new(0),
            key_gen: Cell::new(0),
            slots: [Slot::new(), Slot::new()],
            block: AtomicPtr::new(null_mut()),
            tid: Cell::new(0),
            tid_gen: Cell::new(0),
        }
    }
}

thread_local! {
    pub(crate) static TS: ThreadState = const { ThreadState::new() };
}

/// pthread key whose destructor parks the exiting thread's chunks (u32::MAX: not created).
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

/// Makes sure the exit key's destructor runs for this thread (once per stream generation).
/// Called on a thread's first hook, before it forwards: `pthread_setspecific` may `calloc` (keys
/// past the first 32), which must not happen inside a signal handler that interrupted `malloc`.
#[inline]
pub(crate) fn ensure_exit_key(ts: &ThreadState) {
    let gen = stream::gen();
    if ts.key_gen.get() != gen {
        set_exit_key(ts, gen);
    }
}

#[cold]
fn set_exit_key(ts: &ThreadState, gen: u32) {
    let key = EXIT_KEY.load(Ordering::Acquire);
    if key == u32::MAX {
        // Before init: the next hook tries again.
        return;
    }
    let token = (&EXIT_KEY as *const AtomicU32).cast::<c_void>();
    // SAFETY: `key` was created by `pthread_key_create`; the value is a non-null token (never
    // dereferenced) so the destructor runs at thread exit. Internal: a `calloc` it makes is
    // the runtime's own.
    internal(|| unsafe { libc::pthread_setspecific(key, token) });
    ts.key_gen.set(gen);
}

unsafe extern "C" fn thread_exit(_: *mut c_void) {
    let _ = TS.try_with(|ts| {
        ts.key_gen.set(0);
        for slot in &ts.slots {
            if slot.writing.get() {
                continue;
            }
            let base = slot.chunk.replace(null_mut());
            if base.is_null() || slot.gen.get() != stream::gen() {
                continue;
            }
            // SAFETY: our chunk of the current stream, no longer referenced by this thread.
            unsafe { stream::park(base, slot.st.get()) };
        }
        if ts.depth.get() == 0 {
            scratch::release(ts.block.swap(null_mut(), Ordering::Relaxed));
        }
    });
}

/// Kernel thread id of the calling thread (cached per thread; refreshed after fork).
#[inline]
pub fn tid() -> u32 {
    TS.try_with(tid_of).unwrap_or_else(|_| gettid())
}

fn tid_of(ts: &ThreadState) -> u32 {
    let g = stream::gen();
    if ts.tid_gen.get() != g {
        ts.tid.set(gettid());
        ts.tid_gen.set(g);
    }
    ts.tid.get()
}

/// Encodes `rec` into this thread's chunk and publishes it. Never fails loudly: when the
/// record cannot be written (no stream, recording stopped, both slots busy) it counts one drop
/// of its kind in the stream header and returns `false`. Records made in a fork child before
/// the probe's child handler ran are counted as drops of the child's stream.
pub fn record(rec: &Record<&[u8]>) -> bool {
    crate::context::before_record(rec);
    match TS.try_with(|ts| record_in(ts, rec)) {
        Ok(ok) => ok,
        Err(_) => {
            drops::count(rec);
            false
        }
    }
}

/// [`record`] without the context service (for the context records themselves).
pub(crate) fn record_raw(rec: &Record<&[u8]>) -> bool {
    TS.try_with(|ts| record_in(ts, rec)).unwrap_or_default()
}

/// [`record`] with the thread state at hand (the hooks' fast path, through the guard; inlined
/// into each hook so the record's variant, and with it the encoder, is known at compile time).
#[inline(always)]
pub(crate) fn record_in(ts: &ThreadState, rec: &Record<&[u8]>) -> bool {
    if ts.in_fork.get() && !fork_parent_side(ts) {
        drops::count_in_fork_child(rec);
        return false;
    }
    let slot = if !ts.slots[0].writing.get() {
        &ts.slots[0]
    } else if !ts.slots[1].writing.get() {
        &ts.slots[1]
    } else {
        drops::count(rec);
        return false;
    };
    slot.writing.set(true);
    // A signal handler that runs from here on sees the slot busy; everything below reads the
    // slot only after the flag is set (and a handler that ran before left it consistent).
    compiler_fence(Ordering::SeqCst);
    let ok = write(ts, slot, rec);
    compiler_fence(Ordering::SeqCst);
    slot.writing.set(false);
    if !ok {
        drops::count(rec);
    }
    ok
}

#[cold]
fn fork_parent_side(ts: &ThreadState) -> bool {
    // SAFETY: getpid has no preconditions.
    (unsafe { libc::getpid() } as u32) == ts.fork_pid.get()
}

#[inline(always)]
fn write(ts: &ThreadState, slot: &Slot, rec: &Record<&[u8]>) -> bool {
    let Some(gen) = stream::open_gen() else {
        return false;
    };
    if (slot.chunk.get().is_null() || slot.gen.get() != gen) && !take_chunk(ts, slot, gen) {
        return false;
    }
    if append(slot, rec) {
        return true;
    }
    next_chunk(ts, slot, gen, rec)
}

/// The current chunk is full: seal it, continue in a fresh one.
#[cold]
fn next_chunk(ts: &ThreadState, slot: &Slot, gen: u32, rec: &Record<&[u8]>) -> bool {
    let base = slot.chunk.replace(null_mut());
    // SAFETY: `base` is this slot's chunk of the current stream, dropped from its state.
    unsafe { stream::seal_and_unmap(base) };
    take_chunk(ts, slot, gen) && append(slot, rec)
}

/// Appends to the slot's current chunk; `false` if the record does not fit.
#[inline(always)]
fn append(slot: &Slot, rec: &Record<&[u8]>) -> bool {
    let base = slot.chunk.get();
    let used = slot.used.get() as usize;
    let Some(room) = CHUNK_PAYLOAD.checked_sub(used) else {
        return false;
    };
    // SAFETY: `base` maps CHUNK_SIZE bytes; [CHUNK_HEADER_SIZE + used, CHUNK_SIZE) is the
    // unpublished tail of the payload, written only through this slot (the chunk's owner) and
    // read by the collector only after `committed` covers it.
    let out = unsafe { core::slice::from_raw_parts_mut(base.add(CHUNK_HEADER_SIZE + used), room) };
    let mut st = slot.st.get();
    match rec.encode(&mut st, out) {
        Some(n) => {
            let end = (used + n) as u32;
            slot.st.set(st);
            slot.used.set(end);
            // SAFETY: `base` is the mapped chunk; release publishes the bytes just written.
            unsafe { stream::committed(base) }.store(end, Ordering::Release);
            true
        }
        None => false,
    }
}

/// Gives the slot a chunk: a parked one (continuing its delta state) or a fresh one, and
/// writes the `Thread` record that names the new writer.
#[cold]
fn take_chunk(ts: &ThreadState, slot: &Slot, gen: u32) -> bool {
    ensure_exit_key(ts);
    crate::clock::tick();
    let tid = tid_of(ts);
    for _ in 0..3 {
        let (base, used, st) = match stream::pop_free() {
            // SAFETY: a parked chunk of the current stream, now owned by this slot.
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
        slot.chunk.set(base);
        slot.used.set(used);
        slot.st.set(st);
        slot.gen.set(gen);
        if append(slot, &Record::Thread { tid }) {
            return true;
        }
        slot.chunk.set(null_mut());
        // SAFETY: `base` is ours and no longer referenced.
        unsafe { stream::seal_and_unmap(base) };
    }
    false
}

/// Parks this thread's chunks on the free list now, as thread exit does (tests).
#[cfg(test)]
pub(crate) fn release_thread_chunk() {
    // SAFETY: runs our own destructor logic for the current thread; the argument is unused.
    unsafe { thread_exit(null_mut()) };
}

// ---- fork handlers ---------------------------------------------------------------------------

pub(crate) extern "C" fn fork_prepare() {
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() } as u32;
    let _ = TS.try_with(|ts| {
        ts.fork_pid.set(pid);
        ts.in_fork.set(true);
    });
}

pub(crate) extern "C" fn fork_parent() {
    let _ = TS.try_with(|ts| ts.in_fork.set(false));
}

/// Child side: drop this thread's chunks of the parent's stream (unmap, never write), then
/// reset the stream; the child's first record opens `<spool>/<child pid>-<ns>.stream`.
pub(crate) extern "C" fn fork_child() {
    let _ = TS.try_with(|ts| {
        for slot in &ts.slots {
            let base = slot.chunk.replace(null_mut());
            if !base.is_null() && slot.gen.get() == stream::gen() {
                // SAFETY: this thread's chunk of the parent's stream, inherited; unmapping it
                // only affects the child's address space.
                unsafe { stream::unmap(base) };
            }
        }
        ts.key_gen.set(0);
    });
    stream::after_fork_child();
    crate::state::after_fork_child();
    crate::clock::after_fork_child();
    crate::liveness::after_fork_child();
    let _ = TS.try_with(|ts| {
        ts.in_fork.set(false);
        for slot in &ts.slots {
            slot.writing.set(false);
        }
    });
}
