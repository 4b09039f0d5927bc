//! Framework pool accounting: msTX memory-domain records → MALLOC/FREE events of the
//! `PTA`, `PTA_WORKSPACE`, `MindSpore` and `ATB` Event Types (abi.md §1.6, behaviour spec §6–§7).
//!
//! The mstx adapter's hooks in the probe turn heap and region calls of the pool domains into
//! [`Record::HeapRegister`], [`Record::HeapUnregister`], [`Record::RegionRegister`] (one per
//! region of a batch) and [`Record::RegionUnregister`] (HANDLE refs already resolved to the
//! region address). The pool adapter crates (`adapters/pta`, `adapters/mindspore`,
//! `adapters/atb`) each run a [`PoolTyper`] restricted to their own pools; this module holds the
//! shared bookkeeping.
//!
//! Rules, per pool and *physical* device (the logical id of the range descriptor mapped through
//! `ASCEND_RT_VISIBLE_DEVICES`):
//!
//! * `total` (bytes reserved) is the **sum** of the sizes of the live heaps. msMemScope
//!   overwrites the figure with the size of the last heap registered for PTA and MindSpore
//!   (`reserved[dev] = size`) and never forgets an unregistered heap; we do not copy that quirk:
//!   a pool that reserves two segments reports both, and an unregistered heap leaves the sum.
//! * `used` (bytes handed out) is the running sum of the sizes of the live regions, for every
//!   pool. msMemScope *replaces* it with the last block's size for the workspace pool; we sum
//!   there too, so `used` is always the live bytes of the pool.
//! * `used` and `total` on a row are the figures *after* the event.
//! * A region registered on an address that is still live in the same pool is reported like
//!   msMemScope's RESIDUAL_BLOCK clean-up: a warning, a synthetic FREE of the old block
//!   (`shadow:true`), then the new MALLOC.
//! * An unregister of an address that is not live gives a warning and no row (msMemScope keeps
//!   freed PTA entries and emits FREE again on a repeated unregister; we do not).
//! * Regions are accepted whether or not the pool registered a heap on that device (msMemScope
//!   skips such ATB regions; we keep them, with `total` 0, so no block goes unseen).
//! * Blocks still live when the process ends get no FREE: "still live at exit" is what leak
//!   reports look for.
//!
//! Arithmetic saturates (u64, written as i64 clamped to `i64::MAX`) where msMemScope keeps the
//! old value on int64 overflow; both only matter for nonsensical sizes.

use crate::adapter::{TypeCtx, Typer};
use memscope_core::event::{Attrs, Device, Event, EventKind, EventType, MemoryAttrs};
use memscope_core::owner::OwnerChain;
use memscope_wire::{MstxPool, Record};
use std::collections::HashMap;

/// The msTX calls a pool adapter consumes, as listed by `memscope adapters list`: the mstx
/// adapter's `InitInjectionMstx` fills their slots and records the calls on pool domains
/// (abi.md §1.4–§1.6).
pub const MSTX_POOL_SYMBOLS: &[&str] = &[
    "mstxDomainCreateA",
    "mstxMemHeapRegister",
    "mstxMemHeapUnregister",
    "mstxMemRegionsRegister",
    "mstxMemRegionsUnregister",
];

/// A pool as a typer keeps it: its number (the `pool` of the heap and region records) and the
/// Event Type of its rows, from the owning adapter's [`MstxPool`] declaration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Pool {
    /// Pool number.
    pub number: u8,
    /// Event Type of its MALLOC/FREE rows (`PTA`, `PTA_WORKSPACE`, `MindSpore`, `ATB`, …).
    pub event_type: EventType,
}

impl Pool {
    /// The pool `decl` declares; `None` when its Event Type is not one memscope writes.
    pub fn from_decl(decl: &MstxPool) -> Option<Pool> {
        Some(Pool {
            number: decl.pool,
            event_type: EventType::parse(decl.event_type)?,
        })
    }
}

/// The Event Type of a pool's MALLOC/FREE rows.
fn event_type(pool: Pool) -> EventType {
    pool.event_type
}

/// The framework level of the `owner` chain of a pool's MALLOC rows (behaviour spec §7; spelled
/// like the Event Type, so MindSpore is `MindSpore`, not msMemScope's `MINDSPORE`).
fn framework_label(pool: Pool) -> &'static str {
    pool.event_type.as_str()
}

/// A block handed out by a pool and not yet given back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LiveRegion {
    /// Physical device id (already mapped through `ASCEND_RT_VISIBLE_DEVICES`).
    pub device: u32,
    /// Block size in bytes.
    pub size: u64,
    /// `allocation_id` given to the block's MALLOC row.
    pub allocation_id: u64,
}

/// A heap (segment) a pool reserved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Heap {
    device: u32,
    size: u64,
}

/// Heap and region state of every pool of one process, and the event rows derived from it.
/// Keys are (pool, address) for heaps and regions and (pool, physical device) for the figures.
#[derive(Debug, Default)]
pub struct PoolAccounting {
    heaps: HashMap<(Pool, u64), Heap>,
    regions: HashMap<(Pool, u64), LiveRegion>,
    reserved: HashMap<(Pool, u32), u64>,
    allocated: HashMap<(Pool, u32), u64>,
    /// User owner levels given to live blocks after their MALLOC (`describer(addr, owner=…)`).
    tags: HashMap<(Pool, u64), String>,
}

/// Clamps a byte count into the `i64` of [`MemoryAttrs`].
fn as_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

impl PoolAccounting {
    /// Empty state.
    pub fn new() -> PoolAccounting {
        PoolAccounting::default()
    }

    /// Bytes `pool` has reserved on physical `device` (sum of its live heaps).
    pub fn total(&self, pool: Pool, device: u32) -> u64 {
        self.reserved.get(&(pool, device)).copied().unwrap_or(0)
    }

    /// Bytes `pool` has handed out on physical `device` (sum of its live regions).
    pub fn used(&self, pool: Pool, device: u32) -> u64 {
        self.allocated.get(&(pool, device)).copied().unwrap_or(0)
    }

    /// The live region of `pool` at `addr`, if any.
    pub fn live(&self, pool: Pool, addr: u64) -> Option<LiveRegion> {
        self.regions.get(&(pool, addr)).copied()
    }

    /// Number of live regions over every pool.
    pub fn live_count(&self) -> usize {
        self.regions.len()
    }

    /// `mstxMemHeapRegister`: `pool` reserved `size` bytes at `ptr` on logical device `device`.
    /// No row. A second register of a live heap base replaces it (with a warning).
    pub fn heap_register(
        &mut self,
        ctx: &mut TypeCtx,
        pool: Pool,
        device: u32,
        ptr: u64,
        size: u64,
    ) {
        let device = ctx.map_device(device);
        if let Some(old) = self.heaps.insert((pool, ptr), Heap { device, size }) {
            ctx.warn(format!(
                "{}: heap 0x{ptr:x} registered again without unregister; replacing it",
                framework_label(pool)
            ));
            self.sub_reserved(pool, old);
        }
        let r = self.reserved.entry((pool, device)).or_default();
        *r = r.saturating_add(size);
    }

    /// `mstxMemHeapUnregister`: `pool` released the heap whose handle (base address) is `ptr`.
    /// No row; an unknown heap gives a warning.
    pub fn heap_unregister(&mut self, ctx: &mut TypeCtx, pool: Pool, ptr: u64) {
        match self.heaps.remove(&(pool, ptr)) {
            Some(h) => self.sub_reserved(pool, h),
            None => ctx.warn(format!(
                "{}: unregister of unknown heap 0x{ptr:x} ignored",
                framework_label(pool)
            )),
        }
    }

    fn sub_reserved(&mut self, pool: Pool, h: Heap) {
        let r = self.reserved.entry((pool, h.device)).or_default();
        *r = r.saturating_sub(h.size);
    }

    /// One region of `mstxMemRegionsRegister`: pushes a MALLOC row for `[ptr, ptr+size)` on
    /// logical `device`, made by thread `tid` at `ts` (ns since the epoch). The owner chain is
    /// the pool's framework level followed by the thread's owner labels. A live block at `ptr`
    /// is first closed with a synthetic FREE (see the module docs).
    #[allow(clippy::too_many_arguments)]
    pub fn region_register(
        &mut self,
        ctx: &mut TypeCtx,
        tid: u32,
        ts: u64,
        pool: Pool,
        device: u32,
        ptr: u64,
        size: u64,
        out: &mut Vec<Event>,
    ) {
        let device = ctx.map_device(device);
        if self.regions.contains_key(&(pool, ptr)) {
            ctx.warn(format!(
                "{}: double malloc at 0x{ptr:x}: the live block is closed with a synthetic FREE",
                framework_label(pool)
            ));
            if let Some(mut ev) = self.free_row(ctx, tid, ts, pool, ptr) {
                if let Some(m) = ev.memory_mut() {
                    m.shadow = true;
                }
                out.push(ev);
            }
        }
        let allocation_id = ctx.next_allocation_id();
        self.tags.remove(&(pool, ptr));
        self.regions.insert(
            (pool, ptr),
            LiveRegion {
                device,
                size,
                allocation_id,
            },
        );
        let a = self.allocated.entry((pool, device)).or_default();
        *a = a.saturating_add(size);
        let mut owner = OwnerChain::framework(framework_label(pool));
        for label in ctx.owner_labels(tid) {
            owner.push(label);
        }
        let mut ev = Event::new(event_type(pool), ts, ctx.pid, tid);
        ev.kind = EventKind::Malloc;
        ev.device = Device::Npu(device);
        ev.ptr = Some(ptr);
        ev.attrs = Attrs::Memory(MemoryAttrs {
            allocation_id,
            addr: ptr,
            size,
            used: Some(as_i64(self.used(pool, device))),
            total: Some(as_i64(self.total(pool, device))),
            owner: Some(owner),
            ..MemoryAttrs::default()
        });
        out.push(ev);
    }

    /// One ref of `mstxMemRegionsUnregister`, resolved to the block address `ptr`: pushes the
    /// FREE row (size, device and `allocation_id` of the MALLOC; no owner unless the block was
    /// tagged after its MALLOC by the Python API's `describer(addr, owner=…)`: then
    /// `owner:<FRAMEWORK>@<label>`). An address that is
    /// not live gives a warning and no row.
    pub fn region_unregister(
        &mut self,
        ctx: &mut TypeCtx,
        tid: u32,
        ts: u64,
        pool: Pool,
        ptr: u64,
        out: &mut Vec<Event>,
    ) {
        match self.free_row(ctx, tid, ts, pool, ptr) {
            Some(ev) => out.push(ev),
            None => ctx.warn(format!(
                "{}: free of unknown block 0x{ptr:x} ignored",
                framework_label(pool)
            )),
        }
    }

    /// Removes the live block at `ptr` and builds its FREE row.
    fn free_row(
        &mut self,
        ctx: &TypeCtx,
        tid: u32,
        ts: u64,
        pool: Pool,
        ptr: u64,
    ) -> Option<Event> {
        let r = self.regions.remove(&(pool, ptr))?;
        let a = self.allocated.entry((pool, r.device)).or_default();
        *a = a.saturating_sub(r.size);
        let owner = self
            .tags
            .remove(&(pool, ptr))
            .map(|t| memscope_core::roles::tagged_chain(event_type(pool), &t));
        let mut ev = Event::new(event_type(pool), ts, ctx.pid, tid);
        ev.kind = EventKind::Free;
        ev.device = Device::Npu(r.device);
        ev.ptr = Some(ptr);
        ev.attrs = Attrs::Memory(MemoryAttrs {
            allocation_id: r.allocation_id,
            addr: ptr,
            size: r.size,
            used: Some(as_i64(self.used(pool, r.device))),
            total: Some(as_i64(self.total(pool, r.device))),
            owner,
            ..MemoryAttrs::default()
        });
        Some(ev)
    }

    /// Applies `rec` if it is a heap or region record of one of `pools`, pushing its rows onto
    /// `out`. Returns whether the record was taken (other pools' records and every other kind of
    /// record are left alone).
    pub fn type_record(
        &mut self,
        pools: &[Pool],
        ctx: &mut TypeCtx,
        tid: u32,
        rec: &Record<Box<[u8]>>,
        out: &mut Vec<Event>,
    ) -> bool {
        let mine = |n: u8| pools.iter().copied().find(|p| p.number == n);
        match *rec {
            Record::HeapRegister {
                pool,
                device,
                ptr,
                size,
                ..
            } => match mine(pool) {
                Some(pool) => self.heap_register(ctx, pool, device, ptr, size),
                None => return false,
            },
            Record::HeapUnregister { pool, ptr, .. } => match mine(pool) {
                Some(pool) => self.heap_unregister(ctx, pool, ptr),
                None => return false,
            },
            Record::RegionRegister {
                ts,
                pool,
                device,
                ptr,
                size,
            } => match mine(pool) {
                Some(pool) => self.region_register(ctx, tid, ts, pool, device, ptr, size, out),
                None => return false,
            },
            Record::RegionUnregister { ts, pool, ptr } => match mine(pool) {
                Some(pool) => self.region_unregister(ctx, tid, ts, pool, ptr, out),
                None => return false,
            },
            // `describer(addr, owner=…)` of the Python API, or a framework hook's role tag: a
            // live block starting at `addr`. A new chain is written as a `MEMORY_OWNER` row.
            Record::OwnerTag {
                ts,
                addr,
                ref label,
            } => {
                let Some((pool, r)) = pools
                    .iter()
                    .find_map(|p| self.regions.get(&(*p, addr)).map(|r| (*p, *r)))
                else {
                    return false;
                };
                let label = String::from_utf8_lossy(label).into_owned();
                if self.tags.get(&(pool, addr)) != Some(&label) {
                    let tag = memscope_core::roles::OwnerTag {
                        pool: event_type(pool),
                        device: Device::Npu(r.device),
                        addr,
                        allocation_id: r.allocation_id,
                        size: r.size,
                        owner: memscope_core::roles::tagged_chain(event_type(pool), &label)
                            .to_string(),
                    };
                    out.push(tag.to_event(ts, ctx.pid, tid));
                    self.tags.insert((pool, addr), label);
                }
            }
            _ => return false,
        }
        true
    }
}

/// A [`Typer`] for the pools one adapter declares: the typer of the PTA adapter is
/// `PoolTyper::new(MSTX_POOLS)` with the pools of `adapters/pta`, and so on. Records of other pools return
/// `false` so another adapter's typer gets them.
#[derive(Debug)]
pub struct PoolTyper {
    pools: Vec<Pool>,
    acct: PoolAccounting,
}

impl PoolTyper {
    /// A typer that takes the records of the pools `decls` declares only.
    pub fn new(decls: &[MstxPool]) -> PoolTyper {
        PoolTyper {
            pools: decls.iter().filter_map(Pool::from_decl).collect(),
            acct: PoolAccounting::new(),
        }
    }

    /// The pools this typer takes.
    pub fn pools(&self) -> &[Pool] {
        &self.pools
    }

    /// The accounting state (figures and live blocks).
    pub fn accounting(&self) -> &PoolAccounting {
        &self.acct
    }
}

impl Typer for PoolTyper {
    fn type_record(
        &mut self,
        ctx: &mut TypeCtx,
        tid: u32,
        rec: &Record<Box<[u8]>>,
        out: &mut Vec<Event>,
    ) -> bool {
        self.acct.type_record(&self.pools, ctx, tid, rec, out)
    }
}

#[cfg(test)]
mod tests;
