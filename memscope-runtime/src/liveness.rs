//! Is the collector still there? (Team contract 1.)
//!
//! Every collector that follows a spool creates `<spool>/collector.lock` before the job starts
//! and holds `flock(LOCK_EX)` on it for its whole life. The probe opens the file read-only and
//! try-locks it shared: `EWOULDBLOCK` means the collector is alive; success (unlocked at once)
//! means it is gone. Each check opens the file afresh (`open` + `flock` + `close`, a few µs),
//! so the probe holds no descriptor the program could close or reuse, and it checks only when
//! it is about to grow the spool — when a thread takes a new chunk, every 256 KiB of records —
//! which is exactly what bounds the spool.
//!
//! * At stream creation (init, or a fork child's first record): no lock file in an existing
//!   spool → no collector follows this spool (the probe run by hand, tests): never checked
//!   again. A spool that does not exist any more, or a lock that can be taken → the collector
//!   is gone: the process stays passive and silent (no stream file, no warning; descendants
//!   that outlive `memscope` run untraced).
//! * While recording: once a check finds the collector gone, the process may take
//!   [`ORPHAN_CHUNKS`] more chunks (so `memscope recover` sees what happened right after),
//!   then recording stops with one warning and later events are counted as dropped.
//!
//! A check that cannot tell (`EMFILE`, `ENOLCK`, …) counts as "alive".

use crate::settings::{self, SPOOL_MAX};
use crate::sync::RacyCell;
use crate::sys::errno;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use memscope_wire::{COLLECTOR_LOCK, ORPHAN_CHUNKS};

/// What a check found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Collector {
    /// No lock file in the spool: nobody to watch.
    Absent,
    /// The lock is held (or the check could not tell).
    Alive,
    /// The lock can be taken, or the spool is gone.
    Gone,
}

const PATH_MAX: usize = SPOOL_MAX + 32;
/// `<spool>/collector.lock`, NUL-terminated (written at stream creation, on the only thread
/// that creates the stream; read afterwards).
static PATH: RacyCell<[u8; PATH_MAX]> = RacyCell::new([0; PATH_MAX]);
static PATH_LEN: AtomicUsize = AtomicUsize::new(0);
/// A collector was alive at stream creation: check before growing the spool.
static WATCH: AtomicBool = AtomicBool::new(false);
/// A check found the collector gone.
static GONE: AtomicBool = AtomicBool::new(false);
/// Chunks still allowed after the collector was found gone.
static LEFT: AtomicU32 = AtomicU32::new(ORPHAN_CHUNKS);

fn build_path() {
    let spool = settings::spool();
    let name = COLLECTOR_LOCK.as_bytes();
    // SAFETY: called only by the thread creating the stream, before the stream is published;
    // readers (`check`) run after it (publication is a release/acquire pair on the stream
    // state).
    let p = unsafe { &mut *PATH.get() };
    let n = spool.len() + 1 + name.len();
    if n + 1 > PATH_MAX {
        PATH_LEN.store(0, Ordering::Relaxed);
        return;
    }
    p[..spool.len()].copy_from_slice(spool);
    p[spool.len()] = b'/';
    p[spool.len() + 1..n].copy_from_slice(name);
    p[n] = 0;
    PATH_LEN.store(n, Ordering::Relaxed);
}

/// One check of the lock file.
fn check() -> Collector {
    if PATH_LEN.load(Ordering::Relaxed) == 0 {
        return Collector::Absent;
    }
    let path = PATH.get().cast::<libc::c_char>();
    // SAFETY: `path` is the NUL-terminated path written by `build_path`.
    let fd = unsafe { libc::open(path, libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NOCTTY) };
    if fd < 0 {
        return match errno() {
            libc::ENOENT if !spool_exists() => Collector::Gone,
            libc::ENOENT => Collector::Absent,
            _ => Collector::Alive,
        };
    }
    // SAFETY: `fd` is ours.
    let r = unsafe { libc::flock(fd, libc::LOCK_SH | libc::LOCK_NB) };
    // SAFETY: `fd` is ours; closing it also drops the shared lock if we got it.
    unsafe { libc::close(fd) };
    // Not lockable: EWOULDBLOCK (the collector holds it) or an error that tells nothing.
    if r == 0 {
        Collector::Gone
    } else {
        Collector::Alive
    }
}

fn spool_exists() -> bool {
    let mut st = crate::sys::zeroed_stat();
    // SAFETY: `spool_c` is NUL-terminated; `st` is writable.
    unsafe { libc::stat(settings::spool_c(), &mut st) == 0 }
}

/// Milliseconds the process waits at exit for its collector to end (0: it does not wait).
static EXIT_WAIT_MS: AtomicU32 = AtomicU32::new(0);

/// Asks that the process, when it exits (after its exit status is in the stream header),
/// wait at most `ms` milliseconds for its collector to end. The Python package's plain mode
/// asks for it (issue 23): its collector (`memscope collect`) sees the exit status, writes
/// the outputs and prints the summary before the process ends, i.e. before the shell prompt
/// returns. Bounded: a collector that does not end within `ms` is not waited for longer.
pub fn wait_for_collector_at_exit(ms: u32) {
    EXIT_WAIT_MS.store(ms, Ordering::Relaxed);
}

/// A fork child does not wait for its parent's collector at exit.
pub(crate) fn after_fork_child() {
    EXIT_WAIT_MS.store(0, Ordering::Relaxed);
}

fn monotonic_ms() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is writable; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec as u64 * 1000 + t.tv_nsec as u64 / 1_000_000
}

/// At exit, after the exit status was stored: waits (polling every 5 ms, at most the time
/// [`wait_for_collector_at_exit`] asked for) until the collector is gone.
pub(crate) fn wait_at_exit() {
    let ms = EXIT_WAIT_MS.swap(0, Ordering::Relaxed);
    if ms == 0 {
        return;
    }
    let deadline = monotonic_ms() + u64::from(ms);
    while check() == Collector::Alive && monotonic_ms() < deadline {
        let pause = libc::timespec {
            tv_sec: 0,
            tv_nsec: 5_000_000,
        };
        // SAFETY: `pause` is a valid duration; the remainder is not wanted.
        unsafe { libc::nanosleep(&pause, core::ptr::null_mut()) };
    }
}

/// At stream creation: whether to create the stream (`false`: the collector is gone — stay
/// passive and silent), and whether to keep watching.
pub(crate) fn at_create() -> bool {
    GONE.store(false, Ordering::Relaxed);
    LEFT.store(ORPHAN_CHUNKS, Ordering::Relaxed);
    build_path();
    match check() {
        Collector::Absent => {
            WATCH.store(false, Ordering::Relaxed);
            true
        }
        Collector::Alive => {
            WATCH.store(true, Ordering::Relaxed);
            true
        }
        Collector::Gone => false,
    }
}

/// Before a new chunk is reserved: `false` when the collector is gone and the chunks allowed
/// after that are used up (the caller stops recording).
pub(crate) fn may_grow() -> bool {
    if !WATCH.load(Ordering::Relaxed) {
        return true;
    }
    if !GONE.load(Ordering::Relaxed) {
        if check() == Collector::Alive {
            return true;
        }
        GONE.store(true, Ordering::Relaxed);
    }
    LEFT.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
        .is_ok()
}
