//! The data path at scale: nothing lost at any event count (device-less backlog on disk),
//! summary counts equal to the rows written, the kept capture and `memscope export`, and
//! `memscope recover` after the collector was killed; file-size limits.

use memscope_tests::*;
use std::collections::{BTreeMap, HashSet};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

#[path = "data_path/recover.rs"]
mod recover;

/// `(rows, per-kind)` of the summary line `memscope: pid N (...): R rows (K n, ...)`.
fn summary_rows(stderr: &str) -> Vec<(u64, BTreeMap<String, u64>)> {
    stderr
        .lines()
        .filter(|l| l.starts_with("memscope: pid ") && l.contains(" rows"))
        .map(|l| {
            let after = l.split("): ").nth(1).expect("summary line");
            let total = after.split(' ').next().unwrap().parse().unwrap();
            let mut kinds = BTreeMap::new();
            if let Some(inner) = after.split('(').nth(1).and_then(|s| s.split(')').next()) {
                for part in inner.split(", ") {
                    if let Some((k, n)) = part.rsplit_once(' ') {
                        kinds.insert(k.to_owned(), n.parse().unwrap_or(0));
                    }
                }
            }
            (total, kinds)
        })
        .collect()
}

fn mstx_run(args: &[&str], n: &str, mode: &str) -> Run {
    let prog = program("mstx_many");
    let mut a = vec!["--adapters", "mstx"];
    a.extend_from_slice(args);
    let run = memscope_run(&a, &[prog.to_str().unwrap(), n, mode], &[]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    run
}

#[test]
fn two_hundred_thousand_device_less_marks_give_as_many_rows_in_csv_and_db() {
    let run = mstx_run(&[], "200000", "same");
    let rows = run.rows();
    assert_eq!(rows.len(), 200_000);
    assert!(rows
        .iter()
        .all(|r| r["Name"] == "mark" && r["Device Id"] == "N/A"));
    assert_eq!(run.dumps(".csv").len(), 1, "one device_cpu file");
    let s = summary_rows(&run.stderr());
    assert_eq!(s.len(), 1, "{}", run.stderr());
    assert_eq!(s[0].0, 200_000);
    assert_eq!(s[0].1["MSTX"], 200_000);
    // No backlog file is left behind.
    let mut leftovers = Vec::new();
    walk(run.out.path(), &mut |p| {
        if p.file_name().unwrap().to_str().unwrap().contains("backlog") {
            leftovers.push(p.to_path_buf());
        }
    });
    assert!(leftovers.is_empty(), "{leftovers:?}");

    let run = mstx_run(&["--format", "db"], "200000", "same");
    let dbs = run.dumps(".db");
    assert_eq!(dbs.len(), 1);
    let rows = read_db(&dbs[0]);
    assert_eq!(rows.len(), 200_000);
    assert_eq!(summary_rows(&run.stderr())[0].0, 200_000);
}

#[test]
fn a_million_unique_marks_give_a_million_rows() {
    let run = mstx_run(&[], "1000000", "unique");
    let rows = run.rows();
    assert_eq!(rows.len(), 1_000_000);
    let names: HashSet<&str> = rows.iter().map(|r| r["Name"].as_str()).collect();
    assert_eq!(names.len(), 1_000_000);
    assert!(names.contains("u-0") && names.contains("u-999999"));
    let ids: Vec<u64> = rows.iter().map(|r| r["ID"].parse().unwrap()).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "rows in ID order");
    assert_eq!(summary_rows(&run.stderr())[0].0, 1_000_000);
}

/// Eight threads' 320 000 marks: the collector falls behind its round budget, so the process's
/// streams are merged on a second thread while the first types and writes; the rows are the
/// all there, in time order with increasing IDs, each thread's marks in its own order, in CSV
/// and in SQLite alike.
#[test]
fn a_process_read_behind_on_a_second_thread_keeps_every_row_in_time_and_id_order() {
    let prog = program("mstx_threads");
    for format in ["csv", "db"] {
        let run = memscope_run(
            &["--adapters", "mstx", "--format", format],
            &[prog.to_str().unwrap(), "40000"],
            &[],
        );
        assert_eq!(run.code(), 0, "{}", run.stderr());
        let rows = if format == "csv" {
            run.rows()
        } else {
            let dbs = run.dumps(".db");
            assert_eq!(dbs.len(), 1);
            read_db(&dbs[0])
        };
        assert_eq!(rows.len(), 320_000);
        let num = |r: &Row, k: &str| r[k].parse::<u64>().unwrap();
        assert!(rows.windows(2).all(|w| num(&w[0], "ID") < num(&w[1], "ID")
            && num(&w[0], "Timestamp(ns)") <= num(&w[1], "Timestamp(ns)")));
        let mut next = [0u32; 8];
        for r in &rows {
            let (t, i) = r["Name"][1..].split_once('-').unwrap();
            let t: usize = t.parse().unwrap();
            assert_eq!(
                i.parse::<u32>().unwrap(),
                next[t],
                "thread {t}'s marks in order"
            );
            next[t] += 1;
        }
        assert_eq!(summary_rows(&run.stderr())[0].0, 320_000);
        let mut log = String::new();
        walk(run.out.path(), &mut |p| {
            if p.extension().is_some_and(|e| e == "log") {
                log += &std::fs::read_to_string(p).unwrap();
            }
        });
        assert!(log.contains("merged on a second thread"), "{log}");
    }
}

/// An adapter's own records (the per-source envelope, here HAL's) at scale: half a million
/// alloc+free pairs are a million rows, in order, none lost, as many as the summary counts.
#[test]
fn half_a_million_hal_alloc_free_pairs_give_a_million_rows_as_the_summary_counts() {
    let src = repo_root().join("tests/programs/hal_many.c");
    let prog = compile(&[&src], "hal_many", &["-lascend_hal", "-lascendcl"], false);
    let run = memscope_run(
        &["--adapters", "hal"],
        &[prog.to_str().unwrap(), "500000"],
        &[],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let rows = run.rows();
    assert_eq!(rows.len(), 1_000_000);
    let kinds: BTreeMap<(&str, &str), usize> = rows.iter().fold(BTreeMap::new(), |mut m, r| {
        *m.entry((r["Event"].as_str(), r["Event Type"].as_str()))
            .or_default() += 1;
        m
    });
    assert_eq!(
        kinds.into_iter().collect::<Vec<_>>(),
        [(("FREE", "HAL"), 500_000), (("MALLOC", "HAL"), 500_000)]
    );
    // every FREE follows its MALLOC
    for pair in rows.chunks(2) {
        assert_eq!(
            (pair[0]["Event"].as_str(), pair[1]["Event"].as_str()),
            ("MALLOC", "FREE")
        );
        assert_eq!(pair[0]["Ptr"], pair[1]["Ptr"]);
    }
    let summary = summary_rows(&run.stderr());
    assert_eq!(summary[0].0, 1_000_000, "{}", run.stderr());
    assert_eq!(summary_dropped(&run.stderr()), 0);
}

fn random_below(n: u64) -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    (t ^ (t >> 17) ^ (std::process::id() as u64).wrapping_mul(0x9E37_79B9)) % n
}

fn job_pid(memscope: u32) -> Option<i32> {
    std::fs::read_to_string(format!("/proc/{memscope}/task/{memscope}/children"))
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

fn kill9(pid: i32) {
    let ok = Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
}

#[test]
fn sigkill_at_a_random_point_of_a_million_mark_job_keeps_every_reported_mark() {
    let prog = program("mstx_many");
    let out = tempfile::tempdir().unwrap();
    let mut ms = Command::new(memscope_bin())
        .args(["run", "--adapters", "mstx", "-o"])
        .arg(out.path())
        .arg("--")
        .arg(&prog)
        .args(["1000000", "unique", "1000", "500"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let kill_at = 20_000 + random_below(900_000);
    let mut lines = BufReader::new(ms.stdout.take().unwrap()).lines();
    let mut last: i64 = -1;
    let mut killed = false;
    for l in lines.by_ref() {
        let l = l.unwrap();
        if l.starts_with("done") {
            break;
        }
        last = l.trim().parse().unwrap();
        if last as u64 >= kill_at {
            kill9(job_pid(ms.id()).expect("job pid"));
            killed = true;
            break;
        }
    }
    let o = ms.wait_with_output().unwrap();
    let run = Run { output: o, out };
    if killed {
        assert_eq!(run.code(), 128 + 9, "{}", run.stderr());
    }
    let rows = run.rows();
    let names: HashSet<&str> = rows.iter().map(|r| r["Name"].as_str()).collect();
    for i in 0..=last {
        assert!(
            names.contains(format!("u-{i}").as_str()),
            "mark {i} of {last} lost"
        );
    }
    let s = summary_rows(&run.stderr());
    assert_eq!(s[0].0, rows.len() as u64, "{}", run.stderr());
}

fn all_rows(dir: &Path, ext: &str) -> BTreeMap<PathBuf, Vec<Row>> {
    let mut m = BTreeMap::new();
    walk(dir, &mut |p| {
        let name = p.file_name().unwrap().to_str().unwrap();
        if name.starts_with("memscope_dump_") && name.ends_with(ext) {
            let rel = p.strip_prefix(dir).unwrap().with_extension("");
            let rows = if ext == ".db" {
                read_db(p)
            } else {
                read_csv(p)
            };
            m.insert(rel, rows);
        }
    });
    m
}

fn export(to: &str, input: &Path, out: &Path) {
    let o = Command::new(memscope_bin())
        .args(["export", "--to", to])
        .arg(input)
        .arg("-o")
        .arg(out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

fn captures(dir: &Path) -> Vec<PathBuf> {
    let mut v = Vec::new();
    walk(dir, &mut |p| {
        if p.extension().is_some_and(|e| e == "mscap") {
            v.push(p.to_path_buf());
        }
    });
    v
}

#[test]
fn export_of_a_kept_capture_writes_the_rows_run_wrote() {
    let prog = program("host_mix");
    let run = memscope_run(
        &[
            "--adapters",
            "host,mstx",
            "--host-rows",
            "--call-stack",
            "c:8",
        ],
        &[prog.to_str().unwrap(), "20000"],
        &[],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let ran = all_rows(run.out.path(), ".csv");
    let total: usize = ran.values().map(Vec::len).sum();
    assert!(total > 80_000, "{total} rows");
    assert_eq!(captures(run.out.path()).len(), 1);

    let csv_out = tempfile::tempdir().unwrap();
    export("csv", run.out.path(), csv_out.path());
    assert_eq!(all_rows(csv_out.path(), ".csv"), ran);

    let db_out = tempfile::tempdir().unwrap();
    export("db", &captures(run.out.path())[0], db_out.path());
    let db: BTreeMap<PathBuf, Vec<Row>> = all_rows(db_out.path(), ".db");
    assert_eq!(db.len(), ran.len());
    for ((_, a), (_, b)) in db.iter().zip(&ran) {
        assert_eq!(a, b);
    }
}

#[test]
fn host_rows_are_off_by_default_and_the_capture_keeps_them() {
    let prog = program("host_mix");
    let run = memscope_run(
        &["--adapters", "host", "--call-stack", "c:4"],
        &[prog.to_str().unwrap(), "5000"],
        &[],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let err = run.stderr();
    assert!(run.rows().iter().all(|r| r["Event Type"] != "HOST"));
    assert!(err.contains("HOST events kept in the capture"), "{err}");
    assert!(err.contains("HOST peak"), "{err}");
    assert!(err.contains("HOST memory live at exit"), "{err}");
    assert!(err.contains("7 block(s), 5439 bytes at main at "), "{err}");
    let out = tempfile::tempdir().unwrap();
    export("csv", run.out.path(), out.path());
    let rows: Vec<Row> = all_rows(out.path(), ".csv")
        .into_values()
        .flatten()
        .collect();
    let mallocs = select(&rows, "MALLOC", "HOST").len();
    let frees = select(&rows, "FREE", "HOST").len();
    // 2 threads × 5000 pairs (+ reallocs), 7 kept blocks (and libc's own, e.g. stdio's).
    assert!(
        mallocs >= 10_007 && mallocs - frees >= 7,
        "{mallocs} {frees}"
    );
    let kept = select(&rows, "MALLOC", "HOST")
        .iter()
        .filter(|r| attrs(r)["size"] == "777")
        .count();
    assert!(kept >= 7, "{kept}");
}

/// Events the probe dropped, from the summary lines (`, N DROPPED` / `, 0 dropped`).
fn summary_dropped(stderr: &str) -> u64 {
    stderr
        .lines()
        .filter(|l| l.starts_with("memscope: pid ") && l.contains(" rows"))
        .map(|l| {
            let tail = l.rsplit(", ").next().unwrap_or("");
            tail.split(' ').next().unwrap().parse::<u64>().unwrap()
        })
        .sum()
}

/// The probe notices the collector's death and writes at most `ORPHAN_CHUNKS` more chunks
/// (issue 9: a bounded orphan spool); what it could not write it counts. `recover` then writes
/// every event the probe recorded, and rows + drops are the job's marks.
#[test]
fn sigkill_of_memscope_then_recover_writes_every_recorded_event_and_counts_the_rest() {
    let prog = program("mstx_many");
    let out = tempfile::tempdir().unwrap();
    let mut ms = Command::new(memscope_bin())
        .args(["run", "--adapters", "mstx", "-o"])
        .arg(out.path())
        .arg("--")
        .arg(&prog)
        .args(["300000", "unique", "1000", "2000"])
        .env("RANK", "3")
        .env("WORLD_SIZE", "4")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(ms.stdout.take().unwrap()).lines();
    for l in lines.by_ref() {
        if l.unwrap().trim().parse::<u64>().unwrap_or(0) >= 50_000 {
            break;
        }
    }
    kill9(ms.id() as i32);
    let _ = ms.wait();
    // The job goes on to the end; its stdout closes when it exits.
    let rest: Vec<String> = lines.map(|l| l.unwrap()).collect();
    assert!(
        rest.iter().any(|l| l == "done 300000"),
        "job did not finish"
    );
    let o = Command::new(memscope_bin())
        .arg("recover")
        .arg(out.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{err}");
    let run = Run { output: o, out };
    let rows = run.rows();
    let dropped = summary_dropped(&err);
    assert_eq!(rows.len() as u64 + dropped, 300_000, "{err}");
    assert!(
        rows.len() > 50_000,
        "every mark reported before the kill, and the orphan chunks: {err}"
    );
    let names: HashSet<&str> = rows.iter().map(|r| r["Name"].as_str()).collect();
    assert_eq!(names.len(), rows.len());
    assert_eq!(summary_rows(&err)[0].0, rows.len() as u64, "{err}");
    assert_eq!(captures(run.out.path()).len(), 1);
    let mut spools = Vec::new();
    walk(run.out.path(), &mut |p| {
        if p.to_str().unwrap().contains(".memscope_spool_") {
            spools.push(p.to_path_buf());
        }
    });
    assert!(spools.is_empty(), "spool removed: {spools:?}");
    assert!(!run.out.path().join("x").exists());
    // issue 27 item 4: the run index the killed run never wrote, with its rank
    let index: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(run.out.path().join("memscope_run.json")).unwrap(),
    )
    .unwrap();
    let runs = index["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1, "{index}");
    let r = &runs[0];
    assert_eq!(r["memscope_pid"], ms.id(), "the killed run's pid: {r}");
    assert_eq!(r["recovered"], true, "the entry says recover wrote it: {r}");
    assert_eq!(
        r["exit_code"], 0,
        "the job's exit, as its probe recorded it: {r}"
    );
    assert!(
        r["command"][0].as_str().unwrap().ends_with("mstx_many") && r["command"][1] == "300000",
        "{r}"
    );
    let procs = r["processes"].as_array().unwrap();
    assert_eq!(procs.len(), 1, "{r}");
    assert_eq!(procs[0]["rank"], 3, "{r}");
    assert_eq!(procs[0]["world_size"], 4, "{r}");
    assert_eq!(procs[0]["rows"], rows.len() as u64, "{r}");
    assert_eq!(procs[0]["ended"]["how"], "exit", "{r}");
    // and the analyses of the run directory see the rank
    let o = Command::new(memscope_bin())
        .args(["analyze", "leaks"])
        .arg(run.out.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        text.lines().any(|l| l.trim_start().starts_with("3 ")),
        "rank 3 in the per-rank table: {text}"
    );
}

/// A shim's helper processes (`readlink`, `basename` in a shell script that then execs the
/// real program) end before memscope is killed, so the live collector wrote their outputs;
/// `recover` sets them aside as `run` does: no output directory of their own, listed in the
/// run index as helpers.
#[test]
fn recover_after_sigkill_sets_aside_the_helpers_that_ended_before_the_kill() {
    let prog = program("mstx_many");
    let out = tempfile::tempdir().unwrap();
    // 300 rounds of 1000 marks 20 ms apart: about 6 s, far longer than the wait below
    let script = format!(
        "readlink -f / >/dev/null; basename /a/b >/dev/null; exec '{}' 300000 unique 1000 20000",
        prog.display()
    );
    let mut ms = Command::new(memscope_bin())
        .args(["run", "--adapters", "mstx,host", "-o"])
        .arg(out.path())
        .args(["--", "sh", "-c", &script])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(ms.stdout.take().unwrap()).lines();
    for l in lines.by_ref() {
        if l.unwrap().trim().parse::<u64>().unwrap_or(0) >= 20_000 {
            break;
        }
    }
    // kill once the collector has finished the helpers' outputs (three process directories,
    // none marked incomplete): the case where `run` would have set them aside at its end
    let start = std::time::Instant::now();
    loop {
        let dirs = entries(out.path(), "msmemscope_");
        let complete = dirs
            .iter()
            .filter(|d| !d.join(".memscope_incomplete").exists())
            .count();
        if dirs.len() >= 3 && complete >= 2 {
            break;
        }
        assert!(
            start.elapsed() < std::time::Duration::from_secs(30),
            "the helpers' outputs were never complete: {dirs:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    kill9(ms.id() as i32);
    let _ = ms.wait();
    let rest: Vec<String> = lines.map(|l| l.unwrap()).collect();
    assert!(
        rest.iter().any(|l| l == "done 300000"),
        "job did not finish"
    );
    let o = Command::new(memscope_bin())
        .arg("recover")
        .arg(out.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{err}");
    let dirs = entries(out.path(), "msmemscope_");
    assert_eq!(dirs.len(), 1, "the job's process only: {dirs:?}\n{err}");
    assert!(
        !err.contains("not listed"),
        "helpers get no console line: {err}"
    );
    let index: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.path().join("memscope_run.json")).unwrap(),
    )
    .unwrap();
    let procs = index["runs"][0]["processes"].as_array().unwrap().clone();
    let helpers: Vec<&str> = procs
        .iter()
        .filter(|p| p["helper"] == true)
        .map(|p| p["exe"].as_str().unwrap_or(""))
        .collect();
    assert!(
        helpers.iter().any(|e| e.ends_with("readlink"))
            && helpers.iter().any(|e| e.ends_with("basename")),
        "{index}"
    );
    let job: Vec<&serde_json::Value> = procs.iter().filter(|p| p["helper"] != true).collect();
    assert_eq!(job.len(), 1, "{index}");
    assert!(
        job[0]["exe"].as_str().unwrap().ends_with("mstx_many"),
        "{index}"
    );
}
