//! Issue 9: resource limits never hurt the job. A file-size limit (also one the job lowers
//! itself), a full disk and an unwritable spool: the job runs to completion with its own exit
//! code, recording stops with one line naming the limit and the file, every later event is
//! counted as dropped (per kind), and what was written stays readable.

mod host_common;
mod probe_common;

use host_common::*;
use memscope_core::event::EventKind;
use memscope_tests::*;
use memscope_wire::{CHUNK_SIZE, FILE_HEADER_SIZE, STOP_FILE_SIZE_LIMIT, STOP_NO_SPACE};
use probe_common::*;
use std::process::Command;

const PAIRS: u64 = 200_000;

/// The accounting of a stopped `probe_bigwriter` stream: every malloc/free of the loop is a
/// record or a drop of its kind, and some were recorded before the stop.
fn check_bigwriter(s: &Stream, pairs: u64) {
    let (m, f) = (s.mallocs(5151) as u64, s.frees_of(&[5151]) as u64);
    assert!(m > 1000, "records before the stop: {m}");
    assert!(s.dropped > 0, "events after the stop are counted");
    assert_eq!(
        m + s.drops(EventKind::Malloc),
        pairs,
        "MALLOC: records + drops"
    );
    assert_eq!(f + s.drops(EventKind::Free), pairs, "FREE: records + drops");
}

fn stop_lines(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| l.contains("memscope: recording stops"))
        .collect()
}

#[test]
fn file_size_limit_stops_recording_and_the_job_exits_0_under_memscope_run() {
    let p = prog("probe_bigwriter");
    let script = format!("ulimit -f 1024; exec {}", p.display());
    // (Without -q, so the summary reports the drops.)
    let run = memscope_run(
        &["--adapters", "host", "--host-rows"],
        &["bash", "-c", &script],
        &[],
    );
    assert_eq!(
        run.code(),
        0,
        "the job's own exit code (not 153): {}",
        run.stderr()
    );
    assert_eq!(run.stdout(), format!("bigwriter {PAIRS}\ndone {PAIRS}\n"));
    let stderr = run.stderr();
    let lines = stop_lines(&stderr);
    assert_eq!(lines.len(), 1, "one warning: {stderr}");
    assert!(
        lines[0].contains("RLIMIT_FSIZE") && lines[0].contains("1048576 bytes"),
        "names the limit: {}",
        lines[0]
    );
    assert!(lines[0].contains(".stream"), "names the file: {}", lines[0]);
    // The dump holds every row recorded before the limit, and the rest is counted.
    let rows = run.rows();
    let h = host(&rows);
    let (m, f) = (
        count(&h, "MALLOC", 5151) as u64,
        count(&h, "FREE", 5151) as u64,
    );
    assert!(m > 1000, "rows before the limit: {m}");
    let drops = summary_drops(&stderr);
    assert_eq!(m + f + drops, 2 * PAIRS, "rows + drops: {stderr}");
}

#[test]
fn file_size_limit_counts_every_later_event_as_dropped() {
    let p = prog("probe_bigwriter");
    let spool = tempfile::tempdir().unwrap();
    let o = probe_cmd(spool.path(), &host_mask(), std::path::Path::new("bash"))
        .arg("-c")
        .arg(format!("ulimit -f 1024; exec {}", p.display()))
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(stop_lines(&stderr).len(), 1, "{stderr}");
    let streams = read_streams(spool.path());
    let s = stream_of(&streams, "probe_bigwriter");
    assert_eq!(s.stop_reason, STOP_FILE_SIZE_LIMIT);
    assert!(
        s.len <= 1 << 20,
        "the file stays within the limit: {}",
        s.len
    );
    assert_eq!(
        (s.len - FILE_HEADER_SIZE as u64) % CHUNK_SIZE as u64,
        0,
        "whole chunks only"
    );
    check_bigwriter(s, PAIRS);
}

#[test]
fn a_limit_the_job_lowers_itself_is_respected() {
    // No limit at start; after a tenth of the loop the job sets RLIMIT_FSIZE to 768 KiB.
    let p = prog("probe_bigwriter");
    let spool = tempfile::tempdir().unwrap();
    let limit = 768 * 1024;
    let o = probe_cmd(spool.path(), &host_mask(), &p)
        .arg(PAIRS.to_string())
        .arg(limit.to_string())
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    let lines = stop_lines(&stderr);
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(lines[0].contains(&format!("{limit} bytes")), "{}", lines[0]);
    let streams = read_streams(spool.path());
    let s = stream_of(&streams, "probe_bigwriter");
    assert_eq!(s.stop_reason, STOP_FILE_SIZE_LIMIT);
    assert!(s.len <= limit, "{}", s.len);
    check_bigwriter(s, PAIRS);
}

#[test]
fn a_full_disk_stops_recording_and_the_job_runs_on() {
    // A 1 MiB tmpfs in a private mount namespace (`unshare -m` as root; `-rm` needs no
    // privileges where unprivileged user namespaces are enabled, as on Debian and Ubuntu). The
    // 200 000 pairs take ~1.8 MB (4–5 bytes per HOST record, fewer on a quiet machine where
    // timestamp deltas are small): 2 MiB was not always full.
    let opts = unshare_check();
    let p = prog("probe_bigwriter");
    let keep = tempfile::tempdir().unwrap();
    let script = format!(
        "set -e; d=$(mktemp -d); mount -t tmpfs -o size=1m none \"$d\"; \
         LD_PRELOAD={} MEMSCOPE_SPOOL=\"$d\" MEMSCOPE_ADAPTERS={} {}; rc=$?; \
         cp \"$d\"/*.stream {}/; umount \"$d\"; rmdir \"$d\"; exit $rc",
        probe_lib().display(),
        host_mask(),
        p.display(),
        keep.path().display()
    );
    let o = Command::new("unshare")
        .args([opts, "sh", "-c", &script])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        format!("bigwriter {PAIRS}\ndone {PAIRS}\n")
    );
    let lines = stop_lines(&stderr);
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(lines[0].contains("No space left on device"), "{}", lines[0]);
    let streams = read_streams(keep.path());
    let s = stream_of(&streams, "probe_bigwriter");
    assert_eq!(s.stop_reason, STOP_NO_SPACE);
    check_bigwriter(s, PAIRS);
}

/// The `unshare` options that give a private mount namespace here (`-m` as root, `-rm`
/// through an unprivileged user namespace otherwise), or a clear failure.
fn unshare_check() -> &'static str {
    for opts in ["-m", "-rm"] {
        let ok = Command::new("unshare")
            .args([opts, "true"])
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        if ok {
            return opts;
        }
    }
    panic!(
        "this test needs `unshare` (util-linux) able to make a mount namespace — as root, or \
         with unprivileged user namespaces enabled (sysctl kernel.unprivileged_userns_clone=1; \
         containers need CAP_SYS_ADMIN or a seccomp profile that allows unshare) — to mount a \
         1 MiB tmpfs"
    );
}

#[test]
fn an_unwritable_spool_leaves_the_job_untraced_with_one_line_and_its_exit_code() {
    // The spool is a path below a regular file: no stream can be created.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("not-a-dir");
    std::fs::write(&file, b"x").unwrap();
    let spool = file.join("spool");
    let o = probe_cmd(&spool, &host_mask(), std::path::Path::new("sh"))
        .args(["-c", "echo hello; exit 7"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(7));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "hello\n");
    let stderr = String::from_utf8_lossy(&o.stderr);
    let lines: Vec<_> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line per process image: {stderr}");
    assert!(
        lines[0].contains("cannot create stream file") && lines[0].contains("not-a-dir"),
        "{stderr}"
    );
}
