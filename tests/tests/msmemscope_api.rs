//! Issue 26: `import msmemscope` (item 4) and the blocks from before a collection window
//! (item 5), from the source tree's Python packages (no wheel needed).
//!
//! msMemScope's documented Python-API leak example (`example/leaks/python`, its user guide's
//! "history-aware" note) runs after `source msmemscope --load-api-env` and under `msmemscope
//! python ...`, with the sim-npu stand-in for torch_npu, and gives the documented result.

use memscope_tests::{
    attrs, memscope_bin, profile_dir, python3, read_csv, repo_root, sim_npu_dir, walk, Row,
};
use std::path::Path;
use std::process::{Command, Output};

fn script(name: &str) -> String {
    repo_root()
        .join("tests/python")
        .join(name)
        .display()
        .to_string()
}

fn example_dir() -> String {
    repo_root().join("examples/sim-npu").display().to_string()
}

/// A command with the source tree's packages and the built CLI, in `cwd`.
fn env(cmd: &mut Command, cwd: &Path) {
    let path = format!(
        "{}:{}",
        profile_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    cmd.current_dir(cwd)
        .env("PATH", path)
        .env("PYTHONPATH", repo_root().join("python"))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("MEMSCOPE_CLI", memscope_bin())
        .env("SIM_NPU_DIR", sim_npu_dir())
        .env("TMPDIR", cwd);
    for k in [
        "LD_PRELOAD",
        "MEMSCOPE_SPOOL",
        "MEMSCOPE_API_ENV",
        "MSTX_INJECTION_PATH",
    ] {
        cmd.env_remove(k);
    }
}

/// `source msmemscope --load-api-env`, then `python3 ARGS...` (msMemScope's API mode).
fn api_env(cwd: &Path, args: &[&str]) -> Output {
    let line = format!(
        "source msmemscope --load-api-env && '{}' {}",
        python3().display(),
        args.iter()
            .map(|a| format!("'{a}'"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    let mut cmd = Command::new("bash");
    cmd.args(["-c", &line]);
    env(&mut cmd, cwd);
    cmd.output().expect("run bash")
}

fn ok(o: &Output, what: &str) -> String {
    memscope_tests::assert_ok(o, what)
}

fn rows(dir: &Path) -> Vec<Row> {
    let mut files = Vec::new();
    walk(dir, &mut |p| {
        if p.file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("memscope_dump_"))
        {
            files.push(p.to_path_buf());
        }
    });
    let mut rows: Vec<Row> = files.iter().flat_map(|p| read_csv(p)).collect();
    rows.sort_by_key(|r| r["ID"].parse::<u64>().unwrap());
    rows
}

fn mallocs<'a>(rows: &'a [Row], et: &str) -> Vec<&'a Row> {
    rows.iter()
        .filter(|r| r["Event"] == "MALLOC" && r["Event Type"] == et)
        .collect()
}

fn is_history(r: &Row) -> bool {
    attrs(r).get("shadow").is_some_and(|v| v == "true")
}

/// The documented result of the leak example: leaks at steps 2..5, 3.814941 Mb(s) each.
fn check_leak_report(text: &str) {
    let leaks: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("Direct Pytorch Caching memory pool leak of 3.814941 Mb(s)"))
        .collect();
    assert_eq!(leaks.len(), 4, "{text}");
    for (l, s) in leaks.iter().zip(2..) {
        assert!(
            l.trim_end().ends_with(&format!("at step {s}. owner: PTA")),
            "{l}"
        );
    }
    assert!(text.contains("leaked in 4 allocation(s)"), "{text}");
}

/// The model's blocks (allocated before start()) are written once, at START_TRACE, marked
/// shadow:true, and are no leak; the block made and dropped before start() has no row.
fn check_history(rows: &[Row]) {
    let start = rows
        .iter()
        .position(|r| r["Event Type"] == "START_TRACE")
        .expect("START_TRACE");
    let hist: Vec<&Row> = rows.iter().filter(|r| is_history(r)).collect();
    let pta: Vec<&str> = hist
        .iter()
        .filter(|r| r["Event Type"] == "PTA")
        .map(|r| r["Event"].as_str())
        .collect();
    assert_eq!(pta, ["MALLOC"; 4], "weights and inputs: {hist:?}");
    for (i, r) in rows[start + 1..start + 1 + hist.len()].iter().enumerate() {
        assert!(is_history(r), "row {i} after START_TRACE");
        assert_eq!(r["Timestamp(ns)"], rows[start]["Timestamp(ns)"]);
    }
    assert!(
        !mallocs(rows, "PTA")
            .iter()
            .any(|r| attrs(r)["size"] == (1u64 << 20).to_string()),
        "the scratch block freed before start() has no row"
    );
}

#[test]
fn documented_leak_example_runs_after_load_api_env_and_under_msmemscope() {
    let d = tempfile::tempdir().unwrap();
    let o = api_env(
        d.path(),
        &[&script("msmemscope_leaks_job.py"), &example_dir()],
    );
    let text = ok(&o, "source msmemscope --load-api-env; python leaks job");
    assert!(text.contains("leaks_job: ok"));
    check_leak_report(&text);
    // config(output_path="./output") is honoured in API mode; every hook is preloaded: HAL too
    let r = rows(&d.path().join("output"));
    check_history(&r);
    assert_eq!(
        mallocs(&r, "HAL").len(),
        1,
        "the pool's segment (before start())"
    );
    assert!(
        text.contains("There is no hal leak memory"),
        "history blocks are no leak"
    );

    // the same script under msMemScope's command line (config() sets what no flag set)
    let d = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(profile_dir().join("msmemscope"));
    cmd.arg(python3())
        .arg(script("msmemscope_leaks_job.py"))
        .arg(example_dir());
    env(&mut cmd, d.path());
    let text = ok(&cmd.output().unwrap(), "msmemscope python leaks job");
    check_leak_report(&text);
    check_history(&rows(&d.path().join("output")));
}

#[test]
fn import_msmemscope_gives_msmemscopes_names_submodules_and_framework_hooks() {
    let d = tempfile::tempdir().unwrap();
    let code = r#"
import msmemscope, memscope
for n in ("config", "start", "stop", "step", "take_snapshot", "TakeSnapshot", "describer",
          "RecordFunction", "tracer", "watcher", "analyzer", "analyze", "list_analyzers",
          "get_analyzer_config", "check_leaks", "check_inefficient", "init_framework_hooks",
          "cleanup_framework_hooks", "enable_npu_sanitizer"):
    assert hasattr(msmemscope, n), n
assert msmemscope.start is memscope.start
from msmemscope.analyzer import LeaksAnalyzer, LeaksConfig, InefficientConfig, InefficientAnalyzer
import msmemscope.describe
from msmemscope.take_snapshot import TakeSnapshot as T
assert msmemscope.describe.describer is memscope.describer and T is memscope.TakeSnapshot
import msmemscope.record_function as rf
assert rf is __import__("memscope.record_function").record_function
assert rf.__spec__.name == "memscope.record_function"
assert msmemscope.list_analyzers() == ["leaks", "inefficient"]
assert "mstx_info" in str(msmemscope.get_analyzer_config("leaks"))
print("names: ok")
"#;
    let mut cmd = Command::new(python3());
    cmd.args(["-c", code]);
    env(&mut cmd, d.path());
    let text = ok(&cmd.output().unwrap(), "import msmemscope");
    assert!(text.contains("names: ok"), "{text}");

    // one-click hooks, asked for before the framework is imported
    let work = d.path().join("pkg");
    let o = api_env(
        d.path(),
        &[
            &script("framework_hooks_job.py"),
            &example_dir(),
            work.to_str().unwrap(),
        ],
    );
    let text = ok(&o, "framework hooks job");
    assert!(text.contains("hooks_job: ok"), "{text}");
    assert!(
        text.contains("init_framework_hooks(verl, 0.7.0, TaskRunner, snapshot): verl not installed in this Python"),
        "a framework that is not installed is said once: {text}"
    );
    assert_eq!(
        text.matches("refused: init_framework_hooks(").count(),
        4,
        "{text}"
    );
    assert!(
        text.contains("enable_npu_sanitizer(): torch_npu's NPU sanitizer is not importable"),
        "{text}"
    );
    let r = rows(&d.path().join("output"));
    let owners: Vec<String> = mallocs(&r, "PTA")
        .iter()
        .filter(|r| !is_history(r))
        .map(|r| attrs(r).get("owner").cloned().unwrap_or_default())
        .collect();
    assert_eq!(
        owners,
        [
            "PTA@vllm@profile",
            "PTA@vllm@serve",
            "PTA@vllm@serve",
            "PTA@vllm@serve"
        ],
        "{text}"
    );
    let snaps: Vec<&str> = r
        .iter()
        .filter(|r| r["Event"] == "SNAPSHOT")
        .map(|r| r["Name"].as_str())
        .collect();
    let m = "vllm_ascend.worker.model_runner_v1@NPUModelRunner@";
    assert_eq!(
        snaps,
        [
            format!("{m}profile_run@Start"),
            format!("{m}profile_run@End"),
            format!("{m}execute_model@Start"),
            format!("{m}execute_model@End"),
        ]
    );
}

#[test]
fn user_guide_config_example_runs_after_load_api_env_with_c_stacks() {
    // the user guide's config() call, output_path pointed at ./output: C and Python stacks on
    // the window's rows (the preloaded probe takes the C depth from config()), a .db dump
    let d = tempfile::tempdir().unwrap();
    let code = format!(
        r#"
import sys
sys.path.insert(0, {ex:?})
import msmemscope
import train
msmemscope.config(call_stack="c:10,python:5", events="launch,alloc,free", level="0",
                  device="npu", analysis="leaks,decompose", watch="op0,op1,full-content",
                  format="db", output_path="./output")
npu = train.Npu(train.find_sim_npu_dir())
train.check(npu.aclInit(None), "aclInit")
train.check(npu.aclrtSetDevice(0), "aclrtSetDevice")
caching = train.CachingAllocator(npu, train.Counters(), "ptaCaching", train.CACHING_SEGMENT)
msmemscope.start()
for _ in range(3):
    caching.free(caching.alloc(0, [1 << 20]))
    msmemscope.step()
msmemscope.stop()
"#,
        ex = example_dir()
    );
    let o = api_env(d.path(), &["-c", &code]);
    let text = ok(&o, "the guide's config() example");
    let mut dbs = Vec::new();
    walk(&d.path().join("output"), &mut |p| {
        if p.extension().is_some_and(|e| e == "db") {
            dbs.push(p.to_path_buf());
        }
    });
    assert_eq!(dbs.len(), 1, "{text}");
    let rows = memscope_tests::read_db(&dbs[0]);
    let window: Vec<&Row> = mallocs(&rows, "PTA")
        .into_iter()
        .filter(|r| !is_history(r))
        .collect();
    assert_eq!(window.len(), 3, "{text}");
    for r in window {
        assert!(!r["Call Stack(C)"].is_empty(), "C stack: {r:?}");
        assert!(
            r["Call Stack(Python)"].contains("<string>"),
            "Python stack: {r:?}"
        );
    }
}

fn sizes(rows: &[&Row]) -> Vec<u64> {
    rows.iter()
        .map(|r| attrs(r)["size"].parse::<u64>().unwrap() >> 20)
        .collect()
}

#[test]
fn blocks_live_when_a_window_opens_are_written_once_so_every_free_has_its_malloc() {
    let d = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(memscope_bin());
    cmd.args([
        "run",
        "-o",
        "out",
        "--collect-mode",
        "deferred",
        "--call-stack",
        "c:4,python:4",
        "--",
    ])
    .arg(python3())
    .arg(script("history_job.py"))
    .arg(example_dir());
    env(&mut cmd, d.path());
    let text = ok(&cmd.output().unwrap(), "memscope run history_job.py");
    let r = rows(&d.path().join("out"));
    let pta: Vec<&Row> = r.iter().filter(|r| r["Event Type"] == "PTA").collect();
    let starts: Vec<usize> = r
        .iter()
        .enumerate()
        .filter(|(_, r)| r["Event Type"] == "START_TRACE")
        .map(|(i, _)| i)
        .collect();
    assert_eq!(starts.len(), 2, "{text}");
    let line = |r: &Row| {
        format!(
            "{} {}{}",
            r["Event"],
            attrs(r)["size"].parse::<u64>().unwrap() >> 20,
            if is_history(r) { " history" } else { "" }
        )
    };
    let got: Vec<String> = pta.iter().map(|r| line(r)).collect();
    // A before window 1 (written at its start), C in it and freed between the windows (its
    // FREE is written), D between them (written at window 2's start); B never
    assert_eq!(
        got,
        [
            "MALLOC 1 history",
            "MALLOC 3",
            "FREE 1",
            "FREE 3",
            "MALLOC 4 history",
            "FREE 4",
            "MALLOC 5",
            "FREE 5"
        ],
        "{text}"
    );
    let hist: Vec<&&Row> = pta.iter().filter(|r| is_history(r)).collect();
    for (h, s) in hist.iter().zip(&starts) {
        assert_eq!(h["Timestamp(ns)"], r[*s]["Timestamp(ns)"]);
        assert!(!attrs(h).contains_key("used"), "no figures: {h:?}");
        assert_eq!(
            (
                h["Call Stack(C)"].as_str(),
                h["Call Stack(Python)"].as_str()
            ),
            ("", "")
        );
    }
    let window_malloc = pta.iter().find(|r| line(r) == "MALLOC 3").unwrap();
    assert!(
        !window_malloc["Call Stack(Python)"].is_empty(),
        "window rows keep stacks"
    );
    let mut ids: Vec<(String, &str)> = pta
        .iter()
        .map(|r| (attrs(r)["allocation_id"].clone(), r["Event"].as_str()))
        .collect();
    ids.sort();
    assert!(
        ids.chunks(2).all(|p| p.len() == 2 && p[0].0 == p[1].0),
        "every MALLOC has its FREE: {ids:?}"
    );
    let stop1 = r
        .iter()
        .position(|r| r["Event Type"] == "STOP_TRACE")
        .unwrap();
    let free3 = r
        .iter()
        .position(|r| r["Event"] == "FREE" && sizes(&[r]) == [3])
        .unwrap();
    assert!(
        stop1 < free3 && free3 < starts[1],
        "C's FREE between the windows"
    );
    // the history rows are written, not judged
    assert!(
        !text.contains("leak of 1.000000") && !text.contains("leak of 4.000000"),
        "{text}"
    );
    // the capture replays to the same rows (its Shadow records are kept)
    let mut cmd = Command::new(memscope_bin());
    cmd.args(["export", "--to", "csv", "out", "-o", "exported"]);
    env(&mut cmd, d.path());
    ok(&cmd.output().unwrap(), "memscope export --to csv");
    let text_of = |rows: &[Row]| -> Vec<String> {
        rows.iter()
            .map(|r| {
                format!(
                    "{} {} {} {}",
                    r["ID"], r["Event"], r["Event Type"], r["Attr"]
                )
            })
            .collect()
    };
    assert_eq!(text_of(&rows(&d.path().join("exported"))), text_of(&r));
}

#[test]
fn enable_npu_sanitizer_routes_sanitizer_op_marks_to_the_npu_sanitizer_and_refuses_bad_ones() {
    // issue 36 item 1: a torch_npu-shaped stand-in whose handler records the calls (the job
    // checks them); every mark, malformed or not, is still in the dump as an msTX mark
    let d = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(python3());
    cmd.args([
        &script("sanitizer_job.py"),
        &script("fake_torch_npu"),
        &format!("{}/python", example_dir()),
    ]);
    env(&mut cmd, d.path());
    let text = ok(&cmd.output().unwrap(), "sanitizer job");
    assert!(text.contains("sanitizer_job: ok"), "{text}");
    assert_eq!(
        text.matches("torch_npu's NPU sanitizer is not importable")
            .count(),
        1,
        "{text}"
    );
    let r = rows(&d.path().join("memscopeDumpResults"));
    let marks: Vec<&str> = r
        .iter()
        .filter(|x| x["Event Type"] == "Mark")
        .map(|x| x["Name"].as_str())
        .collect();
    assert_eq!(marks.len(), 14, "every mark is written: {marks:?}");
    assert!(marks.contains(&"an ordinary mark"), "{marks:?}");
}

#[test]
fn rows_recorded_before_stop_are_in_the_csv_and_db_when_it_returns_plain_preloaded_and_under_run() {
    // issue 39: a script that reads its own dump right after stop() finds every row — pool
    // blocks with steps, and steps alone (device-less rows, which wait in a hidden backlog
    // until a device file exists)
    for (mode, want) in [
        ("", "stop_flush: ok 10000 1000"),
        ("steps-only", "stop_flush: ok 0 10000"),
    ] {
        for fmt in ["csv", "db"] {
            let mut job = vec![script("stop_flush_job.py"), fmt.to_owned(), example_dir()];
            if !mode.is_empty() {
                job.push(mode.to_owned());
            }
            let d = tempfile::tempdir().unwrap();
            let mut cmd = Command::new(python3());
            cmd.args(&job);
            env(&mut cmd, d.path());
            let text = ok(&cmd.output().unwrap(), "plain-python stop_flush_job.py");
            assert!(text.contains(want), "{fmt} {mode}, plain: {text}");

            let d = tempfile::tempdir().unwrap();
            let mut cmd = Command::new(memscope_bin());
            cmd.args(["run", "--format", fmt, "--"])
                .arg(python3())
                .args(&job);
            env(&mut cmd, d.path());
            let text = ok(&cmd.output().unwrap(), "memscope run stop_flush_job.py");
            assert!(text.contains(want), "{fmt} {mode}, run: {text}");

            let d = tempfile::tempdir().unwrap();
            let args: Vec<&str> = job.iter().map(String::as_str).collect();
            let text = ok(
                &api_env(d.path(), &args),
                "stop_flush_job.py after --load-api-env",
            );
            assert!(text.contains(want), "{fmt} {mode}, api env: {text}");
        }
    }
}
