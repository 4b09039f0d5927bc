//! What the views say about a flight-recorder window (`memscope run --keep`, issue 38): a run
//! directory, process directory or dump that holds the last stretch of a job, not all of it.
//! The CLI prints these lines.

use crate::flight_recorder::{window_of, WindowFacts, WINDOW_FILE};
use std::path::{Path, PathBuf};

/// The process directories at or around `path` that hold a window: the directory a dump
/// file sits in (up to three levels up: `device_N/dump/`), the directory itself, or the
/// process directories right under a run directory.
pub fn windows(path: &Path) -> Vec<(PathBuf, WindowFacts)> {
    if path.is_file() {
        return path
            .ancestors()
            .skip(1)
            .take(3)
            .find_map(|d| window_of(d).map(|f| (d.to_path_buf(), f)))
            .into_iter()
            .collect();
    }
    if let Some(f) = window_of(path) {
        return vec![(path.to_path_buf(), f)];
    }
    let Ok(rd) = std::fs::read_dir(path) else {
        return Vec::new();
    };
    let mut v: Vec<(PathBuf, WindowFacts)> = rd
        .flatten()
        .map(|e| e.path())
        .filter(|d| d.join(WINDOW_FILE).is_file())
        .filter_map(|d| window_of(&d).map(|f| (d, f)))
        .collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

fn when(ns: u64) -> String {
    chrono::DateTime::from_timestamp_nanos(ns as i64)
        .with_timezone(&chrono::Local)
        .format("%H:%M:%S%.3f")
        .to_string()
}

/// The note of one window.
pub fn line(dir: &Path, f: &WindowFacts) -> String {
    format!(
        "memscope: note: {} holds a window of its process, not all of it (--keep {}, written at {}): {} row(s) from {} to {}, {} block(s) live before it as history rows (shadow:true), {} earlier row(s) not kept",
        dir.display(),
        f.keep,
        f.reason,
        f.rows,
        when(f.start_ns),
        when(f.end_ns),
        f.history_rows,
        f.earlier_rows
    )
}

/// A report title's note for the windows at or under `path` (` (window: --keep last:5m, …)`).
pub fn label_suffix(path: &Path) -> Option<String> {
    let w = windows(path);
    let (_, f) = w.first()?;
    let rows: u64 = w.iter().map(|(_, f)| f.rows).sum();
    Some(format!(
        " (window: --keep {}, written at {}; {rows} row(s) from {} on, {} process(es); earlier rows not kept)",
        f.keep,
        f.reason,
        when(f.start_ns),
        w.len()
    ))
}
