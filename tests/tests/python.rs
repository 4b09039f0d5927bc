//! Issue 12: the `memscope` wheel and Python package. The wheel is built once per test binary
//! (`python/build-wheel.sh`, maturin from PyPI — `.ci/run` installs it) and installed into a
//! fresh venv with nothing else; the scripts of `tests/python/` then run over the sim-npu
//! stand-in, plain (`python job.py`) and under `memscope run`.

mod python_common;

use memscope_tests::{attrs, repo_root, Row};
use python_common::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

#[path = "python/under_run.rs"]
mod under_run;
#[path = "python/wheel_installs.rs"]
mod wheel_installs;

/// The seed's SNAPSHOT Attr keys, in order.
const SNAPSHOT_KEYS: [&str; 8] = [
    "total_mem",
    "free_mem",
    "reserved",
    "peak_reserved",
    "allocated",
    "peak_allocated",
    "device_utilization",
    "pt_utilization",
];

/// The rows both ways of running produce, without what differs between runs (IDs,
/// timestamps, pids, addresses, allocation ids — HAL blocks of the launcher take ids too).
fn comparable(rows: &[Row]) -> Vec<String> {
    const COMMON: [&str; 9] = [
        "PTA",
        "PTA_WORKSPACE",
        "START_TRACE",
        "STOP_TRACE",
        "STEP",
        "SNAPSHOT",
        "Mark",
        "Range_start",
        "Range_end",
    ];
    rows.iter()
        .filter(|r| COMMON.contains(&r["Event Type"].as_str()))
        .map(|r| {
            let a: Vec<String> = memscope_core::attr_text::parse_attr(&r["Attr"])
                .into_iter()
                .filter(|(k, _)| k != "allocation_id" && k != "addr")
                .map(|(k, v)| format!("{k}:{v}"))
                .collect();
            format!(
                "{},{},{},{},{}",
                r["Event"],
                r["Event Type"],
                r["Name"],
                r["Device Id"],
                a.join(",")
            )
        })
        .collect()
}

#[test]
fn wheel_installs_into_a_fresh_venv_and_both_ways_to_run_give_the_same_rows() {
    let v = venv();
    let listed = Command::new("python3")
        .args(["-m", "zipfile", "-l"])
        .arg(&v.wheel)
        .output()
        .expect("list the wheel");
    let listing = String::from_utf8_lossy(&listed.stdout);
    for f in [
        "memscope/__init__.py",
        "msmemscope/__init__.py",
        ".data/scripts/memscope",
        ".data/scripts/msmemscope",
        ".data/data/lib/memscope/libmemscope_probe.so",
    ] {
        assert!(listing.contains(f), "wheel lacks {f}:\n{listing}");
    }
    assert!(v.memscope().is_file());

    let job = script("api_job.py");
    let ex = example_dir();
    let args = [job.as_os_str(), ex.as_os_str()];
    let a = tempfile::tempdir().unwrap();
    let out = plain(a.path(), &args);
    check(&out, "plain python api_job.py");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("need the launcher"),
        "plain mode must say what needs the launcher: {stderr}"
    );
    let plain_rows = seed_layout_rows(&a.path().join("memscopeDumpResults"));

    let b = tempfile::tempdir().unwrap();
    let out = launched(b.path(), &[], &args);
    check(&out, "memscope run -- python api_job.py");
    let run_rows = seed_layout_rows(&b.path().join("memscopeDumpResults"));
    assert!(
        run_rows.iter().any(|r| r["Event Type"] == "HAL"),
        "the launcher records driver memory too"
    );

    for rows in [&plain_rows, &run_rows] {
        let owners: Vec<String> = rows
            .iter()
            .filter(|r| r["Event"] == "MALLOC" && r["Event Type"] == "PTA")
            .filter_map(|r| attrs(r).get("owner").cloned())
            .collect();
        assert_eq!(
            owners.iter().filter(|o| *o == "PTA@model").count(),
            3,
            "{owners:?}"
        );
        let freed: Vec<String> = rows
            .iter()
            .filter(|r| r["Event"] == "FREE")
            .filter_map(|r| attrs(r).get("owner").cloned())
            .collect();
        assert_eq!(freed, ["PTA@kept"], "describer(addr) tag on the FREE row");
        let snaps: Vec<&Row> = rows.iter().filter(|r| r["Event"] == "SNAPSHOT").collect();
        assert_eq!(snaps.len(), 5);
        for s in &snaps {
            let keys: Vec<String> = memscope_core::attr_text::parse_attr(&s["Attr"])
                .into_iter()
                .map(|(k, _)| k)
                .collect();
            assert_eq!(keys, SNAPSHOT_KEYS, "{s:?}");
        }
        let names: Vec<&str> = snaps.iter().map(|s| s["Name"].as_str()).collect();
        assert_eq!(
            names,
            ["step1", "step2", "step3", "final Start", "final End"]
        );
        let steps: Vec<&str> = rows
            .iter()
            .filter(|r| r["Event Type"] == "STEP")
            .map(|r| r["Name"].as_str())
            .collect();
        assert_eq!(steps, ["1", "2", "3"]);
    }
    assert_eq!(comparable(&plain_rows), comparable(&run_rows));
}

fn trace_rows(out: &Path) -> Vec<Vec<String>> {
    let traces = files(out, "python_trace_");
    assert!(
        !traces.is_empty(),
        "no python_trace file under {}",
        out.display()
    );
    let mut rows = Vec::new();
    for t in &traces {
        let name = t.file_name().unwrap().to_string_lossy().into_owned();
        let parts: Vec<&str> = name
            .trim_end_matches(".csv")
            .splitn(4, '_')
            .collect::<Vec<_>>();
        assert!(
            parts.len() == 4 && parts[2].parse::<u32>().is_ok() && is_ts(parts[3]),
            "python_trace_{{TID}}_{{ts}}.csv: {name}"
        );
        assert_eq!(
            t.parent().unwrap().file_name().unwrap(),
            "dump",
            "{}",
            t.display()
        );
        let mut r = csv::Reader::from_path(t).unwrap();
        let header: Vec<String> = r.headers().unwrap().iter().map(str::to_owned).collect();
        assert_eq!(
            header.join(","),
            "FuncInfo,StartTime(ns),EndTime(ns),Thread Id,Process Id"
        );
        let text = std::fs::read_to_string(t).unwrap();
        assert!(text.starts_with("FuncInfo,StartTime(ns),EndTime(ns),Thread Id,Process Id\n"));
        for rec in r.records() {
            rows.push(rec.unwrap().iter().map(str::to_owned).collect());
        }
    }
    rows
}

/// Whether the trace rows' time range overlaps the dump rows'.
fn overlaps(trace: &[Vec<String>], dump: &[Row]) -> bool {
    let t: Vec<u64> = trace
        .iter()
        .flat_map(|r| [&r[1], &r[2]])
        .filter_map(|s| s.parse().ok())
        .collect();
    let d: Vec<u64> = dump
        .iter()
        .filter_map(|r| r["Timestamp(ns)"].parse().ok())
        .collect();
    let (tmin, tmax) = (*t.iter().min().unwrap(), *t.iter().max().unwrap());
    let (dmin, dmax) = (*d.iter().min().unwrap(), *d.iter().max().unwrap());
    tmin <= dmax && dmin <= tmax
}

#[test]
fn events_traceback_and_tracer_start_write_python_trace_files_on_the_dump_clock() {
    let job = script("api_job.py");
    let ex = example_dir();
    let trace = std::ffi::OsStr::new("--trace");
    let args = [job.as_os_str(), ex.as_os_str(), trace];
    // Under the launcher with --events traceback, and plain with config(events=...traceback).
    let a = tempfile::tempdir().unwrap();
    let out = launched(
        a.path(),
        &["--events", "alloc,free,launch,traceback"],
        &args,
    );
    check(&out, "memscope run --events traceback");
    let b = tempfile::tempdir().unwrap();
    check(&plain(b.path(), &args), "plain api_job.py --trace");
    for dir in [a.path(), b.path()] {
        let out = dir.join("memscopeDumpResults");
        let rows = trace_rows(&out);
        let dump = seed_layout_rows(&out);
        let spans = |n: &str| {
            let v: Vec<&Vec<String>> = rows.iter().filter(|r| r[0] == n).collect();
            let ordered = |r: &&&Vec<String>| r[1].parse::<u64>().unwrap() <= r[2].parse().unwrap();
            assert!(v.iter().all(|r| ordered(&r)), "{n}: {v:?}");
            v.len()
        };
        let fb = func_info("api_job.py", "forward_block");
        assert_eq!(spans(&fb), 3, "forward_block rows in {}", out.display());
        // one row per RecordFunction block, spanning it (issue 35), and no memscope frame
        assert_eq!(spans("optimizer"), 3, "RecordFunction rows");
        let own = |r: &&Vec<String>| r[0].contains("/memscope/") || r[0].contains("/pyboot/");
        assert_eq!(rows.iter().find(own), None, "memscope frames");
        assert!(
            rows.iter().any(|r| r[0].starts_with("<built-in ")),
            "C function rows"
        );
        assert!(overlaps(&rows, &dump), "trace and dump times overlap");
    }
}

#[test]
fn tracer_names_nn_module_calls_and_follows_new_threads_on_every_python() {
    // Every CPython >= 3.9 found next to the default one gets the same wheel's package: the
    // probe resolves the C API at run time. Interpreters tried: pyenv's and python3.X on PATH.
    let mut pythons = vec![venv().python()];
    let pyenv = std::env::var_os("HOME")
        .map(|h| PathBuf::from(h).join(".pyenv/versions"))
        .unwrap_or_default();
    for minor in 9..=13 {
        let name = format!("python3.{minor}");
        let mut found = std::fs::read_dir(&pyenv)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path().join("bin").join(&name))
            .find(|p| p.is_file());
        if found.is_none() {
            found = std::env::var_os("PATH").and_then(|p| {
                std::env::split_paths(&p)
                    .map(|d| d.join(&name))
                    .find(|c| c.is_file())
            });
        }
        pythons.extend(found);
    }
    let site = venv()
        .dir
        .join("lib")
        .read_dir()
        .unwrap()
        .flatten()
        .map(|e| e.path().join("site-packages"))
        .find(|p| p.join("memscope").is_dir())
        .expect("site-packages of the venv");
    let fake_torch = repo_root().join("tests/python/fake_torch");
    let job = script("trace_modules.py");
    let mut tried = Vec::new();
    for py in &pythons {
        let d = tempfile::tempdir().unwrap();
        let mut cmd = Command::new(py);
        cmd.arg(&job).arg(&fake_torch);
        clean(&mut cmd, d.path());
        // Other interpreters import the venv's package (pure Python) and its CLI and probe.
        cmd.env("PYTHONPATH", &site)
            .env("MEMSCOPE_CLI", venv().memscope());
        let out = cmd.output().expect("run python");
        check(&out, &format!("{} trace_modules.py", py.display()));
        let t = Instant::now();
        let rows = loop {
            let traces = files(&d.path().join("memscopeDumpResults"), "python_trace_");
            if traces.len() == 2 || t.elapsed() > Duration::from_secs(20) {
                break trace_rows(&d.path().join("memscopeDumpResults"));
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        assert!(
            rows.iter().any(|r| r[0] == "nn.Module: Linear"),
            "{}: no nn.Module row",
            py.display()
        );
        let tids: std::collections::BTreeSet<&str> = rows
            .iter()
            .filter(|r| r[0] == func_info("trace_modules.py", "known_function"))
            .map(|r| r[3].as_str())
            .collect();
        assert_eq!(
            tids.len(),
            2,
            "{}: main thread and new thread",
            py.display()
        );
        tried.push(py.display().to_string());
    }
    eprintln!("traced with: {}", tried.join(", "));
}

#[test]
fn bad_input_to_every_api_function_raises_naming_the_argument_and_loses_nothing() {
    let d = tempfile::tempdir().unwrap();
    let job = script("api_bad_input.py");
    let ex = example_dir();
    let out = plain(d.path(), &[job.as_os_str(), ex.as_os_str()]);
    check(&out, "api_bad_input.py");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("bad_input: 46 checks ok"), "{stdout}");
    let rows = seed_layout_rows(&d.path().join("memscopeDumpResults"));
    let kinds: Vec<(&str, &str)> = rows
        .iter()
        .map(|r| (r["Event"].as_str(), r["Event Type"].as_str()))
        .collect();
    assert_eq!(
        kinds,
        [
            ("SYSTEM", "START_TRACE"),
            ("MALLOC", "PTA"),
            ("SYSTEM", "STEP"),
            ("SYSTEM", "STOP_TRACE"),
            ("SYSTEM", "START_TRACE"),
            ("FREE", "PTA"),
            ("SYSTEM", "STOP_TRACE"),
        ]
    );
}

#[test]
fn python_dash_m_memscope_runs_the_cli_and_analyzer_runs_the_rust_analyses() {
    let v = venv();
    let out = Command::new(v.python())
        .args(["-m", "memscope", "--version"])
        .output()
        .unwrap();
    check(&out, "python -m memscope --version");
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("memscope "));

    let d = tempfile::tempdir().unwrap();
    let job = script("api_job.py");
    let ex = example_dir();
    check(
        &plain(d.path(), &[job.as_os_str(), ex.as_os_str()]),
        "api_job",
    );
    let dump = files(&d.path().join("memscopeDumpResults"), "memscope_dump_")
        .pop()
        .unwrap();
    let code = format!(
        r#"
import memscope
from memscope import analyzer as an
assert an.list_analyzers() == ["leaks", "inefficient"]
assert an.get_analyzer_config("leaks") == {{"config_class": "LeaksConfig",
    "parameters": ["input_path", "mstx_info", "start_index"]}}
assert an.get_analyzer_config("inefficient")["parameters"] == [
    "input_path", "mem_size", "inefficient_type", "idle_threshold"]
import os
before = sorted(os.listdir(os.path.dirname({dump:?})))
# msMemScope's behaviour (issue 27 item 9): the input is rewritten, no new file per call
memscope.check_inefficient({dump:?})
an.analyze("inefficient", input_path={dump:?})
assert sorted(os.listdir(os.path.dirname({dump:?}))) == before, os.listdir(os.path.dirname({dump:?}))
# the job has no msTX marks: the range analysis cannot run, and says so with a non-zero exit
# (issue 17, L10), which the analyzer raises
try:
    an.analyze("leaks", input_path={dump:?}, mstx_info="step", start_index=0)
except RuntimeError as e:
    assert "exit code 2" in str(e), e
else:
    raise AssertionError("leaks without 3 step marks did not fail")
print("analyzer: ok")
"#,
        dump = dump.display().to_string()
    );
    let mut cmd = Command::new(v.python());
    cmd.args(["-c", &code]);
    clean(&mut cmd, d.path());
    let out = cmd.output().unwrap();
    check(&out, "analyzer script");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("analyzer: ok"), "{stdout}");
    assert_eq!(
        stdout.matches(" rewritten").count(),
        2,
        "check_inefficient and analyze(\"inefficient\") ran memscope analyze inefficient --in-place: {stdout}"
    );
    assert!(
        stdout.contains("fewer than 3") || stdout.contains("step"),
        "check_leaks ran memscope analyze leaks: {stdout}"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("no device has the 3 msTX marks named \"step\""),
        "{stderr}"
    );
}

#[test]
fn plain_python_collector_holds_the_spool_lock_while_the_job_runs() {
    // TEAM contract 1: the collector of a plain run holds flock(LOCK_EX) on
    // <spool>/collector.lock for its whole life, so the probe can tell it is alive.
    let d = tempfile::tempdir().unwrap();
    let code = r#"
import fcntl, os, memscope
memscope.start()
spool = os.environ["MEMSCOPE_SPOOL"]
f = open(os.path.join(spool, "collector.lock"))
try:
    fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)
    print("lock: free")
except BlockingIOError:
    print("lock: held")
print("mode:", oct(os.stat(os.path.join(spool, "collector.lock")).st_mode & 0o777))
memscope.stop()
"#;
    let mut cmd = Command::new(venv().python());
    cmd.args(["-c", code]);
    clean(&mut cmd, d.path());
    let out = cmd.output().unwrap();
    check(&out, "collector lock probe");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("lock: held"), "{stdout}");
    assert!(stdout.contains("mode: 0o600"), "{stdout}");
}

#[test]
fn recover_writes_the_dumps_of_a_plain_python_run_whose_collector_was_killed() {
    // `memscope collect` keeps the run information in its private spool as `memscope run`
    // does (issue 9's recover, issue 12's collector): killed, its spool is recovered into the
    // output path of the run's configuration.
    let d = tempfile::tempdir().unwrap();
    let code = r#"
import os, signal, memscope
memscope.start()
memscope.step()
memscope.step()
s = memscope._session()
os.kill(s.collector.pid, signal.SIGKILL)
s.collector.wait()
memscope.step()
memscope.stop()
print("spool:", os.environ["MEMSCOPE_SPOOL"])
"#;
    let mut cmd = Command::new(venv().python());
    cmd.args(["-c", code]);
    clean(&mut cmd, d.path());
    let out = cmd.output().unwrap();
    check(&out, "plain job with a killed collector");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let spool = PathBuf::from(
        stdout
            .lines()
            .find_map(|l| l.strip_prefix("spool: "))
            .unwrap_or_else(|| panic!("{stdout}")),
    );
    assert!(spool.join("run.json").is_file(), "run.json in {spool:?}");
    let o = Command::new(memscope_tests::memscope_bin())
        .arg("recover")
        .arg(&spool)
        .output()
        .unwrap();
    check(&o, "memscope recover");
    assert!(!spool.exists(), "the spool is removed once recovered");
    let dumps = files(&d.path().join("memscopeDumpResults"), "memscope_dump_");
    assert_eq!(dumps.len(), 1, "{dumps:?}");
    let rows = memscope_tests::read_csv(&dumps[0]);
    let steps: Vec<&str> = rows
        .iter()
        .filter(|r| r["Event Type"] == "STEP")
        .map(|r| r["Name"].as_str())
        .collect();
    assert_eq!(steps, ["1", "2", "3"], "{rows:?}");
}

#[test]
fn plain_python_config_call_stack_python_puts_python_stacks_on_the_rows() {
    let job = script("api_job.py");
    let ex = example_dir();
    let stacks = std::ffi::OsStr::new("--stacks");
    let d = tempfile::tempdir().unwrap();
    check(
        &plain(d.path(), &[job.as_os_str(), ex.as_os_str(), stacks]),
        "plain api_job.py --stacks",
    );
    let rows = seed_layout_rows(&d.path().join("memscopeDumpResults"));
    let line = memscope_tests::script_line("api_job.py", "return caching.alloc(0, [2 * MiB])");
    let want = format!("api_job.py({line}): forward_block\n");
    let pta: Vec<&Row> = rows
        .iter()
        .filter(|r| r["Event"] == "MALLOC" && r["Event Type"] == "PTA")
        .filter(|r| attrs(r).get("size").map(String::as_str) == Some("2097152"))
        .collect();
    assert_eq!(pta.len(), 3, "one 2 MiB block per step");
    for r in pta {
        assert!(
            r["Call Stack(Python)"].contains(&want),
            "{want} in {:?}",
            r["Call Stack(Python)"]
        );
    }
}

#[test]
fn plain_python_prints_its_summary_before_it_exits_with_the_script_s_own_exit_status() {
    // issue 23: the summary comes before the shell's next line, and names the real status
    let code = r#"
import sys, memscope
memscope.start()
memscope.step()
memscope.stop()
if sys.argv[1] == "raise":
    raise RuntimeError("boom")
sys.exit(int(sys.argv[1]))
"#;
    for (arg, want) in [("3", 3), ("raise", 1), ("0", 0)] {
        let d = tempfile::tempdir().unwrap();
        let job = d.path().join("job.py");
        std::fs::write(&job, code).unwrap();
        // the shell says the status once python has exited: the summary must come first
        let mut cmd = Command::new("sh");
        cmd.args(["-c", r#""$0" "$1" "$2"; echo "python exited $?" >&2"#])
            .arg(venv().python())
            .arg(&job)
            .arg(arg);
        clean(&mut cmd, d.path());
        let out = cmd.output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        let summary = err
            .find(&format!("memscope: job exited with code {want};"))
            .unwrap_or_else(|| panic!("exit {arg}: the summary names code {want}:\n{err}"));
        let exited = err
            .find(&format!("python exited {want}"))
            .unwrap_or_else(|| panic!("{err}"));
        assert!(
            summary < exited,
            "the summary comes before python is gone:\n{err}"
        );
        // nothing left behind: the collector removed its spool
        let left: Vec<_> = std::fs::read_dir(d.path().join("tmp"))
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }
}

#[test]
fn import_memscope_under_memscope_run_traces_no_memscope_process_of_its_own() {
    // issue 23: memscope.config() runs `memscope config check`; it is not part of the job
    let d = tempfile::tempdir().unwrap();
    let code = "import memscope; memscope.config(events='alloc,free'); print('ok')";
    let mut cmd = Command::new(venv().memscope());
    cmd.args(["run", "--adapters", "host", "-o"])
        .arg(d.path().join("out"))
        .arg("--")
        .arg(venv().python())
        .args(["-c", code]);
    clean(&mut cmd, d.path());
    let out = cmd.output().unwrap();
    check(&out, "memscope run with import memscope");
    let idx: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(d.path().join("out/memscope_run.json")).unwrap(),
    )
    .unwrap();
    let exes: Vec<&str> = idx["runs"][0]["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["exe"].as_str().unwrap())
        .collect();
    assert!(
        exes.iter().all(|e| !e.ends_with("/memscope")),
        "traced: {exes:?}"
    );
}
