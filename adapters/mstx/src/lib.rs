//! memscope adapter `mstx`: msTX marks, ranges and memory-domain injection.
//!
//! Two halves, as every built-in adapter (`memscope_collect::adapter`):
//! * [`hooks`] — in-process: `InitInjectionMstx` and the functions it registers into each msTX
//!   front end (abi.md §1.5–§1.6). They record `Mark`, `RangeStart`, `RangeEnd` (when the `mstx`
//!   adapter is enabled) and the pool records `HeapRegister`, `HeapUnregister`,
//!   `RegionRegister`, `RegionUnregister` (gated by the `pta`, `mindspore` or `atb` adapter,
//!   whose collector-side typers live in those adapters).
//! * [`typer`] — collector side: the [`memscope_collect::adapter::AdapterDescriptor`] (registered
//!   with `inventory`) and the typer of msTX records into `MSTX` events.
//!
//! The hook functions are ordinary Rust functions; only the probe turns them into dynamic
//! symbols, by invoking [`export_hooks!`] once. So the CLI, which links this crate for its
//! descriptor and typer, never exports msTX (or, in other adapters, `malloc`-like) symbols.
#![deny(clippy::undocumented_unsafe_blocks)]

/// This adapter's source id: its bit in the selection mask (`MEMSCOPE_ADAPTERS`, part of the
/// probe's environment protocol, so it never changes).
pub const SOURCE: memscope_wire::SourceId = memscope_wire::SourceId(0);

pub mod ffi;
pub mod hooks;
pub mod sanitizer;
#[cfg(feature = "collector")]
pub mod typer;

#[cfg(feature = "collector")]
pub use typer::DESCRIPTOR;

/// Defines this adapter's exported C symbols in the invoking crate (the probe cdylib only):
/// `int InitInjectionMstx(mstxGetModuleFuncTableFunc)`, forwarding to
/// [`hooks::init_injection`] with the pool declarations given (each pool adapter's
/// `MSTX_POOLS`: `export_hooks!(memscope_adapter_pta::MSTX_POOLS, …)`).
#[macro_export]
macro_rules! export_hooks {
    ($($pools:expr),* $(,)?) => {
        /// msTX injection entry point (abi.md §1.5): found by every msTX front end through
        /// `dlsym(RTLD_DEFAULT, "InitInjectionMstx")` once the probe is preloaded.
        ///
        /// # Safety
        /// `get` is NULL or a front end's `getModuleFuncTable`.
        #[no_mangle]
        pub unsafe extern "C" fn InitInjectionMstx(
            get: ::core::option::Option<$crate::ffi::GetModuleFuncTable>,
        ) -> ::core::ffi::c_int {
            // SAFETY: forwarded caller contract.
            unsafe { $crate::hooks::init_injection(get, &[$($pools),*]) }
        }

        /// Sets the listener of `sanitizer-op:` marks (`None`/NULL clears it): the Python
        /// package's router to torch_npu's sanitizer (`enable_npu_sanitizer()`, issue 36).
        #[no_mangle]
        pub extern "C" fn memscope_set_sanitizer_callback(
            cb: ::core::option::Option<$crate::sanitizer::SanitizerCallback>,
        ) {
            $crate::sanitizer::set_callback(cb);
        }
    };
}
