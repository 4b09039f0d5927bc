//! Issue 38: long jobs. Aggregate mode (`memscope run --aggregate`): per allocator, site and
//! owner totals instead of per-event rows — the same leak, peak and site answers as a full
//! run of the same job, and an output whose size follows the sites, not the events. The flight
//! recorder (`--keep`): `long_jobs/keep.rs`; the live view (`memscope top`): `long_jobs/top.rs`.

use memscope_tests::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[path = "long_jobs/keep.rs"]
mod keep;
#[path = "long_jobs/top.rs"]
mod top;

/// The aggregate files under a run's output, with their rows.
fn aggregates(out: &Path) -> Vec<(PathBuf, Vec<BTreeMap<String, String>>)> {
    let mut v = Vec::new();
    walk(out, &mut |p| {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.starts_with("memscope_aggregate_") && name.ends_with(".csv") {
            let mut r = csv::Reader::from_path(p).unwrap();
            let head: Vec<String> = r.headers().unwrap().iter().map(str::to_owned).collect();
            let rows = r
                .records()
                .map(|rec| {
                    head.iter()
                        .cloned()
                        .zip(rec.unwrap().iter().map(str::to_owned))
                        .collect()
                })
                .collect();
            v.push((p.to_path_buf(), rows));
        }
    });
    v
}

fn num(r: &BTreeMap<String, String>, k: &str) -> u64 {
    r[k].parse().unwrap_or_else(|_| panic!("{k}: {r:?}"))
}

/// Files named `prefix*` anywhere under `out`.
fn files_named(out: &Path, prefix: &str) -> usize {
    let mut n = 0;
    walk(out, &mut |p| {
        n += usize::from(
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(prefix)),
        );
    });
    n
}

/// From a full run's dump rows: per `(Device Id, Event Type)`, MALLOC rows, the peak of live
/// bytes (in ID order) and the bytes live at the end — what the aggregate lines must add up to.
fn from_rows(rows: &[Row]) -> BTreeMap<(String, String), (u64, u64, u64)> {
    let mut live: BTreeMap<(String, String), BTreeMap<String, u64>> = BTreeMap::new();
    let mut m: BTreeMap<(String, String), (u64, u64, u64)> = BTreeMap::new();
    let mut sorted: Vec<&Row> = rows.iter().collect();
    sorted.sort_by_key(|r| r["ID"].parse::<u64>().unwrap());
    for r in sorted {
        let key = (r["Device Id"].clone(), r["Event Type"].clone());
        let a = attrs(r);
        match r["Event"].as_str() {
            "MALLOC" if r["Device Id"] != "N/A" => {
                let size: u64 = a["size"].parse().unwrap();
                let l = live.entry(key.clone()).or_default();
                l.insert(r["Ptr"].clone(), size);
                let e = m.entry(key).or_default();
                e.0 += 1;
                e.2 = l.values().sum();
                e.1 = e.1.max(e.2);
            }
            "FREE" if a.get("shadow").is_none_or(|s| s != "true") => {
                if let Some(l) = live.get_mut(&key) {
                    l.remove(&r["Ptr"]);
                    m.get_mut(&key).unwrap().2 = l.values().sum();
                }
            }
            _ => {}
        }
    }
    m
}

/// Every CSV dump row under a run's output.
fn dump_rows(out: &Path) -> Vec<Row> {
    let mut rows = Vec::new();
    walk(out, &mut |p| {
        let n = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if n.starts_with("memscope_dump_") && n.ends_with(".csv") {
            rows.extend(read_csv(p));
        }
    });
    rows
}

/// An aggregate's lines summed per `(Device Id, Event Type)`: allocations, bytes at the peak,
/// live bytes at exit (what [`from_rows`] gives for a full run).
fn totals(lines: &[BTreeMap<String, String>]) -> BTreeMap<(String, String), (u64, u64, u64)> {
    let mut got: BTreeMap<(String, String), (u64, u64, u64)> = BTreeMap::new();
    for l in lines {
        let e = got
            .entry((l["Device Id"].clone(), l["Event Type"].clone()))
            .or_default();
        e.0 += num(l, "Allocations");
        e.1 += num(l, "Bytes At Peak");
        e.2 += num(l, "Live Bytes At Exit");
    }
    got
}

/// `line` with every run of digits (addresses, pids, timestamps) as `#`: two runs of one job
/// differ there only.
fn masked(line: &str) -> String {
    let mut out = String::new();
    for c in line.chars() {
        if c.is_ascii_hexdigit() && out.ends_with('#') {
            continue;
        }
        if c.is_ascii_digit() {
            out.push('#');
        } else {
            out.push(c);
        }
    }
    out
}

/// The console's leak lines, masked.
fn leak_lines(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .skip_while(|l| !l.contains("leaks"))
        .filter(|l| l.contains("leak"))
        .map(masked)
        .collect()
}

#[test]
fn aggregate_demo_gives_the_full_runs_leaks_and_peaks_with_no_rows_and_no_capture() {
    let py = python3();
    let train = repo_root().join("examples/sim-npu/train.py");
    let job = [
        py.to_str().unwrap(),
        train.to_str().unwrap(),
        "--steps",
        "6",
    ];
    let env = [("SIM_NPU_DIR", sim_npu_dir().to_str().unwrap().to_owned())];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let base = ["--adapters", "pta,mstx", "--call-stack", "python:8"];
    let full = memscope_run(&base, &job, &env);
    assert_eq!(full.code(), 0, "{}", full.stderr());
    let mut args = base.to_vec();
    args.push("--aggregate");
    let agg = memscope_run(&args, &job, &env);
    assert_eq!(agg.code(), 0, "{}", agg.stderr());
    let (full_err, agg_err) = (full.stderr(), agg.stderr());

    // the same leak answers, on the console
    let leaks = leak_lines(&full_err);
    assert!(leaks.len() > 2, "{full_err}");
    assert_eq!(leak_lines(&agg_err), leaks);
    // no rows, no capture; one aggregate file, said on the console
    assert_eq!(files_named(agg.out.path(), "memscope_dump_"), 0);
    assert_eq!(files_named(agg.out.path(), "memscope_capture_"), 0);
    assert!(
        agg_err.contains("events, no rows (--aggregate)"),
        "{agg_err}"
    );
    let files = aggregates(agg.out.path());
    assert_eq!(files.len(), 1, "{files:?}");
    assert!(
        agg_err.contains(&files[0].0.display().to_string()),
        "{agg_err}"
    );
    let lines = &files[0].1;

    // its lines add up to the full run's allocations, peaks and live bytes, per allocator
    assert_eq!(
        totals(lines),
        from_rows(&dump_rows(full.out.path())),
        "per allocator: allocations, peak, live at exit"
    );
    // the leaking site is the line with the blocks live at exit: train.py's leaking line
    let leak_line = script_line(
        "../../examples/sim-npu/train.py",
        "leaked.extend(caching.alloc(dev, [LEAK_BYTES]))",
    );
    let live: Vec<_> = lines
        .iter()
        .filter(|l| l["Event Type"] == "PTA" && num(l, "Live Blocks At Exit") > 0)
        .collect();
    assert_eq!(live.len(), 1, "{live:?}");
    assert!(
        live[0]["Site"].contains(&format!("train.py({leak_line}): main")),
        "{:?}",
        live[0]
    );
    // every leaked block is live at exit (the leak rule leaves the last step's out)
    assert!(
        num(live[0], "Live Blocks At Exit") as usize
            >= leaks
                .iter()
                .filter(|l| l.contains("Caching memory pool leak"))
                .count(),
        "{:?}",
        live[0]
    );
}

fn churn() -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("programs/churn_sites.c");
    compile(&[&src], "churn_sites", &[], false)
}

#[test]
fn aggregate_host_job_keeps_the_host_summaries_and_its_file_follows_sites_not_events() {
    let prog = churn();
    let run = |pairs: &str, extra: &[&str]| {
        let mut args = vec!["--adapters", "host", "--call-stack", "c:8"];
        args.extend(extra);
        let r = memscope_run(&args, &[prog.to_str().unwrap(), pairs], &[]);
        assert_eq!(r.code(), 0, "{}", r.stderr());
        r
    };
    let full = run("20000", &["--host-rows"]);
    let agg = run("20000", &["--aggregate"]);
    // the HOST leak and peak summaries are the full run's
    let section = |err: &str| -> Vec<String> {
        err.lines()
            .skip_while(|l| !l.contains("HOST"))
            .take_while(|l| !l.contains("Aggregate"))
            .filter(|l| !l.contains("Dump files") && !l.contains("memscope_dump_"))
            .map(masked)
            .collect()
    };
    let want = section(&full.stderr());
    assert!(!want.is_empty(), "{}", full.stderr());
    assert_eq!(section(&agg.stderr()), want);
    // allocations, peak and live bytes add up to the full run's HOST rows
    let files = aggregates(agg.out.path());
    assert_eq!(files.len(), 1);
    assert_eq!(totals(&files[0].1), from_rows(&dump_rows(full.out.path())));
    // one line per allocation site (the four of the loop, and stdio's buffer), however many
    // events: ten times the events, the same lines and the same file size
    let sites = |rows: &[BTreeMap<String, String>]| -> std::collections::BTreeSet<String> {
        rows.iter().map(|l| l["Site"].clone()).collect()
    };
    assert_eq!(sites(&files[0].1).len(), 5, "{:?}", sites(&files[0].1));
    let big = run("200000", &["--aggregate"]);
    let big_files = aggregates(big.out.path());
    assert_eq!(sites(&big_files[0].1), sites(&files[0].1));
    let size = |p: &Path| std::fs::metadata(p).unwrap().len() as f64;
    let ratio = size(&big_files[0].0) / size(&files[0].0);
    assert!(
        (0.9..1.2).contains(&ratio),
        "10x the events, the same file size: {ratio}"
    );
}

#[test]
fn aggregate_with_options_that_read_rows_is_refused_in_one_line_naming_them() {
    let d = tempfile::tempdir().unwrap();
    let summary = d.path().join("s.json");
    let o = std::process::Command::new(memscope_bin())
        .args(["run", "--aggregate", "--fail-on", "peak>1GiB", "--report"])
        .arg("--summary-json")
        .arg(&summary)
        .args(["--", "true"])
        .current_dir(d.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("--aggregate writes no rows")
            && err.contains("--fail-on, --summary-json, --report need:"),
        "{err}"
    );
    assert!(!summary.exists() && !d.path().join("memscopeDumpResults").exists());
    // options that only shape dump rows
    let o = std::process::Command::new(memscope_bin())
        .args([
            "run",
            "--aggregate",
            "--format",
            "db",
            "--analysis",
            "leaks,inefficient",
        ])
        .args(["--", "true"])
        .current_dir(d.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("--aggregate") && err.contains("--format db and --analysis inefficient"),
        "{err}"
    );
}

#[test]
fn aggregate_sums_what_would_be_written_so_events_and_steps_apply() {
    let py = python3();
    let train = repo_root().join("examples/sim-npu/train.py");
    let job = [
        py.to_str().unwrap(),
        train.to_str().unwrap(),
        "--steps",
        "4",
    ];
    let sim = sim_npu_dir();
    let env = [("SIM_NPU_DIR", sim.to_str().unwrap())];
    let pta_allocations = |extra: &[&str]| -> u64 {
        let mut args = vec!["--aggregate", "--adapters", "pta,mstx"];
        args.extend(extra);
        let r = memscope_run(&args, &job, &env);
        assert_eq!(r.code(), 0, "{}", r.stderr());
        aggregates(r.out.path())
            .iter()
            .flat_map(|(_, rows)| rows)
            .filter(|l| l["Event Type"] == "PTA")
            .map(|l| num(l, "Allocations"))
            .sum()
    };
    let all = pta_allocations(&[]);
    assert!(all > 0);
    // no MALLOC written, none summed; a selected step keeps fewer than all
    assert_eq!(pta_allocations(&["--events", "free,launch"]), 0);
    let step = pta_allocations(&["--steps", "2"]);
    assert!(step > 0 && step < all, "--steps 2: {step} of {all}");
}
