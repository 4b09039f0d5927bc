//! The spool's lifetime on the collector's side: the guard that removes it when the collector
//! ends (never while a live process still writes to it) and the collector lock that tells
//! probes and `memscope recover` a collector follows it.

use std::path::{Path, PathBuf};

/// Removes the spool directory when dropped (`memscope run`'s, and the one `memscope
/// collect` follows), a panic's unwinding included; then releases the collector lock it holds
/// ([`SpoolGuard::hold`]), so a probe that outlives the collector, or a `memscope recover`,
/// never sees the spool without its collector while it is still there.
pub(crate) struct SpoolGuard {
    path: PathBuf,
    /// Who says it when the spool cannot be removed (`memscope`, `memscope collect`).
    who: &'static str,
    /// `<spool>/collector.lock`, locked (released after the spool is removed).
    lock: Option<std::fs::File>,
    /// Processes whose stream is still locked but that passed `exit()` and wait for this
    /// collector to end: their spool is removed all the same.
    ignored: Vec<u32>,
    /// [`SpoolGuard::keep`] was called.
    kept: bool,
}

impl SpoolGuard {
    /// Guards `path`; `who` prefixes the one-line message when it cannot be removed.
    pub(crate) fn new(path: PathBuf, who: &'static str) -> SpoolGuard {
        SpoolGuard {
            path,
            who,
            lock: None,
            ignored: Vec::new(),
            kept: false,
        }
    }

    /// Removes the spool even while process `pid` still holds its stream (it passed `exit()`
    /// and waits for this collector, plain-python mode).
    pub(crate) fn ignore_writer(&mut self, pid: u32) {
        self.ignored.push(pid);
    }

    /// Keeps the spool: outputs could not be written, and `memscope recover` redoes them from
    /// it once the cause (a full disk) is gone.
    pub(crate) fn keep(&mut self) {
        self.kept = true;
    }

    /// Keeps the locked `collector.lock` ([`hold_collector_lock`]) until the spool is removed.
    pub(crate) fn hold(&mut self, lock: std::fs::File) {
        self.lock = Some(lock);
    }
}

/// Pids of the processes that still write a stream of `spool`: the stream's lock is held
/// (the probe holds `flock` on its stream while it lives) and the pid is alive.
pub(crate) fn live_writers(spool: &Path) -> Vec<u32> {
    let Ok(rd) = std::fs::read_dir(spool) else {
        return Vec::new();
    };
    let mut pids: Vec<u32> = rd
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_str()?.to_owned();
            let pid = memscope_stream::spool::pid_of_stream_name(&name)?;
            let f = std::fs::File::open(e.path()).ok()?;
            let held = matches!(f.try_lock_shared(), Err(std::fs::TryLockError::WouldBlock));
            (held && memscope_collect::pid_alive(pid)).then_some(pid)
        })
        .collect();
    pids.sort_unstable();
    pids.dedup();
    pids
}

impl Drop for SpoolGuard {
    fn drop(&mut self) {
        if self.kept {
            drop(self.lock.take());
            return;
        }
        // Never delete a spool a live process still writes (issue 18, B2): its stream would go
        // on into a deleted file. It stays for `memscope recover`; the probes see the collector
        // gone once the lock below is released and stop after a bounded number of chunks.
        let mut live = live_writers(&self.path);
        live.retain(|p| !self.ignored.contains(p));
        if !live.is_empty() {
            eprintln!(
                "{}: spool {} kept: {} process(es) still write to it (pid {}); `memscope recover {}` collects it once they end",
                self.who,
                self.path.display(),
                live.len(),
                live.iter().map(u32::to_string).collect::<Vec<_>>().join(", "),
                self.path.display()
            );
            drop(self.lock.take());
            return;
        }
        match std::fs::remove_dir_all(&self.path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => eprintln!(
                "{}: cannot remove spool {}: {e}",
                self.who,
                self.path.display()
            ),
        }
        drop(self.lock.take());
    }
}

/// Creates `<spool>/collector.lock` (mode 0600) and holds `flock(LOCK_EX)` on it for as long as
/// the returned file lives.
///
/// # Errors
/// The file cannot be created or locked.
pub fn hold_collector_lock(spool: &Path) -> Result<std::fs::File, String> {
    use std::os::unix::fs::OpenOptionsExt;
    let path = spool.join(memscope_stream::spool::COLLECTOR_LOCK);
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        // never through a symbolic link planted as the lock (issue 17, M1)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_CLOEXEC)
        .open(&path)
        .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
    f.try_lock()
        .map_err(|e| format!("cannot lock {}: {e}", path.display()))?;
    Ok(f)
}

/// After the collector's end: when outputs could not be written (a full disk, a file-size
/// limit, a planted link), keeps the spool so `memscope recover OUTPUT` redoes them once the
/// cause is gone, and says so in one line. A spool removed, emptied or moved away under the run
/// (by hand, or with the output directory around it) is said too: the streams not read from it by then are lost,
/// and nothing is left to write the outputs again from. Returns the exit code: the job's, or 2
/// where the job succeeded.
pub(crate) fn keep_after_write_failures(
    guard: &mut SpoolGuard,
    summaries: &[memscope_collect::process::ProcessSummary],
    output: &Path,
    code: i32,
) -> i32 {
    let failed: Vec<u32> = summaries
        .iter()
        .filter(|p| p.write_failures > 0)
        .map(|p| p.pid)
        .collect();
    let failed_line = |lead: &str| {
        if failed.is_empty() {
            String::new()
        } else {
            format!("{lead}outputs of pid(s) {failed:?} could not all be written (said above)")
        }
    };
    // the spool's run.json is what `memscope recover` needs first: a spool emptied or made
    // anew under the run is as gone as a removed one
    if !guard.path.join(memscope_stream::spool::RUN_INFO).is_file() {
        eprintln!(
            "{}: the spool {} was removed, emptied or moved away while the run went on (by hand, or with the output directory around it): what was not read from it by then is lost{}",
            guard.who,
            guard.path.display(),
            failed_line("; ")
        );
    } else if !failed.is_empty() {
        guard.keep();
        eprintln!(
            "{}: {}; spool {} kept: `memscope recover {}` writes them again once that is fixed",
            guard.who,
            failed_line(""),
            guard.path.display(),
            output.display()
        );
    } else {
        return code;
    }
    if code == 0 {
        2
    } else {
        code
    }
}
