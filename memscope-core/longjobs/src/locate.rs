//! Which spool `memscope top` watches: the one a running `memscope run` (or the collector of
//! a plain Python job) follows, found from its output path or from a pid.

use memscope_stream::spool;
use std::path::{Path, PathBuf};

/// Whether a collector holds `<spool>/collector.lock` (it follows the spool now).
fn followed(spool_dir: &Path) -> bool {
    let Ok(f) = std::fs::File::open(spool_dir.join(spool::COLLECTOR_LOCK)) else {
        return false;
    };
    // a probe checking the lock holds it shared for an instant: ask twice
    (0..2).any(|_| {
        let busy = matches!(f.try_lock(), Err(std::fs::TryLockError::WouldBlock));
        if !busy {
            let _ = f.unlock();
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        busy
    })
}

/// The spool of the running collector that writes to `dir` (a run's output path), or `dir`
/// itself when it is a followed spool.
///
/// # Errors
/// No running collector writes there, or several do (one line naming them).
pub fn in_dir(dir: &Path) -> Result<PathBuf, String> {
    if dir.join(spool::RUN_INFO).is_file() {
        return if followed(dir) {
            Ok(dir.to_path_buf())
        } else {
            Err(format!(
                "{}: no collector follows this spool any more (the run has ended or was killed)",
                dir.display()
            ))
        };
    }
    let rd = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut live: Vec<PathBuf> = rd
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(spool::SPOOL_PREFIX))
                && followed(p)
        })
        .collect();
    live.sort();
    match live.len() {
        0 => Err(format!(
            "{}: no running memscope run writes here (give its output path, -o, or --pid)",
            dir.display()
        )),
        1 => Ok(live.remove(0)),
        _ => Err(format!(
            "{}: {} running memscope runs write here ({}); choose one with --pid",
            dir.display(),
            live.len(),
            live.iter()
                .filter_map(|p| p.file_name()?.to_str()?.strip_prefix(spool::SPOOL_PREFIX))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// Parent pid of `pid` (`/proc/<pid>/stat`).
fn parent(pid: u32) -> Option<u32> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    s.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Children of `pid` (a `/proc` scan).
fn children(pid: u32) -> Vec<u32> {
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|c| parent(*c) == Some(pid))
        .collect()
}

/// The spool whose `collector.lock` process `pid` holds open.
fn held_by(pid: u32) -> Option<PathBuf> {
    let rd = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?;
    rd.flatten().find_map(|e| {
        let target = std::fs::read_link(e.path()).ok()?;
        (target.file_name()? == spool::COLLECTOR_LOCK)
            .then(|| target.parent().map(Path::to_path_buf))
            .flatten()
    })
}

/// The spool of the collector `pid` is, or of the job `pid` belongs to: the collector
/// itself, its parent (`memscope run`'s job), or a child (a plain Python job's collector).
///
/// # Errors
/// No such process, or no collector among them (one line).
pub fn of_pid(pid: u32) -> Result<PathBuf, String> {
    if !Path::new(&format!("/proc/{pid}")).exists() {
        return Err(format!("--pid {pid}: no such process"));
    }
    let mut candidates = vec![pid];
    candidates.extend(parent(pid));
    candidates.extend(children(pid));
    candidates
        .into_iter()
        .find_map(held_by)
        .filter(|s| followed(s))
        .ok_or_else(|| {
            format!("--pid {pid}: neither a running memscope collector nor a process of its job (or not yours to read)")
        })
}
