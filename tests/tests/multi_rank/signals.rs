//! SIGINT/SIGTERM to `memscope run` of a multi-rank job: every rank ends, every dump is
//! complete; a spool a live process still writes is kept.

use super::*;
use std::process::Stdio;

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
/// rank ended and left a complete dump (rows == the summary's rows; every HAL MALLOC freed but
/// the one a rank may have held when the signal ended it).
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
        // Every FREE is written. The signal may end a rank between its aclrtMalloc and its
        // aclrtFree: that block is still live at exit and gets no FREE (leak analysis reads it
        // so), and it is then the rank's last HAL row.
        let (mallocs, frees) = (count("MALLOC"), count("FREE"));
        assert!(
            mallocs == frees || mallocs == frees + 1,
            "rank pid {pid}: {mallocs} MALLOC vs {frees} FREE"
        );
        if mallocs == frees + 1 {
            let last = all
                .iter()
                .filter(|r| {
                    r["Event Type"] == "HAL" && (r["Event"] == "MALLOC" || r["Event"] == "FREE")
                })
                .max_by_key(|r| r["Timestamp(ns)"].parse::<u64>().unwrap_or(0))
                .unwrap();
            assert_eq!(
                last["Event"], "MALLOC",
                "rank pid {pid}: the unfreed block is not the last one"
            );
        }
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
    let spool = entries(out.path(), ".memscope_spool");
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
