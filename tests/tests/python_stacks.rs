//! Issue 13: Python stacks on every row (`--call-stack python:N`, with `c:N` both columns), on
//! real CPython: a known function allocating through the sim-npu caching pool (PTA rows), the
//! driver (HAL rows) and `bytearray` (HOST rows), on the main thread, on a thread named
//! `worker-7`, and in `multiprocessing` children (spawn, fork, forkserver).

use memscope_tests::{memscope_run, python3, script_line, sim_npu_dir, Row, Run};

const JOB: &str = "stacks_job.py";

fn run(stack: &str, args: &[&str]) -> Run {
    run_on(&python3(), stack, args, &[])
}

fn run_on(py: &std::path::Path, stack: &str, args: &[&str], envs: &[(&str, &str)]) -> Run {
    let script = memscope_tests::repo_root().join("tests/python").join(JOB);
    let mut prog = vec![py.to_str().unwrap(), script.to_str().unwrap()];
    prog.extend_from_slice(args);
    let r = memscope_run(
        &[
            "-q",
            "--adapters",
            "pta,mstx,hal,acl,host",
            "--host-rows",
            "--call-stack",
            stack,
        ],
        &prog,
        &[
            &[
                ("SIM_NPU_DIR", &*sim_npu_dir().to_string_lossy()),
                ("PYTHONDONTWRITEBYTECODE", "1"),
            ][..],
            envs,
        ]
        .concat(),
    );
    assert_eq!(r.code(), 0, "stderr:\n{}", r.stderr());
    r
}

/// `stacks_job.py(<line>): make_blocks` for the line containing `needle`.
fn frame(needle: &str) -> String {
    format!("{JOB}({}): make_blocks\n", script_line(JOB, needle))
}

/// MALLOC rows of `pool` whose size is `size`.
fn mallocs<'a>(rows: &'a [Row], pool: &str, size: u64) -> Vec<&'a Row> {
    memscope_tests::select(rows, "MALLOC", pool)
        .into_iter()
        .filter(|r| memscope_tests::attrs(r).get("size") == Some(&size.to_string()))
        .collect()
}

/// Checks (bytearray(n) asks malloc for n + 1 bytes) that the PTA, HAL and HOST rows of
/// `make_blocks` carry a stack naming its line.
fn assert_make_blocks_rows(rows: &[Row]) {
    for (pool, size, needle) in [
        ("PTA", 3u64 << 20, "pool.alloc(0, [3 << 20])"),
        ("HAL", 5 << 20, "npu.halMemAlloc(ctypes.byref(ptr), 5 << 20"),
        ("HOST", 7_000_004, "bytearray(7_000_003)"),
    ] {
        let m = mallocs(rows, pool, size);
        assert_eq!(m.len(), 1, "one {pool} MALLOC of {size} bytes");
        let st = &m[0]["Call Stack(Python)"];
        assert!(
            st.contains(&frame(needle)),
            "{pool} row's Python stack names make_blocks at {needle:?}:\n{st}"
        );
        assert!(st.ends_with('\n'), "one newline after each frame: {st:?}");
    }
}

#[test]
fn python_stacks_name_the_allocating_function_on_pool_hal_and_host_rows() {
    let r = run("python:16", &[]);
    let rows = r.rows();
    assert_make_blocks_rows(&rows);
    // The innermost frame comes first: bytearray is called by make_blocks itself.
    let host = mallocs(&rows, "HOST", 7_000_004);
    let first = host[0]["Call Stack(Python)"]
        .lines()
        .next()
        .unwrap()
        .to_owned()
        + "\n";
    assert!(first.ends_with(&frame("bytearray(7_000_003)")), "{first}");
    // The FREE rows have the stack of the free.
    let free = memscope_tests::select(&rows, "FREE", "HAL");
    assert!(
        free.iter()
            .any(|f| f["Call Stack(Python)"].contains(&frame("npu.halMemFree(ptr)"))),
        "HAL FREE row names the halMemFree line"
    );
    // Rows of the interpreter's start, before the bootstrap turned stacks on, say NA.
    assert!(rows.iter().any(|r| r["Call Stack(Python)"] == "NA"));
    assert!(
        rows.iter().all(|r| r["Call Stack(C)"].is_empty()),
        "no C stacks without c:N"
    );
}

#[test]
fn c_and_python_call_stacks_give_both_columns() {
    let r = run("c:8,python:8", &[]);
    let rows = r.rows();
    assert_make_blocks_rows(&rows);
    let host = mallocs(&rows, "HOST", 7_000_004);
    let c = &host[0]["Call Stack(C)"];
    assert!(!c.is_empty(), "the HOST row has its C stack too");
}

#[test]
fn python_stacks_are_cut_at_the_requested_depth() {
    let r = run("python:2", &[]);
    let rows = r.rows();
    let pta = mallocs(&rows, "PTA", 3 << 20);
    let st = &pta[0]["Call Stack(Python)"];
    assert_eq!(st.lines().count(), 2, "{st}");
    assert!(st.lines().next().unwrap().ends_with("): alloc"), "{st}");
    assert!(st.contains(&frame("pool.alloc(0, [3 << 20])")), "{st}");
}

#[test]
fn python_stacks_cover_a_thread_named_worker_7() {
    let r = run("python:16", &["--thread"]);
    let rows = r.rows();
    assert_make_blocks_rows(&rows);
    let host = mallocs(&rows, "HOST", 7_000_004);
    assert_ne!(
        host[0]["Thread Id"], host[0]["Process Id"],
        "allocated on the worker thread"
    );
    assert!(host[0]["Call Stack(Python)"].contains("threading.py"));
}

#[test]
fn python_stacks_cover_multiprocessing_spawn_fork_and_forkserver_children() {
    for method in ["spawn", "fork", "forkserver"] {
        let r = run("python:16", &["--spawn", method]);
        let child: u32 = r
            .stdout()
            .lines()
            .find_map(|l| l.strip_prefix("child pid: "))
            .and_then(|l| l.split_whitespace().next())
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("{method}: child pid printed: {}", r.stdout()));
        let rows: Vec<Row> = r
            .rows()
            .into_iter()
            .filter(|r| r["Process Id"] == child.to_string())
            .collect();
        assert!(!rows.is_empty(), "{method}: the child was traced");
        assert_make_blocks_rows(&rows);
        assert!(
            mallocs(&rows, "HOST", 7_000_004)[0]["Call Stack(Python)"].contains("multiprocessing")
        );
    }
}

#[test]
fn without_python_call_stacks_the_column_stays_empty() {
    let r = run("c:4", &[]);
    let rows = r.rows();
    assert!(rows.iter().all(|r| r["Call Stack(Python)"].is_empty()));
}

#[test]
fn a_job_that_replaces_the_profile_function_keeps_running_with_stale_but_valid_stacks() {
    // sys.setprofile(None) removes memscope's hook from the thread: the returns of inner() and
    // outer() are never seen, their frames stay on the shadow stack (kept alive by it), and
    // later rows read them without harm.
    let code = "import sys, gc\n\
                def inner():\n    sys.setprofile(None)\n    return bytearray(5_000_001)\n\
                def outer():\n    return inner()\n\
                outer()\n\
                for _ in range(20):\n    b = bytearray(3_000_001)\n    gc.collect()\n\
                print('done')\n";
    let py = python3();
    let r = memscope_run(
        &[
            "-q",
            "--adapters",
            "host",
            "--host-rows",
            "--call-stack",
            "python:8",
        ],
        &[py.to_str().unwrap(), "-c", code],
        &[],
    );
    assert_eq!(r.code(), 0, "stderr:\n{}", r.stderr());
    assert!(r.stdout().contains("done"));
    let rows = r.rows();
    let inner = mallocs(&rows, "HOST", 5_000_002);
    assert!(inner[0]["Call Stack(Python)"].contains("): inner\n"));
    assert_eq!(mallocs(&rows, "HOST", 3_000_002).len(), 20);
}

/// CPython >= 3.12 found here (sys.monitoring keeps the shadow stacks there).
fn monitoring_pythons() -> Vec<std::path::PathBuf> {
    let v = memscope_tests::pythons(12..=20);
    assert!(
        !v.is_empty(),
        "no CPython >= 3.12 found (pyenv versions or python3.1X on PATH): the sys.monitoring \
         path of Python stacks needs one"
    );
    v
}

#[test]
fn on_cpython_3_12_and_later_sys_monitoring_keeps_the_stacks_of_every_thread() {
    for py in monitoring_pythons() {
        for args in [&[][..], &["--thread"][..]] {
            let r = run_on(&py, "python:16", args, &[]);
            assert_make_blocks_rows(&r.rows());
        }
        // The profiler tool id is memscope's, and no profile function is installed.
        let code = "import sys, threading\n\
                    print('tool', sys.monitoring.get_tool(2), sys.getprofile())\n\
                    t = threading.Thread(target=lambda: print('thread', sys.getprofile()))\n\
                    t.start(); t.join()\n";
        let r = memscope_run(
            &[
                "-q",
                "--adapters",
                "host",
                "--host-rows",
                "--call-stack",
                "python:4",
            ],
            &[py.to_str().unwrap(), "-c", code],
            &[],
        );
        assert_eq!(r.code(), 0, "{}", r.stderr());
        assert!(
            r.stdout().contains("tool memscope None") && r.stdout().contains("thread None"),
            "{}: {}",
            py.display(),
            r.stdout()
        );
    }
}

#[test]
fn when_the_profiler_tool_id_is_taken_or_refused_the_profile_hook_keeps_the_stacks() {
    let taken = tempfile::tempdir().unwrap();
    std::fs::write(
        taken.path().join("sitecustomize.py"),
        "import sys\nsys.monitoring.use_tool_id(2, 'another-profiler')\n",
    )
    .unwrap();
    let dir = taken.path().to_str().unwrap();
    for py in monitoring_pythons() {
        for envs in [
            &[("PYTHONPATH", dir)][..],
            &[("MEMSCOPE_PY_STACK_HOOK", "profile")][..],
        ] {
            let r = run_on(&py, "python:16", &["--thread"], envs);
            assert_make_blocks_rows(&r.rows());
        }
    }
}
