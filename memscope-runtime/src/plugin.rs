//! Third-party adapter plugins: the C ABI of `schemas/memscope_plugin.h`, the loader and the
//! host vtable handed to plugins.
//!
//! Plugins are listed in `MEMSCOPE_PLUGINS` (`:`-separated paths). They are loaded when the
//! probe is loaded ([`start_at_load`], from the probe's ELF constructor: process start), or, if
//! that could not run them, at the next *safe point* ([`safe_point`]: the probe's non-allocator
//! entry points — msTX callbacks, the `memscope_*` C API — never an allocator hook), under the
//! reentrancy guard. For each
//! path: `dlopen(RTLD_NOW|RTLD_LOCAL)` (a plugin that is also in `LD_PRELOAD` is already loaded:
//! the same object is returned and was not re-initialised), `dlsym("memscope_plugin")`, then the
//! header's magic, major version, size and init pointer are checked *before any plugin function
//! is called*. A refused plugin gets one stderr line and a `Plugin` record of kind
//! [`KIND_DIAGNOSTIC`]; the probe continues without it. Nothing is ever `dlclose`d.

use crate::sys::{cstr_bytes, stderr_write, TextBuf};
use crate::{clock, guard, settings, state, writer};
use core::ffi::{c_char, c_int};
use core::fmt::Write;
use core::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use memscope_wire::{Record, MAX_TEXT};

pub use memscope_adapter_sdk::sys::{
    Host, PluginEvent, PluginHeader, ABI_MAJOR, ABI_MINOR, EVENT_C_STACK, PLUGIN_MAGIC,
};

/// Kind code reserved for the host: a diagnostic about a plugin (refusal, failed init). Plugins
/// cannot emit it.
pub const KIND_DIAGNOSTIC: u8 = memscope_adapter_sdk::sys::KIND_DIAGNOSTIC as u8;
/// Highest kind code plugins may emit (codes 200–255 are reserved for the host).
pub const KIND_PLUGIN_MAX: u32 = memscope_adapter_sdk::sys::KIND_PLUGIN_MAX;
/// Event type text of a refusal diagnostic.
pub const DIAG_REFUSED: &[u8] = b"PLUGIN_REFUSED";
/// Event type text of a plugin that loaded but failed (dlopen error, init returned non-zero).
pub const DIAG_FAILED: &[u8] = b"PLUGIN_FAILED";

/// The one host vtable (process-global, never freed).
pub static HOST: Host = Host {
    size: core::mem::size_of::<Host>() as u32,
    abi_major: ABI_MAJOR,
    abi_minor: ABI_MINOR,
    emit: host_emit,
    now_ns: host_now_ns,
    enabled: host_enabled,
    log: host_log,
    register_type: crate::plugin_types::host_register_type,
    emit_compact: crate::plugin_types::host_emit_compact,
};

/// Bytes of the v1.0 header the probe reads.
const HEADER_V1_SIZE: u32 = core::mem::size_of::<PluginHeader>() as u32;
/// Bytes of the smallest (ABI 1.0) event the probe accepts; 1.1 appended `flags`.
const EVENT_V1_SIZE: u32 = memscope_adapter_sdk::sys::EVENT_V1_0_SIZE;

/// Copies the part of the plugin's event its `struct_size` covers (a 1.0 plugin's event has no
/// `flags`: they read as 0).
///
/// # Safety
/// `ev` points to at least `min(struct_size, size_of::<PluginEvent>())` readable bytes.
unsafe fn read_event(ev: *const PluginEvent, struct_size: u32) -> PluginEvent {
    let mut out = PluginEvent {
        struct_size,
        kind: 0,
        device: 0,
        reserved: 0,
        ptr: 0,
        size: 0,
        event_type: core::ptr::null(),
        name: core::ptr::null(),
        attrs: core::ptr::null(),
        flags: 0,
        reserved2: 0,
    };
    let n = (struct_size as usize).min(core::mem::size_of::<PluginEvent>());
    // SAFETY: the caller guarantees `n` readable bytes at `ev`; `out` has room for them and
    // every bit pattern of its integer and pointer fields is valid.
    unsafe {
        core::ptr::copy_nonoverlapping(ev.cast::<u8>(), (&raw mut out).cast::<u8>(), n);
    }
    out
}

unsafe extern "C" fn host_emit(ev: *const PluginEvent) -> c_int {
    std::panic::catch_unwind(|| {
        if ev.is_null() {
            return -1;
        }
        // SAFETY: a non-NULL event points to at least its `struct_size` field (ABI contract).
        let struct_size = unsafe { (*ev).struct_size };
        if struct_size < EVENT_V1_SIZE {
            return -1;
        }
        // SAFETY: the plugin declared `struct_size` readable bytes.
        let ev = unsafe { read_event(ev, struct_size) };
        // a size past i64::MAX is no block (the collector's byte counts are signed)
        if ev.kind == 0 || ev.kind > KIND_PLUGIN_MAX || ev.size > i64::MAX as u64 {
            return -1;
        }
        // MALLOC (1) and FREE (2) are kept outside collection windows too, as shadow records
        // (`state::tracking`); other events only inside one.
        let on = if matches!(ev.kind, 1 | 2) {
            state::plugins_tracking()
        } else {
            state::plugins_enabled()
        };
        if !on {
            return 1;
        }
        // Plugins emit from init, which the loader calls with this thread's guard held: take
        // the guard when free (so nothing emit does is recorded twice) but never require it;
        // `writer::record` has its own re-entry check.
        let mut g = guard::enter();
        // SAFETY: ABI contract: the texts are NULL or NUL-terminated, valid during the call.
        let (t, n, a) = unsafe {
            (
                cstr_bytes(ev.event_type, MAX_TEXT).unwrap_or(b""),
                cstr_bytes(ev.name, MAX_TEXT).unwrap_or(b""),
                cstr_bytes(ev.attrs, MAX_TEXT).unwrap_or(b""),
            )
        };
        let ts = clock::now_ns();
        // ABI 1.1: the C stack of the code that called into the plugin, on request.
        if ev.flags & EVENT_C_STACK != 0 && state::recording() {
            if let Some(g) = g.as_mut() {
                crate::stack::record_call_stack(g, ts, crate::stack::Skip::ProbeAndCaller);
            }
        }
        let rec = Record::Plugin {
            ts,
            kind: ev.kind as u8,
            device: ev.device,
            ptr: ev.ptr,
            size: ev.size,
            event_type: t,
            name: n,
            attrs: a,
        };
        if writer::record(&rec) {
            0
        } else {
            -1
        }
    })
    .unwrap_or(-1)
}

extern "C" fn host_now_ns() -> u64 {
    clock::now_ns()
}

extern "C" fn host_enabled() -> c_int {
    state::plugins_tracking() as c_int
}

unsafe extern "C" fn host_log(level: c_int, msg: *const c_char) {
    if level > 1 {
        return;
    }
    // SAFETY: ABI contract: NULL or a NUL-terminated string valid during the call.
    let m = unsafe { cstr_bytes(msg, 2048) }.unwrap_or(b"(null)");
    let mut b = TextBuf::<2200>::new();
    b.push_bytes(if level <= 0 {
        b"memscope: plugin error: "
    } else {
        b"memscope: plugin warning: "
    });
    b.push_bytes(m);
    b.push_bytes(b"\n");
    stderr_write(b.as_bytes());
}

// ---- loading --------------------------------------------------------------------------------

const PENDING: u8 = 0;
const LOADING: u8 = 1;
const DONE: u8 = 2;
static PLUGINS: AtomicU8 = AtomicU8::new(PENDING);

/// Starts the plugins when the probe is loaded: called once by the probe's ELF constructor
/// (process start, or the `dlopen` of the probe by the Python package), so a plugin's init runs
/// before the program's `main` and its first events are not lost. Initialises the runtime
/// (walking `environ` without allocating) and loads `MEMSCOPE_PLUGINS`; a passive process
/// (not launched by memscope) stops at the first check. Later [`safe_point`]s retry when the
/// load could not run here (the runtime was busy on this thread).
pub fn start_at_load() {
    if state::init_state() == state::InitState::Initializing && guard::in_internal() {
        // This thread is initialising the runtime and the loader ran our constructor inside
        // it: the init starts the plugins when it is done ([`start_deferred`]).
        DEFERRED.store(true, Ordering::Release);
        return;
    }
    safe_point();
    crate::sampler::start();
}

/// Set by [`start_at_load`] when the constructor ran inside the runtime's init.
static DEFERRED: AtomicBool = AtomicBool::new(false);

/// Called at the end of the runtime's init: starts the plugins if the constructor asked for it
/// (see [`start_at_load`]), even inside the hook whose call initialised the runtime — the
/// constructor would have run them at that very point.
pub(crate) fn start_deferred() {
    if !DEFERRED.swap(false, Ordering::AcqRel) {
        return;
    }
    crate::sampler::start();
    if PLUGINS.load(Ordering::Acquire) != PENDING || settings::plugins().is_empty() {
        return;
    }
    if PLUGINS
        .compare_exchange(PENDING, LOADING, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        return;
    }
    load_all();
}

/// A point where the probe may run plugin code: called by non-allocator entry points on an
/// application thread. The first call after init loads `MEMSCOPE_PLUGINS`; later calls cost one
/// atomic load. Concurrent callers do not wait for the loading thread.
#[inline]
pub fn safe_point() {
    if PLUGINS.load(Ordering::Acquire) != DONE {
        safe_point_slow();
    }
}

#[cold]
fn safe_point_slow() {
    if !state::ensure_init() {
        if state::init_state() == state::InitState::Disabled {
            PLUGINS.store(DONE, Ordering::Release);
        }
        return;
    }
    if settings::plugins().is_empty() {
        PLUGINS.store(DONE, Ordering::Release);
        return;
    }
    if PLUGINS
        .compare_exchange(PENDING, LOADING, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        return;
    }
    if guard::depth() > 0 || guard::in_internal() {
        // Called from inside another hook: try again at the next safe point.
        PLUGINS.store(PENDING, Ordering::Release);
        return;
    }
    load_all();
}

/// Loads every plugin of `MEMSCOPE_PLUGINS` (the caller won the `PENDING → LOADING` step).
fn load_all() {
    // Internal (the plugins' allocations are the probe's doing), signals as they are (a
    // plugin's init may start threads, which inherit the mask).
    let _internal = guard::Internal::begin(false);
    for path in settings::plugins().split(|&b| b == b':') {
        if !path.is_empty() {
            let _ = load_one(path);
        }
    }
    PLUGINS.store(DONE, Ordering::Release);
}

/// Why a plugin was not started.
enum Refusal {
    /// Not a usable memscope plugin (wrong magic, version, size, missing symbol).
    Refused,
    /// It could not be loaded, or its init declined.
    Failed,
}

fn diagnose(kind: Refusal, path: &[u8], msg: &[u8]) {
    let mut line = TextBuf::<6000>::new();
    line.push_bytes(b"memscope: ");
    line.push_bytes(msg);
    line.push_bytes(b"\n");
    stderr_write(line.as_bytes());
    let event_type = match kind {
        Refusal::Refused => DIAG_REFUSED,
        Refusal::Failed => DIAG_FAILED,
    };
    writer::record(&Record::Plugin {
        ts: clock::now_ns(),
        kind: KIND_DIAGNOSTIC,
        device: u32::MAX,
        ptr: 0,
        size: 0,
        event_type,
        name: path,
        attrs: msg,
    });
}

/// Checks a plugin header; `Err` carries the refusal text after `"refusing adapter plugin
/// <path>: "`.
///
/// # Safety
/// `hdr` points to readable memory of at least `min(its size field, HEADER_V1_SIZE)` bytes once
/// magic and size were checked (the first 12 bytes are always read).
unsafe fn check_header(hdr: *const PluginHeader, why: &mut TextBuf<512>) -> bool {
    // SAFETY: per the contract, the first fields are readable.
    let (magic, major, minor, size) = unsafe {
        (
            (*hdr).magic,
            (*hdr).abi_major,
            (*hdr).abi_minor,
            (*hdr).size,
        )
    };
    if magic != PLUGIN_MAGIC {
        let _ = write!(why, "bad magic 0x{magic:08x} (expected 0x{PLUGIN_MAGIC:08x} \"MSPL\"), not a memscope adapter plugin");
        return false;
    }
    if major != ABI_MAJOR {
        let _ = write!(
            why,
            "ABI version {major}.{minor}, this probe supports {ABI_MAJOR}.x"
        );
        return false;
    }
    if size < HEADER_V1_SIZE {
        let _ = write!(
            why,
            "header size {size} is smaller than ABI 1.0's {HEADER_V1_SIZE}"
        );
        return false;
    }
    // SAFETY: size checked: the init field exists.
    if unsafe { (*hdr).init }.is_none() {
        let _ = write!(why, "its header has no init function");
        return false;
    }
    true
}

fn load_one(path: &[u8]) -> bool {
    let mut msg = TextBuf::<5000>::new();
    if path.len() > 4096 {
        msg.push_bytes(b"refusing adapter plugin ");
        msg.push_bytes(&path[..200]);
        msg.push_bytes(b"...: path too long");
        diagnose(Refusal::Refused, path, msg.as_bytes());
        return false;
    }
    let mut c = TextBuf::<4100>::new();
    c.push_bytes(path);
    // SAFETY: `c` is a NUL-terminated path. dlopen runs the object's ELF constructors (the
    // plugin ABI asks plugins not to rely on or have any).
    let h = unsafe { libc::dlopen(c.as_c_str().as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if h.is_null() {
        msg.push_bytes(b"cannot load adapter plugin ");
        msg.push_bytes(path);
        msg.push_bytes(b": ");
        // SAFETY: dlerror returns NULL or a NUL-terminated thread-local string.
        let e = unsafe { cstr_bytes(libc::dlerror(), 2048) }.unwrap_or(b"unknown error");
        msg.push_bytes(e);
        diagnose(Refusal::Failed, path, msg.as_bytes());
        return false;
    }
    // SAFETY: `h` is a live handle; the symbol name is NUL-terminated.
    let sym = unsafe { libc::dlsym(h, c"memscope_plugin".as_ptr()) };
    if sym.is_null() {
        msg.push_bytes(b"refusing adapter plugin ");
        msg.push_bytes(path);
        msg.push_bytes(b": it exports no `memscope_plugin` header, not a memscope adapter plugin");
        diagnose(Refusal::Refused, path, msg.as_bytes());
        return false;
    }
    let hdr = sym as *const PluginHeader;
    let mut why = TextBuf::<512>::new();
    // SAFETY: `memscope_plugin` is a data symbol of the plugin; the ABI requires it to be a
    // `memscope_plugin_header`, whose first 12 bytes every version shares. (A symbol of that
    // name that is smaller than 12 bytes would be a broken plugin; the magic check stops it
    // before anything else is read.)
    if !unsafe { check_header(hdr, &mut why) } {
        msg.push_bytes(b"refusing adapter plugin ");
        msg.push_bytes(path);
        msg.push_bytes(b": ");
        msg.push_bytes(why.as_bytes());
        diagnose(Refusal::Refused, path, msg.as_bytes());
        return false;
    }
    if !started::claim(hdr as usize) {
        // already started (listed twice, or loaded at start and asked for again)
        return true;
    }
    // SAFETY: the header was validated (magic, major, size, init present).
    let (init, name) = unsafe { ((*hdr).init, (*hdr).name) };
    let Some(init) = init else { return false };
    // SAFETY: calling the plugin's init per the ABI with the static host vtable. A C plugin
    // cannot unwind into us; if it does (C++ exception), the process aborts — documented.
    let rc = unsafe { init(&HOST) };
    if rc != 0 {
        msg.push_bytes(b"adapter plugin ");
        msg.push_bytes(path);
        msg.push_bytes(b" (");
        // SAFETY: the name is NULL or a NUL-terminated string of the plugin.
        msg.push_bytes(unsafe { cstr_bytes(name, 256) }.unwrap_or(b"unnamed"));
        let _ = write!(msg, ") declined to start: init returned {rc}");
        diagnose(Refusal::Failed, path, msg.as_bytes());
        return false;
    }
    true
}

/// Loads and starts the plugin at `path` now, after the process started (the Python package's
/// `memscope.config(adapters=...)` asking for a shipped plugin its process did not start
/// with): the plugins of `MEMSCOPE_PLUGINS` first, if still pending; a plugin already started
/// is not started again. Refused (`false`) inside a hook or runtime-internal code, or when the
/// runtime is passive; a plugin that cannot be started is reported as at process start.
pub fn load_late(path: &[u8]) -> bool {
    if !state::ensure_init() || guard::depth() > 0 || guard::in_internal() {
        return false;
    }
    safe_point();
    let _internal = guard::Internal::begin(false);
    load_one(path)
}

/// The headers of the plugins started, so none is started twice.
mod started {
    use core::sync::atomic::{AtomicUsize, Ordering};

    const MAX: usize = 64;
    static HEADERS: [AtomicUsize; MAX] = [const { AtomicUsize::new(0) }; MAX];

    /// `true` when `hdr` was not started yet (and is now marked started).
    pub(super) fn claim(hdr: usize) -> bool {
        for slot in &HEADERS {
            match slot.compare_exchange(0, hdr, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return true,
                Err(h) if h == hdr => return false,
                Err(_) => {}
            }
        }
        true // more plugins than slots: started without the check
    }
}
