//! memscope adapter `atb`: ATB (Ascend Transformer Boost).
//!
//! * [`pool`] — ATB reports its memory pool through the msTX memory API on domain `atb`
//!   (abi.md §1.6).
//! * [`hooks`] (issue 5) — in-process: `Runner::Execute`, `StoreUtil::SaveLaunchParam` and the
//!   `Probe` predicates under both libstdc++ ABI spellings (abi.md §4.2), exported by the probe
//!   through [`export_hooks!`]; [`abi`] reads the layouts they are handed.
//! * [`ops`] (issue 5) — collector side: operator, kernel and tensor-access rows, and
//!   [`ops::AtbTyper`], the adapter's typer (pool part + operator part).
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod abi;
pub mod hooks;
pub mod wire;

#[cfg(feature = "collector")]
pub mod ops;
#[cfg(feature = "collector")]
#[forbid(unsafe_code)]
pub mod pool;

#[cfg(feature = "collector")]
use memscope_collect::adapter::AdapterDescriptor;

/// This adapter's source id: its bit in the selection mask (`MEMSCOPE_ADAPTERS`, part of the
/// probe's environment protocol, so it never changes).
pub const SOURCE: memscope_wire::SourceId = memscope_wire::SourceId(3);

/// ATB's pool: domain `atb`, rows of Event Type `ATB` (collector side: [`pool`]). The probe
/// hands it to the msTX hooks; pool number 4 is part of the stream format.
pub const MSTX_POOLS: &[memscope_wire::MstxPool] = &[memscope_wire::MstxPool {
    pool: 4,
    domains: &["atb"],
    source: SOURCE,
    event_type: "ATB",
}];

/// Symbols the adapter interposes: the msTX pool calls it is fed through (registered by the
/// mstx adapter) and the ATB C++ entry points (both ABI spellings, abi.md §4.2).
pub const SYMBOLS: &[&str] = &[
    "mstxDomainCreateA",
    "mstxMemHeapRegister",
    "mstxMemHeapUnregister",
    "mstxMemRegionsRegister",
    "mstxMemRegionsUnregister",
    hooks::sym::EXECUTE,
    hooks::sym::SAVE_LAUNCH_PARAM_0,
    hooks::sym::SAVE_LAUNCH_PARAM_1,
    hooks::sym::IS_TENSOR_NEED_SAVE_0,
    hooks::sym::IS_TENSOR_NEED_SAVE_1,
    hooks::sym::IS_SAVE_TENSOR_AFTER,
    hooks::sym::IS_SAVE_TENSOR_BEFORE,
    hooks::sym::IS_EXECUTE_COUNT_IN_RANGE,
    hooks::sym::IS_SAVE_TENSOR_DESC,
    hooks::sym::IS_SAVE_TENSOR,
];

/// `Event/Event Type` pairs of the whole adapter (pool and operators).
pub const EVENTS: &[&str] = &[
    "MALLOC/ATB",
    "FREE/ATB",
    "OP_LAUNCH/ATB_START",
    "OP_LAUNCH/ATB_END",
    "KERNEL_LAUNCH/KERNEL_START",
    "KERNEL_LAUNCH/KERNEL_END",
    "ACCESS/READ",
    "ACCESS/WRITE",
    "ACCESS/UNKNOWN",
];

#[cfg(feature = "collector")]
/// This adapter's descriptor: listed once, in the CLI's registration list
/// (`memscope-cli/src/builtin.rs`); nothing registers it at load time, so the probe,
/// which never names it, links none of the collector code it points to.
pub static DESCRIPTOR: AdapterDescriptor = AdapterDescriptor {
    name: "atb",
    source: SOURCE,
    summary: "ATB pool (msTX domain atb): blocks as ATB with used, total and owner; \
              operators (Runner::Execute, both C++ ABIs) as OP_LAUNCH ATB_START/ATB_END with \
              their tensors as ACCESS, kernels (SaveLaunchParam) as KERNEL_START/KERNEL_END",
    symbols: SYMBOLS,
    events: EVENTS,
    config_keys: &[],
    default_on: true,
    device_memory: true,
    new_typer: Some(ops::new_typer),
    ..AdapterDescriptor::BASE
};

/// Defines this adapter's exported C++ symbols in the invoking crate (the probe cdylib only),
/// under both `_GLIBCXX_USE_CXX11_ABI` spellings where they differ, each forwarding to
/// [`hooks`]. An export for a name the loaded libatb lacks is harmless (abi.md §4.1 Rec).
#[macro_export]
macro_rules! export_hooks {
    () => {
        /// `atb::Status atb::Runner::Execute(atb::RunnerVariantPack&)`, traced.
        ///
        /// # Safety
        /// libatb's contract.
        #[export_name = "_ZN3atb6Runner7ExecuteERNS_17RunnerVariantPackE"]
        pub unsafe extern "C" fn memscope_atb_runner_execute(
            this: *mut ::core::ffi::c_void,
            pack: *mut ::core::ffi::c_void,
        ) -> i32 {
            // SAFETY: forwarded caller contract.
            unsafe { $crate::hooks::runner_execute(this, pack) }
        }

        /// `atb::StoreUtil::SaveLaunchParam(void*, const Mki::LaunchParam&, const std::string&)`
        /// (abi0 string), traced.
        ///
        /// # Safety
        /// libatb's contract.
        #[export_name = "_ZN3atb9StoreUtil15SaveLaunchParamEPvRKN3Mki11LaunchParamERKSs"]
        pub unsafe extern "C" fn memscope_atb_save_launch_param_abi0(
            stream: *mut ::core::ffi::c_void,
            lp: *const ::core::ffi::c_void,
            dir: *const ::core::ffi::c_void,
        ) {
            // SAFETY: forwarded caller contract; this spelling takes an abi0 string.
            unsafe { $crate::hooks::save_launch_param(false, stream, lp, dir) }
        }

        /// The same with an abi1 (`std::__cxx11`) string.
        ///
        /// # Safety
        /// libatb's contract.
        #[export_name = "_ZN3atb9StoreUtil15SaveLaunchParamEPvRKN3Mki11LaunchParamERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE"]
        pub unsafe extern "C" fn memscope_atb_save_launch_param_abi1(
            stream: *mut ::core::ffi::c_void,
            lp: *const ::core::ffi::c_void,
            dir: *const ::core::ffi::c_void,
        ) {
            // SAFETY: forwarded caller contract; this spelling takes an abi1 string.
            unsafe { $crate::hooks::save_launch_param(true, stream, lp, dir) }
        }

        /// `bool atb::Probe::IsTensorNeedSave(const std::vector<int64_t>&, const std::string&)`
        /// (abi0).
        ///
        /// # Safety
        /// libatb's contract.
        #[export_name = "_ZN3atb5Probe16IsTensorNeedSaveERKSt6vectorIlSaIlEERKSs"]
        pub unsafe extern "C" fn memscope_atb_is_tensor_need_save_abi0(
            ids: *const ::core::ffi::c_void,
            op: *const ::core::ffi::c_void,
        ) -> bool {
            // SAFETY: forwarded caller contract.
            unsafe { $crate::hooks::is_tensor_need_save(false, ids, op) }
        }

        /// The same (abi1).
        ///
        /// # Safety
        /// libatb's contract.
        #[export_name = "_ZN3atb5Probe16IsTensorNeedSaveERKSt6vectorIlSaIlEERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE"]
        pub unsafe extern "C" fn memscope_atb_is_tensor_need_save_abi1(
            ids: *const ::core::ffi::c_void,
            op: *const ::core::ffi::c_void,
        ) -> bool {
            // SAFETY: forwarded caller contract.
            unsafe { $crate::hooks::is_tensor_need_save(true, ids, op) }
        }

        /// `bool atb::Probe::IsSaveTensorAfter()`.
        #[export_name = "_ZN3atb5Probe17IsSaveTensorAfterEv"]
        pub extern "C" fn memscope_atb_is_save_tensor_after() -> bool {
            $crate::hooks::is_save_tensor_after()
        }

        /// `bool atb::Probe::IsSaveTensorBefore()`.
        #[export_name = "_ZN3atb5Probe18IsSaveTensorBeforeEv"]
        pub extern "C" fn memscope_atb_is_save_tensor_before() -> bool {
            $crate::hooks::is_save_tensor_before()
        }

        /// `bool atb::Probe::IsExecuteCountInRange(uint64_t)`.
        #[export_name = "_ZN3atb5Probe21IsExecuteCountInRangeEm"]
        pub extern "C" fn memscope_atb_is_execute_count_in_range(count: u64) -> bool {
            $crate::hooks::is_execute_count_in_range(count)
        }

        /// `bool atb::Probe::IsSaveTensorDesc()`.
        #[export_name = "_ZN3atb5Probe16IsSaveTensorDescEv"]
        pub extern "C" fn memscope_atb_is_save_tensor_desc() -> bool {
            $crate::hooks::is_save_tensor_desc()
        }

        /// `bool atb::Runner::IsSaveTensor() const`.
        ///
        /// # Safety
        /// libatb's contract.
        #[export_name = "_ZNK3atb6Runner12IsSaveTensorEv"]
        pub unsafe extern "C" fn memscope_atb_runner_is_save_tensor(
            this: *const ::core::ffi::c_void,
        ) -> bool {
            // SAFETY: forwarded caller contract.
            unsafe { $crate::hooks::is_save_tensor(this) }
        }
    };
}
