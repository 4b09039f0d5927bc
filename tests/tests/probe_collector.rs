//! Issue 9: the collector's death (team contract 1: `<spool>/collector.lock`, held with
//! `flock(LOCK_EX)` by the collector). The probe notices it when it is about to grow the
//! spool, writes at most `ORPHAN_CHUNKS` more chunks and stops with one line; the job is
//! unaffected; processes started after the collector is gone stay passive and silent. Until
//! `memscope run` holds the lock itself, `probe_lockholder` plays the collector's part.

mod host_common;
mod probe_common;

use host_common::*;
use memscope_core::event::EventKind;
use memscope_tests::*;
use memscope_wire::{CHUNK_SIZE, COLLECTOR_LOCK, ORPHAN_CHUNKS, STOP_COLLECTOR_GONE};
use probe_common::*;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// Starts the stand-in collector holding `<spool>/collector.lock`.
fn hold_lock(spool: &Path) -> Child {
    let mut c = Command::new(prog("probe_lockholder"))
        .arg(spool.join(COLLECTOR_LOCK))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(c.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line, "locked\n");
    c
}

fn stream_files(spool: &Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(spool)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "stream"))
        .collect()
}

#[test]
fn the_probe_stops_growing_the_spool_after_the_collector_died() {
    let spool = tempfile::tempdir().unwrap();
    let mut collector = hold_lock(spool.path());
    let (a, b) = (50_000u64, 500_000u64);
    let mut job = probe_cmd(spool.path(), &host_mask(), &prog("probe_orphan"))
        .args([a.to_string(), b.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(job.stdout.take().unwrap());
    let mut line = String::new();
    while line != "phase1 done\n" {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "job ended early");
    }
    // Phase 1 ran with a live collector: several chunks, no stop.
    let files = stream_files(spool.path());
    assert_eq!(files.len(), 1, "{files:?}");
    let at_death = std::fs::metadata(&files[0]).unwrap().len();
    assert!(at_death > 2 * CHUNK_SIZE as u64, "{at_death}");

    collector.kill().unwrap();
    collector.wait().unwrap();
    job.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
    let o = job.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    assert_eq!(rest, format!("done {a} {b}\n"));
    let lines: Vec<_> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line: {stderr}");
    assert!(lines[0].contains("the collector is gone"), "{stderr}");

    let s = read_stream(&files[0]);
    assert_eq!(s.stop_reason, STOP_COLLECTOR_GONE);
    assert!(
        s.len <= at_death + ORPHAN_CHUNKS as u64 * CHUNK_SIZE as u64,
        "bounded growth: {} at death, {} at the end",
        at_death,
        s.len
    );
    assert!(s.len > at_death, "the orphan chunks were written");
    // Every event is a record or a counted drop.
    assert_eq!(s.mallocs(6464) as u64 + s.drops(EventKind::Malloc), a + b);
    assert_eq!(s.frees_of(&[6464]) as u64 + s.drops(EventKind::Free), a + b);
    assert!(s.dropped > 0);
}

#[test]
fn a_process_started_after_the_collector_died_is_passive_and_silent() {
    let spool = tempfile::tempdir().unwrap();
    let mut collector = hold_lock(spool.path());
    collector.kill().unwrap();
    collector.wait().unwrap();
    let o = probe_cmd(spool.path(), &host_mask(), Path::new("sh"))
        .args(["-c", "echo hello; exit 5"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(5));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "hello\n");
    assert!(
        o.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(stream_files(spool.path()).is_empty(), "no stream file");

    // The collector also removed its spool: still silent.
    let gone = spool.path().join("removed-spool");
    let o = probe_cmd(&gone, &host_mask(), Path::new("sh"))
        .args(["-c", "echo hello; exit 6"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(6));
    assert!(
        o.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn a_live_collector_is_not_mistaken_for_a_dead_one() {
    let spool = tempfile::tempdir().unwrap();
    let mut collector = hold_lock(spool.path());
    let o = probe_cmd(spool.path(), &host_mask(), &prog("probe_bigwriter"))
        .output()
        .unwrap();
    drop(collector.stdin.take());
    collector.wait().unwrap();
    assert_eq!(o.status.code(), Some(0));
    assert!(
        o.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let streams = read_streams(spool.path());
    let s = stream_of(&streams, "probe_bigwriter");
    assert_eq!(s.dropped, 0);
    assert_eq!(s.stop_reason, 0);
    assert_eq!(s.mallocs(5151), 200_000);
}

#[test]
fn descendants_that_outlive_memscope_stay_silent() {
    // The bad-input report's L5: a background process that starts after `memscope run` has
    // exited (it waits 5 s for descendants) and removed its spool.
    let p = prog("probe_bigwriter");
    // the background writer starts once memscope (the shell's parent) has exited: a zombie
    // (the test reaps it only after this writer closes its stdout) counts as gone
    let script = format!(
        "(while st=$(sed 's/.*) //' /proc/$PPID/stat 2>/dev/null | cut -c1) && [ -n \"$st\" ] && [ \"$st\" != Z ]; do sleep 0.1; done; sleep 0.2; {} 1000) & exit 0",
        p.display()
    );
    let run = memscope_run(&["-q", "--adapters", "host"], &["sh", "-c", &script], &[]);
    assert_eq!(run.code(), 0);
    assert!(run.stdout().contains("done 1000"), "{}", run.stdout());
    assert!(
        !run.stderr().contains("cannot create stream file"),
        "{}",
        run.stderr()
    );
}
