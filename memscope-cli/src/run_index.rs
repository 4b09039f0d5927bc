//! Writes the run index (`memscope_run.json`, [`memscope_dump::run_index`]) at the end of
//! `memscope run` (issue 18), from the processes' summaries and how they ended.

use crate::job::Ended;
use memscope_collect::process::ProcessSummary;
use memscope_dump::run_index::{self, FileEntry, ProcessEntry, RunEntry};
use std::collections::BTreeMap;
use std::path::Path;

fn rel(root: &Path, p: &Path) -> String {
    p.strip_prefix(root).unwrap_or(p).display().to_string()
}

/// `"3"` for `.../device_3/dump/x.csv`, `"cpu"` for `device_cpu`.
fn device_of(file: &Path) -> Option<String> {
    let dir = file.parent()?.parent()?.file_name()?.to_str()?;
    dir.strip_prefix("device_").map(str::to_owned)
}

/// The index entry of one process; `reaped` holds how the processes `memscope` waited for
/// ended (its direct child, ranks reparented to it).
pub fn process_entry(
    root: &Path,
    p: &ProcessSummary,
    reaped: &BTreeMap<u32, Ended>,
) -> ProcessEntry {
    let env: BTreeMap<String, String> = p.rank_env.iter().cloned().collect();
    let (rank, local_rank, world_size) = run_index::rank_identity(&env);
    let ended = match (reaped.get(&p.pid).copied(), p.exit_status) {
        (Some(Ended::Exited(c)), _) | (None, Some(c)) => run_index::Ended {
            how: "exit".into(),
            code: Some(c),
            signal: None,
        },
        (Some(Ended::Signaled(s)), _) => run_index::Ended {
            how: "signal".into(),
            code: None,
            signal: Some(s),
        },
        (None, None) => run_index::Ended {
            how: "unknown".into(),
            code: None,
            signal: None,
        },
    };
    // a helper's outputs were not kept: it has no files, devices or rows (issue 23)
    let files: &[(std::path::PathBuf, u64)] = if p.helper { &[] } else { &p.files };
    let mut devices: Vec<String> = files.iter().filter_map(|(f, _)| device_of(f)).collect();
    devices.sort();
    devices.dedup();
    ProcessEntry {
        pid: p.pid,
        ppid: p.ppid,
        exe: p.exe.clone(),
        rank,
        local_rank,
        world_size,
        env,
        visible_devices: p.visible_devices.clone(),
        devices,
        dir: p.project_dir.is_dir().then(|| rel(root, &p.project_dir)),
        ended,
        rows: if p.helper { 0 } else { p.counts.values().sum() },
        dropped: p.dropped,
        files: files
            .iter()
            .map(|(f, rows)| FileEntry {
                path: rel(root, f),
                rows: *rows,
            })
            .collect(),
        helper: p.helper,
    }
}

/// What the run index needs beyond the summaries.
pub struct RunFacts<'a> {
    /// The job's command line.
    pub command: &'a [String],
    /// The run's exit code.
    pub exit_code: i32,
    /// The forwarded signal, if any.
    pub interrupted_by: Option<String>,
    /// Written by `memscope recover` for a killed run.
    pub recovered: bool,
    /// Start of the run, ns since the epoch.
    pub start_ns: u64,
    /// Pid of the `memscope run` that ran the job (`memscope recover`: the killed one's).
    pub memscope_pid: u32,
}

/// The index entries of every traced process, those that recorded nothing (a launcher) too.
pub fn entries(
    root: &Path,
    procs: &[ProcessSummary],
    reaped: &BTreeMap<u32, Ended>,
) -> Vec<ProcessEntry> {
    procs
        .iter()
        .map(|p| process_entry(root, p, reaped))
        .collect()
}

/// Appends this run (its processes: [`entries`]) to `<root>/memscope_run.json`; a failure is
/// said on one line and returned as `false` (the dumps are written; the run then exits
/// non-zero, as for any output it could not write).
pub fn write(root: &Path, processes: Vec<ProcessEntry>, facts: &RunFacts<'_>) -> bool {
    let entry = RunEntry {
        memscope: env!("CARGO_PKG_VERSION").to_owned(),
        memscope_pid: facts.memscope_pid,
        start_ns: facts.start_ns,
        end_ns: now_ns(),
        command: facts.command.to_vec(),
        exit_code: facts.exit_code,
        interrupted_by: facts.interrupted_by.clone(),
        recovered: facts.recovered,
        processes,
    };
    match run_index::append(root, entry) {
        Ok(Some(aside)) => eprintln!(
            "memscope: run index: {} was no run index this memscope reads; kept as {}, a new one started",
            root.join(run_index::FILE_NAME).display(),
            aside.display()
        ),
        Ok(None) => {}
        Err(e) => {
            eprintln!("memscope: run index: {e}");
            return false;
        }
    }
    true
}

/// The run's exit code once the run index was (`written`) or was not written: a job that
/// succeeded exits 2 when its index could not be written, as for any output lost.
pub fn fail_if_unwritten(written: bool, code: i32) -> i32 {
    if !written && code == 0 {
        2
    } else {
        code
    }
}

/// Now, ns since the epoch.
pub fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}
