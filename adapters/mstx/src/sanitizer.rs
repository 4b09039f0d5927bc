//! `sanitizer-op:` marks made from C handed to a listener (issue 36): msMemScope's
//! `enable_npu_sanitizer()` routes every such mark to torch_npu's sanitizer, including marks a
//! C++ extension makes with `mstxMarkA`. The Python package registers its router here
//! (`memscope_set_sanitizer_callback`, exported by the probe); the mark hook calls it for
//! marks with the prefix, after the mark is recorded and outside the reentrancy guard, on the
//! thread that made the mark. No listener: one relaxed load per mark.

use core::ffi::{c_char, c_void};
use core::sync::atomic::{AtomicUsize, Ordering};

/// A listener: the mark's message (NUL-terminated) and its stream (NULL: default stream).
pub type SanitizerCallback = unsafe extern "C" fn(*const c_char, *mut c_void);

/// The listener's address, 0 when none.
static CALLBACK: AtomicUsize = AtomicUsize::new(0);

const PREFIX: &[u8] = b"sanitizer-op:";

/// Sets (or with `None`, clears) the listener.
pub fn set_callback(cb: Option<SanitizerCallback>) {
    CALLBACK.store(cb.map_or(0, |f| f as usize), Ordering::Release);
}

/// Whether a listener is set.
pub fn listening() -> bool {
    CALLBACK.load(Ordering::Relaxed) != 0
}

/// Hands a mark with the `sanitizer-op:` prefix to the listener, if there is one.
///
/// # Safety
/// `raw` is NULL or the NUL-terminated message `msg` was read from, valid for the call;
/// `stream` is the caller's stream argument, passed on unread.
pub unsafe fn route(msg: &[u8], raw: *const c_char, stream: *mut c_void) {
    let cb = CALLBACK.load(Ordering::Acquire);
    if cb == 0 || raw.is_null() || !msg.starts_with(PREFIX) {
        return;
    }
    // SAFETY: `cb` was stored from a `SanitizerCallback` by `set_callback` and is never
    // anything else; function pointers and usize have the same size on every target we build.
    let f: SanitizerCallback = unsafe { core::mem::transmute::<usize, SanitizerCallback>(cb) };
    // SAFETY: `raw` is non-NULL and NUL-terminated, valid for this call (the caller's
    // contract); the listener reads it during the call only and does not read `stream`.
    unsafe { f(raw, stream) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    static CALLS: AtomicU64 = AtomicU64::new(0);
    static LAST_STREAM: AtomicUsize = AtomicUsize::new(0);

    unsafe extern "C" fn listener(_msg: *const c_char, stream: *mut c_void) {
        CALLS.fetch_add(1, Ordering::Relaxed);
        LAST_STREAM.store(stream as usize, Ordering::Relaxed);
    }

    #[test]
    fn only_sanitizer_op_marks_reach_the_listener_and_only_while_one_is_set() {
        let op = c"sanitizer-op: name=x;write=o:0x10:4";
        let plain = c"training start";
        let stream = 0x1234 as *mut c_void;
        // SAFETY: the messages are NUL-terminated literals.
        unsafe { route(op.to_bytes(), op.as_ptr(), stream) };
        assert_eq!(CALLS.load(Ordering::Relaxed), 0, "no listener yet");
        set_callback(Some(listener));
        assert!(listening());
        // SAFETY: as above.
        unsafe {
            route(plain.to_bytes(), plain.as_ptr(), stream);
            route(op.to_bytes(), op.as_ptr(), stream);
            route(op.to_bytes(), core::ptr::null(), stream);
        }
        assert_eq!(CALLS.load(Ordering::Relaxed), 1);
        assert_eq!(LAST_STREAM.load(Ordering::Relaxed), 0x1234);
        set_callback(None);
        assert!(!listening());
    }
}
