//! Kept captures as inputs of `memscope report` and of the viewer exports (`memscope export
//! --to memory-viz|perfetto|parquet`), TEAM contract 3: the captures under the inputs are
//! found here and replayed through [`memscope_collect::replay::replay_capture`] (the typing of
//! `memscope run`, HOST events included).
//!
//! Rule where a process directory holds both dumps and a capture: the capture is read and the
//! dumps are not (the capture holds every row the dumps hold, and the HOST rows `memscope run`
//! writes only with `--host-rows`) — unless the capture is incomplete (no trailer: cut short,
//! damaged, or its run still going), then the dumps are read, with a warning.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use memscope_core::event::Event;
use memscope_dump::reader::{ConsumerError, ProcessEvents};

use memscope_collect::replay::{capture_process, replay_capture};

/// Deepest directory level searched for captures below an input directory (the exports'
/// dump walk goes as deep).
const MAX_DEPTH: usize = 16;

/// One kept capture (one traced process), replayed on demand.
#[derive(Debug)]
pub struct CaptureEvents {
    path: PathBuf,
    pid: u32,
    size: u64,
}

impl CaptureEvents {
    /// The capture at `path`, its header read.
    ///
    /// # Errors
    /// The file cannot be read or is not a capture — one line naming it.
    pub fn open(path: &Path) -> Result<CaptureEvents, String> {
        let p = capture_process(path)?;
        let size = std::fs::metadata(path)
            .map_err(|e| format!("{}: {e}", path.display()))?
            .len();
        Ok(CaptureEvents {
            path: path.to_path_buf(),
            pid: p.info.pid,
            size,
        })
    }
}

impl ProcessEvents for CaptureEvents {
    fn pid(&self) -> Option<u32> {
        Some(self.pid)
    }

    fn origin(&self) -> &Path {
        &self.path
    }

    fn size(&self) -> u64 {
        self.size
    }

    fn replay(
        &self,
        visit: &mut dyn FnMut(Event) -> Result<(), ConsumerError>,
    ) -> Result<(), ConsumerError> {
        let p = replay_capture(&self.path, &crate::builtin::REGISTRY, &mut |_, ev| {
            visit(ev)
        })?;
        if !p.complete && first_warning(&self.path) {
            // a reader of any view must know it sees part of the process (once per command:
            // the analysis and its summary replay the same capture)
            eprintln!(
                "memscope: warning: {}: incomplete capture (its writer did not finish); read up to its last whole block",
                self.path.display()
            );
        }
        Ok(())
    }
}

/// Whether this command has not warned about `path` yet.
fn first_warning(path: &Path) -> bool {
    static WARNED: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());
    let Ok(mut w) = WARNED.lock() else {
        return true;
    };
    if w.iter().any(|p| p == path) {
        return false;
    }
    w.push(path.to_path_buf());
    true
}

/// A capture found under an input.
pub struct Found {
    /// The process directory holding it (`msmemscope_*`), `None` outside that layout.
    pub dir: Option<PathBuf>,
    /// Its events.
    pub events: Arc<CaptureEvents>,
}

fn is_capture(p: &Path) -> bool {
    p.extension().and_then(|e| e.to_str()) == Some(memscope_stream::capture::EXTENSION)
}

fn process_dir(capture: &Path) -> Option<PathBuf> {
    capture
        .parent()
        .filter(|d| {
            d.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("msmemscope_"))
        })
        .map(Path::to_path_buf)
}

fn walk(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return; // the dump walk reports an unreadable input
    };
    let mut entries: Vec<_> = rd.flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        // DirEntry::file_type does not follow symbolic links
        let Ok(ft) = e.file_type() else { continue };
        let p = e.path();
        if ft.is_dir() && depth < MAX_DEPTH && !memscope_dump::layout::is_window_run(&p) {
            walk(&p, depth + 1, out);
        } else if ft.is_file() && is_capture(&p) {
            out.push(p);
        }
    }
}

/// Whether `input` names a capture file (it then is no dump input).
pub fn is_capture_file(input: &Path) -> bool {
    is_capture(input) && input.is_file()
}

/// The captures of `input`: itself when it is a capture file, else every `*.mscap` below it
/// (symbolic links not followed, at most [`MAX_DEPTH`] levels), sorted.
///
/// # Errors
/// A capture that cannot be read — one line naming it.
pub fn find(input: &Path) -> Result<Vec<Found>, String> {
    let mut paths = Vec::new();
    if is_capture_file(input) {
        paths.push(input.to_path_buf());
    } else if input.is_dir() {
        walk(input, 0, &mut paths);
    }
    let mut found = Vec::new();
    for p in paths {
        let dir = process_dir(&p);
        let events = Arc::new(CaptureEvents::open(&p)?);
        // a capture given by name is read whatever state it is in
        let incomplete = input != p && capture_process(&p).is_ok_and(|c| !c.complete);
        if incomplete && dir.as_deref().is_some_and(has_dumps) {
            eprintln!(
                "memscope: warning: {}: incomplete capture (cut short, damaged or still being written); its process is read from its dump files (events the dumps lack, such as HOST events without --host-rows, are left out; memscope recover rebuilds a killed run)",
                p.display()
            );
            continue;
        }
        found.push(Found { dir, events });
    }
    Ok(found)
}

/// Whether process directory `dir` holds dump files (`<device>/dump/memscope_dump_*`).
pub fn has_dumps(dir: &Path) -> bool {
    let names = |d: &Path| -> Vec<PathBuf> {
        std::fs::read_dir(d)
            .map(|rd| rd.flatten().map(|e| e.path()).collect())
            .unwrap_or_default()
    };
    names(dir).iter().any(|dev| {
        names(&dev.join("dump")).iter().any(|f| {
            f.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("memscope_dump_"))
        })
    })
}
