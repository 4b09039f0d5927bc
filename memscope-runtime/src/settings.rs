//! Settings read from `environ` (env protocol of `memscope_wire::probe_env`) into static
//! storage, without `std::env` and without allocating.

use crate::sync::RacyCell;
use crate::sys::{stderr_write, TextBuf};
use core::ffi::c_char;
use core::fmt::Write;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use memscope_wire::probe_env::ProbeSettings;
use memscope_wire::{is_rank_env, FH_RANK_ENV_LEN, RANK_ENV_VALUE_MAX};

/// Longest spool directory accepted (bytes); longer ones leave the probe passive.
pub(crate) const SPOOL_MAX: usize = memscope_wire::probe_env::SPOOL_MAX;
/// Longest `MEMSCOPE_PLUGINS` value kept (bytes); entries past it are ignored with a warning.
pub(crate) const PLUGINS_MAX: usize = 8192;

static SPOOL: RacyCell<[u8; SPOOL_MAX]> = RacyCell::new([0; SPOOL_MAX]);
static SPOOL_LEN: AtomicUsize = AtomicUsize::new(0);
static PLUGINS: RacyCell<[u8; PLUGINS_MAX]> = RacyCell::new([0; PLUGINS_MAX]);
static PLUGINS_LEN: AtomicUsize = AtomicUsize::new(0);
static ADAPTERS: AtomicU32 = AtomicU32::new(0);
static DEFERRED: AtomicBool = AtomicBool::new(false);
static C_STACK: AtomicU32 = AtomicU32::new(0);
static HOST_MMAP: AtomicBool = AtomicBool::new(false);
static SAMPLE_NS: AtomicU64 = AtomicU64::new(0);
/// The last [`load`] found no `MEMSCOPE_SPOOL`.
static SPOOL_UNSET: AtomicBool = AtomicBool::new(false);
/// The rank environment (`wire::FH_RANK_ENV` layout) found in `environ` at init.
static RANK_ENV: RacyCell<[u8; FH_RANK_ENV_LEN]> = RacyCell::new([0; FH_RANK_ENV_LEN]);
static RANK_ENV_LEN: AtomicUsize = AtomicUsize::new(0);

extern "C" {
    static environ: *const *const c_char;
}

/// Walks `environ` and stores the settings. Returns `false` when the probe must stay passive
/// (no `MEMSCOPE_SPOOL`, or an unusable one). Called only by the thread that owns init.
pub(crate) fn load() -> bool {
    let mut s = ProbeSettings::default();
    // SAFETY: only the initializing thread writes (fork re-init runs on the child's only
    // thread); the stream header copies it after this returns, on the same thread.
    let rank_env = unsafe { &mut *RANK_ENV.get() };
    rank_env.fill(0);
    let mut rank_len = 0usize;
    // SAFETY: `environ` is the C library's NULL-terminated array of NUL-terminated strings; we
    // read it once, on the initializing thread, before any `setenv` of the program can race
    // with a hook that has not returned yet (the same assumption `getenv` makes).
    let mut p = unsafe { environ };
    if !p.is_null() {
        loop {
            // SAFETY: `p` walks the array up to (not past) its NULL terminator.
            let entry = unsafe { *p };
            if entry.is_null() {
                break;
            }
            // SAFETY: each entry is a NUL-terminated string owned by the C library.
            let bytes = unsafe { core::ffi::CStr::from_ptr(entry) }.to_bytes();
            s.apply(bytes);
            if is_rank_env(bytes) {
                let eq = bytes.iter().position(|&b| b == b'=').unwrap_or(0);
                let keep = bytes.len().min(eq + 1 + RANK_ENV_VALUE_MAX);
                // entry + its NUL terminator, whole entries only
                if rank_len + keep < FH_RANK_ENV_LEN {
                    rank_env[rank_len..rank_len + keep].copy_from_slice(&bytes[..keep]);
                    rank_len += keep + 1;
                }
            }
            // SAFETY: the terminator has not been reached, so the next element exists.
            p = unsafe { p.add(1) };
        }
    }
    RANK_ENV_LEN.store(rank_len, Ordering::Relaxed);
    ADAPTERS.store(s.adapters, Ordering::Relaxed);
    DEFERRED.store(s.deferred, Ordering::Relaxed);
    C_STACK.store(s.c_stack_depth, Ordering::Relaxed);
    HOST_MMAP.store(s.host_mmap, Ordering::Relaxed);
    SAMPLE_NS.store(s.sample_ns, Ordering::Relaxed);

    let plugins = s.plugins.unwrap_or(b"");
    let mut n = plugins.len().min(PLUGINS_MAX);
    if n < plugins.len() {
        // Keep whole entries only.
        n = plugins[..n].iter().rposition(|&b| b == b':').unwrap_or(0);
        let mut m = TextBuf::<160>::new();
        let _ = write!(
            m,
            "memscope: MEMSCOPE_PLUGINS is longer than {PLUGINS_MAX} bytes; "
        );
        m.push_bytes(b"the entries past that are ignored\n");
        stderr_write(m.as_bytes());
    }
    // SAFETY: only the initializing thread writes; readers wait for READY (acquire).
    unsafe { (&mut *PLUGINS.get())[..n].copy_from_slice(&plugins[..n]) };
    PLUGINS_LEN.store(n, Ordering::Relaxed);

    SPOOL_UNSET.store(s.spool.is_none(), Ordering::Relaxed);
    let Some(spool) = s.spool else {
        SPOOL_LEN.store(0, Ordering::Relaxed);
        return false;
    };
    if spool.len() >= SPOOL_MAX {
        stderr_write(b"memscope: MEMSCOPE_SPOOL path is too long; the probe stays passive\n");
        return false;
    }
    // SAFETY: as for PLUGINS above.
    unsafe { (&mut *SPOOL.get())[..spool.len()].copy_from_slice(spool) };
    SPOOL_LEN.store(spool.len(), Ordering::Relaxed);
    true
}

/// Whether the last [`load`] found `MEMSCOPE_SPOOL` unset (not launched by memscope).
pub(crate) fn spool_unset() -> bool {
    SPOOL_UNSET.load(Ordering::Relaxed)
}

/// The spool directory (empty before init or when passive).
pub(crate) fn spool() -> &'static [u8] {
    let n = SPOOL_LEN.load(Ordering::Relaxed);
    // SAFETY: written once before READY was published; never written again (fork re-init
    // rewrites the same bytes on the only thread of the child).
    unsafe { &(&*SPOOL.get())[..n] }
}

/// The spool directory as a NUL-terminated C string (empty before init or when passive).
pub(crate) fn spool_c() -> *const c_char {
    // The buffer is zero-initialised and only ever holds the spool (shorter than SPOOL_MAX),
    // so the byte after it is always NUL.
    SPOOL.get().cast::<c_char>().cast_const()
}

/// The `MEMSCOPE_PLUGINS` value (`:`-separated paths), empty if unset.
pub(crate) fn plugins() -> &'static [u8] {
    let n = PLUGINS_LEN.load(Ordering::Relaxed);
    // SAFETY: as for `spool`.
    unsafe { &(&*PLUGINS.get())[..n] }
}

/// Selected adapter mask (`MEMSCOPE_ADAPTERS`).
pub(crate) fn adapters() -> u32 {
    ADAPTERS.load(Ordering::Relaxed)
}

/// `MEMSCOPE_COLLECT_MODE=deferred`.
pub(crate) fn deferred() -> bool {
    DEFERRED.load(Ordering::Relaxed)
}

/// Sets the C stack depth after init (the Python API's `config(call_stack="c:N")` of a probe
/// preloaded with `source msmemscope --load-api-env`), capped at 1000.
pub(crate) fn set_c_stack_depth(depth: u32) {
    C_STACK.store(depth.min(1000), Ordering::Relaxed);
}

/// `MEMSCOPE_C_STACK` (frames, ≤ 1000).
pub(crate) fn c_stack_depth() -> u32 {
    C_STACK.load(Ordering::Relaxed)
}

/// `MEMSCOPE_HOST_MMAP=1`.
pub(crate) fn host_mmap() -> bool {
    HOST_MMAP.load(Ordering::Relaxed)
}

/// `MEMSCOPE_SAMPLE_NS`: the memory sampler's interval in ns (0: no sampler).
pub(crate) fn sample_ns() -> u64 {
    SAMPLE_NS.load(Ordering::Relaxed)
}

/// Sets the memory sampler's interval after init (the Python API's `config(sample=...)`; 0:
/// the sampler pauses).
pub(crate) fn set_sample_ns(ns: u64) {
    SAMPLE_NS.store(ns, Ordering::Relaxed);
}

/// The rank environment found at init, in the `wire::FH_RANK_ENV` layout (`NAME=value\0`…).
pub(crate) fn rank_env() -> &'static [u8] {
    let n = RANK_ENV_LEN.load(Ordering::Relaxed);
    // SAFETY: written once by the initializing thread before READY; as for `spool`.
    unsafe { &(&*RANK_ENV.get())[..n] }
}
