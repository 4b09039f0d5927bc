//! The per-process log `msmemscope_logs/msmemscope_<ts>.log`: lines
//! `YYYY-mm-dd HH:MM:SS [LEVEL] message` (behaviour spec §5.4), filtered by `--log-level`.

use crate::config::LogLevel;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Lines kept before the log file exists.
const PENDING_CAP: usize = 1000;

/// A log file, created only when its process produces output (a job's helper processes that
/// record nothing leave no directory behind). Logging never stops collection: a log that cannot
/// be created is skipped.
pub struct LogFile {
    file: Option<File>,
    path: PathBuf,
    level: LogLevel,
    pending: Vec<String>,
}

impl LogFile {
    /// A log at `path`, not created yet.
    pub fn new(path: &Path, level: LogLevel) -> LogFile {
        LogFile {
            file: None,
            path: path.to_path_buf(),
            level,
            pending: Vec::new(),
        }
    }

    /// Takes over the lines `old` logged before any file existed, ahead of this log's own
    /// (`memscope.config()` moving a process's outputs before it wrote any; issue 27).
    pub fn adopt(&mut self, mut old: LogFile) {
        old.pending.append(&mut self.pending);
        self.pending = old.pending;
    }

    /// Appends one info line to the existing log at `path` (`memscope recover` saying, once
    /// the process is written again, where the killed run's own lines are).
    ///
    /// # Errors
    /// The log is missing or cannot be written.
    pub fn append_info(path: &Path, msg: &str) -> std::io::Result<()> {
        let now = chrono::Local::now().format("%Y-%m-%d %H:%M:%S");
        let msg = memscope_core::sanitize::escape_controls(msg);
        let mut f = std::fs::OpenOptions::new().append(true).open(path)?;
        f.write_all(format!("{now} [INFO]  {msg}\n").as_bytes())
    }

    /// Whether the file has been created.
    pub fn is_open(&self) -> bool {
        self.file.is_some()
    }

    /// Creates the file (mode 0600, parents 0750) and writes the lines logged so far.
    pub fn open(&mut self) {
        if self.file.is_some() {
            return;
        }
        self.file = self
            .path
            .parent()
            .map(memscope_dump::layout::create_dir_0750)
            .transpose()
            .ok()
            .and_then(|_| memscope_dump::layout::create_new_0600(&self.path).ok())
            .map(|(f, _)| f);
        if let Some(f) = &mut self.file {
            for l in self.pending.drain(..) {
                let _ = writeln!(f, "{l}");
            }
        }
    }

    fn line(&mut self, level: LogLevel, tag: &str, msg: &str) {
        if level < self.level {
            return;
        }
        let now = chrono::Local::now().format("%Y-%m-%d %H:%M:%S");
        // one line per message, with no terminal escapes from the job's text (issue 17, L3)
        let msg = memscope_core::sanitize::escape_controls(msg);
        match &mut self.file {
            // one write per line: lines stay whole in the file however the collector ends
            Some(f) => {
                let _ = f.write_all(format!("{now} {tag} {msg}\n").as_bytes());
            }
            None if self.pending.len() < PENDING_CAP => {
                self.pending.push(format!("{now} {tag} {msg}"))
            }
            None => {}
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

    /// Info lines, written with one system call (a report section of thousands of lines).
    pub fn info_lines<'a>(&mut self, msgs: impl IntoIterator<Item = &'a str>) {
        if LogLevel::Info < self.level {
            return;
        }
        let Some(f) = &mut self.file else {
            for m in msgs {
                self.info(m);
            }
            return;
        };
        let now = chrono::Local::now().format("%Y-%m-%d %H:%M:%S").to_string();
        let mut buf = String::new();
        for m in msgs {
            let m = memscope_core::sanitize::escape_controls(m);
            buf.push_str(&now);
            buf.push_str(" [INFO]  ");
            buf.push_str(&m);
            buf.push('\n');
        }
        let _ = f.write_all(buf.as_bytes());
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
