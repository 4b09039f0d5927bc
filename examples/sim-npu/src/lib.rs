//! Locations of the simulated CANN stand-in libraries.
//!
//! The build script of this crate compiles the C/C++ stand-ins in `csrc/`
//! into shared libraries laid out like a CANN install:
//!
//! ```text
//! <SIM_NPU_DIR>/lib64/libascend_hal.so libruntime.so libascendcl.so
//!                     libascendcl_impl.so libprofapi.so libdcmi.so
//!                     libms_tools_ext.so libmstx_pyfront.so
//! <SIM_NPU_DIR>/atb/cxx_abi_0/lib/libatb.so
//! <SIM_NPU_DIR>/atb/cxx_abi_1/lib/libatb.so
//! <SIM_NPU_DIR>/python/mstx.py
//! ```
//!
//! `SIM_NPU_DIR` is `<target dir>/<profile>/sim-npu`. Dependents that
//! declare this crate also get it as `DEP_SIM_NPU_LIB_DIR` in their build
//! scripts.
#![forbid(unsafe_code)]

use std::path::PathBuf;

/// Root of the simulated CANN install (`ASCEND_HOME_PATH` for tests).
pub const SIM_NPU_DIR: &str = env!("SIM_NPU_DIR");

/// The `lib64` directory holding the CANN stand-ins and the two msTX
/// front-end copies; put it on `LD_LIBRARY_PATH` so `libdcmi.so` is found
/// by bare name.
pub fn lib64() -> PathBuf {
    PathBuf::from(SIM_NPU_DIR).join("lib64")
}

/// The `ATB_HOME_PATH` for the fake ATB built with
/// `_GLIBCXX_USE_CXX11_ABI=abi` (0 or 1; any other value is treated as 1):
/// `<SIM_NPU_DIR>/atb/cxx_abi_<abi>`, whose `lib/libatb.so` is the library.
pub fn atb_home(abi: u8) -> PathBuf {
    let abi = if abi == 0 { 0 } else { 1 };
    PathBuf::from(SIM_NPU_DIR)
        .join("atb")
        .join(format!("cxx_abi_{abi}"))
}
