//! Kernel launches (abi.md §3.5, §3.6): the ten runtime launch entry points, and the
//! profiling callbacks that name them.
//!
//! * Every launch hook calls the real function with the arguments untouched (MS never reads
//!   them either). A thread-local depth counter makes a launch that crosses several hooked
//!   entry points (an `aclrt…` launch calling an `rt…` launch) one launch: only the outermost
//!   hook records, stamped at its entry.
//! * Names, stream and task ids come from the runtime's profiling API: the probe registers a
//!   GET_HASH_ID callback (type 12: kernel name → hash, recorded once per hash as `KernelName`)
//!   and a COMPACT callback (type 4: the task-track record of level 5000 / type 802, which fills
//!   the current thread's pending launch). A launch that returns 0 records `KernelLaunchOn`,
//!   with the stream handle the hook was given (issue 36: what a cross-stream check orders);
//!   one without a task-track record gets no name (`N/A`) and no stream/task ids. A task-track
//!   record that arrives outside any hooked launch is recorded as a `KernelLaunch` of its own
//!   (no handle).
//! * The callbacks are registered at `aclInit` or at the first launch, and only when kernel
//!   launches are wanted: the `acl` adapter is selected and `MEMSCOPE_KERNEL_LAUNCH` is not `0`
//!   (the CLI sets `0` unless `--level kernel` and `launch` events are on; msMemScope instead
//!   switches profiling on at the first launch whatever the level). `profSetProfCommand` is not
//!   called: its 5424-byte command layout is not documented (abi.md §3.6), and the stand-in
//!   reports without it.

use crate::wire::AclRecord;
use crate::SOURCE;
use core::cell::Cell;
use core::ffi::{c_char, c_int, c_void, CStr};
use core::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};
use memscope_runtime as rt;
use memscope_runtime::real::{Real, Step};
#[cfg(test)]
use memscope_wire::probe_env::ENV_KERNEL_LAUNCH;
use memscope_wire::OptU32;

/// `ACL_ERROR_RT_FAILURE`: what an `aclrt…` launch hook answers when no real function exists.
pub const ACL_ERROR_RT_FAILURE: c_int = 500_003;
/// `RT_ERROR_RESERVED` (MS's value): what an `rt…` launch hook answers when no real function
/// exists.
pub const RT_ERROR_RESERVED: c_int = 0x99;

#[derive(Clone, Copy, Debug)]
struct Pending {
    filled: bool,
    hash: u64,
    device: u32,
    stream: u32,
    task: u32,
}

struct LaunchTls {
    depth: Cell<u32>,
    pending: Cell<Option<Pending>>,
}

thread_local! {
    static TLS: LaunchTls = const { LaunchTls { depth: Cell::new(0), pending: Cell::new(None) } };
}

/// 0 not read yet, 1 launches wanted, 2 not wanted (`MEMSCOPE_KERNEL_LAUNCH=0`).
static MODE: AtomicU8 = AtomicU8::new(0);

/// [`memscope_wire::probe_env::ENV_KERNEL_LAUNCH`] as a C string (checked by a test).
const ENV: &CStr = c"MEMSCOPE_KERNEL_LAUNCH";

/// Whether kernel launches should be recorded at all: the `acl` adapter is selected and
/// `MEMSCOPE_KERNEL_LAUNCH` is not `0` (read once; unset means "record"). The stream and event
/// hooks ([`crate::streams`]) follow the same switch: they are what a launch's order needs.
pub(crate) fn wanted() -> bool {
    let m = match MODE.load(Ordering::Relaxed) {
        0 => {
            // SAFETY: `ENV` is NUL-terminated; getenv does not allocate.
            let v = unsafe { libc::getenv(ENV.as_ptr()) };
            // SAFETY: getenv returns NULL or a NUL-terminated string.
            let off = !v.is_null() && unsafe { CStr::from_ptr(v) }.to_bytes() == b"0";
            let m = if off { 2 } else { 1 };
            MODE.store(m, Ordering::Relaxed);
            m
        }
        m => m,
    };
    m == 1 && rt::selected(SOURCE)
}

// ---- profiling callbacks ----------------------------------------------------------------

static REGISTER: Real = Real::new(&[
    Step::Default(c"MsprofRegisterProfileCallback"),
    Step::Loaded {
        lib: c"libprofapi.so",
        sym: c"MsprofRegisterProfileCallback",
    },
    Step::Load {
        env: c"ASCEND_HOME_PATH",
        sub: "lib64",
        lib: c"libprofapi.so",
        sym: c"MsprofRegisterProfileCallback",
    },
]);
type RegisterFn = unsafe extern "C" fn(i32, *mut c_void, u32) -> i32;

/// 0 not registered, 1 registering, 2 registered.
static REGISTERED: AtomicU8 = AtomicU8::new(0);
/// Failed registration attempts (given up after [`MAX_TRIES`]).
static TRIES: AtomicU32 = AtomicU32::new(0);
const MAX_TRIES: u32 = 16;

/// Registers the profiling callbacks once, if kernel launches are wanted. Cheap after the
/// first success (one load).
pub fn ensure_callbacks() {
    if REGISTERED.load(Ordering::Acquire) == 2
        || !wanted()
        || TRIES.load(Ordering::Relaxed) >= MAX_TRIES
    {
        return;
    }
    if REGISTERED
        .compare_exchange(0, 1, Ordering::AcqRel, Ordering::Relaxed)
        .is_err()
    {
        return;
    }
    if rt::enter().is_none() {
        // Inside the probe's own work: try again at the next launch.
        REGISTERED.store(0, Ordering::Release);
        return;
    }
    let ok = match REGISTER.get() {
        Some(p) => {
            // SAFETY: the symbol is `MsprofRegisterProfileCallback` (abi.md §3.6).
            let f = unsafe { core::mem::transmute::<*mut c_void, RegisterFn>(p) };
            let cbs: [(i32, *mut c_void); 3] = [
                (12, hash_callback as *mut c_void),
                (4, compact_callback as *mut c_void),
                (9, api_callback as *mut c_void),
            ];
            // Internal (the runtime's allocations for our registration are no events), signals
            // as they are (it may start the profiling threads).
            // SAFETY: each callback has the signature of its type id; len = sizeof(void *).
            rt::internal_unmasked(|| cbs.iter().all(|(t, cb)| unsafe { f(*t, *cb, 8) } == 0))
        }
        None => false,
    };
    if ok {
        names_init();
        REGISTERED.store(2, Ordering::Release);
    } else {
        TRIES.fetch_add(1, Ordering::Relaxed);
        REGISTERED.store(0, Ordering::Release);
    }
}

/// msMemScope's kernel-name hash: two polynomial hashes over the bytes with primes 29 and 131,
/// `(h29 << 32) | h131` (abi.md §3.6).
pub fn name_hash(bytes: &[u8]) -> u64 {
    let (mut a, mut b) = (0u32, 0u32);
    for &c in bytes {
        a = a.wrapping_mul(29).wrapping_add(u32::from(c));
        b = b.wrapping_mul(131).wrapping_add(u32::from(c));
    }
    (u64::from(a) << 32) | u64::from(b)
}

/// Hashes already recorded in this process image (open addressing, 0 = empty).
static NAMES: [AtomicU64; 4096] = [const { AtomicU64::new(0) }; 4096];

fn names_init() {
    extern "C" fn clear() {
        NAMES.iter().for_each(|s| s.store(0, Ordering::Relaxed));
    }
    // SAFETY: `clear` is an `extern "C" fn()` living as long as the probe (never unloaded).
    unsafe { libc::pthread_atfork(None, None, Some(clear)) };
}

/// Whether `hash` is new (then it is remembered). A full table answers "new".
fn first_sighting(hash: u64) -> bool {
    if hash == 0 {
        return true;
    }
    let start = (hash.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 52) as usize;
    for i in 0..64 {
        let slot = &NAMES[(start + i) % NAMES.len()];
        match slot.compare_exchange(0, hash, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return true,
            Err(h) if h == hash => return false,
            Err(_) => {}
        }
    }
    true
}

/// GET_HASH_ID callback: `uint64_t cb(const char *hashInfo, size_t len)`.
extern "C" fn hash_callback(info: *const c_char, len: usize) -> u64 {
    if info.is_null() {
        return 0;
    }
    // SAFETY: the runtime passes `len` readable bytes at `info`.
    let name = unsafe { core::slice::from_raw_parts(info.cast::<u8>(), len) };
    let hash = name_hash(name);
    if wanted() && first_sighting(hash) {
        if let Some(mut g) = rt::enter() {
            let rec = AclRecord::KernelName { hash, name };
            rt::record_source(&mut g, crate::SOURCE, 0, &rec, false);
        }
    }
    hash
}

/// COMPACT callback: `int32_t cb(uint32_t agingFlag, const void *data, uint32_t length)`.
extern "C" fn compact_callback(_aging: u32, data: *const c_void, length: u32) -> i32 {
    if data.is_null() || length != 64 {
        return 0;
    }
    let mut raw = [0u8; 64];
    // SAFETY: the runtime passes a 64-byte `MsprofCompactInfo` (abi.md §3.6).
    unsafe { core::ptr::copy_nonoverlapping(data.cast::<u8>(), raw.as_mut_ptr(), 64) };
    let u16_at = |o: usize| u16::from_le_bytes([raw[o], raw[o + 1]]);
    let u32_at = |o: usize| u32::from_le_bytes(raw[o..o + 4].try_into().unwrap_or_default());
    let u64_at = |o: usize| u64::from_le_bytes(raw[o..o + 8].try_into().unwrap_or_default());
    if u16_at(0) != 0x5a5a || u16_at(2) != 5000 || u32_at(4) != 802 {
        return 0;
    }
    let track = Pending {
        filled: true,
        device: u32::from(u16_at(24)),
        stream: u32::from(u16_at(26)),
        task: u32_at(28) & 0xffff,
        hash: u64_at(40),
    };
    let took = TLS
        .try_with(|t| match t.pending.get() {
            Some(p) if !p.filled => {
                t.pending.set(Some(track));
                true
            }
            _ => false,
        })
        .unwrap_or(false);
    if !took {
        record_launch(rt::now_ns(), Some(track), None);
    }
    0
}

/// REPORT_API_C callback: a no-op, as in msMemScope.
extern "C" fn api_callback(_aging: u32, _data: *const c_void) -> i32 {
    0
}

/// Records one launch: `handle` is the stream the hooked entry point was given (`None` for a
/// task-track record that arrived outside any hooked launch).
fn record_launch(ts: u64, p: Option<Pending>, handle: Option<u64>) {
    if !rt::enabled(SOURCE) || !wanted() {
        return;
    }
    let Some(mut g) = rt::enter() else { return };
    let p = p.unwrap_or(Pending {
        filled: false,
        hash: 0,
        device: u32::MAX,
        stream: u32::MAX,
        task: u32::MAX,
    });
    let (hash, device, stream, task) = (p.hash, OptU32(p.device), OptU32(p.stream), OptU32(p.task));
    let rec = match handle {
        Some(handle) => AclRecord::KernelLaunchOn {
            hash,
            device,
            stream,
            task,
            handle,
        },
        None => AclRecord::KernelLaunch {
            hash,
            device,
            stream,
            task,
        },
    };
    rt::record_source(&mut g, crate::SOURCE, ts, &rec, true);
}

/// Runs one launch hook: `call` gets the real function's address (from `real`) and calls it.
/// Records the launch, with the `stream` handle it was given, when this is the outermost hooked
/// launch of the thread and it returned 0. Answers `missing` when the real function cannot be
/// found.
pub fn launch(
    real: &Real,
    missing: c_int,
    stream: *mut c_void,
    call: impl FnOnce(*mut c_void) -> c_int,
) -> c_int {
    rt::safe_point();
    let Some(p) = real.get() else { return missing };
    let outer = TLS
        .try_with(|t| {
            let d = t.depth.get();
            t.depth.set(d + 1);
            d == 0
        })
        .unwrap_or(false);
    let track = outer && wanted() && rt::enabled(SOURCE);
    let ts = if track {
        ensure_callbacks();
        let _ = TLS.try_with(|t| {
            t.pending.set(Some(Pending {
                filled: false,
                hash: 0,
                device: u32::MAX,
                stream: u32::MAX,
                task: u32::MAX,
            }))
        });
        rt::now_ns()
    } else {
        0
    };
    let rc = call(p);
    let pending = TLS
        .try_with(|t| {
            t.depth.set(t.depth.get().saturating_sub(1));
            if outer {
                t.pending.take()
            } else {
                None
            }
        })
        .ok()
        .flatten();
    if track && rc == 0 {
        record_launch(ts, pending, Some(stream as u64));
    }
    rc
}

/// Defines one launch hook: resolves `$real`, forwards the arguments untouched, and counts the
/// launch once (see [`launch`]).
macro_rules! launch_hook {
    ($(#[$doc:meta])* $hook:ident, $real:ident, $missing:expr, $steps:expr, $stream:ident,
     ($($arg:ident: $ty:ty),*)) => {
        static $real: Real = Real::new($steps);

        $(#[$doc])*
        ///
        /// # Safety
        /// The runtime's contract of the hooked function.
        pub unsafe extern "C" fn $hook($($arg: $ty),*) -> c_int {
            launch(&$real, $missing, $stream, |p| {
                // SAFETY: `$real` resolves a function of exactly this signature (abi.md §3.5).
                let f = unsafe {
                    core::mem::transmute::<*mut c_void, unsafe extern "C" fn($($ty),*) -> c_int>(p)
                };
                // SAFETY: forwarding the caller's arguments untouched.
                unsafe { f($($arg),*) }
            })
        }
    };
}

macro_rules! rt_steps {
    ($sym:literal) => {
        &[
            Step::Next($sym),
            Step::Loaded {
                lib: c"libruntime.so",
                sym: $sym,
            },
            Step::Load {
                env: c"ASCEND_HOME_PATH",
                sub: "lib64",
                lib: c"libruntime.so",
                sym: $sym,
            },
        ]
    };
}
macro_rules! impl_steps {
    ($sym:literal) => {
        &[
            Step::Next($sym),
            Step::Loaded {
                lib: c"libascendcl_impl.so",
                sym: $sym,
            },
            Step::Loaded {
                lib: c"libacl_rt_impl.so",
                sym: $sym,
            },
            Step::Load {
                env: c"ASCEND_HOME_PATH",
                sub: "lib64",
                lib: c"libascendcl_impl.so",
                sym: $sym,
            },
        ]
    };
}
macro_rules! acl_steps {
    ($sym:literal) => {
        &[
            Step::Next($sym),
            Step::Loaded {
                lib: c"libascendcl.so",
                sym: $sym,
            },
            Step::Load {
                env: c"ASCEND_HOME_PATH",
                sub: "lib64",
                lib: c"libascendcl.so",
                sym: $sym,
            },
        ]
    };
}
pub(crate) use acl_steps;

type P = *mut c_void;
type CP = *const c_void;

launch_hook!(
    /// `rtKernelLaunch` hook.
    rt_kernel_launch, RT_KERNEL_LAUNCH, RT_ERROR_RESERVED, rt_steps!(c"rtKernelLaunch"), stream,
    (stub: CP, block_dim: u32, args: P, args_size: u32, sm_desc: P, stream: P)
);
launch_hook!(
    /// `rtKernelLaunchWithHandleV2` hook.
    rt_kernel_launch_with_handle_v2, RT_WITH_HANDLE_V2, RT_ERROR_RESERVED,
    rt_steps!(c"rtKernelLaunchWithHandleV2"), stream,
    (hdl: P, tiling_key: u64, block_dim: u32, args_info: P, sm_desc: P, stream: P, cfg: CP)
);
launch_hook!(
    /// `rtKernelLaunchWithFlagV2` hook.
    rt_kernel_launch_with_flag_v2, RT_WITH_FLAG_V2, RT_ERROR_RESERVED,
    rt_steps!(c"rtKernelLaunchWithFlagV2"), stream,
    (stub: CP, block_dim: u32, args_info: P, sm_desc: P, stream: P, flags: u32, cfg: CP)
);
launch_hook!(
    /// `rtAicpuKernelLaunchExWithArgs` hook.
    rt_aicpu_kernel_launch_ex_with_args, RT_AICPU_EX, RT_ERROR_RESERVED,
    rt_steps!(c"rtAicpuKernelLaunchExWithArgs"), stream,
    (kernel_type: u32, op_name: *const c_char, block_dim: u32, args_info: CP, sm_desc: *mut P, stream: P, flags: u32)
);
launch_hook!(
    /// `rtLaunchKernelByFuncHandle` hook.
    rt_launch_kernel_by_func_handle, RT_BY_HANDLE, RT_ERROR_RESERVED,
    rt_steps!(c"rtLaunchKernelByFuncHandle"), stream,
    (func: P, block_dim: u32, args_handle: P, stream: P)
);
launch_hook!(
    /// `rtLaunchKernelByFuncHandleV2` hook.
    rt_launch_kernel_by_func_handle_v2, RT_BY_HANDLE_V2, RT_ERROR_RESERVED,
    rt_steps!(c"rtLaunchKernelByFuncHandleV2"), stream,
    (func: P, block_dim: u32, args_handle: P, stream: P, cfg: CP)
);
launch_hook!(
    /// `aclrtLaunchKernelImpl` hook.
    aclrt_launch_kernel_impl, ACL_IMPL, ACL_ERROR_RT_FAILURE, impl_steps!(c"aclrtLaunchKernelImpl"), stream,
    (func: P, block_dim: u32, args: CP, args_size: usize, stream: P)
);
launch_hook!(
    /// `aclrtLaunchKernelV2Impl` hook.
    aclrt_launch_kernel_v2_impl, ACL_V2_IMPL, ACL_ERROR_RT_FAILURE,
    impl_steps!(c"aclrtLaunchKernelV2Impl"), stream,
    (func: P, block_dim: u32, args: CP, args_size: usize, cfg: P, stream: P)
);
launch_hook!(
    /// `aclrtLaunchKernelWithConfig` hook.
    aclrt_launch_kernel_with_config, ACL_WITH_CONFIG, ACL_ERROR_RT_FAILURE,
    acl_steps!(c"aclrtLaunchKernelWithConfig"), stream,
    (func: P, block_dim: u32, stream: P, cfg: P, args_handle: P, reserve: P)
);
launch_hook!(
    /// `aclrtLaunchKernelWithHostArgs` hook.
    aclrt_launch_kernel_with_host_args, ACL_WITH_HOST_ARGS, ACL_ERROR_RT_FAILURE,
    acl_steps!(c"aclrtLaunchKernelWithHostArgs"), stream,
    (func: P, block_dim: u32, stream: P, cfg: P, host_args: P, args_size: usize, place_holders: P, place_holder_num: usize)
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_name_matches_the_probe_protocol() {
        assert_eq!(ENV.to_str().unwrap(), ENV_KERNEL_LAUNCH);
    }

    #[test]
    fn name_hash_is_two_polynomial_hashes_side_by_side() {
        assert_eq!(name_hash(b""), 0);
        assert_eq!(name_hash(b"A"), (65 << 32) | 65);
        assert_eq!(name_hash(b"AB"), ((65 * 29 + 66) << 32) | (65 * 131 + 66));
    }

    #[test]
    fn a_hash_is_new_once() {
        let h = name_hash(b"memscope-test-kernel");
        assert!(first_sighting(h));
        assert!(!first_sighting(h));
        assert!(first_sighting(0) && first_sighting(0));
    }
}
