use super::*;
use memscope_core::event::{Attrs, MemoryAttrs};
use std::collections::BTreeMap;

fn mem(id: u64, kind: EventKind, pool: EventType, addr: u64, size: u64, py: &str) -> Event {
    let mut e = Event::new(pool, id, 1, 1);
    e.id = id;
    e.kind = kind;
    e.device = Device::Npu(0);
    e.ptr = Some(addr);
    e.py_stack = (!py.is_empty()).then(|| py.to_owned());
    e.attrs = Attrs::Memory(MemoryAttrs {
        addr,
        size,
        ..MemoryAttrs::default()
    });
    e
}

fn by_site(a: &Aggregate) -> BTreeMap<String, (u64, u64, u64, u64)> {
    a.lines()
        .into_iter()
        .map(|l| {
            (
                l.site.to_string(),
                (l.allocations, l.peak_bytes, l.live_bytes, l.frees),
            )
        })
        .collect()
}

#[test]
fn each_line_holds_what_it_had_at_the_allocators_peak_and_at_the_end() {
    let mut a = Aggregate::new();
    let x = "train.py(10): step\ntrain.py(20): main";
    let y = "train.py(11): step\ntrain.py(20): main";
    a.observe(&mem(1, EventKind::Malloc, EventType::Pta, 0x1000, 100, x));
    a.observe(&mem(2, EventKind::Malloc, EventType::Pta, 0x2000, 50, y));
    // the peak: 150 bytes after ID 2
    a.observe(&mem(3, EventKind::Free, EventType::Pta, 0x1000, 100, ""));
    a.observe(&mem(4, EventKind::Malloc, EventType::Pta, 0x3000, 60, x));
    let s = by_site(&a);
    let xs = s
        .iter()
        .find(|(k, _)| k.starts_with("train.py(10)"))
        .unwrap()
        .1;
    let ys = s
        .iter()
        .find(|(k, _)| k.starts_with("train.py(11)"))
        .unwrap()
        .1;
    assert_eq!(
        *xs,
        (2, 100, 60, 1),
        "x: 2 allocations, 100 at the peak, 60 live, 1 free"
    );
    assert_eq!(*ys, (1, 50, 50, 0));
    assert_eq!(a.peaks(), vec![(Device::Npu(0), EventType::Pta, 150, 2)]);
}

#[test]
fn a_memory_owner_row_moves_the_block_and_its_allocation_to_the_new_owner() {
    let mut a = Aggregate::new();
    a.observe(&mem(
        1,
        EventKind::Malloc,
        EventType::Pta,
        0x1000,
        100,
        "a.py(1): f",
    ));
    let mut tag = Event::new(EventType::MemoryOwner, 2, 1, 1);
    tag.id = 2;
    tag.device = Device::Npu(0);
    tag.attrs = Attrs::Pairs(vec![
        ("pool".into(), "PTA".into()),
        ("addr".into(), "0x1000".into()),
        ("owner".into(), "PTA@weights".into()),
    ]);
    a.observe(&tag);
    let lines = a.lines();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(&*lines[0].owner, "PTA@weights");
    assert_eq!((lines[0].allocations, lines[0].live_bytes), (1, 100));
}

/// A small generator (no dependency): xorshift.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn peak_figures_equal_a_snapshot_taken_at_every_new_peak_on_random_traffic() {
    for seed in 1..=20u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let mut a = Aggregate::new();
        let sites = ["s.py(1): a", "s.py(2): b", "s.py(3): c", ""];
        let pools = [EventType::Pta, EventType::Hal];
        // the oracle: live bytes per (pool, site), copied whole at each new peak
        let mut live: BTreeMap<(usize, usize), u64> = BTreeMap::new();
        let mut blocks: Vec<(usize, u64, usize, u64)> = Vec::new(); // pool, addr, site, size
        let mut total = [0u64; 2];
        let mut peak = [0u64; 2];
        let mut at_peak: [BTreeMap<(usize, usize), u64>; 2] = Default::default();
        let mut next_addr = 0x1000u64;
        for id in 1..=3000u64 {
            let r = rng.next();
            if !r.is_multiple_of(3) || blocks.is_empty() {
                let (p, s, size) = (
                    (r >> 8) as usize % 2,
                    (r >> 16) as usize % 4,
                    r >> 32 & 0xfff,
                );
                a.observe(&mem(
                    id,
                    EventKind::Malloc,
                    pools[p],
                    next_addr,
                    size,
                    sites[s],
                ));
                blocks.push((p, next_addr, s, size));
                next_addr += 0x1000;
                *live.entry((p, s)).or_default() += size;
                total[p] += size;
                if total[p] > peak[p] || at_peak[p].is_empty() {
                    peak[p] = total[p];
                    at_peak[p] = live
                        .iter()
                        .filter(|(k, _)| k.0 == p)
                        .map(|(k, v)| (*k, *v))
                        .collect();
                }
            } else {
                let (p, addr, s, size) = blocks.swap_remove((r >> 8) as usize % blocks.len());
                a.observe(&mem(id, EventKind::Free, pools[p], addr, size, ""));
                *live.get_mut(&(p, s)).unwrap() -= size;
                total[p] -= size;
            }
        }
        for l in a.lines() {
            let p = pools.iter().position(|x| *x == l.pool).unwrap();
            let s = sites
                .iter()
                .position(|x| match site_of(Some(x), None) {
                    Some(site) => site.label() == *l.site,
                    None => &*l.site == "(no stack)",
                })
                .unwrap();
            let want = at_peak[p].get(&(p, s)).copied().unwrap_or(0);
            assert_eq!(l.peak_bytes, want, "seed {seed}: {l:?}");
            assert_eq!(l.live_bytes, live[&(p, s)], "seed {seed}: {l:?}");
        }
        for (d, pool, bytes, _) in a.peaks() {
            assert_eq!(d, Device::Npu(0));
            let p = pools.iter().position(|x| *x == pool).unwrap();
            assert_eq!(bytes, peak[p], "seed {seed}");
        }
    }
}

#[test]
fn the_csv_has_the_header_and_one_row_per_line() {
    let mut a = Aggregate::new();
    a.observe(&mem(
        1,
        EventKind::Malloc,
        EventType::Pta,
        0x1000,
        100,
        "a.py(1): f",
    ));
    let mut out = Vec::new();
    write_csv(&mut out, &a.lines()).unwrap();
    let text = String::from_utf8(out).unwrap();
    let mut rows = text.lines();
    assert_eq!(rows.next().unwrap(), HEADER.join(","));
    let row = rows.next().unwrap();
    assert!(row.starts_with("0,PTA,a.py(1): f,"), "{row}");
    assert!(rows.next().is_none());
}

#[test]
fn blocks_from_before_the_window_are_no_allocations_and_shadow_frees_end_blocks_uncounted() {
    let mut a = Aggregate::new();
    let mut hist = mem(
        1,
        EventKind::Malloc,
        EventType::Host,
        0x1000,
        100,
        "a.py(1): f",
    );
    if let Attrs::Memory(m) = &mut hist.attrs {
        m.shadow = true;
    }
    a.observe(&hist);
    a.observe(&mem(
        2,
        EventKind::Malloc,
        EventType::Host,
        0x2000,
        50,
        "a.py(1): f",
    ));
    // the collector's own FREE at an exec ends the block, not counted as a free
    let mut exec_free = mem(3, EventKind::Free, EventType::Host, 0x2000, 50, "");
    if let Attrs::Memory(m) = &mut exec_free.attrs {
        m.shadow = true;
    }
    a.observe(&exec_free);
    let lines = a.lines();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(
        (
            lines[0].allocations,
            lines[0].frees,
            lines[0].live_blocks,
            lines[0].peak_bytes
        ),
        (1, 0, 0, 50)
    );
}
