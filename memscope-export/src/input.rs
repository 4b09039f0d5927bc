//! The inputs of `memscope export`: run output directories (any tree of them, e.g. one per
//! node) and dump files, resolved into the traced processes they hold.
//!
//! * A directory is walked (symbolic links inside it are not followed, at most
//!   [`MAX_DEPTH`] levels) for dump files named `memscope_dump_<ts>[_<k>].csv|.db`; analysis
//!   copies (`*_inefficient.csv`) are not dumps and are skipped.
//! * A dump at `<P>/device_<n>|device_cpu/dump/` belongs to the process of directory `<P>`
//!   (msMemScope's layout); `<P>` named `msmemscope_<pid>_<ts>_ascend` gives the pid. Its device
//!   files are merged into one stream ([`crate::replay`]).
//! * Any other dump file is a process of its own; its rows are scanned once for their pids and
//!   devices (a file holding several pids gives one process per pid).
//! * The node of a process is the directory holding `<P>` (or the loose file): gathering each
//!   node's output into its own directory keeps processes with equal pids apart.
//! * A kept capture (`*.mscap`, found by the caller: [`resolve_with`]) is a process of its
//!   own, replayed in place of dump files ([`crate::captured`]); the dumps of the process
//!   directory holding it are not read (the capture holds every row they hold, and the HOST
//!   rows `memscope run` writes only with `--host-rows`).
//! * Processes are ordered by rank (unknown last), node, pid, and numbered from 1: the
//!   synthetic pid that keeps processes of different nodes and ranks apart in merged views.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::{Path, PathBuf};

use memscope_core::event::Device;
use memscope_dump::reader::{DumpFile, DumpFormat, Order, ReadOptions};

use crate::captured::{self, Captured};
use crate::error::ExportError;
use crate::process::node_of;
pub use crate::process::{InputFile, PidFilter, ProcessInput};
use crate::progress::Progress;
use crate::rank::{self, RankInfo, RankQuery, RunIndex};

/// Deepest directory level walked below an input directory.
pub const MAX_DEPTH: usize = 16;

/// Whether `name` is a dump file name: `memscope_dump_<digits>[_<digits>].csv|.db`.
pub fn is_dump_name(name: &str) -> bool {
    let Some(rest) = name.strip_prefix("memscope_dump_") else {
        return false;
    };
    let Some(stem) = rest
        .strip_suffix(".csv")
        .or_else(|| rest.strip_suffix(".db"))
    else {
        return false;
    };
    let mut parts = stem.split('_');
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    match (parts.next(), parts.next(), parts.next()) {
        (Some(ts), None, None) => digits(ts),
        (Some(ts), Some(k), None) => digits(ts) && digits(k),
        _ => false,
    }
}

/// The pid of a process directory named `msmemscope_<pid>_<ts>_ascend`.
pub fn process_dir_pid(name: &str) -> Option<u32> {
    let mid = name.strip_prefix("msmemscope_")?.strip_suffix("_ascend")?;
    let (pid, ts) = mid.split_once('_')?;
    if ts.is_empty() || !ts.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    pid.parse().ok()
}

/// The device of a `device_<n>` / `device_cpu` directory name.
pub fn device_dir(name: &str) -> Option<Device> {
    match name.strip_prefix("device_")? {
        "cpu" => Some(Device::Cpu),
        n if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => {
            n.parse().ok().map(Device::Npu)
        }
        _ => None,
    }
}

/// `(<P>, device)` when `file` lies at `<P>/device_<x>/dump/<file>`.
fn layout_of(file: &Path) -> Option<(PathBuf, Device)> {
    let dump = file.parent()?;
    if dump.file_name()? != "dump" {
        return None;
    }
    let dev_dir = dump.parent()?;
    let device = device_dir(dev_dir.file_name()?.to_str()?)?;
    Some((dev_dir.parent()?.to_path_buf(), device))
}

fn walk(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) -> Result<(), ExportError> {
    let rd = std::fs::read_dir(dir).map_err(|e| ExportError::input(dir, e.to_string()))?;
    let mut entries: Vec<_> = rd.flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let Ok(ft) = e.file_type() else { continue };
        let p = e.path();
        if ft.is_symlink() {
            continue;
        }
        if ft.is_dir() {
            // a flight-recorder window run under the output path is a run of its own
            if depth < MAX_DEPTH && !memscope_dump::layout::is_window_run(&p) {
                walk(&p, depth + 1, out)?;
            }
        } else if ft.is_file() && e.file_name().to_str().is_some_and(is_dump_name) {
            out.push(p);
        }
    }
    Ok(())
}

struct Group {
    dir: Option<PathBuf>,
    pid: Option<u32>,
    files: Vec<InputFile>,
}

/// Pid → devices seen in the rows of `files` (one `Order::File` pass each).
fn scan(
    files: &[InputFile],
    progress: &mut dyn Progress,
) -> Result<BTreeMap<Option<u32>, BTreeSet<Device>>, ExportError> {
    let mut seen: BTreeMap<Option<u32>, BTreeSet<Device>> = BTreeMap::new();
    for f in files {
        progress.stage(&format!("scanning {}", f.dump.name()));
        f.dump
            .for_each(Order::File, &mut ReadOptions::default(), &mut |ev| {
                let set = seen.entry(ev.pid).or_default();
                if ev.device != Device::NotApplicable {
                    set.insert(ev.device);
                }
                Ok(())
            })?;
        progress.advance(f.dump.size());
    }
    Ok(seen)
}

/// Resolves the inputs into processes, sorted and numbered (see the module documentation).
/// Returns the processes and notes for the user (shared or repeated ranks).
///
/// # Errors
/// A missing or unreadable input, a directory without dumps, a device directory holding both
/// CSV and `.db` dumps, a malformed file met while scanning.
pub fn resolve(
    paths: &[PathBuf],
    index: Option<&dyn RunIndex>,
    progress: &mut dyn Progress,
) -> Result<(Vec<ProcessInput>, Vec<String>), ExportError> {
    resolve_with(paths, &[], index, progress)
}

/// As [`resolve`], with the kept captures the caller found under `paths` (or was given):
/// each is a process, and the dumps of a process directory holding one are not read. A
/// directory of `paths` must hold dumps or one of the captures.
///
/// # Errors
/// As [`resolve`], and a capture that cannot be read while it is scanned for its devices.
pub fn resolve_with(
    paths: &[PathBuf],
    captures: &[Captured],
    index: Option<&dyn RunIndex>,
    progress: &mut dyn Progress,
) -> Result<(Vec<ProcessInput>, Vec<String>), ExportError> {
    let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let captured_dirs: HashSet<PathBuf> = captures
        .iter()
        .filter_map(|c| c.dir.as_deref())
        .map(canon)
        .collect();
    let mut files: Vec<PathBuf> = Vec::new();
    for p in paths {
        let md = std::fs::metadata(p).map_err(|e| ExportError::input(p, e.to_string()))?;
        if md.is_dir() {
            let before = files.len();
            walk(p, 0, &mut files)?;
            let mut k = 0;
            files.retain(|f| {
                k += 1;
                k <= before
                    || !layout_of(f).is_some_and(|(d, _)| captured_dirs.contains(&canon(&d)))
            });
            let has_capture = captures.iter().any(|c| c.events.origin().starts_with(p));
            if files.len() == before && !has_capture {
                return Err(ExportError::input(
                    p,
                    "holds no dump files (memscope_dump_<ts>.csv or .db) and no capture (*.mscap)",
                ));
            }
        } else {
            files.push(p.clone());
        }
    }
    let mut unique = HashSet::new();
    let mut groups: BTreeMap<PathBuf, Group> = BTreeMap::new();
    let mut loose: Vec<Group> = Vec::new();
    for path in files {
        let key = std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
        if !unique.insert(key) {
            continue;
        }
        let dump = DumpFile::open(&path)?;
        match layout_of(&path) {
            Some((dir, device)) => {
                let pid = dir
                    .file_name()
                    .and_then(|n| n.to_str())
                    .and_then(process_dir_pid);
                let g = groups.entry(dir.clone()).or_insert_with(|| Group {
                    dir: Some(dir),
                    pid,
                    files: Vec::new(),
                });
                g.files.push(InputFile {
                    dump,
                    device: Some(device),
                });
            }
            None => loose.push(Group {
                dir: None,
                pid: None,
                files: vec![InputFile { dump, device: None }],
            }),
        }
    }
    let mut procs = Vec::new();
    for g in groups.into_values().chain(loose) {
        check_formats(&g)?;
        let device_dirs: BTreeSet<Device> = g.files.iter().filter_map(|f| f.device).collect();
        let node = match &g.dir {
            Some(d) => node_of(d.parent()),
            None => node_of(g.files[0].dump.path().parent()),
        };
        if g.pid.is_some() && g.files.iter().all(|f| f.device.is_some()) {
            let device_dirs: Vec<Device> = device_dirs.into_iter().collect();
            let rank = rank::resolve(
                &RankQuery {
                    node: &node,
                    dir: g.dir.as_deref(),
                    pid: g.pid,
                    device_dirs: &device_dirs,
                    device_rows: &[],
                },
                index,
            );
            procs.push(ProcessInput {
                pid: g.pid,
                node,
                rank,
                dir: g.dir,
                files: g.files,
                capture: None,
                pid_filter: PidFilter::All,
                devices: device_dirs,
                synthetic_pid: 0,
            });
            continue;
        }
        progress.plan(g.files.iter().map(|f| f.dump.size()).sum());
        let seen = scan(&g.files, progress)?;
        let several = seen.len() > 1;
        let dirs: Vec<Device> = device_dirs.iter().copied().collect();
        for (pid, rows) in seen {
            let rows: Vec<Device> = rows.into_iter().collect();
            let mut devices: BTreeSet<Device> = rows.iter().copied().collect();
            devices.extend(dirs.iter().copied());
            let rank = rank::resolve(
                &RankQuery {
                    node: &node,
                    dir: g.dir.as_deref(),
                    pid,
                    device_dirs: &dirs,
                    device_rows: &rows,
                },
                index,
            );
            procs.push(ProcessInput {
                pid,
                node: node.clone(),
                rank,
                dir: g.dir.clone(),
                files: g.files.clone(),
                capture: None,
                pid_filter: if several {
                    PidFilter::Only(pid)
                } else {
                    PidFilter::All
                },
                devices: devices.into_iter().collect(),
                synthetic_pid: 0,
            });
        }
    }
    for c in captures {
        procs.push(captured::process(c, index, progress)?);
    }
    procs.sort_by(|a, b| {
        (
            a.rank.rank.is_none(),
            a.rank.rank,
            &a.node,
            a.pid,
            a.origin(),
        )
            .cmp(&(
                b.rank.rank.is_none(),
                b.rank.rank,
                &b.node,
                b.pid,
                b.origin(),
            ))
    });
    for (i, p) in procs.iter_mut().enumerate() {
        p.synthetic_pid = u32::try_from(i + 1).unwrap_or(u32::MAX);
    }
    let keys: Vec<(String, RankInfo, Option<u32>)> = procs
        .iter()
        .map(|p| (p.node.clone(), p.rank, p.pid))
        .collect();
    Ok((procs, rank::collisions(&keys)))
}

/// A device directory with both CSV and `.db` dumps holds the same rows twice.
fn check_formats(g: &Group) -> Result<(), ExportError> {
    let mut formats: BTreeMap<Device, BTreeSet<bool>> = BTreeMap::new();
    for f in &g.files {
        if let Some(d) = f.device {
            formats
                .entry(d)
                .or_default()
                .insert(f.dump.format() == DumpFormat::Db);
        }
    }
    for (d, set) in formats {
        if set.len() > 1 {
            let dir = g.dir.as_deref().unwrap_or(Path::new("."));
            let sub = d.dir_name().unwrap_or_default();
            return Err(ExportError::input(
                &dir.join(sub).join("dump"),
                "holds both CSV and .db dumps of the same rows; give one of them as input",
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dump_names_process_dirs_and_device_dirs_are_recognised() {
        assert!(is_dump_name("memscope_dump_20261201092629.csv"));
        assert!(is_dump_name("memscope_dump_20261201092629_1.db"));
        assert!(!is_dump_name(
            "memscope_dump_20261201092629_inefficient.csv"
        ));
        assert!(!is_dump_name("memscope_dump_.csv"));
        assert!(!is_dump_name("decompose_1.csv"));
        assert_eq!(
            process_dir_pid("msmemscope_16542_20261201092629_ascend"),
            Some(16542)
        );
        assert_eq!(process_dir_pid("msmemscope_x_1_ascend"), None);
        assert_eq!(device_dir("device_7"), Some(Device::Npu(7)));
        assert_eq!(device_dir("device_cpu"), Some(Device::Cpu));
        assert_eq!(device_dir("device_"), None);
    }
}
