//! Collector-side half: HAL records → `MALLOC`/`FREE` rows of Event Type `HAL` (or `HOST`),
//! and out-of-memory records → the `OOM_Snapshot` row plus placeholders for the OOM detail
//! rows that [`crate::oom`] fills in. Safe code only.
//!
//! Rules (behaviour spec §5.2, §6, §7; abi.md §2; where we differ from msMemScope it says so):
//! * Device: flag bits 0–9 (`halMemAlloc`) or `drv_mem_prop.devid` (`halMemCreate`), mapped
//!   through `ASCEND_RT_VISIBLE_DEVICES` as the issue asks (msMemScope does not map HAL ids).
//!   Memory type HOST (flag bits 10–13 = 2) makes the row `HOST` on device `cpu`.
//! * Attr of a MALLOC: `allocation_id`, `addr`, `size`, `used` (this process's live HAL bytes
//!   on the row's device after the event), `owner` (`CANN@<MODULE>` from the module id, then
//!   the thread's owner labels), `page_type` (from the flag bits on both paths, see
//!   [`crate::flags::create_page_type`]; msMemScope always writes `normal` for `halMemAlloc`),
//!   `alloc_type` (`alloc` or `create`). `process_used`/`device_used` are left out: we make no
//!   DCMI queries per event (msMemScope makes two).
//! * Attr of a FREE: `allocation_id`, `addr`, `size` (of the MALLOC), `used`.
//! * A free of an address that is not live is not written; it gives a log warning (msMemScope
//!   ignores it silently), and so does a free the driver refused (double free, bogus pointer).
//!   A successful allocation at a live address closes the old block with a synthetic FREE
//!   (`shadow:true`) first, like msMemScope's RESIDUAL_BLOCK clean-up.
//! * Blocks still live at exit get no FREE row (leak reports look for them).

use crate::flags::{self, MemType};
use crate::wire::HalRecord;
use memscope_collect::adapter::{TypeCtx, Typer};
use memscope_core::event::{
    AllocType, Attrs, Device, Event, EventKind, EventType, MemoryAttrs, PageType,
};
use memscope_core::owner::OwnerChain;
use memscope_wire::Record;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};

/// `Name` of the snapshot row written on a HAL out-of-memory failure (behaviour spec §6).
pub const OOM_SNAPSHOT: &str = "OOM_Snapshot";
/// Attr key of the OOM snapshot row naming the failing call; the OOM layer recognises the row
/// by it and replaces the Attr with the snapshot figures.
pub const OOM_FUNC_KEY: &str = "func";

/// K of `--analysis oom:K` for typers created from now on (0: off). Set by
/// [`crate::oom::OomLayer::new`] in the collector, which builds a process's layers before its
/// typers; the typer reserves rows for the OOM detail by emitting placeholders (see
/// [`HalTyper`]).
static OOM_TOP_K: AtomicU32 = AtomicU32::new(0);

/// Sets the K of `--analysis oom:K` (`None`: the analysis is off) for typers built afterwards.
pub fn set_oom_top_k(k: Option<u32>) {
    OOM_TOP_K.store(k.unwrap_or(0), Ordering::Relaxed);
}

/// `Event/Event Type` pairs this adapter produces.
pub const EVENTS: &[&str] = &[
    "MALLOC/HAL",
    "FREE/HAL",
    "MALLOC/HOST",
    "FREE/HOST",
    "SNAPSHOT/SNAPSHOT",
    "OOM_DETAIL/OOM_TRIGGER",
    "OOM_DETAIL/OOM_RECENT_ALLOC",
    "OOM_DETAIL/OOM_TOP_ALLOC",
];

/// Builds a fresh typer (for the adapter descriptor).
pub fn new_typer() -> Box<dyn Typer> {
    Box::new(HalTyper::with_top_k(OOM_TOP_K.load(Ordering::Relaxed)))
}

/// A live HAL block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Block {
    device: Device,
    event_type: EventType,
    size: u64,
    allocation_id: u64,
}

/// Who made a record, and when.
#[derive(Clone, Copy, Debug)]
struct At {
    tid: u32,
    ts: u64,
}

/// A successful allocation, decoded.
#[derive(Clone, Copy, Debug)]
struct Alloc {
    create: bool,
    addr: u64,
    size: u64,
    device: Device,
    event_type: EventType,
    module: u32,
    page: PageType,
}

/// Per-process typer of the HAL records. Keys are (`create` path, address or handle).
///
/// On a `HalOom` record it emits the `SNAPSHOT` row named [`OOM_SNAPSHOT`] (Attr: `func`,
/// `req_size`, `flag`, and `total`/`free` when the runtime reported them) and, when
/// `--analysis oom:K` is on, one `OOM_TRIGGER` row and K `OOM_RECENT_ALLOC` plus K
/// `OOM_TOP_ALLOC` placeholders with an empty Attr. The OOM layer fills the placeholders with
/// the live blocks of every pool and drops the ones it cannot fill, so the rows get their IDs
/// from the collector in order (IDs may have gaps, as in msMemScope).
#[derive(Debug, Default)]
pub struct HalTyper {
    live: HashMap<(bool, u64), Block>,
    used: HashMap<Device, u64>,
    top_k: u32,
}

fn as_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

impl HalTyper {
    /// A typer that reserves `top_k` recent and `top_k` largest OOM detail rows (0: none).
    pub fn with_top_k(top_k: u32) -> HalTyper {
        HalTyper {
            top_k,
            ..HalTyper::default()
        }
    }

    /// Live HAL bytes of this process on `device`.
    pub fn used(&self, device: Device) -> u64 {
        self.used.get(&device).copied().unwrap_or(0)
    }

    /// Number of live blocks.
    pub fn live_count(&self) -> usize {
        self.live.len()
    }

    fn place(ctx: &TypeCtx, flag: u64, device: u32) -> (Device, EventType) {
        if flags::mem_type(flag) == MemType::Host {
            (Device::Cpu, EventType::Host)
        } else {
            (Device::Npu(ctx.map_device(device)), EventType::Hal)
        }
    }

    fn malloc(&mut self, ctx: &mut TypeCtx, at: At, a: Alloc, out: &mut Vec<Event>) {
        let Alloc {
            create,
            addr,
            size,
            device,
            event_type,
            module,
            page,
        } = a;
        let At { tid, ts } = at;
        if self.live.contains_key(&(create, addr)) {
            ctx.warn(format!(
                "HAL: double malloc at 0x{addr:x}: the live block is closed with a synthetic FREE"
            ));
            if let Some(mut ev) = self.free_row(ctx, at, create, addr) {
                if let Some(m) = ev.memory_mut() {
                    m.shadow = true;
                }
                out.push(ev);
            }
        }
        let allocation_id = ctx.next_allocation_id();
        self.live.insert(
            (create, addr),
            Block {
                device,
                event_type,
                size,
                allocation_id,
            },
        );
        let used = self.used.entry(device).or_default();
        *used = used.saturating_add(size);
        let used = as_i64(*used);
        let mut owner = OwnerChain::parse(&flags::owner_framework(module));
        for label in ctx.owner_labels(tid) {
            owner.push(label);
        }
        let mut ev = Event::new(event_type, ts, ctx.pid, tid);
        ev.kind = EventKind::Malloc;
        ev.device = device;
        ev.ptr = Some(addr);
        ev.attrs = Attrs::Memory(MemoryAttrs {
            allocation_id,
            addr,
            size,
            used: Some(used),
            owner: Some(owner),
            page_type: Some(page),
            alloc_type: Some(if create {
                AllocType::Create
            } else {
                AllocType::Alloc
            }),
            ..MemoryAttrs::default()
        });
        out.push(ev);
    }

    fn free_row(&mut self, ctx: &TypeCtx, at: At, create: bool, addr: u64) -> Option<Event> {
        let At { tid, ts } = at;
        let b = self.live.remove(&(create, addr))?;
        let used = self.used.entry(b.device).or_default();
        *used = used.saturating_sub(b.size);
        let mut ev = Event::new(b.event_type, ts, ctx.pid, tid);
        ev.kind = EventKind::Free;
        ev.device = b.device;
        ev.ptr = Some(addr);
        ev.attrs = Attrs::Memory(MemoryAttrs {
            allocation_id: b.allocation_id,
            addr,
            size: b.size,
            used: Some(as_i64(*used)),
            ..MemoryAttrs::default()
        });
        Some(ev)
    }

    fn free(
        &mut self,
        ctx: &mut TypeCtx,
        at: At,
        create: bool,
        addr: u64,
        ret: i32,
        out: &mut Vec<Event>,
    ) {
        let func = if create {
            "halMemRelease"
        } else {
            "halMemFree"
        };
        let known = self.live.contains_key(&(create, addr));
        match (ret, known) {
            (0, true) => out.extend(self.free_row(ctx, at, create, addr)),
            (0, false) => ctx.warn(format!(
                "HAL: {func}(0x{addr:x}): free of an unknown pointer (not allocated while tracing); ignored"
            )),
            (r, true) => ctx.warn(format!(
                "HAL: {func}(0x{addr:x}) failed with driver error {r}; the block stays live"
            )),
            (r, false) => ctx.warn(format!(
                "HAL: {func}(0x{addr:x}) failed with driver error {r}: double free or free of an unknown pointer"
            )),
        }
    }

    fn oom(&self, ctx: &mut TypeCtx, at: At, rec: HalRecord, out: &mut Vec<Event>) {
        let (create, size, flag, device, free, total) = match rec {
            HalRecord::OomAlloc {
                size,
                flag,
                device,
                free,
                total,
                ..
            } => (false, size, flag, device.0, free, total),
            HalRecord::OomCreate {
                size,
                flag,
                device,
                free,
                total,
                ..
            } => (true, size, flag, device.0, free, total),
            _ => return,
        };
        let At { tid, ts } = at;
        let func = if create {
            "halMemCreate"
        } else {
            "halMemAlloc"
        };
        let (device, _) = HalTyper::place(ctx, flag, device);
        let trigger = vec![
            (OOM_FUNC_KEY.to_owned(), func.to_owned()),
            ("req_size".to_owned(), size.to_string()),
            ("flag".to_owned(), flag.to_string()),
        ];
        let mut snap_attrs = trigger.clone();
        if total > 0 {
            snap_attrs.push(("total_mem".to_owned(), total.to_string()));
            snap_attrs.push(("free_mem".to_owned(), free.to_string()));
        } else {
            ctx.warn(format!(
                "OOM_Snapshot ({func} of {size} bytes on device {}): the device's total and free memory could not be obtained (aclrtGetMemInfo is not in the process or failed: no ACL runtime, or no device set on the thread); total_mem, free_mem and device_utilization are written as 0",
                device.to_text()
            ));
        }
        let row = |t: EventType, name: &str, attrs: Vec<(String, String)>| {
            let mut ev = Event::new(t, ts, ctx.pid, tid);
            ev.name = Some(name.to_owned());
            ev.device = device;
            ev.attrs = Attrs::Pairs(attrs);
            ev
        };
        out.push(row(EventType::Snapshot, OOM_SNAPSHOT, snap_attrs));
        if self.top_k == 0 {
            return;
        }
        out.push(row(EventType::OomTrigger, "OOM_Trigger", trigger));
        for (t, name) in [
            (EventType::OomRecentAlloc, "OOM_RecentAlloc"),
            (EventType::OomTopAlloc, "OOM_TopAlloc"),
        ] {
            for _ in 0..self.top_k {
                out.push(row(t, name, Vec::new()));
            }
        }
    }
}

impl Typer for HalTyper {
    fn type_record(
        &mut self,
        ctx: &mut TypeCtx,
        tid: u32,
        rec: &Record<Box<[u8]>>,
        out: &mut Vec<Event>,
    ) -> bool {
        let Some(r) = HalRecord::of(crate::SOURCE, rec) else {
            return false;
        };
        let Some((ts, r)) = ctx.decoded("HAL", r) else {
            return true;
        };
        match r {
            HalRecord::Alloc {
                addr, size, flag, ..
            } => {
                let (device, event_type) = HalTyper::place(ctx, flag, flags::device(flag));
                let page = flags::page_type(flag);
                let a = Alloc {
                    create: false,
                    addr,
                    size,
                    device,
                    event_type,
                    module: flags::module_id(flag),
                    page,
                };
                self.malloc(ctx, At { tid, ts }, a, out);
            }
            HalRecord::Create {
                handle,
                size,
                flag,
                device,
                module,
                page,
                ..
            } => {
                let device = if device.0 == u32::MAX {
                    flags::device(flag)
                } else {
                    device.0
                };
                let module = if module.0 == u32::MAX {
                    flags::module_id(flag)
                } else {
                    module.0
                };
                let (device, event_type) = HalTyper::place(ctx, flag, device);
                let page = flags::create_page_type(flag, page.0);
                let a = Alloc {
                    create: true,
                    addr: handle,
                    size,
                    device,
                    event_type,
                    module,
                    page,
                };
                self.malloc(ctx, At { tid, ts }, a, out);
            }
            HalRecord::Free { addr, ret } => self.free(ctx, At { tid, ts }, false, addr, ret, out),
            HalRecord::Release { addr, ret } => {
                self.free(ctx, At { tid, ts }, true, addr, ret, out)
            }
            HalRecord::OomAlloc { .. } | HalRecord::OomCreate { .. } => {
                self.oom(ctx, At { tid, ts }, r, out)
            }
        }
        true
    }
}

#[cfg(test)]
#[path = "typer_tests.rs"]
mod tests;
