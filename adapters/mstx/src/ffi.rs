//! C types of the msTX injection protocol and memory descriptors (abi.md §1.1, §1.3, §1.4).
//! Layouts are x86_64/aarch64 LP64; enums are `u32`; the anonymous union of
//! `mstxMemRegionRef_t` is one pointer at offset 8.

use core::ffi::{c_int, c_uint, c_void};

/// `MSTX_SUCCESS`.
pub const MSTX_SUCCESS: c_int = 0;
/// `MSTX_FAIL`.
pub const MSTX_FAIL: c_int = 1;

/// `MSTX_API_MODULE_CORE`.
pub const MODULE_CORE: c_int = 1;
/// `MSTX_API_MODULE_CORE_DOMAIN`.
pub const MODULE_CORE_DOMAIN: c_int = 2;
/// `MSTX_API_MODULE_CORE_MEM`.
pub const MODULE_CORE_MEM: c_int = 3;

/// One slot of a front end's table: `mstxFuncPointer` (a nullable function pointer), written
/// by the tool as an untyped pointer.
pub type Slot = *const c_void;
/// `mstxFuncTable`: an array of pointers to slots; `[0]` and `[outSize]` are NULL.
pub type FuncTable = *mut *mut Slot;
/// `mstxGetModuleFuncTableFunc`.
pub type GetModuleFuncTable =
    unsafe extern "C" fn(module: c_int, out_table: *mut FuncTable, out_size: *mut c_uint) -> c_int;

/// `mstxMemVirtualRangeDesc_t` (size 24).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct MemVirtualRangeDesc {
    /// Logical device id.
    pub device_id: u32,
    /// Start address.
    pub ptr: *const c_void,
    /// Bytes.
    pub size: u64,
}

/// `mstxMemHeapDesc_t` (size 16).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct MemHeapDesc {
    /// `mstxMemHeapUsageType`.
    pub usage: u32,
    /// `mstxMemType`.
    pub mem_type: u32,
    /// `*const MemVirtualRangeDesc` for `MSTX_MEM_TYPE_VIRTUAL_ADDRESS` (read as such always).
    pub type_specific_desc: *const c_void,
}

/// `mstxMemRegionsRegisterBatch_t` (size 40).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct MemRegionsRegisterBatch {
    /// Heap handle.
    pub heap: *mut c_void,
    /// `mstxMemType`.
    pub region_type: u32,
    /// Number of regions.
    pub region_count: usize,
    /// `MemVirtualRangeDesc[region_count]`.
    pub region_desc_array: *const c_void,
    /// `[out]` region handles, may be NULL.
    pub region_handle_array_out: *mut *mut c_void,
}

/// `mstxMemRegionRef_t` (size 16): `ref_type` then the pointer/handle union.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct MemRegionRef {
    /// `MSTX_MEM_REGION_REF_TYPE_POINTER` (0) or `_HANDLE` (1).
    pub ref_type: u32,
    /// The union: a block pointer or a handle (this probe's handles *are* block pointers).
    pub pointer_or_handle: *const c_void,
}

/// `mstxMemRegionsUnregisterBatch_t` (size 16).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct MemRegionsUnregisterBatch {
    /// Number of refs.
    pub ref_count: usize,
    /// `MemRegionRef[ref_count]`.
    pub ref_array: *const MemRegionRef,
}

const _: () = {
    assert!(core::mem::size_of::<MemVirtualRangeDesc>() == 24);
    assert!(core::mem::size_of::<MemHeapDesc>() == 16);
    assert!(core::mem::size_of::<MemRegionsRegisterBatch>() == 40);
    assert!(core::mem::offset_of!(MemRegionsRegisterBatch, region_count) == 16);
    assert!(core::mem::offset_of!(MemRegionsRegisterBatch, region_handle_array_out) == 32);
    assert!(core::mem::size_of::<MemRegionRef>() == 16);
    assert!(core::mem::offset_of!(MemRegionRef, pointer_or_handle) == 8);
    assert!(core::mem::size_of::<MemRegionsUnregisterBatch>() == 16);
};
