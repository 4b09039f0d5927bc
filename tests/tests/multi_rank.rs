//! Issue 18: multi-rank jobs — an 8-rank launcher (`tests/programs/rank_launcher.c`) over the
//! sim-npu stand-ins, each rank `tests/programs/rank_worker.c`, under one `memscope run`.

mod export_common;

use memscope_tests::*;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

#[path = "multi_rank/analyze.rs"]
mod analyze;
#[path = "multi_rank/compare.rs"]
mod compare;
#[path = "multi_rank/labels.rs"]
mod labels;
#[path = "multi_rank/short_lived.rs"]
mod short_lived;
#[path = "multi_rank/signals.rs"]
mod signals;

const RANKS: usize = 8;

fn worker() -> PathBuf {
    let src = repo_root().join("tests/programs/rank_worker.c");
    compile(&[&src], "rank_worker", ACL_LIBS, false)
}

fn launcher() -> PathBuf {
    program("rank_launcher")
}

/// `memscope: pid P (...): N rows` lines of the summary: pid → rows.
fn summary_rows(stderr: &str) -> std::collections::BTreeMap<u32, u64> {
    stderr
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("memscope: pid ")?;
            let (pid, rest) = rest.split_once(' ')?;
            let rows = rest.split_once("): ")?.1.split_once(" rows")?.0;
            Some((pid.parse().ok()?, rows.parse().ok()?))
        })
        .collect()
}

/// Every `msmemscope_<pid>_*` directory under `out` with its CSV dumps' rows, by pid.
fn dumps_by_pid(out: &Path) -> std::collections::BTreeMap<u32, Vec<(PathBuf, Vec<Row>)>> {
    let mut m = std::collections::BTreeMap::<u32, Vec<(PathBuf, Vec<Row>)>>::new();
    walk(out, &mut |p| {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.starts_with("memscope_dump_") && name.ends_with(".csv") {
            let pid = p
                .ancestors()
                .filter_map(|a| a.file_name()?.to_str())
                .find_map(|n| {
                    n.strip_prefix("msmemscope_")?
                        .split('_')
                        .next()?
                        .parse()
                        .ok()
                })
                .expect("dump under msmemscope_<pid>_<ts>");
            m.entry(pid)
                .or_default()
                .push((p.to_path_buf(), read_csv(p)));
        }
    });
    m
}

/// Runs the 8-rank launcher (3 steps per rank) under `memscope run` with `args`, launcher
/// flags `lflags` and worker mode `mode` ("" or "visible"); asserts exit 0.
fn run_ranks(args: &[&str], lflags: &[&str], mode: &str) -> Run {
    let launcher = launcher();
    let worker = worker();
    let mut prog: Vec<String> = vec![launcher.display().to_string()];
    prog.extend(lflags.iter().map(|s| s.to_string()));
    prog.push(RANKS.to_string());
    prog.push(worker.display().to_string());
    prog.extend(["3", "0"].map(String::from));
    if !mode.is_empty() {
        prog.push(mode.into());
    }
    let p: Vec<&str> = prog.iter().map(String::as_str).collect();
    let run = memscope_run(args, &p, &[]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    run
}

/// `device_<n>` directories under each `msmemscope_<pid>_*` directory, by pid.
fn device_dirs(out: &Path) -> std::collections::BTreeMap<u32, Vec<String>> {
    dumps_by_pid(out)
        .into_iter()
        .map(|(pid, files)| {
            let mut d: Vec<String> = files
                .iter()
                .map(|(p, _)| {
                    p.parent()
                        .unwrap()
                        .parent()
                        .unwrap()
                        .file_name()
                        .unwrap()
                        .to_string_lossy()
                        .into_owned()
                })
                .collect();
            d.sort();
            (pid, d)
        })
        .collect()
}

#[test]
fn per_rank_visible_devices_map_each_rank_to_its_own_device() {
    // every rank sets logical device 0 with ASCEND_RT_VISIBLE_DEVICES=<rank> of its own
    let run = run_ranks(&["--adapters", "acl,hal,mstx"], &["-v"], "visible");
    let mut devices: Vec<String> = device_dirs(run.out.path())
        .into_values()
        .flatten()
        .collect();
    devices.sort();
    let want: Vec<String> = (0..RANKS).map(|r| format!("device_{r}")).collect();
    assert_eq!(devices, want, "{}", run.stderr());
    // the Device Id column is the physical device too
    for (_, files) in dumps_by_pid(run.out.path()) {
        for (p, rows) in files {
            let dir = p
                .parent()
                .unwrap()
                .parent()
                .unwrap()
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let dev = dir.strip_prefix("device_").unwrap();
            for r in rows.iter().filter(|r| r["Event"] == "MALLOC") {
                assert_eq!(r["Device Id"], dev, "{}", p.display());
            }
        }
    }
}

#[test]
fn visible_devices_set_inside_the_job_are_the_processs_own() {
    let w = worker();
    let run = memscope_run(
        &["--adapters", "acl,hal,mstx"],
        &[
            "sh",
            "-c",
            "ASCEND_RT_VISIBLE_DEVICES=3 exec \"$0\" 2 0 visible",
            w.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let dirs: Vec<String> = device_dirs(run.out.path())
        .into_values()
        .flatten()
        .collect();
    assert_eq!(dirs, vec!["device_3".to_string()], "{}", run.stderr());
}

#[test]
fn c_api_only_program_dump_holds_start_trace_step_and_stop_trace_rows() {
    let src = repo_root().join("tests/programs/capi_steps.c");
    let prog = compile(&[&src], "capi_steps", ACL_LIBS, false);
    let run = memscope_run(
        &["--collect-mode", "deferred", "--adapters", "acl,hal,mstx"],
        &[prog.to_str().unwrap()],
        &[],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(run.stdout().contains("api 0 0 0 0 0 0"), "{}", run.stdout());
    let rows = run.rows();
    let system: Vec<(String, String, String)> = rows
        .iter()
        .filter(|r| {
            r["Event"] == "SYSTEM" && r["Event Type"] != "ACL_INIT" && r["Event Type"] != "ACL_FINI"
        })
        .map(|r| {
            (
                r["Event Type"].clone(),
                r["Name"].clone(),
                r["Device Id"].clone(),
            )
        })
        .collect();
    let s = |t: &str, n: &str, d: &str| (t.to_string(), n.to_string(), d.to_string());
    assert_eq!(
        system,
        vec![
            s("START_TRACE", "N/A", "N/A"),
            s("STEP", "1", "2"),
            s("STEP", "2", "2"),
            s("STEP", "3", "2"),
            s("STEP", "4", "2"),
            s("STOP_TRACE", "N/A", "N/A"),
        ],
        "{}",
        run.stderr()
    );
    // the 4 allocations of the window, and (issue 26) the block allocated before it, written
    // once right after START_TRACE with its time and marked shadow:true; freed after stop(),
    // it gets its FREE too, so every MALLOC has its FREE
    let mut rows = rows;
    rows.sort_by_key(|r| r["ID"].parse::<u64>().unwrap());
    let start = rows
        .iter()
        .position(|r| r["Event Type"] == "START_TRACE")
        .unwrap();
    let mallocs: Vec<&Row> = rows.iter().filter(|r| r["Event"] == "MALLOC").collect();
    assert_eq!(mallocs.len(), 5, "{}", run.stderr());
    let history = &rows[start + 1];
    assert_eq!(
        (history["Event"].as_str(), history["Event Type"].as_str()),
        ("MALLOC", "HAL")
    );
    assert_eq!(history["Timestamp(ns)"], rows[start]["Timestamp(ns)"]);
    let a = attrs(history);
    assert_eq!(a.get("shadow").map(String::as_str), Some("true"), "{a:?}");
    assert_eq!(a.get("size").map(String::as_str), Some("1048576"));
    assert!(
        !a.contains_key("used"),
        "no figures on a history row: {a:?}"
    );
    assert_eq!(
        mallocs
            .iter()
            .filter(|r| attrs(r).contains_key("shadow"))
            .count(),
        1
    );
    let ids = |kind: &str| -> Vec<String> {
        let mut v: Vec<String> = rows
            .iter()
            .filter(|r| r["Event"] == kind)
            .map(|r| attrs(r)["allocation_id"].clone())
            .collect();
        v.sort();
        v
    };
    assert_eq!(ids("MALLOC"), ids("FREE"), "every MALLOC has its FREE");
    let stop = rows
        .iter()
        .position(|r| r["Event Type"] == "STOP_TRACE")
        .unwrap();
    let last_free = rows.iter().rposition(|r| r["Event"] == "FREE").unwrap();
    assert!(last_free > stop, "the block's FREE after stop() is written");
    assert_eq!(attrs(&rows[last_free])["allocation_id"], a["allocation_id"]);
    // step() drives the analyses' step numbering
    assert!(run.stderr().contains("4 step(s) ended"), "{}", run.stderr());
}

#[test]
fn step_rows_of_a_cpu_only_c_api_program_are_in_its_dump_device_less_between_the_window_rows() {
    // issue 27 item 3: no device at all, `--device cpu`: the STEP rows are not dropped
    let src = repo_root().join("tests/programs/capi_cpu_steps.c");
    let prog = compile(&[&src], "capi_cpu_steps", &[], false);
    let run = memscope_run(
        &[
            "--adapters",
            "host",
            "--device",
            "cpu",
            "--collect-mode",
            "deferred",
            "--host-rows",
        ],
        &[prog.to_str().unwrap()],
        &[],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(run.stdout().contains("api 0 0 0 0 0"), "{}", run.stdout());
    let dumps = run.dumps(".csv");
    assert_eq!(dumps.len(), 1, "{dumps:?}");
    assert!(
        dumps[0].to_string_lossy().contains("/device_cpu/"),
        "{dumps:?}"
    );
    let rows = run.rows();
    let system: Vec<(String, String, String)> = rows
        .iter()
        .filter(|r| r["Event"] == "SYSTEM")
        .map(|r| {
            (
                r["Event Type"].clone(),
                r["Name"].clone(),
                r["Device Id"].clone(),
            )
        })
        .collect();
    let s = |t: &str, n: &str| (t.to_string(), n.to_string(), "N/A".to_string());
    assert_eq!(
        system,
        vec![
            s("START_TRACE", "N/A"),
            s("STEP", "1"),
            s("STEP", "2"),
            s("STEP", "3"),
            s("STOP_TRACE", "N/A"),
        ],
        "{}",
        run.stderr()
    );
    // IDs have no gap: the STEP rows are the ones that were missing
    let ids: Vec<u64> = rows.iter().map(|r| r["ID"].parse().unwrap()).collect();
    let first = ids[0];
    assert!(
        ids.iter()
            .enumerate()
            .all(|(i, id)| *id == first + i as u64),
        "{ids:?}"
    );
    // every step has its malloc/free after its STEP row
    let step_at: Vec<usize> = rows
        .iter()
        .enumerate()
        .filter(|(_, r)| r["Event Type"] == "STEP")
        .map(|(i, _)| i)
        .collect();
    for w in step_at.windows(2) {
        assert!(
            rows[w[0]..w[1]].iter().any(|r| r["Event"] == "MALLOC"),
            "{rows:?}"
        );
    }
}

#[test]
fn device_npu_3_writes_no_device_cpu_file_for_other_ranks() {
    let run = run_ranks(
        &["--adapters", "acl,hal,mstx", "--device", "npu:3"],
        &[],
        "",
    );
    let dirs = device_dirs(run.out.path());
    let all: Vec<String> = dirs.values().flatten().cloned().collect();
    assert_eq!(all, vec!["device_3".to_string()], "{}", run.stderr());
    // the summary's counts match the files: rank 3's rows, 0 for every other rank
    let summary = summary_rows(&run.stderr());
    let with_rows: Vec<u32> = summary
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(p, _)| *p)
        .collect();
    assert_eq!(
        with_rows,
        dirs.keys().copied().collect::<Vec<_>>(),
        "{}",
        run.stderr()
    );
    let files = dumps_by_pid(run.out.path());
    for (pid, f) in files {
        let rows: usize = f.iter().map(|(_, r)| r.len()).sum();
        assert_eq!(
            summary.get(&pid).copied(),
            Some(rows as u64),
            "{}",
            run.stderr()
        );
    }
}

/// `memscope_run.json` of `out`, validated against `schemas/memscope_run.schema.json`.
fn run_index(out: &Path) -> serde_json::Value {
    let path = out.join("memscope_run.json");
    let schema = repo_root().join("schemas/memscope_run.schema.json");
    let v = export_common::py_check(
        "check_schema.py",
        &[schema.to_str().unwrap(), path.to_str().unwrap()],
    );
    assert_eq!(v["valid"], true);
    serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap()
}

#[test]
fn run_index_lists_eight_ranks_with_rank_devices_exit_status_and_files() {
    let run = run_ranks(&["--adapters", "acl,hal,mstx"], &[], "");
    let idx = run_index(run.out.path());
    assert_eq!(idx["runs"].as_array().unwrap().len(), 1);
    let r = &idx["runs"][0];
    assert_eq!(r["exit_code"], 0);
    assert!(r["interrupted_by"].is_null());
    assert_eq!(r["recovered"], false, "a run that wrote its own entry: {r}");
    let procs = r["processes"].as_array().unwrap();
    // the launcher and 8 ranks (on failure: what memscope said and what it wrote, to tell a
    // rank that never made a stream from one the collector missed)
    let listing: Vec<String> = std::fs::read_dir(run.out.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        procs.len(),
        RANKS + 1,
        "{r}\nstderr:\n{}\noutput: {listing:?}",
        run.stderr()
    );
    let mut ranks: Vec<u64> = Vec::new();
    for p in procs {
        assert_eq!(p["ended"]["how"], "exit", "{p}");
        assert_eq!(p["ended"]["code"], 0, "{p}");
        let Some(rank) = p["rank"].as_u64() else {
            assert!(p["exe"].as_str().unwrap().ends_with("rank_launcher"), "{p}");
            assert!(p["files"].as_array().unwrap().is_empty());
            continue;
        };
        ranks.push(rank);
        assert_eq!(p["local_rank"], rank);
        assert_eq!(p["world_size"], RANKS as u64);
        assert_eq!(p["env"]["RANK"], rank.to_string());
        assert_eq!(p["devices"], serde_json::json!([rank.to_string()]), "{p}");
        let files = p["files"].as_array().unwrap();
        assert_eq!(files.len(), 1, "{p}");
        let path = run.out.path().join(files[0]["path"].as_str().unwrap());
        assert_eq!(
            read_csv(&path).len() as u64,
            files[0]["rows"].as_u64().unwrap()
        );
        assert_eq!(p["rows"], files[0]["rows"]);
        assert!(run.out.path().join(p["dir"].as_str().unwrap()).is_dir());
    }
    ranks.sort();
    assert_eq!(ranks, (0..RANKS as u64).collect::<Vec<_>>());
    // a second run into the same directory is added, the first kept
    let again = Command::new(memscope_bin())
        .args(["run", "-q", "--adapters", "acl,hal,mstx", "-o"])
        .arg(run.out.path())
        .arg("--")
        .arg(worker())
        .args(["1", "0"])
        .output()
        .unwrap();
    assert!(again.status.success(), "{again:?}");
    assert_eq!(
        run_index(run.out.path())["runs"].as_array().unwrap().len(),
        2
    );
}

#[test]
fn per_rank_summary_is_one_line_per_rank_and_names_the_rank_with_the_largest_peak() {
    // rank r allocates (1 + r) MiB per step: rank 7 has the largest HAL peak, rank 0 the least
    let run = run_ranks(&["--adapters", "acl,hal,mstx"], &[], "");
    let err = run.stderr();
    assert!(
        err.contains("memscope: largest peak (HAL): rank 7 (pid ")
            && err.contains("device 7): 8.0 MiB; smallest: rank 0 (pid ")
            && err.contains("imbalance 7.0 MiB"),
        "{err}"
    );
    let head = err
        .lines()
        .position(|l| l.starts_with("  rank  pid"))
        .unwrap_or_else(|| panic!("no table: {err}"));
    let table: Vec<&str> = err.lines().skip(head + 1).take(RANKS).collect();
    for (r, l) in table.iter().enumerate() {
        let cells: Vec<&str> = l.split_whitespace().collect();
        assert_eq!(cells[0], r.to_string(), "{l}");
        assert_eq!(cells[2], r.to_string(), "device of rank {r}: {l}");
        assert_eq!(&cells[cells.len() - 2..], ["exit", "0"], "{l}");
    }
    // the per-process sections are in the full summary file, not on the console
    assert!(!err.contains("Memory gap"), "{err}");
    let full = entries(run.out.path(), "memscope_summary_");
    assert_eq!(full.len(), 1);
    let text = std::fs::read_to_string(&full[0]).unwrap();
    assert_eq!(text.matches("Memory gap").count(), RANKS, "{text}");
    assert!(err.contains(&full[0].display().to_string()), "{err}");
}
