//! Stream and event calls (issue 36): what orders work across streams — stream and event
//! lifetimes, `aclrtRecordEvent`, `aclrtStreamWaitEvent` and the three synchronisations —
//! recorded with their handles so that a cross-stream check can rebuild the order of the
//! launches ([`crate::launch`] records each launch's stream).
//!
//! Every hook calls the real `libascendcl.so` function with the caller's arguments and returns
//! its result unchanged (`ACL_ERROR_INTERNAL_ERROR` only when no real function exists). A call
//! that returned 0 is recorded when kernel launches are recorded (the same switch,
//! [`crate::launch::wanted`]) and a collection window is open: destroys are stamped before the
//! call (another thread may get the handle back at once), everything else after it (a create's
//! handle exists, a synchronisation has finished). No allocation, lock or wait: the record is
//! encoded on the hook's stack.

use crate::hooks::ACL_ERROR_INTERNAL_ERROR;
use crate::launch::{acl_steps, wanted};
use crate::wire::AclRecord;
use crate::SOURCE;
use core::ffi::{c_int, c_void};
use memscope_runtime as rt;
use memscope_runtime::real::{Real, Step};

type P = *mut c_void;

static CREATE_STREAM: Real = Real::new(acl_steps!(c"aclrtCreateStream"));
static DESTROY_STREAM: Real = Real::new(acl_steps!(c"aclrtDestroyStream"));
static CREATE_EVENT: Real = Real::new(acl_steps!(c"aclrtCreateEvent"));
static DESTROY_EVENT: Real = Real::new(acl_steps!(c"aclrtDestroyEvent"));
static RECORD_EVENT: Real = Real::new(acl_steps!(c"aclrtRecordEvent"));
static STREAM_WAIT_EVENT: Real = Real::new(acl_steps!(c"aclrtStreamWaitEvent"));
static SYNC_STREAM: Real = Real::new(acl_steps!(c"aclrtSynchronizeStream"));
static SYNC_EVENT: Real = Real::new(acl_steps!(c"aclrtSynchronizeEvent"));
static SYNC_DEVICE: Real = Real::new(acl_steps!(c"aclrtSynchronizeDevice"));

/// Whether a stream or event call should be recorded now: one relaxed load when the adapter is
/// off or no window is open.
fn on() -> bool {
    rt::enabled(SOURCE) && wanted()
}

/// Records `rec` at `ts` unless the thread is inside the probe.
fn record(ts: u64, rec: AclRecord<'static>) {
    if let Some(mut g) = rt::enter() {
        rt::record_source(&mut g, SOURCE, ts, &rec, false);
    }
}

/// `aclError aclrtCreateStream(aclrtStream *stream)` hook.
///
/// # Safety
/// ACL's contract: `stream` is NULL or writable.
pub unsafe extern "C" fn aclrt_create_stream(stream: *mut P) -> c_int {
    rt::safe_point();
    let Some(p) = CREATE_STREAM.get() else {
        return ACL_ERROR_INTERNAL_ERROR;
    };
    // SAFETY: the symbol is `aclrtCreateStream`.
    let f = unsafe { core::mem::transmute::<P, unsafe extern "C" fn(*mut P) -> c_int>(p) };
    // SAFETY: forwarding the caller's argument.
    let rc = unsafe { f(stream) };
    if rc == 0 && !stream.is_null() && on() {
        // SAFETY: the call succeeded, so ACL wrote the new handle to the caller's `stream`.
        let s = unsafe { stream.read() } as u64;
        record(rt::now_ns(), AclRecord::StreamCreate { stream: s });
    }
    rc
}

/// `aclError aclrtCreateEvent(aclrtEvent *event)` hook.
///
/// # Safety
/// ACL's contract: `event` is NULL or writable.
pub unsafe extern "C" fn aclrt_create_event(event: *mut P) -> c_int {
    rt::safe_point();
    let Some(p) = CREATE_EVENT.get() else {
        return ACL_ERROR_INTERNAL_ERROR;
    };
    // SAFETY: the symbol is `aclrtCreateEvent`.
    let f = unsafe { core::mem::transmute::<P, unsafe extern "C" fn(*mut P) -> c_int>(p) };
    // SAFETY: forwarding the caller's argument.
    let rc = unsafe { f(event) };
    if rc == 0 && !event.is_null() && on() {
        // SAFETY: the call succeeded, so ACL wrote the new handle to the caller's `event`.
        let e = unsafe { event.read() } as u64;
        record(rt::now_ns(), AclRecord::EventCreate { event: e });
    }
    rc
}

/// Forwards a one-handle call through `real` and records `make(handle)` on success, stamped
/// before the call when `before` (destroys), else after it.
fn one_handle(real: &Real, h: P, before: bool, make: fn(u64) -> AclRecord<'static>) -> c_int {
    rt::safe_point();
    let Some(p) = real.get() else {
        return ACL_ERROR_INTERNAL_ERROR;
    };
    // SAFETY: every caller's symbol is `aclError f(aclrtStream)` or `aclError f(aclrtEvent)`,
    // both `void *` handles (abi.md §3).
    let f = unsafe { core::mem::transmute::<P, unsafe extern "C" fn(P) -> c_int>(p) };
    let on = on();
    let ts = if on && before { rt::now_ns() } else { 0 };
    // SAFETY: forwarding the caller's argument.
    let rc = unsafe { f(h) };
    if rc == 0 && on {
        record(if before { ts } else { rt::now_ns() }, make(h as u64));
    }
    rc
}

/// Forwards a two-handle call (`first`, `second` in the caller's order) through `real` and
/// records `make(first, second)` on success, stamped after the call.
fn two_handles(real: &Real, a: P, b: P, make: fn(u64, u64) -> AclRecord<'static>) -> c_int {
    rt::safe_point();
    let Some(p) = real.get() else {
        return ACL_ERROR_INTERNAL_ERROR;
    };
    // SAFETY: every caller's symbol is `aclError f(void *, void *)` with two handles
    // (`aclrtRecordEvent(event, stream)`, `aclrtStreamWaitEvent(stream, event)`).
    let f = unsafe { core::mem::transmute::<P, unsafe extern "C" fn(P, P) -> c_int>(p) };
    // SAFETY: forwarding the caller's arguments.
    let rc = unsafe { f(a, b) };
    if rc == 0 && on() {
        record(rt::now_ns(), make(a as u64, b as u64));
    }
    rc
}

/// `aclError aclrtDestroyStream(aclrtStream stream)` hook.
///
/// # Safety
/// ACL's contract.
pub unsafe extern "C" fn aclrt_destroy_stream(stream: P) -> c_int {
    one_handle(&DESTROY_STREAM, stream, true, |stream| {
        AclRecord::StreamDestroy { stream }
    })
}

/// `aclError aclrtDestroyEvent(aclrtEvent event)` hook.
///
/// # Safety
/// ACL's contract.
pub unsafe extern "C" fn aclrt_destroy_event(event: P) -> c_int {
    one_handle(&DESTROY_EVENT, event, true, |event| {
        AclRecord::EventDestroy { event }
    })
}

/// `aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream)` hook.
///
/// # Safety
/// ACL's contract.
pub unsafe extern "C" fn aclrt_record_event(event: P, stream: P) -> c_int {
    two_handles(&RECORD_EVENT, event, stream, |event, stream| {
        AclRecord::EventRecord { event, stream }
    })
}

/// `aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event)` hook.
///
/// # Safety
/// ACL's contract.
pub unsafe extern "C" fn aclrt_stream_wait_event(stream: P, event: P) -> c_int {
    two_handles(&STREAM_WAIT_EVENT, stream, event, |stream, event| {
        AclRecord::StreamWaitEvent { stream, event }
    })
}

/// `aclError aclrtSynchronizeStream(aclrtStream stream)` hook.
///
/// # Safety
/// ACL's contract.
pub unsafe extern "C" fn aclrt_synchronize_stream(stream: P) -> c_int {
    one_handle(&SYNC_STREAM, stream, false, |stream| {
        AclRecord::StreamSync { stream }
    })
}

/// `aclError aclrtSynchronizeEvent(aclrtEvent event)` hook.
///
/// # Safety
/// ACL's contract.
pub unsafe extern "C" fn aclrt_synchronize_event(event: P) -> c_int {
    one_handle(&SYNC_EVENT, event, false, |event| AclRecord::EventSync {
        event,
    })
}

/// `aclError aclrtSynchronizeDevice(void)` hook.
///
/// # Safety
/// None beyond ACL's.
pub unsafe extern "C" fn aclrt_synchronize_device() -> c_int {
    rt::safe_point();
    let Some(p) = SYNC_DEVICE.get() else {
        return ACL_ERROR_INTERNAL_ERROR;
    };
    // SAFETY: the symbol is `aclrtSynchronizeDevice`.
    let f = unsafe { core::mem::transmute::<P, unsafe extern "C" fn() -> c_int>(p) };
    // SAFETY: no arguments.
    let rc = unsafe { f() };
    if rc == 0 && on() {
        record(rt::now_ns(), AclRecord::DeviceSync {});
    }
    rc
}
