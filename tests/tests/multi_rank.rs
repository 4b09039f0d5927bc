//! Issue 18: multi-rank jobs — an 8-rank launcher (`tests/programs/rank_launcher.c`) over the
//! sim-npu stand-ins, each rank `tests/programs/rank_worker.c`, under one `memscope run`.

mod export_common;

use memscope_tests::*;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const RANKS: usize = 8;

fn worker() -> PathBuf {
    let src = repo_root().join("tests/programs/rank_worker.c");
    compile(
        &[&src],
        "rank_worker",
        &["-lascendcl", "-lascendcl_impl", "-lruntime", "-lascend_hal"],
        false,
    )
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

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            let st = s
                .rsplit_once(')')
                .map(|(_, r)| r.trim_start().chars().next());
            !matches!(st, Some(Some('Z')) | Some(Some('X')) | None)
        })
        .unwrap_or(false)
}

/// Runs the 8-rank launcher (ranks stepping until a signal ends them) under `memscope run`,
/// sends `sig` to the memscope pid alone once every rank is stepping, and checks that every
/// rank ended and left a complete dump (rows == the summary's rows; every HAL MALLOC freed).
fn signal_to_memscope_ends_every_rank(sig: i32) {
    let out = tempfile::tempdir().unwrap();
    let mut child = Command::new(memscope_bin())
        .arg("run")
        .arg("-o")
        .arg(out.path())
        .args(["--adapters", "acl,hal,mstx", "--"])
        .arg(launcher())
        .arg(RANKS.to_string())
        .arg(worker())
        .args(["0", "2000"])
        .env("MEMSCOPE_KILL_GRACE_S", "20")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start memscope");
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(l);
        }
    });
    let mut ranks = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while ranks.len() < RANKS {
        let l = rx
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .expect("every rank reports ready within 60 s");
        if let Some(pid) = l
            .split_whitespace()
            .nth(3)
            .and_then(|p| p.parse::<u32>().ok())
        {
            ranks.push(pid);
        }
    }
    // let every rank record a few hundred steps
    std::thread::sleep(Duration::from_millis(500));
    send_signal(child.id(), sig);
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "memscope did not end within 60 s of the signal"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.code(), Some(128 + sig), "{status:?}\n{stderr}");
    let left: Vec<u32> = ranks.iter().copied().filter(|p| alive(*p)).collect();
    assert!(left.is_empty(), "ranks still running: {left:?}\n{stderr}");
    assert!(stderr.contains("forwarded to"), "{stderr}");
    assert!(stderr.contains("interrupted by"), "{stderr}");
    assert!(status.signal().is_none());
    let spools: Vec<_> = std::fs::read_dir(out.path())
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(".memscope_spool")
        })
        .collect();
    assert!(spools.is_empty(), "spool left: {spools:?}\n{stderr}");
    let summary = summary_rows(&stderr);
    let dumps = dumps_by_pid(out.path());
    // the run index says how the run and its processes ended
    let idx = run_index(out.path());
    let run = &idx["runs"][0];
    let name = if sig == libc::SIGINT {
        "SIGINT"
    } else {
        "SIGTERM"
    };
    assert_eq!(run["interrupted_by"], name);
    assert_eq!(run["exit_code"], 128 + sig);
    for p in run["processes"].as_array().unwrap() {
        let how = p["ended"]["how"].as_str().unwrap();
        // ranks are the launcher's children: memscope sees their status when it reaps them
        // (the launcher died first), else "unknown" (they did not end through exit())
        assert!(
            (how == "signal" && p["ended"]["signal"] == sig) || how == "unknown",
            "{p}"
        );
    }
    for pid in &ranks {
        let files = dumps
            .get(pid)
            .unwrap_or_else(|| panic!("no dump of rank pid {pid}\n{stderr}"));
        let rows: usize = files.iter().map(|(_, r)| r.len()).sum();
        assert_eq!(
            Some(rows as u64),
            summary.get(pid).copied(),
            "rank pid {pid}: rows in its files vs the summary\n{stderr}"
        );
        let all: Vec<&Row> = files.iter().flat_map(|(_, r)| r).collect();
        let count = |ev: &str| {
            all.iter()
                .filter(|r| r["Event"] == ev && r["Event Type"] == "HAL")
                .count()
        };
        assert!(
            count("MALLOC") > 20,
            "rank pid {pid} recorded {} HAL MALLOC rows",
            count("MALLOC")
        );
        // a block allocated before the signal and freed after it is freed at exit (shadow FREE)
        assert_eq!(
            count("MALLOC"),
            count("FREE"),
            "rank pid {pid}: MALLOC vs FREE"
        );
    }
}

/// `kill -<sig> <pid>` (the test crate has no unsafe code).
fn send_signal(pid: u32, sig: i32) {
    let st = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status()
        .expect("run kill");
    assert!(st.success(), "kill -{sig} {pid}");
}

#[test]
fn sigint_to_memscope_ends_every_rank_and_leaves_complete_dumps() {
    signal_to_memscope_ends_every_rank(libc::SIGINT);
}

#[test]
fn sigterm_to_memscope_ends_every_rank_and_leaves_complete_dumps() {
    signal_to_memscope_ends_every_rank(libc::SIGTERM);
}

#[test]
fn spool_a_live_process_still_writes_is_kept() {
    // The job's shell exits at once and leaves a rank stepping in the background: memscope
    // follows it for 5 s, writes what it recorded, and must not delete its stream.
    let out = tempfile::tempdir().unwrap();
    let log = out.path().join("job.out");
    let err = out.path().join("memscope.err");
    // files, not pipes: the background rank keeps both open after memscope exits
    let status = Command::new(memscope_bin())
        .arg("run")
        .arg("-o")
        .arg(out.path())
        .args(["--adapters", "acl,hal,mstx", "--", "sh", "-c"])
        .arg("\"$0\" 0 2000 & sleep 1; exit 0")
        .arg(worker())
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .status()
        .expect("run memscope");
    let stderr = std::fs::read_to_string(&err).unwrap();
    let text = std::fs::read_to_string(&log).unwrap();
    let pid: u32 = text
        .split_whitespace()
        .nth(3)
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no ready line: {text:?}\n{stderr}"));
    let still = alive(pid);
    send_signal(pid, libc::SIGKILL);
    assert!(still, "the background rank ended early\n{stderr}");
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("still running 5 s after it exited"),
        "{stderr}"
    );
    let spool: Vec<PathBuf> = std::fs::read_dir(out.path())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(".memscope_spool")
        })
        .collect();
    assert_eq!(spool.len(), 1, "{stderr}");
    assert!(
        stderr.contains("kept: 1 process(es) still write to it"),
        "{stderr}"
    );
    let streams = std::fs::read_dir(&spool[0])
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(&format!("{pid}-"))
        })
        .count();
    assert_eq!(
        streams, 1,
        "the rank's stream is in the kept spool\n{stderr}"
    );
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
    let prog = compile(
        &[&src],
        "capi_steps",
        &["-lascendcl", "-lascendcl_impl", "-lruntime", "-lascend_hal"],
        false,
    );
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
    let procs = r["processes"].as_array().unwrap();
    // the launcher and 8 ranks
    assert_eq!(procs.len(), RANKS + 1, "{r}");
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
    let full: Vec<PathBuf> = std::fs::read_dir(run.out.path())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("memscope_summary_")
        })
        .collect();
    assert_eq!(full.len(), 1);
    let text = std::fs::read_to_string(&full[0]).unwrap();
    assert_eq!(text.matches("Memory gap").count(), RANKS, "{text}");
    assert!(err.contains(&full[0].display().to_string()), "{err}");
}

#[test]
fn analyze_over_a_run_dir_prints_one_line_per_rank_sorted_by_peak_with_the_imbalance() {
    let run = run_ranks(&["--adapters", "acl,hal,mstx"], &[], "");
    let dir = run.out.path().to_str().unwrap().to_owned();
    let dec = run.out.path().join("decompose-out");
    for (what, extra) in [
        ("leaks", vec![]),
        ("gap", vec![]),
        (
            "decompose",
            vec!["-o".to_owned(), dec.display().to_string()],
        ),
    ] {
        let o = Command::new(memscope_bin())
            .args(["analyze", what, &dir])
            .args(&extra)
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "analyze {what}: {err}");
        let lines: Vec<&str> = out.lines().collect();
        let head = lines
            .iter()
            .position(|l| l.starts_with("rank  pid"))
            .unwrap_or_else(|| panic!("analyze {what}: no table: {out}"));
        assert!(
            lines[head - 1].contains(&format!("{RANKS} process(es), sorted by peak (HAL)")),
            "{out}"
        );
        // ranks 7..0: rank r's HAL peak is (1 + r) MiB
        let ranks: Vec<&str> = lines[head + 1..head + 1 + RANKS]
            .iter()
            .map(|l| l.split_whitespace().next().unwrap())
            .collect();
        let want: Vec<String> = (0..RANKS).rev().map(|r| r.to_string()).collect();
        assert_eq!(ranks, want, "analyze {what}: {out}");
        for l in &lines[head + 1..head + 1 + RANKS] {
            let c: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(c[2], c[0], "device of rank: {l}");
            assert_eq!(
                format!("{} {}", c[4], c[5]),
                format!("{}.0 MiB", c[0].parse::<u32>().unwrap() + 1),
                "{l}"
            );
        }
        let imb = lines[head + 1 + RANKS];
        assert!(
            imb.starts_with("imbalance: largest peak rank 7 (pid ")
                && imb.contains(") 8.0 MiB, smallest rank 0 (pid ")
                && imb.ends_with(") 1.0 MiB: 7.0 MiB more (8.00x)"),
            "{imb}"
        );
        match what {
            "leaks" => assert!(lines[head + 1].ends_with("  0"), "{out}"),
            "decompose" => {
                let csvs = std::fs::read_dir(&dec).unwrap().count();
                assert_eq!(csvs, RANKS, "one decompose CSV per rank");
            }
            _ => {}
        }
    }
    // --full goes with a directory only
    let one = dumps_by_pid(run.out.path()).into_values().next().unwrap()[0]
        .0
        .clone();
    // --run goes with a directory only; --full on a dump prints every line
    let o = Command::new(memscope_bin())
        .args(["analyze", "leaks", "--run", "1"])
        .arg(&one)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let o = Command::new(memscope_bin())
        .args(["analyze", "leaks", "--full"])
        .arg(&one)
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
}

#[test]
fn analyze_over_a_directory_of_two_runs_uses_the_newest_and_does_not_call_them_ranks() {
    let out = tempfile::tempdir().unwrap();
    for step in ["1", "2"] {
        let o = Command::new(memscope_bin())
            .args(["run", "-q", "--adapters", "acl,hal,mstx", "-o"])
            .arg(out.path())
            .arg("--")
            .arg(worker())
            .args(["1", step])
            .output()
            .unwrap();
        assert!(o.status.success(), "{o:?}");
    }
    let o = Command::new(memscope_bin())
        .args(["analyze", "leaks"])
        .arg(out.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("holds 2 runs") && err.contains("using run 2, the newest"),
        "{err}"
    );
    assert!(!err.contains("map to rank"), "{err}");
    assert!(
        stdout.contains("==== per process: 1 process(es)"),
        "{stdout}"
    );
    assert!(!stdout.contains("imbalance"), "one process: {stdout}");
    // the first run, asked for
    let o = Command::new(memscope_bin())
        .args(["analyze", "leaks", "--run", "1"])
        .arg(out.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("using run 1"));
    let o = Command::new(memscope_bin())
        .args(["analyze", "leaks", "--run", "3"])
        .arg(out.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{o:?}");
}

/// 8 ranks of train.py (5 steps) through `tests/python/rank_launch.py`, rank r on device r,
/// the ranks of `leak` leaking; `--level kernel` so compare has kernel rows.
fn train_ranks(leak: &str) -> Run {
    let launch = repo_root().join("tests/python/rank_launch.py");
    let sim = sim_npu_dir();
    let run = memscope_run(
        &["--level", "kernel", "--events", "alloc,free,launch"],
        &[
            "python3",
            launch.to_str().unwrap(),
            &RANKS.to_string(),
            leak,
            "--steps",
            "5",
        ],
        &[("SIM_NPU_DIR", sim.to_str().unwrap())],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    run
}

fn compare_cmd(args: &[&std::ffi::OsStr]) -> (bool, String, String) {
    let o = Command::new(memscope_bin())
        .arg("compare")
        .args(args)
        .output()
        .unwrap();
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// `(name, device, base, compare, diff, step)` of a compare CSV.
fn compare_rows(path: &Path) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some(",,,Base,Compare"));
    assert_eq!(
        lines.next(),
        Some("Event,Name,Device Id,Allocated Memory(byte),Allocated Memory(byte),Diff Memory(byte),Step"),
        "--step-column"
    );
    lines
        .map(|l| l.split(',').map(str::to_owned).collect())
        .collect()
}

#[test]
fn compare_ignore_device_aligns_rank_0_with_rank_5_and_run_dirs_pair_ranks_by_rank_id() {
    let base = train_ranks("-");
    let leaky = train_ranks("3");
    let out = tempfile::tempdir().unwrap();
    let o = out.path().as_os_str();
    // rank 0 (device 0) against rank 5 (device 5) of the same run
    let file_of = |run: &Run, dev: u32| -> PathBuf {
        run.dumps(".csv")
            .into_iter()
            .find(|p| p.to_string_lossy().contains(&format!("/device_{dev}/")))
            .unwrap_or_else(|| panic!("no device_{dev} dump"))
    };
    let (r0, r5) = (file_of(&base, 0), file_of(&base, 5));
    let (ok, stdout, err) = compare_cmd(&[
        r0.as_os_str(),
        r5.as_os_str(),
        "--level".as_ref(),
        "kernel".as_ref(),
        "-o".as_ref(),
        o,
    ]);
    assert!(ok, "{err}");
    assert!(
        stdout.contains("0 matched"),
        "without --ignore-device nothing aligns: {stdout}"
    );
    let (ok, stdout, err) = compare_cmd(&[
        r0.as_os_str(),
        r5.as_os_str(),
        "--level".as_ref(),
        "kernel".as_ref(),
        "--ignore-device".as_ref(),
        "--step-column".as_ref(),
        "-o".as_ref(),
        o,
    ]);
    assert!(ok, "{err}");
    assert!(stdout.contains(" 0 base only, 0 compare only"), "{stdout}");
    let path = PathBuf::from(stdout.trim().rsplit(" written to ").next().unwrap());
    let rows = compare_rows(&path);
    assert!(!rows.is_empty());
    for r in &rows {
        assert_eq!(r[2], "0", "rows carry the base's device: {r:?}");
        assert_eq!(r[5], "0", "identical ranks: {r:?}");
        let step: u32 = r[6]
            .parse()
            .unwrap_or_else(|_| panic!("step column: {r:?}"));
        assert!((1..=5).contains(&step), "{r:?}");
    }
    // steps 1..5 all appear, each with the same kernels
    let steps: std::collections::BTreeSet<&str> = rows.iter().map(|r| r[6].as_str()).collect();
    assert_eq!(steps.len(), 5, "{rows:?}");
    // --map-device 5=0 aligns the same way
    let (ok, stdout, err) = compare_cmd(&[
        r0.as_os_str(),
        r5.as_os_str(),
        "--level".as_ref(),
        "kernel".as_ref(),
        "--map-device".as_ref(),
        "5=0".as_ref(),
        "-o".as_ref(),
        o,
    ]);
    assert!(
        ok && stdout.contains(" 0 base only, 0 compare only"),
        "{stdout}{err}"
    );
    // two runs: ranks paired by rank id; only rank 3 differs (its leak, from step 3 on)
    let (ok, stdout, err) = compare_cmd(&[
        base.out.path().as_os_str(),
        leaky.out.path().as_os_str(),
        "--level".as_ref(),
        "kernel".as_ref(),
        "--step-column".as_ref(),
        "-o".as_ref(),
        o,
    ]);
    assert!(ok, "{err}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), RANKS, "{stdout}");
    for (r, l) in lines.iter().enumerate() {
        assert!(l.starts_with(&format!("rank {r}: ")), "{l}");
        let diff: i64 = l
            .split(", diff ")
            .nth(1)
            .unwrap()
            .split(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        if r == 3 {
            assert_eq!(diff, 3 * 4 * 1024 * 1024, "three 4 MiB leaks: {l}");
            let path = PathBuf::from(l.rsplit(" written to ").next().unwrap());
            assert!(path.to_string_lossy().ends_with("_rank3.csv"), "{l}");
            let leaks: Vec<String> = compare_rows(&path)
                .into_iter()
                .filter(|x| x[5] != "0")
                .map(|x| x[6].clone())
                .collect();
            assert_eq!(leaks, ["3", "4", "5"], "the leaking steps");
        } else {
            assert_eq!(diff, 0, "{l}");
        }
    }
    // a file against a directory is refused
    let (ok, _, err) = compare_cmd(&[r0.as_os_str(), leaky.out.path().as_os_str()]);
    assert!(
        !ok && err.contains("two dump files or two output directories"),
        "{err}"
    );
}
