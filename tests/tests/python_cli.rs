//! Issue 12, the CLI side of the Python features (no wheel needed): msMemScope's config.json
//! as `--config` and the config.json memscope writes, and `--events traceback` on a job that
//! runs no Python; the collector of plain-python runs (`memscope collect`): what an analyzer
//! the job calls reads, and the run index it writes.

use memscope_tests::{sim_npu_dir, walk};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn check(out: &Output, what: &str) {
    assert!(
        out.status.success(),
        "{what} failed ({:?})\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn files(dir: &Path, name: &str) -> Vec<PathBuf> {
    let mut v = Vec::new();
    walk(dir, &mut |p| {
        if p.file_name().is_some_and(|n| n == name) {
            v.push(p.to_path_buf());
        }
    });
    v
}

/// The start of a script that sets memscope's `config(CONFIG)` and a sim-npu PTA caching
/// pool `pool` on device 0 (train.py's stand-ins), importing `memscope`, `train` and `sys`.
fn pool_script(config: &str) -> String {
    let ex = memscope_tests::repo_root().join("examples/sim-npu");
    format!(
        "import sys\nsys.path.insert(0, {ex:?})\nimport memscope, train\n\
         memscope.config({config})\n\
         npu = train.Npu(train.find_sim_npu_dir())\n\
         train.check(npu.aclInit(None), 'aclInit')\n\
         train.check(npu.aclrtSetDevice(0), 'aclrtSetDevice')\n\
         pool = train.CachingAllocator(npu, train.Counters(), 'ptaCaching', train.CACHING_SEGMENT)\n",
        ex = ex.display().to_string()
    )
}

/// `python3 -c SCRIPT` in `cwd`, plainly (no launcher), with the source tree's package.
fn plain_python(cwd: &Path, script: &str) -> Output {
    Command::new(memscope_tests::python3())
        .args(["-c", script])
        .current_dir(cwd)
        .env("PYTHONPATH", memscope_tests::repo_root().join("python"))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("MEMSCOPE_CLI", memscope_tests::memscope_bin())
        .env("SIM_NPU_DIR", sim_npu_dir())
        .env("TMPDIR", cwd)
        .env_remove("LD_PRELOAD")
        .env_remove("MEMSCOPE_SPOOL")
        .env_remove("MSTX_INJECTION_PATH")
        .output()
        .unwrap()
}

#[test]
fn msmemscope_config_json_is_accepted_by_run_config() {
    // Behaviour spec §4's example, as msMemScope writes it (outputDir pointed at a tempdir).
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("out");
    let text = format!(
        r#"{{
    "SelectedStepList": {{ "stepCount": 0, "stepIdList": [0, 0, 0, 0, 0] }},
    "analysisType": 1, "cStackDepth": 0, "collectAllNpu": true, "collectCpu": false,
    "collectMode": 0, "dataFormat": 0, "dumpEventType": 7, "enableCStack": false,
    "enableCompare": false, "enablePyStack": false, "eventType": 7, "isEffective": true,
    "levelType": 1, "logLevel": 1, "npuSlots": 0, "oomTopK": 10, "outputDir": "{}",
    "pyStackDepth": 0,
    "watchConfig": {{ "end": "", "fullContent": false, "isWatched": false, "outputId": 4294967295, "start": "" }}
}}"#,
        out.display()
    );
    let cfg = d.path().join("config.json");
    std::fs::write(&cfg, text).unwrap();
    let prog = memscope_tests::program("mstx_basic");
    let o = Command::new(memscope_tests::memscope_bin())
        .arg("run")
        .arg("--config")
        .arg(&cfg)
        .arg("--")
        .arg(&prog)
        .env("SIM_NPU_DIR", sim_npu_dir())
        .output()
        .unwrap();
    check(&o, "memscope run --config <msMemScope config.json>");
    let written = files(&out, "config.json");
    assert_eq!(written.len(), 1, "the dump went to outputDir: {written:?}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&written[0]).unwrap()).unwrap();
    let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted, "sorted keys");
    for k in memscope_collect::config::msmemscope::KEYS {
        assert!(v.get(k).is_some(), "written config.json lacks {k}");
    }
    assert_eq!(v["outputDir"], out.display().to_string());
    // And memscope's own reading of the file it wrote gives the same run again.
    let o = Command::new(memscope_tests::memscope_bin())
        .arg("run")
        .arg("--config")
        .arg(&written[0])
        .arg("-o")
        .arg(d.path().join("again"))
        .arg("--")
        .arg(&prog)
        .output()
        .unwrap();
    check(&o, "memscope run --config <written config.json>");
}

#[test]
fn events_traceback_on_a_job_without_python_warns_instead_of_writing_nothing() {
    let prog = memscope_tests::program("mstx_basic");
    let p = prog.to_string_lossy().into_owned();
    let r = memscope_tests::memscope_run(
        &["--events", "alloc,free,traceback"],
        &[&p],
        &[("SIM_NPU_DIR", &sim_npu_dir().to_string_lossy())],
    );
    assert_eq!(r.code(), 0, "{}", r.stderr());
    assert!(
        r.stderr().contains("--events traceback: no Python process"),
        "{}",
        r.stderr()
    );
}

#[test]
fn format_db_puts_python_trace_rows_into_the_dump_database() {
    let d = tempfile::tempdir().unwrap();
    let root = memscope_tests::repo_root();
    let o = Command::new(memscope_tests::memscope_bin())
        .args([
            "run",
            "-q",
            "--format",
            "db",
            "--events",
            "alloc,free,launch,traceback",
        ])
        .arg("-o")
        .arg(d.path())
        .arg("--")
        .arg("python3")
        .arg(root.join("tests/python/api_job.py"))
        .arg(root.join("examples/sim-npu"))
        .arg("--trace")
        .env("PYTHONPATH", root.join("python"))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("MEMSCOPE_CLI", memscope_tests::memscope_bin())
        .env("SIM_NPU_DIR", sim_npu_dir())
        .output()
        .unwrap();
    check(&o, "memscope run --format db --events ...traceback");
    let mut dbs = Vec::new();
    let mut csvs = Vec::new();
    walk(d.path(), &mut |p| {
        let n = p.file_name().unwrap().to_string_lossy().into_owned();
        if n.starts_with("memscope_dump_") && n.ends_with(".db") {
            dbs.push(p.to_path_buf());
        }
        if n.starts_with("python_trace_") {
            csvs.push(p.to_path_buf());
        }
    });
    assert!(csvs.is_empty(), "moved into the .db: {csvs:?}");
    assert_eq!(dbs.len(), 1, "{dbs:?}");
    let conn = rusqlite::Connection::open(&dbs[0]).unwrap();
    let table: String = conn
        .query_row(
            "SELECT name FROM sqlite_master WHERE name LIKE 'python_trace_%'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let script = root.join("tests/python/api_job.py");
    let line = std::fs::read_to_string(&script)
        .unwrap()
        .lines()
        .position(|l| l.starts_with("def forward_block("))
        .unwrap()
        + 1;
    let n: i64 = conn
        .query_row(
            &format!("SELECT count(*) FROM {table} WHERE FuncInfo = ?1"),
            [format!("{}({line}): forward_block", script.display())],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(n, 3);
    let cols: Vec<String> = conn
        .prepare(&format!("SELECT * FROM {table}"))
        .unwrap()
        .column_names()
        .into_iter()
        .map(str::to_owned)
        .collect();
    assert_eq!(
        cols,
        [
            "FuncInfo",
            "StartTime(ns)",
            "EndTime(ns)",
            "Thread Id",
            "Process Id"
        ]
    );
}

#[test]
fn an_analyzer_called_right_after_stop_in_plain_python_reads_every_row_recorded() {
    // The collector of a plain-python run writes records a reorder window after they happen
    // and flushes every 500 ms: an analyzer the job calls waits until its files hold
    // everything, so a script that analyses its own run sees all of it (a CI failure of
    // `torch_roles`, where decompose read 2 rows).
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("out");
    let script = format!(
        "import csv, glob\n{pre}\
         memscope.start()\n\
         for _ in range(10000):\n    (b,) = pool.alloc(0, [4096])\n    pool.free([b])\n    memscope.step()\n\
         memscope.stop()\n\
         memscope.analyzer.decompose({out:?}, output_path={dec:?})\n\
         n = {{}}\n\
         for f in glob.glob({out:?} + '/**/memscope_dump_*.csv', recursive=True):\n\
         \x20   for r in csv.DictReader(open(f)):\n\
         \x20       n[r['Event Type']] = n.get(r['Event Type'], 0) + 1\n\
         print('in the dump: PTA %d STEP %d' % (n.get('PTA', 0), n.get('STEP', 0)))\n",
        pre = pool_script(&format!("output_path={:?}", out.display().to_string())),
        out = out.display().to_string(),
        dec = d.path().join("dec").display().to_string(),
    );
    let o = plain_python(d.path(), &script);
    check(
        &o,
        "plain python: 10 000 PTA blocks and steps, stop(), decompose",
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("had not written everything"), "{err}");
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("in the dump: PTA 20000 STEP 10000"), "{text}");
}

#[test]
fn two_plain_python_runs_into_one_folder_are_two_runs_of_the_run_index_not_two_ranks() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("out");
    for code in [0, 3] {
        let script = format!(
            "{pre}memscope.start()\n(b,) = pool.alloc(0, [4096])\nmemscope.stop()\nsys.exit({code})\n",
            pre = pool_script(&format!("output_path={:?}", out.display().to_string())),
        );
        let o = plain_python(d.path(), &script);
        assert_eq!(o.status.code(), Some(code), "{o:?}");
    }
    let index: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("memscope_run.json")).unwrap())
            .unwrap();
    let runs = index["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2, "{index}");
    assert_eq!(runs[1]["exit_code"], 3, "{index}");
    assert_eq!(runs[0]["command"][1], "-c", "{index}");
    assert_eq!(runs[0]["processes"].as_array().unwrap().len(), 1, "{index}");
    let o = Command::new(memscope_tests::memscope_bin())
        .args(["analyze", "leaks"])
        .arg(&out)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("holds 2 runs") && err.contains("using run 2, the newest"),
        "{err}"
    );
}

#[test]
fn config_format_db_under_memscope_run_puts_that_process_s_python_trace_into_its_database() {
    // the run writes CSV; the script's config(format="db") makes its own dumps .db, and its
    // Python trace follows them (issue 27 left it as a CSV beside the .db)
    let d = tempfile::tempdir().unwrap();
    let root = memscope_tests::repo_root();
    let script = format!(
        "{pre}\
         def work():\n    (b,) = pool.alloc(0, [4096])\n    pool.free([b])\n\
         memscope.start()\n\
         for _ in range(3):\n    work()\n\
         memscope.stop()\n",
        pre = pool_script("format='db'"),
    );
    let o = Command::new(memscope_tests::memscope_bin())
        .args(["run", "-q", "--events", "alloc,free,launch,traceback", "-o"])
        .arg(d.path())
        .args(["--", "python3", "-c", &script])
        .env("PYTHONPATH", root.join("python"))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("MEMSCOPE_CLI", memscope_tests::memscope_bin())
        .env("SIM_NPU_DIR", sim_npu_dir())
        .output()
        .unwrap();
    check(&o, "memscope run -- python3 -c <config(format='db')>");
    let mut dbs = Vec::new();
    let mut traces = Vec::new();
    walk(d.path(), &mut |p| {
        let n = p.file_name().unwrap().to_string_lossy().into_owned();
        if n.starts_with("memscope_dump_") {
            dbs.push(p.to_path_buf());
        }
        if n.starts_with("python_trace_") {
            traces.push(p.to_path_buf());
        }
    });
    let mut logs = String::new();
    walk(d.path(), &mut |p| {
        if p.extension().is_some_and(|e| e == "log") {
            logs.push_str(&std::fs::read_to_string(p).unwrap_or_default());
        }
    });
    assert!(
        traces.is_empty(),
        "moved into the .db: {traces:?} {dbs:?}\n{logs}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(dbs.len(), 1, "{dbs:?}");
    assert!(dbs[0].extension().is_some_and(|e| e == "db"), "{dbs:?}");
    let conn = rusqlite::Connection::open(&dbs[0]).unwrap();
    let n: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE name LIKE 'python_trace_%'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(n, 1);
}

#[test]
fn a_plain_python_job_whose_collector_was_killed_is_told_how_to_recover_its_records() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("out");
    let script = format!(
        "import os, signal\n{pre}\
         memscope.start()\n\
         (b,) = pool.alloc(0, [4096])\n\
         memscope.stop()\n\
         s = sys.modules['memscope._session'].SESSION\n\
         os.kill(s.collector.pid, signal.SIGKILL)\n\
         s.collector.wait()\n\
         try:\n    memscope.analyzer.decompose({out:?})\nexcept RuntimeError:\n    pass\n",
        pre = pool_script(&format!("output_path={:?}", out.display().to_string())),
        out = out.display().to_string(),
    );
    let o = plain_python(d.path(), &script);
    check(&o, "plain python with its collector killed");
    let err = String::from_utf8_lossy(&o.stderr);
    // the analyzer's warning and the line at exit both name the spool and the command
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("collector ended (exit code -9)"))
        .collect();
    assert_eq!(lines.len(), 2, "{err}");
    let spool = lines[1]
        .split("run `memscope recover ")
        .nth(1)
        .and_then(|r| r.split('`').next())
        .unwrap_or_else(|| panic!("{err}"));
    let r = Command::new(memscope_tests::memscope_bin())
        .args(["recover", spool])
        .output()
        .unwrap();
    check(&r, "memscope recover <the spool named>");
    let mut pta = 0;
    walk(&out, &mut |p| {
        if p.extension().is_some_and(|e| e == "csv") && p.to_string_lossy().contains("/dump/") {
            pta += std::fs::read_to_string(p)
                .unwrap()
                .lines()
                .filter(|l| l.contains(",MALLOC,PTA,"))
                .count();
        }
    });
    assert_eq!(
        pta, 1,
        "the block recorded before the kill is in the recovered dump"
    );
}
