//! memscope-runtime: the in-process runtime of the memscope probe.
//!
//! Everything the preloaded library needs besides the hooks themselves: lazy init from the
//! environment, the per-process stream file and its per-thread chunks, the clock, the
//! reentrancy guard, collection windows, fork handling and the third-party plugin host.
//!
//! # Rules this crate keeps (design notes §2–§3)
//! * No `std::env`, no allocation on any path a hook takes (the encoder writes straight into
//!   the mapped chunk; messages are formatted into small stack buffers), no locks, no waiting
//!   on other threads, no panics across `extern "C"`.
//! * Static TLS stays small (a few hundred bytes: glibc carves it out of every thread's stack);
//!   larger per-thread buffers are mapped on a thread's first use ([`Guard::scratch`]).
//! * Hooks that run before init, during another thread's init, while passive, or inside
//!   runtime-internal code ([`internal`]: init, symbol lookups, plugin init) forward without
//!   recording. A hook nested in another hook (a signal handler, a foreign allocator's `mmap`)
//!   is a genuine event and records; the runtime's own work never reaches a hook (raw system
//!   calls for its mappings).
//! * Every event a hook could not record is counted, per kind, in the stream header: nothing
//!   is lost silently (the exceptions, documented: events before the probe's init, and events
//!   of a process whose stream could not be created, which prints one line).
//! * A record is either wholly visible to the collector or not at all: it is encoded past the
//!   chunk's committed length and published with a release store of the new length.
//! * Growing the stream never hurts the program: `RLIMIT_FSIZE`, a full disk, a closed
//!   descriptor or a collector that died stop recording with one line (see `stream`).
//!
//! # Using it from an adapter hook
//! ```ignore
//! use memscope_runtime as rt;
//! pub unsafe extern "C" fn my_hook(msg: *const c_char) {
//!     rt::safe_point();                                   // non-allocator hooks only
//!     if !rt::enabled(SOURCE) { return forward(); }   // one atomic load
//!     let Some(g) = rt::enter() else { return forward() };     // runtime-internal call
//!     g.record(&Record::Mark { ts: rt::now_ns(), stream: 0, msg: b"x", null: false });
//!     forward()
//! }
//! ```
//!
//! # Stream facts the collector relies on
//! See [`memscope_wire`] for the layout. In addition:
//! * Chunk `i` is reserved (`posix_fallocate`) and mapped only when a thread takes it. A chunk
//!   whose magic is still 0 after its process died was abandoned (mapping failed) — skip it.
//! * Every chunk starts with a `Thread` record. A thread that exits parks its partly filled
//!   chunks on a free list; the next thread that needs a chunk continues it after a new
//!   `Thread` record, with the delta state (`ChunkState`) continuing. So one chunk can hold
//!   several threads in sequence; decode each chunk front to back with one `ChunkState`.
//! * A thread may write two chunks at once: the second holds the records of signal handlers
//!   that interrupted one of its records. Order records across chunks by time stamp.
//! * `sealed = 1`: the chunk is full and unmapped; nothing more will be appended. Chunks held
//!   by live threads or parked are not sealed; after the process died (the file's `flock` can
//!   be taken) everything up to `committed` is final.
//! * `FH_DROPPED` counts events that could not be written (recording stopped, init still
//!   running elsewhere, a third nesting level of signal handlers, a fork child's atfork
//!   handlers), `FH_DROPPED_KINDS` the same per event kind; `FH_STOP_REASON` says why recording
//!   stopped, if it did. `FH_FLAGS` gets `FLAG_EXITED` (and `FH_EXIT_STATUS` the status) from an
//!   `on_exit` handler.
//! * A fork child opens its own stream on its first record; it never writes the parent's.
//! * With a collector (`<spool>/collector.lock` present), a process that finds it gone stops
//!   after `ORPHAN_CHUNKS` more chunks, and one started after it is gone writes nothing.
#![deny(clippy::undocumented_unsafe_blocks)]

mod clock;
mod context;
pub mod current_device;
mod device;
mod drops;
mod freelist;
mod guard;
mod intern;
mod liveness;
pub mod plugin;
mod plugin_types;
pub mod real;
mod sampler;
mod scratch;
mod settings;
mod source;
pub mod stack;
mod state;
mod stop;
mod stream;
mod sync;
mod sys;
mod writer;

pub use clock::{now_ns, now_ns_before};
pub use context::{set_context_hook, ContextFn};
pub use device::note_thread_device;
pub use guard::{enter, internal, internal_unmasked, Guard};
pub use intern::{record_mark, record_range_start};
pub use liveness::wait_for_collector_at_exit;
pub use plugin::{safe_point, start_at_load};
pub use sampler::{devices_released, note_device_set, set_sample_interval, DeviceQuery};
pub use scratch::{on_stack, Scratch, ALT_STACK, MAX_FRAMES};
pub use source::{record_source, record_source_bare};
pub use stack::{record_call_stack, record_with_stack, Skip};
pub use state::{
    active, adapters_mask, barrier, c_stack_depth, defer, enabled, ensure_init, host_mmap,
    init_state, owner_pop, owner_push, plugins_enabled, plugins_tracking, recording, selected,
    set_c_stack_depth, shadow_active, shadowing, start, step, stop, tracking, wake, warn,
    InitState, PLUGIN_BIT,
};
pub use sys::{map_anon, raw_munmap};
pub use writer::{record, tid};

/// Counts `n` events of kind `kind` that an adapter could not record (they show up in the
/// stream header's `FH_DROPPED` and `FH_DROPPED_KINDS`, read by the collector even after the
/// process was killed).
pub fn count_drop(kind: memscope_wire::EventKind, n: u64) {
    drops::add(memscope_wire::drop_slot_of(kind), n);
}

/// The generation of this process image's stream (opening it if needed; a fork child gets a new
/// one). Per-image interning tables (text ids, Python code ids) key their "defined" state on it.
/// `None` when no stream can be written.
pub fn stream_generation() -> Option<u32> {
    stream::open_gen()
}

/// Bytes of a C string for a record: at most `memscope_wire::MAX_TEXT` bytes (longer
/// texts are cut by the encoder anyway), `None` for NULL.
///
/// # Safety
/// `p` is NULL or points to a NUL-terminated string (or at least `MAX_TEXT` readable bytes)
/// that stays valid and unchanged for `'a`.
pub unsafe fn c_text<'a>(p: *const core::ffi::c_char) -> Option<&'a [u8]> {
    // SAFETY: forwarded contract.
    unsafe { sys::cstr_bytes(p, memscope_wire::MAX_TEXT) }
}

#[cfg(test)]
mod tests;
