//! Reading the spool: the per-process stream files the probe writes (format:
//! [`memscope_wire`]), followed live or after the fact, and merged per process in time order with
//! bounded memory (the files are the buffer: nothing is read further ahead than one small
//! window per chunk).

mod merge;
mod stream;

pub use merge::{Merged, ProcessMerge};
pub use stream::{parse_header, Sourced, StreamFile, StreamHeader, WINDOW};

/// Name of the lock file a collector holds (`flock(LOCK_EX)`) for its whole life in the spool
/// directory (TEAM contract 1): the probe and `memscope recover` tell a live collector from a
/// dead one by it.
pub const COLLECTOR_LOCK: &str = "collector.lock";

/// Name of the file in the spool that records the run's configuration for `memscope recover`.
pub const RUN_INFO: &str = "run.json";

/// Prefix of spool directory names under the output path (`.memscope_spool_<collector pid>`).
pub const SPOOL_PREFIX: &str = ".memscope_spool_";

/// Pid from a stream file name `<pid>-<ns>.stream`.
pub fn pid_of_stream_name(name: &str) -> Option<u32> {
    name.strip_suffix(".stream")?
        .split('-')
        .next()?
        .parse()
        .ok()
}
