//! The run index of a recovered run (issue 27): `memscope recover` appends to
//! `<output>/memscope_run.json` the entry its killed `memscope run` never wrote, so `analyze`,
//! `compare`, `report` and `export` on the run directory see its ranks.
//!
//! The run is the killed one: `memscope_pid` is the pid in the spool's name, the command and
//! start time come from the spool's `run.json`. Processes whose outputs the recover writes
//! come from their summaries; processes whose outputs were complete already come from their
//! stream header (pid, parent, executable, rank environment) and their dump files (rows per
//! file, and distinct IDs for the process). The job's exit code is its first process's, as its
//! probe recorded it at `exit`; `-1` when no process recorded it.

use memscope_collect::process::ProcessSummary;
use memscope_dump::reader::{DumpFile, Order, ReadOptions};
use memscope_stream::spool::StreamHeader;
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

/// What the spool tells about the killed run.
pub struct Killed<'a> {
    /// Pid of the killed `memscope run` (from the spool's name).
    pub memscope_pid: u32,
    /// The job's command line (`run.json`; empty when an older memscope wrote it).
    pub command: &'a [String],
    /// Start of the run, ns since the epoch (`run.json`; 0 when unknown).
    pub start_ns: u64,
}

/// The dump files of a process directory: `device_*/dump/memscope_dump_*.{csv,db}`.
fn dump_files(dir: &Path) -> Vec<PathBuf> {
    let mut v = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return v;
    };
    for d in rd.flatten() {
        let name = d.file_name();
        if !name.to_string_lossy().starts_with("device_") {
            continue;
        }
        let Ok(files) = std::fs::read_dir(d.path().join("dump")) else {
            continue;
        };
        for f in files.flatten() {
            let n = f.file_name().to_string_lossy().into_owned();
            if n.starts_with("memscope_dump_") && (n.ends_with(".csv") || n.ends_with(".db")) {
                v.push(f.path());
            }
        }
    }
    v.sort();
    v
}

/// The summary of a process whose outputs were complete before the recover: what its index
/// entry and the helper check need, read back from its header, its images' executables and
/// its dumps.
pub fn complete_process(h: &StreamHeader, dir: &Path, image_exes: &[String]) -> ProcessSummary {
    let mut ids = HashSet::new();
    let mut files = Vec::new();
    for f in dump_files(dir) {
        let mut rows = 0u64;
        let read = DumpFile::open(&f).and_then(|d| {
            d.for_each(Order::File, &mut ReadOptions::default(), &mut |ev| {
                rows += 1;
                ids.insert(ev.id);
                Ok(())
            })
        });
        if let Err(e) = read {
            eprintln!("memscope: recover: run index: {e}");
        }
        files.push((f, rows));
    }
    let mut counts = BTreeMap::new();
    if !ids.is_empty() {
        // only the total is indexed: the distinct events of the process
        counts.insert(memscope_core::event::EventKind::System, ids.len() as u64);
    }
    ProcessSummary {
        pid: h.pid,
        ppid: h.ppid,
        exe: image_exes.last().unwrap_or(&h.exe).clone(),
        image_exes: image_exes.to_vec(),
        project_dir: dir.to_path_buf(),
        rank_env: h.rank_env.clone(),
        visible_devices: h.visible_devices().unwrap_or_default(),
        files,
        counts,
        ..ProcessSummary::default()
    }
}

/// Appends the killed run's entry to `<root>/memscope_run.json`: the processes recovered now
/// and those complete before ([`complete_process`]), helpers marked. Returns whether it was
/// written (a failure is said on one line).
pub fn write(root: &Path, killed: &Killed<'_>, summaries: &[ProcessSummary]) -> bool {
    let mut procs: Vec<ProcessSummary> = summaries.to_vec();
    procs.sort_by_key(|p| p.pid);
    let exit_code = procs
        .iter()
        .find(|p| p.ppid == killed.memscope_pid)
        .and_then(|p| p.exit_status)
        .unwrap_or(-1);
    let entries = crate::run_index::entries(root, &procs, &BTreeMap::new());
    crate::run_index::write(
        root,
        entries,
        &crate::run_index::RunFacts {
            command: killed.command,
            exit_code,
            interrupted_by: None,
            recovered: true,
            start_ns: killed.start_ns,
            memscope_pid: killed.memscope_pid,
        },
    )
}
