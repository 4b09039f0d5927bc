//! Device memory for the probe's sampler (`--sample`, issue 25): [`query`] is what the
//! `aclrtSetDevice` hook hands to `memscope_runtime::note_device_set` after the job's own
//! successful call. It runs only on the sampler thread (runtime-internal code, so what the
//! runtime allocates meanwhile is not recorded): it sets the device on that thread with the
//! real `aclrtSetDevice` when the thread is not on it yet — `aclrtGetMemInfo` answers for the
//! calling thread's device — and asks `aclrtGetMemInfo(ACL_HBM_MEM)`. The sampler thread takes
//! a reference on the device that way and never resets it (the process's own reset and exit
//! are unaffected: the thread ends with the process). The `aclFinalize` hook stops the device
//! queries first (`memscope_runtime::devices_released`).

use core::cell::Cell;
use core::ffi::{c_int, c_void};
use memscope_runtime::real::{Real, Step};

/// `aclError aclrtGetMemInfo(int attr, size_t *free, size_t *total)` (abi.md §3.4).
type MemInfoFn = unsafe extern "C" fn(c_int, *mut usize, *mut usize) -> c_int;
/// `ACL_HBM_MEM`, the `attr` of `aclrtGetMemInfo` for device memory.
const ACL_HBM_MEM: c_int = 1;

static MEM_INFO: Real = Real::new(&[
    Step::Default(c"aclrtGetMemInfo"),
    Step::Loaded {
        lib: c"libascendcl.so",
        sym: c"aclrtGetMemInfo",
    },
]);

thread_local! {
    /// The device the sampler thread is on (`-1`: none yet).
    static ON: Cell<i64> = const { Cell::new(-1) };
}

/// Free and total bytes of logical device `device`, or `None` when the runtime has no
/// `aclrtGetMemInfo` or a call fails. For the sampler thread only (see the module docs).
pub fn query(device: u32) -> Option<(u64, u64)> {
    if ON.with(Cell::get) != i64::from(device) {
        let set = crate::real::real_set_device()?;
        // SAFETY: the real `aclrtSetDevice`; a device the job itself set successfully.
        if unsafe { set(device as i32) } != 0 {
            return None;
        }
        ON.with(|c| c.set(i64::from(device)));
    }
    let p: *mut c_void = MEM_INFO.get()?;
    // SAFETY: the symbol is `aclrtGetMemInfo`.
    let f = unsafe { core::mem::transmute::<*mut c_void, MemInfoFn>(p) };
    let (mut free, mut total) = (0usize, 0usize);
    // SAFETY: both out-pointers are valid for writing.
    if unsafe { f(ACL_HBM_MEM, &mut free, &mut total) } != 0 {
        // set the device again next time (the runtime may have been finalised and initialised
        // again since)
        ON.with(|c| c.set(-1));
        return None;
    }
    Some((free as u64, total as u64))
}
