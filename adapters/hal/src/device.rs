//! The calling thread's current device as the Ascend runtime knows it (abi.md §3.4, behaviour
//! spec §8): msMemScope asks `aclrtGetDeviceImpl` (ACL impl), or `rtGetDevice` when that is
//! missing, whenever it reports an event. A query, not a hook: it works whatever adapters are
//! selected, and answers "unknown" in a process that loaded no runtime.
//!
//! Cost: once resolved, one call into the runtime (a thread-local read there). While no
//! runtime is loaded, a failed lookup is retried only after the dynamic loader reports a new
//! object (`dl_iterate_phdr`'s `dlpi_adds` counter), so a process that never loads CANN pays
//! one loader-lock round trip per query, not a failed `dlsym` (which allocates).

use crate::real::{Real, Step};
use core::ffi::{c_int, c_void};
use core::sync::atomic::{AtomicU64, Ordering};

/// `aclError aclrtGetDeviceImpl(int32_t *deviceId)`, else `rtError_t rtGetDevice(int32_t *)`
/// (both `int f(int32_t *)`, 0 on success).
static GET_DEVICE: Real = Real::new(&[
    Step::Default(c"aclrtGetDeviceImpl"),
    Step::Loaded {
        lib: c"libascendcl_impl.so",
        sym: c"aclrtGetDeviceImpl",
    },
    Step::Loaded {
        lib: c"libacl_rt_impl.so",
        sym: c"aclrtGetDeviceImpl",
    },
    Step::Default(c"rtGetDevice"),
    Step::Loaded {
        lib: c"libruntime.so",
        sym: c"rtGetDevice",
    },
]);

/// `dlpi_adds` when the last lookup failed; `u64::MAX`: no lookup failed yet.
static MISSED_AT: AtomicU64 = AtomicU64::new(u64::MAX);

/// The loader's count of objects added so far (`None` when this libc does not report it).
fn loader_adds() -> Option<u64> {
    unsafe extern "C" fn first(
        info: *mut libc::dl_phdr_info,
        size: usize,
        data: *mut c_void,
    ) -> c_int {
        let need = core::mem::offset_of!(libc::dl_phdr_info, dlpi_subs);
        if size >= need && !info.is_null() {
            // SAFETY: the loader passes a valid `dl_phdr_info` of at least `size` bytes, which
            // covers `dlpi_adds`; `data` is the `u64` handed to dl_iterate_phdr below.
            unsafe { *data.cast::<u64>() = (*info).dlpi_adds };
        }
        1 // the first object carries the counters: stop
    }
    let mut adds = u64::MAX;
    // SAFETY: `first` has the callback signature and only writes `adds`, which outlives the
    // call; dl_iterate_phdr neither allocates nor keeps the pointer.
    unsafe { libc::dl_iterate_phdr(Some(first), (&mut adds as *mut u64).cast()) };
    (adds != u64::MAX).then_some(adds)
}

fn resolve() -> Option<*mut c_void> {
    if let Some(p) = GET_DEVICE.peek() {
        return Some(p);
    }
    let adds = loader_adds();
    if adds.is_some() && adds == Some(MISSED_AT.load(Ordering::Relaxed)) {
        return None; // nothing new loaded since the last miss
    }
    let p = GET_DEVICE.get();
    if p.is_none() {
        MISSED_AT.store(adds.unwrap_or(u64::MAX), Ordering::Relaxed);
    }
    p
}

/// The calling thread's current device (logical id, before `ASCEND_RT_VISIBLE_DEVICES`
/// mapping); `u32::MAX` when the runtime is not loaded or has no device for the thread.
pub fn current_logical() -> u32 {
    let Some(p) = resolve() else {
        return u32::MAX;
    };
    // SAFETY: `aclrtGetDeviceImpl` and `rtGetDevice` both are `int f(int32_t *)`.
    let f =
        unsafe { core::mem::transmute::<*mut c_void, unsafe extern "C" fn(*mut i32) -> i32>(p) };
    let mut d = -1i32;
    // SAFETY: `d` is writable for the call.
    if unsafe { f(&mut d) } == 0 && d >= 0 {
        d as u32
    } else {
        u32::MAX
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_runtime_the_device_is_unknown_and_misses_are_not_retried() {
        assert!(
            loader_adds().is_some_and(|n| n > 0),
            "glibc reports dlpi_adds"
        );
        assert_eq!(current_logical(), u32::MAX);
        let missed = MISSED_AT.load(Ordering::Relaxed);
        assert_eq!(Some(missed), loader_adds());
        assert_eq!(current_logical(), u32::MAX);
        assert_eq!(MISSED_AT.load(Ordering::Relaxed), missed);
    }
}
