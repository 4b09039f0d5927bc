//! TEAM contract 3: the viewer exports (`memscope export --to memory-viz|perfetto|parquet`),
//! `memscope report` and `memscope analyze leaks|gap|decompose` read kept captures (`*.mscap`, a
//! process directory holding one, a run output directory) through the capture replay. A process
//! directory holding both dumps and a capture is read from the capture, so a run with HOST rows
//! off (the default) still gives its HOST events — as many as `memscope export --to csv` writes
//! from the same capture.

mod export_common;

use std::path::{Path, PathBuf};

use export_common::*;
use memscope_tests::*;

/// The `exported N event(s)` of an export's summary line.
fn exported_events(stdout: &str) -> u64 {
    let l = stdout
        .lines()
        .find(|l| l.starts_with("exported "))
        .unwrap_or_else(|| panic!("no summary line: {stdout}"));
    l["exported ".len()..]
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// Every row of the CSV dumps under `dir`.
fn csv_rows(dir: &Path) -> Vec<memscope_tests::Row> {
    let mut rows = Vec::new();
    walk(dir, &mut |p| {
        let n = p.file_name().unwrap().to_str().unwrap();
        if n.starts_with("memscope_dump_") && n.ends_with(".csv") {
            rows.extend(read_csv(p));
        }
    });
    rows
}

fn capture_of(dir: &Path) -> PathBuf {
    let mut v = Vec::new();
    walk(dir, &mut |p| {
        if p.extension().is_some_and(|e| e == "mscap") {
            v.push(p.to_path_buf());
        }
    });
    assert_eq!(v.len(), 1, "one capture in {}", dir.display());
    v.remove(0)
}

/// The sim-npu demo (`train.py --steps STEPS`) under `memscope run ARGS`; it must succeed.
fn demo(args: &[&str], steps: &str) -> Run {
    let train = repo_root().join("examples/sim-npu/train.py");
    let run = memscope_run(
        args,
        &["python3", train.to_str().unwrap(), "--steps", steps],
        &[("SIM_NPU_DIR", sim_npu_dir().to_str().unwrap())],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    run
}

/// A host-only run with HOST rows off: the dumps have no HOST row, the capture has them all.
fn host_run() -> Run {
    let prog = program("host_mix");
    let run = memscope_run(
        &["--adapters", "host", "--call-stack", "c:4"],
        &[prog.to_str().unwrap(), "2000"],
        &[],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(run.rows().iter().all(|r| r["Event Type"] != "HOST"));
    run
}

/// `(all rows, HOST rows)` that `memscope export --to csv` writes from the run's capture.
fn csv_from_capture(run: &Run) -> (usize, usize) {
    let out = tempfile::tempdir().unwrap();
    export("csv", &[&capture_of(run.out.path())], out.path());
    let rows = csv_rows(out.path());
    let host = rows.iter().filter(|r| r["Event Type"] == "HOST").count();
    assert!(host > 4000, "{host} HOST rows");
    (rows.len(), host)
}

#[test]
fn perfetto_of_a_run_with_host_rows_off_replays_the_host_events_of_the_capture() {
    let run = host_run();
    let (rows, _) = csv_from_capture(&run);
    let out = run.out.path().join("host.pftrace");
    let stdout = export("perfetto", &[run.out.path()], &out);
    assert_eq!(exported_events(&stdout), rows as u64, "{stdout}");
    assert!(stdout.contains("of 1 process(es)"), "{stdout}");
    let v = py_check("check_perfetto.py", &[out.to_str().unwrap()]);
    let counters = v["counters"].as_object().unwrap();
    assert!(
        counters.keys().any(|k| k.contains("host HOST")),
        "a HOST counter track: {:?}",
        counters.keys()
    );
    // the capture file itself as input gives the same events
    let out2 = run.out.path().join("host2.pftrace");
    let stdout = export("perfetto", &[&capture_of(run.out.path())], &out2);
    assert_eq!(exported_events(&stdout), rows as u64, "{stdout}");
}

#[test]
fn parquet_of_a_run_with_host_rows_off_holds_the_host_rows_of_the_capture() {
    let run = host_run();
    let (rows, host) = csv_from_capture(&run);
    let ds = run.out.path().join("ds");
    // a process directory (dumps beside the capture) as input
    let proc_dir = capture_of(run.out.path()).parent().unwrap().to_path_buf();
    let stdout = export("parquet", &[&proc_dir], &ds);
    assert_eq!(exported_events(&stdout), rows as u64, "{stdout}");
    let v = py_check("count_parquet.py", &[ds.to_str().unwrap()]);
    assert_eq!(v["rows"].as_u64().unwrap(), rows as u64, "{v}");
    assert_eq!(v["by_type"]["HOST"].as_u64().unwrap(), host as u64, "{v}");
}

#[test]
fn report_of_a_run_with_host_rows_off_reads_the_capture() {
    let run = host_run();
    let (rows, _) = csv_from_capture(&run);
    let html = run.out.path().join("r.html");
    let o = memscope(&[
        "report",
        run.out.path().to_str().unwrap(),
        "-o",
        html.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("1 capture(s)"), "{stdout}");
    let page = std::fs::read_to_string(&html).unwrap();
    let open = "<script type=\"application/json\" id=\"report-data\">";
    let i = page.find(open).expect("data block") + open.len();
    let j = i + page[i..].find("</script>").unwrap();
    let data: serde_json::Value = serde_json::from_str(&page[i..j]).unwrap();
    let r = &data["runs"][0];
    assert_eq!(
        r["events"].as_u64().unwrap(),
        rows as u64,
        "{}",
        r["events"]
    );
    assert_eq!(r["processes"].as_array().unwrap().len(), 1);
    let p = &r["processes"][0];
    assert_eq!(p["events"].as_u64().unwrap(), rows as u64);
    assert!(p["devices"].to_string().contains("cpu"), "{}", p["devices"]);
}

/// memory_viz draws NPU devices only (HOST memory has no place in a PyTorch snapshot): a
/// host-only capture is refused with one line, and an NPU process's capture gives the snapshot
/// its dumps give.
#[test]
fn memory_viz_of_a_capture_equals_that_of_its_dumps_and_host_only_runs_have_no_npu_trace() {
    let run = host_run();
    let o = memscope(&[
        "export",
        "--to",
        "memory-viz",
        run.out.path().to_str().unwrap(),
        "-o",
        run.out.path().join("h.pickle").to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("no process of the input has NPU memory rows"),
        "{err}"
    );

    // a PTA + HOST run: the snapshot comes from the capture, NPU 0 and device-less events
    let run = demo(&["--adapters", "pta,mstx,host", "--call-stack", "c:4"], "3");
    // the job's processes (the interpreter's children too), each with its capture; one uses
    // NPU 0
    let mut npu_proc = None;
    walk(run.out.path(), &mut |p| {
        let n = p.file_name().unwrap().to_str().unwrap();
        if n.starts_with("memscope_dump_") && read_csv(p).iter().any(|r| r["Device Id"] == "0") {
            npu_proc = Some(p.ancestors().nth(3).unwrap().to_path_buf());
        }
    });
    let npu_proc = npu_proc.expect("a process with NPU rows");
    let capture = capture_of(&npu_proc);
    // the same process from its dumps alone (PTA rows are in the dumps whatever --host-rows)
    let dumps = tempfile::tempdir().unwrap();
    let copy = dumps.path().join(npu_proc.file_name().unwrap());
    walk(&npu_proc, &mut |p| {
        if p.extension().is_some_and(|e| e == "csv") {
            let to = copy.join(p.strip_prefix(&npu_proc).unwrap());
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            std::fs::copy(p, to).unwrap();
        }
    });
    let from_dumps = dumps.path().join("dumps.pickle");
    export("memory-viz", &[&copy], &from_dumps);
    let from_capture = dumps.path().join("capture.pickle");
    let stdout = export("memory-viz", &[&capture], &from_capture);
    assert!(stdout.contains("of 1 process(es)"), "{stdout}");
    let from_run = dumps.path().join("run.pickle");
    export("memory-viz", &[run.out.path()], &from_run);
    let bytes = std::fs::read(&from_capture).unwrap();
    assert_eq!(bytes, std::fs::read(&from_dumps).unwrap());
    assert_eq!(bytes, std::fs::read(&from_run).unwrap());
    let v = py_check("check_memory_viz.py", &[from_capture.to_str().unwrap()]);
    assert!(v["entries"][0].as_u64().unwrap() > 10, "{v}");
}

/// Distinct events (pid, ID) of CSV rows: device-less rows are copied into every device file.
fn distinct(rows: &[memscope_tests::Row]) -> usize {
    rows.iter()
        .map(|r| (r["Process Id"].clone(), r["ID"].clone()))
        .collect::<std::collections::HashSet<_>>()
        .len()
}

/// Issue 27 item 5, the rule: the dumps (and `export --to csv|db`, which makes them again)
/// hold what `--device` asked for; the viewer exports hold every event recorded — here the
/// pinned host memory (HOST on cpu) that the default `--device npu` keeps out of the dumps.
#[test]
fn viewer_exports_hold_every_recorded_event_and_dumps_what_device_asked_for() {
    let run = demo(&["--adapters", "pta,mstx,hal,acl"], "4");
    let dumped = run.rows();
    assert!(
        dumped.iter().all(|r| r["Device Id"] != "cpu"),
        "--device npu"
    );
    let d = distinct(&dumped);
    let out = tempfile::tempdir().unwrap();
    export("csv", &[&capture_of(run.out.path())], out.path());
    assert_eq!(
        distinct(&csv_rows(out.path())),
        d,
        "export --to csv = the dumps"
    );
    let ds = run.out.path().join("ds");
    let stdout = export("parquet", &[run.out.path()], &ds);
    let e = exported_events(&stdout);
    let v = py_check("count_parquet.py", &[ds.to_str().unwrap()]);
    assert_eq!(v["rows"].as_u64().unwrap(), e, "{v}");
    let host = v["by_type"]["HOST"].as_u64().unwrap_or(0);
    assert!(host > 0, "the demo pins host memory: {v}");
    assert_eq!(
        e,
        d as u64 + host,
        "the Parquet dataset = the dumps + the pinned HOST rows --device left out: {v}"
    );
}

#[test]
fn analyze_leaks_gap_and_decompose_of_a_capture_equal_those_of_its_dump() {
    let run = demo(&["-q"], "4");
    let cap = capture_of(run.out.path());
    let mut dumps = Vec::new();
    walk(run.out.path(), &mut |p| {
        if p.extension().is_some_and(|e| e == "csv") && p.to_string_lossy().contains("/dump/") {
            dumps.push(p.to_path_buf());
        }
    });
    assert_eq!(dumps.len(), 1, "{dumps:?}");
    let analyze = |what: &str, input: &Path| {
        let o = std::process::Command::new(memscope_bin())
            .args(["analyze", what])
            .arg(input)
            .output()
            .unwrap();
        assert_ok(&o, &format!("analyze {what} {}", input.display()))
    };
    for what in ["leaks", "gap"] {
        let text = analyze(what, &cap);
        assert_eq!(text, analyze(what, &dumps[0]), "{what}");
        assert!(!text.contains("not a memscope dump"), "{text}");
    }
    assert!(analyze("leaks", &cap).contains("leak of 4.000000 Mb(s)"));
    // decompose of the capture has the owner rows the dump has too
    let d = tempfile::tempdir().unwrap();
    let text = std::process::Command::new(memscope_bin())
        .args(["analyze", "decompose"])
        .arg(&cap)
        .arg("-o")
        .arg(d.path())
        .output()
        .unwrap();
    assert!(
        assert_ok(&text, "analyze decompose <capture>").contains("Memory decomposition"),
        "decompose of a capture"
    );
    // a capture cut before its first whole block holds no event, and says so
    let cut = d.path().join("cut.mscap");
    std::fs::write(&cut, &std::fs::read(&cap).unwrap()[..1000]).unwrap();
    let said = analyze("leaks", &cut);
    assert!(
        said.contains("cut.mscap: no events (the capture holds none)"),
        "{said}"
    );
    // the analysis and its summary replay it twice: the warning comes once
    let o = std::process::Command::new(memscope_bin())
        .args(["analyze", "leaks"])
        .arg(&cut)
        .args(["--fail-over", "0"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.matches("incomplete capture").count(), 1, "{err}");
    // inefficient annotates dump rows: a capture gets one line naming what to give instead
    let o = std::process::Command::new(memscope_bin())
        .args(["analyze", "inefficient"])
        .arg(&cap)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("is a capture; inefficient annotates a dump file"),
        "{err}"
    );
}

/// A capture of format 2, written by main `d92229d` before the CANN records moved to their
/// adapters (`memscope run --level op,kernel --events alloc,free,launch,access --device npu,cpu`
/// of `train.py --steps 2` with ATB), exports the rows that build exported from it.
#[test]
fn analyze_decompose_of_a_run_directory_reads_the_capture_of_a_host_only_process() {
    let run = host_run();
    let (rows, _) = csv_from_capture(&run);
    let d = tempfile::tempdir().unwrap();
    let o = std::process::Command::new(memscope_bin())
        .args(["analyze", "decompose"])
        .arg(run.out.path())
        .arg("-o")
        .arg(d.path())
        .output()
        .unwrap();
    let text = assert_ok(&o, "analyze decompose <run dir>");
    // the process's line: rank, pid, device, rows analysed, the largest owner at the peak
    let line = text
        .lines()
        .find(|l| l.contains(" cpu "))
        .unwrap_or_else(|| panic!("no process line: {text}"));
    let analysed: usize = line.split_whitespace().nth(3).unwrap().parse().unwrap();
    assert_eq!(analysed, rows, "{line}");
    assert!(line.contains("(no owner) at "), "{line}");
    assert!(text.contains("sorted by peak (no NPU pool rows)"), "{text}");
}

#[test]
fn a_format_2_capture_still_exports_the_rows_it_held() {
    let fx = repo_root().join("tests/fixtures/capture-v2");
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("x");
    export("csv", &[&fx.join("capture_v2_cann.mscap")], &dir);
    let mut got = Vec::new();
    walk(&dir, &mut |p| {
        let n = p.file_name().unwrap().to_str().unwrap();
        if n.starts_with("memscope_dump_") && n.ends_with(".csv") {
            let dev = p.parent().unwrap().parent().unwrap().file_name().unwrap();
            got.push((dev.to_str().unwrap().to_owned(), std::fs::read(p).unwrap()));
        }
    });
    got.sort();
    let want = [
        ("device_0", std::fs::read(fx.join("device_0.csv")).unwrap()),
        (
            "device_cpu",
            std::fs::read(fx.join("device_cpu.csv")).unwrap(),
        ),
    ];
    assert_eq!(
        got.len(),
        2,
        "{:?}",
        got.iter().map(|g| &g.0).collect::<Vec<_>>()
    );
    for ((d, g), (wd, w)) in got.iter().zip(&want) {
        assert_eq!(d, wd);
        assert!(
            g == w,
            "{d}: the export differs from the rows of format 2:\n{}",
            String::from_utf8_lossy(g)
        );
    }
}

/// A run whose capture was cut short (no trailer) is read from its dumps, with a warning: the
/// report, the diff and the exports do not take it for an empty run (a `--fail-over` gate
/// would pass on it); nor does a diff whose `--type`/`--device` keeps none of its blocks.
#[test]
fn a_run_whose_capture_is_cut_short_is_read_from_its_dumps() {
    let run = demo(&[], "3");
    let cap = capture_of(run.out.path());
    let len = std::fs::metadata(&cap).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&cap)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    let dir = run.out.path().to_str().unwrap();
    let html = run.out.path().join("r.html");
    let o = memscope(&["report", dir, "-o", html.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("incomplete capture"), "{err}");
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("1 dump file(s)"),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    // a --type or --device that keeps nothing is a mistake, not "no growth" (a gate would pass)
    let gate = ["--between", "step:1", "end", "--fail-over", "1B"];
    for (f, v) in [("--type", "PTAX"), ("--device", "npu:7")] {
        let o = memscope(&[&["diff", dir][..], &gate, &[f, v]].concat());
        let err = String::from_utf8_lossy(&o.stderr);
        // after the incomplete capture's warning, the error on one line
        let last = err.lines().last().unwrap_or_default();
        let named = last.starts_with(&format!("memscope: {f} {v}: ")) && last.contains("HAL");
        assert!(o.status.code() == Some(2) && named, "{f} {v}: {err}");
    }
    let o = memscope(&["diff", dir, "--between", "step:1", "end", "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let d: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let totals = d["pairs"][0]["totals"].as_array().unwrap();
    assert!(
        totals
            .iter()
            .any(|t| t["allocator"] == "HAL" && t["b_bytes"].as_u64() > Some(0)),
        "{d}"
    );
}
