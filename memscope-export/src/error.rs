//! The exporters' error: one line naming the input or output at fault.

use memscope_dump::reader::ReadError;

/// Why an export failed.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// Reading an input failed (the reader's message names the file and line).
    #[error("{0}")]
    Read(#[from] ReadError),
    /// An input path is not something memscope can export.
    #[error("{path}: {msg}")]
    Input {
        /// The input as the user named it.
        path: String,
        /// What is wrong.
        msg: String,
    },
    /// Writing an output failed.
    #[error("cannot write {path}: {source}")]
    Write {
        /// File or directory.
        path: String,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// The output is not usable (exists already, wrong kind).
    #[error("{path}: {msg}")]
    Output {
        /// The output as the user named it.
        path: String,
        /// What is wrong.
        msg: String,
    },
    /// Anything else, already worded for the user.
    #[error("{0}")]
    Other(String),
}

impl ExportError {
    /// A write error on `path`.
    pub fn write(path: &std::path::Path, source: std::io::Error) -> ExportError {
        ExportError::Write {
            path: path.display().to_string(),
            source,
        }
    }

    /// A bad input.
    pub fn input(path: &std::path::Path, msg: impl Into<String>) -> ExportError {
        ExportError::Input {
            path: path.display().to_string(),
            msg: msg.into(),
        }
    }
}
