//! Leak analysis: the step rule of issue 6 §3 (online through a bus, offline through a file),
//! Python `step()` numbering, HAL memory live at exit, and the msTX range mode of check_leaks.

use std::path::Path;

use memscope_analysis::leak_range::RangeLeakLayer;
use memscope_analysis::leaks::LeakLayer;
use memscope_analysis::offline::run_layers;
use memscope_analysis::{online_layers, AnalysisConfig};
use memscope_core::bus::{Bus, Layer, ReportSection};
use memscope_dump::reader::{read_csv_str, DumpFile, ReadOptions};

const HEADER: &str =
    "ID,Event,Event Type,Name,Timestamp(ns),Process Id,Thread Id,Device Id,Ptr,Attr,Call Stack(Python),Call Stack(C)";
const MIB: u64 = 1 << 20;

struct Dump {
    rows: Vec<String>,
    id: u64,
}

impl Dump {
    fn new() -> Dump {
        Dump {
            rows: Vec::new(),
            id: 0,
        }
    }
    #[allow(clippy::too_many_arguments)]
    fn push(
        &mut self,
        ev: &str,
        et: &str,
        name: &str,
        dev: &str,
        ptr: &str,
        attr: &str,
        stack: &str,
    ) -> u64 {
        self.id += 1;
        let id = self.id;
        self.rows.push(format!(
            "{id},{ev},{et},{name},{},42,42,{dev},{ptr},\"{attr}\",\"{stack}\",",
            id * 100
        ));
        id
    }
    fn step_start(&mut self) {
        self.push("MSTX", "Range_start", "\"step start\"", "0", "N/A", "", "");
    }
    fn step_end(&mut self) {
        self.push(
            "MSTX",
            "Range_end",
            "Range end from id 0",
            "0",
            "N/A",
            "",
            "",
        );
    }
    fn mem(&mut self, ev: &str, pool: &str, addr: u64, size: u64, extra: &str) -> u64 {
        let dev = if pool == "HAL" && ev == "FREE" {
            "N/A"
        } else {
            "0"
        };
        self.push(
            ev,
            pool,
            "N/A",
            dev,
            &format!("0x{addr:016x}"),
            &format!("{{addr:0x{addr:x},size:{size}{extra}}}"),
            "",
        )
    }
    fn text(&self) -> String {
        format!("{HEADER}\n{}\n", self.rows.join("\n"))
    }
}

fn through_bus(text: &str, layers: Vec<Box<dyn Layer>>) -> Vec<ReportSection> {
    let mut bus = Bus::new(Some(42), layers);
    for ev in read_csv_str("t.csv", text).unwrap() {
        bus.push(ev).unwrap();
    }
    bus.finish().unwrap()
}

/// Every line of section `title` (the log's and the summary file's, not the console's excerpt).
fn all_lines<'a>(r: &'a [ReportSection], title: &str) -> &'a [String] {
    r.iter()
        .find(|s| s.title.starts_with(title))
        .unwrap_or_else(|| panic!("no {title} in {r:?}"))
        .all_lines()
}

fn lines<'a>(r: &'a [ReportSection], title: &str) -> &'a [String] {
    &r.iter()
        .find(|s| s.title.starts_with(title))
        .unwrap_or_else(|| panic!("no {title} in {r:?}"))
        .lines
}

/// Steps 1–4 with msTX ranges. Y (step 2, never freed) and V (step 3, closed by a shadow FREE
/// at exit) are leaks; X (step 1), Z (step 2, freed in step 4) and W (step 4, no later step
/// ends) are not.
fn step_dump() -> Dump {
    let mut d = Dump::new();
    d.step_start();
    d.mem("MALLOC", "PTA", 0x1000, MIB, ""); // X, step 1
    d.step_end();
    d.step_start();
    d.push("OP_LAUNCH", "ATEN_START", "aten::mul", "0", "N/A", "", "");
    d.mem("MALLOC", "PTA", 0x2000, MIB, ",owner:PTA@activation"); // Y, step 2
    d.push("OP_LAUNCH", "ATEN_END", "aten::mul", "0", "N/A", "", "");
    d.mem("MALLOC", "PTA", 0x3000, 2 * MIB, ""); // Z, step 2
    d.step_end();
    d.step_start();
    d.push(
        "KERNEL_LAUNCH",
        "KERNEL_LAUNCH",
        "add_kernel",
        "0",
        "N/A",
        "",
        "",
    );
    let stack = "train.py(12): step\nmain.py(3): <module>\n";
    d.push(
        "MALLOC",
        "PTA",
        "N/A",
        "0",
        "0x0000000000004000",
        "{addr:0x4000,size:524288}",
        stack,
    ); // V, step 3
    d.step_end();
    d.step_start();
    d.mem("FREE", "PTA", 0x3000, 2 * MIB, ""); // Z freed in step 4
    d.mem("MALLOC", "PTA", 0x5000, MIB, ""); // W, step 4
    d.step_end();
    d.mem("MALLOC", "HAL", 0x9000, 4096, ",MID:7"); // HAL live at exit
    d.mem("MALLOC", "HAL", 0xa000, 64, ",MID:7");
    d.mem("FREE", "HAL", 0xa000, 64, ",MID:-1"); // 2025 style: FREE without device
    d.mem("FREE", "PTA", 0x4000, 524_288, ",shadow:true"); // V closed at exit
    d
}

#[test]
fn only_blocks_of_step_2_on_that_outlive_a_later_step_and_the_run_are_leaks() {
    let r = through_bus(&step_dump().text(), vec![Box::new(LeakLayer::new())]);
    assert_eq!(
        lines(&r, "Memory pool leaks"),
        &[
            "====== ERROR: Detected memory leaks on device 0 ======",
            "Direct Pytorch Caching memory pool leak of 1.000000 Mb(s) at 0x0000000000002000 in aten::mul at step 2. owner: PTA@activation",
            "Direct Pytorch Caching memory pool leak of 0.500000 Mb(s) at 0x0000000000004000 in kernel_0 (add_kernel) at step 3. owner: N/A",
            "    at train.py(12): step ← main.py(3): <module> (first frame in your code, Python stack)",
            "  by role: activation 1.000000 Mb(s) in 1, temp 0.500000 Mb(s) in 1",
            "====== SUMMARY: 1.500000 Mb(s) leaked in 2 allocation(s) ======",
        ]
    );
    // the log and the summary file get the call stacks too
    let full = all_lines(&r, "Memory pool leaks");
    assert_eq!(
        &full[4..7],
        &[
            "    Call Stack(Python):",
            "        train.py(12): step",
            "        main.py(3): <module>",
        ]
    );
    assert_eq!(
        lines(&r, "HAL memory live at exit"),
        &[
            "[client 42][device: 0]: Leak memory in Malloc operator, addr: 0x0000000000009000, size: 4096 bytes",
            "    at (no call stack recorded)",
            "1 HAL block(s), 0.003906 Mb(s), live at exit (driver memory: not a leak by msMemScope's rule, which logs it; gate it with --fail-on hal_at_exit>SIZE)",
        ]
    );
}

#[test]
fn offline_on_a_file_in_msmemscope_row_order_gives_the_same_report() {
    // msMemScope writes a block's rows when it dies: move every MALLOC/FREE row to the end
    let d = step_dump();
    let (mem, other): (Vec<&String>, Vec<&String>) = d
        .rows
        .iter()
        .partition(|r| r.contains(",MALLOC,") || r.contains(",FREE,"));
    let shuffled: Vec<String> = other
        .into_iter()
        .chain(mem.into_iter().rev())
        .cloned()
        .collect();
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("d.csv");
    std::fs::write(&p, format!("{HEADER}\n{}\n", shuffled.join("\n"))).unwrap();
    let (r, stats) = run_layers(
        &DumpFile::open(&p).unwrap(),
        &mut ReadOptions::default(),
        &mut || vec![Box::new(LeakLayer::new())],
    )
    .unwrap();
    assert_eq!(stats.rows, d.rows.len() as u64);
    let online = through_bus(&d.text(), vec![Box::new(LeakLayer::new())]);
    assert_eq!(
        lines(&r, "Memory pool leaks"),
        lines(&online, "Memory pool leaks")
    );
    assert!(r[0].title.ends_with("(pid 42)"));
}

#[test]
fn python_step_calls_reproduce_msmemscope_worked_example() {
    // 6 epochs each leaking 4000256 B, step() at the end of each: leaks of steps 2, 3, 4, 5
    let mut d = Dump::new();
    for e in 0..6u64 {
        d.mem("MALLOC", "PTA", 0x10_0000 * (e + 1), 4_000_256, "");
        d.push("SYSTEM", "STEP", &(e + 1).to_string(), "0", "N/A", "", "");
    }
    let r = through_bus(&d.text(), online_layers(&AnalysisConfig::default()));
    let l = lines(&r, "Memory pool leaks");
    assert_eq!(l.len(), 6);
    for (i, step) in [2, 3, 4, 5].iter().enumerate() {
        assert!(
            l[1 + i].contains("3.814941 Mb(s)")
                && l[1 + i].ends_with(&format!("at step {step}. owner: N/A")),
            "{}",
            l[1 + i]
        );
    }
    assert_eq!(
        l[5],
        "====== SUMMARY: 15.259766 Mb(s) leaked in 4 allocation(s) ======"
    );
}

#[test]
fn a_candidate_freed_later_is_not_reported_and_no_steps_means_no_pool_leaks() {
    let mut d = Dump::new();
    for _ in 0..3 {
        d.step_start();
        d.step_end();
    }
    d.step_start();
    d.mem("MALLOC", "ATB", 0x10, 100, "");
    d.step_end();
    for _ in 0..3 {
        d.step_start();
        d.step_end();
    }
    d.mem("FREE", "ATB", 0x10, 100, "");
    let r = through_bus(&d.text(), vec![Box::new(LeakLayer::new())]);
    assert!(lines(&r, "Memory pool leaks")[0]
        .starts_with("No memory pool leaks detected (7 step(s) ended"));
    assert_eq!(
        lines(&r, "HAL memory live at exit"),
        &["Not recorded: no driver (HAL) row was seen."]
    );
}

fn mark(d: &mut Dump, dev: &str) {
    d.push("MSTX", "Mark", "\"ckpt\"", dev, "N/A", "", "");
}

#[test]
fn range_mode_records_hal_mallocs_between_a_and_b_and_drops_those_freed_before_c() {
    let mut d = Dump::new();
    d.mem("MALLOC", "HAL", 0x100, MIB, ""); // before A: ignored
    mark(&mut d, "0"); // A
    let p1 = d.mem("MALLOC", "HAL", 0x200, MIB, ""); // recorded, freed only after C
    d.mem("MALLOC", "HAL", 0x300, 2 * MIB, ""); // recorded, freed between B and C
    d.mem("MALLOC", "PTA", 0x400, MIB, ""); // not HAL
    mark(&mut d, "0"); // B
    d.mem("MALLOC", "HAL", 0x500, MIB, ""); // after B: not recorded
    d.mem("FREE", "HAL", 0x300, 2 * MIB, "");
    mark(&mut d, "0"); // C
    d.mem("FREE", "HAL", 0x200, MIB, ""); // after C: ignored
    mark(&mut d, "1"); // device 1 has a single mark
    let r = through_bus(&d.text(), vec![Box::new(RangeLeakLayer::new("ckpt", 0))]);
    assert_eq!(
        lines(&r, "HAL leaks in the range"),
        &[
            "Leak Analysis Results for the Custom Range:".to_owned(),
            "====== ERROR: Detected memory leaks on device 0 ======".to_owned(),
            format!(
                "Direct Hal memory leak of 1.000000 Mb(s) at 0x0000000000000200 in Index {p1}."
            ),
            "ERROR: Device 1 has fewer than 3 data points: 1 mark(s) named \"ckpt\".".to_owned(),
        ]
    );
    let r = through_bus(&d.text(), vec![Box::new(RangeLeakLayer::new("ckpt", 1))]);
    assert!(lines(&r, "HAL leaks in the range")[1]
        .starts_with("INFO: Device 0: marks 1..3 are out of bounds"));
}

#[test]
fn the_real_2025_dump_has_no_pool_leaks_without_ended_steps() {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/fixtures/msmemscope/memscope_dump_20250428113810.csv");
    if !p.is_file() {
        eprintln!("SKIP: {} not found", p.display());
        return;
    }
    let (r, _) = run_layers(
        &DumpFile::open(&p).unwrap(),
        &mut ReadOptions::default(),
        &mut || vec![Box::new(LeakLayer::new())],
    )
    .unwrap();
    assert_eq!(r.len(), 4); // two processes, two sections each
    assert!(r[0].lines[0].starts_with("No memory pool leaks detected (0 step(s) ended"));
}

#[test]
fn a_leak_outside_any_op_names_the_python_frame_of_its_allocation() {
    let mut d = Dump::new();
    for step in 1..=3 {
        d.step_start();
        if step == 2 {
            d.push(
                "MALLOC",
                "PTA",
                "N/A",
                "0",
                "0x0000000000007000",
                "{addr:0x7000,size:1048576}",
                "/w/train.py(305): main\n/w/train.py(330): <module>\n",
            );
        }
        d.step_end();
    }
    let r = through_bus(&d.text(), vec![Box::new(LeakLayer::new())]);
    let l = lines(&r, "Memory pool leaks");
    assert!(
        l[1].contains("in /w/train.py(305): main at step 2"),
        "{l:?}"
    );
    assert_eq!(
        l[2],
        "    called from /w/train.py(330): <module> (first frame in your code, Python stack)"
    );
    let full = all_lines(&r, "Memory pool leaks");
    assert!(
        full.iter()
            .any(|x| x == "        /w/train.py(330): <module>"),
        "{full:?}"
    );
}

#[test]
fn a_long_leak_list_shows_its_first_leaks_counts_the_rest_and_ends_with_the_summary() {
    let mut d = Dump::new();
    for step in 1..=30u64 {
        d.step_start();
        d.mem("MALLOC", "PTA", 0x10_0000 * step, MIB, "");
        d.step_end();
    }
    let r = through_bus(&d.text(), vec![Box::new(LeakLayer::new())]);
    let l = lines(&r, "Memory pool leaks");
    // ERROR line, 10 leaks, the count of the 18 others, SUMMARY
    assert_eq!(l.len(), 13, "{l:?}");
    assert_eq!(l[11], "… 18 more leak(s), 18.000000 Mb(s), at steps 12–29");
    assert_eq!(
        l[12],
        "====== SUMMARY: 28.000000 Mb(s) leaked in 28 allocation(s) ======"
    );
    assert_eq!(
        all_lines(&r, "Memory pool leaks").len(),
        30,
        "every leak in the full list"
    );
}

#[test]
fn a_leak_with_no_op_and_no_stack_says_so_instead_of_n_a() {
    let mut d = Dump::new();
    for _ in 0..3 {
        d.step_start();
        d.mem("MALLOC", "PTA", 0x10_0000 * d.rows.len() as u64, MIB, "");
        d.step_end();
    }
    let r = through_bus(&d.text(), vec![Box::new(LeakLayer::new())]);
    let l = lines(&r, "Memory pool leaks");
    assert!(
        l[1].contains(" in (no op, kernel or call stack recorded) at step 2."),
        "{l:?}"
    );
    assert!(l.iter().all(|x| !x.contains(" in N/A ")), "{l:?}");
}

#[test]
fn a_run_that_does_not_trace_hal_says_nothing_about_hal_memory() {
    let r = through_bus(
        &step_dump().text(),
        vec![Box::new(LeakLayer::without_hal())],
    );
    assert!(
        r.iter().all(|s| !s.title.starts_with("HAL memory")),
        "{r:?}"
    );
    let cfg = AnalysisConfig {
        hal_untraced: true,
        ..AnalysisConfig::default()
    };
    let r = through_bus(&step_dump().text(), online_layers(&cfg));
    assert!(
        r.iter().all(|s| !s.title.starts_with("HAL memory")),
        "{r:?}"
    );
}
