//! Code ids on the slow path of a lookup miss: defining a code object's id calls into the
//! interpreter, so it runs with the exception state saved, as runtime-internal code. Shared by
//! the profile hook (`trace.rs`), the `sys.monitoring` callbacks (`monitoring.rs`) and the
//! stack walk (`stack.rs`).

use super::cpython::{Api, Frame, Obj};
use super::intern;
use memscope_runtime as rt;

/// Slow path of the hook: anything that may call into the interpreter runs with the current
/// exception saved, as runtime-internal code (`rt::internal`: the allocations it causes are
/// ours, so the hooks they reach forward without recording).
pub(super) fn slow<R>(api: &Api, f: impl FnOnce() -> Option<R>) -> Option<R> {
    rt::internal(|| {
        let saved = api.save_error();
        let r = f();
        api.restore_error(saved);
        r
    })
}

/// The (code id, is `_call_impl`) of code object `code`, defining it (GIL held; the slow path
/// of a lookup miss, with the exception state saved).
pub(super) fn slow_code_id(api: &Api, code: Obj) -> Option<(u32, bool)> {
    slow(api, || intern::code_id(api, code))
}

/// The function code id of the Python function running in `frame` (GIL held; defines it on
/// first sight). For the stacks of `stack.rs`.
pub(super) fn func_id(api: &Api, frame: Frame) -> Option<u32> {
    let code = {
        let f = api.frame_code?;
        // SAFETY: GIL held; `frame` is a live frame.
        unsafe { f(frame) }
    };
    if code.is_null() {
        return None;
    }
    let id = match intern::lookup_flag(&intern::Key::Code(code as usize)) {
        Some((id, _)) => Some(id),
        None => slow(api, || intern::code_id(api, code).map(|(id, _)| id)),
    };
    api.decref(code);
    id
}
