//! In-process half: the functions registered into msTX front ends by [`init_injection`]
//! (exported as `InitInjectionMstx` by the probe through [`crate::export_hooks!`]).
//!
//! All are ordinary (mangled, non-exported) `extern "C"` functions: front ends receive them as
//! pointers, so nothing here becomes a dynamic symbol of a binary that merely links this crate.
//! Each is panic-free by construction and additionally wrapped in `catch_unwind`.

use crate::ffi::{
    FuncTable, GetModuleFuncTable, MemHeapDesc, MemRegionRef, MemRegionsRegisterBatch,
    MemRegionsUnregisterBatch, MemVirtualRangeDesc, Slot, MODULE_CORE, MODULE_CORE_DOMAIN,
    MODULE_CORE_MEM, MSTX_FAIL, MSTX_SUCCESS,
};
use crate::SOURCE;
use core::ffi::{c_char, c_int, c_uint, c_void};
use core::ptr::null_mut;
use core::sync::atomic::{AtomicU64, Ordering};
use memscope_runtime as rt;
use memscope_wire::{MstxPool, Record};
use std::sync::OnceLock;

/// Next range id: process-wide, from 1 (abi.md §1.6).
static NEXT_RANGE: AtomicU64 = AtomicU64::new(1);

/// The pools of every pool adapter (their `MSTX_POOLS`), as the probe's registration list hands
/// them to [`init_injection`]; set once, before any domain is created.
static POOLS: OnceLock<&'static [&'static [MstxPool]]> = OnceLock::new();

/// Domain handles: the address of byte `pool` (the pool number) of this static, so a handle is
/// stable per pool name on every create, valid process-wide and through every front-end copy,
/// and maps back to its pool by subtraction (no table, no lock). Index 0 is never handed out.
static DOMAIN_TAGS: [u8; 256] = [0; 256];

fn guarded<R>(default: R, f: impl FnOnce() -> R) -> R {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or(default)
}

/// The pool declarations the hooks know (none before [`init_injection`]).
pub fn pools() -> &'static [&'static [MstxPool]] {
    POOLS.get().copied().unwrap_or(&[])
}

/// The handle of pool number `pool`'s domain.
pub fn domain_handle(pool: u8) -> *mut c_void {
    DOMAIN_TAGS.as_ptr().wrapping_add(usize::from(pool)) as *mut c_void
}

/// The pool a domain handle stands for (`None` for NULL, foreign or unknown handles).
pub fn pool_of(domain: *mut c_void) -> Option<&'static MstxPool> {
    let off = (domain as usize).wrapping_sub(DOMAIN_TAGS.as_ptr() as usize);
    if (1..DOMAIN_TAGS.len()).contains(&off) {
        MstxPool::by_number(pools(), off as u8)
    } else {
        None
    }
}

/// Writes `entries` (function id, function) into module `module`'s table. A slot `i` is written
/// only if `1 ≤ i < outSize` and `outTable[i]` is non-NULL (abi.md §1.5 Rec).
///
/// # Safety
/// `get` is the front end's `getModuleFuncTable`.
unsafe fn fill(get: GetModuleFuncTable, module: c_int, entries: &[(u32, Slot)]) -> bool {
    let mut table: FuncTable = null_mut();
    let mut size: c_uint = 0;
    // SAFETY: calling the front end's table getter with valid out-pointers (protocol step 6).
    if unsafe { get(module, &mut table, &mut size) } != MSTX_SUCCESS || table.is_null() {
        return false;
    }
    for &(i, f) in entries {
        if i >= 1 && i < size {
            // SAFETY: `table` has `size + 1` entries (protocol step 6); `i < size`.
            let slot = unsafe { *table.add(i as usize) };
            if !slot.is_null() {
                // SAFETY: `slot` is the address of the front end's slot `i`. Other threads of
                // that front end wait for its init to complete before reading slots.
                unsafe { slot.write_volatile(f) };
            }
        }
    }
    true
}

type MarkFn = unsafe extern "C" fn(*const c_char, *mut c_void);
type RangeStartFn = unsafe extern "C" fn(*const c_char, *mut c_void) -> u64;
type RangeEndFn = unsafe extern "C" fn(u64);
type DomainCreateFn = unsafe extern "C" fn(*const c_char) -> *mut c_void;
type DomainMarkFn = unsafe extern "C" fn(*mut c_void, *const c_char, *mut c_void);
type DomainRangeStartFn = unsafe extern "C" fn(*mut c_void, *const c_char, *mut c_void) -> u64;
type DomainRangeEndFn = unsafe extern "C" fn(*mut c_void, u64);
type HeapRegisterFn = unsafe extern "C" fn(*mut c_void, *const MemHeapDesc) -> *mut c_void;
type HeapUnregisterFn = unsafe extern "C" fn(*mut c_void, *mut c_void);
type RegionsRegisterFn = unsafe extern "C" fn(*mut c_void, *const MemRegionsRegisterBatch);
type RegionsUnregisterFn = unsafe extern "C" fn(*mut c_void, *const MemRegionsUnregisterBatch);

/// `InitInjectionMstx(getFuncTable)` (abi.md §1.5). Idempotent and thread-safe: it keeps no
/// state of its own (handles and range ids are process-global statics), so every front-end
/// copy, concurrently or not, gets the same functions. Registers CORE 1–3 (MarkA, RangeStartA,
/// RangeEnd), CORE_DOMAIN 1 and 3–5 (DomainCreateA, DomainMarkA, DomainRangeStartA,
/// DomainRangeEnd), CORE_MEM 1–4. GetToolId (CORE 4) is left unfilled like msMemScope, so
/// programs see `mstxGetToolId → 0` exactly as under msMemScope; DomainDestroy (CORE_DOMAIN 2)
/// too (handles are static). Never calls msTX (the front end would spin on itself). Returns 0
/// (`MSTX_SUCCESS`) even when a module table is missing — returning 1 would make the front end
/// drop every slot — and 1 only for a NULL `getFuncTable`.
///
/// `pools` are the pool declarations of every pool adapter (the probe's registration list); the
/// first call's are kept.
///
/// # Safety
/// `get` is NULL or a front end's `getModuleFuncTable` following abi.md §1.5.
pub unsafe fn init_injection(
    get: Option<GetModuleFuncTable>,
    pools: &'static [&'static [MstxPool]],
) -> c_int {
    guarded(MSTX_FAIL, || {
        let _ = POOLS.set(pools);
        let Some(get) = get else { return MSTX_FAIL };
        let core: [(u32, Slot); 3] = [
            (1, mark_a as MarkFn as Slot),
            (2, range_start_a as RangeStartFn as Slot),
            (3, range_end as RangeEndFn as Slot),
        ];
        let domain: [(u32, Slot); 4] = [
            (1, domain_create_a as DomainCreateFn as Slot),
            (3, domain_mark_a as DomainMarkFn as Slot),
            (4, domain_range_start_a as DomainRangeStartFn as Slot),
            (5, domain_range_end as DomainRangeEndFn as Slot),
        ];
        let mem: [(u32, Slot); 4] = [
            (1, mem_heap_register as HeapRegisterFn as Slot),
            (2, mem_heap_unregister as HeapUnregisterFn as Slot),
            (3, mem_regions_register as RegionsRegisterFn as Slot),
            (4, mem_regions_unregister as RegionsUnregisterFn as Slot),
        ];
        // SAFETY: `get` is the front end's getter (caller contract).
        unsafe {
            fill(get, MODULE_CORE, &core);
            fill(get, MODULE_CORE_DOMAIN, &domain);
            fill(get, MODULE_CORE_MEM, &mem);
        }
        MSTX_SUCCESS
    })
}

/// Tells the collector the thread's runtime device for the msTX row stamped `ts` that follows
/// (msMemScope asks the runtime for the current device of every event it reports; a query,
/// whatever adapters are selected). Called under the reentrancy guard, so driver memory the
/// runtime might touch meanwhile is not reported.
fn note_device(ts: u64) {
    rt::note_thread_device(ts, memscope_runtime::current_device::current_logical(ts));
}

/// Message bytes and the NULL flag of a C message.
///
/// # Safety
/// `msg` is NULL or a NUL-terminated string valid for the call.
unsafe fn message<'a>(msg: *const c_char) -> (&'a [u8], bool) {
    // SAFETY: forwarded contract.
    match unsafe { rt::c_text(msg) } {
        Some(b) => (b, false),
        None => (b"", true),
    }
}

/// `mstxMarkA(message, stream)`: records `Mark` when the mstx adapter is enabled. A NULL message
/// is accepted (recorded with `null = true`).
///
/// # Safety
/// `msg` is NULL or a NUL-terminated string.
pub unsafe extern "C" fn mark_a(msg: *const c_char, stream: *mut c_void) {
    let raw = msg;
    guarded((), || {
        rt::safe_point();
        let (enabled, listening) = (rt::enabled(SOURCE), crate::sanitizer::listening());
        if !enabled && !listening {
            return;
        }
        // SAFETY: caller contract.
        let (msg, null) = unsafe { message(raw) };
        if enabled {
            if let Some(_g) = rt::enter() {
                let ts = rt::now_ns();
                note_device(ts);
                rt::record_mark(ts, stream as u64, msg, null);
            }
        }
        // after the guard: the listener (Python) may allocate and mark like the job
        if listening {
            // SAFETY: `raw` is the caller's message, valid for the call (caller contract).
            unsafe { crate::sanitizer::route(msg, raw, stream) };
        }
    })
}

/// `mstxRangeStartA(message, stream)`: while recording, takes the next process-wide range id
/// (from 1), records `RangeStart` and returns the id; returns 0 (msTX "invalid") when not
/// recording, as msMemScope does.
///
/// # Safety
/// `msg` is NULL or a NUL-terminated string.
pub unsafe extern "C" fn range_start_a(msg: *const c_char, stream: *mut c_void) -> u64 {
    guarded(0, || {
        rt::safe_point();
        if !rt::enabled(SOURCE) {
            return 0;
        }
        let id = NEXT_RANGE.fetch_add(1, Ordering::Relaxed);
        if let Some(_g) = rt::enter() {
            // SAFETY: caller contract.
            let (msg, null) = unsafe { message(msg) };
            let ts = rt::now_ns();
            note_device(ts);
            rt::record_range_start(ts, id, stream as u64, msg, null);
        }
        id
    })
}

/// `mstxRangeEnd(id)`: records `RangeEnd` while recording.
///
/// # Safety
/// None (unsafe only for the C signature).
pub unsafe extern "C" fn range_end(id: u64) {
    guarded((), || {
        rt::safe_point();
        if !rt::enabled(SOURCE) {
            return;
        }
        let Some(_g) = rt::enter() else { return };
        let ts = rt::now_ns();
        note_device(ts);
        rt::record(&Record::RangeEnd { ts, id });
    })
}

/// `mstxDomainCreateA(name)`: handled whether or not recording is on (frameworks create domains
/// at start-up). Pool domains (`ptaCaching` ≡ `msleaks`, `ptaWorkspace`, `mindsporeMemPool`,
/// `atb`) get a stable handle on every create; any other name (or NULL) gets NULL, i.e. the
/// global domain, as under msMemScope.
///
/// # Safety
/// `name` is NULL or a NUL-terminated string.
pub unsafe extern "C" fn domain_create_a(name: *const c_char) -> *mut c_void {
    guarded(null_mut(), || {
        // SAFETY: caller contract.
        let (name, _) = unsafe { message(name) };
        MstxPool::for_domain(pools(), name).map_or(null_mut(), |p| domain_handle(p.pool))
    })
}

/// `mstxDomainMarkA(domain, message, stream)`: a mark (the domain is not recorded).
///
/// # Safety
/// As [`mark_a`].
pub unsafe extern "C" fn domain_mark_a(
    _domain: *mut c_void,
    msg: *const c_char,
    stream: *mut c_void,
) {
    // SAFETY: forwarded contract.
    unsafe { mark_a(msg, stream) }
}

/// `mstxDomainRangeStartA(domain, message, stream)`: as [`range_start_a`].
///
/// # Safety
/// As [`range_start_a`].
pub unsafe extern "C" fn domain_range_start_a(
    _domain: *mut c_void,
    msg: *const c_char,
    stream: *mut c_void,
) -> u64 {
    // SAFETY: forwarded contract.
    unsafe { range_start_a(msg, stream) }
}

/// `mstxDomainRangeEnd(domain, id)`: as [`range_end`].
///
/// # Safety
/// None.
pub unsafe extern "C" fn domain_range_end(_domain: *mut c_void, id: u64) {
    // SAFETY: no contract.
    unsafe { range_end(id) }
}

/// `mstxMemHeapRegister(domain, desc)`: returns the heap base pointer as the handle (NULL for a
/// non-pool domain or a NULL descriptor). Records `HeapRegister` when the pool's adapter is
/// *selected*, inside or outside collection windows: heap records are pool state (msMemScope
/// keeps them while tracing is off and emits no row for them), so the collector can keep the
/// reserved totals right across windows.
///
/// # Safety
/// `desc` is NULL or a valid `mstxMemHeapDesc_t` whose `typeSpecificDesc` is NULL or a valid
/// `mstxMemVirtualRangeDesc_t`.
pub unsafe extern "C" fn mem_heap_register(
    domain: *mut c_void,
    desc: *const MemHeapDesc,
) -> *mut c_void {
    guarded(null_mut(), || {
        rt::safe_point();
        let Some(pool) = pool_of(domain) else {
            return null_mut();
        };
        if desc.is_null() {
            return null_mut();
        }
        // SAFETY: caller contract.
        let d = unsafe { desc.read() };
        let range = d.type_specific_desc as *const MemVirtualRangeDesc;
        if range.is_null() {
            return null_mut();
        }
        // SAFETY: caller contract.
        let r = unsafe { range.read() };
        if rt::selected(pool.source) {
            if let Some(_g) = rt::enter() {
                rt::record(&Record::HeapRegister {
                    ts: rt::now_ns(),
                    pool: pool.pool,
                    device: r.device_id,
                    ptr: r.ptr as u64,
                    size: r.size,
                });
            }
        }
        r.ptr as *mut c_void
    })
}

/// `mstxMemHeapUnregister(domain, heap)`: records `HeapUnregister{ptr = heap}` for a non-NULL
/// heap of a pool domain (gated like [`mem_heap_register`]).
///
/// # Safety
/// None beyond the C signature.
pub unsafe extern "C" fn mem_heap_unregister(domain: *mut c_void, heap: *mut c_void) {
    guarded((), || {
        rt::safe_point();
        let Some(pool) = pool_of(domain) else { return };
        if heap.is_null() || !rt::selected(pool.source) {
            return;
        }
        if let Some(_g) = rt::enter() {
            rt::record(&Record::HeapUnregister {
                ts: rt::now_ns(),
                pool: pool.pool,
                ptr: heap as u64,
            });
        }
    })
}

/// `mstxMemRegionsRegister(domain, batch)`: for each region, writes
/// `regionHandleArrayOut[i] = ptr` when the array is non-NULL (so HANDLE-type unregister refs
/// are the block addresses; done whether or not recording), and records one `RegionRegister`
/// per region while the pool's adapter is selected (outside a window as shadow records).
///
/// # Safety
/// `batch` is NULL or valid, with `regionCount` readable descriptors and, if non-NULL, a
/// writable `regionHandleArrayOut` of `regionCount` entries.
pub unsafe extern "C" fn mem_regions_register(
    domain: *mut c_void,
    batch: *const MemRegionsRegisterBatch,
) {
    guarded((), || {
        rt::safe_point();
        let Some(pool) = pool_of(domain) else { return };
        if batch.is_null() {
            return;
        }
        // SAFETY: caller contract.
        let b = unsafe { batch.read() };
        let descs = b.region_desc_array as *const MemVirtualRangeDesc;
        if descs.is_null() {
            return;
        }
        // blocks are recorded outside collection windows too, as shadow records (`rt::tracking`)
        let mut guard = if rt::tracking(pool.source) {
            rt::enter()
        } else {
            None
        };
        let ts = rt::now_ns();
        for i in 0..b.region_count {
            // SAFETY: caller contract: `region_count` readable descriptors.
            let r = unsafe { descs.add(i).read() };
            if !b.region_handle_array_out.is_null() {
                // SAFETY: caller contract: a writable output array of `region_count` handles.
                unsafe { b.region_handle_array_out.add(i).write(r.ptr as *mut c_void) };
            }
            if let Some(g) = guard.as_mut() {
                // a pool block carries the caller's C stack (`--call-stack c:N`)
                rt::record_with_stack(
                    g,
                    &Record::RegionRegister {
                        ts,
                        pool: pool.pool,
                        device: r.device_id,
                        ptr: r.ptr as u64,
                        size: r.size,
                    },
                );
            }
        }
    })
}

/// `mstxMemRegionsUnregister(domain, batch)`: one `RegionUnregister` per ref while the pool's
/// adapter is selected (outside a window as shadow records). The ref's pointer/handle union is read
/// as the block address whatever `refType` says (this probe's region handles are the addresses).
///
/// # Safety
/// `batch` is NULL or valid, with `refCount` readable refs.
pub unsafe extern "C" fn mem_regions_unregister(
    domain: *mut c_void,
    batch: *const MemRegionsUnregisterBatch,
) {
    guarded((), || {
        rt::safe_point();
        let Some(pool) = pool_of(domain) else { return };
        if batch.is_null() || !rt::tracking(pool.source) {
            return;
        }
        // SAFETY: caller contract.
        let b = unsafe { batch.read() };
        if b.ref_array.is_null() {
            return;
        }
        let Some(_g) = rt::enter() else { return };
        let ts = rt::now_ns();
        for i in 0..b.ref_count {
            // SAFETY: caller contract: `ref_count` readable refs.
            let r: MemRegionRef = unsafe { b.ref_array.add(i).read() };
            rt::record(&Record::RegionUnregister {
                ts,
                pool: pool.pool,
                ptr: r.pointer_or_handle as u64,
            });
        }
    })
}
