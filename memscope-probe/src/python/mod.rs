//! The probe's Python support, for the `memscope` Python package (issue 12): the tracer
//! (`python_trace` files), `RecordFunction`, memory snapshots, and the probe's status. The
//! package calls these `memscope_py_*` exports through `ctypes.PyDLL` (the GIL stays held).
//! CPython is reached only through symbols resolved at run time (`cpython.rs`).

mod codes;
mod cpython;
mod intern;
mod monitoring;
mod ops;
mod stack;
mod trace;

use core::ffi::{c_char, c_int};
use memscope_runtime as rt;
use memscope_wire::Record;

fn guard(err: c_int, f: impl FnOnce() -> c_int) -> c_int {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or(err)
}

/// Why the last `memscope_py_*` call failed, NUL-terminated: written and read with the GIL
/// held; bytes of atomics so no write needs `unsafe`.
static LAST_ERROR: [core::sync::atomic::AtomicU8; 128] =
    [const { core::sync::atomic::AtomicU8::new(0) }; 128];

fn set_error(msg: &str) {
    let n = msg.len().min(LAST_ERROR.len() - 1);
    for (cell, b) in LAST_ERROR.iter().zip(&msg.as_bytes()[..n]) {
        cell.store(*b, core::sync::atomic::Ordering::Relaxed);
    }
    LAST_ERROR[n].store(0, core::sync::atomic::Ordering::Relaxed);
}

/// `const char *memscope_py_last_error(void)`: why the last `memscope_py_*` call returned -1
/// (static buffer, valid until the next call; empty when there is no reason).
///
/// # Safety
/// Call with the GIL held (as every `memscope_py_*` function).
#[no_mangle]
pub unsafe extern "C" fn memscope_py_last_error() -> *const c_char {
    LAST_ERROR.as_ptr().cast()
}

/// `int memscope_py_status(void)`: 1 when the probe records (a collector follows this process),
/// 0 when it is passive (not started by `memscope run`/`memscope collect`, or the stream could
/// not be created). Initialises the probe on first use (it reads `MEMSCOPE_*` from `environ`).
///
/// # Safety
/// None.
#[no_mangle]
pub unsafe extern "C" fn memscope_py_status() -> c_int {
    guard(0, || {
        rt::safe_point();
        c_int::from(rt::ensure_init())
    })
}

/// `int memscope_py_attach(void)`: a probe preloaded without a spool (`source msmemscope
/// --load-api-env`) stays dormant; the Python package sets `MEMSCOPE_SPOOL` and the other
/// settings in the environment, then calls this to start recording. 1 when the probe records
/// now, 0 when it stays passive.
///
/// # Safety
/// None.
#[no_mangle]
pub unsafe extern "C" fn memscope_py_attach() -> c_int {
    guard(0, || {
        let ready = rt::wake();
        rt::safe_point();
        c_int::from(ready)
    })
}

/// `int memscope_py_wait_at_exit(int ms)`: when this process exits, wait at most `ms`
/// milliseconds for its collector to end, so that the plain-python mode's summary (with the
/// exit status) is printed before the process is gone (issue 23). 0.
///
/// # Safety
/// None.
#[no_mangle]
pub unsafe extern "C" fn memscope_py_wait_at_exit(ms: c_int) -> c_int {
    guard(-1, || {
        rt::wait_for_collector_at_exit(ms.max(0) as u32);
        0
    })
}

/// `int memscope_py_barrier(void)`: asks the collector to write everything this process
/// recorded so far (the Python API's `stop()`): records a barrier request and returns its
/// number N (> 0); the collector creates `<spool>/barrier.<pid>.done` holding N (or a higher
/// number) once it has. 0 when nothing was recorded (passive, or the stream is full).
///
/// # Safety
/// None.
#[no_mangle]
pub unsafe extern "C" fn memscope_py_barrier() -> c_int {
    guard(0, || {
        rt::safe_point();
        rt::barrier() as c_int
    })
}

/// `int memscope_py_set_c_stack(int depth)`: C stacks of `depth` frames (capped at 1000; 0:
/// none) on the rows from now on — `config(call_stack="c:N")` of a probe preloaded with
/// `source msmemscope --load-api-env`. 0, or -1 when passive.
///
/// # Safety
/// None.
#[no_mangle]
pub unsafe extern "C" fn memscope_py_set_c_stack(depth: c_int) -> c_int {
    guard(-1, || {
        if !rt::ensure_init() {
            return -1;
        }
        rt::set_c_stack_depth(depth.max(0) as u32);
        0
    })
}

/// `int memscope_py_load_plugin(const char *path)`: loads and starts an adapter plugin now
/// (`config(adapters="pymem")` of a process that did not start with it): 0 started (or
/// already), -1 refused or failed (reported on stderr and in the stream as at process start).
///
/// # Safety
/// `path` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn memscope_py_load_plugin(path: *const c_char) -> c_int {
    guard(-1, || {
        if path.is_null() {
            return -1;
        }
        // SAFETY: the caller's NUL-terminated path, valid during the call.
        let p = unsafe { core::ffi::CStr::from_ptr(path) }.to_bytes();
        if rt::plugin::load_late(p) {
            0
        } else {
            -1
        }
    })
}

/// `int memscope_py_set_sample(unsigned long long ns)`: the memory sampler's interval from now
/// on (`config(sample=...)`, issue 25; 0 pauses it), starting its thread if needed. 0, or -1
/// when passive.
///
/// # Safety
/// None.
#[no_mangle]
pub unsafe extern "C" fn memscope_py_set_sample(ns: u64) -> c_int {
    guard(-1, || {
        if !rt::ensure_init() {
            return -1;
        }
        rt::set_sample_interval(ns);
        0
    })
}

/// `int memscope_py_defer(void)`: closes the collection window without a `STOP_TRACE` row
/// (`config()` gives an immediate run deferred semantics). 0, or -1 when passive.
///
/// # Safety
/// None.
#[no_mangle]
pub unsafe extern "C" fn memscope_py_defer() -> c_int {
    guard(-1, || if rt::defer() { 0 } else { -1 })
}

/// `int memscope_py_trace_start(void)`: starts the Python tracer on every thread of the
/// interpreter. 0 started, 1 already running, -1 cannot trace (see `memscope_py_last_error`).
///
/// # Safety
/// The GIL must be held (`ctypes.PyDLL`).
#[no_mangle]
pub unsafe extern "C" fn memscope_py_trace_start() -> c_int {
    guard(-1, || {
        if !rt::ensure_init() {
            set_error("the probe is passive in this process");
            return -1;
        }
        match trace::start() {
            Ok(true) => 0,
            Ok(false) => 1,
            Err(e) => {
                set_error(e);
                -1
            }
        }
    })
}

/// `int memscope_py_stacks_start(void)`: turns Python stacks on every row on for this process
/// (issue 13): the profile hook keeps a shadow stack on every thread, and each row the probe
/// records carries its thread's stack (the collector writes `--call-stack python:N` frames).
/// 0 started, 1 already on, -1 cannot (see `memscope_py_last_error`).
///
/// # Safety
/// The GIL must be held (`ctypes.PyDLL`).
#[no_mangle]
pub unsafe extern "C" fn memscope_py_stacks_start() -> c_int {
    // SAFETY: same contract.
    unsafe { memscope_py_stacks_start_with(0) }
}

/// `int memscope_py_stacks_start_with(int how)`: as `memscope_py_stacks_start`, choosing how
/// the shadow stacks are kept: 0 `sys.monitoring` on CPython ≥ 3.12 (else, or when its
/// profiler tool id is taken, the profile hook), 1 always the profile hook
/// (`MEMSCOPE_PY_STACK_HOOK=profile` in the package and the launcher's bootstrap).
///
/// # Safety
/// The GIL must be held (`ctypes.PyDLL`).
#[no_mangle]
pub unsafe extern "C" fn memscope_py_stacks_start_with(how: c_int) -> c_int {
    guard(-1, || {
        if !rt::ensure_init() {
            set_error("the probe is passive in this process");
            return -1;
        }
        match trace::start_stacks(how == 0) {
            Ok(true) => 0,
            Ok(false) => 1,
            Err(e) => {
                set_error(e);
                -1
            }
        }
    })
}

/// `int memscope_py_trace_thread(void)`: installs the running profile hook (tracer or stacks)
/// on the calling thread (a thread started after `memscope_py_trace_start` or
/// `memscope_py_stacks_start`). 0 installed, -1 neither is running.
///
/// # Safety
/// The GIL must be held.
#[no_mangle]
pub unsafe extern "C" fn memscope_py_trace_thread() -> c_int {
    guard(-1, || if trace::start_thread() { 0 } else { -1 })
}

/// `int memscope_py_trace_stop(void)`: stops the tracer. 0 stopped, 1 was not running, -1 error.
///
/// # Safety
/// The GIL must be held.
#[no_mangle]
pub unsafe extern "C" fn memscope_py_trace_stop() -> c_int {
    guard(-1, || match trace::stop() {
        Ok(true) => 0,
        Ok(false) => 1,
        Err(e) => {
            set_error(e);
            -1
        }
    })
}

/// `int memscope_py_trace_standalone(int on)`: with `on`, the tracer traces outside collection
/// windows too (`tracer.start()` called by the user, as msMemScope's tracer works on its own);
/// with 0, only inside them (the tracer of `--events traceback`). Always 0.
///
/// # Safety
/// None.
#[no_mangle]
pub unsafe extern "C" fn memscope_py_trace_standalone(on: c_int) -> c_int {
    trace::set_standalone(on != 0);
    0
}

/// `int memscope_py_trace_active(void)`: 1 while the tracer is installed.
///
/// # Safety
/// None.
#[no_mangle]
pub unsafe extern "C" fn memscope_py_trace_active() -> c_int {
    c_int::from(trace::active())
}

/// `int memscope_py_record_function(const char *name, int end)`: a `RecordFunction` block
/// starts (`end` 0) or ends. 0 recorded, -1 not recorded (outside a window, passive, NULL name).
///
/// # Safety
/// The GIL must be held; `name` is NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn memscope_py_record_function(name: *const c_char, end: c_int) -> c_int {
    guard(-1, || {
        // SAFETY: caller contract.
        let Some(n) = (unsafe { rt::c_text(name) }) else {
            return -1;
        };
        if trace::record_function(n, end != 0) {
            0
        } else {
            -1
        }
    })
}

/// `int memscope_py_owner_addr(uint64_t addr, const char *label)`: tags the live pool block
/// starting at `addr` with the user owner level `label` (`describer(addr, owner=…)`).
/// Recorded inside and outside windows. 0 recorded, -1 not (passive, NULL label, dropped).
///
/// # Safety
/// `label` is NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn memscope_py_owner_addr(addr: u64, label: *const c_char) -> c_int {
    guard(-1, || {
        if !rt::ensure_init() {
            return -1;
        }
        // SAFETY: caller contract.
        let Some(l) = (unsafe { rt::c_text(label) }) else {
            return -1;
        };
        let rec = Record::OwnerTag {
            ts: rt::now_ns(),
            addr,
            label: l,
        };
        if rt::record(&rec) {
            0
        } else {
            -1
        }
    })
}

/// `int memscope_py_snapshot(const char *name, uint32_t device, uint32_t known,
/// const uint64_t values[6])`: records a SNAPSHOT (values: total, free, reserved,
/// peak_reserved, allocated, peak_allocated bytes; `known` bit i set when values[i] is real,
/// the collector fills the others from its pool accounting). `device` `UINT32_MAX`: unknown.
/// Recorded inside and outside windows (msMemScope's `take_snapshot` needs no `start()`).
/// 0 recorded, -1 not (passive, NULL arguments, dropped).
///
/// # Safety
/// `name` is NULL or NUL-terminated; `values` is NULL or points to 6 `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn memscope_py_snapshot(
    name: *const c_char,
    device: u32,
    known: u32,
    values: *const u64,
) -> c_int {
    guard(-1, || {
        if values.is_null() || !rt::ensure_init() {
            return -1;
        }
        // SAFETY: caller contract.
        let Some(n) = (unsafe { rt::c_text(name) }) else {
            return -1;
        };
        let mut v = [0u64; 6];
        // SAFETY: `values` points to 6 readable u64 (caller contract).
        v.copy_from_slice(unsafe { core::slice::from_raw_parts(values, 6) });
        let ok = rt::record(&Record::Snapshot {
            ts: rt::now_ns(),
            device,
            known: (known & 0x3f) as u8,
            values: v,
            name: n,
        });
        if ok {
            0
        } else {
            -1
        }
    })
}
