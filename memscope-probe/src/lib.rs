//! memscope-probe: the LD_PRELOAD library (`libmemscope_probe.so`).
//!
//! It exports exactly:
//! * the hooks of the built-in adapters, one `export_hooks!()` line each below
//!   (`InitInjectionMstx` for `mstx`, `malloc` & co. for `host`, `halMemAlloc` & co. for
//!   `hal`, …);
//! * the `memscope_*` C API of `schemas/memscope_probe.h` (collection windows, steps, owners,
//!   version), and the `memscope_py_*` functions the Python package calls (`python/`: tracer,
//!   `RecordFunction`, snapshots; CPython resolved at run time, libpython never linked).
//!
//! Everything else lives in `memscope-runtime` (stream, clock, guard, settings, plugin host) and
//! in the adapter crates.
//!
//! # How an adapter's hooks become exports (the `export_hooks!` pattern)
//! An adapter crate (`adapters/<name>`) keeps its hook functions as ordinary — mangled,
//! non-exported — Rust `extern "C"` functions, and provides a `macro_rules! export_hooks`
//! (`#[macro_export]`) that expands to the `#[no_mangle] pub unsafe extern "C"` definitions of
//! its C symbols (or `#[export_name = "_ZN3atb…"]` for C++ names), each a one-line forward to
//! the crate's hook. This crate — and only this crate — invokes every adapter's macro:
//!
//! ```ignore
//! memscope_adapter_mstx::export_hooks!();
//! memscope_adapter_hal::export_hooks!();   // later: halMemAlloc, …
//! ```
//!
//! Why: the CLI links the adapter crates for their descriptors and typers; if the hooks were
//! `#[no_mangle]` in the adapter crates, the CLI binary would interpose `malloc`, `aclInit`, …
//! on itself. The macro invocation also references the adapter crate from code, which is what
//! makes the linker keep it (design notes §5: a crate only listed in Cargo.toml is not linked,
//! and its `inventory::submit!` and hooks vanish). Each exported function must stay panic-free
//! (or catch panics) and forward when `memscope_runtime::enter()` says the thread is busy.
//!
//! A new adapter: add the crate to this manifest, add one `export_hooks!()` line below, and
//! check `nm -D --defined-only target/debug/libmemscope_probe.so`.
#![deny(clippy::undocumented_unsafe_blocks)]

mod alloc;
pub mod python;

use core::ffi::{c_char, c_int};
use memscope_runtime as rt;

#[global_allocator]
static GLOBAL: alloc::LibcAlloc = alloc::LibcAlloc;

// msTX, with the memory pools that report through its domains: one line per pool adapter.
memscope_adapter_mstx::export_hooks!(
    memscope_adapter_pta::MSTX_POOLS,
    memscope_adapter_mindspore::MSTX_POOLS,
    memscope_adapter_atb::MSTX_POOLS,
);
memscope_adapter_host::export_hooks!();
memscope_adapter_hal::export_hooks!();
memscope_adapter_acl::export_hooks!();
memscope_adapter_atb::export_hooks!();

/// The probe's one ELF constructor: starts the third-party adapter plugins when the probe is
/// loaded (plugin ABI 1.1: "plugins start when the process starts"). It only walks `environ`,
/// opens the stream and calls the plugins' init (see `memscope_runtime::start_at_load`); no
/// `std::env`, no thread, nothing that waits.
#[used]
#[link_section = ".init_array"]
static AT_LOAD: extern "C" fn() = at_load;

extern "C" fn at_load() {
    let _ = std::panic::catch_unwind(rt::start_at_load);
}

/// Runs `f`, turning a panic into `err` so nothing unwinds into C.
fn ffi_guard(err: c_int, f: impl FnOnce() -> c_int) -> c_int {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or(err)
}

fn status(ok: bool) -> c_int {
    if ok {
        0
    } else {
        -1
    }
}

/// `int memscope_start(void)`: opens a collection window (records `SYSTEM/START_TRACE` if it
/// was closed). 0 on success (also when already recording), -1 when the probe is passive.
///
/// # Safety
/// None; `unsafe` only because it is an exported C function.
#[no_mangle]
pub unsafe extern "C" fn memscope_start() -> c_int {
    ffi_guard(-1, || {
        rt::safe_point();
        status(rt::start())
    })
}

/// `int memscope_stop(void)`: closes the collection window (records `SYSTEM/STOP_TRACE` if one
/// was open). 0 on success, -1 when passive.
///
/// # Safety
/// None.
#[no_mangle]
pub unsafe extern "C" fn memscope_stop() -> c_int {
    ffi_guard(-1, || {
        rt::safe_point();
        status(rt::stop())
    })
}

/// `int memscope_step(void)`: records `SYSTEM/STEP`. 0 when recorded, -1 otherwise (passive,
/// outside a window, or dropped).
///
/// # Safety
/// None.
#[no_mangle]
pub unsafe extern "C" fn memscope_step() -> c_int {
    ffi_guard(-1, || {
        rt::safe_point();
        status(rt::step())
    })
}

/// `int memscope_owner_push(const char *label)`: pushes an owner label on the calling thread's
/// owner stack (recorded inside and outside windows). -1 for a NULL label or when passive.
///
/// # Safety
/// `label` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn memscope_owner_push(label: *const c_char) -> c_int {
    ffi_guard(-1, || {
        rt::safe_point();
        // SAFETY: caller contract.
        match unsafe { rt::c_text(label) } {
            Some(l) => status(rt::owner_push(l)),
            None => -1,
        }
    })
}

/// `int memscope_owner_pop(void)`: pops the calling thread's owner stack. 0 / -1 as above.
///
/// # Safety
/// None.
#[no_mangle]
pub unsafe extern "C" fn memscope_owner_pop() -> c_int {
    ffi_guard(-1, || {
        rt::safe_point();
        status(rt::owner_pop())
    })
}

static VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), "\0");

/// `const char *memscope_version(void)`: the probe version, e.g. `"0.1.0"` (static string).
///
/// # Safety
/// None.
#[no_mangle]
pub unsafe extern "C" fn memscope_version() -> *const c_char {
    VERSION.as_ptr().cast()
}
