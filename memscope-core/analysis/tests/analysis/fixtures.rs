//! The real msMemScope dumps shipped with the spec (`shared/fixtures/msmemscope/`, behaviour
//! spec §11). Skipped, with a message, where the folder is absent.

use std::path::PathBuf;

use memscope_analysis::compare::{collect, Level};
use memscope_core::event::{Device, EventKind, EventType};
use memscope_dump::reader::{read_all, DumpFile, Order, ReadOptions};

fn fixture(name: &str) -> Option<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures/msmemscope");
    let p = dir.join(name);
    if p.is_file() {
        Some(p)
    } else {
        eprintln!(
            "SKIP: fixture {} not found (shared/fixtures/msmemscope is absent)",
            p.display()
        );
        None
    }
}

#[test]
fn baseline_parses_completely_and_has_40_op_pairs() {
    let Some(p) = fixture("baseline.csv") else {
        return;
    };
    let evs = read_all(&p, Order::File).unwrap();
    assert_eq!(evs.len(), 121);
    let count = |k: EventKind, t: EventType| {
        evs.iter()
            .filter(|e| e.kind == k && e.event_type == t)
            .count()
    };
    assert_eq!(count(EventKind::OpLaunch, EventType::AtenStart), 40);
    assert_eq!(count(EventKind::OpLaunch, EventType::AtenEnd), 40);
    assert_eq!(count(EventKind::Malloc, EventType::Pta), 18);
    assert_eq!(count(EventKind::Free, EventType::Pta), 14);
    assert_eq!(count(EventKind::Malloc, EventType::Hal), 5);
    assert_eq!(count(EventKind::Free, EventType::Hal), 2);
    // current format: ns timestamps, hex pointers, allocation ids
    let m = evs.iter().find(|e| e.id == 10).unwrap();
    assert_eq!(m.ts_ns, 1_764_753_084_425_691_000);
    assert_eq!(m.ptr, Some(0x12c0_4140_0000));
    assert_eq!(m.memory().unwrap().allocation_id, 4);
    // the op list: 40 START/END pairs, all on device 0
    let seq = collect(
        &DumpFile::open(&p).unwrap(),
        Level::Op,
        &mut ReadOptions::default(),
    )
    .unwrap();
    assert_eq!(seq.devices.len(), 1);
    assert_eq!(seq.devices[&0].len(), 40);
    assert_eq!(seq.unmatched, 0);
}

#[test]
fn baseline_in_id_order_is_sorted_per_process() {
    let Some(p) = fixture("baseline.csv") else {
        return;
    };
    let evs = read_all(&p, Order::ById).unwrap();
    assert_eq!(evs.len(), 121);
    assert!(evs.windows(2).all(|w| w[0].id <= w[1].id));
}

#[test]
fn dumps_of_2025_read_with_us_times_decimal_ptrs_and_host_device() {
    let Some(p) = fixture("memscope_dump_20250428113810.csv") else {
        return;
    };
    let evs = read_all(&p, Order::File).unwrap();
    assert_eq!(evs.len(), 330);
    let first = &evs[0];
    assert_eq!(first.event_type, EventType::AclInit);
    assert_eq!(first.ts_ns, 1_746_006_014_162_153_000);
    let host = evs
        .iter()
        .filter(|e| e.device == Device::Cpu && e.kind == EventKind::Malloc)
        .count();
    assert_eq!(host, 10);
    let free = evs
        .iter()
        .find(|e| e.kind == EventKind::Free && e.event_type == EventType::Pta)
        .unwrap();
    assert_eq!(free.memory().unwrap().size, 512);
    let step = evs
        .iter()
        .find(|e| e.event_type == EventType::RangeStart)
        .unwrap();
    assert_eq!(step.name.as_deref(), Some("step start"));
    let kernels = evs
        .iter()
        .filter(|e| e.kind == EventKind::KernelLaunch)
        .count();
    assert_eq!(kernels, 12);
    let p2 = fixture("memscope_dump_20250428113811.csv").unwrap();
    assert_eq!(read_all(&p2, Order::ById).unwrap().len(), 328);
}
