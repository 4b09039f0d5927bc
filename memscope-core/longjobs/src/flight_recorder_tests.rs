use super::*;
use memscope_core::event::{Attrs, Device, MemoryAttrs};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// A sink that keeps what reaches it.
#[derive(Clone, Default)]
struct Kept(Arc<Mutex<Vec<Event>>>);

impl Layer for Kept {
    fn name(&self) -> &'static str {
        "kept"
    }
    fn on_event(
        &mut self,
        ev: &mut Event,
        _: &BusCtx,
        _: &mut Vec<Event>,
    ) -> Result<Flow, BusError> {
        self.0.lock().unwrap().push(ev.take());
        Ok(Flow::Stop)
    }
}

fn mem(id: u64, kind: EventKind, addr: u64, size: u64) -> Event {
    let mut e = Event::new(EventType::Pta, id, 1, 1);
    e.id = id;
    e.kind = kind;
    e.ts_ns = 1_000_000_000 + id * 1000;
    e.device = Device::Npu(0);
    e.ptr = Some(addr);
    e.attrs = Attrs::Memory(MemoryAttrs {
        allocation_id: addr,
        addr,
        size,
        ..MemoryAttrs::default()
    });
    e
}

fn recorder(bound: KeepBound, dir: &Path) -> (FlightRecorder, Kept, Kept) {
    let sink = Kept::default();
    let windows = Kept::default();
    let w = windows.clone();
    let r = FlightRecorder::new(
        bound,
        dir.join("segments"),
        dir.join("out").join("msmemscope_7_20261205000000_ascend"),
        Box::new(sink.clone()),
        Box::new(move |_: &Path| Box::new(w.clone()) as Box<dyn Layer>),
    );
    (r, sink, windows)
}

/// A job that allocates a block per event pair and frees it 50 allocations later, with a few
/// long-lived blocks early on: `(events, live blocks by address after event i)`.
fn job(n: u64) -> Vec<Event> {
    let mut v = Vec::new();
    let mut id = 0;
    for i in 0..n {
        id += 1;
        v.push(mem(id, EventKind::Malloc, 0x1000 + i * 0x100, 64 + i % 7));
        if i >= 50 {
            id += 1;
            v.push(mem(
                id,
                EventKind::Free,
                0x1000 + (i - 50) * 0x100,
                64 + (i - 50) % 7,
            ));
        }
    }
    v
}

/// Blocks live just before the event with ID `first` (reference model).
fn live_before(events: &[Event], first: u64) -> BTreeMap<u64, u64> {
    let mut live = BTreeMap::new();
    for e in events.iter().take_while(|e| e.id < first) {
        match e.kind {
            EventKind::Malloc => {
                live.insert(e.ptr.unwrap(), e.id);
            }
            EventKind::Free => {
                live.remove(&e.ptr.unwrap());
            }
            _ => {}
        }
    }
    live
}

fn feed(r: &mut FlightRecorder, events: &[Event]) {
    let ctx = BusCtx::default();
    for e in events {
        r.feed(e.clone(), &ctx, &mut Vec::new()).unwrap();
    }
}

#[test]
fn the_window_holds_the_last_rows_and_the_blocks_live_before_it_as_history_rows() {
    let d = tempfile::tempdir().unwrap();
    let (mut r, sink, _) = recorder(KeepBound::Events(1000), d.path());
    let events = job(5000);
    feed(&mut r, &events);
    // a bounded number of segments on disk, not one per 1000 rows of the job
    let files = std::fs::read_dir(d.path().join("segments"))
        .unwrap()
        .count();
    assert!(files <= 10, "{files}");
    let mut report = Vec::new();
    r.finish(&BusCtx::default(), &mut Vec::new(), &mut report)
        .unwrap();
    assert!(
        !d.path().join("segments").exists(),
        "segments removed at the end"
    );
    let got = sink.0.lock().unwrap().clone();
    let (history, rows): (Vec<&Event>, Vec<&Event>) =
        got.iter().partition(|e| e.is_history_malloc());
    // the last rows, in order, at least the bound and at most a segment more
    assert!((1000..=1125).contains(&rows.len()), "{}", rows.len());
    let last: Vec<u64> = events.iter().rev().take(rows.len()).map(|e| e.id).collect();
    let mut ids: Vec<u64> = rows.iter().map(|e| e.id).collect();
    ids.reverse();
    assert_eq!(ids, last);
    // the history: exactly the blocks live just before the window's first row
    let want = live_before(&events, rows[0].id);
    let have: BTreeMap<u64, u64> = history.iter().map(|e| (e.ptr.unwrap(), e.id)).collect();
    assert_eq!(have, want);
    assert!(history.windows(2).all(|w| w[0].id < w[1].id));
    // the report says it is a window
    assert!(
        report.iter().any(|s| s.title.starts_with("Window")),
        "{report:?}"
    );
    let facts = window_of(
        &d.path()
            .join("out")
            .join("msmemscope_7_20261205000000_ascend"),
    );
    let facts = facts.expect("memscope_window.json");
    assert_eq!(facts.rows, rows.len() as u64);
    assert_eq!(facts.history_rows, want.len() as u64);
    assert_eq!(facts.earlier_rows + facts.rows, events.len() as u64);
    assert_eq!(facts.reason, "exit");
}

#[test]
fn a_byte_bound_keeps_the_segments_on_disk_within_it() {
    let d = tempfile::tempdir().unwrap();
    let bound = 1 << 20;
    let (mut r, _, _) = recorder(KeepBound::Bytes(bound), d.path());
    let ctx = BusCtx::default();
    let mut worst = 0;
    for (i, e) in job(40_000).into_iter().enumerate() {
        r.feed(e, &ctx, &mut Vec::new()).unwrap();
        if i % 997 == 0 {
            let on_disk: u64 = std::fs::read_dir(d.path().join("segments"))
                .unwrap()
                .flatten()
                .map(|f| f.metadata().unwrap().len())
                .sum();
            worst = worst.max(on_disk);
        }
    }
    // the rows take the bound less a reserve for the spool and the run's small files
    assert!(worst > bound / 4, "{worst}");
    assert!(
        worst <= rows_budget(bound),
        "{worst} > {}",
        rows_budget(bound)
    );
}

#[test]
fn history_rows_carry_the_latest_owner_of_their_block() {
    let d = tempfile::tempdir().unwrap();
    let (mut r, sink, _) = recorder(KeepBound::Events(1000), d.path());
    let mut events = vec![mem(1, EventKind::Malloc, 0xdead0000, 4096)];
    let mut tag = Event::new(EventType::MemoryOwner, 2, 1, 1);
    tag.id = 2;
    tag.ptr = Some(0xdead0000);
    tag.attrs = Attrs::Pairs(vec![
        ("pool".into(), "PTA".into()),
        ("addr".into(), "0xdead0000".into()),
        ("owner".into(), "PTA@model@weight".into()),
    ]);
    events.push(tag);
    events.extend(job(3000).into_iter().map(|mut e| {
        e.id += 2;
        e
    }));
    feed(&mut r, &events);
    r.finish(&BusCtx::default(), &mut Vec::new(), &mut Vec::new())
        .unwrap();
    let got = sink.0.lock().unwrap().clone();
    let h = got
        .iter()
        .find(|e| e.is_history_malloc() && e.ptr == Some(0xdead0000))
        .expect("the early block is history");
    let owner = h.memory().unwrap().owner.as_ref().expect("owner");
    assert_eq!(owner.levels().join("@"), "PTA@model@weight");
}

#[test]
fn an_oom_and_a_window_request_each_write_a_window_run_and_recording_goes_on() {
    let d = tempfile::tempdir().unwrap();
    let (mut r, sink, windows) = recorder(KeepBound::Events(1000), d.path());
    feed(&mut r, &job(2000));
    let mut oom = Event::new(EventType::OomTrigger, 99_999, 1, 1);
    oom.id = 99_999;
    oom.kind = EventKind::OomDetail;
    feed(&mut r, &[oom]);
    r.flush().unwrap();
    let first = windows.0.lock().unwrap().len();
    assert!(first > 1000, "{first}");
    request_window();
    r.flush().unwrap();
    assert!(windows.0.lock().unwrap().len() > first);
    let runs: Vec<String> = std::fs::read_dir(d.path().join("out"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("window_"))
        .collect();
    assert!(runs.iter().any(|n| n.contains("_oom1_pid")), "{runs:?}");
    assert!(runs.iter().any(|n| n.contains("_signal")), "{runs:?}");
    for run in &runs {
        let facts = window_of(
            &d.path()
                .join("out")
                .join(run)
                .join("msmemscope_7_20261205000000_ascend"),
        )
        .expect("facts");
        assert!(facts.rows >= 1000, "{facts:?}");
    }
    // the process goes on and ends with its own window
    feed(&mut r, &job(10));
    r.finish(&BusCtx::default(), &mut Vec::new(), &mut Vec::new())
        .unwrap();
    assert!(!sink.0.lock().unwrap().is_empty());
}

#[test]
fn a_fail_on_limit_on_live_bytes_crossed_while_the_job_runs_writes_a_window_once() {
    let d = tempfile::tempdir().unwrap();
    let (mut r, _, windows) = recorder(KeepBound::Events(1000), d.path());
    let limit = memscope_analysis::thresholds::Limit::parse("peak.PTA>20KiB").unwrap();
    let other = memscope_analysis::thresholds::Limit::parse("peak.HAL>1KiB").unwrap();
    r.watch_limits(vec![limit, other]);
    // 50 live blocks of ~64-70 bytes stay under 20 KiB: no window
    feed(&mut r, &job(200));
    r.flush().unwrap();
    assert!(windows.0.lock().unwrap().is_empty());
    // a 32 KiB block crosses it: one window, and none again while it stays crossed
    feed(
        &mut r,
        &[mem(10_000, EventKind::Malloc, 0xbeef0000, 32 << 10)],
    );
    r.flush().unwrap();
    let n = windows.0.lock().unwrap().len();
    assert!(n > 0);
    feed(
        &mut r,
        &[mem(10_001, EventKind::Malloc, 0xbeef8000, 32 << 10)],
    );
    r.flush().unwrap();
    assert_eq!(windows.0.lock().unwrap().len(), n);
    let runs: Vec<String> = std::fs::read_dir(d.path().join("out"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(runs.iter().any(|n| n.contains("_failon1_pid")), "{runs:?}");
}
