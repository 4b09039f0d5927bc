//! The flight recorder (`memscope run --keep`): the window of a job equals a full run's rows
//! of the same stretch with the blocks live before it as history rows; disk stays within the
//! bound while the job runs; a signal writes a window run; the views say it is a window.

use memscope_tests::*;
use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn keep_job() -> std::path::PathBuf {
    compile(
        &[&repo_root().join("tests/programs/keep_job.c")],
        "keep_job",
        &["-lascend_hal"],
        false,
    )
}

/// `memscope run -q --adapters hal,mstx --keep KEEP -o OUT -- keep_job STEPS 100`, running.
fn spawn_keep(job: &Path, out: &Path, keep: &str, steps: &str) -> std::process::Child {
    Command::new(memscope_bin())
        .args(["run", "-q", "--adapters", "hal,mstx", "--keep", keep, "-o"])
        .arg(out)
        .arg("--")
        .arg(job)
        .args([steps, "100"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Every CSV row under `dir`, by ID.
fn rows(dir: &Path) -> BTreeMap<u64, Row> {
    let mut m = BTreeMap::new();
    walk(dir, &mut |p| {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.starts_with("memscope_dump_") && name.ends_with(".csv") {
            for r in read_csv(p) {
                m.insert(r["ID"].parse().unwrap(), r);
            }
        }
    });
    m
}

/// Bytes the files under `dir` take on disk (allocated blocks: punched holes are free).
fn disk_use(dir: &Path) -> u64 {
    let mut n = 0;
    walk(dir, &mut |p| {
        if let Ok(m) = std::fs::symlink_metadata(p) {
            if m.is_file() {
                n += m.blocks() * 512;
            }
        }
    });
    n
}

fn same(r: &Row) -> (String, String, String, String) {
    let size = attrs(r).get("size").cloned().unwrap_or_default();
    (
        r["Event"].clone(),
        r["Event Type"].clone(),
        r["Name"].clone(),
        size,
    )
}

#[test]
fn a_row_bounded_window_is_the_full_runs_last_rows_with_the_blocks_live_before_it() {
    let job = keep_job();
    let args = |keep: Option<&str>| {
        let mut a = vec!["--adapters", "hal,mstx"];
        if let Some(k) = keep {
            a.extend(["--keep", k]);
        }
        memscope_run(&a, &[job.to_str().unwrap(), "20000", "0"], &[])
    };
    let full = args(None);
    assert_eq!(full.code(), 0, "{}", full.stderr());
    let win = args(Some("last:10000"));
    let err = win.stderr();
    assert_eq!(win.code(), 0, "{err}");
    assert!(err.contains("--keep last:10000: the last"), "{err}");
    let (f, w) = (rows(full.out.path()), rows(win.out.path()));
    type ById<'a> = Vec<(&'a u64, &'a Row)>;
    let (history, kept): (ById, ById) = w.iter().partition(|(_, r)| {
        r["Event"] == "MALLOC" && attrs(r).get("shadow").is_some_and(|s| s == "true")
    });
    // at least the bound, at most an eighth more
    assert!((10_000..=11_250).contains(&kept.len()), "{}", kept.len());
    let first = *kept[0].0;
    let tail: Vec<(u64, _)> = f.range(first..).map(|(id, r)| (*id, same(r))).collect();
    let got: Vec<(u64, _)> = kept.iter().map(|(id, r)| (**id, same(r))).collect();
    assert_eq!(
        got, tail,
        "the window's rows are the full run's from ID {first} on"
    );
    // history: the full run's blocks live just before the window, by their MALLOC's ID
    let mut live: BTreeMap<String, u64> = BTreeMap::new();
    for (id, r) in f.range(..first) {
        match r["Event"].as_str() {
            "MALLOC" => {
                live.insert(r["Ptr"].clone(), *id);
            }
            "FREE" => {
                live.remove(&r["Ptr"]);
            }
            _ => {}
        }
    }
    let want: BTreeSet<u64> = live.values().copied().collect();
    let have: BTreeSet<u64> = history.iter().map(|(id, _)| **id).collect();
    assert_eq!(have, want);
    // the same blocks live at the end as the full run: diff says no growth
    let o = Command::new(memscope_bin())
        .arg("diff")
        .arg(full.out.path())
        .arg(win.out.path())
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{text}");
    assert!(text.contains("holds a window of its process"), "{text}");
    assert!(text.contains("(+0 B, +0 blocks)"), "{text}");
}

#[test]
fn a_byte_bound_keeps_disk_within_it_while_a_long_job_runs_and_the_views_say_window() {
    let job = keep_job();
    let out = tempfile::tempdir().unwrap();
    let bound: u64 = 2 << 20;
    let mut ms = spawn_keep(&job, out.path(), "last:2MiB", "60000");
    let start = Instant::now();
    let mut worst = 0;
    let mut samples = 0;
    while ms.try_wait().unwrap().is_none() {
        // the spool's unread chunks and the run's small files come on top of the rows
        worst = worst.max(disk_use(out.path()));
        samples += 1;
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "the job did not end"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let o = ms.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(samples > 10, "{samples}");
    // rows, spool and small files within the bound; a debug build on a loaded CI machine may
    // lag a few 256 KiB chunks behind the job: 1 MiB of grace for those
    let grace = 1 << 20;
    assert!(
        worst <= bound + grace,
        "disk {worst} > {bound} + {grace} while the job ran"
    );
    // the job wrote ~240 000 rows (~30 MB as CSV): the window holds the last 2 MiB of them
    let w = rows(out.path());
    assert!(w.len() > 5000 && w.len() < 40_000, "{}", w.len());
    let o = Command::new(memscope_bin())
        .args(["analyze", "leaks"])
        .arg(out.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("holds a window of its process") && err.contains("--keep last:2MiB"),
        "{err}"
    );
}

#[test]
fn sigusr2_writes_a_window_run_and_the_job_goes_on() {
    let job = keep_job();
    let out = tempfile::tempdir().unwrap();
    let ms = spawn_keep(&job, out.path(), "last:5000", "30000");
    std::thread::sleep(Duration::from_millis(1500));
    // SAFETY: kill(2) on the child's pid, with a signal it handles.
    assert_eq!(unsafe { libc::kill(ms.id() as i32, libc::SIGUSR2) }, 0);
    let o = ms.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("window (signal) written"), "{err}");
    let runs = entries(out.path(), "window_");
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert!(runs[0].to_string_lossy().contains("_signal"));
    let procs = entries(&runs[0], "msmemscope_");
    assert_eq!(procs.len(), 1);
    let facts: serde_json::Value =
        serde_json::from_slice(&std::fs::read(procs[0].join("memscope_window.json")).unwrap())
            .unwrap();
    assert_eq!(facts["reason"], "signal");
    assert!(facts["rows"].as_u64().unwrap() >= 5000, "{facts}");
    // an ordinary run directory for the views
    let w = rows(&runs[0]);
    assert!(w.len() >= 5000, "{}", w.len());
    let o = Command::new(memscope_bin())
        .args(["analyze", "leaks"])
        .arg(&runs[0])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // the output path's own views leave the window run out: one process, not two
    let o = Command::new(memscope_bin())
        .args(["export", "--to", "perfetto"])
        .arg(out.path())
        .arg("-o")
        .arg(out.path().join("t.pftrace"))
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{text}");
    assert!(text.contains("of 1 process(es)"), "{text}");
}

#[test]
fn a_bad_keep_bound_is_refused_in_one_line_before_launch() {
    for (args, says) in [
        (vec!["--keep", "5m"], "expected last:<duration>"),
        (vec!["--keep", "last:10"], "keep at least 1000 rows"),
        (
            vec!["--keep", "last:1m", "--aggregate"],
            "--aggregate keeps no rows",
        ),
    ] {
        let out = tempfile::tempdir().unwrap();
        let o = Command::new(memscope_bin())
            .arg("run")
            .args(&args)
            .arg("-o")
            .arg(out.path())
            .args(["--", "true"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(
            err.contains("--keep") && err.contains(says),
            "{args:?}: {err}"
        );
        assert_eq!(
            std::fs::read_dir(out.path()).unwrap().count(),
            0,
            "nothing launched"
        );
    }
}

#[test]
fn a_fail_on_crossing_while_the_job_runs_writes_a_window_run() {
    let job = keep_job();
    let r = memscope_run(
        &[
            "--adapters",
            "hal,mstx",
            "--keep",
            "last:2000",
            "--fail-on",
            "peak.HAL>5MiB",
        ],
        &[job.to_str().unwrap(), "5000", "0"],
        &[],
    );
    let err = r.stderr();
    // the limit is judged on the window after the job too: exit code 23
    assert_eq!(r.code(), 23, "{err}");
    assert!(err.contains("window (failon) written"), "{err}");
    let runs = entries(r.out.path(), "window_");
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert!(
        runs[0].to_string_lossy().contains("_failon1_pid"),
        "{runs:?}"
    );
    let procs = entries(&runs[0], "msmemscope_");
    let facts: serde_json::Value =
        serde_json::from_slice(&std::fs::read(procs[0].join("memscope_window.json")).unwrap())
            .unwrap();
    assert_eq!(facts["reason"], "failon", "{facts}");
}
