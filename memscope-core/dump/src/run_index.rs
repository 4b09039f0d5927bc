//! The run index (issue 18): `memscope_run.json` at the root of an output directory, one
//! entry per `memscope run` into it (runs that share `-o` are kept apart), each listing every
//! traced process with its rank identity, devices, how it ended, and its files. Schema:
//! `schemas/memscope_run.schema.json`.
//!
//! Rank identity comes from each process's own environment as its probe recorded it at start
//! (`wire::FH_RANK_ENV`): the rank from `RANK`, `OMPI_COMM_WORLD_RANK`, `PMI_RANK`,
//! `SLURM_PROCID` or `RANK_ID` (MindSpore), the first that is a number; the local rank from
//! `LOCAL_RANK`, `OMPI_COMM_WORLD_LOCAL_RANK` or `SLURM_LOCALID`; the world size from
//! `WORLD_SIZE`, `OMPI_COMM_WORLD_SIZE`, `PMI_SIZE`, `SLURM_NTASKS` or `RANK_SIZE`.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// File name of the run index at the output root.
pub const FILE_NAME: &str = "memscope_run.json";
/// The `format` value of the file.
pub const FORMAT: &str = "memscope-run-index";
/// The `version` of the layout written here.
pub const VERSION: u32 = 1;

/// The whole file: every run written into this output directory, oldest first.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunIndexFile {
    /// Always [`FORMAT`].
    pub format: String,
    /// Layout version ([`VERSION`]).
    pub version: u32,
    /// The runs.
    pub runs: Vec<RunEntry>,
}

/// One `memscope run`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunEntry {
    /// memscope version.
    pub memscope: String,
    /// Pid of the `memscope run` process.
    pub memscope_pid: u32,
    /// When the run started and ended, ns since the epoch.
    pub start_ns: u64,
    /// See `start_ns`.
    pub end_ns: u64,
    /// The job's command line.
    pub command: Vec<String>,
    /// The job's exit code (128+N when killed by signal N; for a run `memscope recover`
    /// indexed, the job's first process's exit status, -1 if unknown): `memscope run`'s own
    /// unless a `--fail-on` limit was crossed by a job that succeeded.
    pub exit_code: i32,
    /// The signal `memscope run` received and forwarded to the job (`SIGINT`, …), if any.
    pub interrupted_by: Option<String>,
    /// `memscope run` was killed before it wrote this entry: `memscope recover` wrote it from
    /// the run's spool (absent in indexes of older memscope: `false`).
    #[serde(default)]
    pub recovered: bool,
    /// Every traced process, in pid order.
    pub processes: Vec<ProcessEntry>,
}

/// One traced process.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcessEntry {
    /// Process id.
    pub pid: u32,
    /// Parent process id.
    pub ppid: u32,
    /// Executable (of its last image).
    pub exe: String,
    /// Global rank, when its environment names one.
    pub rank: Option<u32>,
    /// Local rank (rank within the node).
    pub local_rank: Option<u32>,
    /// World size.
    pub world_size: Option<u32>,
    /// Its own rank environment (`RANK`, `ASCEND_RT_VISIBLE_DEVICES`, …), as recorded.
    pub env: BTreeMap<String, String>,
    /// Its device mapping, logical index → physical id (its `ASCEND_RT_VISIBLE_DEVICES`,
    /// else the run's; empty: identity).
    pub visible_devices: Vec<u32>,
    /// Devices it has dump files for: `"0"`…, `"cpu"`.
    pub devices: Vec<String>,
    /// Its output directory, relative to the output root (`null` when it wrote nothing).
    pub dir: Option<String>,
    /// How it ended.
    pub ended: Ended,
    /// Rows written (each device-less row once).
    pub rows: u64,
    /// Events its probe dropped.
    pub dropped: u64,
    /// Its dump files, relative to the output root, with their rows.
    pub files: Vec<FileEntry>,
    /// A launcher or wrapper helper of the job (a shell script, a pyenv shim, memscope's own
    /// helper): its outputs were not kept and the console did not list it (issue 23).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub helper: bool,
}

/// How a process ended.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ended {
    /// `exit` (through `exit()`, status in `code`), `signal` (killed by `signal`), or
    /// `unknown` (it did not end through `exit()` and its parent was not `memscope`: killed,
    /// `_exit`, or still running when the run ended).
    pub how: String,
    /// Exit status, for `exit`.
    pub code: Option<i32>,
    /// Signal number, for `signal`.
    pub signal: Option<i32>,
}

/// A dump file.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEntry {
    /// Path relative to the output root.
    pub path: String,
    /// Rows it holds.
    pub rows: u64,
}

fn first_number(env: &BTreeMap<String, String>, names: &[&str]) -> Option<u32> {
    names
        .iter()
        .find_map(|n| env.get(*n).and_then(|v| v.trim().parse().ok()))
}

/// `(rank, local rank, world size)` from a process's rank environment (module documentation).
pub fn rank_identity(env: &BTreeMap<String, String>) -> (Option<u32>, Option<u32>, Option<u32>) {
    (
        first_number(
            env,
            &[
                "RANK",
                "OMPI_COMM_WORLD_RANK",
                "PMI_RANK",
                "SLURM_PROCID",
                "RANK_ID",
            ],
        ),
        first_number(
            env,
            &["LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"],
        ),
        first_number(
            env,
            &[
                "WORLD_SIZE",
                "OMPI_COMM_WORLD_SIZE",
                "PMI_SIZE",
                "SLURM_NTASKS",
                "RANK_SIZE",
            ],
        ),
    )
}

/// Errors of reading or writing the run index.
#[derive(Debug, thiserror::Error)]
pub enum RunIndexError {
    /// The file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The file is not a run index.
    #[error("{path}: not a memscope run index: {msg}")]
    Format {
        /// The file.
        path: String,
        /// What is wrong.
        msg: String,
    },
}

/// Longest run index read (bytes): a bound on what a planted file can make the reader load.
pub const MAX_BYTES: u64 = 256 << 20;

/// Reads `<root>/memscope_run.json`; `Ok(None)` when there is none.
///
/// # Errors
/// Unreadable, too large, or not a run index of a known version.
pub fn read(root: &Path) -> Result<Option<RunIndexFile>, RunIndexError> {
    let path = root.join(FILE_NAME);
    let io = |source| RunIndexError::Io {
        path: path.display().to_string(),
        source,
    };
    let f = match std::fs::File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(e)),
    };
    let mut text = String::new();
    std::io::Read::read_to_string(&mut std::io::Read::take(f, MAX_BYTES + 1), &mut text)
        .map_err(io)?;
    let bad = |msg: String| RunIndexError::Format {
        path: path.display().to_string(),
        msg,
    };
    if text.len() as u64 > MAX_BYTES {
        return Err(bad(format!("larger than {MAX_BYTES} bytes")));
    }
    let idx: RunIndexFile = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
    if idx.format != FORMAT || idx.version != VERSION {
        return Err(bad(format!(
            "format {:?} version {} (this memscope reads {FORMAT:?} version {VERSION})",
            idx.format, idx.version
        )));
    }
    Ok(Some(idx))
}

/// Adds `run` to `<root>/memscope_run.json` (created mode 0600 if absent; earlier runs kept),
/// through a temporary file renamed over it, so a reader never sees half a file.
///
/// An existing file that is no run index this memscope reads (garbage, another version) is
/// renamed aside, never overwritten, and a new index started: returns that name, for the
/// caller to say.
///
/// # Errors
/// The existing file cannot be read or set aside (it is left as it is), or the new one
/// cannot be written.
pub fn append(root: &Path, run: RunEntry) -> Result<Option<PathBuf>, RunIndexError> {
    let path = root.join(FILE_NAME);
    // runs ending at once into one root take turns (each reads the index, adds its entry and
    // writes it back): a lock on the directory itself, so no lock file is left beside the runs
    let lock_err = |source| RunIndexError::Io {
        path: root.display().to_string(),
        source,
    };
    let dir = std::fs::File::open(root).map_err(lock_err)?;
    dir.lock().map_err(lock_err)?;
    let (existing, aside) = match read(root) {
        Ok(idx) => (idx, None),
        Err(RunIndexError::Format { .. }) => {
            let aside = (0..1000)
                .map(|k| match k {
                    0 => root.join(format!("{FILE_NAME}.unreadable")),
                    k => root.join(format!("{FILE_NAME}.unreadable.{k}")),
                })
                .find(|p| !p.exists())
                .unwrap_or_else(|| root.join(format!("{FILE_NAME}.unreadable")));
            std::fs::rename(&path, &aside).map_err(|source| RunIndexError::Io {
                path: path.display().to_string(),
                source,
            })?;
            (None, Some(aside))
        }
        Err(e) => return Err(e),
    };
    let mut idx = existing.unwrap_or_else(|| RunIndexFile {
        format: FORMAT.to_owned(),
        version: VERSION,
        runs: Vec::new(),
    });
    // the same run written again (`memscope recover` after a run that kept its spool):
    // its entry replaced, not a second one
    match idx.runs.iter_mut().find(|r| {
        r.memscope_pid == run.memscope_pid && r.command == run.command && run.memscope_pid != 0
    }) {
        Some(r) => *r = run,
        None => idx.runs.push(run),
    }
    let io = |source| RunIndexError::Io {
        path: path.display().to_string(),
        source,
    };
    let text = serde_json::to_vec_pretty(&idx).map_err(|e| io(std::io::Error::other(e)))?;
    let mut tmp = tempfile::Builder::new()
        .prefix(".memscope_run.")
        .tempfile_in(root)
        .map_err(io)?;
    std::io::Write::write_all(&mut tmp, &text).map_err(io)?;
    tmp.as_file().sync_all().map_err(io)?;
    tmp.persist(&path).map_err(|e| io(e.error))?;
    Ok(aside)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_identity_takes_torchrun_then_mpi_then_slurm_names() {
        let env = |kv: &[(&str, &str)]| -> BTreeMap<String, String> {
            kv.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert_eq!(
            rank_identity(&env(&[
                ("RANK", "5"),
                ("LOCAL_RANK", "1"),
                ("WORLD_SIZE", "8")
            ])),
            (Some(5), Some(1), Some(8))
        );
        assert_eq!(
            rank_identity(&env(&[
                ("OMPI_COMM_WORLD_RANK", "3"),
                ("OMPI_COMM_WORLD_SIZE", "4"),
                ("SLURM_PROCID", "9")
            ])),
            (Some(3), None, Some(4))
        );
        assert_eq!(
            rank_identity(&env(&[("RANK", "x"), ("SLURM_PROCID", "2")])),
            (Some(2), None, None)
        );
    }

    #[test]
    fn runs_appending_at_once_all_keep_their_entries() {
        let d = tempfile::tempdir().unwrap();
        std::thread::scope(|s| {
            for pid in 1..=8 {
                let root = d.path();
                s.spawn(move || {
                    for k in 0..5 {
                        let run = RunEntry {
                            memscope_pid: pid * 100 + k,
                            ..RunEntry::default()
                        };
                        append(root, run).unwrap();
                    }
                });
            }
        });
        let idx = read(d.path()).unwrap().unwrap();
        assert_eq!(idx.runs.len(), 40);
    }

    #[test]
    fn append_keeps_earlier_runs_of_the_same_output_directory() {
        let d = tempfile::tempdir().unwrap();
        for pid in [1, 2] {
            append(
                d.path(),
                RunEntry {
                    memscope_pid: pid,
                    ..RunEntry::default()
                },
            )
            .unwrap();
        }
        let idx = read(d.path()).unwrap().unwrap();
        let pids: Vec<u32> = idx.runs.iter().map(|r| r.memscope_pid).collect();
        assert_eq!(pids, [1, 2]);
        // the same run again (a recover): replaced
        let again = RunEntry {
            memscope_pid: 2,
            exit_code: 7,
            ..RunEntry::default()
        };
        append(d.path(), again).unwrap();
        let idx = read(d.path()).unwrap().unwrap();
        let codes: Vec<(u32, i32)> = idx
            .runs
            .iter()
            .map(|r| (r.memscope_pid, r.exit_code))
            .collect();
        assert_eq!(codes, [(1, 0), (2, 7)]);
    }

    #[test]
    fn append_over_a_file_that_is_no_run_index_sets_it_aside_and_starts_a_new_one() {
        let d = tempfile::tempdir().unwrap();
        let garbage = b"{\"format\":\"x\"}";
        std::fs::write(d.path().join(FILE_NAME), garbage).unwrap();
        let run = RunEntry {
            memscope_pid: 7,
            ..RunEntry::default()
        };
        let aside = append(d.path(), run.clone()).unwrap().expect("set aside");
        assert_eq!(std::fs::read(&aside).unwrap(), garbage);
        let idx = read(d.path()).unwrap().unwrap();
        assert_eq!(idx.runs.len(), 1);
        // a second planted file gets its own name: the first one kept is not overwritten
        std::fs::write(d.path().join(FILE_NAME), b"not json").unwrap();
        let second = append(d.path(), run).unwrap().expect("set aside");
        assert_ne!(second, aside);
        assert_eq!(std::fs::read(&aside).unwrap(), garbage);
        assert_eq!(read(d.path()).unwrap().unwrap().runs.len(), 1);
    }
}
