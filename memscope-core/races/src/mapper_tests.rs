use memscope_core::bus::{BusCtx, Layer};
use memscope_core::event::{
    AccessAttrs, Attrs, Device, Event, EventKind, EventType, LaunchAttrs, MemoryAttrs,
};

use super::*;
use crate::{RaceKind, RaceLayer};

fn row(id: u64, t: EventType) -> Event {
    let mut e = Event::new(t, id * 10, 42, 7);
    e.id = id;
    e.device = Device::Npu(0);
    e
}

fn sys(id: u64, t: EventType, pairs: &[(&str, &str)]) -> Event {
    let mut e = row(id, t);
    e.attrs = Attrs::Pairs(
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    );
    e
}

fn mark(id: u64, msg: &str, stream: Option<&str>) -> Event {
    let mut e = row(id, EventType::Mark);
    e.name = Some(msg.to_owned());
    e.device = Device::NotApplicable;
    if let Some(s) = stream {
        e.attrs = Attrs::Pairs(vec![("stream".into(), s.into())]);
    }
    e
}

fn named(id: u64, t: EventType, name: &str) -> Event {
    let mut e = row(id, t);
    e.name = Some(name.to_owned());
    e
}

fn launch_on(id: u64, stream: u64) -> Event {
    let mut e = named(id, EventType::KernelLaunch, "K");
    e.attrs = Attrs::Launch(LaunchAttrs {
        stream: Some(stream),
        ..LaunchAttrs::default()
    });
    e
}

fn access(id: u64, t: EventType, addr: u64) -> Event {
    let mut e = named(id, t, "aten::add_");
    e.ptr = Some(addr);
    e.attrs = Attrs::Access(AccessAttrs {
        size: Some(64),
        ..AccessAttrs::default()
    });
    e
}

fn mem(id: u64, t: EventType, free: bool, addr: u64) -> Event {
    let mut e = row(id, t);
    if free {
        e.kind = EventKind::Free;
    }
    e.attrs = Attrs::Memory(MemoryAttrs {
        allocation_id: id,
        addr,
        size: 256,
        owner: (!free).then(|| memscope_core::owner::OwnerChain::parse("PTA@model@w")),
        ..MemoryAttrs::default()
    });
    e
}

fn ops_of(rows: &[Event]) -> (Vec<StreamOp>, MapStats) {
    let mut m = RowMapper::new();
    let mut out = Vec::new();
    for r in rows {
        m.map(r, &mut out);
    }
    (out, m.stats())
}

#[test]
fn stream_and_event_rows_become_their_operations() {
    let (ops, st) = ops_of(&[
        sys(1, EventType::StreamCreate, &[("stream", "0x10")]),
        sys(2, EventType::EventCreate, &[("event", "0x20")]),
        sys(
            3,
            EventType::EventRecord,
            &[("stream", "0x10"), ("event", "0x20")],
        ),
        sys(
            4,
            EventType::StreamWaitEvent,
            &[("stream", "0x0"), ("event", "0x20")],
        ),
        sys(5, EventType::StreamSync, &[("stream", "0x10")]),
        sys(6, EventType::EventSync, &[("event", "0x20")]),
        sys(7, EventType::DeviceSync, &[]),
        sys(8, EventType::EventDestroy, &[("event", "0x20")]),
        sys(9, EventType::StreamDestroy, &[("stream", "0x10")]),
        sys(10, EventType::AclInit, &[]),
    ]);
    assert_eq!(
        ops,
        [
            StreamOp::StreamCreate { stream: 0x10 },
            StreamOp::EventCreate { event: 0x20 },
            StreamOp::EventRecord {
                event: 0x20,
                stream: 0x10
            },
            StreamOp::EventWait {
                stream: 0,
                event: 0x20
            },
            StreamOp::StreamSynchronize { stream: 0x10 },
            StreamOp::EventSynchronize { event: 0x20 },
            StreamOp::DeviceSynchronize,
            StreamOp::EventDelete { event: 0x20 },
        ]
    );
    assert_eq!(st.stream_calls, 8);
    assert!(!st.recorded(), "stream calls alone are no launch");
}

#[test]
fn an_operators_accesses_are_one_launch_on_the_stream_of_its_kernels() {
    let (ops, st) = ops_of(&[
        mem(1, EventType::Pta, false, 0x1000),
        named(2, EventType::AtenStart, "aten::add_"),
        access(3, EventType::Read, 0x1000),
        named(4, EventType::AtenStart, "aten::inner"),
        access(5, EventType::Write, 0x1040),
        named(6, EventType::AtenEnd, "aten::inner"),
        launch_on(7, 0x10),
        named(8, EventType::AtenEnd, "aten::add_"),
        // a lone access takes the thread's last stream
        access(9, EventType::Unknown, 0x2000),
        // an operator without accesses is no launch
        named(10, EventType::AtbStart, "Elewise"),
        named(11, EventType::AtbEnd, "Elewise"),
    ]);
    assert_eq!(ops.len(), 3, "{ops:?}");
    let StreamOp::KernelLaunch(l) = &ops[1] else {
        panic!("{:?}", ops[1])
    };
    assert_eq!(
        (l.id, l.stream, l.operator.as_str()),
        (2, 0x10, "aten::add_")
    );
    let kinds: Vec<_> = l.accesses.iter().map(|a| (a.addr, a.kind)).collect();
    assert_eq!(
        kinds,
        [
            (0x1000, AccessKind::ReadOnly),
            (0x1040, AccessKind::ReadWrite)
        ]
    );
    assert_eq!(l.accesses[0].owner.as_deref(), Some("PTA@model@w"));
    assert_eq!(l.accesses[1].owner.as_deref(), Some("PTA@model@w"));
    let StreamOp::KernelLaunch(lone) = &ops[2] else {
        panic!()
    };
    assert_eq!(
        (lone.stream, lone.accesses[0].kind),
        (0x10, AccessKind::ReadWrite)
    );
    assert_eq!(lone.accesses[0].owner, None, "outside every live block");
    assert_eq!((st.launches, st.stream_launches), (2, 1));
}

#[test]
fn sanitizer_marks_are_launches_on_the_marks_stream_and_bad_ones_are_counted() {
    let (ops, st) = ops_of(&[
        mark(
            1,
            "sanitizer-op: name=my_op;read=a:0x100:64,c:0x300:64;write=b:0x200:64,c:0x300:64",
            Some("0x10"),
        ),
        mark(2, "sanitizer-op: name=x;read=a:zz:1", None),
        mark(3, "training start", None),
        mark(4, "sanitizer-op: name=y;write=o:256:8", None),
    ]);
    assert_eq!(ops.len(), 2);
    let StreamOp::KernelLaunch(l) = &ops[0] else {
        panic!()
    };
    assert_eq!((l.stream, l.operator.as_str()), (0x10, "my_op"));
    let acc: Vec<_> = l
        .accesses
        .iter()
        .map(|a| (a.addr, a.kind, a.aliases[0].as_str()))
        .collect();
    assert_eq!(
        acc,
        [
            (0x100, AccessKind::ReadOnly, "a"),
            (0x200, AccessKind::Output, "b"),
            (0x300, AccessKind::ReadWrite, "c")
        ]
    );
    let StreamOp::KernelLaunch(l) = &ops[1] else {
        panic!()
    };
    assert_eq!((l.stream, l.accesses[0].addr), (0, 256));
    assert_eq!(st.malformed_marks, 1);
}

#[test]
fn pool_frees_are_checked_at_reuse_and_driver_frees_forget() {
    let (ops, _) = ops_of(&[
        mem(1, EventType::Pta, true, 0x1000),
        mem(2, EventType::Hal, true, 0x2000),
        mem(3, EventType::Host, true, 0x3000),
    ]);
    assert!(matches!(&ops[0], StreamOp::PoolFree(f) if f.addr == 0x1000 && f.id == 1));
    assert!(matches!(ops[1], StreamOp::Alloc { addr: 0x2000, .. }));
    assert_eq!(ops.len(), 2, "host memory is not looked at");
}

#[test]
fn layer_checks_rows_reports_each_race_and_says_when_nothing_was_recorded() {
    let ctx = BusCtx::default();
    let mut layer = RaceLayer::new();
    let mut report = Vec::new();
    layer.finish(&ctx, &mut Vec::new(), &mut report).unwrap();
    assert_eq!(layer.count(), None);
    assert!(
        report[0].lines[0].starts_with("Not recorded:"),
        "{report:?}"
    );

    let rows = [
        sys(1, EventType::StreamCreate, &[("stream", "0x10")]),
        mark(2, "sanitizer-op: name=w0;write=t:0x100:64", None),
        mark(3, "sanitizer-op: name=w1;write=t:0x100:64", Some("0x10")),
    ];
    let mut out = Vec::new();
    for r in rows {
        layer.feed(r, &ctx, &mut out).unwrap();
    }
    assert_eq!(out.len(), 3, "every row passes on");
    let mut report = Vec::new();
    layer.finish(&ctx, &mut Vec::new(), &mut report).unwrap();
    assert_eq!(layer.count(), Some(1));
    assert_eq!(layer.findings()[0].kind, RaceKind::WriteAfterWrite);
    assert_eq!(report[0].title, "Stream races");
    assert_eq!(report[0].lines[0], "1 race(s) in 2 checked launch(es):");
    assert!(
        report[0].lines[1]
            .starts_with("write-after-write at 0x100 (64 B): w1 #3 on stream 0x10 (t)"),
        "{:?}",
        report[0].lines
    );
}

#[test]
fn launches_on_streams_without_any_stream_call_recorded_are_said_to_be_unordered() {
    let ctx = BusCtx::default();
    let mut layer = RaceLayer::new();
    let mut out = Vec::new();
    for r in [
        mark(1, "sanitizer-op: name=w0;write=t:0x100:64", Some("0x10")),
        mark(2, "sanitizer-op: name=w1;read=t:0x100:64", Some("0x20")),
    ] {
        layer.feed(r, &ctx, &mut out).unwrap();
    }
    let lines = layer.lines();
    assert_eq!(lines[0], "1 race(s) in 2 checked launch(es):");
    assert!(
        lines
            .last()
            .unwrap()
            .starts_with("No stream or event call was recorded"),
        "{lines:?}"
    );
}

#[test]
fn a_mark_at_the_recorders_length_limit_or_with_a_bad_stream_is_not_checked() {
    let pad = "x".repeat(1024 - "sanitizer-op: name=;write=o:0x10:4".len());
    let cut = format!("sanitizer-op: name={pad};write=o:0x10:4");
    assert_eq!(cut.len(), 1024);
    let mut bad_stream = mark(2, "sanitizer-op: name=y;write=o:0x10:4", None);
    bad_stream.attrs = Attrs::Pairs(vec![("stream".into(), "zz".into())]);
    let mut m = RowMapper::new();
    let mut out = Vec::new();
    m.map(&mark(1, &cut, None), &mut out);
    assert!(m.first_malformed().unwrap().contains("may have been cut"));
    m.map(&bad_stream, &mut out);
    assert!(out.is_empty(), "neither is checked: {out:?}");
    assert_eq!(m.stats().malformed_marks, 2);
    assert!(
        m.stats().recorded(),
        "marks meant to be checked were recorded"
    );
}
