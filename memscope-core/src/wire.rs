//! The per-process event stream: file layout and record codec.
//!
//! One stream file per traced process image (`<spool>/<pid>-<start_ns>.stream`). The probe maps
//! it `MAP_SHARED` in chunks, appends records and publishes a committed length after each one
//! with a release store, so a record is either wholly visible to the collector or not at all and
//! nothing committed is lost when the process is killed (design notes §2, memray's approach).
//!
//! ```text
//! offset 0             file header (FILE_HEADER_SIZE bytes, fields at FH_* offsets)
//! FILE_HEADER_SIZE + i*CHUNK_SIZE   chunk i: header (CHUNK_HEADER_SIZE) + payload
//! ```
//! A chunk is written by one thread at a time; a `Thread` record names the writer at the start
//! of the chunk and whenever the chunk changes hands. Records are a 1-byte tag and LEB128
//! varints; timestamps are deltas from the previous record of the same chunk, addresses of
//! host-allocator records are zig-zag deltas, so a `malloc` record takes ~5–7 bytes.
//!
//! Everything here is allocation-free so the probe can use it inside allocator hooks.

/// First 8 bytes of a stream file.
pub const STREAM_MAGIC: [u8; 8] = *b"MSCOPEST";
/// Stream format version; a collector refuses other versions.
pub const STREAM_VERSION: u32 = 3;
/// Bytes of the file header.
pub const FILE_HEADER_SIZE: usize = 4096;
/// Bytes of one chunk, header included.
pub const CHUNK_SIZE: usize = 256 * 1024;
/// Bytes of a chunk header.
pub const CHUNK_HEADER_SIZE: usize = 64;
/// Payload bytes per chunk.
pub const CHUNK_PAYLOAD: usize = CHUNK_SIZE - CHUNK_HEADER_SIZE;
/// Magic of an initialised chunk header (`u32` at [`CH_MAGIC`]).
pub const CHUNK_MAGIC: u32 = u32::from_le_bytes(*b"MSCK");
/// Longest message or label the probe records, in bytes; longer ones are cut.
pub const MAX_TEXT: usize = 1024;
/// Longest encoded record: tag + a handful of varints + one text.
pub const MAX_RECORD: usize = MAX_TEXT + 128;

/// File header: magic (8 bytes).
pub const FH_MAGIC: usize = 0;
/// File header: format version (`u32`).
pub const FH_VERSION: usize = 8;
/// File header: chunk size (`u32`).
pub const FH_CHUNK_SIZE: usize = 12;
/// File header: pid of the process (`u32`).
pub const FH_PID: usize = 16;
/// File header: parent pid (`u32`).
pub const FH_PPID: usize = 20;
/// File header: start time, ns since the epoch (`u64`).
pub const FH_START_NS: usize = 24;
/// File header: events the probe could not record (`u64`, atomically updated).
pub const FH_DROPPED: usize = 32;
/// File header: flags (`u32`, atomically updated), see `FLAG_*`.
pub const FH_FLAGS: usize = 40;
/// File header: offset of the monotonic clock to the epoch clock, ns (`i64`).
pub const FH_CLOCK_OFFSET: usize = 48;
/// File header: NUL-padded executable path, up to [`FH_EXE_LEN`] bytes.
pub const FH_EXE: usize = 256;
/// Room for the executable path.
pub const FH_EXE_LEN: usize = 1024;
/// Flag: the process ended through `exit`/`_exit` (the probe saw it).
pub const FLAG_EXITED: u32 = 1;
/// Flag: host tracing was requested but is unavailable (static binary, foreign allocator).
pub const FLAG_HOST_UNAVAILABLE: u32 = 2;

/// Chunk header: [`CHUNK_MAGIC`] (`u32`).
pub const CH_MAGIC: usize = 0;
/// Chunk header: committed payload bytes (`u32`, release-stored after each record).
pub const CH_COMMITTED: usize = 4;
/// Chunk header: 1 once the writer has moved to another chunk (`u32`).
pub const CH_SEALED: usize = 8;

/// Framework pools that report through msTX memory domains (abi.md §1.6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum PoolId {
    /// Domain `ptaCaching` (and its old name `msleaks`).
    PtaCaching = 1,
    /// Domain `ptaWorkspace`.
    PtaWorkspace = 2,
    /// Domain `mindsporeMemPool`.
    MindSpore = 3,
    /// Domain `atb`.
    Atb = 4,
}

impl PoolId {
    /// Every pool.
    pub const ALL: [PoolId; 4] = [
        PoolId::PtaCaching,
        PoolId::PtaWorkspace,
        PoolId::MindSpore,
        PoolId::Atb,
    ];

    /// The pool that owns an msTX domain name, if any.
    pub fn from_domain(name: &[u8]) -> Option<PoolId> {
        match name {
            b"ptaCaching" | b"msleaks" => Some(PoolId::PtaCaching),
            b"ptaWorkspace" => Some(PoolId::PtaWorkspace),
            b"mindsporeMemPool" => Some(PoolId::MindSpore),
            b"atb" => Some(PoolId::Atb),
            _ => None,
        }
    }

    /// Decodes the wire value.
    pub fn from_u8(v: u8) -> Option<PoolId> {
        PoolId::ALL.into_iter().find(|p| *p as u8 == v)
    }
}

/// Process-level events recorded by the probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum SystemCode {
    /// `aclInit` returned.
    AclInit = 1,
    /// `aclFinalize` was called.
    AclFini = 2,
    /// A collection window opened (`memscope_start`).
    StartTrace = 3,
    /// A collection window closed (`memscope_stop`).
    StopTrace = 4,
    /// Python-API `step()`.
    Step = 5,
}

impl SystemCode {
    /// Decodes the wire value.
    pub fn from_u8(v: u8) -> Option<SystemCode> {
        [
            SystemCode::AclInit,
            SystemCode::AclFini,
            SystemCode::StartTrace,
            SystemCode::StopTrace,
            SystemCode::Step,
        ]
        .into_iter()
        .find(|c| *c as u8 == v)
    }
}

mod cann;
mod codec;
mod encode;
mod owned;
mod python;
mod python_ctx;
mod record;

pub use cann::{decode_dims, encode_dims, AccessKind, MAX_DIMS};
pub use codec::{decode, encode_frames, ChunkState, StackFrames, WireError};
pub(crate) use codec::{tag, unzigzag, zigzag, In, Out};
pub use python::{snapshot_known, PyCodeKind, PyTraceEvent};
pub use record::Record;

#[cfg(test)]
mod tests;
