//! memscope adapter `acl`: the ACL runtime's lifecycle, current device, pinned host memory and
//! kernel launches (abi.md §3).
//!
//! * [`hooks`] — in-process: `aclInit`, `aclFinalize`, `aclrtSetDevice`,
//!   `aclrtHostRegisterV2`, `aclrtHostUnregister`.
//! * [`launch`] — in-process: the ten launch entry points of abi.md §3.5 and the profiling
//!   callbacks that name kernels.
//! * [`streams`] — in-process: stream and event lifetimes, event record/wait and the three
//!   synchronisations (issue 36), recorded with launches.
//! * [`mem_info`] — in-process: the device memory query of the probe's sampler (`--sample`).
//! * [`typer`] — collector side: `SYSTEM` `ACL_INIT`/`ACL_FINI`, pinned `HOST` blocks,
//!   `KERNEL_LAUNCH` rows with their stream, `SYSTEM` stream and event rows, and the thread's
//!   current device for every adapter.
//!
//! The probe exports the hooks by invoking [`export_hooks!`] once.
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod hooks;
pub mod wire;

pub mod launch;
pub mod mem_info;
mod real;
#[cfg(feature = "collector")]
pub mod stream_rows;
pub mod streams;
#[cfg(feature = "collector")]
pub mod typer;

#[cfg(feature = "collector")]
use memscope_collect::adapter::{AdapterDescriptor, Setting};

/// This adapter's source id: its bit in the selection mask (`MEMSCOPE_ADAPTERS`, part of the
/// probe's environment protocol, so it never changes).
pub const SOURCE: memscope_wire::SourceId = memscope_wire::SourceId(5);

/// C symbols the probe exports for this adapter.
pub const SYMBOLS: &[&str] = &[
    "aclInit",
    "aclFinalize",
    "aclrtSetDevice",
    "aclrtHostRegisterV2",
    "aclrtHostUnregister",
    "rtKernelLaunch",
    "rtKernelLaunchWithHandleV2",
    "rtKernelLaunchWithFlagV2",
    "rtAicpuKernelLaunchExWithArgs",
    "rtLaunchKernelByFuncHandle",
    "rtLaunchKernelByFuncHandleV2",
    "aclrtLaunchKernelImpl",
    "aclrtLaunchKernelV2Impl",
    "aclrtLaunchKernelWithConfig",
    "aclrtLaunchKernelWithHostArgs",
    "aclrtCreateStream",
    "aclrtDestroyStream",
    "aclrtCreateEvent",
    "aclrtDestroyEvent",
    "aclrtRecordEvent",
    "aclrtStreamWaitEvent",
    "aclrtSynchronizeStream",
    "aclrtSynchronizeEvent",
    "aclrtSynchronizeDevice",
];

#[cfg(feature = "collector")]
/// This adapter's descriptor: listed once, in the CLI's registration list
/// (`memscope-cli/src/builtin.rs`); nothing registers it at load time, so the probe,
/// which never names it, links none of the collector code it points to.
pub static DESCRIPTOR: AdapterDescriptor = AdapterDescriptor {
    name: "acl",
    source: SOURCE,
    summary: "ACL runtime: aclInit/aclFinalize as SYSTEM rows, aclrtSetDevice as the thread's \
              device, pinned aclrtHostRegisterV2 memory as HOST on cpu, kernel launches \
              (named through the profiling callbacks; with --level kernel and --events launch) as \
              KERNEL_LAUNCH with their stream, and with them the stream and event calls \
              (create/destroy, record, wait, synchronize) as SYSTEM rows with their handles",
    symbols: SYMBOLS,
    events: typer::EVENTS,
    config_keys: &[],
    default_on: true,
    new_typer: Some(typer::new_typer),
    settings: &[Setting {
        key: "events (launch), analysis (inefficient, races), level (kernel)",
        env: memscope_wire::probe_env::ENV_KERNEL_LAUNCH,
        summary: "0: kernel launches are not collected (no launch rows, no stream or event rows, \
                  no profiling callbacks)",
        // issue 5
        value: Some(|cfg| {
            let a = cfg.analysis;
            if ((cfg.events.launch || a.inefficient) && cfg.level.kernel) || a.races {
                "1"
            } else {
                "0"
            }
        }),
    }],
    ..AdapterDescriptor::BASE
};

/// Defines one exported hook forwarding to `$crate::$path` (used by [`export_hooks!`]).
#[doc(hidden)]
#[macro_export]
macro_rules! __acl_export {
    ($(#[$doc:meta])* $name:ident => $($path:ident)::+ ($($arg:ident: $ty:ty),*)) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// The contract of the CANN function of the same name.
        #[no_mangle]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> ::core::ffi::c_int {
            // SAFETY: forwarded caller contract.
            unsafe { $crate::$($path)::+($($arg),*) }
        }
    };
}

/// Defines this adapter's exported C symbols in the invoking crate (the probe cdylib only),
/// each forwarding to [`hooks`], [`launch`] or [`streams`].
#[macro_export]
macro_rules! export_hooks {
    () => {
        $crate::__acl_export!(
            /// `aclError aclInit(const char *configPath)`, traced (abi.md §3.1).
            aclInit => hooks::acl_init (config: *const ::core::ffi::c_char));
        $crate::__acl_export!(
            /// `aclError aclFinalize(void)`, traced.
            aclFinalize => hooks::acl_finalize ());
        $crate::__acl_export!(
            /// `aclError aclrtSetDevice(int32_t deviceId)`, traced.
            aclrtSetDevice => hooks::aclrt_set_device (device: i32));
        $crate::__acl_export!(
            /// `aclError aclrtHostRegisterV2(void *ptr, uint64_t size, uint32_t flag)` (§3.2).
            aclrtHostRegisterV2 => hooks::aclrt_host_register_v2
                (ptr: *mut ::core::ffi::c_void, size: u64, flag: u32));
        $crate::__acl_export!(
            /// `aclError aclrtHostUnregister(void *ptr)`.
            aclrtHostUnregister => hooks::aclrt_host_unregister (ptr: *mut ::core::ffi::c_void));
        $crate::__acl_export!(
            /// `rtKernelLaunch` (abi.md §3.5).
            rtKernelLaunch => launch::rt_kernel_launch (
                stub: *const ::core::ffi::c_void, block_dim: u32, args: *mut ::core::ffi::c_void,
                args_size: u32, sm_desc: *mut ::core::ffi::c_void, stream: *mut ::core::ffi::c_void));
        $crate::__acl_export!(
            /// `rtKernelLaunchWithHandleV2`.
            rtKernelLaunchWithHandleV2 => launch::rt_kernel_launch_with_handle_v2 (
                hdl: *mut ::core::ffi::c_void, tiling_key: u64, block_dim: u32,
                args_info: *mut ::core::ffi::c_void, sm_desc: *mut ::core::ffi::c_void,
                stream: *mut ::core::ffi::c_void, cfg: *const ::core::ffi::c_void));
        $crate::__acl_export!(
            /// `rtKernelLaunchWithFlagV2`.
            rtKernelLaunchWithFlagV2 => launch::rt_kernel_launch_with_flag_v2 (
                stub: *const ::core::ffi::c_void, block_dim: u32,
                args_info: *mut ::core::ffi::c_void, sm_desc: *mut ::core::ffi::c_void,
                stream: *mut ::core::ffi::c_void, flags: u32, cfg: *const ::core::ffi::c_void));
        $crate::__acl_export!(
            /// `rtAicpuKernelLaunchExWithArgs`.
            rtAicpuKernelLaunchExWithArgs => launch::rt_aicpu_kernel_launch_ex_with_args (
                kernel_type: u32, op_name: *const ::core::ffi::c_char, block_dim: u32,
                args_info: *const ::core::ffi::c_void, sm_desc: *mut *mut ::core::ffi::c_void,
                stream: *mut ::core::ffi::c_void, flags: u32));
        $crate::__acl_export!(
            /// `rtLaunchKernelByFuncHandle`.
            rtLaunchKernelByFuncHandle => launch::rt_launch_kernel_by_func_handle (
                func: *mut ::core::ffi::c_void, block_dim: u32,
                args_handle: *mut ::core::ffi::c_void, stream: *mut ::core::ffi::c_void));
        $crate::__acl_export!(
            /// `rtLaunchKernelByFuncHandleV2`.
            rtLaunchKernelByFuncHandleV2 => launch::rt_launch_kernel_by_func_handle_v2 (
                func: *mut ::core::ffi::c_void, block_dim: u32,
                args_handle: *mut ::core::ffi::c_void, stream: *mut ::core::ffi::c_void,
                cfg: *const ::core::ffi::c_void));
        $crate::__acl_export!(
            /// `aclrtLaunchKernelImpl`.
            aclrtLaunchKernelImpl => launch::aclrt_launch_kernel_impl (
                func: *mut ::core::ffi::c_void, block_dim: u32, args: *const ::core::ffi::c_void,
                args_size: usize, stream: *mut ::core::ffi::c_void));
        $crate::__acl_export!(
            /// `aclrtLaunchKernelV2Impl`.
            aclrtLaunchKernelV2Impl => launch::aclrt_launch_kernel_v2_impl (
                func: *mut ::core::ffi::c_void, block_dim: u32, args: *const ::core::ffi::c_void,
                args_size: usize, cfg: *mut ::core::ffi::c_void, stream: *mut ::core::ffi::c_void));
        $crate::__acl_export!(
            /// `aclrtLaunchKernelWithConfig`.
            aclrtLaunchKernelWithConfig => launch::aclrt_launch_kernel_with_config (
                func: *mut ::core::ffi::c_void, block_dim: u32, stream: *mut ::core::ffi::c_void,
                cfg: *mut ::core::ffi::c_void, args_handle: *mut ::core::ffi::c_void,
                reserve: *mut ::core::ffi::c_void));
        $crate::__acl_export!(
            /// `aclrtLaunchKernelWithHostArgs`.
            aclrtLaunchKernelWithHostArgs => launch::aclrt_launch_kernel_with_host_args (
                func: *mut ::core::ffi::c_void, block_dim: u32, stream: *mut ::core::ffi::c_void,
                cfg: *mut ::core::ffi::c_void, host_args: *mut ::core::ffi::c_void,
                args_size: usize, place_holders: *mut ::core::ffi::c_void,
                place_holder_num: usize));
        $crate::__acl_export!(
            /// `aclError aclrtCreateStream(aclrtStream *stream)` (issue 36).
            aclrtCreateStream => streams::aclrt_create_stream
                (stream: *mut *mut ::core::ffi::c_void));
        $crate::__acl_export!(
            /// `aclError aclrtDestroyStream(aclrtStream stream)`.
            aclrtDestroyStream => streams::aclrt_destroy_stream (stream: *mut ::core::ffi::c_void));
        $crate::__acl_export!(
            /// `aclError aclrtCreateEvent(aclrtEvent *event)`.
            aclrtCreateEvent => streams::aclrt_create_event
                (event: *mut *mut ::core::ffi::c_void));
        $crate::__acl_export!(
            /// `aclError aclrtDestroyEvent(aclrtEvent event)`.
            aclrtDestroyEvent => streams::aclrt_destroy_event (event: *mut ::core::ffi::c_void));
        $crate::__acl_export!(
            /// `aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream)`.
            aclrtRecordEvent => streams::aclrt_record_event
                (event: *mut ::core::ffi::c_void, stream: *mut ::core::ffi::c_void));
        $crate::__acl_export!(
            /// `aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event)`.
            aclrtStreamWaitEvent => streams::aclrt_stream_wait_event
                (stream: *mut ::core::ffi::c_void, event: *mut ::core::ffi::c_void));
        $crate::__acl_export!(
            /// `aclError aclrtSynchronizeStream(aclrtStream stream)`.
            aclrtSynchronizeStream => streams::aclrt_synchronize_stream
                (stream: *mut ::core::ffi::c_void));
        $crate::__acl_export!(
            /// `aclError aclrtSynchronizeEvent(aclrtEvent event)`.
            aclrtSynchronizeEvent => streams::aclrt_synchronize_event
                (event: *mut ::core::ffi::c_void));
        $crate::__acl_export!(
            /// `aclError aclrtSynchronizeDevice(void)`.
            aclrtSynchronizeDevice => streams::aclrt_synchronize_device ());
    };
}
