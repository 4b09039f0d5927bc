//! In-process half: the driver memory hooks (abi.md §2), exported by the probe as
//! `halMemAlloc`, `halMemFree`, `halMemCreate` and `halMemRelease` through
//! [`crate::export_hooks!`].
//!
//! Rules (abi.md §2.5 and the issue):
//! * The real call always runs, whatever the probe's state, and its return code goes back to
//!   the job unchanged. The real functions are the driver's `…Inner` entry points found through
//!   `RTLD_DEFAULT`, else the public name through `RTLD_NEXT`, else an explicit handle to
//!   `libascend_hal.so` (already loaded, then `$ASCEND_HOME_PATH/lib64`, then the search
//!   path). Only when no driver exists at all does a hook answer `DRV_ERROR_NOT_SUPPORT`.
//! * A record is written only when the `hal` adapter is enabled and the thread is not already
//!   inside the probe (the runtime's reentrancy guard plays msMemScope's suppression window);
//!   allocations and frees are recorded outside collection windows too, as shadow records
//!   (`rt::tracking`).
//! * Successful allocations record `HalAlloc`/`HalCreate` (time taken after the call); frees
//!   record `HalFree` with the driver's return code, failures included, stamped *before* the
//!   call so a concurrent re-allocation of the same address always sorts after the free.
//! * `DRV_ERROR_OUT_OF_MEMORY` records `HalOom` with the device's free/total bytes from
//!   `aclrtGetMemInfo` when the runtime offers it (queried inside the guard, so allocations the
//!   runtime makes meanwhile are not recorded).

use crate::flags::{self, DRV_ERROR_NONE, DRV_ERROR_NOT_SUPPORT, DRV_ERROR_OUT_OF_MEMORY};
use crate::wire::HalRecord;
use crate::SOURCE;
use core::ffi::{c_int, c_void, CStr};
use memscope_runtime as rt;
use memscope_runtime::real::{Real, Step};
use memscope_wire::OptU32;

/// `struct drv_mem_prop` (abi.md §2.2; size 32, align 8).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct DrvMemProp {
    /// Offset 0.
    pub side: u32,
    /// Offset 4: device id of the block.
    pub devid: u32,
    /// Offset 8: module id (abi.md §2.4).
    pub module_id: u32,
    /// Offset 12: 0 normal, 1 huge, 2 giant page.
    pub pg_type: u32,
    /// Offset 16.
    pub mem_type: u32,
    /// Offset 24.
    pub reserve: u64,
}

const _: () = assert!(core::mem::size_of::<DrvMemProp>() == 32);

/// `drvError_t halMemAlloc(void **pp, unsigned long long size, unsigned long long flag)`.
pub type AllocFn = unsafe extern "C" fn(*mut *mut c_void, u64, u64) -> c_int;
/// `drvError_t halMemFree(void *pp)` and `halMemRelease(drv_mem_handle_t *handle)`.
pub type FreeFn = unsafe extern "C" fn(*mut c_void) -> c_int;
/// `drvError_t halMemCreate(drv_mem_handle_t **handle, size_t size, const struct drv_mem_prop
/// *prop, uint64_t flag)`.
pub type CreateFn = unsafe extern "C" fn(*mut *mut c_void, usize, *const DrvMemProp, u64) -> c_int;
/// `aclError aclrtGetMemInfo(int attr, size_t *free, size_t *total)` (abi.md §3.4).
type MemInfoFn = unsafe extern "C" fn(c_int, *mut usize, *mut usize) -> c_int;

const HAL: &CStr = c"libascend_hal.so";
const ASCEND: &CStr = c"ASCEND_HOME_PATH";

/// The lookup order of one driver entry point (see the module docs).
macro_rules! driver {
    ($inner:literal, $public:literal) => {
        Real::new(&[
            Step::Default($inner),
            Step::Next($public),
            Step::Loaded {
                lib: HAL,
                sym: $inner,
            },
            Step::Load {
                env: ASCEND,
                sub: "lib64",
                lib: HAL,
                sym: $inner,
            },
        ])
    };
}

static ALLOC: Real = driver!(c"halMemAllocInner", c"halMemAlloc");
static FREE: Real = driver!(c"halMemFreeInner", c"halMemFree");
static CREATE: Real = driver!(c"halMemCreateInner", c"halMemCreate");
static RELEASE: Real = driver!(c"halMemReleaseInner", c"halMemRelease");
static MEM_INFO: Real = Real::new(&[
    Step::Default(c"aclrtGetMemInfo"),
    Step::Loaded {
        lib: c"libascendcl.so",
        sym: c"aclrtGetMemInfo",
    },
]);

/// `ACL_HBM_MEM`, the `attr` of `aclrtGetMemInfo` for device memory.
const ACL_HBM_MEM: c_int = 1;

/// Records `rec` if the `hal` adapter tracks memory now (inside a collection window, or outside
/// one as a shadow record: `rt::tracking`) and the thread is not inside the probe; an
/// allocation carries the caller's C stack (`--call-stack c:N`, the runtime's stack service).
#[inline]
fn record_if_enabled(ts: impl FnOnce() -> u64, make: impl FnOnce() -> HalRecord) {
    if rt::tracking(SOURCE) {
        if let Some(mut g) = rt::enter() {
            let rec = make();
            let stack = !matches!(rec, HalRecord::Free { .. } | HalRecord::Release { .. });
            rt::record_source(&mut g, crate::SOURCE, ts(), &rec, stack);
        }
    }
}

/// `halMemAlloc` hook.
///
/// # Safety
/// The caller's contract of `halMemAlloc`: `pp` is NULL or writable.
pub unsafe extern "C" fn hal_mem_alloc(pp: *mut *mut c_void, size: u64, flag: u64) -> c_int {
    rt::safe_point();
    let Some(f) = ALLOC.get() else {
        return DRV_ERROR_NOT_SUPPORT;
    };
    // SAFETY: the resolved symbol is `halMemAllocInner` or `halMemAlloc`, both `AllocFn`.
    let f: AllocFn = unsafe { core::mem::transmute::<*mut c_void, AllocFn>(f) };
    // SAFETY: forwarding the caller's arguments to the real function.
    let rc = unsafe { f(pp, size, flag) };
    if rc == DRV_ERROR_NONE && !pp.is_null() {
        // SAFETY: the driver wrote the address to `*pp` on success.
        let addr = unsafe { *pp } as u64;
        record_if_enabled(rt::now_ns, || HalRecord::Alloc {
            addr,
            size,
            flag,
            stack: 0,
        });
    } else if rc == DRV_ERROR_OUT_OF_MEMORY {
        oom(false, size, flag, flags::device(flag));
    }
    rc
}

/// `halMemFree` hook.
///
/// # Safety
/// The caller's contract of `halMemFree`.
pub unsafe extern "C" fn hal_mem_free(pp: *mut c_void) -> c_int {
    // SAFETY: forwarded caller contract; `FREE` resolves `halMemFreeInner` or `halMemFree`.
    unsafe { free_like(&FREE, pp, false) }
}

/// `halMemRelease` hook.
///
/// # Safety
/// The caller's contract of `halMemRelease`.
pub unsafe extern "C" fn hal_mem_release(handle: *mut c_void) -> c_int {
    // SAFETY: forwarded caller contract; `RELEASE` resolves `halMemReleaseInner` or
    // `halMemRelease`, both `FreeFn`.
    unsafe { free_like(&RELEASE, handle, true) }
}

/// Shared body of the free and release hooks.
///
/// # Safety
/// `real` resolves to a [`FreeFn`]; `p` satisfies that function's contract.
unsafe fn free_like(real: &Real, p: *mut c_void, create: bool) -> c_int {
    rt::safe_point();
    let Some(f) = real.get() else {
        return DRV_ERROR_NOT_SUPPORT;
    };
    // SAFETY: guaranteed by the caller.
    let f: FreeFn = unsafe { core::mem::transmute::<*mut c_void, FreeFn>(f) };
    // The time is taken before the call (see the module docs), only when recording.
    let ts = if rt::tracking(SOURCE) {
        rt::now_ns()
    } else {
        0
    };
    // SAFETY: forwarding the caller's argument.
    let rc = unsafe { f(p) };
    if ts != 0 {
        let addr = p as u64;
        record_if_enabled(
            || ts,
            || {
                if create {
                    HalRecord::Release { addr, ret: rc }
                } else {
                    HalRecord::Free { addr, ret: rc }
                }
            },
        );
    }
    rc
}

/// `halMemCreate` hook.
///
/// # Safety
/// The caller's contract of `halMemCreate`: `handle` is NULL or writable, `prop` NULL or
/// pointing to a `drv_mem_prop`.
pub unsafe extern "C" fn hal_mem_create(
    handle: *mut *mut c_void,
    size: usize,
    prop: *const DrvMemProp,
    flag: u64,
) -> c_int {
    rt::safe_point();
    let Some(f) = CREATE.get() else {
        return DRV_ERROR_NOT_SUPPORT;
    };
    // SAFETY: the resolved symbol is `halMemCreateInner` or `halMemCreate`, both `CreateFn`.
    let f: CreateFn = unsafe { core::mem::transmute::<*mut c_void, CreateFn>(f) };
    // SAFETY: forwarding the caller's arguments.
    let rc = unsafe { f(handle, size, prop, flag) };
    let p = if prop.is_null() {
        None
    } else {
        // SAFETY: the caller passed a readable `drv_mem_prop` (the driver just read it).
        Some(unsafe { prop.read_unaligned() })
    };
    let device = p.map_or(u32::MAX, |p| p.devid);
    if rc == DRV_ERROR_NONE && !handle.is_null() {
        // SAFETY: the driver wrote the handle to `*handle` on success.
        let h = unsafe { *handle } as u64;
        record_if_enabled(rt::now_ns, || HalRecord::Create {
            handle: h,
            size: size as u64,
            flag,
            device: OptU32(device),
            module: OptU32(p.map_or(u32::MAX, |p| p.module_id)),
            page: OptU32(p.map_or(u32::MAX, |p| p.pg_type)),
            stack: 0,
        });
    } else if rc == DRV_ERROR_OUT_OF_MEMORY {
        let device = if device == u32::MAX {
            flags::device(flag)
        } else {
            device
        };
        oom(true, size as u64, flag, device);
    }
    rc
}

/// Records an out-of-memory failure (the OOM snapshot and top-K rows are built by the
/// collector, `crate::oom`).
fn oom(create: bool, size: u64, flag: u64, device: u32) {
    if !rt::enabled(SOURCE) {
        return;
    }
    let Some(mut g) = rt::enter() else { return };
    let ts = rt::now_ns();
    let (free, total) = mem_info();
    let device = OptU32(device);
    let rec = if create {
        HalRecord::OomCreate {
            size,
            flag,
            device,
            free,
            total,
            stack: 0,
        }
    } else {
        HalRecord::OomAlloc {
            size,
            flag,
            device,
            free,
            total,
            stack: 0,
        }
    };
    rt::record_source(&mut g, crate::SOURCE, ts, &rec, true);
}

/// Free and total device bytes from `aclrtGetMemInfo(ACL_HBM_MEM)` for the calling thread's
/// device, `(0, 0)` when the runtime is not there or fails. Called with the guard held.
fn mem_info() -> (u64, u64) {
    let Some(f) = MEM_INFO.get() else {
        return (0, 0);
    };
    // SAFETY: the symbol is `aclrtGetMemInfo`, declared as `MemInfoFn` (abi.md §3.4).
    let f: MemInfoFn = unsafe { core::mem::transmute::<*mut c_void, MemInfoFn>(f) };
    let (mut free, mut total) = (0usize, 0usize);
    // SAFETY: both out-pointers are valid for writes.
    if unsafe { f(ACL_HBM_MEM, &mut free, &mut total) } != 0 {
        return (0, 0);
    }
    (free as u64, total as u64)
}
