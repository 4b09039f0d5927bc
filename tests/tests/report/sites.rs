//! What the report answers about sites: the demo's top sites split by caller, a Python
//! script's bytearrays at its own line, one run of a folder holding two.

use super::*;

/// Allocators of the report's first process that has `pool`, with their live views.
fn allocator(data: &serde_json::Value, pool: &str) -> serde_json::Value {
    data["runs"][0]["processes"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["allocators"].as_array().unwrap().iter())
        .find(|a| a["pool"] == pool)
        .unwrap_or_else(|| panic!("no {pool} allocator"))
        .clone()
}

#[test]
fn the_demo_s_top_sites_split_the_alloc_helper_by_its_callers() {
    let py = python();
    let t = train();
    let run = memscope_run(
        &["--adapters", "pta,mstx", "--call-stack", "python:8"],
        &[py.as_str(), t.as_str(), "--steps", "4"],
        &[("SIM_NPU_DIR", sim_npu_dir().to_str().unwrap())],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("sites.html");
    report(&[run.out.path()], &html);
    let pta = allocator(&report_data(&html), "PTA");
    let v = &pta["at"]["peak"];
    assert_eq!(v["site_kind"], "first frame of your code, by caller");
    let sites = v["sites"].as_array().unwrap();
    let alloc: Vec<&serde_json::Value> = sites
        .iter()
        .filter(|s| s["site"].as_str().unwrap().ends_with("): alloc"))
        .collect();
    let callers: std::collections::BTreeSet<&str> = alloc
        .iter()
        .map(|s| s["caller"].as_str().unwrap_or("-"))
        .collect();
    assert!(
        callers.len() >= 3 && callers.iter().all(|c| c.contains("): main")),
        "alloc() split by the lines of main() that call it: {callers:?}"
    );
    for s in &alloc {
        assert_eq!(s["rule"], "first frame in your code, Python stack");
        assert!(
            s["stack"]
                .as_str()
                .unwrap()
                .starts_with("Call Stack(Python):\n"),
            "{s}"
        );
    }
    // the largest blocks name the same site and caller
    let frame = v["blocks"][0]["frame"].as_str().unwrap();
    assert!(frame.contains("): alloc ← train.py("), "{frame}");
}

#[test]
fn a_python_script_keeping_bytearrays_is_answered_at_its_own_line_on_the_console_and_in_the_report()
{
    let script = repo_root().join("tests/python/bytearrays_kept.py");
    let line = script_line("bytearrays_kept.py", "kept.append(bytearray(1 << 20))");
    let want = format!("bytearrays_kept.py({line}): grow");
    let py = python();
    let run = memscope_run(
        &["--adapters", "host", "--call-stack", "c:16,python:8"],
        &[py.as_str(), script.to_str().unwrap()],
        &[],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let err = run.stderr();
    // the first "where" on the console: the HOST peak's first site
    let first = err
        .lines()
        .skip_while(|l| !l.contains("HOST peak"))
        .find(|l| l.contains(" bytes at ") || l.contains(" with no call stack"))
        .unwrap_or_else(|| panic!("{err}"));
    assert!(
        first.contains(&want) && first.contains("first frame in your code, Python stack"),
        "{first}\n{err}"
    );
    // four bytearrays of 1 MiB (and the byte CPython adds to each)
    assert!(first.starts_with("    4 block(s), 41943"), "{first}");
    assert!(!first.contains("_PyObject_Malloc"), "{first}");
    // the report: the top site at the HOST peak, and the largest block
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("host.html");
    report(&[run.out.path()], &html);
    let host = allocator(&report_data(&html), "HOST");
    let v = &host["at"]["peak"];
    let top = v["sites"][0]["site"].as_str().unwrap();
    assert!(top.ends_with(&want), "{}", v["sites"]);
    let frame = v["blocks"][0]["frame"].as_str().unwrap();
    assert!(frame.contains(&want), "{frame}");
}

#[test]
fn a_report_of_a_folder_holding_two_runs_shows_the_newest_run_only() {
    let py = python();
    let t = train();
    let out = tempfile::tempdir().unwrap();
    for extra in [&[][..], &["--no-leak"][..]] {
        let o = Command::new(memscope_bin())
            .args(["run", "-q", "--adapters", "pta,mstx", "-o"])
            .arg(out.path())
            .arg("--")
            .args([py.as_str(), t.as_str(), "--steps", "3"])
            .args(extra)
            .env("SIM_NPU_DIR", sim_npu_dir())
            .output()
            .unwrap();
        assert!(o.status.success(), "{o:?}");
    }
    let pid_of = |run: usize| job_process(out.path(), run)["pid"].as_u64().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("two.html");
    let o = report(&[out.path()], &html);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("holds 2 runs") && err.contains("using run 2, the newest"),
        "{err}"
    );
    let data = report_data(&html);
    let pids: Vec<u64> = data["runs"][0]["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["pid"].as_u64().unwrap())
        .collect();
    assert_eq!(pids, vec![pid_of(1)], "one run's process");
    // the older one on request
    let html1 = dir.path().join("one.html");
    let o = Command::new(memscope_bin())
        .args(["report", "--run", "1"])
        .arg(out.path())
        .arg("-o")
        .arg(&html1)
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    let pids: Vec<u64> = report_data(&html1)["runs"][0]["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["pid"].as_u64().unwrap())
        .collect();
    assert_eq!(pids, vec![pid_of(0)]);
    // its charts are the run's own: not empty, not squeezed to an edge
    let page = load(&html);
    assert_clean(&page);
    let mem = page.section("memory");
    let points: Vec<u64> = mem
        .split("data-points=\"")
        .skip(1)
        .filter_map(|s| s.split('"').next()?.parse().ok())
        .collect();
    assert!(
        !points.is_empty() && points.iter().all(|&n| n > 0),
        "{points:?}"
    );
}
