//! The reader's error: always names the file, and the line (CSV) or row (SQLite) when one is at
//! fault, in one line: `baseline.csv:17: bad Timestamp(ns) "abc"`.

use std::fmt;

/// Error returned by a consumer of events (an analysis); passed through unchanged.
pub type ConsumerError = Box<dyn std::error::Error + Send + Sync>;

/// Where in the input a problem is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Location {
    /// 1-based physical line where the CSV record starts.
    Line(u64),
    /// `rowid` of the SQLite row.
    Row(i64),
}

/// Why a dump could not be read.
#[derive(Debug)]
pub enum ReadError {
    /// Opening or reading the file failed.
    Io {
        /// The file as the user named it.
        file: String,
        /// Cause.
        source: std::io::Error,
    },
    /// The content is malformed.
    Parse {
        /// The file as the user named it.
        file: String,
        /// Record at fault, when there is one.
        at: Option<Location>,
        /// What is wrong, e.g. `bad Timestamp(ns) "abc"`.
        msg: String,
    },
    /// SQLite refused the file or a query.
    Sqlite {
        /// The file as the user named it.
        file: String,
        /// Cause.
        source: rusqlite::Error,
    },
    /// The consumer of the events failed (its message is kept as is).
    Consumer(ConsumerError),
}

impl ReadError {
    /// A parse error at `at`.
    pub fn parse(file: &str, at: Option<Location>, msg: impl Into<String>) -> ReadError {
        ReadError::Parse {
            file: file.to_owned(),
            at,
            msg: msg.into(),
        }
    }

    /// An I/O error on `file`.
    pub fn io(file: &str, source: std::io::Error) -> ReadError {
        ReadError::Io {
            file: file.to_owned(),
            source,
        }
    }
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Io { file, source } => write!(f, "{file}: {source}"),
            ReadError::Parse {
                file,
                at: Some(Location::Line(l)),
                msg,
            } => write!(f, "{file}:{l}: {msg}"),
            ReadError::Parse {
                file,
                at: Some(Location::Row(r)),
                msg,
            } => write!(f, "{file}: row {r}: {msg}"),
            ReadError::Parse {
                file,
                at: None,
                msg,
            } => write!(f, "{file}: {msg}"),
            ReadError::Sqlite { file, source } => write!(f, "{file}: {source}"),
            ReadError::Consumer(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ReadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ReadError::Io { source, .. } => Some(source),
            ReadError::Sqlite { source, .. } => Some(source),
            ReadError::Consumer(e) => Some(e.as_ref()),
            ReadError::Parse { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_print_file_and_line_on_one_line() {
        let e = ReadError::parse(
            "baseline.csv",
            Some(Location::Line(17)),
            "bad Timestamp(ns) \"abc\"",
        );
        assert_eq!(e.to_string(), "baseline.csv:17: bad Timestamp(ns) \"abc\"");
        let e = ReadError::parse("x.db", Some(Location::Row(3)), "bad ID");
        assert_eq!(e.to_string(), "x.db: row 3: bad ID");
    }
}
