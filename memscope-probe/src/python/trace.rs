//! The Python tracer: a C-level profile function (`PyEval_SetProfile` family, resolved at run
//! time) that records every Python and C call and return into the probe's stream — same clock
//! as every other record, crash-safe like them.
//!
//! Each thread keeps a shadow stack of the code ids it entered since the tracer started (heap
//! vector behind an 8-byte TLS slot; no TLS destructor, it is reclaimed only at process exit).
//! A return pops the id it records, so returns cost no lookup. Frames that were already running
//! when the tracer started return with an empty shadow stack: their id is looked up from the
//! frame (the collector writes them with StartTime `N/A`). The same hook keeps the shadow
//! stacks of `stack.rs` (Python stacks on every row) while those are on, with or without the
//! tracer.

use super::codes::slow;
use super::cpython::{self, what, Api, Frame, Obj};
use super::intern;
use super::stack;
use core::cell::{Cell, RefCell};
use core::ffi::c_int;
use core::mem::ManuallyDrop;
use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use memscope_runtime as rt;
use memscope_wire::{PyTraceEvent, Record};

/// The tracer is installed.
static ACTIVE: AtomicBool = AtomicBool::new(false);
/// Bumped at every start: a thread whose stack belongs to an older epoch clears it first.
static EPOCH: AtomicU32 = AtomicU32::new(0);
/// The tracer was started by `tracer.start()` itself (issue 27): as msMemScope's, it traces
/// whether or not a collection window is open.
static STANDALONE: AtomicBool = AtomicBool::new(false);

/// Whether calls are traced now: inside a collection window, or while a standalone tracer
/// runs.
fn tracing_now() -> bool {
    rt::recording() || (STANDALONE.load(Ordering::Relaxed) && ACTIVE.load(Ordering::Relaxed))
}

/// Makes the tracer trace outside collection windows too (`on`), or only inside them.
pub fn set_standalone(on: bool) {
    STANDALONE.store(on, Ordering::Relaxed);
}

thread_local! {
    static STACK: ManuallyDrop<RefCell<Vec<u32>>> = const { ManuallyDrop::new(RefCell::new(Vec::new())) };
    static STACK_EPOCH: Cell<u32> = const { Cell::new(0) };
}

fn with_stack<R>(f: impl FnOnce(&mut Vec<u32>) -> R) -> Option<R> {
    let epoch = EPOCH.load(Ordering::Relaxed);
    STACK
        .try_with(|s| {
            let mut s = s.try_borrow_mut().ok()?;
            if STACK_EPOCH.try_with(|e| e.replace(epoch)).ok()? != epoch {
                s.clear();
            }
            Some(f(&mut s))
        })
        .ok()
        .flatten()
}

/// Whether the tracer is installed.
pub fn active() -> bool {
    ACTIVE.load(Ordering::Acquire)
}

/// Pushes `code` on the shadow stack and records the call (0: a placeholder, not recorded).
fn call(code: u32) {
    with_stack(|s| s.push(code));
    if code != 0 {
        emit_call(code);
    }
}

fn emit_call(code: u32) {
    rt::record(&Record::PyCall {
        ts: rt::now_ns(),
        code,
    });
}

fn ret(code: u32) {
    rt::record(&Record::PyReturn {
        ts: rt::now_ns(),
        code,
    });
}

/// The id of the Python function running in `frame`.
fn frame_id(api: &Api, frame: Frame, with_module: bool) -> Option<u32> {
    let code = {
        let f = api.frame_code?;
        // SAFETY: GIL held; `frame` is a live frame (profile hook argument or stack walk).
        unsafe { f(frame) }
    };
    if code.is_null() {
        return None;
    }
    let id = match intern::code_id(api, code) {
        Some((_, true)) if with_module => intern::module_id(api, code, frame),
        Some((id, _)) => Some(id),
        None => None,
    };
    api.decref(code);
    id
}

/// The `Py_tracefunc` installed on every thread while tracing or while Python stacks are on
/// (`stack.rs`).
///
/// # Safety
/// Called by the interpreter with the GIL held and valid `frame`/`arg` for `what`.
unsafe extern "C" fn profile(_obj: Obj, frame: Frame, what: c_int, arg: Obj) -> c_int {
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let tracing = ACTIVE.load(Ordering::Relaxed);
        // With sys.monitoring keeping the shadow stacks (3.12+), this hook only traces.
        let stacks = stack::on() && !super::monitoring::on();
        if !tracing && !stacks {
            return;
        }
        let Some(api) = cpython::api_checked() else {
            return;
        };
        match what {
            what::CALL => {
                let code = match api.frame_code {
                    // SAFETY: GIL held; `frame` is the frame being entered.
                    Some(f) => unsafe { f(frame) },
                    None => core::ptr::null_mut(),
                };
                let found = if code.is_null() {
                    None
                } else {
                    intern::lookup_flag(&intern::Key::Code(code as usize))
                        .or_else(|| slow(api, || intern::code_id(api, code)))
                };
                api.decref(code);
                if stacks {
                    stack::push(api, found.map_or(0, |(id, _)| id), frame);
                }
                if tracing {
                    trace_call(api, frame, found);
                }
            }
            what::RETURN => {
                if stacks {
                    stack::pop(api, frame);
                }
                if tracing {
                    trace_return(api, frame, what, arg);
                }
            }
            what::C_CALL if tracing => {
                if !tracing_now() {
                    with_stack(|s| s.push(0));
                    return;
                }
                let id = intern::lookup(&intern::cfunc_key(api, arg))
                    .or_else(|| slow(api, || intern::cfunc_id(api, arg)));
                call(id.unwrap_or(0));
            }
            what::C_RETURN | what::C_EXCEPTION if tracing => trace_return(api, frame, what, arg),
            _ => {}
        }
    }));
    let _ = r;
    0
}

/// Tracer side of a Python call; `found` is the code's (function id, is `_call_impl`).
fn trace_call(api: &Api, frame: Frame, found: Option<(u32, bool)>) {
    if !tracing_now() {
        // Keep calls and returns balanced across closed windows: a placeholder.
        with_stack(|s| s.push(0));
        return;
    }
    let id = match found {
        Some((id, false)) => Some(id),
        Some((_, true)) => slow(api, || frame_id(api, frame, true)),
        None => None,
    };
    // Unknown code: a placeholder keeps the shadow stack balanced.
    call(id.unwrap_or(0));
}

/// Tracer side of a Python or C return.
fn trace_return(api: &Api, frame: Frame, what: c_int, arg: Obj) {
    let recording = tracing_now();
    match with_stack(|s| s.pop()).flatten() {
        Some(0) => {}
        Some(id) if recording => ret(id),
        Some(_) => {}
        None if !recording => {}
        None => {
            let id = if what == what::RETURN {
                slow(api, || frame_id(api, frame, false))
            } else {
                intern::lookup(&intern::cfunc_key(api, arg))
                    .or_else(|| slow(api, || intern::cfunc_id(api, arg)))
            };
            if let Some(id) = id {
                ret(id);
            }
        }
    }
}

/// Records one `PyTrace` frame record per frame of the calling thread's stack, outermost first.
fn record_stack(api: &Api, event: PyTraceEvent, ts: u64) {
    let (Some(get), Some(back)) = (api.get_frame, api.frame_back) else {
        return;
    };
    let mut ids = Vec::new();
    // SAFETY: GIL held; PyEval_GetFrame returns a borrowed frame (or null).
    let mut f = unsafe { get() };
    let mut owned = false;
    while !f.is_null() && ids.len() < 1000 {
        if let Some(id) = slow(api, || frame_id(api, f, false)) {
            ids.push(id);
        }
        // SAFETY: GIL held; PyFrame_GetBack returns a new reference (or null).
        let next = unsafe { back(f) };
        if owned {
            api.decref(f);
        }
        f = next;
        owned = true;
    }
    if owned {
        api.decref(f);
    }
    for code in ids.into_iter().rev() {
        rt::record(&Record::PyTrace { ts, event, code });
    }
}

/// Installs (`Some`) or removes (`None`) the profile function on every thread of the
/// interpreter: `PyEval_SetProfileAllThreads` on 3.12+, `_PyEval_SetProfile` per thread
/// state before, the calling thread only as a last resort.
fn install(api: &Api, f: Option<cpython::TraceFn>) {
    if let Some(all) = api.set_profile_all {
        // SAFETY: GIL held (caller contract).
        unsafe { all(f, core::ptr::null_mut()) };
        return;
    }
    if let (Some(get), Some(interp), Some(head), Some(next), Some(set_ts)) = (
        api.thread_state_get,
        api.thread_state_interp,
        api.interp_thread_head,
        api.thread_state_next,
        api.set_profile_ts,
    ) {
        // SAFETY: GIL held: the thread-state list is stable while we walk it (new threads
        // get the hook from `threading.setprofile`, installed by the Python side).
        unsafe {
            let me = get();
            let mut ts = head(interp(me));
            while !ts.is_null() {
                set_ts(ts, f, core::ptr::null_mut());
                ts = next(ts);
            }
        }
        api.clear();
        return;
    }
    if let Some(set) = api.set_profile {
        // SAFETY: GIL held.
        unsafe { set(f, core::ptr::null_mut()) };
    }
}

/// Starts the tracer. `Err` with a one-line reason when it cannot run here; `Ok(false)` when
/// it was already running.
pub fn start() -> Result<bool, &'static str> {
    let api = cpython::api()?;
    if ACTIVE.swap(true, Ordering::AcqRel) {
        return Ok(false);
    }
    EPOCH.fetch_add(1, Ordering::Relaxed);
    let ts = rt::now_ns();
    rt::record(&Record::PyTrace {
        ts,
        event: PyTraceEvent::Start,
        code: 0,
    });
    record_stack(api, PyTraceEvent::FrameAtStart, ts);
    if !stack::on() || super::monitoring::on() {
        install(api, Some(profile));
    }
    Ok(true)
}

/// Turns Python stacks on every row on (`stack.rs`): kept through `sys.monitoring` on 3.12+
/// when `monitoring` (`monitoring.rs`), else by the profile hook, installed on every thread unless
/// the tracer has it installed already. `Ok(false)`: already on.
pub fn start_stacks(monitoring: bool) -> Result<bool, &'static str> {
    let api = cpython::api()?;
    if stack::on() {
        return Ok(false);
    }
    let monitored = monitoring && super::monitoring::start(api);
    if !stack::start(api) {
        return Ok(false);
    }
    if !monitored && !active() {
        install(api, Some(profile));
    }
    Ok(true)
}

/// Installs the tracer on the calling thread only (a thread started after `start`, through
/// `threading.setprofile`). `false` when the tracer is not running.
pub fn start_thread() -> bool {
    let Ok(api) = cpython::api() else {
        return false;
    };
    let hook_keeps_stacks = stack::on() && !super::monitoring::on();
    if !active() && !hook_keeps_stacks {
        // Nothing to install (e.g. sys.monitoring keeps the stacks): drop the Python-level
        // `threading.setprofile` hook that called us, so the thread pays nothing per call.
        if let Some(set) = api.set_profile {
            // SAFETY: GIL held (caller contract).
            unsafe { set(None, core::ptr::null_mut()) };
        }
        return false;
    }
    if let Some(set) = api.set_profile {
        // SAFETY: GIL held (caller contract).
        unsafe { set(Some(profile), core::ptr::null_mut()) };
    }
    true
}

/// Stops the tracer. `Ok(false)` when it was not running.
pub fn stop() -> Result<bool, &'static str> {
    let api = cpython::api()?;
    if !ACTIVE.swap(false, Ordering::AcqRel) {
        return Ok(false);
    }
    if !stack::on() || super::monitoring::on() {
        install(api, None);
    }
    let ts = rt::now_ns();
    record_stack(api, PyTraceEvent::FrameAtStop, ts);
    rt::record(&Record::PyTrace {
        ts,
        event: PyTraceEvent::Stop,
        code: 0,
    });
    Ok(true)
}

/// `RecordFunction(name)` start (`end` false) or end. Recorded inside a collection window or
/// while a standalone tracer runs (msMemScope writes these rows while tracing). `false` when
/// nothing was recorded.
pub fn record_function(name: &[u8], end: bool) -> bool {
    let Ok(api) = cpython::api() else {
        return false;
    };
    if !tracing_now() {
        return false;
    }
    let Some(id) = slow(api, || intern::user_id(api, name)) else {
        return false;
    };
    // A block, not a frame: it stays off the shadow stack, whose next pop is the return of the
    // C function that called this (issue 35: that return ended the block early); the collector
    // pairs the block's start and end by its id.
    if end {
        ret(id);
    } else {
        emit_call(id);
    }
    true
}
