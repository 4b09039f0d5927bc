use super::*;
use memscope_core::bus::StepState;
use memscope_core::event::{Attrs, EventKind, MemoryAttrs};
use memscope_core::owner::OwnerChain;

fn ctx() -> BusCtx {
    BusCtx {
        pid: Some(7),
        steps: StepState::default(),
    }
}

#[allow(clippy::too_many_arguments)]
fn mem(
    id: u64,
    kind: EventKind,
    pool: EventType,
    addr: u64,
    size: u64,
    total: Option<i64>,
    owner: &str,
    py: &str,
) -> Event {
    let mut e = Event::new(pool, id, 1, 1);
    e.id = id;
    e.kind = kind;
    e.device = Device::Npu(0);
    e.ptr = Some(addr);
    e.py_stack = (!py.is_empty()).then(|| py.to_owned());
    e.attrs = Attrs::Memory(MemoryAttrs {
        addr,
        size,
        total,
        owner: (!owner.is_empty()).then(|| OwnerChain::parse(owner)),
        ..MemoryAttrs::default()
    });
    e
}

fn layer() -> (LiveLayer, LiveHandle, LiveHandle) {
    let h = LiveHandle::new(7, "/usr/bin/python3", Some(3));
    (LiveLayer::new(h.clone()), h.clone(), h)
}

fn feed(l: &mut LiveLayer, ev: Event) {
    let mut out = Vec::new();
    l.feed(ev, &ctx(), &mut out).unwrap();
    assert_eq!(out.len(), 1, "every event goes on down the chain");
}

const SITE_A: &str = "train.py(10): forward\ntrain.py(30): main";
const SITE_B: &str = "train.py(12): backward\ntrain.py(30): main";

#[test]
fn a_frame_says_what_each_pool_owner_and_site_holds_now_and_the_pool_peak() {
    let (mut l, h, wanted) = layer();
    let pta = EventType::Pta;
    feed(
        &mut l,
        mem(
            1,
            EventKind::Malloc,
            pta,
            0x1000,
            100,
            Some(1024),
            "PTA@model",
            SITE_A,
        ),
    );
    feed(
        &mut l,
        mem(
            2,
            EventKind::Malloc,
            pta,
            0x2000,
            300,
            Some(2048),
            "PTA@optimizer",
            SITE_B,
        ),
    );
    feed(
        &mut l,
        mem(
            3,
            EventKind::Malloc,
            pta,
            0x3000,
            50,
            Some(2048),
            "PTA@model",
            SITE_A,
        ),
    );
    feed(
        &mut l,
        mem(4, EventKind::Free, pta, 0x2000, 300, Some(2048), "", ""),
    );
    // nobody watches: no frame is built
    l.flush().unwrap();
    assert!(h.frame().pools.is_empty());
    wanted.set_wanted(true);
    l.flush().unwrap();
    let f = h.frame();
    assert_eq!((f.pid, f.rank, f.events), (7, Some(3), 4));
    assert_eq!(
        f.pools,
        [PoolFrame {
            device: "0".into(),
            pool: "PTA".into(),
            allocated: 150,
            blocks: 2,
            reserved: Some(2048),
            peak: 450,
        }]
    );
    let owners: Vec<(&str, u64, u64)> = f
        .owners
        .iter()
        .map(|o| (o.name.as_str(), o.bytes, o.blocks))
        .collect();
    assert_eq!(owners.len(), 1, "{owners:?}");
    assert_eq!((owners[0].1, owners[0].2), (150, 2), "{owners:?}");
    assert!(owners[0].0.contains("model"), "{owners:?}");
    assert_eq!(f.sites.len(), 1);
    assert!(f.sites[0].name.contains("train.py"), "{:?}", f.sites);
    assert_eq!(f.sites[0].bytes, 150);
}

#[test]
fn growth_is_measured_against_the_totals_noted_up_to_a_minute_before() {
    let (mut l, _, _) = layer();
    let pta = EventType::Pta;
    let t0 = Instant::now();
    feed(
        &mut l,
        mem(1, EventKind::Malloc, pta, 0x1000, 100, None, "", SITE_A),
    );
    l.note(t0);
    feed(
        &mut l,
        mem(2, EventKind::Malloc, pta, 0x2000, 200, None, "", SITE_A),
    );
    feed(
        &mut l,
        mem(3, EventKind::Malloc, pta, 0x3000, 40, None, "", SITE_B),
    );
    let f = l.frame(t0 + Duration::from_secs(30));
    assert!(
        (f.growth_window_s - 30.0).abs() < 0.5,
        "{}",
        f.growth_window_s
    );
    let growth: Vec<(u64, i64)> = f.sites.iter().map(|s| (s.bytes, s.growth)).collect();
    assert_eq!(growth, [(300, 200), (40, 40)]);
    // notes every 10 s; the window stays about a minute long as the run goes on
    for k in 1..=12u64 {
        l.note(t0 + Duration::from_secs(10 * k));
    }
    let f = l.frame(t0 + Duration::from_secs(125));
    assert!(
        (60.0..=75.0).contains(&f.growth_window_s),
        "{}",
        f.growth_window_s
    );
    assert_eq!(f.sites[0].growth, 0, "nothing changed in the last minute");
}

#[test]
fn steps_per_second_come_from_the_steps_ended_in_the_window() {
    let (mut l, _, _) = layer();
    let t0 = Instant::now();
    l.note(t0);
    for id in 1..=20 {
        let mut e = Event::new(EventType::Step, id, 1, 1);
        e.kind = EventKind::System;
        feed(&mut l, e);
    }
    let f = l.frame(t0 + Duration::from_secs(10));
    assert_eq!(f.steps, 20);
    assert!((f.steps_per_s - 2.0).abs() < 0.1, "{}", f.steps_per_s);
}

#[test]
fn host_mallocs_are_left_to_the_host_accounts_and_torch_cpu_tensors_are_kept() {
    let (mut l, h, wanted) = layer();
    let mut host = mem(
        1,
        EventKind::Malloc,
        EventType::Host,
        0x1000,
        64,
        None,
        "",
        "",
    );
    host.device = Device::Cpu;
    feed(&mut l, host);
    let mut tensor = mem(
        2,
        EventKind::Malloc,
        EventType::Host,
        0x2000,
        4096,
        None,
        "",
        "",
    );
    tensor.device = Device::Cpu;
    if let Attrs::Memory(m) = &mut tensor.attrs {
        m.cpu_tensor = true;
    }
    feed(&mut l, tensor);
    wanted.set_wanted(true);
    l.flush().unwrap();
    let f = h.frame();
    assert_eq!(f.pools.len(), 1);
    assert_eq!((f.pools[0].allocated, f.pools[0].blocks), (4096, 1));
}

#[test]
fn the_last_frame_stays_after_the_process_ended_and_says_so() {
    let (mut l, h, _) = layer();
    feed(
        &mut l,
        mem(
            1,
            EventKind::Malloc,
            EventType::Hal,
            0x1000,
            512,
            None,
            "",
            "",
        ),
    );
    l.finish(&ctx(), &mut Vec::new(), &mut Vec::new()).unwrap();
    let f = h.frame();
    assert!(!f.alive);
    assert_eq!(f.pools[0].allocated, 512);
}
