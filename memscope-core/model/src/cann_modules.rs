//! CANN module names by module id (flag bits 56–63 of HAL allocations; 2025 dumps show it as
//! `MID:n`), for the decompose owner `CANN@<MODULE>` (behaviour spec §6). Ids 11–20 are the
//! MDC sub-modules of the CANN list.

/// CANN module names by id, 0–74 (abi.md §2.4, behaviour spec §6).
pub const MODULES: [&str; 75] = [
    "SLOG",
    "IDEDD",
    "IDEDH",
    "HCCL",
    "FMK",
    "HIAIENGINE",
    "DVPP",
    "RUNTIME",
    "CCE",
    "HDC",
    "DRV",
    "MDCFUSION",
    "MDCLOCATION",
    "MDCPERCEPTION",
    "MDCFSM",
    "MDCCOMMON",
    "MDCMONITOR",
    "MDCBSWP",
    "MDCDEFAULT",
    "MDCSC",
    "MDCPNC",
    "MLL",
    "DEVMM",
    "KERNEL",
    "LIBMEDIA",
    "CCECPU",
    "ASCENDDK",
    "ROS",
    "HCCP",
    "ROCE",
    "TEFUSION",
    "PROFILING",
    "DP",
    "APP",
    "TS",
    "TSDUMP",
    "AICPU",
    "LP",
    "TDT",
    "FE",
    "MD",
    "MB",
    "ME",
    "IMU",
    "IMP",
    "GE",
    "MDCFUSA",
    "CAMERA",
    "ASCENDCL",
    "TEEOS",
    "ISP",
    "SIS",
    "HSM",
    "DSS",
    "PROCMGR",
    "BBOX",
    "AIVECTOR",
    "TBE",
    "FV",
    "MDCMAP",
    "TUNE",
    "HSS",
    "FFTS",
    "OP",
    "UDF",
    "HICAID",
    "TSYNC",
    "AUDIO",
    "TPRT",
    "ASCENDCKERNEL",
    "ASYS",
    "ATRACE",
    "RTC",
    "SYSMONITOR",
    "AML",
];

/// The module name of `id`, `UNKNOWN` when not in the list.
pub fn module_name(id: u32) -> &'static str {
    MODULES.get(id as usize).copied().unwrap_or("UNKNOWN")
}

#[cfg(test)]
mod tests {
    #[test]
    fn ids_map_to_cann_names() {
        assert_eq!(super::module_name(7), "RUNTIME");
        assert_eq!(super::module_name(33), "APP");
        assert_eq!(super::module_name(74), "AML");
        assert_eq!(super::module_name(255), "UNKNOWN");
    }
}
