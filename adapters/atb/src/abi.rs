//! The ATB and Mki layouts msMemScope reads (abi.md §4.4, identical under both C++ ABIs on
//! LP64), and `std::string` values of either libstdc++ ABI (abi.md §4.3). Only the ATB hooks
//! use this module; every read trusts that the pointers come from libatb.

use core::ffi::c_void;

/// `atb::RunnerVariantPack` field offsets.
pub mod pack {
    /// `inTensors` (`SVector<Tensor>`).
    pub const IN_TENSORS: usize = 0;
    /// `outTensors`.
    pub const OUT_TENSORS: usize = 6784;
    /// `workspaceBuffer` (`uint8_t *`).
    pub const WORKSPACE: usize = 13784;
    /// `workspaceBufferSize` (`uint64_t`).
    pub const WORKSPACE_SIZE: usize = 13792;
    /// `intermediateBufferSize` (`uint64_t`).
    pub const INTERMEDIATE_SIZE: usize = 13808;
}

/// `atb::SVector<Tensor>`: `capacity_` 0, `size_` 8, `storage_[65]` 16, `heap_` after it.
const ATB_SIZE: usize = 8;
const ATB_STORAGE: usize = 16;
const ATB_INLINE: usize = 65;
const ATB_TENSOR: usize = 104;
const ATB_HEAP: usize = ATB_STORAGE + ATB_INLINE * ATB_TENSOR;
/// Most heap-mode elements read from one vector (a guard against garbage sizes).
const ATB_MAX: usize = 1 << 16;

/// `Mki::SVector<Tensor, 48>`: `storage_[49]` first, then `size_`.
const MKI_INLINE: usize = 49;
const MKI_TENSOR: usize = 464;
const MKI_SIZE: usize = MKI_INLINE * MKI_TENSOR;
/// `Mki::TensorDesc.dims` (`SVector<int64_t, 48>` at 8): storage, then `size_` at 8 + 392.
const MKI_DIMS: usize = 8;
const MKI_DIMS_SIZE: usize = MKI_DIMS + MKI_INLINE * 8;
const MKI_DATA: usize = 440;
const MKI_DATA_SIZE: usize = 448;

/// What the ACCESS rows report of one tensor.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TensorInfo {
    /// Device address (`deviceData` / `data`).
    pub addr: u64,
    /// Bytes (`dataSize`).
    pub size: u64,
    /// `aclDataType` code.
    pub dtype: i32,
    /// `aclFormat` code.
    pub format: i32,
    /// Dimensions, the first `ndims` valid.
    pub dims: [i64; 8],
    /// Number of valid dimensions (≤ 8).
    pub ndims: usize,
}

/// Reads a `T` at `base + off`.
///
/// # Safety
/// `base + off` is readable for `size_of::<T>()` bytes.
unsafe fn at<T: Copy>(base: *const u8, off: usize) -> T {
    // SAFETY: forwarded contract; unaligned read because nothing promises alignment.
    unsafe { base.add(off).cast::<T>().read_unaligned() }
}

/// Calls `f` for every tensor of an `atb::SVector<atb::Tensor>` at `vec`.
///
/// # Safety
/// `vec` points to a live `atb::SVector<atb::Tensor>` with the §4.4 layout.
pub unsafe fn atb_tensors(vec: *const u8, mut f: impl FnMut(TensorInfo)) {
    // SAFETY: field reads inside the vector (caller contract).
    let (size, heap) = unsafe { (at::<usize>(vec, ATB_SIZE), at::<*const u8>(vec, ATB_HEAP)) };
    let (elems, n) = if heap.is_null() {
        // SAFETY: `storage_` is inside the vector.
        (unsafe { vec.add(ATB_STORAGE) }, size.min(ATB_INLINE))
    } else {
        (heap, size.min(ATB_MAX))
    };
    for i in 0..n {
        // SAFETY: element `i < n` of the live storage (inline or heap).
        let t = unsafe { elems.add(i * ATB_TENSOR) };
        // SAFETY: `atb::Tensor` fields at their §4.4 offsets.
        let info = unsafe {
            let ndims = at::<u64>(t, 72).min(8) as usize;
            let mut dims = [0i64; 8];
            for (d, slot) in dims.iter_mut().enumerate().take(ndims) {
                *slot = at::<i64>(t, 8 + d * 8);
            }
            TensorInfo {
                addr: at::<u64>(t, 80),
                size: at::<u64>(t, 96),
                dtype: at::<i32>(t, 0),
                format: at::<i32>(t, 4),
                dims,
                ndims,
            }
        };
        f(info);
    }
}

/// Calls `f` for every tensor of a `Mki::SVector<Mki::Tensor>` at `vec`.
///
/// # Safety
/// `vec` points to a live `Mki::SVector<Mki::Tensor>` with the §4.4 layout.
pub unsafe fn mki_tensors(vec: *const u8, mut f: impl FnMut(TensorInfo)) {
    // SAFETY: `size_` inside the vector.
    let n = unsafe { at::<usize>(vec, MKI_SIZE) }.min(MKI_INLINE);
    for i in 0..n {
        // SAFETY: element `i < n ≤ 49` of the inline storage.
        let t = unsafe { vec.add(i * MKI_TENSOR) };
        // SAFETY: `Mki::Tensor` fields at their §4.4 offsets.
        let info = unsafe {
            let ndims = at::<usize>(t, MKI_DIMS_SIZE).min(8);
            let mut dims = [0i64; 8];
            for (d, slot) in dims.iter_mut().enumerate().take(ndims) {
                *slot = at::<i64>(t, MKI_DIMS + d * 8);
            }
            TensorInfo {
                addr: at::<u64>(t, MKI_DATA),
                size: at::<u64>(t, MKI_DATA_SIZE),
                dtype: at::<i32>(t, 0),
                format: at::<i32>(t, 4),
                dims,
                ndims,
            }
        };
        f(info);
    }
}

/// A `std::string` returned by value, seen as a 32-byte C struct: returned through the same
/// hidden pointer on x86_64 and aarch64 (abi.md §4.3). `w[0]` is the data pointer (abi1) or
/// the COW pointer (abi0); `w[1]` the length and `w[2..4]` the inline buffer (abi1).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Ret32 {
    /// The raw words.
    pub w: [u64; 4],
}

/// `std::string Runner::GetOperationName() const` and friends, called with `this`.
pub type StringGetter = unsafe extern "C" fn(*const c_void) -> Ret32;
/// `std::string::~basic_string()` of either ABI.
pub type StringDtor = unsafe extern "C" fn(*mut Ret32);

/// Longest name or path kept, bytes (msMemScope truncates ATB strings to 254).
pub const MAX_STR: usize = 254;

/// Copies the bytes of the `std::string` object at `s` (of the given ABI) into `out`, cut at
/// [`MAX_STR`]; returns the length copied.
///
/// # Safety
/// `s` points to a live `std::string` of that ABI.
pub unsafe fn read_string(abi1: bool, s: *const u8, out: &mut [u8; 256]) -> usize {
    // SAFETY: the first word of either layout is a pointer (caller contract).
    let p = unsafe { at::<*const u8>(s, 0) };
    if p.is_null() {
        return 0;
    }
    let len = if abi1 {
        // SAFETY: abi1 keeps the length in the second word.
        unsafe { at::<usize>(s, 8) }
    } else {
        // SAFETY: abi0's COW rep `{len, cap, refcount}` sits in the 24 bytes before the data.
        unsafe { at::<usize>(p, 0usize.wrapping_sub(24)) }
    };
    let n = len.min(MAX_STR);
    // SAFETY: the string owns `len ≥ n` readable bytes at `p`.
    unsafe { core::ptr::copy_nonoverlapping(p, out.as_mut_ptr(), n) };
    n
}

/// Calls a string getter on `this`, copies the result into `out` and destroys it; returns
/// the length copied.
///
/// On x86_64 the hidden result pointer is passed explicitly (RDI, with `this` in RSI), so the
/// string is built in place and an abi1 short string's inline data pointer stays valid. On
/// other targets the value is returned as a [`Ret32`] and may have moved: an abi1 string that
/// fits its inline buffer is read from the returned words and not destroyed (it owns no heap).
///
/// # Safety
/// `get` is the getter of the ABI `abi1` names, `dtor` that ABI's destructor, `this` a live
/// `atb::Runner`.
pub unsafe fn call_string(
    abi1: bool,
    get: StringGetter,
    dtor: Option<StringDtor>,
    this: *const c_void,
    out: &mut [u8; 256],
) -> usize {
    // Built where it stays until destroyed: an abi1 short string points into itself.
    #[cfg(target_arch = "x86_64")]
    let mut r = Ret32::default();
    #[cfg(target_arch = "x86_64")]
    {
        type InPlace = unsafe extern "C" fn(*mut Ret32, *const c_void) -> *mut Ret32;
        // SAFETY: on x86_64 a by-value class return is exactly a hidden pointer in RDI with the
        // arguments shifted by one (abi.md §4.3), which `InPlace` spells out.
        let f = unsafe { core::mem::transmute::<StringGetter, InPlace>(get) };
        // SAFETY: caller contract; `r` is writable and outlives the string.
        unsafe { f(&mut r, this) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let mut r = {
        // SAFETY: caller contract (aarch64: the result is built at the address in x8, then
        // moved into `r`).
        let r = unsafe { get(this) };
        if abi1 && r.w[1] < 16 {
            return short_string(&r, out);
        }
        r
    };
    // SAFETY: `r` holds a string of that ABI.
    let n = unsafe { read_string(abi1, (&r as *const Ret32).cast(), out) };
    if let Some(d) = dtor {
        // SAFETY: destroying the string we own, in place, with its ABI's destructor.
        unsafe { d(&mut r) };
    }
    n
}

/// An abi1 string short enough for its inline buffer (length < 16), read from the words of a
/// string object that has moved since it was built (its data pointer still points into the
/// old place): the bytes are the third and fourth words. Copies them into `out`; returns the
/// length.
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
fn short_string(r: &Ret32, out: &mut [u8; 256]) -> usize {
    let n = (r.w[1] as usize).min(15);
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&r.w[2].to_ne_bytes());
    b[8..].copy_from_slice(&r.w[3].to_ne_bytes());
    out[..n].copy_from_slice(&b[..n]);
    n
}

/// `aclDataType` name (abi.md §4.4), or the decimal code when unknown.
pub fn dtype_name(code: i32) -> String {
    let n = match code {
        -1 => "UNDEFINED",
        0 => "FLOAT",
        1 => "FLOAT16",
        2 => "INT8",
        3 => "INT32",
        4 => "UINT8",
        6 => "INT16",
        7 => "UINT16",
        8 => "UINT32",
        9 => "INT64",
        10 => "UINT64",
        11 => "DOUBLE",
        12 => "BOOL",
        13 => "STRING",
        16 => "COMPLEX64",
        17 => "COMPLEX128",
        27 => "BF16",
        29 => "INT4",
        30 => "UINT1",
        33 => "COMPLEX32",
        34 => "HIFLOAT8",
        35 => "FLOAT8_E5M2",
        36 => "FLOAT8_E4M3FN",
        37 => "FLOAT8_E8M0",
        38 => "FLOAT6_E3M2",
        39 => "FLOAT6_E2M3",
        40 => "FLOAT4_E2M1",
        41 => "FLOAT4_E1M2",
        _ => return code.to_string(),
    };
    n.to_owned()
}

/// `aclFormat` name (abi.md §4.4), or the decimal code when unknown.
pub fn format_name(code: i32) -> String {
    let n = match code {
        -1 => "UNDEFINED",
        0 => "NCHW",
        1 => "NHWC",
        2 => "ND",
        3 => "NC1HWC0",
        4 => "FRACTAL_Z",
        12 => "NC1HWC0_C04",
        16 => "HWCN",
        27 => "NDHWC",
        29 => "FRACTAL_NZ",
        30 => "NCDHW",
        32 => "NDC1HWC0",
        33 => "FRACTAL_Z_3D",
        35 => "NC",
        47 => "NCL",
        _ => return code.to_string(),
    };
    n.to_owned()
}

/// msMemScope's shape text: `[d0,d1,]` (every dimension followed by a comma).
pub fn shape_text(dims: impl IntoIterator<Item = i64>) -> String {
    let mut s = String::from("[");
    for d in dims {
        s.push_str(&d.to_string());
        s.push(',');
    }
    s.push(']');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_acl_tables_and_unknown_codes_print_as_numbers() {
        assert_eq!(dtype_name(1), "FLOAT16");
        assert_eq!(dtype_name(27), "BF16");
        assert_eq!(dtype_name(99), "99");
        assert_eq!(format_name(2), "ND");
        assert_eq!(format_name(29), "FRACTAL_NZ");
        assert_eq!(shape_text([2, 3]), "[2,3,]");
        assert_eq!(shape_text([]), "[]");
    }

    #[test]
    fn atb_vectors_read_inline_and_heap_elements() {
        let mut v = vec![0u8; ATB_HEAP + 8];
        v[ATB_SIZE..ATB_SIZE + 8].copy_from_slice(&2usize.to_ne_bytes());
        let put = |t: &mut [u8], addr: u64, size: u64, dims: &[i64]| {
            t[0..4].copy_from_slice(&1i32.to_ne_bytes());
            t[4..8].copy_from_slice(&2i32.to_ne_bytes());
            for (i, d) in dims.iter().enumerate() {
                t[8 + i * 8..16 + i * 8].copy_from_slice(&d.to_ne_bytes());
            }
            t[72..80].copy_from_slice(&(dims.len() as u64).to_ne_bytes());
            t[80..88].copy_from_slice(&addr.to_ne_bytes());
            t[96..104].copy_from_slice(&size.to_ne_bytes());
        };
        put(
            &mut v[ATB_STORAGE..ATB_STORAGE + ATB_TENSOR],
            0x10,
            64,
            &[4, 8],
        );
        put(
            &mut v[ATB_STORAGE + ATB_TENSOR..ATB_STORAGE + 2 * ATB_TENSOR],
            0x20,
            2,
            &[1],
        );
        let mut got = Vec::new();
        // SAFETY: `v` is a zeroed buffer with the SVector layout.
        unsafe {
            atb_tensors(v.as_ptr(), |t| {
                got.push((
                    t.addr,
                    t.size,
                    t.dtype,
                    t.format,
                    t.dims[..t.ndims].to_vec(),
                ))
            })
        };
        assert_eq!(
            got,
            [(0x10, 64, 1, 2, vec![4, 8]), (0x20, 2, 1, 2, vec![1])]
        );

        let mut heap = vec![0u8; ATB_TENSOR * 70];
        for i in 0..70 {
            put(
                &mut heap[i * ATB_TENSOR..(i + 1) * ATB_TENSOR],
                0x100 + i as u64,
                1,
                &[],
            );
        }
        v[ATB_SIZE..ATB_SIZE + 8].copy_from_slice(&70usize.to_ne_bytes());
        v[ATB_HEAP..ATB_HEAP + 8].copy_from_slice(&(heap.as_ptr() as usize).to_ne_bytes());
        let mut n = 0;
        // SAFETY: heap mode pointing at 70 valid elements.
        unsafe {
            atb_tensors(v.as_ptr(), |t| {
                assert_eq!(t.addr, 0x100 + n);
                n += 1;
            })
        };
        assert_eq!(n, 70);
    }

    #[test]
    fn mki_vectors_read_size_after_storage() {
        let mut v = vec![0u8; MKI_SIZE + 8];
        v[MKI_SIZE..].copy_from_slice(&1usize.to_ne_bytes());
        v[MKI_DIMS_SIZE..MKI_DIMS_SIZE + 8].copy_from_slice(&3usize.to_ne_bytes());
        v[MKI_DIMS + 16..MKI_DIMS + 24].copy_from_slice(&7i64.to_ne_bytes());
        v[MKI_DATA..MKI_DATA + 8].copy_from_slice(&0xabcu64.to_ne_bytes());
        v[MKI_DATA_SIZE..MKI_DATA_SIZE + 8].copy_from_slice(&5u64.to_ne_bytes());
        let mut got = Vec::new();
        // SAFETY: `v` has the Mki layout.
        unsafe {
            mki_tensors(v.as_ptr(), |t| {
                got.push((t.addr, t.size, t.dims[..t.ndims].to_vec()))
            })
        };
        assert_eq!(got, [(0xabc, 5, vec![0, 0, 7])]);
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn strings_are_built_in_place_and_read_for_both_abis() {
        unsafe extern "C" fn abi1(ret: *mut Ret32, _this: *const c_void) -> *mut Ret32 {
            // SAFETY: `ret` is the caller's result slot.
            unsafe {
                let inline = core::ptr::addr_of_mut!((*ret).w[2]) as u64;
                (*ret).w = [inline, 5, u64::from_ne_bytes(*b"hello\0\0\0"), 0];
            }
            ret
        }
        static REP: [u64; 4] = [3, 3, 0, u64::from_ne_bytes(*b"cow\0\0\0\0\0")];
        unsafe extern "C" fn abi0(ret: *mut Ret32, _this: *const c_void) -> *mut Ret32 {
            // SAFETY: `ret` is the caller's result slot; the data pointer is past the rep.
            unsafe { (*ret).w[0] = core::ptr::addr_of!(REP[3]) as u64 };
            ret
        }
        // The destructor sees the string where it was built: an abi1 short string's data
        // pointer still points at its own inline buffer (a moved one would be freed as heap).
        static IN_PLACE: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);
        unsafe extern "C" fn dtor(s: *mut Ret32) {
            // SAFETY: `s` is the string `call_string` holds.
            let inline = unsafe { core::ptr::addr_of!((*s).w[2]) as u64 == (*s).w[0] };
            if inline {
                IN_PLACE.fetch_add(1, core::sync::atomic::Ordering::Relaxed);
            }
        }
        let mut out = [0u8; 256];
        // SAFETY: on x86_64 the in-place form is the ABI of a by-value return.
        let (g1, g0) = unsafe {
            (
                core::mem::transmute::<
                    unsafe extern "C" fn(*mut Ret32, *const c_void) -> *mut Ret32,
                    StringGetter,
                >(abi1),
                core::mem::transmute::<
                    unsafe extern "C" fn(*mut Ret32, *const c_void) -> *mut Ret32,
                    StringGetter,
                >(abi0),
            )
        };
        // SAFETY: fakes of the two string shapes; the destructor only checks the address.
        let n = unsafe { call_string(true, g1, Some(dtor), core::ptr::null(), &mut out) };
        assert_eq!(&out[..n], b"hello");
        assert_eq!(
            IN_PLACE.load(core::sync::atomic::Ordering::Relaxed),
            1,
            "not moved"
        );
        // SAFETY: as above.
        let n = unsafe { call_string(false, g0, None, core::ptr::null(), &mut out) };
        assert_eq!(&out[..n], b"cow");
    }

    #[cfg(not(target_arch = "x86_64"))]
    #[test]
    fn strings_are_returned_by_value_and_read_for_both_abis() {
        // abi1, short: the inline pointer points where the callee built it, not where the
        // value landed; the bytes are read from the returned words.
        unsafe extern "C" fn abi1_short(_this: *const c_void) -> Ret32 {
            Ret32 {
                w: [0x10, 5, u64::from_ne_bytes(*b"hello\0\0\0"), 0],
            }
        }
        // abi1, long (heap data: the pointer stays valid when the value moves).
        static LONG: &[u8; 20] = b"a-long-runner-name!!";
        unsafe extern "C" fn abi1_long(_this: *const c_void) -> Ret32 {
            Ret32 {
                w: [LONG.as_ptr() as u64, LONG.len() as u64, 32, 0],
            }
        }
        static REP: [u64; 4] = [3, 3, 0, u64::from_ne_bytes(*b"cow\0\0\0\0\0")];
        unsafe extern "C" fn abi0(_this: *const c_void) -> Ret32 {
            Ret32 {
                w: [core::ptr::addr_of!(REP[3]) as u64, 0, 0, 0],
            }
        }
        static DTORS: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);
        unsafe extern "C" fn dtor(_s: *mut Ret32) {
            DTORS.fetch_add(1, core::sync::atomic::Ordering::Relaxed);
        }
        let mut out = [0u8; 256];
        // SAFETY: fakes of the string shapes, returned by value as the C++ getters do.
        let n = unsafe { call_string(true, abi1_short, Some(dtor), core::ptr::null(), &mut out) };
        assert_eq!(&out[..n], b"hello");
        assert_eq!(
            DTORS.load(core::sync::atomic::Ordering::Relaxed),
            0,
            "owns no heap"
        );
        // SAFETY: as above.
        let n = unsafe { call_string(true, abi1_long, Some(dtor), core::ptr::null(), &mut out) };
        assert_eq!(&out[..n], LONG);
        assert_eq!(
            DTORS.load(core::sync::atomic::Ordering::Relaxed),
            1,
            "destroyed"
        );
        // SAFETY: as above.
        let n = unsafe { call_string(false, abi0, None, core::ptr::null(), &mut out) };
        assert_eq!(&out[..n], b"cow");
    }
}
