//! memscope adapter `hal`: device memory straight from the Ascend driver (`libascend_hal.so`,
//! abi.md §2), and out-of-memory capture.
//!
//! * [`hooks`] — in-process: `halMemAlloc`, `halMemFree`, `halMemCreate`, `halMemRelease`,
//!   exported by the probe through [`export_hooks!`]. They call the driver's real functions
//!   (resolved by [`real`]) and record `HalAlloc`, `HalCreate`, `HalFree` and `HalOom`.
//! * [`typer`] — collector side: those records → `MALLOC`/`FREE` rows of Event Type `HAL`
//!   (or `HOST` on device `cpu` for host-type memory), and the `OOM_Snapshot` row.
//! * [`flags`] — decoding of the flag word and module ids.
//! * [`oom`] (feature `collector`) — the bus layer that fills the OOM snapshot and, with
//!   `--analysis oom[:K]`, the `OOM_DETAIL` rows from the live blocks of every pool.
//!
//! The real-function resolver and the current-device query it uses are runtime services
//! (`memscope_runtime::real`, `memscope_runtime::current_device`), shared by every adapter.
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod flags;
pub mod hooks;
pub mod wire;

#[cfg(feature = "collector")]
pub mod oom;
#[cfg(feature = "collector")]
pub mod typer;

#[cfg(feature = "collector")]
use memscope_collect::adapter::{AdapterDescriptor, LayerSlot};

/// This adapter's source id: its bit in the selection mask (`MEMSCOPE_ADAPTERS`, part of the
/// probe's environment protocol, so it never changes).
pub const SOURCE: memscope_wire::SourceId = memscope_wire::SourceId(4);

/// C symbols the probe exports for this adapter.
pub const SYMBOLS: &[&str] = &["halMemAlloc", "halMemFree", "halMemCreate", "halMemRelease"];

#[cfg(feature = "collector")]
/// This adapter's descriptor: listed once, in the CLI's registration list
/// (`memscope-cli/src/builtin.rs`); nothing registers it at load time, so the probe,
/// which never names it, links none of the collector code it points to.
pub static DESCRIPTOR: AdapterDescriptor = AdapterDescriptor {
    name: "hal",
    source: SOURCE,
    summary: "driver memory (halMemAlloc/Free, halMemCreate/Release) as HAL blocks with \
              used, owner CANN@<MODULE>, page_type and alloc_type; host-type memory as HOST \
              on cpu; out-of-memory snapshot and --analysis oom[:K] detail rows",
    symbols: SYMBOLS,
    events: typer::EVENTS,
    config_keys: &[],
    default_on: true,
    device_memory: true,
    new_typer: Some(typer::new_typer),
    // the out-of-memory layer (issue 5: `OOM_Snapshot`, `--analysis oom[:K]`), after the pool
    // extents, which need the snapshot's request size before it rewrites it
    layers: |cfg| vec![Box::new(oom::OomLayer::new(cfg))],
    layer_slot: LayerSlot::AfterExtents,
    ..AdapterDescriptor::BASE
};

/// Defines this adapter's exported C symbols in the invoking crate (the probe cdylib only),
/// each forwarding to [`hooks`].
#[macro_export]
macro_rules! export_hooks {
    () => {
        /// `drvError_t halMemAlloc(void **pp, unsigned long long size, unsigned long long
        /// flag)` (abi.md §2.1), traced.
        ///
        /// # Safety
        /// The driver's contract.
        #[no_mangle]
        pub unsafe extern "C" fn halMemAlloc(
            pp: *mut *mut ::core::ffi::c_void,
            size: u64,
            flag: u64,
        ) -> ::core::ffi::c_int {
            // SAFETY: forwarded caller contract.
            unsafe { $crate::hooks::hal_mem_alloc(pp, size, flag) }
        }

        /// `drvError_t halMemFree(void *pp)`, traced.
        ///
        /// # Safety
        /// The driver's contract.
        #[no_mangle]
        pub unsafe extern "C" fn halMemFree(pp: *mut ::core::ffi::c_void) -> ::core::ffi::c_int {
            // SAFETY: forwarded caller contract.
            unsafe { $crate::hooks::hal_mem_free(pp) }
        }

        /// `drvError_t halMemCreate(drv_mem_handle_t **handle, size_t size, const struct
        /// drv_mem_prop *prop, uint64_t flag)`, traced.
        ///
        /// # Safety
        /// The driver's contract.
        #[no_mangle]
        pub unsafe extern "C" fn halMemCreate(
            handle: *mut *mut ::core::ffi::c_void,
            size: usize,
            prop: *const $crate::hooks::DrvMemProp,
            flag: u64,
        ) -> ::core::ffi::c_int {
            // SAFETY: forwarded caller contract.
            unsafe { $crate::hooks::hal_mem_create(handle, size, prop, flag) }
        }

        /// `drvError_t halMemRelease(drv_mem_handle_t *handle)`, traced.
        ///
        /// # Safety
        /// The driver's contract.
        #[no_mangle]
        pub unsafe extern "C" fn halMemRelease(
            handle: *mut ::core::ffi::c_void,
        ) -> ::core::ffi::c_int {
            // SAFETY: forwarded caller contract.
            unsafe { $crate::hooks::hal_mem_release(handle) }
        }
    };
}
