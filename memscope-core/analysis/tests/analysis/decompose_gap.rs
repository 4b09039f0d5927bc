//! Decompose sums (at the peak and at the end) and the gap analysis's per-step ratios.

use memscope_analysis::decompose::{
    format_table, write_decompose_csv, DecomposeLayer, DecomposeRow, DECOMPOSE_HEADER,
};
use memscope_analysis::gap::{format_pool, GapLayer, GapStep};
use memscope_core::bus::{Bus, ReportSection};
use memscope_core::event::{Device, EventType};
use memscope_dump::reader::read_csv_str;

const HEADER: &str =
    "ID,Event,Event Type,Name,Timestamp(ns),Process Id,Thread Id,Device Id,Ptr,Attr,Call Stack(Python),Call Stack(C)";
const MIB: i64 = 1 << 20;

fn dump(rows: &[(&str, &str, &str, &str)]) -> String {
    // (Event, Event Type, Name, Attr); Ptr taken from the Attr's addr
    let mut s = format!("{HEADER}\n");
    for (i, (ev, et, name, attr)) in rows.iter().enumerate() {
        let ptr = attr.split("addr:").nth(1).map_or("N/A".to_owned(), |r| {
            r.split([',', '}']).next().unwrap_or("").to_owned()
        });
        s.push_str(&format!(
            "{},{ev},{et},{name},{},5,5,0,{ptr},\"{attr}\",,\n",
            i + 1,
            (i + 1) * 10
        ));
    }
    s
}

fn run(text: &str, layer: Box<dyn memscope_core::bus::Layer>) -> Vec<ReportSection> {
    let mut bus = Bus::new(Some(5), vec![layer]);
    for e in read_csv_str("t.csv", text).unwrap() {
        bus.push(e).unwrap();
    }
    bus.finish().unwrap()
}

#[test]
fn decompose_splits_the_peak_and_the_end_by_owner() {
    // PTA: +100 weight, +50 act, +30 act → peak 180 (weight 100, activation 80); −50 act → 130;
    // +40 gradient → 170 (< 180); c is closed by a shadow FREE at exit, so it stays live.
    // End: weight 100, activation 30, gradient 40. HAL block with MID:7 and no owner: CANN@RUNTIME.
    let text = dump(&[
        (
            "MALLOC",
            "PTA",
            "N/A",
            "{allocation_id:1,addr:0xa,size:100,owner:PTA@weight}",
        ),
        (
            "MALLOC",
            "PTA",
            "N/A",
            "{allocation_id:2,addr:0xb,size:50,owner:PTA@activation}",
        ),
        (
            "MALLOC",
            "PTA",
            "N/A",
            "{allocation_id:3,addr:0xc,size:30,owner:PTA@activation}",
        ),
        ("FREE", "PTA", "N/A", "{allocation_id:2,addr:0xb,size:50}"),
        (
            "MALLOC",
            "PTA",
            "N/A",
            "{allocation_id:4,addr:0xd,size:40,owner:PTA@gradient}",
        ),
        (
            "FREE",
            "PTA",
            "N/A",
            "{allocation_id:3,addr:0xc,size:30,shadow:true}",
        ),
        (
            "MALLOC",
            "HAL",
            "N/A",
            "{addr:0xe,size:2097152,owner:,MID:7}",
        ),
    ]);
    let mut layer = DecomposeLayer::new(None);
    let mut bus_out = Vec::new();
    let ctx = memscope_core::bus::BusCtx::default();
    for e in read_csv_str("t.csv", &text).unwrap() {
        memscope_core::bus::Layer::feed(&mut layer, e, &ctx, &mut bus_out).unwrap();
    }
    assert_eq!(bus_out.len(), 7);
    let row = |pool, owner: &str, peak, end| DecomposeRow {
        device: Device::Npu(0),
        pool,
        owner: owner.into(),
        peak,
        end,
    };
    let rows = layer.rows();
    assert_eq!(
        rows,
        vec![
            row(EventType::Hal, "CANN@RUNTIME", 2_097_152, 2_097_152),
            row(EventType::Pta, "PTA@weight", 100, 100),
            row(EventType::Pta, "PTA@activation", 80, 30),
            row(EventType::Pta, "PTA@gradient", 0, 40),
        ]
    );
    let table = format_table(&rows);
    assert_eq!(
        table[0],
        "Device 0 HAL: peak 2.000000 MiB, end 2.000000 MiB"
    );
    assert!(
        table
            .iter()
            .any(|l| l.starts_with("Device 0 PTA: peak 0.000172 MiB, end 0.000162 MiB")),
        "{table:?}"
    );
    let t = tempfile::tempdir().unwrap();
    let p = write_decompose_csv(
        t.path(),
        &rows.into_iter().map(|r| (Some(5), r)).collect::<Vec<_>>(),
    )
    .unwrap();
    let csv = std::fs::read_to_string(&p).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines[0], DECOMPOSE_HEADER);
    assert_eq!(lines[1], "5,0,HAL,CANN@RUNTIME,2097152,2097152,temp");
    assert_eq!(lines[4], "5,0,PTA,PTA@gradient,0,40,gradient");
    assert!(p
        .file_name()
        .unwrap()
        .to_string_lossy()
        .starts_with("decompose_"));
}

#[test]
fn the_online_decompose_layer_writes_its_csv_and_reports_it() {
    let t = tempfile::tempdir().unwrap();
    let text = dump(&[(
        "MALLOC",
        "PTA",
        "N/A",
        "{allocation_id:1,addr:0xa,size:100,owner:PTA@weight}",
    )]);
    let r = run(
        &text,
        Box::new(DecomposeLayer::new(Some(t.path().join("out")))),
    );
    assert_eq!(r[0].title, "Memory decomposition (pid 5)");
    let last = r[0].lines.last().unwrap();
    assert!(
        last.starts_with("written to ") && last.contains("decompose_"),
        "{last}"
    );
}

fn used(v: i64) -> String {
    format!(
        "{{allocation_id:1,addr:0x10,size:1,used:{},total:0}}",
        v * MIB
    )
}

#[test]
fn gap_ratios_per_step_and_the_min_and_max_gap() {
    // step 1 (not judged): used 100, 200. Step 2 starts at 200, sees 300 and 150: min 150,
    // max 300 → 50 %. Step 3 starts at 150, sees 400 and 200: min 150, max 400 → 37.5 %.
    let (u100, u200, u300, u150, u400) = (used(100), used(200), used(300), used(150), used(400));
    let text = dump(&[
        ("MSTX", "Range_start", "step start", ""),
        ("MALLOC", "PTA", "N/A", &u100),
        ("MALLOC", "PTA", "N/A", &u200),
        ("MSTX", "Range_end", "e", ""),
        ("MSTX", "Range_start", "step start", ""),
        ("MALLOC", "PTA", "N/A", &u300),
        ("FREE", "PTA", "N/A", &u150),
        ("MSTX", "Range_end", "e", ""),
        ("MSTX", "Range_start", "step start", ""),
        ("MALLOC", "PTA", "N/A", &u400),
        ("FREE", "PTA", "N/A", &u200),
        ("MSTX", "Range_end", "e", ""),
    ]);
    let mut layer = GapLayer::new();
    let mut bus = Bus::new(Some(5), Vec::new());
    let mut sink = Vec::new();
    for e in read_csv_str("t.csv", &text).unwrap() {
        bus.push(e.clone()).unwrap();
        memscope_core::bus::Layer::feed(&mut layer, e, bus.ctx(), &mut sink).unwrap();
    }
    let res = layer.results();
    assert_eq!(res.len(), 1);
    assert_eq!(res[0].0, (EventType::Pta, Device::Npu(0)));
    let steps = &res[0].1;
    assert_eq!(
        steps,
        &vec![
            GapStep {
                step: 2,
                min: 150 * MIB,
                max: 300 * MIB
            },
            GapStep {
                step: 3,
                min: 150 * MIB,
                max: 400 * MIB
            }
        ]
    );
    let lines = format_pool(EventType::Pta, Device::Npu(0), steps);
    assert_eq!(lines[0], "======= PTA Gap Analysis of Device 0 =======");
    let min_gap = lines.iter().find(|l| l.starts_with("MinGap")).unwrap();
    let max_gap = lines.iter().find(|l| l.starts_with("MaxGap")).unwrap();
    assert_eq!(
        min_gap,
        &format!(
            "{:<8}{:>25}{:>25}{:>25}",
            "MinGap", "37.5000", "150.0000", 3
        )
    );
    assert_eq!(
        max_gap,
        &format!(
            "{:<8}{:>25}{:>25}{:>25}",
            "MaxGap", "50.0000", "150.0000", 2
        )
    );
    let r = run(&text, Box::new(GapLayer::new()));
    assert_eq!(r[0].lines, lines);
}

#[test]
fn decompose_counts_blocks_without_owner_under_their_python_frame() {
    let mut text = dump(&[]);
    text.push_str("1,MALLOC,PTA,N/A,10,5,5,0,0x10,\"{addr:0x10,size:1048576}\",\"/w/t.py(7): make\n/w/t.py(9): main\n\",\n");
    text.push_str("2,MALLOC,PTA,N/A,20,5,5,0,0x20,\"{addr:0x20,size:1048576,owner:PTA@weights}\",\"/w/t.py(8): load\n\",\n");
    text.push_str("3,MALLOC,PTA,N/A,30,5,5,0,0x30,\"{addr:0x30,size:1048576}\",NA,\n");
    // torch_npu's own tag on an untagged block names only the pool: split by frame too
    text.push_str("4,MALLOC,PTA,N/A,40,5,5,0,0x40,\"{addr:0x40,size:1048576,owner:PTA}\",\"/w/t.py(11): grow\n\",\n");
    let r = run(&text, Box::new(DecomposeLayer::new(None)));
    let l = &r[0].lines;
    assert!(
        l.iter().any(|x| x.contains("PTA at /w/t.py(11): grow")),
        "{l:?}"
    );
    assert!(
        l.iter()
            .any(|x| x.contains("(no owner) at /w/t.py(7): make")),
        "{l:?}"
    );
    assert!(
        l.iter().any(|x| x.trim_start().starts_with("PTA@weights")),
        "{l:?}"
    );
    assert!(
        l.iter().any(|x| x.trim_start().starts_with("(no owner) ")),
        "{l:?}"
    );
}

#[test]
fn a_role_given_after_the_malloc_counts_from_the_malloc_at_the_peak_and_in_the_steps() {
    // step 1: a 100-byte block without owner, two activations (fc1 50, fc2 30): peak 180;
    // fc1 freed; then the MEMORY_OWNER row makes the first block a weight. At the peak the
    // weight is 100 (not temp), the activations 80; the step's highest moment says the same.
    let text = dump(&[
        ("MSTX", "Range_start", "step start", ""),
        (
            "MALLOC",
            "PTA",
            "N/A",
            "{allocation_id:1,addr:0xa,size:100}",
        ),
        (
            "MALLOC",
            "PTA",
            "N/A",
            "{allocation_id:2,addr:0xb,size:50,owner:PTA@activation@model.fc1}",
        ),
        (
            "MALLOC",
            "PTA",
            "N/A",
            "{allocation_id:3,addr:0xc,size:30,owner:PTA@activation@model.fc2}",
        ),
        ("FREE", "PTA", "N/A", "{allocation_id:2,addr:0xb,size:50}"),
        (
            "SYSTEM",
            "MEMORY_OWNER",
            "N/A",
            "{allocation_id:1,addr:0xa,size:100,pool:PTA,owner:PTA@weight}",
        ),
        ("MSTX", "Range_end", "e", ""),
    ]);
    let mut layer = DecomposeLayer::new(None);
    let mut bus = Bus::new(Some(5), Vec::new());
    let mut sink = Vec::new();
    for e in read_csv_str("t.csv", &text).unwrap() {
        bus.push(e.clone()).unwrap();
        memscope_core::bus::Layer::feed(&mut layer, e, bus.ctx(), &mut sink).unwrap();
    }
    let rows = layer.rows();
    let got: Vec<(&str, i64, i64)> = rows
        .iter()
        .map(|r| (r.owner.as_str(), r.peak, r.end))
        .collect();
    assert_eq!(
        got,
        [
            ("PTA@weight", 100, 100),
            ("PTA@activation@model.fc1", 50, 0),
            ("PTA@activation@model.fc2", 30, 30)
        ]
    );
    let acts = layer.activations_at_peak();
    assert_eq!(
        acts[0].2,
        [("model.fc1".to_owned(), 50), ("model.fc2".to_owned(), 30)]
    );
    let steps = layer.timeline().steps();
    assert_eq!(steps.len(), 1);
    let a = &steps[0].allocs[&(Device::Npu(0), EventType::Pta)];
    assert_eq!(a.high.total, 180);
    assert_eq!(&a.high.levels[..4], &[100, 0, 0, 80]);
    assert_eq!(a.high.levels[8], 0, "no temp left at the peak");
    assert_eq!(&a.end.levels[..4], &[100, 0, 0, 30]);
    let series = layer.timeline().series();
    let weight = series.iter().find(|s| s.role == "weight").unwrap();
    assert_eq!(weight.v.first(), Some(&100), "a weight from its MALLOC on");
    assert!(series
        .iter()
        .all(|s| s.role != "temp" || s.v.iter().all(|v| *v == 0)));
    let mut out = Vec::new();
    let mut sections = Vec::new();
    memscope_core::bus::Layer::finish(&mut layer, bus.ctx(), &mut out, &mut sections).unwrap();
    let roles = sections
        .iter()
        .find(|s| s.title == "Memory by role (pid 5)")
        .expect("role section");
    let l = &roles.lines;
    assert!(l.iter().any(|x| x.split_whitespace().collect::<Vec<_>>() == ["weight", "0.000095", "0.000095"]), "{l:?}");
    assert!(
        l.iter().any(|x| x.contains("activations at their peak")),
        "{l:?}"
    );
    assert!(
        l.iter().any(|x| x.trim_start().starts_with("model.fc1")),
        "{l:?}"
    );
    assert!(
        l.iter().any(|x| x
            .starts_with("  step 1: highest 0.000172 MiB = weight 0.000095, activation 0.000076")),
        "{l:?}"
    );
}
