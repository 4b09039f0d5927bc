//! In-process half: the ATB C++ entry points of abi.md §4.2, under both libstdc++ ABI
//! spellings, exported by the probe through [`crate::export_hooks!`].
//!
//! * `Runner::Execute(RunnerVariantPack&)` — the real operator **always** runs: the original
//!   is found through `RTLD_NEXT` (or an already loaded `libatb.so`); when the `atb` adapter is
//!   enabled the hook records `AtbOp` start, the in (`UNKNOWN`) and out (`WRITE`) tensors,
//!   runs the original, records the tensors again and `AtbOp` end. msMemScope instead looks the
//!   original up through `$ATB_HOME_PATH` and skips the operator when that fails (abi.md §4.5);
//!   here a missing getter (`GetOperationName`, `GetSaveTensorDir`) only leaves the name or
//!   path empty. Only if no original exists at all does the hook answer [`ATB_ERROR`].
//! * `StoreUtil::SaveLaunchParam(stream, LaunchParam&, dirPath)` — enabled: records `AtbKernel`
//!   start (`…/before`) or end (`…/after`) with the kernel's in (`READ`) and out (`WRITE`)
//!   tensors, and does not call the original (msMemScope's rule: no tensor files); disabled:
//!   forwards to the original.
//! * `Probe::IsTensorNeedSave/IsSaveTensorAfter/IsSaveTensorBefore/IsExecuteCountInRange/
//!   IsSaveTensorDesc` answer `true` and `Runner::IsSaveTensor` `false` while enabled, so ATB
//!   computes the save path and calls `SaveLaunchParam` around every kernel without dumping
//!   tensors itself; disabled, they forward to the originals (`false` if there is none).
//!
//! Records are written inside the runtime's reentrancy guard, never across the original call,
//! so the allocations and launches the operator makes are traced as usual.

use crate::abi::{self, StringDtor, StringGetter, TensorInfo};
use crate::wire::AtbRecord;
use crate::SOURCE;
use core::ffi::{c_void, CStr};
use memscope_runtime as rt;
use memscope_runtime::real::{object_of, Real, Step};
use memscope_wire::{encode_dims, AccessKind, OptU32};
use std::sync::OnceLock;

/// The status the `Runner::Execute` hook answers when libatb's original cannot be found.
pub const ATB_ERROR: i32 = -1;

/// Mangled names (abi.md §4.2, §4.3).
pub mod sym {
    /// `atb::Runner::Execute(atb::RunnerVariantPack&)` (same in both ABIs).
    pub const EXECUTE: &str = "_ZN3atb6Runner7ExecuteERNS_17RunnerVariantPackE";
    /// `atb::StoreUtil::SaveLaunchParam(void*, Mki::LaunchParam const&, std::string const&)`, abi0.
    pub const SAVE_LAUNCH_PARAM_0: &str =
        "_ZN3atb9StoreUtil15SaveLaunchParamEPvRKN3Mki11LaunchParamERKSs";
    /// The same, abi1.
    pub const SAVE_LAUNCH_PARAM_1: &str = "_ZN3atb9StoreUtil15SaveLaunchParamEPvRKN3Mki11LaunchParamERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE";
    /// `atb::Probe::IsTensorNeedSave(std::vector<long> const&, std::string const&)`, abi0.
    pub const IS_TENSOR_NEED_SAVE_0: &str =
        "_ZN3atb5Probe16IsTensorNeedSaveERKSt6vectorIlSaIlEERKSs";
    /// The same, abi1.
    pub const IS_TENSOR_NEED_SAVE_1: &str = "_ZN3atb5Probe16IsTensorNeedSaveERKSt6vectorIlSaIlEERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE";
    /// `atb::Probe::IsSaveTensorAfter()`.
    pub const IS_SAVE_TENSOR_AFTER: &str = "_ZN3atb5Probe17IsSaveTensorAfterEv";
    /// `atb::Probe::IsSaveTensorBefore()`.
    pub const IS_SAVE_TENSOR_BEFORE: &str = "_ZN3atb5Probe18IsSaveTensorBeforeEv";
    /// `atb::Probe::IsExecuteCountInRange(unsigned long)`.
    pub const IS_EXECUTE_COUNT_IN_RANGE: &str = "_ZN3atb5Probe21IsExecuteCountInRangeEm";
    /// `atb::Probe::IsSaveTensorDesc()`.
    pub const IS_SAVE_TENSOR_DESC: &str = "_ZN3atb5Probe16IsSaveTensorDescEv";
    /// `atb::Runner::IsSaveTensor() const`.
    pub const IS_SAVE_TENSOR: &str = "_ZNK3atb6Runner12IsSaveTensorEv";
}

const LIBATB: &CStr = c"libatb.so";

macro_rules! original {
    ($sym:literal) => {
        Real::new(&[
            Step::Next($sym),
            Step::Loaded {
                lib: LIBATB,
                sym: $sym,
            },
        ])
    };
}

static EXECUTE: Real = original!(c"_ZN3atb6Runner7ExecuteERNS_17RunnerVariantPackE");
static SAVE_0: Real = original!(c"_ZN3atb9StoreUtil15SaveLaunchParamEPvRKN3Mki11LaunchParamERKSs");
static SAVE_1: Real = original!(c"_ZN3atb9StoreUtil15SaveLaunchParamEPvRKN3Mki11LaunchParamERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE");
static NEED_SAVE_0: Real = original!(c"_ZN3atb5Probe16IsTensorNeedSaveERKSt6vectorIlSaIlEERKSs");
static NEED_SAVE_1: Real = original!(c"_ZN3atb5Probe16IsTensorNeedSaveERKSt6vectorIlSaIlEERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE");
static SAVE_AFTER: Real = original!(c"_ZN3atb5Probe17IsSaveTensorAfterEv");
static SAVE_BEFORE: Real = original!(c"_ZN3atb5Probe18IsSaveTensorBeforeEv");
static COUNT_IN_RANGE: Real = original!(c"_ZN3atb5Probe21IsExecuteCountInRangeEm");
static SAVE_DESC: Real = original!(c"_ZN3atb5Probe16IsSaveTensorDescEv");
static IS_SAVE: Real = original!(c"_ZNK3atb6Runner12IsSaveTensorEv");

type ExecuteFn = unsafe extern "C" fn(*mut c_void, *mut c_void) -> i32;
type SaveFn = unsafe extern "C" fn(*mut c_void, *const c_void, *const c_void);
type TensorsFn = unsafe extern "C" fn(*const c_void) -> *const u8;

/// What the hooks call in libatb, found once from the object holding `Runner::Execute`.
struct AtbLib {
    abi1: bool,
    name: Option<StringGetter>,
    dir: Option<StringGetter>,
    dtor: Option<StringDtor>,
    in_tensors: Option<TensorsFn>,
    out_tensors: Option<TensorsFn>,
}

static LIB: OnceLock<AtbLib> = OnceLock::new();

fn lib() -> &'static AtbLib {
    // Internal: `dlopen(NOLOAD)`/`dlsym` may allocate.
    LIB.get_or_init(|| rt::internal(load_lib))
}

fn load_lib() -> AtbLib {
    {
        let mut path = [0u8; 4096];
        let handle = EXECUTE
            .get()
            .and_then(|p| object_of(p as usize, &mut path))
            // SAFETY: `p` is a NUL-terminated path of a loaded object; NOLOAD loads nothing.
            .map(|p| unsafe { libc::dlopen(p, libc::RTLD_NOW | libc::RTLD_NOLOAD) })
            .unwrap_or(core::ptr::null_mut());
        let find = |s: &CStr| -> *mut c_void {
            let p = if handle.is_null() {
                core::ptr::null_mut()
            } else {
                // SAFETY: `handle` is a live handle; `s` is NUL-terminated.
                unsafe { libc::dlsym(handle, s.as_ptr()) }
            };
            if p.is_null() {
                // SAFETY: RTLD_DEFAULT is a valid pseudo-handle; `s` is NUL-terminated.
                unsafe { libc::dlsym(libc::RTLD_DEFAULT, s.as_ptr()) }
            } else {
                p
            }
        };
        let name1 = find(c"_ZNK3atb6Runner16GetOperationNameB5cxx11Ev");
        let abi1 = !name1.is_null();
        let (name, dir, dtor) = if abi1 {
            (
                name1,
                find(c"_ZNK3atb6Runner16GetSaveTensorDirB5cxx11Ev"),
                find(c"_ZNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEED1Ev"),
            )
        } else {
            (
                find(c"_ZNK3atb6Runner16GetOperationNameEv"),
                find(c"_ZNK3atb6Runner16GetSaveTensorDirEv"),
                find(c"_ZNSsD1Ev"),
            )
        };
        // SAFETY: each pointer is null (mapped to None) or the named libatb or libstdc++
        // function, whose C view is the declared type (abi.md §4.3).
        unsafe {
            AtbLib {
                abi1,
                name: (!name.is_null())
                    .then(|| core::mem::transmute::<*mut c_void, StringGetter>(name)),
                dir: (!dir.is_null())
                    .then(|| core::mem::transmute::<*mut c_void, StringGetter>(dir)),
                dtor: (!dtor.is_null())
                    .then(|| core::mem::transmute::<*mut c_void, StringDtor>(dtor)),
                in_tensors: tensors_fn(find(c"_ZN3Mki11LaunchParam12GetInTensorsEv")),
                out_tensors: tensors_fn(find(c"_ZN3Mki11LaunchParam13GetOutTensorsEv")),
            }
        }
    }
}

/// # Safety
/// `p` is null or `Mki::LaunchParam::Get{In,Out}Tensors`.
unsafe fn tensors_fn(p: *mut c_void) -> Option<TensorsFn> {
    // SAFETY: caller contract.
    (!p.is_null()).then(|| unsafe { core::mem::transmute::<*mut c_void, TensorsFn>(p) })
}

/// The calling thread's device (logical), `u32::MAX` when the runtime cannot tell.
fn current_device() -> u32 {
    memscope_runtime::current_device::current_logical(rt::now_ns())
}

fn tensor(kind: AccessKind, kernel: bool, t: TensorInfo) {
    if t.addr == 0 {
        return; // msMemScope drops accesses of address 0
    }
    let mut dims = [0u8; 80];
    let n = encode_dims(&t.dims[..t.ndims], &mut dims).unwrap_or(0);
    let (addr, size, dtype, format, dims) = (t.addr, t.size, t.dtype, t.format, &dims[..n]);
    let rec = if kernel {
        AtbRecord::TensorKernel {
            access: kind,
            addr,
            size,
            dtype,
            format,
            dims,
        }
    } else {
        AtbRecord::TensorOp {
            access: kind,
            addr,
            size,
            dtype,
            format,
            dims,
        }
    };
    rt::record_source_bare(crate::SOURCE, rt::now_ns(), &rec);
}

/// Records the tensors of a variant pack: inputs `UNKNOWN`, outputs `WRITE` (msMemScope).
///
/// # Safety
/// `pack` is a live `RunnerVariantPack`.
unsafe fn pack_tensors(pack: *const u8) {
    // SAFETY: the two vectors are inside the pack (caller contract).
    unsafe {
        abi::atb_tensors(pack.add(abi::pack::IN_TENSORS), |t| {
            tensor(AccessKind::Unknown, false, t)
        });
        abi::atb_tensors(pack.add(abi::pack::OUT_TENSORS), |t| {
            tensor(AccessKind::Write, false, t)
        });
    }
}

/// `atb::Status atb::Runner::Execute(atb::RunnerVariantPack&)` hook.
///
/// # Safety
/// libatb's contract: `this` is a live `Runner`, `pack` a live `RunnerVariantPack`.
pub unsafe extern "C" fn runner_execute(this: *mut c_void, pack: *mut c_void) -> i32 {
    rt::safe_point();
    let Some(p) = EXECUTE.get() else {
        return ATB_ERROR;
    };
    // SAFETY: the original `Runner::Execute`, `int32_t f(Runner *, RunnerVariantPack *)`.
    let real = unsafe { core::mem::transmute::<*mut c_void, ExecuteFn>(p) };
    if !rt::enabled(SOURCE) || pack.is_null() || this.is_null() {
        // SAFETY: forwarding untouched.
        return unsafe { real(this, pack) };
    }
    let (mut name, mut path) = ([0u8; 256], [0u8; 256]);
    let (mut nn, mut np, mut device, mut ws_ptr, mut ws_size) = (0, 0, u32::MAX, 0u64, 0u64);
    let recorded = match rt::enter() {
        Some(mut g) => {
            let l = lib();
            // Internal: the getters' allocations (a `std::string` copy) are the probe's doing.
            // SAFETY: getters of `l.abi1`'s ABI called on the live runner.
            rt::internal(|| unsafe {
                if let Some(g) = l.name {
                    nn = abi::call_string(l.abi1, g, l.dtor, this, &mut name);
                }
                if let Some(g) = l.dir {
                    np = abi::call_string(l.abi1, g, l.dtor, this, &mut path);
                }
            });
            let pk = pack.cast::<u8>().cast_const();
            // SAFETY: fields of the live pack (abi.md §4.4 offsets).
            unsafe {
                ws_ptr = pk.add(abi::pack::WORKSPACE).cast::<u64>().read_unaligned();
                ws_size = pk
                    .add(abi::pack::WORKSPACE_SIZE)
                    .cast::<u64>()
                    .read_unaligned()
                    .wrapping_add(
                        pk.add(abi::pack::INTERMEDIATE_SIZE)
                            .cast::<u64>()
                            .read_unaligned(),
                    );
            }
            device = current_device();
            let start = AtbRecord::OpStart {
                device: OptU32(device),
                ws_ptr,
                ws_size,
                name: &name[..nn],
                path: &path[..np],
            };
            rt::record_source(&mut g, crate::SOURCE, rt::now_ns(), &start, true);
            // SAFETY: the live pack.
            unsafe { pack_tensors(pk) };
            true
        }
        None => false,
    };
    // SAFETY: forwarding untouched; the operator always runs.
    let rc = unsafe { real(this, pack) };
    if recorded {
        if let Some(_g) = rt::enter() {
            // SAFETY: the pack is still live (the caller owns it across the call).
            unsafe { pack_tensors(pack.cast::<u8>().cast_const()) };
            let end = AtbRecord::OpEnd {
                device: OptU32(device),
                ws_ptr,
                ws_size,
                name: &name[..nn],
                path: &path[..np],
            };
            rt::record_source_bare(crate::SOURCE, rt::now_ns(), &end);
        }
    }
    rc
}

/// `SaveLaunchParam` hook body; `abi1` says which spelling was called, i.e. which
/// `std::string` layout `dir` has.
///
/// # Safety
/// libatb's contract: `lp` a live `Mki::LaunchParam`, `dir` a live `std::string` of that ABI.
pub unsafe fn save_launch_param(
    abi1: bool,
    stream: *mut c_void,
    lp: *const c_void,
    dir: *const c_void,
) {
    rt::safe_point();
    if !rt::enabled(SOURCE) || dir.is_null() {
        let real = if abi1 { &SAVE_1 } else { &SAVE_0 };
        if let Some(p) = real.get() {
            // SAFETY: the original of the same spelling.
            let f = unsafe { core::mem::transmute::<*mut c_void, SaveFn>(p) };
            // SAFETY: forwarding untouched.
            unsafe { f(stream, lp, dir) };
        }
        return;
    }
    let Some(mut g) = rt::enter() else { return };
    let mut path = [0u8; 256];
    // SAFETY: caller contract.
    let n = unsafe { abi::read_string(abi1, dir.cast(), &mut path) };
    let path = &path[..n];
    let contains = |m: &[u8]| path.windows(m.len()).any(|w| w == m);
    let end = if contains(b"/before") {
        false
    } else if contains(b"/after") {
        true
    } else {
        return;
    };
    let device = OptU32(current_device());
    let rec = if end {
        AtbRecord::KernelEnd { device, path }
    } else {
        AtbRecord::KernelStart { device, path }
    };
    rt::record_source(&mut g, crate::SOURCE, rt::now_ns(), &rec, true);
    if lp.is_null() {
        return;
    }
    let l = lib();
    for (get, kind) in [
        (l.in_tensors, AccessKind::Read),
        (l.out_tensors, AccessKind::Write),
    ] {
        if let Some(get) = get {
            // SAFETY: `Mki::LaunchParam::Get*Tensors` on the live launch param returns a
            // reference to its `SVector<Mki::Tensor>`.
            unsafe {
                let v = get(lp);
                if !v.is_null() {
                    abi::mki_tensors(v, |t| tensor(kind, true, t));
                }
            }
        }
    }
}

/// Shared body of the `Probe`/`IsSaveTensor` predicate hooks: `forced` while the adapter is
/// enabled, else the original's answer (`false` when there is none).
fn predicate(real: &Real, forced: bool, call: impl FnOnce(*mut c_void) -> bool) -> bool {
    if rt::enabled(SOURCE) {
        return forced;
    }
    real.get().is_some_and(call)
}

/// Calls a `bool f(void)` original.
fn nullary(p: *mut c_void) -> bool {
    // SAFETY: every caller passes an original declared `bool f()` (abi.md §4.2).
    let f = unsafe { core::mem::transmute::<*mut c_void, unsafe extern "C" fn() -> bool>(p) };
    // SAFETY: no arguments.
    unsafe { f() }
}

/// `bool atb::Probe::IsTensorNeedSave(const std::vector<int64_t>&, const std::string&)` hook
/// (`abi1`: which spelling was called).
///
/// # Safety
/// libatb's contract (both arguments are references).
pub unsafe fn is_tensor_need_save(abi1: bool, ids: *const c_void, op_type: *const c_void) -> bool {
    predicate(if abi1 { &NEED_SAVE_1 } else { &NEED_SAVE_0 }, true, |p| {
        // SAFETY: the original of the same spelling.
        let f = unsafe {
            core::mem::transmute::<
                *mut c_void,
                unsafe extern "C" fn(*const c_void, *const c_void) -> bool,
            >(p)
        };
        // SAFETY: forwarding the caller's references.
        unsafe { f(ids, op_type) }
    })
}

/// `bool atb::Probe::IsSaveTensorAfter()` hook.
pub extern "C" fn is_save_tensor_after() -> bool {
    predicate(&SAVE_AFTER, true, nullary)
}

/// `bool atb::Probe::IsSaveTensorBefore()` hook.
pub extern "C" fn is_save_tensor_before() -> bool {
    predicate(&SAVE_BEFORE, true, nullary)
}

/// `bool atb::Probe::IsSaveTensorDesc()` hook.
pub extern "C" fn is_save_tensor_desc() -> bool {
    predicate(&SAVE_DESC, true, nullary)
}

/// `bool atb::Probe::IsExecuteCountInRange(uint64_t)` hook.
pub extern "C" fn is_execute_count_in_range(count: u64) -> bool {
    predicate(&COUNT_IN_RANGE, true, |p| {
        // SAFETY: the original, `bool f(uint64_t)`.
        let f =
            unsafe { core::mem::transmute::<*mut c_void, unsafe extern "C" fn(u64) -> bool>(p) };
        // SAFETY: plain value argument.
        unsafe { f(count) }
    })
}

/// `bool atb::Runner::IsSaveTensor() const` hook (`false` while enabled: ATB's own dump is
/// skipped).
///
/// # Safety
/// libatb's contract: `this` is a live runner.
pub unsafe fn is_save_tensor(this: *const c_void) -> bool {
    predicate(&IS_SAVE, false, |p| {
        // SAFETY: the original, `bool f(const Runner *)`.
        let f = unsafe {
            core::mem::transmute::<*mut c_void, unsafe extern "C" fn(*const c_void) -> bool>(p)
        };
        // SAFETY: forwarding `this`.
        unsafe { f(this) }
    })
}

#[cfg(test)]
mod tests {
    use super::sym;

    #[test]
    fn mangled_names_differ_between_abis_only_where_a_string_appears() {
        assert!(sym::SAVE_LAUNCH_PARAM_0.ends_with("RKSs"));
        assert!(sym::SAVE_LAUNCH_PARAM_1.contains("__cxx11"));
        assert!(sym::IS_TENSOR_NEED_SAVE_1
            .starts_with(&sym::IS_TENSOR_NEED_SAVE_0[..sym::IS_TENSOR_NEED_SAVE_0.len() - 4]));
        assert!(!sym::EXECUTE.contains("cxx11"));
    }
}
