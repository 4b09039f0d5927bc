//! The raw C ABI of `schemas/memscope_plugin.h` (ABI 1.2), mirrored as `#[repr(C)]` types.
//!
//! These are the types the probe itself uses (`memscope-runtime`'s plugin host), so the two
//! sides cannot drift; the sizes and offsets below are asserted at compile time and checked
//! against the C header by this crate's `layout` test (it compiles a C file printing `sizeof`
//! and `offsetof` of every field).

use core::ffi::{c_char, c_int};

/// `MEMSCOPE_PLUGIN_MAGIC`: `"MSPL"` read as a big-endian u32.
pub const PLUGIN_MAGIC: u32 = 0x4D53_504C;
/// `MEMSCOPE_PLUGIN_ABI_MAJOR`.
pub const ABI_MAJOR: u16 = 1;
/// `MEMSCOPE_PLUGIN_ABI_MINOR`.
pub const ABI_MINOR: u16 = 2;

/// `MEMSCOPE_KIND_MALLOC`: a block `[ptr, ptr+size)` was allocated.
pub const KIND_MALLOC: u32 = 1;
/// `MEMSCOPE_KIND_FREE`: the block at `ptr` was freed.
pub const KIND_FREE: u32 = 2;
/// `MEMSCOPE_KIND_MARK`: a point in time.
pub const KIND_MARK: u32 = 3;
/// `MEMSCOPE_KIND_OP_START`: an operator began.
pub const KIND_OP_START: u32 = 4;
/// `MEMSCOPE_KIND_OP_END`: an operator ended.
pub const KIND_OP_END: u32 = 5;
/// `MEMSCOPE_KIND_KERNEL_START`: a kernel began.
pub const KIND_KERNEL_START: u32 = 6;
/// `MEMSCOPE_KIND_KERNEL_END`: a kernel ended.
pub const KIND_KERNEL_END: u32 = 7;
/// `MEMSCOPE_KIND_ACCESS`: a read or write of a block.
pub const KIND_ACCESS: u32 = 8;
/// `MEMSCOPE_KIND_DIAGNOSTIC`: host only (a refused or failed plugin).
pub const KIND_DIAGNOSTIC: u32 = 255;
/// Highest kind code a plugin may emit (200..=255 are the host's).
pub const KIND_PLUGIN_MAX: u32 = 199;

/// `MEMSCOPE_DEVICE_NONE`: no device (`N/A`).
pub const DEVICE_NONE: u32 = 0xFFFF_FFFF;
/// `MEMSCOPE_DEVICE_CPU`: host memory (`cpu`).
pub const DEVICE_CPU: u32 = 0xFFFF_FFFE;

/// `MEMSCOPE_EVENT_C_STACK` (ABI 1.1): record the emitting thread's C call stack.
pub const EVENT_C_STACK: u32 = 0x1;

/// `MEMSCOPE_TYPE_ACCOUNT` (ABI 1.2): the type's MALLOC/FREE events are account-only: summed
/// up in the live account (peak and live-at-exit by stack), written as rows only with
/// `--host-rows`.
pub const TYPE_ACCOUNT: u32 = 0x1;
/// Most per-event values a registered type may name (ABI 1.2).
pub const MAX_VALUES: usize = 4;

/// `MEMSCOPE_LOG_ERROR`.
pub const LOG_ERROR: c_int = 0;
/// `MEMSCOPE_LOG_WARN`.
pub const LOG_WARN: c_int = 1;
/// `MEMSCOPE_LOG_INFO` (ignored by 1.x probes).
pub const LOG_INFO: c_int = 2;
/// `MEMSCOPE_LOG_DEBUG` (ignored by 1.x probes).
pub const LOG_DEBUG: c_int = 3;

/// `memscope_plugin_event`: one event, borrowed by the host for the duration of `emit`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PluginEvent {
    /// `sizeof(memscope_plugin_event)` as the plugin compiled it.
    pub struct_size: u32,
    /// `MEMSCOPE_KIND_*` (1..=199).
    pub kind: u32,
    /// Device id, [`DEVICE_NONE`] or [`DEVICE_CPU`].
    pub device: u32,
    /// Zero.
    pub reserved: u32,
    /// Address (0: none).
    pub ptr: u64,
    /// Bytes.
    pub size: u64,
    /// Event Type text (NULL: empty).
    pub event_type: *const c_char,
    /// Name text (NULL: empty).
    pub name: *const c_char,
    /// Attributes, `k:v,k:v` (NULL: empty).
    pub attrs: *const c_char,
    /// `MEMSCOPE_EVENT_*` bits (ABI 1.1).
    pub flags: u32,
    /// Zero (ABI 1.1).
    pub reserved2: u32,
}

/// `memscope_event_type` (ABI 1.2): an event type registered once; its events are then emitted
/// by id, without text.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct EventType {
    /// `sizeof(memscope_event_type)` as the plugin compiled it.
    pub struct_size: u32,
    /// Device of every event of the type: a device id, [`DEVICE_NONE`] or [`DEVICE_CPU`].
    pub device: u32,
    /// `MEMSCOPE_TYPE_*` bits.
    pub flags: u32,
    /// Zero.
    pub reserved: u32,
    /// Event Type text (required).
    pub event_type: *const c_char,
    /// Name text of every event of the type (NULL: empty).
    pub name: *const c_char,
    /// Fixed attributes of every event, `k:v,k:v` (NULL: none).
    pub attrs: *const c_char,
    /// Names of the per-event values, `k1,k2` (at most [`MAX_VALUES`]; NULL: none).
    pub value_names: *const c_char,
}

/// `memscope_host`: the vtable the probe hands to `init`; valid for the life of the process.
#[repr(C)]
#[derive(Debug)]
pub struct Host {
    /// `sizeof(memscope_host)` as the probe compiled it.
    pub size: u32,
    /// The probe's ABI major.
    pub abi_major: u16,
    /// The probe's ABI minor.
    pub abi_minor: u16,
    /// Records an event: 0 recorded, 1 not recording now, -1 rejected or dropped.
    pub emit: unsafe extern "C" fn(ev: *const PluginEvent) -> c_int,
    /// The probe's clock: ns since the Unix epoch, monotonic.
    pub now_ns: extern "C" fn() -> u64,
    /// 1 while a collection window is open, else 0.
    pub enabled: extern "C" fn() -> c_int,
    /// Logs `msg` at `level`.
    pub log: unsafe extern "C" fn(level: c_int, msg: *const c_char),
    /// ABI 1.2: registers an event type; its id (>= 0), or -1 when rejected.
    pub register_type: unsafe extern "C" fn(ty: *const EventType) -> i32,
    /// ABI 1.2: records one event of type `type_id` (kind `MEMSCOPE_KIND_*`, flags
    /// `MEMSCOPE_EVENT_*`, `values`: NULL or one value per name the type registered). Returns as
    /// `emit`.
    pub emit_compact: unsafe extern "C" fn(
        type_id: i32,
        kind: u32,
        ptr: u64,
        size: u64,
        flags: u32,
        values: *const u64,
    ) -> c_int,
}

/// `memscope_plugin_header`: the one data symbol a plugin exports, named `memscope_plugin`.
#[repr(C)]
#[derive(Debug)]
pub struct PluginHeader {
    /// [`PLUGIN_MAGIC`].
    pub magic: u32,
    /// ABI major the plugin was built against.
    pub abi_major: u16,
    /// ABI minor the plugin was built against.
    pub abi_minor: u16,
    /// `sizeof(memscope_plugin_header)`.
    pub size: u32,
    /// Zero.
    pub reserved: u32,
    /// Short plugin name (NUL-terminated), for messages.
    pub name: *const c_char,
    /// Called once with the host; 0 starts the plugin, non-zero declines.
    pub init: Option<unsafe extern "C" fn(host: *const Host) -> c_int>,
}

// SAFETY: the header is immutable data (a name literal and a function pointer); sharing it
// between threads is what the loader does.
unsafe impl Sync for PluginHeader {}

/// Size of the ABI 1.0 event (without `flags`/`reserved2`): the smallest a host accepts.
pub const EVENT_V1_0_SIZE: u32 = 56;
/// Size of the ABI 1.0/1.1 host vtable (without `register_type`/`emit_compact`).
pub const HOST_V1_1_SIZE: u32 = 40;
/// Size of the ABI 1.2 event type.
pub const EVENT_TYPE_V1_2_SIZE: u32 = 48;

#[cfg(target_pointer_width = "64")]
const _: () = {
    use core::mem::{offset_of, size_of};
    assert!(size_of::<PluginEvent>() == 64);
    assert!(offset_of!(PluginEvent, ptr) == 16);
    assert!(offset_of!(PluginEvent, size) == 24);
    assert!(offset_of!(PluginEvent, event_type) == 32);
    assert!(offset_of!(PluginEvent, name) == 40);
    assert!(offset_of!(PluginEvent, attrs) == 48);
    assert!(offset_of!(PluginEvent, flags) == EVENT_V1_0_SIZE as usize);
    assert!(size_of::<Host>() == 56);
    assert!(offset_of!(Host, emit) == 8);
    assert!(offset_of!(Host, log) == 32);
    assert!(offset_of!(Host, register_type) == HOST_V1_1_SIZE as usize);
    assert!(offset_of!(Host, emit_compact) == 48);
    assert!(size_of::<EventType>() == EVENT_TYPE_V1_2_SIZE as usize);
    assert!(offset_of!(EventType, event_type) == 16);
    assert!(offset_of!(EventType, value_names) == 40);
    assert!(size_of::<PluginHeader>() == 32);
    assert!(offset_of!(PluginHeader, name) == 16);
    assert!(offset_of!(PluginHeader, init) == 24);
};
