//! The rank of a traced process, for per-rank outputs (Parquet's `rank=R` directories,
//! Perfetto's process names and order, memory_viz file names).
//!
//! One rule for every view (analyze, diff, `--fail-on`, `--summary-json`, the report, the
//! exports; issue 39):
//!
//! 1. inputs with a [`RunIndex`] (the collector's record of each process's rank identity:
//!    `RANK`, `LOCAL_RANK`, … as each process's probe recorded them; [`RunIndexFiles`] reads
//!    the `memscope_run.json` that `memscope run` writes at the output root, issue 18) take
//!    their ranks from it alone: a process it gives no rank has none (a one-process run is
//!    not rank 0 of a job because its NPU is device 0).
//! 2. without an index (msMemScope's own dumps), the process's NPU device, msMemScope's layout: the `device_<n>` directories of its
//!    `msmemscope_<pid>_<ts>_ascend/` directory, else the `Device Id` of its rows. With one
//!    process per NPU and the device set from `LOCAL_RANK` (torchrun's layout) this is the
//!    local rank. A process on several NPUs takes the lowest.
//! 3. none: the rank is unknown (a launcher or a host-only process), written `rank=-1`.
//!
//! Ranks from devices repeat across nodes and collide when every rank sees its NPU as device 0
//! (`ASCEND_RT_VISIBLE_DEVICES=<rank>` per rank); [`collisions`] words a note for those cases.

use std::path::Path;

use memscope_core::event::Device;

/// Where a rank came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RankSource {
    /// A run index entry.
    RunIndex,
    /// The process's `device_<n>` directory.
    DeviceDir,
    /// The `Device Id` column of the process's rows.
    DeviceColumn,
    /// Not known.
    Unknown,
}

impl RankSource {
    /// `run_index`, `device_dir`, `device_column` or `unknown` (the `processes` table's words).
    pub fn as_str(self) -> &'static str {
        match self {
            RankSource::RunIndex => "run_index",
            RankSource::DeviceDir => "device_dir",
            RankSource::DeviceColumn => "device_column",
            RankSource::Unknown => "unknown",
        }
    }
}

/// A process's rank and its source.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RankInfo {
    /// The rank, when known.
    pub rank: Option<u32>,
    /// How it was found.
    pub source: RankSource,
}

impl RankInfo {
    /// The rank as written in partition paths and names: the rank, or -1 when unknown.
    pub fn as_i64(self) -> i64 {
        self.rank.map_or(-1, i64::from)
    }
}

/// A record of each process's rank identity, kept by the collector ([`RunIndexFiles`]).
/// Implementations answer for the processes they know and `None` for the others.
pub trait RunIndex {
    /// The rank of the process `pid` whose output directory is `dir` (`None` for loose dump
    /// files), found under `node`.
    fn rank_of(&self, node: &str, dir: Option<&Path>, pid: Option<u32>) -> Option<u32>;
}

/// What is known of a process when its rank is resolved.
#[derive(Clone, Copy, Debug)]
pub struct RankQuery<'a> {
    /// See [`crate::input::ProcessInput::node`].
    pub node: &'a str,
    /// Output directory of the process (msMemScope layout), if any.
    pub dir: Option<&'a Path>,
    /// Process id, if known.
    pub pid: Option<u32>,
    /// Devices with their own `device_<n>` directory.
    pub device_dirs: &'a [Device],
    /// Devices seen in the rows (when the rows were scanned).
    pub device_rows: &'a [Device],
}

fn lowest_npu(devices: &[Device]) -> Option<u32> {
    devices
        .iter()
        .filter_map(|d| match d {
            Device::Npu(n) => Some(*n),
            _ => None,
        })
        .min()
}

/// Resolves the rank of one process by the rule of the module documentation.
pub fn resolve(q: &RankQuery<'_>, index: Option<&dyn RunIndex>) -> RankInfo {
    if let Some(i) = index {
        return match i.rank_of(q.node, q.dir, q.pid) {
            Some(r) => RankInfo {
                rank: Some(r),
                source: RankSource::RunIndex,
            },
            None => RankInfo {
                rank: None,
                source: RankSource::Unknown,
            },
        };
    }
    if let Some(r) = lowest_npu(q.device_dirs) {
        return RankInfo {
            rank: Some(r),
            source: RankSource::DeviceDir,
        };
    }
    if let Some(r) = lowest_npu(q.device_rows) {
        return RankInfo {
            rank: Some(r),
            source: RankSource::DeviceColumn,
        };
    }
    RankInfo {
        rank: None,
        source: RankSource::Unknown,
    }
}

/// Notes for ranks taken from devices that more than one process of a node shares, and for
/// ranks that repeat across nodes. `procs` holds (node, rank, pid) of every process.
pub fn collisions(procs: &[(String, RankInfo, Option<u32>)]) -> Vec<String> {
    use std::collections::BTreeMap;
    let mut by_rank: BTreeMap<(u32, &str), Vec<Option<u32>>> = BTreeMap::new();
    let mut nodes_of_rank: BTreeMap<u32, Vec<&str>> = BTreeMap::new();
    for (node, info, pid) in procs {
        let (Some(r), true) = (info.rank, info.source != RankSource::RunIndex) else {
            continue;
        };
        by_rank.entry((r, node)).or_default().push(*pid);
        let nodes = nodes_of_rank.entry(r).or_default();
        if !nodes.contains(&node.as_str()) {
            nodes.push(node);
        }
    }
    let pid_text = |p: &Option<u32>| p.map_or("N/A".to_owned(), |p| p.to_string());
    let mut notes = Vec::new();
    for ((rank, node), pids) in &by_rank {
        if pids.len() > 1 {
            let list: Vec<String> = pids.iter().map(pid_text).collect();
            notes.push(format!(
                "processes {} under {} all map to rank {rank}: ranks come from the NPU device, which they share (tell them apart by pid)",
                list.join(", "),
                if node.is_empty() { "." } else { node }
            ));
        }
    }
    if nodes_of_rank.values().any(|n| n.len() > 1) {
        notes.push(
            "ranks come from NPU devices, i.e. they are local ranks and repeat across the input's node directories (tell them apart by node and pid)".to_owned(),
        );
    }
    notes
}

/// The [`RunIndex`] of `memscope run`'s `memscope_run.json` ([`memscope_dump::run_index`]):
/// the rank of each process its runs list, found by its output directory (or, for loose
/// files, by a pid that names one process only).
#[derive(Debug, Default)]
pub struct RunIndexFiles {
    by_dir: std::collections::HashMap<std::path::PathBuf, u32>,
    by_pid: std::collections::HashMap<u32, Option<u32>>,
    /// Index files read.
    pub files: Vec<std::path::PathBuf>,
}

impl RunIndexFiles {
    /// Reads the `memscope_run.json` of every directory among `inputs` and of their parents
    /// (an input may be one process's directory).
    ///
    /// # Errors
    /// An index file that exists but cannot be read or is not a run index (one line).
    pub fn load(inputs: &[std::path::PathBuf]) -> Result<RunIndexFiles, String> {
        let mut idx = RunIndexFiles::default();
        let mut roots: Vec<std::path::PathBuf> = Vec::new();
        for p in inputs.iter().filter(|p| p.is_dir()) {
            roots.push(p.clone());
            if let Some(parent) = p.parent() {
                roots.push(if parent.as_os_str().is_empty() {
                    ".".into()
                } else {
                    parent.to_path_buf()
                });
            }
        }
        roots.sort();
        roots.dedup();
        for root in roots {
            let Some(file) = memscope_dump::run_index::read(&root).map_err(|e| e.to_string())?
            else {
                continue;
            };
            idx.files
                .push(root.join(memscope_dump::run_index::FILE_NAME));
            for p in file.runs.iter().flat_map(|r| &r.processes) {
                let Some(rank) = p.rank else {
                    continue;
                };
                if let Some(d) = &p.dir {
                    let dir = root.join(d);
                    let key = std::fs::canonicalize(&dir).unwrap_or(dir);
                    idx.by_dir.insert(key, rank);
                }
                idx.by_pid
                    .entry(p.pid)
                    .and_modify(|r| {
                        if *r != Some(rank) {
                            *r = None
                        }
                    })
                    .or_insert(Some(rank));
            }
        }
        Ok(idx)
    }

    /// Whether no index file was read: the inputs have no run index, and ranks come from
    /// devices. An index that gives no process a rank is not empty (its processes have none).
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }
}

impl RunIndex for RunIndexFiles {
    fn rank_of(&self, _node: &str, dir: Option<&Path>, pid: Option<u32>) -> Option<u32> {
        if let Some(d) = dir {
            let key = std::fs::canonicalize(d).unwrap_or_else(|_| d.to_path_buf());
            if let Some(r) = self.by_dir.get(&key) {
                return Some(*r);
            }
        }
        pid.and_then(|p| self.by_pid.get(&p).copied().flatten())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixed(u32);
    impl RunIndex for Fixed {
        fn rank_of(&self, _: &str, _: Option<&Path>, pid: Option<u32>) -> Option<u32> {
            (pid == Some(7)).then_some(self.0)
        }
    }

    #[test]
    fn rank_comes_from_the_index_alone_else_the_device_dir_then_the_rows() {
        let dirs = [Device::Cpu, Device::Npu(5), Device::Npu(3)];
        let rows = [Device::Npu(1)];
        let q = RankQuery {
            node: "n",
            dir: None,
            pid: Some(7),
            device_dirs: &dirs,
            device_rows: &rows,
        };
        assert_eq!(resolve(&q, Some(&Fixed(42))).rank, Some(42));
        assert_eq!(resolve(&q, Some(&Fixed(42))).source, RankSource::RunIndex);
        let other = RankQuery { pid: Some(8), ..q };
        // an indexed run's process without a rank has none, whatever its device
        assert_eq!(
            resolve(&other, Some(&Fixed(42))),
            RankInfo {
                rank: None,
                source: RankSource::Unknown
            }
        );
        assert_eq!(
            resolve(&other, None),
            RankInfo {
                rank: Some(3),
                source: RankSource::DeviceDir
            }
        );
        let loose = RankQuery {
            device_dirs: &[],
            ..other
        };
        assert_eq!(
            resolve(&loose, None),
            RankInfo {
                rank: Some(1),
                source: RankSource::DeviceColumn
            }
        );
        let host = RankQuery {
            device_dirs: &[Device::Cpu],
            device_rows: &[Device::Cpu, Device::NotApplicable],
            ..other
        };
        assert_eq!(resolve(&host, None).rank, None);
        assert_eq!(resolve(&host, None).as_i64(), -1);
    }

    #[test]
    fn shared_devices_and_repeated_ranks_are_noted() {
        let dev = |r| RankInfo {
            rank: Some(r),
            source: RankSource::DeviceDir,
        };
        let procs = vec![
            ("a".to_owned(), dev(0), Some(1)),
            ("a".to_owned(), dev(0), Some(2)),
            ("a".to_owned(), dev(1), Some(3)),
        ];
        let n = collisions(&procs);
        assert_eq!(n.len(), 1, "{n:?}");
        assert!(n[0].contains("1, 2") && n[0].contains("rank 0"), "{n:?}");
        let nodes = vec![
            ("a".to_owned(), dev(0), Some(1)),
            ("b".to_owned(), dev(0), Some(1)),
        ];
        assert!(collisions(&nodes)[0].contains("repeat across"));
        assert!(collisions(&procs[2..]).is_empty());
    }

    #[test]
    fn run_index_files_give_the_rank_of_each_process_directory_and_unique_pid() {
        use memscope_dump::run_index::{append, ProcessEntry, RunEntry};
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("msmemscope_11_20261201000000_ascend");
        std::fs::create_dir(&dir).unwrap();
        let p = |pid, rank| ProcessEntry {
            pid,
            rank: Some(rank),
            dir: Some(format!("msmemscope_{pid}_20261201000000_ascend")),
            ..ProcessEntry::default()
        };
        append(
            d.path(),
            RunEntry {
                processes: vec![p(11, 5), p(12, 6)],
                ..RunEntry::default()
            },
        )
        .unwrap();
        let idx = RunIndexFiles::load(&[d.path().to_path_buf()]).unwrap();
        assert_eq!(idx.rank_of("", Some(&dir), Some(11)), Some(5));
        assert_eq!(idx.rank_of("", None, Some(12)), Some(6));
        assert_eq!(idx.rank_of("", None, Some(13)), None);
        // a process directory given alone finds the index of its parent
        let one = RunIndexFiles::load(std::slice::from_ref(&dir)).unwrap();
        assert_eq!(one.rank_of("", Some(&dir), None), Some(5));
    }
}
