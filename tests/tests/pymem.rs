//! Issue 16: the PYMEM adapter (CPython's allocator domains, `--adapters pymem`) on real
//! CPython: 100 000 small objects built in a known function are 100 000 PYMEM MALLOC rows
//! attributed to it, the ones kept to the end are reported live by Python stack, the freed ones
//! are seen freed; default allocator and `PYTHONMALLOC=malloc`; `-X tracemalloc` still works;
//! fork, `multiprocessing` spawn children, sub-interpreters and an interpreter embedded in a C
//! program; the adapter contract.

use memscope_tests::{attrs, compliance, memscope_run, python3, script_line, Row, Run};
use std::collections::HashSet;

const JOB: &str = "pymem_job.py";
const OBJECTS: usize = 100_000;
/// The list that holds them grows by reallocation (about 90 times for 100 000 items, from
/// the same line): the tolerance above `OBJECTS`.
const GROWTH: usize = 200;

fn job(args: &[&str]) -> Vec<String> {
    let script = memscope_tests::repo_root().join("tests/python").join(JOB);
    let mut v = vec![
        python3().to_string_lossy().into_owned(),
        script.to_string_lossy().into_owned(),
    ];
    v.extend(args.iter().map(|s| s.to_string()));
    v
}

fn run(py_flags: &[&str], args: &[&str], envs: &[(&str, &str)]) -> Run {
    let mut prog = job(args);
    for (i, f) in py_flags.iter().enumerate() {
        prog.insert(1 + i, f.to_string());
    }
    let prog: Vec<&str> = prog.iter().map(String::as_str).collect();
    let r = memscope_run(
        &[
            "--adapters",
            "pymem",
            "--host-rows",
            "--call-stack",
            "python:8",
        ],
        &prog,
        &[&[("PYTHONDONTWRITEBYTECODE", "1")][..], envs].concat(),
    );
    assert_eq!(r.code(), 0, "stderr:\n{}", r.stderr());
    r
}

/// `pymem_job.py(<line of needle>): <func>`.
fn frame(needle: &str, func: &str) -> String {
    format!("{JOB}({}): {func}", script_line(JOB, needle))
}

/// PYMEM MALLOC rows of `object()` instances (16 bytes) whose innermost Python frame is the
/// `object()` line of `build_objects` and whose caller is `caller`. (Under the profile-hook
/// Python stacks of CPython < 3.12, the same line also allocates a 72-byte bound method per
/// call, for the profiler's C_CALL event, freed at once.)
fn built_by<'a>(rows: &'a [Row], caller: &str) -> Vec<&'a Row> {
    let inner = frame("out.append(object())", "build_objects");
    memscope_tests::select(rows, "MALLOC", "PYMEM")
        .into_iter()
        .filter(|r| attrs(r)["size"] == "16")
        .filter(|r| {
            let mut l = r["Call Stack(Python)"].lines();
            l.next().is_some_and(|f| f.ends_with(&inner))
                && l.next().is_some_and(|f| f.ends_with(caller))
        })
        .collect()
}

fn kept_caller() -> String {
    frame("kept = build_objects(100000)", "<module>")
}

fn assert_objects_attributed(r: &Run) {
    let rows = r.rows();
    let kept = built_by(&rows, &kept_caller());
    assert!(
        (OBJECTS..=OBJECTS + GROWTH).contains(&kept.len()),
        "{} PYMEM MALLOC rows of object() attributed to build_objects (kept), want {OBJECTS}",
        kept.len()
    );
    for m in &kept {
        assert_eq!(m["Device Id"], "cpu");
    }
    // none of them is freed before the interpreter finalises
    let ids: HashSet<String> = kept
        .iter()
        .map(|m| attrs(m)["allocation_id"].clone())
        .collect();
    let freed = memscope_tests::select(&rows, "FREE", "PYMEM")
        .into_iter()
        .filter(|f| ids.contains(&attrs(f)["allocation_id"]))
        .count();
    assert_eq!(freed, 0, "kept objects are not freed");
}

/// The objects of the site line `N object(s), B bytes at …FIRST ← CALLER [rule]` in the summary
/// section titled `title` (issue 23: objects summed up by the first frame of the user's code
/// and its caller).
fn summary_group(stderr: &str, title: &str, first: &str, caller: &str) -> Option<u64> {
    let sec = stderr.split_once(title)?.1;
    for l in sec.lines().skip(1) {
        if l.starts_with("  PYMEM") {
            break;
        }
        if l.contains(&format!("{first} ← {caller} ")) {
            return l.trim().split_once(" object(s)")?.0.parse().ok();
        }
    }
    None
}

#[test]
fn pymem_rows_attribute_100000_small_objects_to_their_function_and_see_the_frees() {
    let r = run(&[], &[], &[]);
    assert!(r.stdout().contains("kept 100000"), "{}", r.stdout());
    assert_objects_attributed(&r);
    let rows = r.rows();
    // the 20 000 built by churn() are freed there: each has its FREE row
    let churned: HashSet<String> = built_by(&rows, &frame("tmp = build_objects(n)", "churn"))
        .iter()
        .map(|m| attrs(m)["allocation_id"].clone())
        .collect();
    assert!(churned.len() >= 20_000, "{} churned objects", churned.len());
    let freed = memscope_tests::select(&rows, "FREE", "PYMEM")
        .into_iter()
        .filter(|f| churned.contains(&attrs(f)["allocation_id"]))
        .count();
    assert!(
        freed >= 20_000,
        "{freed} of the 20 000 freed objects have a FREE row"
    );
    // every MALLOC row names its domain; pymalloc's arenas are rows of their own
    assert!(memscope_tests::select(&rows, "MALLOC", "PYMEM")
        .iter()
        .all(|m| ["raw", "mem", "obj"].contains(&attrs(m)["domain"].as_str())));
    let arenas = memscope_tests::select(&rows, "MALLOC", "PYMEM_ARENA");
    assert!(!arenas.is_empty(), "pymalloc's arenas are PYMEM_ARENA rows");
    assert!(arenas.iter().all(|a| attrs(a)["arena"] == "true"));
}

#[test]
fn pymem_summary_reports_the_kept_objects_live_at_exit_by_python_stack() {
    let r = run(&[], &[], &[]);
    let err = r.stderr();
    let inner = frame("out.append(object())", "build_objects");
    // the site is build_objects' line, split by its caller: the one that kept them
    let live = summary_group(
        &err,
        "PYMEM Python objects live at exit",
        &inner,
        &kept_caller(),
    )
    .unwrap_or_else(|| panic!("no live group for build_objects:\n{err}"));
    assert!(
        (OBJECTS as u64..=(OBJECTS + GROWTH) as u64).contains(&live),
        "{live} objects live at exit from build_objects:\n{err}"
    );
    let peak = summary_group(&err, "PYMEM peak", &inner, &kept_caller())
        .unwrap_or_else(|| panic!("no peak group for build_objects:\n{err}"));
    assert!(peak >= OBJECTS as u64, "{peak} at the peak:\n{err}");
}

#[test]
fn pymem_works_with_pythonmalloc_malloc() {
    let r = run(&[], &[], &[("PYTHONMALLOC", "malloc")]);
    assert_objects_attributed(&r);
    let rows = r.rows();
    assert!(
        memscope_tests::select(&rows, "MALLOC", "PYMEM_ARENA").is_empty(),
        "no pymalloc, no arenas"
    );
}

#[test]
fn pymem_chains_with_tracemalloc() {
    let r = run(&["-X", "tracemalloc"], &[], &[]);
    assert!(
        r.stdout().contains("tracemalloc traced True"),
        "tracemalloc still traces under the PYMEM hooks: {}",
        r.stdout()
    );
    assert_objects_attributed(&r);
}

fn child_rows(r: &Run) -> usize {
    let rows = r.rows();
    let parent = rows
        .iter()
        .find(|x| x["Event Type"] == "PYMEM")
        .map(|x| x["Process Id"].clone())
        .unwrap();
    built_by(&rows, &frame("keep = build_objects(5000)", "child"))
        .iter()
        .filter(|m| m["Process Id"] != parent)
        .count()
}

#[test]
fn pymem_follows_forked_and_spawned_multiprocessing_children() {
    for mode in ["fork", "spawn"] {
        let r = run(&[], &[mode], &[]);
        let n = child_rows(&r);
        assert!(
            (5000..=5000 + GROWTH).contains(&n),
            "{mode}: {n} rows of the child's 5000 objects"
        );
    }
}

#[test]
fn pymem_sees_sub_interpreters() {
    let r = run(&[], &["subinterp"], &[]);
    let rows = r.rows();
    let blobs = memscope_tests::select(&rows, "MALLOC", "PYMEM")
        .into_iter()
        .filter(|m| attrs(m)["size"] == "3034")
        .count();
    assert!(
        blobs >= 40,
        "{blobs} rows of the sub-interpreter's 40 blobs"
    );
}

#[test]
fn pymem_selected_from_config_json_keeps_its_rows_in_the_capture_without_host_rows() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("config.json");
    std::fs::write(&cfg, r#"{"adapters": ["pymem"]}"#).unwrap();
    let prog = job(&[]);
    let prog: Vec<&str> = prog.iter().map(String::as_str).collect();
    let r = memscope_run(&["--config", cfg.to_str().unwrap()], &prog, &[]);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    assert!(
        !r.rows()
            .iter()
            .any(|x| x["Event Type"].starts_with("PYMEM")),
        "PYMEM rows are written with --host-rows only"
    );
    assert!(
        r.stderr().contains("PYMEM Python objects live at exit"),
        "the summary is printed: {}",
        r.stderr()
    );
}

#[test]
fn pymem_keeps_the_adapter_contract() {
    // as a third party's plugin is checked: loaded by path (`--adapters pymem` adds the same
    // library)
    let lib = memscope_tests::profile_dir().join("libmemscope_adapter_pymem.so");
    // rows written (`host_rows` from config.json: the helper adds `--host-rows` itself for its
    // HOST check, and a flag given twice is refused)
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("config.json");
    std::fs::write(&cfg, r#"{"host_rows": true}"#).unwrap();
    let prog = job(&[]);
    compliance::assert_adapter_compliance(&compliance::Case {
        name: "pymem".into(),
        on: vec![
            "--adapter-path".into(),
            lib.to_string_lossy().into_owned(),
            "--device".into(),
            "npu,cpu".into(),
            "--config".into(),
            cfg.to_string_lossy().into_owned(),
        ],
        off: vec![
            "--adapters".into(),
            "mstx".into(),
            "--device".into(),
            "npu,cpu".into(),
            "--config".into(),
            cfg.to_string_lossy().into_owned(),
        ],
        program: prog.clone(),
        envs: vec![("PYTHONDONTWRITEBYTECODE".into(), "1".into())],
        event_types: vec!["PYMEM".into(), "PYMEM_ARENA".into()],
        framework: None,
        // Not checkable for an allocator wrapper: CPython's raw allocator tail-calls malloc
        // (`return malloc(size)`), so the hook that forwarded to it is the innermost frame of
        // that HOST row although the adapter's own code allocates nothing.
        own_code: None,
        fork_program: Some(job(&["fork"])),
        flood: None,
        // its object types are registered account-only (plugin ABI 1.2)
        account: Some((
            vec!["PYMEM".into()],
            vec![
                "--adapter-path".into(),
                lib.to_string_lossy().into_owned(),
                "--device".into(),
                "npu,cpu".into(),
            ],
        )),
    });
}

/// Bytes and objects per line of `pymem_lines.py` of a `memscope diff --json` (frames of one
/// line in different functions — a comprehension and its caller — add up, as tracemalloc's
/// "lineno" groups them).
fn diff_by_line(diff: &serde_json::Value) -> std::collections::BTreeMap<u64, (i64, i64)> {
    let mut m = std::collections::BTreeMap::new();
    for r in diff["pairs"][0]["rows"].as_array().unwrap() {
        let key = r["key"].as_str().unwrap();
        let Some((_, rest)) = key.split_once("pymem_lines.py(") else {
            continue;
        };
        let line: u64 = rest.split(')').next().unwrap().parse().unwrap();
        let e = m.entry(line).or_insert((0, 0));
        e.0 += r["delta_bytes"].as_i64().unwrap();
        e.1 += r["delta_blocks"].as_i64().unwrap();
    }
    m
}

#[test]
fn diff_between_two_points_agrees_with_tracemalloc_compare_to_by_line_within_one_percent() {
    let script = memscope_tests::repo_root().join("tests/python/pymem_lines.py");
    let dir = tempfile::tempdir().unwrap();
    let tm = dir.path().join("tm.json");
    let o = std::process::Command::new(python3())
        .arg(&script)
        .arg("tracemalloc")
        .arg(&tm)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let top: serde_json::Value = serde_json::from_slice(&std::fs::read(&tm).unwrap()).unwrap();
    let py = python3();
    let r = memscope_run(
        &["-q", "--adapters", "pymem", "--call-stack", "python:1"],
        &[py.to_str().unwrap(), script.to_str().unwrap(), "memscope"],
        &[("PYTHONDONTWRITEBYTECODE", "1")],
    );
    assert_eq!(r.code(), 0, "{}", r.stderr());
    // the points are the job's two memscope_step() calls; PYMEM rows are in the capture
    let o = std::process::Command::new(memscope_tests::memscope_bin())
        .args([
            "diff",
            "--between",
            "step:1",
            "step:2",
            "--type",
            "PYMEM",
            "--json",
        ])
        .arg(r.out.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let diff: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let ours = diff_by_line(&diff);
    let mut ranked: Vec<(u64, i64)> = ours.iter().map(|(l, (b, _))| (*l, *b)).collect();
    ranked.sort_by_key(|r| std::cmp::Reverse(r.1));
    let theirs = top.as_array().unwrap();
    assert_eq!(theirs.len(), 10);
    let their_lines: Vec<u64> = theirs.iter().map(|t| t["line"].as_u64().unwrap()).collect();
    let our_lines: Vec<u64> = ranked.iter().take(10).map(|r| r.0).collect();
    assert_eq!(
        our_lines, their_lines,
        "top 10 lines: ours {ranked:?}, tracemalloc {top}"
    );
    for t in theirs {
        let line = t["line"].as_u64().unwrap();
        let want = t["size_diff"].as_i64().unwrap() as f64;
        let got = ours[&line].0 as f64;
        assert!(
            (got - want).abs() <= 0.01 * want,
            "line {line}: memscope {got} bytes, tracemalloc {want}"
        );
    }
}

/// `python3-config --embed --cflags --ldflags` of the interpreter the tests run (the one next
/// to [`python3`], else the first on `PATH`), split into arguments; `None` when there is no
/// `python3-config` or its headers are missing (Debian: `apt-get install python3-dev`).
fn python_embed_flags() -> Option<Vec<String>> {
    let beside = python3().with_file_name("python3-config");
    let config = if beside.is_file() {
        beside
    } else {
        "python3-config".into()
    };
    let out = std::process::Command::new(&config)
        .args(["--embed", "--cflags", "--ldflags"])
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    let flags: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    let has_header = flags
        .iter()
        .filter_map(|f| f.strip_prefix("-I"))
        .any(|d| std::path::Path::new(d).join("Python.h").is_file());
    has_header.then_some(flags)
}

/// `N object(s), B bytes (F freed before)` of the title of the PYMEM live-at-exit section.
fn live_at_exit_counts(stderr: &str) -> Option<(u64, u64)> {
    let title = stderr
        .lines()
        .find(|l| l.contains("PYMEM Python objects live at exit"))?;
    let objects = title.split_once("): ")?.1.split_once(" object(s)")?.0;
    let freed = title.split_once(" (")?.1.rsplit_once(" (")?.1;
    let freed = freed.split_once(" freed before")?.0;
    Some((objects.parse().ok()?, freed.parse().ok()?))
}

#[test]
fn pymem_names_the_python_line_of_an_embedded_interpreter_in_a_c_program() {
    let Some(flags) = python_embed_flags() else {
        println!("skipped: no python3-config with Python.h (apt-get install python3-dev)");
        return;
    };
    let src = memscope_tests::repo_root().join("tests/programs/embed_python.c");
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let exe = memscope_tests::compile(&[&src], "embed_python", &flags, false);
    let r = memscope_run(
        &[
            "--adapters",
            "pymem",
            "--host-rows",
            "--call-stack",
            "python:8",
        ],
        &[exe.to_str().unwrap()],
        &[],
    );
    assert_eq!(r.code(), 0, "stderr:\n{}", r.stderr());
    assert!(
        r.stdout().contains("embedded kept 10000") && r.stdout().contains("embedded finalized"),
        "{}",
        r.stdout()
    );
    let err = r.stderr();
    // the 10 000 strings (and the list's item array) are live at exit, at keep()'s line of the
    // code compiled as "embedded.py", called from its module
    let kept = summary_group(
        &err,
        "PYMEM Python objects live at exit",
        "embedded.py(5): keep",
        "embedded.py(7): <module>",
    )
    .unwrap_or_else(|| panic!("no live group at embedded.py(5): keep:\n{err}"));
    assert!(
        (10_000..=10_000 + GROWTH as u64).contains(&kept),
        "{kept} objects live at exit from keep():\n{err}"
    );
    // the run summary agrees with the rows: every PYMEM MALLOC is live at exit or freed
    let rows = r.rows();
    let count = |ev, ty| memscope_tests::select(&rows, ev, ty).len() as u64;
    let (mallocs, frees) = (count("MALLOC", "PYMEM"), count("FREE", "PYMEM"));
    let (live, freed) =
        live_at_exit_counts(&err).unwrap_or_else(|| panic!("no live-at-exit title:\n{err}"));
    assert_eq!((live, freed), (mallocs - frees, frees), "{err}");
    let kinds = |ev| rows.iter().filter(|x| x["Event"] == ev).count();
    let written = format!(
        ": {} rows (MALLOC {}, FREE {}), 0 dropped",
        rows.len(),
        kinds("MALLOC"),
        kinds("FREE")
    );
    assert!(err.contains(&written), "want {written:?} in:\n{err}");
}

#[test]
fn host_mmap_rows_of_pymalloc_arenas_carry_pymalloc_arena_true() {
    // 30 000 small strings: a few new 1 MiB arenas, each an mmap of HOST's
    let py = python3();
    let r = memscope_run(
        &["--adapters", "host,pymem", "--host-rows"],
        &[
            py.to_str().unwrap(),
            "-c",
            "kept = [str(i) * 3 for i in range(30000)]",
        ],
        &[("MEMSCOPE_HOST_MMAP", "1")],
    );
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let rows = r.rows();
    let id = |x: &Row| x["ID"].parse::<u64>().unwrap();
    let arenas = memscope_tests::select(&rows, "MALLOC", "PYMEM_ARENA");
    assert!(!arenas.is_empty(), "new arenas were made");
    let mappings = memscope_tests::select(&rows, "MALLOC", "HOST_MMAP");
    let marked: Vec<&&Row> = mappings
        .iter()
        .filter(|m| attrs(m).get("pymalloc_arena").is_some_and(|v| v == "true"))
        .collect();
    assert_eq!(marked.len(), arenas.len(), "one marked mapping per arena");
    for a in &arenas {
        let m = marked
            .iter()
            .find(|m| m["Ptr"] == a["Ptr"])
            .unwrap_or_else(|| panic!("no marked HOST_MMAP row at the arena {}", a["Ptr"]));
        assert_eq!((id(m) + 1, &m["Thread Id"]), (id(a), &a["Thread Id"]));
    }
    assert!(
        mappings.len() > marked.len(),
        "the interpreter's other mappings are not marked"
    );
    let ids: Vec<u64> = rows.iter().map(id).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "rows in ID order");
}

#[test]
fn a_pymem_capture_exports_to_one_clean_process_directory() {
    let prog = job(&[]);
    let prog: Vec<&str> = prog.iter().map(String::as_str).collect();
    let r = memscope_run(&["--adapters", "pymem"], &prog, &[]);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let out = tempfile::tempdir().unwrap();
    let o = std::process::Command::new(memscope_tests::memscope_bin())
        .args(["export", "--to", "csv"])
        .arg(r.out.path())
        .arg("-o")
        .arg(out.path().join("e"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut names = Vec::new();
    memscope_tests::walk(&out.path().join("e"), &mut |p| {
        names.push(p.file_name().unwrap().to_string_lossy().into_owned())
    });
    assert!(
        !names
            .iter()
            .any(|n| n.starts_with(".memscope_incomplete") || n.starts_with("config_1")),
        "{names:?}"
    );
    let rows: usize = names
        .iter()
        .filter(|n| n.starts_with("memscope_dump_"))
        .count();
    assert!(rows > 0, "{names:?}");
}
