//! What a report reads: a run is what the user named — a run output directory (every process
//! under it), one process directory, or one dump file. Its dump files are grouped by process
//! directory (`msmemscope_<pid>_<ts>_ascend/device_<n>/dump/memscope_dump_<ts>.csv|.db`): the
//! files of one group hold one process's rows split by device and are merged back into ID
//! order ([`crate::feed`]).
//!
//! A kept capture (`*.mscap`, the collector's event stream; found and replayed by the caller
//! through [`ProcessEvents`]) is a group of its own ([`with_captures`]); the dumps of the
//! process directory holding it are then not read (the capture holds every row they hold,
//! and the HOST rows `memscope run` writes only with `--host-rows`).
//!
//! The walk does not follow symbolic links, stops at [`MAX_DEPTH`] levels and at
//! [`MAX_FILES`] dump files, and skips the annotated copies `memscope analyze inefficient`
//! writes (`*_inefficient*`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use memscope_dump::reader::{DumpFile, ProcessEvents};

use crate::ReportError;

/// Deepest folder level searched under a run directory.
pub const MAX_DEPTH: usize = 6;
/// Most dump files read from one run.
pub const MAX_FILES: usize = 10_000;

/// The dump files of one process directory (or a single file).
#[derive(Clone, Debug)]
pub struct Group {
    /// The process directory or the file, as shown in the report.
    pub source: String,
    /// Its dump files, by path (none for a capture).
    pub files: Vec<DumpFile>,
    /// Its kept capture, replayed in place of dump files.
    pub capture: Option<Arc<dyn ProcessEvents>>,
}

/// One run to report on.
#[derive(Clone, Debug)]
pub struct RunInput {
    /// What the user named.
    pub label: String,
    /// Groups, by path.
    pub groups: Vec<Group>,
}

impl RunInput {
    /// Every dump file, in group order.
    pub fn files(&self) -> impl Iterator<Item = &DumpFile> {
        self.groups.iter().flat_map(|g| g.files.iter())
    }

    /// Every capture, in group order.
    pub fn captures(&self) -> impl Iterator<Item = &Arc<dyn ProcessEvents>> {
        self.groups.iter().filter_map(|g| g.capture.as_ref())
    }
}

fn is_dump_name(name: &str) -> bool {
    name.starts_with("memscope_dump_")
        && (name.ends_with(".csv") || name.ends_with(".db"))
        && !name.contains("_inefficient")
}

fn walk(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) -> Result<(), ReportError> {
    let rd = std::fs::read_dir(dir).map_err(|e| ReportError::input(dir, e.to_string()))?;
    let mut entries: Vec<_> = rd.flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        // DirEntry::file_type does not follow symbolic links
        let Ok(ft) = e.file_type() else { continue };
        let p = e.path();
        // a flight-recorder window run under the output path is a run of its own
        if ft.is_dir() && depth < MAX_DEPTH && !memscope_dump::layout::is_window_run(&p) {
            walk(&p, depth + 1, out)?;
        } else if ft.is_file() && e.file_name().to_str().is_some_and(is_dump_name) {
            if out.len() >= MAX_FILES {
                return Err(ReportError::input(
                    dir,
                    format!("more than {MAX_FILES} dump files; name one run directory"),
                ));
            }
            out.push(p);
        }
    }
    Ok(())
}

/// The process directory of a dump at `…/X/device_<n>/dump/file` (X), else the file's folder.
fn process_dir(file: &Path) -> PathBuf {
    let parent = file.parent().unwrap_or(Path::new("."));
    let dev = parent.parent();
    let named =
        |p: &Path, f: &dyn Fn(&str) -> bool| p.file_name().and_then(|n| n.to_str()).is_some_and(f);
    match dev {
        Some(d) if named(parent, &|n| n == "dump") && named(d, &|n| n.starts_with("device_")) => {
            d.parent().unwrap_or(d).to_path_buf()
        }
        _ => parent.to_path_buf(),
    }
}

const NO_DUMPS: &str = "no dump files (memscope_dump_*.csv or .db) under this directory";

/// One kept capture of a run: the process directory holding it (`None` outside that layout)
/// and its events.
pub type CaptureInput = (Option<PathBuf>, Arc<dyn ProcessEvents>);

/// The run `path` with its kept `captures` (found under it, or `path` itself): each capture
/// is a group, and the dump files of a process directory holding one are not read. Without
/// captures this is [`discover`].
///
/// # Errors
/// As [`discover`]; a directory with captures need not hold dump files.
pub fn with_captures(path: &Path, captures: Vec<CaptureInput>) -> Result<RunInput, ReportError> {
    if captures.is_empty() {
        return discover(path);
    }
    let label = path.display().to_string();
    let mut run = if path.is_dir() {
        let mut found = Vec::new();
        walk(path, 0, &mut found)?;
        if found.is_empty() {
            RunInput {
                label: label.clone(),
                groups: Vec::new(),
            }
        } else {
            discover(path)?
        }
    } else {
        RunInput {
            label: label.clone(),
            groups: Vec::new(),
        }
    };
    let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let dirs: Vec<PathBuf> = captures
        .iter()
        .filter_map(|(d, _)| d.as_deref().map(canon))
        .collect();
    run.groups
        .retain(|g| !dirs.contains(&canon(Path::new(&g.source))));
    for (dir, events) in captures {
        run.groups.push(Group {
            source: dir
                .as_deref()
                .unwrap_or(events.origin())
                .display()
                .to_string(),
            files: Vec::new(),
            capture: Some(events),
        });
    }
    run.groups.sort_by(|a, b| a.source.cmp(&b.source));
    Ok(run)
}

/// Finds the dump files of `path` (a directory or a dump file).
///
/// # Errors
/// The path is missing or unreadable, is neither a file nor a directory, a file is not a
/// readable dump (size, type), or a directory holds no dump file.
pub fn discover(path: &Path) -> Result<RunInput, ReportError> {
    let label = path.display().to_string();
    let md = std::fs::metadata(path).map_err(|e| ReportError::input(path, e.to_string()))?;
    if md.is_file() {
        let f = DumpFile::open(path).map_err(ReportError::Read)?;
        return Ok(RunInput {
            label: label.clone(),
            groups: vec![Group {
                source: label,
                files: vec![f],
                capture: None,
            }],
        });
    }
    if !md.is_dir() {
        return Err(ReportError::input(path, "not a file or directory"));
    }
    let mut found = Vec::new();
    walk(path, 0, &mut found)?;
    if found.is_empty() {
        return Err(ReportError::input(path, NO_DUMPS));
    }
    let mut groups: Vec<(PathBuf, Vec<DumpFile>)> = Vec::new();
    for p in found {
        let dir = process_dir(&p);
        let f = DumpFile::open(&p).map_err(ReportError::Read)?;
        match groups.iter_mut().find(|(d, _)| *d == dir) {
            Some((_, v)) => v.push(f),
            None => groups.push((dir, vec![f])),
        }
    }
    groups.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(RunInput {
        label,
        groups: groups
            .into_iter()
            .map(|(d, files)| Group {
                source: d.display().to_string(),
                files,
                capture: None,
            })
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use memscope_dump::reader::ConsumerError;

    #[test]
    fn dump_files_group_by_process_directory_and_annotated_copies_are_skipped() {
        let t = tempfile::tempdir().unwrap();
        let header = "ID,Event,Event Type,Name,Timestamp(ns),Process Id,Thread Id,Device Id,Ptr,Attr,Call Stack(Python),Call Stack(C)\n";
        for (dir, name) in [
            ("msmemscope_1_x_ascend/device_0/dump", "memscope_dump_1.csv"),
            (
                "msmemscope_1_x_ascend/device_cpu/dump",
                "memscope_dump_1.csv",
            ),
            (
                "msmemscope_1_x_ascend/device_0/dump",
                "memscope_dump_1_inefficient.csv",
            ),
            ("msmemscope_2_x_ascend/device_0/dump", "memscope_dump_2.csv"),
            ("msmemscope_2_x_ascend", "decompose_2.csv"),
        ] {
            let d = t.path().join(dir);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join(name), header).unwrap();
        }
        std::os::unix::fs::symlink(t.path(), t.path().join("loop")).unwrap();
        let r = discover(t.path()).unwrap();
        assert_eq!(r.groups.len(), 2);
        assert_eq!(r.groups[0].files.len(), 2);
        assert!(r.groups[0].source.ends_with("msmemscope_1_x_ascend"));
        assert_eq!(r.groups[1].files.len(), 1);
        let e = discover(&t.path().join("msmemscope_2_x_ascend/device_cpu")).unwrap_err();
        assert!(e.to_string().contains("No such file"), "{e}");
        std::fs::create_dir_all(t.path().join("empty")).unwrap();
        let e = discover(&t.path().join("empty")).unwrap_err();
        assert!(e.to_string().contains("no dump files"), "{e}");
    }

    #[derive(Debug)]
    struct Fake(PathBuf);

    impl ProcessEvents for Fake {
        fn pid(&self) -> Option<u32> {
            Some(2)
        }
        fn origin(&self) -> &Path {
            &self.0
        }
        fn size(&self) -> u64 {
            0
        }
        fn replay(
            &self,
            _: &mut dyn FnMut(memscope_core::event::Event) -> Result<(), ConsumerError>,
        ) -> Result<(), ConsumerError> {
            Ok(())
        }
    }

    #[test]
    fn a_process_dir_with_a_capture_is_one_capture_group_and_its_dumps_are_not_read() {
        let t = tempfile::tempdir().unwrap();
        let header = "ID,Event,Event Type,Name,Timestamp(ns),Process Id,Thread Id,Device Id,Ptr,Attr,Call Stack(Python),Call Stack(C)\n";
        for dir in ["msmemscope_1_x_ascend", "msmemscope_2_x_ascend"] {
            let d = t.path().join(dir).join("device_cpu/dump");
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("memscope_dump_1.csv"), header).unwrap();
        }
        let dir = t.path().join("msmemscope_2_x_ascend");
        let cap: Arc<dyn ProcessEvents> = Arc::new(Fake(dir.join("c.mscap")));
        let r = with_captures(t.path(), vec![(Some(dir.clone()), cap)]).unwrap();
        assert_eq!(r.groups.len(), 2);
        assert_eq!(r.groups[0].files.len(), 1);
        assert!(r.groups[0].capture.is_none());
        assert!(r.groups[1].files.is_empty() && r.groups[1].capture.is_some());
        assert_eq!(r.groups[1].source, dir.display().to_string());
        assert_eq!((r.files().count(), r.captures().count()), (1, 1));
        // a directory holding only a capture is a run too
        let only = tempfile::tempdir().unwrap();
        let cap: Arc<dyn ProcessEvents> = Arc::new(Fake(only.path().join("c.mscap")));
        let r = with_captures(only.path(), vec![(None, cap)]).unwrap();
        assert_eq!(r.groups.len(), 1);
    }
}
