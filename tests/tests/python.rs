//! Issue 12: the `memscope` wheel and Python package. The wheel is built once per test binary
//! (`python/build-wheel.sh`, maturin from PyPI — `.ci/run` installs it) and installed into a
//! fresh venv with nothing else; the scripts of `tests/python/` then run over the sim-npu
//! stand-in, plain (`python job.py`) and under `memscope run`.

use memscope_tests::{attrs, read_csv, repo_root, sim_npu_dir, walk, Row};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

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

struct Venv {
    dir: PathBuf,
    wheel: PathBuf,
}

impl Venv {
    fn python(&self) -> PathBuf {
        self.dir.join("bin/python")
    }
    fn memscope(&self) -> PathBuf {
        self.dir.join("bin/memscope")
    }
}

fn check(out: &Output, what: &str) {
    assert!(
        out.status.success(),
        "{what} failed ({:?})\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Builds the wheel (dev or release profile, as this test binary) and installs it into a fresh
/// venv under the build directory, once per test binary.
fn venv() -> &'static Venv {
    static V: OnceLock<Venv> = OnceLock::new();
    V.get_or_init(|| {
        let maturin = Command::new("python3")
            .args(["-m", "maturin", "--version"])
            .output();
        assert!(
            maturin.is_ok_and(|o| o.status.success()),
            "maturin is not installed: `pip install maturin` (.ci/run installs it)"
        );
        let profile = memscope_tests::profile_dir();
        let mut build = Command::new(repo_root().join("python/build-wheel.sh"));
        if profile.file_name().is_some_and(|n| n == "release") {
            build.arg("--release");
        }
        let out = build.output().expect("run python/build-wheel.sh");
        check(&out, "python/build-wheel.sh");
        let wheel = String::from_utf8_lossy(&out.stdout)
            .lines()
            .last()
            .expect("wheel path")
            .trim()
            .to_owned();
        let dir = profile.join("python-wheel-venv");
        let _ = std::fs::remove_dir_all(&dir);
        check(
            &Command::new("python3")
                .args(["-m", "venv"])
                .arg(&dir)
                .output()
                .expect("python3 -m venv"),
            "python3 -m venv",
        );
        let v = Venv {
            dir,
            wheel: PathBuf::from(&wheel),
        };
        check(
            &Command::new(v.python())
                .args(["-m", "pip", "install", "-q", "--no-index", "--no-deps"])
                .arg(&wheel)
                .output()
                .expect("pip install"),
            "pip install the wheel",
        );
        v
    })
}

/// A command of the venv's environment only (no PYTHONPATH, no memscope variables).
fn clean(cmd: &mut Command, cwd: &Path) {
    cmd.current_dir(cwd)
        .env_remove("PYTHONPATH")
        .env("SIM_NPU_DIR", sim_npu_dir())
        .env("TMPDIR", cwd.join("tmp"));
    for k in [
        "MEMSCOPE_SPOOL",
        "MEMSCOPE_ADAPTERS",
        "MEMSCOPE_COLLECT_MODE",
        "MSTX_INJECTION_PATH",
        "MEMSCOPE_PROBE_PATH",
        "MEMSCOPE_CLI",
        "LD_PRELOAD",
    ] {
        cmd.env_remove(k);
    }
    std::fs::create_dir_all(cwd.join("tmp")).expect("tmp dir");
}

fn script(name: &str) -> PathBuf {
    repo_root().join("tests/python").join(name)
}

fn example_dir() -> PathBuf {
    repo_root().join("examples/sim-npu")
}

/// Runs `python SCRIPT ARGS` plainly in `cwd`, then waits for its collector to finish (its
/// spool under `cwd/tmp` is removed at the end).
fn plain(cwd: &Path, script_args: &[&std::ffi::OsStr]) -> Output {
    let v = venv();
    let mut cmd = Command::new(v.python());
    cmd.args(script_args);
    clean(&mut cmd, cwd);
    let out = cmd.output().expect("run python");
    let t = Instant::now();
    loop {
        let busy = std::fs::read_dir(cwd.join("tmp"))
            .map(|rd| {
                rd.flatten().any(|e| {
                    e.file_name()
                        .to_string_lossy()
                        .starts_with("memscope_spool_")
                })
            })
            .unwrap_or(false);
        if !busy {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "the collector of the plain run did not finish"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    out
}

/// Runs `memscope run ARGS -- python SCRIPT ARGS` from the venv in `cwd`.
fn launched(cwd: &Path, run_args: &[&str], script_args: &[&std::ffi::OsStr]) -> Output {
    let v = venv();
    let mut cmd = Command::new(v.memscope());
    cmd.arg("run")
        .arg("-q")
        .args(run_args)
        .arg("--")
        .arg(v.python())
        .args(script_args);
    clean(&mut cmd, cwd);
    cmd.output().expect("run memscope run")
}

fn files(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut v = Vec::new();
    walk(dir, &mut |p| {
        if p.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with(prefix))
        {
            v.push(p.to_path_buf());
        }
    });
    v.sort();
    v
}

fn is_ts(s: &str) -> bool {
    s.len() == 14 && s.bytes().all(|b| b.is_ascii_digit())
}

/// Checks the seed's layout: `<out>/msmemscope_<pid>_<ts>_ascend/device_0/dump/
/// memscope_dump_<ts>.csv` and `config.json` with msMemScope's keys. Returns the rows.
fn seed_layout_rows(out: &Path) -> Vec<Row> {
    let dumps = files(out, "memscope_dump_");
    assert_eq!(dumps.len(), 1, "{dumps:?}");
    let d = &dumps[0];
    let rel: Vec<String> = d
        .strip_prefix(out)
        .unwrap()
        .iter()
        .map(|c| c.to_string_lossy().into_owned())
        .collect();
    assert_eq!(rel.len(), 4, "{rel:?}");
    let p: Vec<&str> = rel[0].split('_').collect();
    assert!(
        p.len() == 4
            && p[0] == "msmemscope"
            && p[1].parse::<u32>().is_ok()
            && is_ts(p[2])
            && p[3] == "ascend",
        "{rel:?}"
    );
    assert_eq!((rel[1].as_str(), rel[2].as_str()), ("device_0", "dump"));
    let ts = rel[3]
        .strip_prefix("memscope_dump_")
        .and_then(|s| s.strip_suffix(".csv"))
        .unwrap();
    assert!(is_ts(ts), "{rel:?}");
    let cfg: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.join(&rel[0]).join("config.json")).expect("config.json"),
    )
    .expect("config.json is JSON");
    for k in [
        "SelectedStepList",
        "dumpEventType",
        "eventType",
        "outputDir",
        "watchConfig",
    ] {
        assert!(cfg.get(k).is_some(), "config.json lacks msMemScope's {k}");
    }
    read_csv(d)
}

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
        ".data/scripts/memscope",
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
        let known: Vec<&Vec<String>> = rows
            .iter()
            .filter(|r| r[0].ends_with("api_job.py(16): forward_block"))
            .collect();
        assert_eq!(known.len(), 3, "forward_block rows in {}", out.display());
        for r in known {
            let (s, e): (u64, u64) = (r[1].parse().unwrap(), r[2].parse().unwrap());
            assert!(s <= e);
        }
        assert!(
            rows.iter().any(|r| r[0] == "optimizer"),
            "RecordFunction row"
        );
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
            .filter(|r| r[0].ends_with("trace_modules.py(18): known_function"))
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
    assert!(stdout.contains("bad_input: 41 checks ok"), "{stdout}");
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
memscope.check_inefficient({dump:?})
an.analyze("leaks", input_path={dump:?}, mstx_info="step", start_index=0)
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
    assert!(
        stdout.contains("annotated copy written to"),
        "check_inefficient ran memscope analyze inefficient: {stdout}"
    );
    assert!(
        stdout.contains("fewer than 3") || stdout.contains("step"),
        "check_leaks ran memscope analyze leaks: {stdout}"
    );
}
