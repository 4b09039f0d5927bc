//! Unit tests of the HAL typer (kept apart so `typer.rs` stays short).

use super::*;
use memscope_core::attr_text::format_attr;
use memscope_wire::OptU32;

const T: u64 = 1_700_000_000_000_000_000;
const DEVICE: u64 = 1 << 10;
const HOST: u64 = 2 << 10;

fn flag(module: u64, memtype: u64, page: u64, dev: u64) -> u64 {
    (module << 56) | memtype | page | dev
}

struct Feed {
    ctx: TypeCtx,
    typer: HalTyper,
    out: Vec<Event>,
}

impl Feed {
    fn new(visible: Vec<u32>, top_k: u32) -> Feed {
        Feed {
            ctx: TypeCtx::new(9, visible),
            typer: HalTyper::with_top_k(top_k),
            out: Vec::new(),
        }
    }
    fn rec(&mut self, r: Record<Box<[u8]>>) {
        assert!(self.typer.type_record(&mut self.ctx, 5, &r, &mut self.out));
    }
    fn take(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.out)
    }
}

fn alloc(ts: u64, addr: u64, size: u64, flag: u64) -> Record<Box<[u8]>> {
    crate::wire::rec(
        ts,
        HalRecord::Alloc {
            addr,
            size,
            flag,
            stack: 0,
        },
    )
}

fn free(ts: u64, addr: u64, ret: i32) -> Record<Box<[u8]>> {
    crate::wire::rec(ts, HalRecord::Free { addr, ret })
}

#[test]
fn alloc_and_free_rows_carry_device_used_owner_page_and_alloc_type() {
    let mut f = Feed::new(vec![], 0);
    f.rec(alloc(T, 0x1000, 10, flag(7, DEVICE, 0, 0)));
    f.rec(alloc(
        T + 1,
        0x2000,
        30,
        flag(3, DEVICE, flags::HUGE_PAGE, 0),
    ));
    f.rec(free(T + 2, 0x1000, 0));
    let ev = f.take();
    let text: Vec<_> = ev.iter().map(format_attr).collect();
    assert_eq!(text, [
        "{allocation_id:1,addr:0x0000000000001000,size:10,used:10,owner:CANN@RUNTIME,page_type:normal,alloc_type:alloc}",
        "{allocation_id:2,addr:0x0000000000002000,size:30,used:40,owner:CANN@HCCL,page_type:huge,alloc_type:alloc}",
        "{allocation_id:1,addr:0x0000000000001000,size:10,used:30}",
    ]);
    assert_eq!(
        ev.iter()
            .map(|e| (e.kind, e.event_type, e.device, e.ptr))
            .collect::<Vec<_>>(),
        [
            (
                EventKind::Malloc,
                EventType::Hal,
                Device::Npu(0),
                Some(0x1000)
            ),
            (
                EventKind::Malloc,
                EventType::Hal,
                Device::Npu(0),
                Some(0x2000)
            ),
            (
                EventKind::Free,
                EventType::Hal,
                Device::Npu(0),
                Some(0x1000)
            ),
        ]
    );
    assert_eq!((ev[0].pid, ev[0].tid, ev[0].ts_ns), (Some(9), Some(5), T));
}

#[test]
fn device_bits_are_mapped_through_visible_devices_and_used_is_per_device() {
    let mut f = Feed::new(vec![4, 6], 0);
    f.rec(alloc(T, 0x10, 100, flag(33, DEVICE, 0, 1)));
    f.rec(alloc(T, 0x20, 7, flag(33, DEVICE, 0, 0)));
    f.rec(alloc(T, 0x30, 1, flag(33, DEVICE, flags::GIANT_PAGE, 9)));
    let ev = f.take();
    let got: Vec<_> = ev
        .iter()
        .map(|e| {
            (
                e.device,
                e.memory().unwrap().used,
                e.memory().unwrap().page_type,
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (Device::Npu(6), Some(100), Some(PageType::Normal)),
            (Device::Npu(4), Some(7), Some(PageType::Normal)),
            (Device::Npu(9), Some(1), Some(PageType::Giant)),
        ]
    );
    assert_eq!(f.typer.used(Device::Npu(6)), 100);
}

#[test]
fn host_memory_type_becomes_host_on_cpu_with_its_own_used() {
    let mut f = Feed::new(vec![], 0);
    f.rec(alloc(T, 0x10, 64, flag(7, HOST, 0, 3)));
    f.rec(alloc(T, 0x20, 8, flag(7, DEVICE, 0, 3)));
    f.rec(free(T, 0x10, 0));
    let ev = f.take();
    let got: Vec<_> = ev
        .iter()
        .map(|e| (e.kind, e.event_type, e.device, e.memory().unwrap().used))
        .collect();
    assert_eq!(
        got,
        [
            (EventKind::Malloc, EventType::Host, Device::Cpu, Some(64)),
            (EventKind::Malloc, EventType::Hal, Device::Npu(3), Some(8)),
            (EventKind::Free, EventType::Host, Device::Cpu, Some(0)),
        ]
    );
}

#[test]
fn create_path_uses_prop_device_module_and_page_type_and_release_frees_it() {
    let mut f = Feed::new(vec![], 0);
    let create = |handle, device, module, page, flag| {
        crate::wire::rec(
            T,
            HalRecord::Create {
                handle,
                size: 2 << 20,
                flag,
                device: OptU32(device),
                module: OptU32(module),
                page: OptU32(page),
                stack: 0,
            },
        )
    };
    f.rec(create(0xa0, 2, 3, 1, 0));
    f.rec(create(
        0xb0,
        u32::MAX,
        u32::MAX,
        u32::MAX,
        flag(7, DEVICE, flags::GIANT_PAGE, 1),
    ));
    f.rec(crate::wire::rec(
        T + 5,
        HalRecord::Release { addr: 0xa0, ret: 0 },
    ));
    f.rec(free(T + 6, 0xb0, 0)); // halMemFree of a create handle: not the same block
    let ev = f.take();
    let text: Vec<_> = ev.iter().map(|e| (e.device, format_attr(e))).collect();
    assert_eq!(text, [
        (Device::Npu(2), "{allocation_id:1,addr:0x00000000000000a0,size:2097152,used:2097152,owner:CANN@HCCL,page_type:huge,alloc_type:create}".to_owned()),
        (Device::Npu(1), "{allocation_id:2,addr:0x00000000000000b0,size:2097152,used:2097152,owner:CANN@RUNTIME,page_type:giant,alloc_type:create}".to_owned()),
        (Device::Npu(2), "{allocation_id:1,addr:0x00000000000000a0,size:2097152,used:0}".to_owned()),
    ]);
    assert_eq!(f.typer.live_count(), 1);
    assert_eq!(f.ctx.take_warnings().len(), 1);
}

#[test]
fn unknown_module_ids_give_cann_unknown_and_thread_labels_follow() {
    let mut f = Feed::new(vec![], 0);
    f.ctx.push_owner(5, "model".into());
    f.rec(alloc(T, 0x10, 1, flag(99, DEVICE, 0, 0)));
    let owner = f.take()[0]
        .memory()
        .unwrap()
        .owner
        .as_ref()
        .unwrap()
        .to_string();
    assert_eq!(owner, "CANN@UNKNOWN@model");
}

#[test]
fn double_free_and_unknown_pointer_free_are_warned_not_written() {
    let mut f = Feed::new(vec![], 0);
    f.rec(alloc(T, 0x10, 1, DEVICE));
    f.rec(free(T + 1, 0x10, 0));
    f.rec(free(T + 2, 0x10, 3)); // the driver refused the second free
    f.rec(free(T + 3, 0xdead, 0)); // a driver that accepts a pointer we never saw
    let kinds: Vec<_> = f.take().iter().map(|e| e.kind).collect();
    assert_eq!(kinds, [EventKind::Malloc, EventKind::Free]);
    let w = f.ctx.take_warnings();
    assert_eq!(w.len(), 2, "{w:?}");
    assert!(
        w[0].contains("halMemFree(0x10) failed with driver error 3")
            && w[0].contains("double free"),
        "{w:?}"
    );
    assert!(
        w[1].contains("halMemFree(0xdead)") && w[1].contains("unknown pointer"),
        "{w:?}"
    );
}

#[test]
fn failed_free_of_a_live_block_keeps_it_and_realloc_at_live_address_closes_it() {
    let mut f = Feed::new(vec![], 0);
    f.rec(alloc(T, 0x10, 4, DEVICE));
    f.rec(free(T + 1, 0x10, 7));
    f.rec(alloc(T + 2, 0x10, 8, DEVICE));
    let ev = f.take();
    let got: Vec<_> = ev
        .iter()
        .map(|e| {
            (
                e.kind,
                e.memory().unwrap().allocation_id,
                e.memory().unwrap().shadow,
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (EventKind::Malloc, 1, false),
            (EventKind::Free, 1, true),
            (EventKind::Malloc, 2, false)
        ]
    );
    assert_eq!(f.typer.used(Device::Npu(0)), 8);
    assert_eq!(f.ctx.take_warnings().len(), 2);
}

#[test]
fn oom_gives_a_snapshot_and_with_top_k_a_trigger_and_placeholders() {
    let mut f = Feed::new(vec![], 0);
    f.rec(crate::wire::rec(
        T,
        HalRecord::OomAlloc {
            size: 1 << 30,
            flag: flag(7, DEVICE, 0, 0),
            device: OptU32(0),
            free: 5,
            total: 100,
            stack: 0,
        },
    ));
    let ev = f.take();
    assert_eq!(ev.len(), 1);
    assert_eq!(
        (ev[0].kind, ev[0].name.as_deref()),
        (EventKind::Snapshot, Some(OOM_SNAPSHOT))
    );
    assert_eq!(
        format_attr(&ev[0]),
        format!(
            "{{func:halMemAlloc,req_size:1073741824,flag:{},total_mem:100,free_mem:5}}",
            flag(7, DEVICE, 0, 0)
        )
    );

    let mut f = Feed::new(vec![], 2);
    f.rec(crate::wire::rec(
        T,
        HalRecord::OomCreate {
            size: 8,
            flag: 0,
            device: OptU32(1),
            free: 0,
            total: 0,
            stack: 0,
        },
    ));
    let ev = f.take();
    let got: Vec<_> = ev
        .iter()
        .map(|e| (e.event_type, e.name.clone().unwrap(), e.device))
        .collect();
    let d = Device::Npu(1);
    assert_eq!(
        got,
        [
            (EventType::Snapshot, "OOM_Snapshot".to_owned(), d),
            (EventType::OomTrigger, "OOM_Trigger".to_owned(), d),
            (EventType::OomRecentAlloc, "OOM_RecentAlloc".to_owned(), d),
            (EventType::OomRecentAlloc, "OOM_RecentAlloc".to_owned(), d),
            (EventType::OomTopAlloc, "OOM_TopAlloc".to_owned(), d),
            (EventType::OomTopAlloc, "OOM_TopAlloc".to_owned(), d),
        ]
    );
    assert_eq!(format_attr(&ev[1]), "{func:halMemCreate,req_size:8,flag:0}");
    assert_eq!(ev[1].kind, EventKind::OomDetail);
}

#[test]
fn other_records_are_left_to_other_typers() {
    let mut f = Feed::new(vec![], 0);
    // a record of another source with one of HAL's tags
    let mut r = crate::wire::rec(T, HalRecord::Free { addr: 1, ret: 0 });
    if let Record::Source { source, .. } = &mut r {
        *source = memscope_wire::SourceId(crate::SOURCE.0 + 1);
    }
    assert!(!f.typer.type_record(&mut f.ctx, 1, &r, &mut f.out));
    let r = Record::OwnerPop { ts: T };
    assert!(!f.typer.type_record(&mut f.ctx, 1, &r, &mut f.out));
}
