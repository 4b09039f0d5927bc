//! A runtime service of every adapter (moved from the HAL adapter in issue 11): the calling
//! thread's current device as the Ascend runtime knows it (abi.md §3.4, behaviour
//! spec §8): msMemScope asks `aclrtGetDeviceImpl` (ACL impl), or `rtGetDevice` when that is
//! missing, whenever it reports an event. A query, not a hook: it works whatever adapters are
//! selected, and answers "unknown" in a process that loaded no runtime.
//!
//! Cost: once resolved, one call into the runtime (a thread-local read there). While no
//! runtime is loaded, the loader is asked at most once per [`RETRY_NS`] whether it loaded an
//! object since the last failed lookup (`dl_iterate_phdr`'s `dlpi_adds` counter, ~60–90 ns),
//! and the symbols are looked up again only then (a failed `dlsym` allocates); in between a
//! query costs one atomic load. A runtime loaded and given a device less than [`RETRY_NS`]
//! after the previous query is seen from the next query on (loading a library takes longer).

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

/// Least time between two checks of the loader while the runtime is not found, ns.
pub const RETRY_NS: u64 = 20_000;

/// Time (ns, the callers' clock) before which the loader is not asked again.
static NEXT_CHECK: AtomicU64 = AtomicU64::new(0);

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

fn resolve(now_ns: u64) -> Option<*mut c_void> {
    if let Some(p) = GET_DEVICE.peek() {
        return Some(p);
    }
    if now_ns < NEXT_CHECK.load(Ordering::Relaxed) {
        return None;
    }
    NEXT_CHECK.store(now_ns.saturating_add(RETRY_NS), Ordering::Relaxed);
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
/// `now_ns` is the caller's time stamp (any clock that does not go back), used to space out
/// lookups while no runtime is loaded.
pub fn current_logical(now_ns: u64) -> u32 {
    let Some(p) = resolve(now_ns) else {
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
        let t = 1_000_000_000;
        assert_eq!(current_logical(t), u32::MAX);
        let missed = MISSED_AT.load(Ordering::Relaxed);
        assert_eq!(Some(missed), loader_adds());
        assert_eq!(NEXT_CHECK.load(Ordering::Relaxed), t + RETRY_NS);
        assert_eq!(
            current_logical(t + 1),
            u32::MAX,
            "within the retry interval"
        );
        assert_eq!(NEXT_CHECK.load(Ordering::Relaxed), t + RETRY_NS);
        assert_eq!(
            current_logical(t + RETRY_NS),
            u32::MAX,
            "nothing new loaded"
        );
        assert_eq!(MISSED_AT.load(Ordering::Relaxed), missed);
    }
}
