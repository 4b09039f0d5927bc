//! Unit tests of the OOM layer, driven by the HAL typer's real output.

use super::*;
use crate::typer::HalTyper;
use crate::wire::HalRecord;
use memscope_collect::adapter::{TypeCtx, Typer};
use memscope_core::attr_text::format_attr;
use memscope_core::event::MemoryAttrs;
use memscope_wire::{OptU32, Record};

const T: u64 = 1_700_000_000_000_000_000;
const DEV: u64 = 1 << 10;

fn pool_malloc(t: EventType, ts: u64, addr: u64, size: u64, used: i64, total: i64) -> Event {
    let mut ev = Event::new(t, ts, 1, 1);
    ev.device = Device::Npu(0);
    ev.ptr = Some(addr);
    ev.c_stack = Some(format!("stack of 0x{addr:x}"));
    ev.attrs = Attrs::Memory(MemoryAttrs {
        allocation_id: 1,
        addr,
        size,
        used: Some(used),
        total: Some(total),
        ..Default::default()
    });
    ev
}

fn run(layer: &mut OomLayer, evs: Vec<Event>) -> Vec<Event> {
    let ctx = BusCtx::default();
    let mut out = Vec::new();
    for e in evs {
        layer.feed(e, &ctx, &mut out).unwrap();
    }
    out
}

fn typed(top_k: u32, recs: Vec<Record<Box<[u8]>>>) -> Vec<Event> {
    let mut t = HalTyper::with_top_k(top_k);
    let mut ctx = TypeCtx::new(1, vec![]);
    let mut out = Vec::new();
    for r in recs {
        assert!(t.type_record(&mut ctx, 1, &r, &mut out));
    }
    out
}

fn oom_rec(ts: u64) -> Record<Box<[u8]>> {
    crate::wire::rec(
        ts,
        HalRecord::OomAlloc {
            size: 1 << 30,
            flag: DEV,
            device: OptU32(0),
            free: 1 << 20,
            total: 4 << 20,
            stack: 0,
        },
    )
}

#[test]
fn snapshot_reports_pool_figures_peaks_and_device_rates_under_the_seeds_keys() {
    let mut l = OomLayer::with_memory(true);
    let mut evs = vec![
        pool_malloc(EventType::Pta, T, 0x100, 300, 300, 1000),
        pool_malloc(EventType::Pta, T + 1, 0x200, 100, 400, 1000),
        pool_malloc(EventType::Atb, T + 2, 0x900, 50, 50, 200),
    ];
    let mut f = pool_malloc(EventType::Pta, T + 3, 0x100, 300, 100, 1000);
    f.kind = EventKind::Free;
    evs.push(f);
    evs.extend(typed(0, vec![oom_rec(T + 4)]));
    let out = run(&mut l, evs);
    assert_eq!(out.len(), 5);
    assert_eq!(
        format_attr(&out[4]),
        "{total_mem:4194304,free_mem:1048576,reserved:1200,peak_reserved:1200,allocated:150,peak_allocated:450,device_utilization:75.000000,pt_utilization:12.500000}"
    );
}

#[test]
fn top_k_rows_list_most_recent_and_largest_live_blocks_with_stacks() {
    let mut l = OomLayer::with_memory(true);
    let mut evs = typed(
        2,
        vec![
            crate::wire::rec(
                T,
                HalRecord::Alloc {
                    addr: 0x1000,
                    size: 4096,
                    flag: DEV,
                    stack: 0,
                },
            ),
            crate::wire::rec(
                T + 1,
                HalRecord::Alloc {
                    addr: 0x2000,
                    size: 10,
                    flag: DEV,
                    stack: 0,
                },
            ),
            crate::wire::rec(
                T + 2,
                HalRecord::Alloc {
                    addr: 0x3000,
                    size: 1 << 20,
                    flag: DEV,
                    stack: 0,
                },
            ),
            crate::wire::rec(
                T + 3,
                HalRecord::Alloc {
                    addr: 0x4000,
                    size: 77,
                    flag: 2 << 10,
                    stack: 0,
                },
            ), // HOST: not scanned
            crate::wire::rec(
                T + 4,
                HalRecord::Free {
                    addr: 0x3000,
                    ret: 0,
                },
            ),
        ],
    );
    evs.push(pool_malloc(EventType::Pta, T + 5, 0x8000, 500, 500, 1000));
    evs.push(pool_malloc(
        EventType::PtaWorkspace,
        T + 6,
        0x9000,
        1 << 40,
        1,
        1,
    )); // not scanned
    evs.extend(typed(2, vec![oom_rec(T + 7)]));
    let out = run(&mut l, evs);
    let detail: Vec<_> = out
        .iter()
        .filter(|e| e.kind == EventKind::OomDetail)
        .collect();
    let got: Vec<_> = detail
        .iter()
        .map(|e| (e.event_type, format_attr(e)))
        .collect();
    assert_eq!(
        got,
        [
            (
                EventType::OomTrigger,
                format!("{{func:halMemAlloc,req_size:1073741824,flag:{DEV}}}")
            ),
            (
                EventType::OomRecentAlloc,
                format!(
                    "{{pool:PTA,ptr:0x0000000000008000,size:500,timestamp:{}}}",
                    T + 5
                )
            ),
            (
                EventType::OomRecentAlloc,
                format!(
                    "{{pool:HAL,ptr:0x0000000000002000,size:10,timestamp:{}}}",
                    T + 1
                )
            ),
            (
                EventType::OomTopAlloc,
                format!("{{pool:HAL,ptr:0x0000000000001000,size:4096,timestamp:{T}}}")
            ),
            (
                EventType::OomTopAlloc,
                format!(
                    "{{pool:PTA,ptr:0x0000000000008000,size:500,timestamp:{}}}",
                    T + 5
                )
            ),
        ]
    );
    assert_eq!(detail[1].c_stack.as_deref(), Some("stack of 0x8000"));
    assert_eq!(detail[1].name.as_deref(), Some("OOM_RecentAlloc"));
}

#[test]
fn unfilled_placeholders_are_dropped_and_a_second_dump_within_two_seconds_only_snapshots() {
    let mut l = OomLayer::with_memory(true);
    let mut evs = typed(
        3,
        vec![
            crate::wire::rec(
                T,
                HalRecord::Alloc {
                    addr: 0x1000,
                    size: 1,
                    flag: DEV,
                    stack: 0,
                },
            ),
            oom_rec(T + 1),
        ],
    );
    evs.extend(typed(3, vec![oom_rec(T + 1_000_000_000)]));
    evs.extend(typed(3, vec![oom_rec(T + 3_000_000_000)]));
    let out = run(&mut l, evs);
    let types: Vec<_> = out.iter().skip(1).map(|e| e.event_type).collect();
    use EventType::{OomRecentAlloc as R, OomTopAlloc as P, OomTrigger as G, Snapshot as S};
    assert_eq!(types, [S, G, R, P, S, S, G, R, P]);
}

#[test]
fn without_memory_collection_every_oom_row_is_dropped_and_other_rows_pass() {
    let mut l = OomLayer::with_memory(false);
    let mut evs = typed(1, vec![oom_rec(T)]);
    let mut mark = Event::new(EventType::Mark, T, 1, 1);
    mark.name = Some("m".into());
    evs.push(mark);
    let out = run(&mut l, evs);
    assert_eq!(
        out.iter().map(|e| e.event_type).collect::<Vec<_>>(),
        [EventType::Mark]
    );
}

#[test]
fn a_user_snapshot_without_the_oom_marker_passes_untouched() {
    let mut l = OomLayer::with_memory(true);
    let mut s = Event::new(EventType::Snapshot, T, 1, 1);
    s.name = Some("OOM_Snapshot".into());
    s.attrs = Attrs::Pairs(vec![("reserved".into(), "1".into())]);
    let out = run(&mut l, vec![s.clone()]);
    assert_eq!(out, [s]);
}

#[test]
fn new_sets_the_typers_k_from_the_analysis_option() {
    let mut cfg = RunConfig::default();
    cfg.analysis.oom = Some(4);
    let l = OomLayer::new(&cfg);
    assert!(l.memory);
    let mut out = Vec::new();
    let mut ctx = TypeCtx::new(1, vec![]);
    crate::typer::new_typer().type_record(&mut ctx, 1, &oom_rec(T), &mut out);
    set_oom_top_k(None);
    assert_eq!(out.len(), 1 + 1 + 2 * 4);
}
