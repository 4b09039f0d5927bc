//! `memscope top` against a live job: frames while it runs (`--once --json`, and the terminal
//! view in a pty), the job's outputs the same as without a viewer, and bad input.

use memscope_tests::*;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The sim-npu demo, `steps` steps of `step_ms` each, under `memscope run -o out`.
fn start_demo(out: &Path, steps: u32, step_ms: u32) -> Child {
    let mut cmd = Command::new(memscope_bin());
    cmd.args(["run", "--adapters", "pta,hal,mstx", "-q", "-o"])
        .arg(out)
        .arg("--")
        .arg(python3())
        .arg(repo_root().join("examples/sim-npu/train.py"))
        .args([
            "--steps",
            &steps.to_string(),
            "--step-ms",
            &step_ms.to_string(),
        ])
        .env("SIM_NPU_DIR", sim_npu_dir())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    cmd.spawn().unwrap()
}

/// Waits until the job's collector is there (its spool in `out`).
fn wait_for_spool(out: &Path) {
    let start = Instant::now();
    while entries(out, ".memscope_spool_").is_empty() {
        assert!(start.elapsed() < Duration::from_secs(30), "no spool");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn top(args: &[&str]) -> std::process::Output {
    Command::new(memscope_bin())
        .arg("top")
        .args(args)
        .output()
        .unwrap()
}

fn frame(out: &Path) -> serde_json::Value {
    let o = top(&[out.to_str().unwrap(), "--once", "--json"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(err.is_empty(), "a fresh frame: {err}");
    serde_json::from_slice(&o.stdout).unwrap()
}

/// Dump rows per Event, of every CSV under `out`.
fn rows_by_event(out: &Path) -> std::collections::BTreeMap<String, usize> {
    let mut m = std::collections::BTreeMap::new();
    walk(out, &mut |p| {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.starts_with("memscope_dump_") && name.ends_with(".csv") {
            for r in read_csv(p) {
                *m.entry(r["Event"].clone()).or_default() += 1;
            }
        }
    });
    m
}

#[test]
fn top_once_json_shows_a_running_jobs_pools_owners_and_steps_and_the_job_loses_no_row() {
    let watched = tempfile::tempdir().unwrap();
    // 60 steps of 150 ms: still running at the second frame on a loaded machine
    let mut job = start_demo(watched.path(), 60, 150);
    wait_for_spool(watched.path());
    std::thread::sleep(Duration::from_millis(1500));
    let first = frame(watched.path());
    std::thread::sleep(Duration::from_millis(1500));
    let second = frame(watched.path());
    let status = job.wait().unwrap();
    assert!(status.success(), "{status:?}");
    assert_eq!(first["format"], "memscope-top");
    let p1 = &first["processes"][0];
    let p2 = &second["processes"][0];
    assert_eq!(p1["alive"], true, "{first}");
    assert!(p1["exe"].as_str().unwrap().contains("python"), "{first}");
    // steps go on between the frames, at about 1000/150 a second
    let (s1, s2) = (p1["steps"].as_u64().unwrap(), p2["steps"].as_u64().unwrap());
    assert!(s1 >= 1 && s2 > s1, "{s1} {s2}");
    assert!(p2["steps_per_s"].as_f64().unwrap() > 1.0, "{second}");
    // the caching allocator: live bytes, the pool's reserved bytes, a peak at least as high
    let pta = p2["pools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pool"] == "PTA")
        .unwrap_or_else(|| panic!("{second}"));
    let allocated = pta["allocated"].as_u64().unwrap();
    assert!(allocated > 0, "{second}");
    assert!(pta["reserved"].as_u64().unwrap() >= allocated, "{second}");
    assert!(pta["peak"].as_u64().unwrap() >= allocated, "{second}");
    // the leak (4 MiB a step from step 3 on) grows PTA's owner line between the frames
    let pta_owner = |p: &serde_json::Value| {
        p["owners"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["name"] == "PTA")
            .map(|o| (o["bytes"].as_u64().unwrap(), o["growth"].as_i64().unwrap()))
    };
    let (b1, _) = pta_owner(p1).unwrap_or_else(|| panic!("{first}"));
    let (b2, g2) = pta_owner(p2).unwrap_or_else(|| panic!("{second}"));
    assert!(b2 > b1 && g2 > 0, "{b1} {b2} {g2}");
    // the request is gone with the viewer
    let spool = &entries(watched.path(), ".memscope_spool_");
    assert!(spool.is_empty() || !spool[0].join("top.request").exists());
    // the same rows as the same job with nobody watching
    let alone = tempfile::tempdir().unwrap();
    let mut job = start_demo(alone.path(), 60, 0);
    assert!(job.wait().unwrap().success());
    let (w, a) = (rows_by_event(watched.path()), rows_by_event(alone.path()));
    assert!(w.get("MALLOC").is_some_and(|n| *n > 100), "{w:?}");
    assert_eq!(w, a);
}

#[test]
fn top_in_a_terminal_draws_frames_until_q() {
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("skipped: no `script` (util-linux) to give memscope top a terminal");
        return;
    }
    let out = tempfile::tempdir().unwrap();
    let mut job = start_demo(out.path(), 40, 150);
    wait_for_spool(out.path());
    // `script` runs it on a pseudo-terminal; the `q` comes after about three frames
    let cmd = format!("{} top {}", memscope_bin().display(), out.path().display());
    let mut viewer = Command::new("script")
        .args(["-q", "-e", "-c", &cmd, "/dev/null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = viewer.stdin.take().unwrap();
    std::thread::sleep(Duration::from_millis(3500));
    std::io::Write::write_all(&mut stdin, b"q").unwrap();
    let start = Instant::now();
    while viewer.try_wait().unwrap().is_none() {
        assert!(start.elapsed() < Duration::from_secs(10), "q did not quit");
        std::thread::sleep(Duration::from_millis(50));
    }
    let o = viewer.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{text}");
    // the alternate screen, entered and left; frames with the allocators and owners
    assert!(
        text.contains("\x1b[?1049h") && text.contains("\x1b[?1049l"),
        "{text}"
    );
    assert!(text.matches("\x1b[2J").count() >= 2, "{text}");
    assert!(
        text.contains("PTA") && text.contains("OWNERS BY LIVE BYTES"),
        "{text}"
    );
    assert!(job.wait().unwrap().success());
}

#[test]
fn top_without_a_running_run_or_a_terminal_fails_with_one_line() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().to_str().unwrap();
    for (args, says) in [
        (vec![dir], "no running memscope run writes here"),
        (vec!["--pid", "999999999"], "no such process"),
        (vec![dir, "--json"], "--once"),
        (vec![dir, "--pid", "1"], "cannot be used with"),
    ] {
        let o = top(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    // a live run, but no terminal and no --once
    let mut job = start_demo(d.path(), 20, 100);
    wait_for_spool(d.path());
    let o = top(&[dir]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("needs a terminal") && err.contains("--once"),
        "{err}"
    );
    assert!(job.wait().unwrap().success());
}
