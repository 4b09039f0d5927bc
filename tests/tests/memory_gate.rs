//! Issue 24, memory as a test on the command line: `memscope diff` between runs and between
//! points of one run (`--at`, `--between`, `--by`, text and `--json`), limits that fail the
//! command with their own exit code (`run --fail-on`, `analyze leaks --fail-over`, `diff
//! --fail-over`) with the job's own code kept, and `--summary-json` validated by
//! `schemas/memscope_summary.schema.json` (the diff's JSON by `schemas/memscope_diff.schema.json`).

mod export_common;

use memscope_tests::*;
use std::path::Path;
use std::process::{Command, Output};

/// The documented exit code of a crossed limit.
const EXIT_LIMIT: i32 = 23;

fn train() -> String {
    repo_root()
        .join("examples/sim-npu/train.py")
        .display()
        .to_string()
}

/// The demo, with or without its leak, Python stacks on every row.
fn demo(extra: &[&str], job: &[&str]) -> Run {
    let mut args = vec!["-q", "--call-stack", "python:8"];
    args.extend_from_slice(extra);
    let t = train();
    let mut prog = vec!["python3", t.as_str()];
    prog.extend_from_slice(job);
    memscope_run(
        &args,
        &prog,
        &[("SIM_NPU_DIR", sim_npu_dir().to_str().unwrap())],
    )
}

fn memscope(args: &[&str]) -> Output {
    Command::new(memscope_bin())
        .args(args)
        .output()
        .expect("run memscope")
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// Validates `doc` against `schemas/<schema>` (jsonschema, as the run index test does).
fn valid(schema: &str, doc: &Path) -> serde_json::Value {
    let s = repo_root().join("schemas").join(schema);
    let v = export_common::py_check(
        "check_schema.py",
        &[s.to_str().unwrap(), doc.to_str().unwrap()],
    );
    assert_eq!(v["valid"], true);
    serde_json::from_slice(&std::fs::read(doc).unwrap()).unwrap()
}

fn leak_line() -> String {
    format!(
        "train.py({}): alloc",
        script_line_in(
            "examples/sim-npu/train.py",
            "self.npu.mstxMemRegionsRegister"
        )
    )
}

fn script_line_in(file: &str, needle: &str) -> usize {
    let t = std::fs::read_to_string(repo_root().join(file)).unwrap();
    t.lines().position(|l| l.contains(needle)).unwrap() + 1
}

#[test]
fn diff_of_the_leaking_demo_against_its_fixed_twin_puts_the_leaking_line_first() {
    let base = demo(&[], &["--no-leak"]);
    let leak = demo(&[], &[]);
    let (a, b) = (base.out.path(), leak.out.path());
    let o = memscope(&["diff", a.to_str().unwrap(), b.to_str().unwrap()]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    // the first site row is the pool's: the 8 blocks of steps 3..10, 4 MiB each, all live at
    // the end (the leak analysis calls 7 of them leaks: the last step's is not judged)
    let first = out
        .lines()
        .find(|l| l.contains("blocks  ("))
        .expect("a site row");
    assert!(first.contains(&leak_line()), "{out}");
    assert!(
        first.contains("+32.0 MiB") && first.contains("+8 blocks"),
        "{first}"
    );
    assert!(out.contains("npu:0 PTA: 0 B -> 32.0 MiB"), "{out}");
    // the same at the end of step 9: 7 blocks
    let o = memscope(&[
        "diff",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--at",
        "step:9",
        "--json",
    ]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let path = base.out.path().join("diff.json");
    std::fs::write(&path, &out).unwrap();
    let d = valid("memscope_diff.schema.json", &path);
    let row = &d["pairs"][0]["rows"][0];
    assert_eq!(row["allocator"], "PTA");
    assert!(
        // where: the allocating helper and its caller (issue 35: one rule in every view)
        row["key"]
            .as_str()
            .unwrap()
            .contains(&format!("{} ← train.py(", leak_line())),
        "{row}"
    );
    assert_eq!(
        (row["delta_bytes"].as_i64(), row["delta_blocks"].as_i64()),
        (Some(7 * (4 << 20)), Some(7))
    );
    // grouped by owner: the PTA pool's chain
    let o = memscope(&[
        "diff",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--by",
        "owner",
        "--type",
        "PTA",
        "--json",
    ]);
    let d: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let rows = d["pairs"][0]["rows"].as_array().unwrap();
    assert!(rows.iter().all(|r| r["allocator"] == "PTA"), "{d}");
    assert_eq!(rows[0]["key"], "PTA");
}

#[test]
fn diff_between_two_steps_marks_and_times_of_one_run_shows_one_step_of_growth() {
    let leak = demo(&[], &[]);
    let out = leak.out.path().to_str().unwrap().to_owned();
    for (p1, p2) in [("step:3", "step:4"), ("step:8", "step:9")] {
        let o = memscope(&["diff", &out, "--between", p1, p2, "--type", "PTA"]);
        let (text, err) = text(&o);
        assert!(o.status.success(), "{err}");
        let first = text.lines().find(|l| l.contains("blocks  (")).unwrap();
        assert!(
            first.contains("+4.0 MiB") && first.contains("+1 blocks"),
            "{text}"
        );
        assert!(first.contains(&leak_line()));
        assert!(text.contains("(+4.0 MiB, +1 block)"), "{text}");
    }
    // marks: the 3rd and 4th "op:backward" marks of the Python msTX module (steps 3 and 4)
    // bracket one step's leak; a time between the rows of the file does too
    let o = memscope(&[
        "diff",
        &out,
        "--between",
        "mark:op:backward#3",
        "mark:op:backward#5",
        "--json",
    ]);
    let d: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let pta: Vec<&serde_json::Value> = d["pairs"][0]["totals"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["allocator"] == "PTA")
        .collect();
    assert_eq!(pta[0]["delta_bytes"], 2 * (4 << 20), "{d}");
    let rows = leak.rows();
    let ts = |step: &str| -> u64 {
        let ends: Vec<&Row> = rows
            .iter()
            .filter(|r| r["Event Type"] == "Range_end")
            .collect();
        ends[step.parse::<usize>().unwrap() - 1]["Timestamp(ns)"]
            .parse()
            .unwrap()
    };
    let (t5, t7) = (format!("ts:{}", ts("5")), format!("ts:{}", ts("7")));
    let o = memscope(&["diff", &out, "--between", &t5, &t7, "--json"]);
    let d: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let row = &d["pairs"][0]["rows"][0];
    assert_eq!(
        (row["delta_bytes"].as_i64(), row["delta_blocks"].as_i64()),
        (Some(2 * (4 << 20)), Some(2)),
        "{d}"
    );
    // a point the run never reaches is an error naming it
    let o = memscope(&["diff", &out, "--between", "step:3", "step:40"]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2));
    assert!(err.contains("step:40 is never reached"), "{err}");
    for (args, needle) in [
        (vec!["--at", "later"], "expected peak, end"),
        (vec!["--by", "colour"], "--by colour"),
        (vec!["--device", "gpu"], "--device gpu"),
        (vec!["--fail-over", "lots"], "--fail-over"),
    ] {
        let mut a = vec!["diff", out.as_str(), out.as_str()];
        a.extend(args);
        let o = memscope(&a);
        let (_, err) = text(&o);
        assert_eq!(o.status.code(), Some(2), "{a:?}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(needle), "{err}");
    }
}

#[test]
fn run_fail_on_exits_23_naming_the_limit_by_how_much_and_where_and_writes_a_valid_summary() {
    let dir = tempfile::tempdir().unwrap();
    // in a folder that does not exist yet, as the README's CI step writes it into its -o folder
    let summary = dir.path().join("mem/summary.json");
    let run = demo(
        &[
            "--fail-on",
            "leaks.npu:0.PTA>1MiB,peak.npu:0>40GiB,peak.host>2GiB",
            "--summary-json",
            summary.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(run.code(), EXIT_LIMIT, "{}", run.stderr());
    let err = run.stderr();
    let line = err
        .lines()
        .find(|l| l.contains("limit leaks.npu:0.PTA>1MiB crossed"))
        .unwrap_or_else(|| panic!("{err}"));
    assert!(
        line.contains("28.0 MiB (npu:0 PTA), 27.0 MiB over 1.0 MiB"),
        "{line}"
    );
    assert!(line.contains(&leak_line()), "{line}");
    assert!(
        err.contains("exit code 23 (the job exited with 0)"),
        "{err}"
    );
    assert!(!err.contains("peak.npu:0>40GiB crossed"), "{err}");
    let s = valid("memscope_summary.schema.json", &summary);
    assert_eq!(
        (s["command"].as_str(), s["exit_code"].as_i64()),
        (Some("run"), Some(23))
    );
    assert_eq!(s["job"]["exit_code"], 0);
    let p = &s["inputs"][0]["processes"][0];
    assert_eq!(p["dropped"], 0);
    assert!(p["counts"]["MALLOC"].as_u64().unwrap() > 0);
    let pta = p["allocators"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["allocator"] == "PTA")
        .unwrap();
    assert_eq!(pta["leaked_bytes"], 7 * (4 << 20));
    assert_eq!(pta["live_at_exit_blocks"], 8);
    assert!(pta["reserved_peak_bytes"].as_u64().unwrap() >= 1 << 30);
    assert_eq!(s["crossed"].as_array().unwrap().len(), 1);
    // the fixed twin keeps every limit: the job's code
    let ok = demo(&["--fail-on", "leaks>1MiB"], &["--no-leak"]);
    assert_eq!(ok.code(), 0, "{}", ok.stderr());
    // a limit that looks at no allocator of the run is not checked, and says so with what
    // there was ("not recorded", never "kept")
    let typo = demo(&["--fail-on", "peak.npu:0.PTa>1"], &["--no-leak"]);
    assert_eq!(typo.code(), 0, "{}", typo.stderr());
    assert!(
        typo.stderr()
            .contains("limit \"peak.npu:0.PTa>1\": not recorded")
            && typo.stderr().contains("npu:0.PTA"),
        "{}",
        typo.stderr()
    );
    // --fail-exit-code, and a job that fails keeps its own code (its failure wins)
    let code = demo(&["--fail-on", "leaks>1MiB", "--fail-exit-code", "99"], &[]);
    assert_eq!(code.code(), 99, "{}", code.stderr());
    let failing = memscope_run(
        &["-q", "--fail-on", "peak>0"],
        &["python3", "-c", "import sys; sys.exit(5)"],
        &[],
    );
    assert_eq!(failing.code(), 5, "{}", failing.stderr());
    // bad limits and summary paths: one line, exit 2, nothing launched
    let file = dir.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let nowhere = file.join("sub/s.json");
    for (flag, bad, needle) in [
        ("--fail-on", "leak>1MiB", "unknown metric"),
        ("--fail-on", "peak.gpu:0>1", "unknown scope"),
        ("--fail-on", "peak>1XB", "is not a size"),
        ("--fail-on", "peak", "expected METRIC"),
        // what an unquoted `leaks>1MiB` leaves: the hint says to quote it
        ("--fail-on", "leaks", "quote it"),
        ("--fail-on", "dropped>1MiB", "is not a whole number"),
        ("--fail-on", "dropped.npu>0", "takes no scope"),
        (
            "--fail-on",
            "leaks>1MiB,,peak>2GiB",
            "item 2 of the list is empty",
        ),
        ("--fail-on", "live>0,live>0", "is given twice"),
        ("--fail-on", "peak>1.5", "is not a whole number of bytes"),
        (
            "--summary-json",
            nowhere.to_str().unwrap(),
            "is not a directory",
        ),
        (
            "--summary-json",
            dir.path().to_str().unwrap(),
            "is a directory",
        ),
    ] {
        let r = memscope_run(&[flag, bad], &["python3", "-c", "print('ran')"], &[]);
        assert_eq!(r.code(), 2, "{bad}: {}", r.stderr());
        assert_eq!(r.stderr().lines().count(), 1, "{}", r.stderr());
        assert!(r.stderr().contains(needle), "{}", r.stderr());
        assert!(!r.stdout().contains("ran"));
    }
}

#[test]
fn analyze_leaks_fail_over_and_diff_fail_over_exit_23_and_their_summaries_validate() {
    let leak = demo(&[], &[]);
    let base = demo(&[], &["--no-leak"]);
    let (l, b) = (
        leak.out.path().to_str().unwrap().to_owned(),
        base.out.path().to_str().unwrap().to_owned(),
    );
    let dir = tempfile::tempdir().unwrap();
    let s1 = dir.path().join("a.json");
    let o = memscope(&[
        "analyze",
        "leaks",
        &l,
        "--fail-over",
        "1MiB",
        "--summary-json",
        s1.to_str().unwrap(),
    ]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(EXIT_LIMIT), "{out}{err}");
    assert!(
        out.contains("pool leaks"),
        "the report is printed first: {out}"
    );
    assert!(err.contains("limit leaks>1MiB crossed"), "{err}");
    assert!(err.contains(&leak_line()), "{err}");
    let s = valid("memscope_summary.schema.json", &s1);
    assert_eq!(s["command"], "analyze");
    assert_eq!(s["exit_code"], 23);
    assert!(s["job"].is_null());
    // one dump file of the fixed twin keeps the limit
    let dumps = base.dumps(".csv");
    let o = memscope(&[
        "analyze",
        "leaks",
        dumps[0].to_str().unwrap(),
        "--fail-over",
        "1MiB",
    ]);
    assert!(o.status.success(), "{}", text(&o).1);
    // --mstx-info has no --fail-over; --fail-exit-code needs a limit
    let o = memscope(&[
        "analyze",
        "leaks",
        &l,
        "--mstx-info",
        "x",
        "--fail-over",
        "1",
    ]);
    assert_eq!(o.status.code(), Some(2));
    let o = memscope(&["analyze", "gap", &l, "--fail-exit-code", "9"]);
    assert_eq!(o.status.code(), Some(2));
    // diff --fail-over: the leak run grew the PTA pool by 32 MiB over its twin
    let s2 = dir.path().join("d.json");
    let o = memscope(&[
        "diff",
        &b,
        &l,
        "--fail-over",
        "16MiB",
        "--summary-json",
        s2.to_str().unwrap(),
    ]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(EXIT_LIMIT), "{err}");
    assert!(err.contains("limit growth>16MiB crossed"), "{err}");
    assert!(
        err.contains("32.0 MiB (npu:0 PTA), 16.0 MiB over 16.0 MiB"),
        "{err}"
    );
    let s = valid("memscope_summary.schema.json", &s2);
    assert_eq!(s["inputs"].as_array().unwrap().len(), 2);
    assert_eq!(s["diff"]["format"], "memscope-diff");
    let o = memscope(&["diff", &b, &l, "--fail-over", "2GiB"]);
    assert!(o.status.success());
}

#[test]
fn summaries_of_msmemscope_dumps_validate() {
    let fx = repo_root().join("../shared/fixtures/msmemscope");
    if !fx.is_dir() {
        eprintln!("SKIP: {} is absent", fx.display());
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for f in std::fs::read_dir(&fx).unwrap().flatten() {
        let p = f.path();
        if p.extension().is_none_or(|e| e != "csv") {
            continue;
        }
        let s = dir.path().join("s.json");
        let o = memscope(&[
            "analyze",
            "gap",
            p.to_str().unwrap(),
            "--summary-json",
            s.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}: {}", p.display(), text(&o).1);
        let v = valid("memscope_summary.schema.json", &s);
        let procs = v["inputs"][0]["processes"].as_array().unwrap();
        assert!(!procs.is_empty(), "{}", p.display());
        assert!(procs.iter().all(|p| p["rows"].as_u64().unwrap() > 0));
    }
}

#[test]
fn diff_and_export_of_a_folder_of_two_runs_take_one_run_each_not_two_ranks() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    for steps in ["3", "6"] {
        let o = Command::new(memscope_bin())
            .args(["run", "-q", "-o"])
            .arg(&out)
            .args(["--", "python3", &train(), "--steps", steps])
            .env("SIM_NPU_DIR", sim_npu_dir())
            .output()
            .unwrap();
        assert!(o.status.success(), "{o:?}");
    }
    let o = out.to_str().unwrap();
    // run 1 (3 steps) against run 2 (6 steps): one pair, the 3 more leaked 4 MiB blocks
    let (stdout, stderr) = text(&memscope(&["diff", o, o, "--run", "1,2"]));
    assert!(
        stderr.contains("using run 1:") && stderr.contains("using run 2:"),
        "{stderr}"
    );
    // one-process runs have no rank (the run index gives none): one pair of pids
    let pairs = stdout
        .lines()
        .filter(|l| l.starts_with("pid ") && l.contains(" -> pid "))
        .count();
    assert_eq!(pairs, 1, "one pair: {stdout}");
    assert!(stdout.contains("(+12.0 MiB, +3 blocks)"), "{stdout}");
    // run 1's process directory against the folder's run 2: an empty place leaves an input
    // as it is
    let p1 = out.join(job_process(&out, 0)["dir"].as_str().unwrap());
    let (stdout, stderr) = text(&memscope(&["diff", p1.to_str().unwrap(), o, "--run", ",2"]));
    assert!(
        stdout.contains("(+12.0 MiB, +3 blocks)"),
        "{stdout}{stderr}"
    );
    // without --run both sides are the newest run: no growth
    let (stdout, stderr) = text(&memscope(&["diff", o, o]));
    assert!(stderr.contains("using run 2, the newest"), "{stderr}");
    assert!(!stdout.contains("+12.0 MiB"), "{stdout}");
    // export: one process (the run asked for, else the newest), not the two as ranks
    for (run, want) in [(None, "using run 2"), (Some("1"), "using run 1")] {
        let trace = dir.path().join(format!("t{}.pftrace", run.unwrap_or("n")));
        let mut args = vec![
            "export",
            "--to",
            "perfetto",
            o,
            "-o",
            trace.to_str().unwrap(),
        ];
        args.extend(run.map(|r| ["--run", r]).into_iter().flatten());
        let (stdout, stderr) = text(&memscope(&args));
        assert!(stdout.contains("of 1 process(es)"), "{stdout}{stderr}");
        assert!(stderr.contains(want), "{stderr}");
    }
    let csv = dir.path().join("csv");
    let (stdout, stderr) = text(&memscope(&[
        "export",
        "--to",
        "csv",
        o,
        "--run",
        "1",
        "-o",
        csv.to_str().unwrap(),
    ]));
    let said = format!("{stdout}{stderr}");
    assert_eq!(said.matches("rows written under").count(), 1, "{said}");
    // again into the same folder: refused (a second dump beside the first would be counted
    // with it), nothing written
    let again = memscope(&[
        "export",
        "--to",
        "csv",
        o,
        "--run",
        "1",
        "-o",
        csv.to_str().unwrap(),
    ]);
    assert_eq!(again.status.code(), Some(2));
    let (_, e) = text(&again);
    assert!(e.trim_end().ends_with("export into another folder"), "{e}");
    // the same run given twice is exported once
    let twice = dir.path().join("twice.pftrace");
    let (stdout, stderr) = text(&memscope(&[
        "export",
        "--to",
        "perfetto",
        o,
        o,
        "--run",
        "1,1",
        "-o",
        twice.to_str().unwrap(),
    ]));
    assert!(stdout.contains("of 1 process(es)"), "{stdout}{stderr}");
    // more run numbers than inputs, or a run that is not there: one line, exit 2
    for args in [
        vec!["diff", o, o, "--run", "1,2,1"],
        vec!["diff", o, "--between", "peak", "end", "--run", "1,2"],
        vec!["diff", o, o, "--run", "3"],
        vec![
            "export",
            "--to",
            "perfetto",
            o,
            "--run",
            "0",
            "-o",
            "x.pftrace",
        ],
    ] {
        let r = memscope(&args);
        assert_eq!(r.status.code(), Some(2), "{args:?}");
        let (_, e) = text(&r);
        assert_eq!(
            e.trim_end()
                .lines()
                .last()
                .map(|l| l.starts_with("memscope: --run")),
            Some(true),
            "{args:?}: {e}"
        );
    }
}

#[test]
fn one_size_grammar_in_rust_and_in_the_pytest_plugin_on_the_same_table() {
    // issue 39: `--fail-on`'s sizes and the pytest plugin's markers read sizes alike
    let path = memscope_tests::repo_root().join("tests/fixtures/size_grammar.json");
    let table: Vec<(String, Option<u64>)> =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    for (text, want) in &table {
        let got = memscope_analysis::thresholds::parse_size(text).ok();
        assert_eq!(got, *want, "Rust parse_size({text:?})");
    }
    let code = "import json, sys\n\
                from pytest_memscope._limits import parse_size\n\
                for t, _ in json.load(open(sys.argv[1])):\n\
                \x20   try:\n\
                \x20       v = parse_size(t)\n\
                \x20   except ValueError:\n\
                \x20       v = None\n\
                \x20   print(json.dumps(v))\n";
    let o = std::process::Command::new(memscope_tests::python3())
        .args(["-c", code])
        .arg(&path)
        .env("PYTHONPATH", memscope_tests::repo_root().join("python"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let py: Vec<Option<u64>> = String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    for ((text, want), got) in table.iter().zip(&py) {
        assert_eq!(got, want, "Python parse_size({text:?})");
    }
    assert_eq!(py.len(), table.len());
}
