//! memscope-wire: the per-process event stream, the one thing the traced process and the
//! collector share — file layout, records, the allocation-free codec, the sources' ids and
//! selection bits ([`SourceId`]), the `Event` kinds ([`EventKind`]) and the environment
//! protocol between the CLI and the probe ([`probe_env`]). The probe and its runtime build on
//! this crate alone; nothing here allocates on the encoding path.
//!
//! # The stream
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

#![forbid(unsafe_code)]

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
/// File header: why the probe stopped recording (`u32`, see `STOP_*`; 0 while it records).
/// Written once, before the probe's one-line warning; later events count as dropped.
pub const FH_STOP_REASON: usize = 56;
/// File header: the `errno` behind [`FH_STOP_REASON`] (`u32`; 0 when there is none).
pub const FH_STOP_ERRNO: usize = 60;
/// File header: dropped events per kind, [`DROP_KINDS`] `u64` counters (atomically updated).
/// Counter `i` counts drops of `EventKind::ALL[i]`; the last one ([`DROP_KIND_UNKNOWN`]) counts
/// events whose kind the probe could not tell (a hook that gave up waiting for another thread's
/// init), the one before it ([`DROP_KIND_PYTHON_TRACE`]) records of the Python tracer (calls,
/// returns, frames: python_trace rows). Their sum is [`FH_DROPPED`]; records that are not events
/// (`Thread`, `TextDef`, `StackDef`, `Module`, `PyCodeDef`, owner, device and registration
/// state) are never counted.
pub const FH_DROPPED_KINDS: usize = 64;
/// Number of per-kind drop counters at [`FH_DROPPED_KINDS`].
pub const DROP_KINDS: usize = 16;
/// Index of the "kind unknown" counter.
pub const DROP_KIND_UNKNOWN: usize = DROP_KINDS - 1;
/// Index of the counter of Python tracer records (`PyCall`, `PyReturn`, `PyTrace`: rows of the
/// python_trace files, which are not events of the dump).
pub const DROP_KIND_PYTHON_TRACE: usize = DROP_KINDS - 2;
/// [`FH_STOP_REASON`]: the next chunk would have passed `RLIMIT_FSIZE` (`ulimit -f`).
pub const STOP_FILE_SIZE_LIMIT: u32 = 1;
/// [`FH_STOP_REASON`]: reserving the next chunk failed (`ENOSPC`, `EDQUOT`, `EIO`, …; the code
/// is in [`FH_STOP_ERRNO`]).
pub const STOP_NO_SPACE: u32 = 2;
/// [`FH_STOP_REASON`]: the collector is gone (its `collector.lock` can be locked) and the probe
/// wrote the bounded number of chunks it allows itself after that ([`ORPHAN_CHUNKS`]).
pub const STOP_COLLECTOR_GONE: u32 = 3;
/// [`FH_STOP_REASON`]: the program closed (or replaced) the stream file's descriptor.
pub const STOP_FD_CLOSED: u32 = 4;
/// [`FH_STOP_REASON`]: mapping a chunk failed (address space or `vm.max_map_count` exhausted).
pub const STOP_MAP_FAILED: u32 = 5;
/// Chunks a process may still take after it noticed that its collector is gone (bounds a
/// spool nobody reads: 8 × 256 KiB = 2 MiB per process image, about 300 000 host events).
pub const ORPHAN_CHUNKS: u32 = 8;
/// Name of the collector's lock file in the spool (contract: the collector holds
/// `flock(LOCK_EX)` on it for its whole life; the probe try-locks it `LOCK_SH` to learn whether
/// the collector is still alive).
pub const COLLECTOR_LOCK: &str = "collector.lock";
/// File header: NUL-padded executable path, up to [`FH_EXE_LEN`] bytes.
pub const FH_EXE: usize = 256;
/// Room for the executable path.
pub const FH_EXE_LEN: usize = 1024;
/// File header: the status the process passed to `exit` (`i32`, written by the probe's
/// `on_exit` handler before it sets [`FLAG_EXITED`]; meaningless without that flag).
pub const FH_EXIT_STATUS: usize = 192;
/// File header: the process's own rank environment, read from `environ` when the probe
/// started (issue 18): `NAME=value` entries, each NUL-terminated, for the names of
/// [`RANK_ENV_NAMES`] only, up to [`FH_RANK_ENV_LEN`] bytes; a value is cut at
/// [`RANK_ENV_VALUE_MAX`] bytes. All zero when the process had none of them (or an older probe
/// wrote the stream).
pub const FH_RANK_ENV: usize = FH_EXE + FH_EXE_LEN;
/// Room for [`FH_RANK_ENV`].
pub const FH_RANK_ENV_LEN: usize = 1024;
/// Longest value kept in [`FH_RANK_ENV`], bytes.
pub const RANK_ENV_VALUE_MAX: usize = 96;
/// The environment variables the probe records in [`FH_RANK_ENV`]: the device mapping and
/// the rank identity of torchrun/torch_npu, Open MPI, PMI/Slurm and MindSpore launchers.
pub const RANK_ENV_NAMES: [&str; 16] = [
    "ASCEND_RT_VISIBLE_DEVICES",
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "PMI_RANK",
    "PMI_SIZE",
    "SLURM_PROCID",
    "SLURM_LOCALID",
    "SLURM_NTASKS",
    "MS_NODE_ID",
    "RANK_ID",
    "RANK_SIZE",
];

/// Whether an `environ` entry (`NAME=value`) is one of [`RANK_ENV_NAMES`]; allocation-free.
pub fn is_rank_env(entry: &[u8]) -> bool {
    let Some(eq) = entry.iter().position(|&b| b == b'=') else {
        return false;
    };
    RANK_ENV_NAMES.iter().any(|n| n.as_bytes() == &entry[..eq])
}

/// Decodes [`FH_RANK_ENV`] (the field's bytes) into `(name, value)` pairs, in the order the
/// probe found them; entries of names outside [`RANK_ENV_NAMES`] are left out.
pub fn parse_rank_env(field: &[u8]) -> Vec<(String, String)> {
    field
        .split(|&b| b == 0)
        .filter(|e| !e.is_empty() && is_rank_env(e))
        .filter_map(|e| {
            let t = std::str::from_utf8(e).ok()?;
            let (k, v) = t.split_once('=')?;
            Some((k.to_owned(), v.to_owned()))
        })
        .collect()
}

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

/// A framework pool that reports through msTX memory domains (abi.md §1.6), as the adapter
/// that owns it declares it (its `MSTX_POOLS`). The probe's registration list hands every
/// declaration to the msTX hooks, which record the heap and region calls of these domains when
/// `source` is selected; the pool adapter's typer turns them into rows of `event_type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MstxPool {
    /// Pool number: the `pool` field of the heap and region records. Part of the stream and
    /// capture formats, so a number once given never changes; numbers are unique over all
    /// adapters and never 0.
    pub pool: u8,
    /// The msTX domain names the pool reports on.
    pub domains: &'static [&'static str],
    /// The adapter that owns the pool: its selection turns the recording on.
    pub source: SourceId,
    /// Event Type of the pool's rows, and the framework level of their owner chain.
    pub event_type: &'static str,
}

impl MstxPool {
    /// The pool of `pools` that reports on domain `name`.
    pub fn for_domain<'p>(pools: &[&'p [MstxPool]], name: &[u8]) -> Option<&'p MstxPool> {
        pools
            .iter()
            .flat_map(|p| p.iter())
            .find(|p| p.domains.iter().any(|d| d.as_bytes() == name))
    }

    /// The pool of `pools` numbered `pool`.
    pub fn by_number<'p>(pools: &[&'p [MstxPool]], pool: u8) -> Option<&'p MstxPool> {
        pools.iter().flat_map(|p| p.iter()).find(|p| p.pool == pool)
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
    /// A flush request (`memscope_py_barrier`, the Python API's `stop()`): not a row. Its
    /// `device` field carries the request's number in the process (1, 2, …); the collector
    /// answers once it has written everything emitted before it (`<spool>/barrier.<pid>.done`).
    Barrier = 6,
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
            SystemCode::Barrier,
        ]
        .into_iter()
        .find(|c| *c as u8 == v)
    }
}

/// Reads the drop counters of a stream file header (its first [`FH_DROPPED_KINDS`] +
/// 8 × [`DROP_KINDS`] bytes or more): `(FH_DROPPED, per-kind table)`. `None` when `header` is
/// too short. Counter `i` of the table counts `EventKind::ALL[i]`, the last one
/// ([`DROP_KIND_UNKNOWN`]) events of unknown kind.
pub fn header_drops(header: &[u8]) -> Option<(u64, [u64; DROP_KINDS])> {
    let u64_at = |o: usize| -> Option<u64> {
        Some(u64::from_le_bytes(header.get(o..o + 8)?.try_into().ok()?))
    };
    let mut kinds = [0u64; DROP_KINDS];
    for (i, k) in kinds.iter_mut().enumerate() {
        *k = u64_at(FH_DROPPED_KINDS + 8 * i)?;
    }
    Some((u64_at(FH_DROPPED)?, kinds))
}

mod codec;
mod compact;
mod decode;
mod dims;
mod encode;
mod fast;
mod fields;
mod owned;
mod python;
mod python_ctx;
mod record;
mod record_meta;
mod sample;
pub mod source;

pub use source::{envelope, owned_envelope, Field, OptU32, SourceRecord};

pub(crate) use codec::tag;
pub use codec::{encode_frames, ChunkState, StackFrames, WireError};
pub use codec::{put_var, unzigzag, zigzag};
pub use codec::{In, Out};
pub use compact::{decode_values, encode_values};
pub use decode::{decode, decode_host, HostRecord};
pub use dims::{decode_dims, encode_dims, MAX_DIMS};
pub use fields::{AccessKind, PyCodeKind, PyTraceEvent};
pub use python::snapshot_known;
pub use record::Record;
pub use record_meta::drop_slot_of;

mod event_kind;
pub mod probe_env;
mod source_id;
pub mod watch;

pub use event_kind::EventKind;
pub use source_id::SourceId;

#[cfg(test)]
mod tests;
