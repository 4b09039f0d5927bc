//! The race check as a user reaches it (issue 36): `--fail-on races>N` on `memscope run`, the
//! `races` figure of `--summary-json`, `memscope analyze races` over a run directory, a dump and
//! a capture with the same answer, `--json` and `--fail-over`, and "not recorded" where nothing
//! the check needs was. The job is the bundled `examples/sim-npu/two_streams.py`: three
//! read-after-write races and two reuses of a freed block in its 3 steps, none with `--fixed`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use memscope_tests::{memscope_bin, memscope_run, python3, repo_root, Run};

fn two_streams(args: &[&str], extra: &[&str]) -> Run {
    let script = repo_root().join("examples/sim-npu/two_streams.py");
    let py = python3();
    let mut job = vec![py.to_str().unwrap(), script.to_str().unwrap()];
    job.extend(extra);
    memscope_run(args, &job, &[])
}

fn analyze(args: &[&str], input: &Path) -> Output {
    Command::new(memscope_bin())
        .args(["analyze", "races"])
        .arg(input)
        .args(args)
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr)
}

fn find(dir: &Path, ext: &str) -> PathBuf {
    let mut found = None;
    memscope_tests::walk(dir, &mut |p| {
        if p.extension().is_some_and(|e| e == ext) {
            found = Some(p.to_path_buf());
        }
    });
    found.unwrap_or_else(|| panic!("no .{ext} under {}", dir.display()))
}

#[test]
fn fail_on_races_fails_the_racy_job_passes_the_fixed_one_and_the_summary_counts_them() {
    let sum = tempfile::tempdir().unwrap();
    let json = sum.path().join("s.json");
    let run = two_streams(
        &[
            "--fail-on",
            "races>0",
            "--summary-json",
            json.to_str().unwrap(),
        ],
        &[],
    );
    let all = run.stdout() + &run.stderr();
    assert_eq!(run.code(), 23, "{all}");
    assert!(all.contains("limit races>0 crossed by pid"), "{all}");
    assert!(all.contains(": 5, 5 over 0"), "{all}");
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(doc["inputs"][0]["processes"][0]["races"], 5, "{doc}");
    assert_eq!(doc["limits"][0]["metric"], "races");
    assert_eq!(doc["limits"][0]["status"], "crossed");

    let fixed = two_streams(&["--fail-on", "races>0"], &["--fixed"]);
    let all = fixed.stdout() + &fixed.stderr();
    assert_eq!(fixed.code(), 0, "{all}");
    assert!(all.contains("limits kept: races>0"), "{all}");
}

#[test]
fn json_keeps_stdout_to_findings_and_says_on_stderr_what_was_checked() {
    let fixed = two_streams(&["--analysis", "races"], &["--fixed"]);
    let o = analyze(&["--json"], fixed.out.path());
    assert!(o.status.success());
    assert!(o.stdout.is_empty(), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("No unsynchronized cross-stream accesses in 9"),
        "{err}"
    );
    let none = two_streams(&["--adapters", "hal"], &[]);
    let o = analyze(&["--json"], none.out.path());
    assert!(o.stdout.is_empty());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("Not recorded"),
        "{}",
        text(&o)
    );
}

#[test]
fn a_races_limit_on_a_run_that_recorded_no_launch_is_not_recorded_not_passed() {
    let run = two_streams(&["--adapters", "hal", "--fail-on", "races>0"], &[]);
    let all = run.stdout() + &run.stderr();
    assert_eq!(run.code(), 0, "{all}");
    assert!(
        all.contains("limit \"races>0\": not recorded — no kernel launch with its stream"),
        "{all}"
    );
    assert!(
        all.contains("limits not recorded (not checked): races>0"),
        "{all}"
    );
}

#[test]
fn analyze_races_gives_the_same_races_from_the_run_dir_its_dump_and_its_capture() {
    let run = two_streams(&["--call-stack", "python:4"], &[]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let dir = run.out.path();
    let dump = find(dir, "csv");
    let cap = find(dir, "mscap");
    let mut counts = Vec::new();
    for input in [dir, dump.as_path(), cap.as_path()] {
        let o = analyze(&[], input);
        let t = text(&o);
        assert!(o.status.success(), "{}: {t}", input.display());
        assert!(t.contains("==== Stream races (pid "), "{t}");
        counts.push(t.lines().filter(|l| l.contains(" at 0x")).count());
    }
    // the dump has no Python stacks of marks only if they were not recorded: with python:4 the
    // marks carry them, and every input gives 3 read-after-write and 2 reuse findings
    assert_eq!(counts, [5, 5, 5]);

    let o = analyze(&["--json"], dir);
    assert!(o.status.success(), "{}", text(&o));
    let lines: Vec<serde_json::Value> = String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 5);
    let kinds: Vec<&str> = lines.iter().map(|v| v["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds.iter().filter(|k| **k == "read-after-write").count(),
        3,
        "{kinds:?}"
    );
    let raw = lines
        .iter()
        .find(|v| v["kind"] == "read-after-write")
        .unwrap();
    assert_eq!(raw["current"]["name"], "matmul");
    assert_eq!(raw["previous"]["name"], "h2d_copy");
    assert_eq!(raw["current"]["aliases"][0], "batch");
    assert_eq!(raw["current"]["owner"], "PTA");
    assert_ne!(raw["current"]["stream"], raw["previous"]["stream"]);
    let py = raw["current"]["python_stack"].as_str().unwrap();
    assert!(py.contains("two_streams.py"), "{py}");
    let reuse = lines
        .iter()
        .find(|v| v["kind"] == "free-while-in-use")
        .unwrap();
    assert!(reuse["free"]["id"].as_u64().is_some(), "{reuse}");

    // the HTML report carries the same section
    let page = tempfile::tempdir().unwrap();
    let html = page.path().join("r.html");
    let o = Command::new(memscope_bin())
        .arg("report")
        .arg(dir)
        .arg("-o")
        .arg(&html)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let body = std::fs::read_to_string(&html).unwrap();
    assert!(
        body.contains("Stream races (pid "),
        "no races section in the report"
    );
    assert_eq!(body.matches("read-after-write at 0x").count(), 3);

    // --summary-json never replaces an input or any file that is not an earlier summary
    let copy = page.path().join("copy.mscap");
    std::fs::copy(&cap, &copy).unwrap();
    let o = analyze(&["--summary-json", copy.to_str().unwrap()], &copy);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("is not a memscope summary"),
        "{}",
        text(&o)
    );
    assert_eq!(std::fs::read(&copy).unwrap(), std::fs::read(&cap).unwrap());
    let s = page.path().join("s.json");
    for _ in 0..2 {
        let o = analyze(&["--summary-json", s.to_str().unwrap()], dir);
        assert!(
            o.status.success(),
            "an earlier summary is replaced: {}",
            text(&o)
        );
    }

    let o = analyze(&["--fail-over", "4"], dir);
    assert_eq!(o.status.code(), Some(23), "{}", text(&o));
    assert!(text(&o).contains("limit races>4 crossed"), "{}", text(&o));
    let o = analyze(&["--fail-over", "5"], dir);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = analyze(&["--fail-over", "many"], dir);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("is not a whole number"), "{}", text(&o));
}
