//! Output layout of msMemScope (behaviour spec §5.1), created with its permissions:
//!
//! ```text
//! <output>/msmemscope_<pid>_<YYYYmmddHHMMSS>_ascend/     one per process (0750)
//!   config.json
//!   msmemscope_logs/msmemscope_<ts>.log
//!   device_<n>/dump/memscope_dump_<ts>.csv | .db          one per device (files 0600)
//!   device_cpu/dump/memscope_dump_<ts>.csv                host events
//! ```
//! Nothing existing is ever overwritten: a name that is taken gets a `_<k>` suffix. No
//! symbolic link is followed where memscope writes ([`crate::safe_fs`]).

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use crate::safe_fs::{split_file, Dir, DIR_MODE, FILE_MODE};

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

/// The file a flight-recorder window (`memscope run --keep`) leaves in its process directory.
pub const WINDOW_FILE: &str = "memscope_window.json";

/// Whether `dir` is a window run of the flight recorder (`<output>/window_<ts>_<why>/`, its
/// process directories holding [`WINDOW_FILE`]): a run of its own, which a walk of the output
/// path leaves out (it would read the window's processes as more processes of the run).
pub fn is_window_run(dir: &Path) -> bool {
    dir.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("window_"))
        && std::fs::read_dir(dir)
            .is_ok_and(|rd| rd.flatten().any(|e| e.path().join(WINDOW_FILE).is_file()))
}

/// Creates `path` and its parents with mode 0750 (existing directories are left alone),
/// refusing a symbolic link in any component ([`crate::safe_fs`]).
///
/// # Errors
/// The I/O error; its text names the path (or the component of it) that failed.
pub fn create_dir_0750(path: &Path) -> io::Result<()> {
    Dir::create_all(path, DIR_MODE).map(drop)
}

/// Creates a new file with mode 0600 at `path`, or at `stem_<k>.ext` when `path` exists.
/// Returns the file and the path used. The directory is walked without following symbolic
/// links and the file is created `O_EXCL|O_NOFOLLOW` relative to it ([`crate::safe_fs`]).
///
/// # Errors
/// The I/O error of the last attempt.
pub fn create_new_0600(path: &Path) -> io::Result<(File, PathBuf)> {
    let (parent, name) = split_file(path)?;
    let dir = Dir::open(&parent)?;
    let p = Path::new(&name);
    let stem = p.file_stem().and_then(|s| s.to_str()).unwrap_or("file");
    let ext = p.extension().and_then(|s| s.to_str()).unwrap_or("");
    match dir.create_new(&name, FILE_MODE) {
        Ok(f) => Ok((f, path.to_path_buf())),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            let (f, used) = dir.create_unique(stem, ext, FILE_MODE)?;
            Ok((f, path.with_file_name(used.file_name().unwrap_or_default())))
        }
        Err(e) => Err(e),
    }
}

/// Longest tail memscope appends to the output path for a file it writes:
/// `/msmemscope_<pid>_<ts>_ascend/device_<n>/dump/memscope_dump_<ts>_<k>.db-journal`
/// with a 10-digit pid and device and a 4-digit `k` (the longest of the layout above;
/// analyses' files in the project directory are shorter).
pub const LONGEST_TAIL: usize =
    "/msmemscope_4294967295_20251201000000_ascend/device_4294967295/dump/memscope_dump_20251201000000_9999.db-journal".len();

/// Linux `PATH_MAX` (bytes, with the terminating NUL).
pub const PATH_MAX: usize = 4096;

/// `<output>/.memscope_spool_<pid>`: the directory `memscope run` gives the probe.
pub fn spool_dir(output: &Path, pid: u32) -> PathBuf {
    output.join(spool_name(pid))
}

/// `.memscope_spool_<pid>`.
pub fn spool_name(pid: u32) -> String {
    format!(".memscope_spool_{pid}")
}

/// Longest absolute output path `memscope run` can use: every file it writes below it stays
/// within `PATH_MAX`, and the probe accepts the spool below it
/// ([`memscope_wire::probe_env::SPOOL_MAX`]).
pub const MAX_OUTPUT_PATH: usize = {
    let files = PATH_MAX - 1 - LONGEST_TAIL;
    let spool = memscope_wire::probe_env::SPOOL_MAX - 1 - "/.memscope_spool_4294967295".len();
    if files < spool {
        files
    } else {
        spool
    }
};

/// Checks that the absolute output path `output` is at most [`MAX_OUTPUT_PATH`] bytes, so
/// nothing fails (and no process runs untraced) after the job is launched.
///
/// # Errors
/// A one-line message with the lengths.
pub fn check_output_len(output: &Path) -> Result<(), String> {
    let n = output.as_os_str().len();
    if n > MAX_OUTPUT_PATH {
        return Err(format!(
            "the absolute path is {n} bytes; at most {MAX_OUTPUT_PATH} fit (the spool and dump files below it must stay within the probe's and PATH_MAX's limits)"
        ));
    }
    Ok(())
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
