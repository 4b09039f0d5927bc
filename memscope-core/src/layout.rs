//! Output layout of msMemScope (behaviour spec §5.1), created with its permissions:
//!
//! ```text
//! <output>/msmemscope_<pid>_<YYYYmmddHHMMSS>_ascend/     one per process (0750)
//!   config.json
//!   msmemscope_logs/msmemscope_<ts>.log
//!   device_<n>/dump/memscope_dump_<ts>.csv | .db          one per device (files 0600)
//!   device_cpu/dump/memscope_dump_<ts>.csv                host events
//! ```
//! Nothing existing is ever overwritten: a name that is taken gets a `_<k>` suffix.

use std::fs::{DirBuilder, File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Default output directory (relative to the working directory).
pub const DEFAULT_OUTPUT: &str = "memscopeDumpResults";

/// Local time `YYYYmmddHHMMSS` of `ns` since the epoch, as msMemScope names its files.
pub fn timestamp_name(ns: u64) -> String {
    let secs = (ns / 1_000_000_000) as i64;
    match chrono::DateTime::from_timestamp(secs, 0) {
        Some(t) => t
            .with_timezone(&chrono::Local)
            .format("%Y%m%d%H%M%S")
            .to_string(),
        None => "19700101000000".to_owned(),
    }
}

/// Current time as ns since the epoch.
pub fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Creates `path` and its parents with mode 0750 (existing directories are left alone).
///
/// # Errors
/// The I/O error, for the caller to name the path.
pub fn create_dir_0750(path: &Path) -> io::Result<()> {
    DirBuilder::new().recursive(true).mode(0o750).create(path)
}

/// Creates a new file with mode 0600 at `path`, or at `stem_<k>.ext` when `path` exists.
/// Returns the file and the path used.
///
/// # Errors
/// The I/O error of the last attempt.
pub fn create_new_0600(path: &Path) -> io::Result<(File, PathBuf)> {
    let mut candidate = path.to_path_buf();
    for k in 1..10_000 {
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&candidate)
        {
            Ok(f) => return Ok((f, candidate)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("file");
                let name = match path.extension().and_then(|s| s.to_str()) {
                    Some(ext) => format!("{stem}_{k}.{ext}"),
                    None => format!("{stem}_{k}"),
                };
                candidate = path.with_file_name(name);
            }
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        "no free file name",
    ))
}

/// `<output>/msmemscope_<pid>_<ts>_ascend`.
pub fn project_dir(output: &Path, pid: u32, ts: &str) -> PathBuf {
    output.join(format!("msmemscope_{pid}_{ts}_ascend"))
}

/// `<project>/<device dir>/dump/memscope_dump_<ts>.<ext>`.
pub fn dump_path(project: &Path, device_dir: &str, ts: &str, ext: &str) -> PathBuf {
    project
        .join(device_dir)
        .join("dump")
        .join(format!("memscope_dump_{ts}.{ext}"))
}

/// `<project>/msmemscope_logs/msmemscope_<ts>.log`.
pub fn log_path(project: &Path, ts: &str) -> PathBuf {
    project
        .join("msmemscope_logs")
        .join(format!("msmemscope_{ts}.log"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn files_are_0600_dirs_0750_and_never_overwritten() {
        let d = tempfile::tempdir().unwrap();
        let sub = d.path().join("a/b");
        create_dir_0750(&sub).unwrap();
        assert_eq!(
            std::fs::metadata(&sub).unwrap().permissions().mode() & 0o777,
            0o750
        );
        let p = sub.join("x.csv");
        let (_, p1) = create_new_0600(&p).unwrap();
        let (_, p2) = create_new_0600(&p).unwrap();
        assert_eq!(p1, p);
        assert_eq!(p2, sub.join("x_1.csv"));
        assert_eq!(
            std::fs::metadata(&p1).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }

    #[test]
    fn names_follow_msmemscope_layout() {
        let p = project_dir(Path::new("/o"), 42, "20250101000000");
        assert_eq!(p, Path::new("/o/msmemscope_42_20250101000000_ascend"));
        assert_eq!(
            dump_path(&p, "device_0", "t", "csv"),
            Path::new("/o/msmemscope_42_20250101000000_ascend/device_0/dump/memscope_dump_t.csv")
        );
        assert_eq!(timestamp_name(0).len(), 14);
    }
}
