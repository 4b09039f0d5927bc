//! The shadow stacks of `stack.rs` kept through PEP 669 `sys.monitoring` on CPython ≥ 3.12:
//! memscope takes the profiler tool id and subscribes to the events that enter and leave
//! Python frames only (`PY_START`, `PY_RESUME`, `PY_THROW` push; `PY_RETURN`, `PY_YIELD`,
//! `PY_UNWIND` pop). Unlike the profile hook (which on 3.12+ is itself a `sys.monitoring`
//! shim subscribed to every call), calls of C functions cost nothing, and every thread, present
//! and future, is covered without `threading.setprofile`. When the tool id is taken (another
//! profiler runs) the caller falls back to the profile hook.
//!
//! The callbacks are C functions wrapped as built-in function objects (`PyCFunction_NewEx`,
//! `METH_FASTCALL`): they read the running frame (`PyEval_GetFrame`, as the profile shim does)
//! and return `None`. Only used with the GIL held (monitoring callbacks run with it).

use super::cpython::{self, Api, Obj};
use super::{intern, stack};
use core::ffi::{c_char, c_int, c_long, c_void};
use core::sync::atomic::{AtomicBool, Ordering};

/// `sys.monitoring.PROFILER_ID`.
const PROFILER_ID: c_long = 2;
/// `METH_FASTCALL`.
const METH_FASTCALL: c_int = 0x0080;

type FastFn = unsafe extern "C" fn(Obj, *const Obj, isize) -> Obj;

/// `PyMethodDef` (stable ABI layout).
#[repr(C)]
struct MethodDef {
    name: *const c_char,
    meth: FastFn,
    flags: c_int,
    doc: *const c_char,
}

/// The method definitions: static, as CPython keeps pointers to them.
struct Defs([MethodDef; 2]);
// SAFETY: read-only after construction; the pointers are to static strings and functions.
unsafe impl Sync for Defs {}

static DEFS: Defs = Defs([
    MethodDef {
        name: c"memscope_frame_enter".as_ptr(),
        meth: enter,
        flags: METH_FASTCALL,
        doc: core::ptr::null(),
    },
    MethodDef {
        name: c"memscope_frame_leave".as_ptr(),
        meth: leave,
        flags: METH_FASTCALL,
        doc: core::ptr::null(),
    },
]);

/// The shadow stacks are kept through `sys.monitoring`.
static ON: AtomicBool = AtomicBool::new(false);

/// Whether `sys.monitoring` keeps the shadow stacks (the profile hook then leaves them).
#[inline]
pub fn on() -> bool {
    ON.load(Ordering::Relaxed)
}

fn none(api: &Api) -> Obj {
    if let (Some(inc), false) = (api.incref, api.none.is_null()) {
        // SAFETY: GIL held; `None` is immortal or reference counted, either way an object.
        unsafe { inc(api.none) };
    }
    api.none
}

/// `PY_START`/`PY_RESUME`/`PY_THROW(code, offset, ...)`: a frame of `code` runs.
unsafe extern "C" fn enter(_slf: Obj, args: *const Obj, nargs: isize) -> Obj {
    let Some(api) = cpython::api_checked() else {
        return core::ptr::null_mut();
    };
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        if nargs < 1 || args.is_null() || !stack::on() {
            return;
        }
        // SAFETY: the interpreter passes `nargs` arguments; the first is the code object.
        let code = unsafe { *args };
        let frame = match api.get_frame {
            // SAFETY: GIL held; a borrowed frame (the one just started) or null.
            Some(g) => unsafe { g() },
            None => core::ptr::null_mut(),
        };
        if frame.is_null() || code.is_null() {
            return;
        }
        let id = intern::lookup_flag(&intern::Key::Code(code as usize))
            .or_else(|| super::codes::slow_code_id(api, code))
            .map_or(0, |(id, _)| id);
        stack::push(api, id, frame);
    }));
    none(api)
}

/// `PY_RETURN`/`PY_YIELD`/`PY_UNWIND(code, offset, ...)`: the running frame leaves.
unsafe extern "C" fn leave(_slf: Obj, _args: *const Obj, _nargs: isize) -> Obj {
    let Some(api) = cpython::api_checked() else {
        return core::ptr::null_mut();
    };
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        if !stack::on() {
            return;
        }
        let frame = match api.get_frame {
            // SAFETY: GIL held; a borrowed frame (the one leaving) or null.
            Some(g) => unsafe { g() },
            None => core::ptr::null_mut(),
        };
        if !frame.is_null() {
            stack::pop(api, frame);
        }
    }));
    none(api)
}

/// `callable(*args)`, stealing `args`; `false` (error cleared) when it raised or a piece is
/// missing. GIL held.
fn call(api: &Api, callable: Obj, args: &[Obj]) -> bool {
    let (Some(new), Some(set), Some(callf)) = (api.tuple_new, api.tuple_set, api.call_object)
    else {
        args.iter().for_each(|a| api.decref(*a));
        return false;
    };
    if callable.is_null() || args.iter().any(|a| a.is_null()) {
        args.iter().for_each(|a| api.decref(*a));
        api.clear();
        return false;
    }
    // SAFETY: GIL held; the tuple takes the references of `args` (SetItem steals).
    let r = unsafe {
        let t = new(args.len() as isize);
        if t.is_null() {
            args.iter().for_each(|a| api.decref(*a));
            api.clear();
            return false;
        }
        for (i, a) in args.iter().enumerate() {
            set(t, i as isize, *a);
        }
        let r = callf(callable, t);
        api.decref(t);
        r
    };
    if r.is_null() {
        api.clear();
        return false;
    }
    api.decref(r);
    true
}

fn long(api: &Api, v: c_long) -> Obj {
    match api.long_from {
        // SAFETY: GIL held.
        Some(f) => unsafe { f(v) },
        None => core::ptr::null_mut(),
    }
}

/// Subscribes the shadow stacks to `sys.monitoring` (GIL held). `false` when it cannot here
/// (CPython < 3.12, a symbol missing, the profiler tool id taken): the caller uses the
/// profile hook instead.
pub fn start(api: &Api) -> bool {
    if api.version < (3, 12) || ON.load(Ordering::Acquire) {
        return ON.load(Ordering::Acquire);
    }
    let (Some(import), Some(newf), Some(ustr)) =
        (api.import_module, api.cfunction_new, api.unicode_from)
    else {
        return false;
    };
    let saved = api.save_error();
    // SAFETY: GIL held; NUL-terminated name.
    let sys = unsafe { import(c"sys".as_ptr()) };
    let mon = api.attr(sys, b"monitoring\0");
    api.decref(sys);
    let ok = (|| {
        if mon.is_null() {
            return false;
        }
        let use_id = api.attr(mon, b"use_tool_id\0");
        // SAFETY: GIL held; NUL-terminated text.
        let name = unsafe { ustr(c"memscope".as_ptr()) };
        let got = call(api, use_id, &[long(api, PROFILER_ID), name]);
        api.decref(use_id);
        if !got {
            return false; // the tool id is taken
        }
        let events = api.attr(mon, b"events\0");
        let register = api.attr(mon, b"register_callback\0");
        let mut mask: c_long = 0;
        let mut all = true;
        for (ev, def) in [
            (&b"PY_START\0"[..], 0usize),
            (b"PY_RESUME\0", 0),
            (b"PY_THROW\0", 0),
            (b"PY_RETURN\0", 1),
            (b"PY_YIELD\0", 1),
            (b"PY_UNWIND\0", 1),
        ] {
            let Some(bit) = api.attr_long(events, ev) else {
                all = false;
                break;
            };
            // SAFETY: GIL held; DEFS is static and has the PyMethodDef layout.
            let f = unsafe {
                newf(
                    (&DEFS.0[def] as *const MethodDef).cast::<c_void>(),
                    core::ptr::null_mut(),
                    core::ptr::null_mut(),
                )
            };
            if !call(
                api,
                register,
                &[long(api, PROFILER_ID), long(api, bit as c_long), f],
            ) {
                all = false;
                break;
            }
            mask |= bit as c_long;
        }
        api.decref(register);
        api.decref(events);
        let set = api.attr(mon, b"set_events\0");
        let armed = all && call(api, set, &[long(api, PROFILER_ID), long(api, mask)]);
        api.decref(set);
        if !armed {
            let free = api.attr(mon, b"free_tool_id\0");
            call(api, free, &[long(api, PROFILER_ID)]);
            api.decref(free);
        }
        armed
    })();
    api.decref(mon);
    api.restore_error(saved);
    if ok {
        ON.store(true, Ordering::Release);
    }
    ok
}
