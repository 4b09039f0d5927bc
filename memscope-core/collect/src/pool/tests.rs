//! Unit tests of pool accounting, with hand-computed figures.

use super::*;
use memscope_wire::SourceId;

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const PTA_CACHING: u8 = 1;
const PTA_WORKSPACE: u8 = 2;
const MINDSPORE: u8 = 3;
const ATB_POOL: u8 = 4;
const DECL: [MstxPool; 4] = [
    MstxPool {
        pool: PTA_CACHING,
        domains: &["ptaCaching", "msleaks"],
        source: SourceId(1),
        event_type: "PTA",
    },
    MstxPool {
        pool: PTA_WORKSPACE,
        domains: &["ptaWorkspace"],
        source: SourceId(1),
        event_type: "PTA_WORKSPACE",
    },
    MstxPool {
        pool: MINDSPORE,
        domains: &["mindsporeMemPool"],
        source: SourceId(2),
        event_type: "MindSpore",
    },
    MstxPool {
        pool: ATB_POOL,
        domains: &["atb"],
        source: SourceId(3),
        event_type: "ATB",
    },
];
const PTA: &[MstxPool] = &[DECL[0], DECL[1]];

/// The typer's view of pool `n`.
fn pool(n: u8) -> Pool {
    Pool::from_decl(&DECL[usize::from(n) - 1]).unwrap()
}

fn mem(ev: &Event) -> &MemoryAttrs {
    ev.memory().expect("memory attrs")
}

/// (kind, type, addr, size, allocation_id, used, total, owner) of a row.
type Shape = (
    EventKind,
    EventType,
    u64,
    u64,
    u64,
    i64,
    i64,
    Option<String>,
);

fn shape(ev: &Event) -> Shape {
    let m = mem(ev);
    (
        ev.kind,
        ev.event_type,
        m.addr,
        m.size,
        m.allocation_id,
        m.used.unwrap(),
        m.total.unwrap(),
        m.owner.as_ref().map(ToString::to_string),
    )
}

struct Feed {
    ctx: TypeCtx,
    typer: PoolTyper,
    out: Vec<Event>,
    ts: u64,
}

impl Feed {
    fn new(pools: &'static [MstxPool], visible: Vec<u32>) -> Feed {
        Feed {
            ctx: TypeCtx::new(42, visible),
            typer: PoolTyper::new(pools),
            out: Vec::new(),
            ts: 0,
        }
    }
    fn tick(&mut self) -> u64 {
        self.ts += 1;
        self.ts
    }
    fn rec(&mut self, rec: Record<Box<[u8]>>) -> bool {
        self.typer
            .type_record(&mut self.ctx, 7, &rec, &mut self.out)
    }
    fn heap(&mut self, pool: u8, device: u32, ptr: u64, size: u64) {
        let ts = self.tick();
        assert!(self.rec(Record::HeapRegister {
            ts,
            pool,
            device,
            ptr,
            size
        }));
    }
    fn unheap(&mut self, pool: u8, ptr: u64) {
        let ts = self.tick();
        assert!(self.rec(Record::HeapUnregister { ts, pool, ptr }));
    }
    fn reg(&mut self, pool: u8, device: u32, ptr: u64, size: u64) {
        let ts = self.tick();
        assert!(self.rec(Record::RegionRegister {
            ts,
            pool,
            device,
            ptr,
            size
        }));
    }
    fn unreg(&mut self, pool: u8, ptr: u64) {
        let ts = self.tick();
        assert!(self.rec(Record::RegionUnregister { ts, pool, ptr }));
    }
    fn shapes(&mut self) -> Vec<Shape> {
        self.out.drain(..).map(|e| shape(&e)).collect()
    }
}

use EventKind::{Free as F, Malloc as M};
use EventType::{Pta, PtaWorkspace as Ws};

fn pta(s: &str) -> Option<String> {
    Some(s.to_owned())
}

#[test]
fn pta_script_gives_running_used_and_heap_total_per_pool() {
    // The pool_pta.c script (tests/programs): caching heap 1 GiB at B, workspace 64 MiB at W.
    let (b, w) = (0x1000_0000_0000, 0x2000_0000_0000);
    let mut f = Feed::new(PTA, vec![]);
    f.heap(PTA_CACHING, 0, b, GIB);
    f.heap(PTA_WORKSPACE, 0, w, 64 * MIB);
    assert!(f.out.is_empty(), "heap calls give no rows");
    for (off, size) in [(0, 1), (1, 2), (3, 4), (8, 8), (16, 16)] {
        f.reg(PTA_CACHING, 0, b + off * MIB, size * MIB);
    }
    f.reg(PTA_WORKSPACE, 0, w, 32 * MIB);
    f.unreg(PTA_WORKSPACE, w);
    for off in [1, 8, 0, 3, 16] {
        f.unreg(PTA_CACHING, b + off * MIB);
    }
    let g = GIB as i64;
    let m = MIB as i64;
    let expected: Vec<Shape> = vec![
        (M, Pta, b, MIB, 1, m, g, pta("PTA")),
        (M, Pta, b + MIB, 2 * MIB, 2, 3 * m, g, pta("PTA")),
        (M, Pta, b + 3 * MIB, 4 * MIB, 3, 7 * m, g, pta("PTA")),
        (M, Pta, b + 8 * MIB, 8 * MIB, 4, 15 * m, g, pta("PTA")),
        (M, Pta, b + 16 * MIB, 16 * MIB, 5, 31 * m, g, pta("PTA")),
        (M, Ws, w, 32 * MIB, 6, 32 * m, 64 * m, pta("PTA_WORKSPACE")),
        (F, Ws, w, 32 * MIB, 6, 0, 64 * m, None),
        (F, Pta, b + MIB, 2 * MIB, 2, 29 * m, g, None),
        (F, Pta, b + 8 * MIB, 8 * MIB, 4, 21 * m, g, None),
        (F, Pta, b, MIB, 1, 20 * m, g, None),
        (F, Pta, b + 3 * MIB, 4 * MIB, 3, 16 * m, g, None),
        (F, Pta, b + 16 * MIB, 16 * MIB, 5, 0, g, None),
    ];
    assert_eq!(f.shapes(), expected);
    f.unheap(PTA_WORKSPACE, w);
    f.unheap(PTA_CACHING, b);
    assert_eq!(f.typer.accounting().total(pool(PTA_CACHING), 0), 0);
    assert_eq!(f.typer.accounting().total(pool(PTA_WORKSPACE), 0), 0);
    assert_eq!(f.typer.accounting().live_count(), 0);
    assert!(f.ctx.take_warnings().is_empty());
}

#[test]
fn total_sums_heaps_of_one_pool_and_device_and_drops_unregistered_ones() {
    let mut f = Feed::new(PTA, vec![]);
    f.heap(PTA_CACHING, 0, 0x10_0000, 100);
    f.heap(PTA_CACHING, 0, 0x20_0000, 50);
    f.heap(PTA_CACHING, 1, 0x30_0000, 7);
    f.reg(PTA_CACHING, 0, 0x10_0000, 10);
    f.unheap(PTA_CACHING, 0x10_0000);
    f.reg(PTA_CACHING, 0, 0x20_0000, 5);
    f.reg(PTA_CACHING, 1, 0x30_0000, 3);
    let got: Vec<_> = f
        .out
        .iter()
        .map(|e| (e.device, mem(e).used, mem(e).total))
        .collect();
    assert_eq!(
        got,
        [
            (Device::Npu(0), Some(10), Some(150)),
            (Device::Npu(0), Some(15), Some(50)),
            (Device::Npu(1), Some(3), Some(7)),
        ]
    );
}

#[test]
fn workspace_used_is_a_running_sum_not_the_last_block() {
    let mut f = Feed::new(PTA, vec![]);
    f.reg(PTA_WORKSPACE, 0, 0x100, 10);
    f.reg(PTA_WORKSPACE, 0, 0x200, 20);
    f.unreg(PTA_WORKSPACE, 0x100);
    let used: Vec<_> = f.out.iter().map(|e| mem(e).used).collect();
    assert_eq!(used, [Some(10), Some(30), Some(20)]);
    assert!(f
        .out
        .iter()
        .all(|e| e.event_type == EventType::PtaWorkspace));
}

#[test]
fn device_is_mapped_through_visible_devices_and_figures_are_per_physical_device() {
    let mut f = Feed::new(&[DECL[2]], vec![4, 5]);
    f.heap(MINDSPORE, 0, 0x1000, 1000);
    f.heap(MINDSPORE, 1, 0x9000, 500);
    f.reg(MINDSPORE, 0, 0x1000, 100);
    f.reg(MINDSPORE, 1, 0x9000, 200);
    f.unreg(MINDSPORE, 0x1000);
    let got: Vec<_> = f
        .out
        .iter()
        .map(|e| (e.kind, e.device, mem(e).used, mem(e).total))
        .collect();
    assert_eq!(
        got,
        [
            (M, Device::Npu(4), Some(100), Some(1000)),
            (M, Device::Npu(5), Some(200), Some(500)),
            (F, Device::Npu(4), Some(0), Some(1000)),
        ]
    );
    assert_eq!(f.typer.accounting().used(pool(MINDSPORE), 5), 200);
}

#[test]
fn owner_is_framework_level_then_thread_labels_on_malloc_only() {
    let mut f = Feed::new(&[DECL[3]], vec![]);
    f.ctx.push_owner(7, "model".into());
    f.ctx.push_owner(7, "layer@1".into());
    f.ctx.push_owner(8, "other thread".into());
    f.reg(ATB_POOL, 0, 0x40, 64);
    f.ctx.pop_owner(7);
    f.reg(ATB_POOL, 0, 0x80, 64);
    f.unreg(ATB_POOL, 0x40);
    let owners: Vec<_> = f
        .out
        .iter()
        .map(|e| mem(e).owner.as_ref().map(ToString::to_string))
        .collect();
    assert_eq!(owners, [pta("ATB@model@layer_1"), pta("ATB@model"), None]);
    assert_eq!(f.out[0].tid, Some(7));
    assert_eq!(f.out[0].pid, Some(42));
    assert_eq!(f.out[0].ts_ns, 1);
    assert_eq!(f.out[0].ptr, Some(0x40));
}

#[test]
fn register_on_live_address_warns_and_frees_the_old_block_first() {
    let mut f = Feed::new(PTA, vec![]);
    f.heap(PTA_CACHING, 0, 0x1000, 4096);
    f.reg(PTA_CACHING, 0, 0x1000, 100);
    f.reg(PTA_CACHING, 0, 0x1000, 300);
    let evs = std::mem::take(&mut f.out);
    let got: Vec<_> = evs.iter().map(shape).collect();
    assert_eq!(
        got,
        [
            (M, Pta, 0x1000, 100, 1, 100, 4096, pta("PTA")),
            (F, Pta, 0x1000, 100, 1, 0, 4096, None),
            (M, Pta, 0x1000, 300, 2, 300, 4096, pta("PTA")),
        ]
    );
    assert!(mem(&evs[1]).shadow);
    let w = f.ctx.take_warnings();
    assert_eq!(w.len(), 1);
    assert!(
        w[0].contains("double malloc") && w[0].contains("0x1000"),
        "{w:?}"
    );
}

#[test]
fn unregister_of_unknown_address_warns_and_emits_nothing() {
    let mut f = Feed::new(PTA, vec![]);
    f.reg(PTA_CACHING, 0, 0x1000, 100);
    f.unreg(PTA_CACHING, 0x2000);
    f.unreg(PTA_WORKSPACE, 0x1000); // same address, other pool
    f.unreg(PTA_CACHING, 0x1000);
    f.unreg(PTA_CACHING, 0x1000); // repeated free
    f.unheap(PTA_CACHING, 0x5000);
    let kinds: Vec<_> = f.out.iter().map(|e| e.kind).collect();
    assert_eq!(kinds, [M, F]);
    let w = f.ctx.take_warnings();
    assert_eq!(w.len(), 4, "{w:?}");
    assert!(w[0].contains("PTA: free of unknown block 0x2000"), "{w:?}");
    assert!(w[1].starts_with("PTA_WORKSPACE:"), "{w:?}");
    assert!(w[3].contains("unknown heap 0x5000"), "{w:?}");
}

#[test]
fn typer_takes_only_its_own_pools_and_no_other_records() {
    let mut f = Feed::new(PTA, vec![]);
    let ms = Record::RegionRegister {
        ts: 1,
        pool: MINDSPORE,
        device: 0,
        ptr: 1,
        size: 1,
    };
    let atb = Record::HeapRegister {
        ts: 1,
        pool: ATB_POOL,
        device: 0,
        ptr: 1,
        size: 1,
    };
    assert!(!f.rec(ms));
    assert!(!f.rec(atb));
    assert!(!f.rec(Record::RangeEnd { ts: 1, id: 1 }));
    assert!(!f.rec(Record::OwnerPop { ts: 1 }));
    assert!(f.out.is_empty());
    assert_eq!(f.typer.pools(), [pool(PTA_CACHING), pool(PTA_WORKSPACE)]);
}

#[test]
fn heap_registered_twice_replaces_instead_of_double_counting() {
    let mut f = Feed::new(PTA, vec![]);
    f.heap(PTA_CACHING, 0, 0x1000, 100);
    f.heap(PTA_CACHING, 0, 0x1000, 40);
    assert_eq!(f.typer.accounting().total(pool(PTA_CACHING), 0), 40);
    assert_eq!(f.ctx.take_warnings().len(), 1);
}

#[test]
fn allocation_ids_are_shared_with_other_sources_through_the_context() {
    let mut f = Feed::new(PTA, vec![]);
    assert_eq!(f.ctx.next_allocation_id(), 1); // e.g. a HAL block typed by another adapter
    f.reg(PTA_CACHING, 0, 0x10, 1);
    assert_eq!(mem(&f.out[0]).allocation_id, 2);
}

#[test]
fn event_types_and_framework_labels_follow_the_pool_declaration() {
    let got: Vec<_> = (1..=4)
        .map(|n| (event_type(pool(n)).as_str(), framework_label(pool(n))))
        .collect();
    assert_eq!(
        got,
        [
            ("PTA", "PTA"),
            ("PTA_WORKSPACE", "PTA_WORKSPACE"),
            ("MindSpore", "MindSpore"),
            ("ATB", "ATB")
        ]
    );
}

#[test]
fn huge_sizes_saturate_instead_of_wrapping() {
    let mut f = Feed::new(PTA, vec![]);
    f.heap(PTA_CACHING, 0, 0x1, u64::MAX);
    f.heap(PTA_CACHING, 0, 0x2, 5);
    f.reg(PTA_CACHING, 0, 0x10, u64::MAX);
    assert_eq!(mem(&f.out[0]).total, Some(i64::MAX));
    assert_eq!(mem(&f.out[0]).used, Some(i64::MAX));
}

#[test]
fn a_tag_of_a_live_block_writes_a_memory_owner_row_and_shows_on_its_free_row() {
    let mut f = Feed::new(PTA, vec![]);
    let ts = f.tick();
    f.rec(Record::RegionRegister {
        ts,
        pool: PTA_CACHING,
        device: 0,
        ptr: 0x4000,
        size: MIB,
    });
    let ts = f.tick();
    assert!(f.rec(Record::OwnerTag {
        ts,
        addr: 0x4000,
        label: b"weights".as_slice().into(),
    }));
    let tag = f.out.last().expect("MEMORY_OWNER row");
    assert_eq!(
        memscope_core::roles::OwnerTag::from_event(tag).map(|t| (t.owner, t.size, t.allocation_id)),
        Some(("PTA@weights".to_owned(), MIB, 1))
    );
    let rows = f.out.len();
    let ts = f.tick();
    assert!(f.rec(Record::OwnerTag {
        ts,
        addr: 0x4000,
        label: b"weights".as_slice().into(),
    }));
    assert_eq!(f.out.len(), rows, "the same chain again writes no row");
    let ts = f.tick();
    assert!(!f.rec(Record::OwnerTag {
        ts,
        addr: 0x9999,
        label: b"nothing".as_slice().into(),
    }));
    let ts = f.tick();
    f.rec(Record::RegionUnregister {
        ts,
        pool: PTA_CACHING,
        ptr: 0x4000,
    });
    let free = f.out.last().expect("free row");
    assert_eq!(free.kind, EventKind::Free);
    assert_eq!(
        mem(free).owner.as_ref().map(ToString::to_string).as_deref(),
        Some("PTA@weights")
    );
}
