//! Decoding of the `halMemAlloc` flag word (abi.md §2.3) and of `drv_mem_prop` (abi.md §2.2),
//! and the CANN module-id names (abi.md §2.4). Pure functions; safe code only.

#[cfg(feature = "collector")]
use memscope_core::event::PageType;

/// Mask of the device id, flag bits 0–9.
pub const DEVICE_MASK: u64 = 0x3FF;
/// Shift of the virtual memory type, flag bits 10–13.
pub const MEM_TYPE_SHIFT: u32 = 10;
/// Mask of the virtual memory type (after shifting).
pub const MEM_TYPE_MASK: u64 = 0xF;
/// Huge page (2 MiB), flag bit 17.
pub const HUGE_PAGE: u64 = 1 << 17;
/// Giant page (1 GiB), flag bit 31; wins over bit 17.
pub const GIANT_PAGE: u64 = 1 << 31;
/// Shift of the module id, flag bits 56–63.
pub const MODULE_SHIFT: u32 = 56;

/// `DRV_ERROR_NONE`.
pub const DRV_ERROR_NONE: i32 = 0;
/// `DRV_ERROR_OUT_OF_MEMORY` (abi.md §2.5): triggers the OOM snapshot.
pub const DRV_ERROR_OUT_OF_MEMORY: i32 = 6;
/// `DRV_ERROR_NOT_SUPPORT`: returned only when no driver implementation exists at all.
pub const DRV_ERROR_NOT_SUPPORT: i32 = 0xfffe;

/// The virtual memory type of flag bits 10–13 (abi.md §2.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemType {
    /// 0: shared virtual memory.
    Svm,
    /// 1: device memory.
    Device,
    /// 2: host memory (the event becomes `HOST` on device `cpu`).
    Host,
    /// 3: DVPP memory.
    Dvpp,
    /// Any other value (msMemScope logs it as invalid; we treat it as device memory).
    Invalid(u8),
}

/// Device id of a flag word (bits 0–9), before `ASCEND_RT_VISIBLE_DEVICES` mapping.
pub fn device(flag: u64) -> u32 {
    (flag & DEVICE_MASK) as u32
}

/// Memory type of a flag word (bits 10–13).
pub fn mem_type(flag: u64) -> MemType {
    match ((flag >> MEM_TYPE_SHIFT) & MEM_TYPE_MASK) as u8 {
        0 => MemType::Svm,
        1 => MemType::Device,
        2 => MemType::Host,
        3 => MemType::Dvpp,
        v => MemType::Invalid(v),
    }
}

#[cfg(feature = "collector")]
/// Page type of a flag word: bit 31 giant, else bit 17 huge, else normal (abi.md §2.3).
/// msMemScope never calls its helper for this on the `halMemAlloc` path and always writes
/// `normal` there; we read the bits (behaviour spec §14, "the page type should be read from the
/// flags").
pub fn page_type(flag: u64) -> PageType {
    if flag & GIANT_PAGE != 0 {
        PageType::Giant
    } else if flag & HUGE_PAGE != 0 {
        PageType::Huge
    } else {
        PageType::Normal
    }
}

#[cfg(feature = "collector")]
/// Page type of a `halMemCreate` block: the flag bits when they name huge or giant pages,
/// else `drv_mem_prop.pg_type` (0 normal, 1 huge, 2 giant; what msMemScope reports), else
/// normal (`u32::MAX`: no `prop`; other values are unknown and read as normal).
pub fn create_page_type(flag: u64, pg_type: u32) -> PageType {
    match page_type(flag) {
        PageType::Normal => match pg_type {
            1 => PageType::Huge,
            2 => PageType::Giant,
            _ => PageType::Normal,
        },
        p => p,
    }
}

/// Module id of a flag word (bits 56–63).
pub fn module_id(flag: u64) -> u32 {
    (flag >> MODULE_SHIFT) as u32
}

#[cfg(feature = "collector")]
pub use memscope_core::cann_modules::module_name;

#[cfg(feature = "collector")]
/// The framework level of a HAL block's owner chain: `CANN@<MODULE>` (behaviour spec §7).
pub fn owner_framework(module: u32) -> String {
    format!("CANN@{}", module_name(module))
}

#[cfg(all(test, feature = "collector"))]
mod tests {
    use super::*;

    #[test]
    fn msmemscope_test_flag_decodes_as_device_6_device_memory_huge_page_module_app() {
        let flag = 0x2100_0000_0092_4406;
        assert_eq!(device(flag), 6);
        assert_eq!(mem_type(flag), MemType::Device);
        assert_eq!(page_type(flag), PageType::Huge);
        assert_eq!(module_name(module_id(flag)), "APP");
    }

    #[test]
    fn memory_types_cover_the_four_values_and_flag_others_invalid() {
        let t = |v: u64| mem_type(v << MEM_TYPE_SHIFT);
        assert_eq!(
            [t(0), t(1), t(2), t(3), t(9)],
            [
                MemType::Svm,
                MemType::Device,
                MemType::Host,
                MemType::Dvpp,
                MemType::Invalid(9)
            ]
        );
    }

    #[test]
    fn giant_page_wins_over_huge_and_create_falls_back_to_prop_page_type() {
        assert_eq!(page_type(HUGE_PAGE | GIANT_PAGE), PageType::Giant);
        assert_eq!(page_type(0), PageType::Normal);
        assert_eq!(create_page_type(0, 1), PageType::Huge);
        assert_eq!(create_page_type(0, 2), PageType::Giant);
        assert_eq!(create_page_type(0, u32::MAX), PageType::Normal);
        assert_eq!(create_page_type(GIANT_PAGE, 1), PageType::Giant);
    }

    #[test]
    fn module_ids_name_runtime_hccl_and_unknown_past_the_table() {
        assert_eq!(owner_framework(7), "CANN@RUNTIME");
        assert_eq!(owner_framework(3), "CANN@HCCL");
        assert_eq!(owner_framework(74), "CANN@AML");
        assert_eq!(owner_framework(75), "CANN@UNKNOWN");
        assert_eq!(owner_framework(200), "CANN@UNKNOWN");
        assert_eq!(module_name(33), "APP");
        assert_eq!(module_name(48), "ASCENDCL");
    }
}
