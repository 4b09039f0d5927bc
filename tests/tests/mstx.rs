//! Issue 2: msTX marks and ranges from real C programs through the stand-in msTX front end,
//! recorded by the probe and written by the collector — threads, fork, exec, `_exit`, SIGKILL,
//! CSV/DB equivalence and escaping.

use memscope_tests::*;
use std::collections::{BTreeSet, HashSet};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

fn marks(rows: &[Row]) -> Vec<&Row> {
    select(rows, "MSTX", "Mark")
}

#[test]
fn one_mstx_row_per_mark_and_range_edge_with_pid_and_tid() {
    let prog = program("mstx_basic");
    let run = memscope_run(&["--adapters", "mstx"], &[prog.to_str().unwrap(), "5"], &[]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let rows = run.rows();
    let m = marks(&rows);
    assert_eq!(m.len(), 5);
    let names: Vec<&str> = m.iter().map(|r| r["Name"].as_str()).collect();
    assert_eq!(names, ["mark-0", "mark-1", "mark-2", "mark-3", "mark-4"]);
    let starts = select(&rows, "MSTX", "Range_start");
    let ends = select(&rows, "MSTX", "Range_end");
    assert_eq!((starts.len(), ends.len()), (1, 1));
    assert_eq!(starts[0]["Name"], "work");
    assert_eq!(ends[0]["Name"], "work");
    assert_eq!(attrs(starts[0])["range_id"], attrs(ends[0])["range_id"]);
    let pid = &m[0]["Process Id"];
    assert!(
        rows.iter()
            .all(|r| &r["Process Id"] == pid && r["Thread Id"] == *pid),
        "single-threaded: tid == pid"
    );
    assert!(rows.iter().all(|r| r["Ptr"] == "N/A"));
    let ids: Vec<u64> = rows.iter().map(|r| r["ID"].parse().unwrap()).collect();
    assert!(
        ids.windows(2).all(|w| w[0] < w[1]),
        "IDs increase in file order: {ids:?}"
    );
    let ts: Vec<u64> = rows
        .iter()
        .map(|r| r["Timestamp(ns)"].parse().unwrap())
        .collect();
    assert!(ts.windows(2).all(|w| w[0] <= w[1]), "time order");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    assert!(
        ts[0] > now - 600_000_000_000 && ts[0] <= now,
        "ns since the epoch: {}",
        ts[0]
    );
}

#[test]
fn marks_from_eight_threads_are_all_recorded_with_their_thread_ids() {
    let prog = program("mstx_threads");
    let run = memscope_run(
        &["--adapters", "mstx"],
        &[prog.to_str().unwrap(), "2000"],
        &[],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let rows = run.rows();
    let m = marks(&rows);
    assert_eq!(m.len(), 8 * 2000);
    let names: HashSet<&str> = m.iter().map(|r| r["Name"].as_str()).collect();
    assert_eq!(names.len(), 16000, "every mark once");
    let tids: BTreeSet<&str> = m.iter().map(|r| r["Thread Id"].as_str()).collect();
    assert_eq!(tids.len(), 8);
    for t in 0..8 {
        let tid_of: BTreeSet<&str> = m
            .iter()
            .filter(|r| r["Name"].starts_with(&format!("t{t}-")))
            .map(|r| r["Thread Id"].as_str())
            .collect();
        assert_eq!(tid_of.len(), 1, "thread {t} marks carry one tid");
    }
    assert!(!run.stderr().contains("DROPPED"), "{}", run.stderr());
}

#[test]
fn a_forked_child_gets_its_own_output_directory() {
    let prog = program("mstx_fork");
    let run = memscope_run(&["--adapters", "mstx"], &[prog.to_str().unwrap()], &[]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let child: String = run
        .stdout()
        .trim()
        .strip_prefix("child=")
        .expect("child pid printed")
        .to_owned();
    let rows = run.rows();
    let by = |pid: &str| -> Vec<String> {
        marks(&rows)
            .iter()
            .filter(|r| r["Process Id"] == pid)
            .map(|r| r["Name"].clone())
            .collect()
    };
    assert_eq!(by(&child), ["child-0", "child-1", "child-2"]);
    let parent = marks(&rows)
        .iter()
        .find(|r| r["Name"] == "parent-before")
        .unwrap()["Process Id"]
        .clone();
    assert_eq!(by(&parent), ["parent-before", "parent-after"]);
    let dirs: Vec<_> = std::fs::read_dir(run.out.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("msmemscope_"))
        .collect();
    assert_eq!(dirs.len(), 2, "{dirs:?}");
    assert!(dirs
        .iter()
        .any(|d| d.starts_with(&format!("msmemscope_{child}_")) && d.ends_with("_ascend")));
}

#[test]
fn an_execd_child_is_traced_as_its_own_process() {
    let prog = program("mstx_exec");
    let basic = program("mstx_basic");
    let run = memscope_run(
        &["--adapters", "mstx"],
        &[prog.to_str().unwrap(), basic.to_str().unwrap(), "2"],
        &[],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let rows = run.rows();
    let m = marks(&rows);
    let parent = m
        .iter()
        .find(|r| r["Name"] == "before-exec")
        .expect("parent mark")["Process Id"]
        .clone();
    assert!(m
        .iter()
        .any(|r| r["Name"] == "after-exec" && r["Process Id"] == parent));
    let child: Vec<_> = m
        .iter()
        .filter(|r| r["Name"].starts_with("mark-"))
        .collect();
    assert_eq!(child.len(), 2);
    assert_ne!(child[0]["Process Id"], parent);
}

#[test]
fn underscore_exit_loses_no_mark() {
    let prog = program("mstx_exit");
    let run = memscope_run(
        &["--adapters", "mstx"],
        &[prog.to_str().unwrap(), "1000"],
        &[],
    );
    assert_eq!(run.code(), 3, "the job's own exit code: {}", run.stderr());
    assert_eq!(marks(&run.rows()).len(), 1000);
}

#[test]
fn sigkill_of_the_job_loses_no_mark_it_had_reported() {
    let prog = program("mstx_killme");
    let out = tempfile::tempdir().unwrap();
    let mut ms = Command::new(memscope_bin())
        .args(["run", "--adapters", "mstx", "-o"])
        .arg(out.path())
        .arg("--")
        .arg(&prog)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(ms.stdout.take().unwrap()).lines();
    let mut last = 0u64;
    while last < 3000 {
        last = lines
            .next()
            .expect("job output")
            .unwrap()
            .trim()
            .parse()
            .unwrap();
    }
    let children =
        std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", ms.id())).unwrap();
    let job: i32 = children
        .split_whitespace()
        .next()
        .expect("job pid")
        .parse()
        .unwrap();
    Command::new("kill")
        .args(["-KILL", &job.to_string()])
        .status()
        .unwrap();
    let status = ms.wait().unwrap();
    assert_eq!(status.code(), Some(128 + 9), "exit code 128+SIGKILL");
    let run = Run {
        output: std::process::Output {
            status,
            stdout: vec![],
            stderr: vec![],
        },
        out,
    };
    let names: HashSet<String> = marks(&run.rows())
        .iter()
        .map(|r| r["Name"].clone())
        .collect();
    for i in 0..=last {
        assert!(
            names.contains(&format!("k-{i}")),
            "mark k-{i} (reported done before the kill) is missing"
        );
    }
}

#[test]
fn csv_and_db_hold_the_same_rows() {
    let prog = program("mstx_names");
    let csv = memscope_run(&["--adapters", "mstx"], &[prog.to_str().unwrap()], &[]);
    let db = memscope_run(
        &["--adapters", "mstx", "--format", "db"],
        &[prog.to_str().unwrap()],
        &[],
    );
    assert_eq!(csv.code(), 0, "{}", csv.stderr());
    assert_eq!(db.code(), 0, "{}", db.stderr());
    let a = csv.rows();
    let b: Vec<Row> = db.dumps(".db").iter().flat_map(|p| read_db(p)).collect();
    assert_eq!(a.len(), b.len());
    let strip = |r: &Row| {
        let mut r = r.clone();
        for k in ["Timestamp(ns)", "Process Id", "Thread Id"] {
            r.remove(k);
        }
        r
    };
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(strip(x), strip(y));
    }
}

#[test]
fn awkward_names_round_trip_through_rfc4180_readers() {
    let prog = program("mstx_names");
    let run = memscope_run(&["--adapters", "mstx"], &[prog.to_str().unwrap()], &[]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let rows = run.rows();
    let names: Vec<String> = marks(&rows).iter().map(|r| r["Name"].clone()).collect();
    for want in ["a,b", "say \"hi\"", "line1\nline2", "", "'=cmd"] {
        assert!(names.iter().any(|n| n == want), "{want:?} not in {names:?}");
    }
    assert!(
        names.iter().any(|n| n.len() == 300),
        "300-byte message kept whole"
    );
    let dump = &run.dumps(".csv")[0];
    let py = Command::new("python3")
        .arg("-c")
        .arg("import csv,sys\nrows=list(csv.DictReader(open(sys.argv[1],newline='')))\nprint('\\x1f'.join(r['Name'] for r in rows if r['Event']=='MSTX'))")
        .arg(dump)
        .output()
        .unwrap();
    assert!(
        py.status.success(),
        "{}",
        String::from_utf8_lossy(&py.stderr)
    );
    let py_names: Vec<String> = String::from_utf8(py.stdout)
        .unwrap()
        .trim_end_matches('\n')
        .split('\x1f')
        .map(str::to_owned)
        .collect();
    let all: Vec<String> = rows
        .iter()
        .filter(|r| r["Event"] == "MSTX")
        .map(|r| r["Name"].clone())
        .collect();
    assert_eq!(py_names, all, "Python's csv module reads the same names");
}

#[test]
fn deferred_mode_records_nothing_without_a_start_call() {
    let prog = program("mstx_basic");
    let run = memscope_run(
        &["--adapters", "mstx", "--collect-mode", "deferred"],
        &[prog.to_str().unwrap(), "3"],
        &[],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(marks(&run.rows()).len(), 0);
}

#[test]
fn output_tree_has_config_log_and_private_permissions() {
    use std::os::unix::fs::PermissionsExt;
    let prog = program("mstx_basic");
    let run = memscope_run(&["--adapters", "mstx"], &[prog.to_str().unwrap(), "1"], &[]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let mut saw = (false, false);
    walk(run.out.path(), &mut |p| {
        let mode = std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", p.display());
        let name = p.file_name().unwrap().to_string_lossy();
        saw.0 |= name == "config.json";
        saw.1 |= name.starts_with("msmemscope_") && name.ends_with(".log");
        let dir = p.parent().unwrap();
        // the output root is the caller's (here a tempdir); it holds the run index
        if dir == run.out.path() {
            return;
        }
        assert_eq!(
            std::fs::metadata(dir).unwrap().permissions().mode() & 0o777,
            0o750,
            "{}",
            dir.display()
        );
    });
    assert_eq!(saw, (true, true));
    assert!(
        !run.out.path().read_dir().unwrap().flatten().any(|e| e
            .file_name()
            .to_string_lossy()
            .starts_with(".memscope_spool")),
        "spool removed"
    );
}
