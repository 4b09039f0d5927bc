//! memscope-adapter-sdk: write a memscope adapter (a "plugin") in Rust, outside memscope's
//! repository, on the versioned C ABI of `schemas/memscope_plugin.h`.
//!
//! A plugin is a `cdylib` that exports one data symbol, `memscope_plugin`. The probe
//! (`libmemscope_probe.so`) loads it when the traced process starts (`memscope run
//! --adapter-path libx.so`, or `"adapter_paths"` in config.json), checks its header and calls
//! its init with the host vtable; the plugin then emits events, which the collector writes as
//! dump rows. The adapter contract every adapter keeps is `docs/adapter-spec.md`.
//!
//! ```ignore
//! use memscope_adapter_sdk::{self as sdk, Device, Event};
//!
//! fn init(host: &sdk::Host) -> Result<(), i32> {
//!     // ABI 1.1 hosts record C stacks on request; older ones ignore the request.
//!     let _ = host.supports_c_stack();
//!     Ok(())
//! }
//! sdk::memscope_adapter!(name: "mypool", init: init);
//!
//! // In the allocator's code (or a hook of it):
//! fn on_alloc(ptr: u64, size: u64) {
//!     if sdk::enabled() {
//!         let ev = Event::malloc(c"MYPOOL", ptr, size)
//!             .device(Device::Npu(0))
//!             .attrs(c"owner:kv_cache")
//!             .c_stack();
//!         sdk::emit(&ev);
//!     }
//! }
//! ```
//!
//! What the SDK does for you:
//! * the exported header with the right magic, version and size ([`memscope_adapter!`]);
//! * panics are caught at every boundary: a panicking init declines (the probe reports
//!   `PLUGIN_FAILED` and the job goes on); [`guard`] does the same for the plugin's own
//!   `extern "C"` hooks;
//! * events before the host exists (a hook that runs before the probe loaded the plugin) are
//!   dropped and counted ([`dropped_before_init`]), never dereferencing a NULL host;
//! * no allocation: [`Event`] borrows `&CStr`s; [`TextBuf`] formats attrs on the stack.
//!
//! An allocator with millions of events registers its types once (ABI 1.2) and emits by id,
//! with no text per event — the built-in adapters' cost:
//!
//! ```ignore
//! static OBJ: std::sync::OnceLock<sdk::TypeId> = std::sync::OnceLock::new();
//! fn init(host: &sdk::Host) -> Result<(), i32> {
//!     let spec = sdk::TypeSpec::new(c"MYOBJ").attrs(c"heap:main").account();
//!     if let Some(id) = host.register(&spec) { let _ = OBJ.set(id); }
//!     Ok(())
//! }
//! fn on_alloc(ptr: u64, size: u64) {
//!     if let (Some(h), Some(id)) = (sdk::host(), OBJ.get()) { id.malloc(h, ptr, size); }
//! }
//! ```
//!
//! Event Types and Attr keys are the plugin's own: `Event::malloc(c"JEMALLOC", …)` gives rows
//! with Event Type `JEMALLOC`; `attrs(c"owner:arena0,flags:0x40")` gives those Attr pairs
//! (`owner` extends the owner chain: `JEMALLOC@arena0`).

mod compact;
pub mod sys;
mod text;

pub use compact::{TypeId, TypeSpec};

pub use text::TextBuf;

use core::ffi::{c_int, CStr};
use core::marker::PhantomData;
use core::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

/// Where a block lives (the dump's `Device Id`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Device {
    /// No device (`N/A`).
    None,
    /// Host memory (`cpu`).
    Cpu,
    /// Logical NPU device id (mapped through `ASCEND_RT_VISIBLE_DEVICES` by the collector).
    Npu(u32),
}

impl Device {
    fn raw(self) -> u32 {
        match self {
            Device::None => sys::DEVICE_NONE,
            Device::Cpu => sys::DEVICE_CPU,
            Device::Npu(d) => d,
        }
    }
}

/// Event kinds of the ABI (`MEMSCOPE_KIND_*`) and the dump rows they become.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `MALLOC` row: a block `[ptr, ptr+size)` was allocated.
    Malloc,
    /// `FREE` row: the block at `ptr` was freed (size 0: the collector takes the MALLOC's).
    Free,
    /// `MSTX`/`Mark` row named by the event's name.
    Mark,
    /// `OP_LAUNCH` row, phase start.
    OpStart,
    /// `OP_LAUNCH` row, phase end.
    OpEnd,
    /// `KERNEL_LAUNCH` row, phase start.
    KernelStart,
    /// `KERNEL_LAUNCH` row, phase end.
    KernelEnd,
    /// `ACCESS` row: a read or write of `size` bytes of the block at `ptr`.
    Access,
}

impl Kind {
    /// The ABI code.
    pub fn code(self) -> u32 {
        match self {
            Kind::Malloc => sys::KIND_MALLOC,
            Kind::Free => sys::KIND_FREE,
            Kind::Mark => sys::KIND_MARK,
            Kind::OpStart => sys::KIND_OP_START,
            Kind::OpEnd => sys::KIND_OP_END,
            Kind::KernelStart => sys::KIND_KERNEL_START,
            Kind::KernelEnd => sys::KIND_KERNEL_END,
            Kind::Access => sys::KIND_ACCESS,
        }
    }
}

/// One event, borrowing its texts (the host copies them during [`emit`]). Built with the
/// constructors and the chained setters; no allocation.
#[derive(Clone, Copy, Debug)]
pub struct Event<'a> {
    raw: sys::PluginEvent,
    _texts: PhantomData<&'a CStr>,
}

impl<'a> Event<'a> {
    /// An event of `kind` with Event Type `event_type` (the plugin's own, e.g. `c"MYPOOL"`),
    /// no device, address 0, size 0.
    pub fn new(kind: Kind, event_type: &'a CStr) -> Event<'a> {
        Event {
            raw: sys::PluginEvent {
                struct_size: core::mem::size_of::<sys::PluginEvent>() as u32,
                kind: kind.code(),
                device: sys::DEVICE_NONE,
                reserved: 0,
                ptr: 0,
                size: 0,
                event_type: event_type.as_ptr(),
                name: core::ptr::null(),
                attrs: core::ptr::null(),
                flags: 0,
                reserved2: 0,
            },
            _texts: PhantomData,
        }
    }

    /// A `MALLOC` of `size` bytes at `ptr` (host memory unless [`Event::device`] says else).
    pub fn malloc(event_type: &'a CStr, ptr: u64, size: u64) -> Event<'a> {
        Event::new(Kind::Malloc, event_type)
            .device(Device::Cpu)
            .ptr(ptr)
            .size(size)
    }

    /// A `FREE` of the block at `ptr` (`size` 0 when unknown).
    pub fn free(event_type: &'a CStr, ptr: u64, size: u64) -> Event<'a> {
        Event::new(Kind::Free, event_type)
            .device(Device::Cpu)
            .ptr(ptr)
            .size(size)
    }

    /// A mark named `name`.
    pub fn mark(event_type: &'a CStr, name: &'a CStr) -> Event<'a> {
        Event::new(Kind::Mark, event_type).name(name)
    }

    /// Sets the device.
    pub fn device(mut self, d: Device) -> Event<'a> {
        self.raw.device = d.raw();
        self
    }

    /// Sets the address.
    pub fn ptr(mut self, ptr: u64) -> Event<'a> {
        self.raw.ptr = ptr;
        self
    }

    /// Sets the size in bytes.
    pub fn size(mut self, size: u64) -> Event<'a> {
        self.raw.size = size;
        self
    }

    /// Sets the `Name` column (MALLOC/FREE rows show `N/A` there, as the dump format says).
    pub fn name(mut self, name: &'a CStr) -> Event<'a> {
        self.raw.name = name.as_ptr();
        self
    }

    /// Sets the attributes, `k:v,k:v` (the plugin's own keys; `owner` feeds the owner chain).
    pub fn attrs(mut self, attrs: &'a CStr) -> Event<'a> {
        self.raw.attrs = attrs.as_ptr();
        self
    }

    /// Asks the host to record the emitting thread's C call stack with the event
    /// (`--call-stack c:N` sets the depth; frames of the probe and of this plugin's library are
    /// left out). Ignored by hosts older than ABI 1.1.
    pub fn c_stack(mut self) -> Event<'a> {
        self.raw.flags |= sys::EVENT_C_STACK;
        self
    }

    /// The raw ABI struct.
    pub fn as_raw(&self) -> &sys::PluginEvent {
        &self.raw
    }
}

/// What became of an emitted event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Emitted {
    /// Written into the process's stream.
    Recorded,
    /// Not kept: no collection window is open (or the adapter is not selected).
    NotRecording,
    /// Rejected by the host (bad event) or dropped (no space, re-entered); the host counts
    /// drops in the run summary.
    Dropped,
    /// The host has not called init yet (or the plugin declined): dropped and counted in
    /// [`dropped_before_init`].
    NoHost,
}

/// The host vtable, valid for the life of the process.
#[derive(Clone, Copy, Debug)]
pub struct Host(&'static sys::Host);

impl Host {
    /// The probe's ABI version `(major, minor)`.
    pub fn abi(self) -> (u16, u16) {
        (self.0.abi_major, self.0.abi_minor)
    }

    /// Whether the host honours [`Event::c_stack`] (ABI ≥ 1.1).
    pub fn supports_c_stack(self) -> bool {
        self.0.abi_minor >= 1
    }

    /// Whether the host has registered types and compact events (ABI ≥ 1.2: its vtable covers
    /// `register_type` and `emit_compact`).
    pub fn supports_compact(self) -> bool {
        self.0.size as usize >= core::mem::size_of::<sys::Host>()
    }

    /// Registers `spec` (ABI 1.2); `None` when the host is older or rejected it.
    pub fn register(self, spec: &TypeSpec<'_>) -> Option<TypeId> {
        if !self.supports_compact() {
            return None;
        }
        // SAFETY: the vtable covers `register_type` (checked above); `spec.as_raw()` is a valid
        // `memscope_event_type` whose texts are NUL-terminated and live for the call.
        let id = unsafe { (self.0.register_type)(spec.as_raw()) };
        (id >= 0).then(|| TypeId::new(id, spec.value_count()))
    }

    /// Emits `ev`.
    pub fn emit(self, ev: &Event<'_>) -> Emitted {
        // SAFETY: the host's emit takes a pointer to a valid event whose texts are NULL or
        // NUL-terminated and live for the call (`Event` borrows them for 'a).
        match unsafe { (self.0.emit)(&ev.raw) } {
            0 => Emitted::Recorded,
            1 => Emitted::NotRecording,
            _ => Emitted::Dropped,
        }
    }

    /// Whether a collection window is open (an emit would record).
    pub fn enabled(self) -> bool {
        (self.0.enabled)() != 0
    }

    /// The probe's clock: ns since the Unix epoch, monotonic.
    pub fn now_ns(self) -> u64 {
        (self.0.now_ns)()
    }

    /// Logs one message (errors and warnings go to stderr as `memscope: plugin …`).
    pub fn log(self, level: Level, msg: &CStr) {
        // SAFETY: `msg` is NUL-terminated and valid for the call.
        unsafe { (self.0.log)(level as c_int, msg.as_ptr()) }
    }
}

/// Log levels (`MEMSCOPE_LOG_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i32)]
pub enum Level {
    /// `memscope: plugin error: …` on stderr.
    Error = 0,
    /// `memscope: plugin warning: …` on stderr.
    Warn = 1,
    /// Ignored by 1.x hosts.
    Info = 2,
    /// Ignored by 1.x hosts.
    Debug = 3,
}

static HOST: AtomicPtr<sys::Host> = AtomicPtr::new(core::ptr::null_mut());
static NO_HOST_DROPS: AtomicU64 = AtomicU64::new(0);

/// The host, once init ran (and accepted it).
#[inline]
pub fn host() -> Option<Host> {
    let p = HOST.load(Ordering::Acquire);
    // SAFETY: only `__init` stores, a pointer to the host's static vtable (valid for the life
    // of the process, per the ABI) after checking its size and major version.
    (!p.is_null()).then(|| Host(unsafe { &*p }))
}

/// Emits `ev` through the host; before init it drops and counts ([`dropped_before_init`]).
#[inline]
pub fn emit(ev: &Event<'_>) -> Emitted {
    match host() {
        Some(h) => h.emit(ev),
        None => {
            NO_HOST_DROPS.fetch_add(1, Ordering::Relaxed);
            Emitted::NoHost
        }
    }
}

/// Whether an emit would record now: one acquire load of the host pointer and one call into
/// the host (itself one relaxed load). `false` before init.
#[inline]
pub fn enabled() -> bool {
    host().is_some_and(Host::enabled)
}

/// The probe's clock, once init ran.
pub fn now_ns() -> Option<u64> {
    host().map(Host::now_ns)
}

/// Logs through the host (nothing before init).
pub fn log(level: Level, msg: &CStr) {
    if let Some(h) = host() {
        h.log(level, msg);
    }
}

/// Events emitted before the host called init (dropped).
pub fn dropped_before_init() -> u64 {
    NO_HOST_DROPS.load(Ordering::Relaxed)
}

/// Runs `f`, returning `on_panic` if it panics: wrap the body of every `extern "C"` function
/// of a plugin (its hooks) so nothing unwinds into C.
#[inline]
pub fn guard<R>(on_panic: R, f: impl FnOnce() -> R) -> R {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or(on_panic)
}

/// The init entry behind [`memscope_adapter!`]: validates the host, keeps it, runs the
/// plugin's init with panics caught. Returns 0 (started) or non-zero (declined: the plugin's
/// code, 1 for a host this SDK cannot use, 2 for a panic).
///
/// # Safety
/// `host` is NULL or points to a `memscope_host` valid for the life of the process (the ABI's
/// promise for the pointer handed to init).
#[doc(hidden)]
pub unsafe fn __init(host: *const sys::Host, init: fn(&Host) -> Result<(), i32>) -> c_int {
    if host.is_null() {
        return 1;
    }
    // SAFETY: per the contract, at least `size` (the first field) is readable.
    let (size, major) = unsafe { ((*host).size, (*host).abi_major) };
    if size < sys::HOST_V1_1_SIZE || major != sys::ABI_MAJOR {
        return 1;
    }
    // SAFETY: the vtable is valid for the life of the process and covers every 1.1 field; the
    // 1.2 fields are read only after `supports_compact` checked `size`.
    let h = Host(unsafe { &*host });
    // Kept before the plugin's init runs, so init may emit.
    HOST.store(host.cast_mut(), Ordering::Release);
    let rc = guard(2, || match init(&h) {
        Ok(()) => 0,
        Err(0) => 1,
        Err(code) => code,
    });
    if rc != 0 {
        HOST.store(core::ptr::null_mut(), Ordering::Release);
    } else {
        let early = dropped_before_init();
        if early > 0 {
            let mut t = TextBuf::<96>::new();
            let _ = core::fmt::Write::write_fmt(
                &mut t,
                format_args!("{early} events came before the plugin's init and were dropped"),
            );
            h.log(Level::Warn, t.as_c_str());
        }
    }
    rc
}

/// Defines the exported `memscope_plugin` header of a plugin and its init entry:
///
/// ```ignore
/// fn init(host: &memscope_adapter_sdk::Host) -> Result<(), i32> { Ok(()) }
/// memscope_adapter_sdk::memscope_adapter!(name: "mypool", init: init);
/// ```
///
/// `init` runs once, when the probe loads the plugin (at process start, with the loader lock
/// held: it must not wait for other threads). `Err(code)` declines (reported as
/// `PLUGIN_FAILED`); a panic declines with code 2. Use it once per cdylib.
#[macro_export]
macro_rules! memscope_adapter {
    (name: $name:literal, init: $init:path $(,)?) => {
        /// The plugin header the probe looks up (`schemas/memscope_plugin.h`).
        #[no_mangle]
        #[used]
        #[allow(non_upper_case_globals)]
        pub static memscope_plugin: $crate::sys::PluginHeader = $crate::sys::PluginHeader {
            magic: $crate::sys::PLUGIN_MAGIC,
            abi_major: $crate::sys::ABI_MAJOR,
            abi_minor: $crate::sys::ABI_MINOR,
            size: ::core::mem::size_of::<$crate::sys::PluginHeader>() as u32,
            reserved: 0,
            name: ::core::concat!($name, "\0").as_ptr().cast(),
            init: ::core::option::Option::Some(__memscope_adapter_init),
        };

        unsafe extern "C" fn __memscope_adapter_init(
            host: *const $crate::sys::Host,
        ) -> ::core::ffi::c_int {
            // SAFETY: the probe passes its process-lifetime vtable (ABI contract of init).
            unsafe { $crate::__init(host, $init) }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_carry_the_plugins_own_type_attrs_and_the_c_stack_flag() {
        let ev = Event::malloc(c"MYPOOL", 0x1000, 64)
            .device(Device::Npu(2))
            .attrs(c"owner:kv")
            .c_stack();
        let r = ev.as_raw();
        assert_eq!((r.kind, r.device, r.ptr, r.size), (1, 2, 0x1000, 64));
        assert_eq!(r.struct_size, 64);
        assert_eq!(r.flags & sys::EVENT_C_STACK, 1);
        // SAFETY: the pointers come from the `c"…"` literals above.
        let t = unsafe { CStr::from_ptr(r.event_type) };
        assert_eq!(t, c"MYPOOL");
        assert!(r.name.is_null());
        assert_eq!(Event::free(c"X", 1, 0).as_raw().device, sys::DEVICE_CPU);
    }

    #[test]
    fn emit_before_init_is_dropped_and_counted() {
        let before = dropped_before_init();
        assert_eq!(emit(&Event::mark(c"X", c"m")), Emitted::NoHost);
        assert!(!enabled());
        assert_eq!(dropped_before_init(), before + 1);
    }

    use core::sync::atomic::AtomicUsize;

    static CALLS: AtomicUsize = AtomicUsize::new(0);

    unsafe extern "C" fn fake_emit(_: *const sys::PluginEvent) -> c_int {
        -1
    }
    extern "C" fn fake_now() -> u64 {
        0
    }
    extern "C" fn fake_enabled() -> c_int {
        1
    }
    unsafe extern "C" fn fake_log(_: c_int, _: *const core::ffi::c_char) {}
    unsafe extern "C" fn fake_register(_: *const sys::EventType) -> i32 {
        3
    }
    unsafe extern "C" fn fake_compact(
        _: i32,
        _: u32,
        _: u64,
        _: u64,
        _: u32,
        _: *const u64,
    ) -> c_int {
        CALLS.fetch_add(1, Ordering::Relaxed);
        0
    }

    static FAKE: sys::Host = sys::Host {
        size: core::mem::size_of::<sys::Host>() as u32,
        abi_major: 1,
        abi_minor: 2,
        emit: fake_emit,
        now_ns: fake_now,
        enabled: fake_enabled,
        log: fake_log,
        register_type: fake_register,
        emit_compact: fake_compact,
    };

    #[test]
    fn a_compact_event_with_fewer_values_than_its_type_names_never_reaches_the_host() {
        let h = Host(&FAKE);
        let t = h.register(&TypeSpec::new(c"T").values(c"a,b")).unwrap();
        assert_eq!(t.raw(), 3);
        let before = CALLS.load(Ordering::Relaxed);
        assert_eq!(t.emit(h, Kind::Malloc, 1, 8, 0, &[7]), Emitted::Dropped);
        assert_eq!(CALLS.load(Ordering::Relaxed), before);
        assert_eq!(t.emit(h, Kind::Malloc, 1, 8, 0, &[7, 8]), Emitted::Recorded);
        assert_eq!(
            t.malloc(h, 1, 8),
            Emitted::Recorded,
            "no values at all: none sent"
        );
        assert_eq!(CALLS.load(Ordering::Relaxed), before + 2);
    }

    #[test]
    fn guard_turns_a_panic_into_the_fallback() {
        assert_eq!(guard(-1, || -> i32 { panic!("boom") }), -1);
        assert_eq!(guard(-1, || 7), 7);
    }
}
