use super::*;
use memscope_core::event::MemoryAttrs;

const MIB: u64 = 1 << 20;
const SEG: u64 = 0x1000_0000;

struct Feed {
    layer: FragmentationLayer,
    id: u64,
}

impl Feed {
    fn new() -> Feed {
        Feed {
            layer: FragmentationLayer::new(true),
            id: 0,
        }
    }

    fn push(&mut self, mut ev: Event) {
        self.id += 1;
        ev.id = self.id;
        let mut out = Vec::new();
        self.layer.feed(ev, &BusCtx::default(), &mut out).unwrap();
    }

    fn mem(&mut self, kind: EventKind, t: EventType, addr: u64, size: u64) {
        let mut ev = Event::new(t, self.id * 10, 1, 1);
        ev.kind = kind;
        ev.device = Device::Npu(0);
        ev.ptr = Some(addr);
        ev.attrs = Attrs::Memory(MemoryAttrs {
            addr,
            size,
            ..MemoryAttrs::default()
        });
        self.push(ev);
    }

    fn oom(&mut self, req: u64, total: u64, free: u64) {
        let mut ev = Event::new(EventType::Snapshot, self.id * 10, 1, 1);
        ev.name = Some(OOM_SNAPSHOT.into());
        ev.device = Device::Npu(0);
        ev.attrs = Attrs::Pairs(vec![
            ("func".into(), "halMemAlloc".into()),
            ("req_size".into(), req.to_string()),
            ("total_mem".into(), total.to_string()),
            ("free_mem".into(), free.to_string()),
        ]);
        self.push(ev);
    }
}

/// A 1 MiB PTA block with the pool's own figures (8 MiB reserved) and no HAL row beneath.
fn pool_block_without_hal() -> Event {
    let mut ev = Event::new(EventType::Pta, 1, 1, 1);
    ev.device = Device::Npu(0);
    ev.ptr = Some(0x10);
    ev.attrs = Attrs::Memory(MemoryAttrs {
        addr: 0x10,
        size: MIB,
        used: Some(MIB as i64),
        total: Some(8 * MIB as i64),
        ..MemoryAttrs::default()
    });
    ev
}

/// One 390 MiB segment holding 64 MiB and 1 MiB blocks in turn (6 of each).
fn interleaved(f: &mut Feed) -> Vec<u64> {
    f.mem(EventKind::Malloc, EventType::Hal, SEG, 390 * MIB);
    let mut big = Vec::new();
    let mut a = SEG;
    for _ in 0..6 {
        f.mem(EventKind::Malloc, EventType::Pta, a, 64 * MIB);
        big.push(a);
        a += 64 * MIB;
        f.mem(EventKind::Malloc, EventType::Pta, a, MIB);
        a += MIB;
    }
    big
}

#[test]
fn freed_blocks_between_live_ones_are_separate_extents_and_the_oom_is_fragmentation() {
    let mut f = Feed::new();
    for a in interleaved(&mut f) {
        f.mem(EventKind::Free, EventType::Pta, a, 64 * MIB);
    }
    let (_, fig) = f.layer.figures()[0];
    assert_eq!(
        fig,
        Figures {
            reserved: 390 * MIB,
            allocated: 6 * MIB,
            free: 384 * MIB,
            extents: Some(6),
            largest: Some(64 * MIB),
        }
    );
    assert!((fig.fragmentation().unwrap() - (1.0 - 64.0 / 384.0)).abs() < 1e-12);
    f.oom(96 * MIB, 422 * MIB, 32 * MIB);
    let v = &f.layer.verdicts()[0];
    assert_eq!(v.kind, VerdictKind::Fragmentation);
    assert_eq!(v.process_held, 390 * MIB);
    assert_eq!(v.others, Some(0));
    assert_eq!(
        v.headline(),
        "asked 100663296 B (96.00 MiB), free 402653184 B (384.00 MiB) in 6 extents, largest 67108864 B (64.00 MiB): fragmentation"
    );
    assert_eq!(v.holders[0], [("temp".to_owned(), 6 * MIB)]);
}

#[test]
fn one_free_extent_too_small_is_a_true_shortage_unless_other_processes_hold_the_rest() {
    for (others, want) in [
        (0, VerdictKind::TrueShortage),
        (128 * MIB, VerdictKind::OtherProcesses),
    ] {
        let mut f = Feed::new();
        f.mem(EventKind::Malloc, EventType::Hal, SEG, 390 * MIB);
        f.mem(EventKind::Malloc, EventType::Pta, SEG, 325 * MIB);
        let (_, fig) = f.layer.figures()[0];
        assert_eq!(
            (fig.free, fig.extents, fig.largest),
            (65 * MIB, Some(1), Some(65 * MIB))
        );
        assert_eq!(fig.fragmentation(), Some(0.0));
        // device: 422 MiB + others in all, 32 MiB free
        f.oom(96 * MIB, 422 * MIB + others, 32 * MIB);
        let v = &f.layer.verdicts()[0];
        assert_eq!(v.kind, want, "others {others}");
        assert_eq!(v.others, Some(others));
    }
}

#[test]
fn merging_frees_and_a_released_segment_keep_the_extents_right() {
    let mut f = Feed::new();
    let big = interleaved(&mut f);
    // free two neighbours' 64s and the 1 MiB between them: one extent of 129 MiB
    f.mem(EventKind::Free, EventType::Pta, big[0], 64 * MIB);
    f.mem(EventKind::Free, EventType::Pta, big[1], 64 * MIB);
    f.mem(EventKind::Free, EventType::Pta, big[0] + 64 * MIB, MIB);
    let (_, fig) = f.layer.figures()[0];
    assert_eq!(
        (fig.free, fig.extents, fig.largest),
        (129 * MIB, Some(1), Some(129 * MIB))
    );
    assert_eq!(f.layer.changes().len(), 1);
    // every block freed, then the segment handed back: nothing reserved, nothing free
    for (i, a) in big.iter().enumerate().skip(2) {
        f.mem(EventKind::Free, EventType::Pta, *a, 64 * MIB);
        f.mem(EventKind::Free, EventType::Pta, *a + 64 * MIB, MIB);
        let _ = i;
    }
    f.mem(EventKind::Free, EventType::Pta, big[1] + 64 * MIB, MIB);
    let (_, fig) = f.layer.figures()[0];
    assert_eq!(
        (fig.free, fig.extents, fig.largest),
        (390 * MIB, Some(1), Some(390 * MIB))
    );
    f.mem(EventKind::Free, EventType::Hal, SEG, 390 * MIB);
    let (_, fig) = f.layer.figures()[0];
    assert_eq!(
        fig,
        Figures {
            extents: Some(0),
            largest: Some(0),
            ..Figures::default()
        }
    );
}

#[test]
fn without_hal_rows_the_pools_own_figures_are_used_and_extents_are_unknown() {
    let mut f = Feed::new();
    f.push(pool_block_without_hal());
    let (_, fig) = f.layer.figures()[0];
    assert_eq!(
        (fig.reserved, fig.free, fig.largest),
        (8 * MIB, 7 * MIB, None)
    );
    f.oom(4 * MIB, 0, 0);
    let v = &f.layer.verdicts()[0];
    assert_eq!(v.kind, VerdictKind::Fragmentation);
    assert!(v.headline().contains("extents unknown"), "{}", v.headline());
}

#[test]
fn a_request_that_fits_is_judged_under_its_own_heading_not_as_an_oom() {
    let mut f = Feed::new();
    f.layer = FragmentationLayer::new(false).with_request(MIB, None);
    for a in interleaved(&mut f) {
        f.mem(EventKind::Free, EventType::Pta, a, 64 * MIB);
    }
    f.oom(96 * MIB, 422 * MIB, 32 * MIB);
    let mut report = Vec::new();
    f.layer
        .finish(&BusCtx::default(), &mut Vec::new(), &mut report)
        .unwrap();
    let titles: Vec<&str> = report.iter().map(|s| s.title.as_str()).collect();
    assert_eq!(titles, ["Out-of-memory verdict", "Verdict on the request"]);
    assert!(
        report[0].lines[0].starts_with("OOM at ID"),
        "{:?}",
        report[0]
    );
    assert!(
        report[1].lines[0].starts_with("request at ID")
            && report[1].lines[0].ends_with(": fits in a free extent"),
        "{:?}",
        report[1]
    );
}

#[test]
fn a_request_without_extents_is_enough_free_bytes_not_fragmentation() {
    // no HAL rows: the pool's own figures, extents unknown; an OOM with enough free bytes is
    // fragmentation, a request of the user's own is not judged as one
    let mut f = Feed::new();
    f.layer = FragmentationLayer::new(false).with_request(2 * MIB, None);
    f.push(pool_block_without_hal());
    let mut report = Vec::new();
    f.layer
        .finish(&BusCtx::default(), &mut Vec::new(), &mut report)
        .unwrap();
    let v = f.layer.verdicts().last().unwrap();
    assert!(v.asked);
    assert_eq!(v.kind, VerdictKind::FreeEnough);
    assert!(
        report[0].lines[0].ends_with("enough free bytes (whether one extent holds it is unknown)"),
        "{:?}",
        report[0]
    );
}
