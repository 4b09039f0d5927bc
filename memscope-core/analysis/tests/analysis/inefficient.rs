//! Inefficient memory: each type fires exactly where msMemScope's op-sequence rules say, the
//! filters, the online layer's annotation in ID order and its bounded held-back queue, and the
//! offline path over a file in msMemScope row order.

use std::sync::{Arc, Mutex};

use memscope_analysis::inefficient::{Finding, IneffConfig, IneffTracker};
use memscope_analysis::inefficient_layer::InefficientLayer;
use memscope_analysis::offline::run_layers;
use memscope_core::bus::{Bus, BusCtx, BusError, Flow, Layer, ReportSection};
use memscope_core::event::{Event, Inefficiency};
use memscope_dump::reader::{read_csv_str, DumpFile, ReadOptions};

use Inefficiency::{EarlyAllocation as Early, LateDeallocation as Late, TemporaryIdleness as Idle};

const HEADER: &str =
    "ID,Event,Event Type,Name,Timestamp(ns),Process Id,Thread Id,Device Id,Ptr,Attr,Call Stack(Python),Call Stack(C)";

/// The sequence of the module comment, with the api number each event gets (PTA family,
/// idle threshold 2):
///
/// ```text
///  1 MALLOC b0 (outside)   api 1
///  2-4  op1 MALLOC b1      api 2  → malloc_api 2
///  5-7  op2 FREE b0        api 3  → free_api 3; b0's previous event is its MALLOC: not late
///  8-10 op3 ACCESS b1      api 4  → m=2 < free_api 3 < fa=4: b1 early_allocation
/// 11-14 op4 MALLOC b2, ACCESS b2  api 5 → malloc_api 5; fa of b2: none (same api as m)
/// 15-17 op5 MALLOC b3      api 6  → malloc_api 6
/// 18-20 op6 FREE b2        api 7  → free_api 7; last use 5 < malloc_api 6 < 7: b2 late_deallocation
/// 21-23 op7 ACCESS b1      api 8  → 8 − 4 > 2: b1 temporary_idleness
/// 24-26 op8 ACCESS b3      api 9  → m=6 < free_api 7 < fa=9: b3 early_allocation
/// 27-29 op9 ACCESS b3      api 10 → 10 − 9 ≤ 2: not idle
/// 30 FREE b3 (outside)     api 11 → last use 10 > malloc_api 6: not late
/// 31 FREE b1 (outside)     api 12 → last use 8 > 6: not late
/// ```
#[derive(Default)]
struct B {
    v: Vec<String>,
}

impl B {
    fn push(&mut self, ev: &str, et: &str, name: &str, ptr: &str, attr: &str) {
        let id = self.v.len() + 1;
        self.v.push(format!(
            "{id},{ev},{et},{name},{},9,9,0,{ptr},\"{attr}\",,",
            id * 10
        ));
    }
    /// Block b: address 0x1000·(b+1), size 100·(b+1), allocation id b+1.
    fn mem(&mut self, ev: &str, b: u64) {
        let (addr, size, aid) = (0x1000 * (b + 1), 100 * (b + 1), b + 1);
        let ptr = format!("0x{addr:016x}");
        match ev {
            "ACCESS" => self.push(
                ev,
                "READ",
                "op",
                &ptr,
                &format!("{{allocation_id:{aid},addr:0x{addr:x},size:{size},type:PTA}}"),
            ),
            _ => self.push(
                ev,
                "PTA",
                "N/A",
                &ptr,
                &format!("{{allocation_id:{aid},addr:0x{addr:x},size:{size}}}"),
            ),
        }
    }
    fn op(&mut self, n: u32, evs: &[(&str, u64)]) {
        self.push("OP_LAUNCH", "ATEN_START", &format!("op{n}"), "N/A", "");
        for (e, b) in evs {
            self.mem(e, *b);
        }
        self.push("OP_LAUNCH", "ATEN_END", &format!("op{n}"), "N/A", "");
    }
}

fn rows() -> Vec<String> {
    let mut b = B::default();
    b.mem("MALLOC", 0);
    b.op(1, &[("MALLOC", 1)]);
    b.op(2, &[("FREE", 0)]);
    b.op(3, &[("ACCESS", 1)]);
    b.op(4, &[("MALLOC", 2), ("ACCESS", 2)]);
    b.op(5, &[("MALLOC", 3)]);
    b.op(6, &[("FREE", 2)]);
    b.op(7, &[("ACCESS", 1)]);
    b.op(8, &[("ACCESS", 3)]);
    b.op(9, &[("ACCESS", 3)]);
    b.mem("FREE", 3);
    b.mem("FREE", 1);
    b.v
}

fn events() -> Vec<Event> {
    read_csv_str("t.csv", &format!("{HEADER}\n{}\n", rows().join("\n"))).unwrap()
}

fn cfg() -> IneffConfig {
    IneffConfig {
        idle_threshold: 2,
        ..IneffConfig::default()
    }
}

fn findings(cfg: IneffConfig) -> Vec<(u64, Vec<Inefficiency>)> {
    let mut t = IneffTracker::new(cfg);
    let mut out: Vec<Finding> = Vec::new();
    for e in events() {
        out.extend(t.observe(&e).findings);
    }
    out.extend(t.finish());
    let mut v: Vec<(u64, Vec<Inefficiency>)> =
        out.into_iter().map(|f| (f.malloc_id, f.types)).collect();
    v.sort();
    v
}

// MALLOC row IDs: b0 = 1, b1 = 3, b2 = 12, b3 = 16
#[test]
fn each_type_fires_exactly_where_the_rules_say() {
    assert_eq!(
        findings(cfg()),
        vec![
            (1, vec![]),
            (3, vec![Early, Idle]),
            (12, vec![Late]),
            (16, vec![Early])
        ]
    );
}

#[test]
fn the_default_threshold_of_3000_ops_keeps_short_gaps_from_counting_as_idle() {
    assert_eq!(
        findings(IneffConfig::default()),
        vec![
            (1, vec![]),
            (3, vec![Early]),
            (12, vec![Late]),
            (16, vec![Early])
        ]
    );
}

#[test]
fn type_and_size_filters_apply() {
    let only_late = IneffConfig {
        types: vec![Late],
        ..cfg()
    };
    assert_eq!(
        findings(only_late),
        vec![(1, vec![]), (3, vec![]), (12, vec![Late]), (16, vec![])]
    );
    // sizes: b1 200, b2 300, b3 400
    let big = IneffConfig {
        mem_size: 350,
        ..cfg()
    };
    assert_eq!(
        findings(big),
        vec![(1, vec![]), (3, vec![]), (12, vec![]), (16, vec![Early])]
    );
}

struct Capture(Arc<Mutex<Vec<Event>>>);
impl Layer for Capture {
    fn name(&self) -> &'static str {
        "capture"
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

fn online(cap: usize) -> (Vec<Event>, Vec<ReportSection>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut bus = Bus::new(
        Some(9),
        vec![
            Box::new(InefficientLayer::annotating(cfg(), cap)),
            Box::new(Capture(seen.clone())),
        ],
    );
    for e in events() {
        bus.push(e).unwrap();
    }
    let report = bus.finish().unwrap();
    let evs = seen.lock().unwrap().clone();
    (evs, report)
}

#[test]
fn online_the_malloc_rows_are_annotated_and_every_row_reaches_the_sinks_in_id_order() {
    let (evs, report) = online(1000);
    let ids: Vec<u64> = evs.iter().map(|e| e.id).collect();
    assert_eq!(ids, (1..=31).collect::<Vec<u64>>());
    let types = |id: u64| evs[id as usize - 1].memory().unwrap().inefficient.clone();
    assert_eq!(types(3), vec![Early, Idle]);
    assert_eq!(types(12), vec![Late]);
    assert_eq!(types(16), vec![Early]);
    assert!(types(1).is_empty());
    let l = &report[0].lines;
    assert_eq!(
        &l[..3],
        &[
            "early_allocation: 2 block(s)",
            "late_deallocation: 1 block(s)",
            "temporary_idleness: 1 block(s)"
        ]
    );
}

#[test]
fn online_past_the_cap_rows_go_out_unannotated_and_the_report_lists_what_was_found_later() {
    let (evs, report) = online(4);
    assert_eq!(
        evs.iter().map(|e| e.id).collect::<Vec<u64>>(),
        (1..=31).collect::<Vec<u64>>()
    );
    assert!(evs[2].memory().unwrap().inefficient.is_empty()); // b1's MALLOC had to go early
    let l = report[0].all_lines();
    assert!(
        l.iter().any(|x| x.starts_with("WARNING: ")
            && x.contains("written before their block was classified")),
        "{l:?}"
    );
    // the queue's size is memscope's business, not a line of the user's report (issue 23)
    assert!(l.iter().all(|x| !x.contains("held-back")), "{l:?}");
    assert!(
        l.iter().any(
            |x| x == "  MALLOC ID 3 (written unannotated): early_allocation,temporary_idleness"
        ),
        "{l:?}"
    );
}

#[test]
fn offline_on_a_file_in_msmemscope_row_order_finds_the_same_blocks() {
    // block rows written when the block dies: all MALLOC/ACCESS/FREE rows at the end
    let r = rows();
    let (mem, other): (Vec<&String>, Vec<&String>) =
        r.iter().partition(|x| !x.contains(",OP_LAUNCH,"));
    let text: Vec<String> = other
        .into_iter()
        .chain(mem.into_iter().rev())
        .cloned()
        .collect();
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("d.csv");
    std::fs::write(&p, format!("{HEADER}\n{}\n", text.join("\n"))).unwrap();
    let mut handle = None;
    run_layers(
        &DumpFile::open(&p).unwrap(),
        &mut ReadOptions::default(),
        &mut || {
            let (l, h) = InefficientLayer::collecting(cfg());
            handle = Some(h);
            vec![Box::new(l)]
        },
    )
    .unwrap();
    let mut got: Vec<(u64, Vec<Inefficiency>)> = handle
        .unwrap()
        .lock()
        .unwrap()
        .iter()
        .map(|f| (f.malloc_id, f.types.clone()))
        .collect();
    got.sort();
    assert_eq!(
        got,
        vec![(3, vec![Early, Idle]), (12, vec![Late]), (16, vec![Early])]
    );
}

#[test]
fn offline_a_read_that_restarts_late_reports_each_block_once() {
    // pid 9's rows in ID order, then rows of pid 8: the order breaks only at the very end,
    // after every finding of pid 9 was made; the restarted read must not add them twice.
    let mut text = format!("{HEADER}\n{}\n", rows().join("\n"));
    text.push_str("1,MSTX,Mark,m,5,8,8,0,N/A,,,\n2,MSTX,Mark,m,6,8,8,0,N/A,,,\n");
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("d.csv");
    std::fs::write(&p, text).unwrap();
    let mut handles = Vec::new();
    let (report, stats) = run_layers(
        &DumpFile::open(&p).unwrap(),
        &mut ReadOptions::default(),
        &mut || {
            let (l, h) = InefficientLayer::collecting(cfg());
            handles.push(h);
            vec![Box::new(l)]
        },
    )
    .unwrap();
    assert_eq!(stats.rows, 33);
    assert_eq!(report.len(), 2); // one section per process
    assert!(report[0].title.ends_with("(pid 8)"));
    let found: usize = handles.iter().map(|h| h.lock().unwrap().len()).sum();
    assert_eq!(found, 3);
}

#[test]
fn the_inefficient_report_names_the_python_frames_that_allocated_the_blocks() {
    let mut layer = InefficientLayer::annotating(cfg(), 1 << 10);
    let mut bus_out = Vec::new();
    let ctx = BusCtx {
        pid: Some(9),
        ..BusCtx::default()
    };
    for mut e in events() {
        if e.kind == memscope_core::event::EventKind::Malloc {
            e.py_stack = Some(format!("/w/t.py({}): make\n/w/t.py(1): <module>\n", e.id));
        }
        layer.feed(e, &ctx, &mut bus_out).unwrap();
    }
    let mut report = Vec::new();
    layer.finish(&ctx, &mut bus_out, &mut report).unwrap();
    let l = &report[0].lines;
    // b1 (MALLOC ID 3) and b3 (16) are early allocations, b2 (12) a late deallocation
    let at = |line: &str| {
        l.iter()
            .position(|x| x == line)
            .unwrap_or_else(|| panic!("{line:?} in {l:?}"))
    };
    assert!(
        at("    allocated at /w/t.py(3): make: 1 block(s)") > at("early_allocation: 2 block(s)")
    );
    assert!(
        at("    allocated at /w/t.py(12): make: 1 block(s)") > at("late_deallocation: 1 block(s)")
    );
}
