//! The reentrancy guard: which hook calls are events of the program and which are the probe's
//! own doing.
//!
//! A hook that starts on a thread finds it in one of three situations:
//! * **outside the probe** (depth 0): the call is the program's; the hook records.
//! * **inside another hook** (depth ≥ 1): the only ways to get here are a signal handler that
//!   interrupted that hook, and code the hook forwarded to (a foreign allocator's `mmap`, a
//!   driver's `malloc`). Both are genuine events of the program, so [`enter`] lets the nested
//!   hook record too ([`crate::writer`] gives a handler that interrupted a record a write slot
//!   of its own).
//! * **inside runtime-internal code** ([`internal`]): init, symbol lookups, plugin loading, a
//!   call into a library to read an operator's name. Such a call exists only because of the
//!   probe, so [`enter`] answers `None` and the hook forwards without recording. Internal code
//!   runs with the program's asynchronous signals blocked, so no handler of the program can run
//!   there and be mistaken for the probe's own call.
//!
//! The probe's other work (encoding, chunk turnover, stack capture) makes no call that can
//! reach a hook: chunks and tables are mapped with raw system calls.

use crate::scratch::{self, Scratch};
use crate::sys;
use crate::writer::{self, ThreadState, TS};
use core::marker::PhantomData;
use memscope_wire::Record;

/// RAII guard returned by [`enter`]: the thread is inside a hook until it drops. Not `Send`: it
/// belongs to the thread that took it. It also carries the thread's state, so recording through
/// it ([`Guard::record`]) costs no further thread-local lookup.
#[must_use = "the guard releases the thread when dropped"]
pub struct Guard {
    ts: *const ThreadState,
    /// Depth before this guard (restored on drop: signal handlers nest strictly).
    prev: u32,
    _not_send: PhantomData<*const ()>,
}

impl Guard {
    #[inline]
    pub(crate) fn ts(&self) -> &ThreadState {
        // SAFETY: `ts` points at this thread's `TS`, which lives (const-initialised, without a
        // destructor) as long as the thread; the guard is not `Send`, so it is used on that
        // thread only.
        unsafe { &*self.ts }
    }

    /// Nesting depth of this hook: 1 for an ordinary call, 2 for a hook that interrupted (or
    /// was called from) another one, and so on.
    #[inline]
    pub fn depth(&self) -> u32 {
        self.prev + 1
    }

    /// Records `rec` (as [`crate::record`], without another thread-local lookup).
    #[inline(always)]
    pub fn record(&self, rec: &Record<&[u8]>) -> bool {
        crate::context::before_record(rec);
        writer::record_in(self.ts(), rec)
    }

    /// This hook's per-thread scratch buffers (mapped on the thread's first use, outside the
    /// hooked allocator). Depth 1 and 2 each have their own; `None` deeper, or when the mapping
    /// failed. The buffers keep nothing between hooks.
    #[inline]
    pub fn scratch(&mut self) -> Option<&mut Scratch> {
        let level = self.prev as usize;
        let ts = self.ts();
        let block = scratch::block(ts)?;
        // SAFETY: the block is this thread's, mapped for its life (released only at thread
        // exit, with no hook running); the guard of depth `level + 1` is the only user of
        // `scratch[level]` (a nested hook has a larger depth), and `&mut self` keeps it unique.
        unsafe { (*block).scratch.get_mut(level) }
    }
}

impl Drop for Guard {
    #[inline]
    fn drop(&mut self) {
        self.ts().depth.set(self.prev);
    }
}

/// Enters a hook on this thread. `None` when the thread runs runtime-internal code (the call
/// is the probe's own): the hook must then forward and record nothing. Nested hooks (depth ≥ 2)
/// get a guard too: see the module documentation.
#[inline]
pub fn enter() -> Option<Guard> {
    TS.try_with(|ts| {
        if ts.internal.get() {
            return None;
        }
        writer::ensure_exit_key(ts);
        let prev = ts.depth.get();
        ts.depth.set(prev + 1);
        Some(Guard {
            ts,
            prev,
            _not_send: PhantomData,
        })
    })
    .ok()
    .flatten()
}

/// Whether this thread runs runtime-internal code (or its TLS is gone).
pub(crate) fn in_internal() -> bool {
    TS.try_with(|ts| ts.internal.get()).unwrap_or(true)
}

/// Runs `f` as runtime-internal code: hooks it reaches on this thread forward without
/// recording, and the thread's asynchronous signals are blocked meanwhile (delivered when `f`
/// returns), so a signal handler's calls are never taken for the probe's own. For the probe's
/// short calls into code that may allocate or reach other hooks: `dlsym`, `pthread_setspecific`,
/// reading names through a library's getters. Costs two `sigprocmask` system calls.
pub fn internal<R>(f: impl FnOnce() -> R) -> R {
    let _scope = Internal::begin(true);
    f()
}

/// As [`internal`], but with signals left as they are: for calls that run foreign
/// initialisation code which may start threads (`dlopen` of a library with constructors, a
/// plugin's init) — a thread inherits its creator's signal mask, so blocking signals there
/// would change the program. A signal handler that runs inside such a call (once per library,
/// at a time the probe chooses) forwards its calls unrecorded.
pub fn internal_unmasked<R>(f: impl FnOnce() -> R) -> R {
    let _scope = Internal::begin(false);
    f()
}

/// This thread's hook depth (0: no hook running).
pub(crate) fn depth() -> u32 {
    TS.try_with(|ts| ts.depth.get()).unwrap_or(0)
}

/// RAII form of [`internal`] / [`internal_unmasked`].
pub(crate) struct Internal {
    mask: Option<libc::sigset_t>,
    prev: bool,
}

impl Internal {
    /// Marks the thread internal (and blocks its asynchronous signals when `block`) until the
    /// value drops.
    pub(crate) fn begin(block: bool) -> Internal {
        let mask = block.then(sys::block_signals);
        let prev = TS.try_with(|ts| ts.internal.replace(true)).unwrap_or(true);
        Internal { mask, prev }
    }
}

impl Drop for Internal {
    fn drop(&mut self) {
        let prev = self.prev;
        let _ = TS.try_with(|ts| ts.internal.set(prev));
        if let Some(m) = &self.mask {
            sys::restore_signals(m);
        }
    }
}
