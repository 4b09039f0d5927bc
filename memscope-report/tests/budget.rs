//! The page stays within its budget whatever the run's size: series are decimated (peaks kept),
//! tables capped (with exact totals), and the writer shrinks every cap until the page fits.

use memscope_core::event::{Attrs, Device, Event, EventKind, EventType, MemoryAttrs};
use memscope_report::{html, Budget, ReportError, RunBuilder};

fn ev(id: u64, t: EventType) -> Event {
    let mut e = Event::new(t, 1_000_000 + id * 100, 9, 9);
    e.id = id;
    e.device = Device::Npu(0);
    e
}

/// A training loop: `steps` step ranges, each with `blocks` PTA blocks allocated and freed and
/// one leaked block; `used` follows the pool.
fn events(steps: u64, blocks: u64) -> Vec<Event> {
    let mut v = Vec::new();
    let mut id = 0;
    let mut used = 0i64;
    let mut next = |t| {
        id += 1;
        ev(id, t)
    };
    let mem = |kind, addr: u64, size: u64, used: i64, e: Event| {
        let mut e = e;
        e.kind = kind;
        e.ptr = Some(addr);
        e.attrs = Attrs::Memory(MemoryAttrs {
            addr,
            size,
            used: Some(used),
            total: Some(1 << 34),
            ..MemoryAttrs::default()
        });
        e
    };
    for s in 1..=steps {
        let mut r = next(EventType::RangeStart);
        r.name = Some("step start".into());
        r.attrs = Attrs::Pairs(vec![("range_id".into(), s.to_string())]);
        v.push(r);
        for b in 0..blocks {
            let addr = 0x1000_0000 + b * 4096;
            let size = 512 + (b % 7) * 512;
            used += size as i64;
            v.push(mem(
                EventKind::Malloc,
                addr,
                size,
                used,
                next(EventType::Pta),
            ));
            used -= size as i64;
            v.push(mem(EventKind::Free, addr, size, used, next(EventType::Pta)));
        }
        let leak = 0x9000_0000 + s * 65536;
        used += 4096;
        v.push(mem(
            EventKind::Malloc,
            leak,
            4096,
            used,
            next(EventType::Pta),
        ));
        let mut e = next(EventType::RangeEnd);
        e.name = Some("step start".into());
        e.attrs = Attrs::Pairs(vec![("range_id".into(), s.to_string())]);
        v.push(e);
    }
    v
}

fn build(budget: &Budget, evs: Vec<Event>) -> memscope_report::model::ReportData {
    let mut b = RunBuilder::new("synthetic", budget, false);
    b.begin_group("synthetic");
    for e in evs {
        b.push(e).unwrap();
    }
    b.end_group().unwrap();
    let (run, _) = b.finish().unwrap();
    memscope_report::model::ReportData {
        schema: memscope_report::model::SCHEMA,
        generated: String::new(),
        tool: String::new(),
        runs: vec![run],
        compare: None,
        diff: None,
        limits: memscope_report::model::Limits {
            series_buckets: budget.series_buckets,
            table_rows: budget.table_rows,
            tree_nodes: budget.tree_nodes,
            max_bytes: budget.max_bytes,
        },
    }
}

#[test]
fn a_large_run_is_decimated_and_capped_with_exact_totals() {
    let budget = Budget {
        series_buckets: 256,
        table_rows: 100,
        ..Budget::default()
    };
    let evs = events(3000, 20);
    let rows = evs.len() as u64;
    let data = build(&budget, evs);
    let p = &data.runs[0].processes[0];
    assert_eq!(data.runs[0].events, rows);
    // 3000 steps ended: blocks of steps 2..=2999 leaked (step 1 and the last step are not judged)
    assert_eq!(p.leaks.pool_count, 2998);
    assert_eq!(p.leaks.pool_bytes, 2998 * 4096);
    assert_eq!(p.leaks.pool.len(), 100);
    assert!(p.steps.len() <= 100 && p.steps_omitted == 3000 - p.steps.len() as u64);
    let alloc = p
        .series
        .iter()
        .find(|s| s.pool == "PTA" && s.what == "allocated")
        .unwrap();
    assert!(alloc.t.len() <= 4 * 256, "{} points", alloc.t.len());
    assert_eq!(alloc.raw_points, 3000 * 41);
    // the highest level is kept: the 3000 leaked blocks at the end
    let top = *alloc.v.iter().max().unwrap();
    assert_eq!(top, alloc.peak_v);
    assert_eq!(top, 3000 * 4096);
}

#[test]
fn the_writer_shrinks_the_caps_until_the_page_fits() {
    let budget = Budget {
        max_bytes: 200_000,
        ..Budget::default()
    };
    let mut data = build(&budget, events(2000, 20));
    let full = html::script_json(&data).unwrap().len();
    assert!(full > 200_000, "the data alone is {full} bytes");
    let page = html::render(&mut data, &budget).unwrap();
    assert!(page.len() <= 200_000, "{} bytes", page.len());
    assert!(data.limits.table_rows < budget.table_rows);
    let p = &data.runs[0].processes[0];
    assert_eq!(p.leaks.pool_count, 1998, "totals stay exact");
    // and a limit below the page's own code cannot be met
    let mut data = build(&budget, events(10, 2));
    let tiny = Budget {
        max_bytes: 10_000,
        ..Budget::default()
    };
    match html::render(&mut data, &tiny) {
        Err(ReportError::TooLarge { max, .. }) => assert_eq!(max, 10_000),
        other => panic!("expected TooLarge, got {:?}", other.map(|p| p.len())),
    }
}
