//! Stopping the stream when it cannot grow without hurting the program: the reason goes into
//! the header (`FH_STOP_REASON`, `FH_STOP_ERRNO`, for the collector and `memscope recover`),
//! one line goes to stderr naming the limit and the file, and every later event of the process
//! image is counted as dropped (per kind). Whatever was committed before stays readable.

use crate::stream;
use crate::sys::{push_strerror, stderr_parts, TextBuf};
use core::fmt::Write;
use memscope_wire::{
    CHUNK_SIZE, FH_STOP_ERRNO, FH_STOP_REASON, ORPHAN_CHUNKS, STOP_COLLECTOR_GONE, STOP_FD_CLOSED,
    STOP_FILE_SIZE_LIMIT, STOP_MAP_FAILED, STOP_NO_SPACE,
};

/// Why recording stops.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Stop {
    /// The next chunk would pass `RLIMIT_FSIZE` (bytes).
    FileSizeLimit(u64),
    /// Reserving the next chunk failed with this error (`ENOSPC`, `EDQUOT`, `EIO`, …).
    NoSpace(i32),
    /// The collector is gone and the orphan chunks are used up.
    CollectorGone,
    /// The program closed or replaced the stream's descriptor.
    FdClosed,
    /// Mapping the next chunk failed with this error.
    MapFailed(i32),
}

impl Stop {
    fn code(self) -> (u32, i32) {
        match self {
            Stop::FileSizeLimit(_) => (STOP_FILE_SIZE_LIMIT, libc::EFBIG),
            Stop::NoSpace(e) => (STOP_NO_SPACE, e),
            Stop::CollectorGone => (STOP_COLLECTOR_GONE, 0),
            Stop::FdClosed => (STOP_FD_CLOSED, 0),
            Stop::MapFailed(e) => (STOP_MAP_FAILED, e),
        }
    }
}

/// Stops recording for this process image (once; later calls do nothing).
pub(crate) fn stop(why: Stop) {
    if !stream::stop_recording() {
        return;
    }
    let (code, err) = why.code();
    let h = stream::header();
    if !h.is_null() {
        // SAFETY: the header is mapped (HEADER non-null); both fields are inside it.
        unsafe {
            stream::put_u32(h, FH_STOP_ERRNO, err as u32);
            stream::put_u32(h, FH_STOP_REASON, code);
        }
    }
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() };
    let mut head = TextBuf::<64>::new();
    let _ = write!(head, "memscope: recording stops in pid {pid}: ");
    let mut what = TextBuf::<200>::new();
    match why {
        Stop::FileSizeLimit(limit) => {
            let _ = write!(
                what,
                "the next {} KiB of the stream file would pass the file size limit \
                 (RLIMIT_FSIZE, ulimit -f) of {limit} bytes",
                CHUNK_SIZE / 1024
            );
        }
        Stop::NoSpace(e) => {
            let _ = write!(what, "cannot reserve space in the stream file (");
            push_strerror(&mut what, e);
            what.push_bytes(b")");
        }
        Stop::CollectorGone => {
            let _ = write!(
                what,
                "the collector is gone (no more than {ORPHAN_CHUNKS} chunks are written after it)"
            );
        }
        Stop::FdClosed => {
            what.push_bytes(b"the program closed the stream file's descriptor");
        }
        Stop::MapFailed(e) => {
            let _ = write!(what, "cannot map the stream file (");
            push_strerror(&mut what, e);
            what.push_bytes(b")");
        }
    }
    stderr_parts(&[
        head.as_bytes(),
        what.as_bytes(),
        b"; file ",
        stream::path(),
        b"; later events are counted as dropped\n",
    ]);
}
