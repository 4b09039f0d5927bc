//! The per-process log `msmemscope_logs/msmemscope_<ts>.log`: lines
//! `YYYY-mm-dd HH:MM:SS [LEVEL] message` (behaviour spec §5.4), filtered by `--log-level`.

use memscope_core::config::LogLevel;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

/// A log file (or none, when it could not be created: logging never stops collection).
pub struct LogFile {
    file: Option<File>,
    path: PathBuf,
    level: LogLevel,
}

impl LogFile {
    /// Creates the log at `path` (mode 0600, parents 0750).
    pub fn create(path: &Path, level: LogLevel) -> LogFile {
        let file = path
            .parent()
            .map(memscope_core::layout::create_dir_0750)
            .transpose()
            .ok()
            .and_then(|_| memscope_core::layout::create_new_0600(path).ok())
            .map(|(f, _)| f);
        LogFile { file, path: path.to_path_buf(), level }
    }

    /// Path of the log.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn line(&mut self, level: LogLevel, tag: &str, msg: &str) {
        if level < self.level {
            return;
        }
        if let Some(f) = &mut self.file {
            let now = chrono::Local::now().format("%Y-%m-%d %H:%M:%S");
            let _ = writeln!(f, "{now} {tag} {msg}");
        }
    }

    /// Debug line.
    pub fn debug(&mut self, msg: &str) {
        self.line(LogLevel::Debug, "[DEBUG]", msg);
    }
    /// Info line.
    pub fn info(&mut self, msg: &str) {
        self.line(LogLevel::Info, "[INFO] ", msg);
    }
    /// Warning line.
    pub fn warn(&mut self, msg: &str) {
        self.line(LogLevel::Warning, "[WARN] ", msg);
    }
    /// Error line.
    pub fn error(&mut self, msg: &str) {
        self.line(LogLevel::Error, "[ERROR]", msg);
    }
}
