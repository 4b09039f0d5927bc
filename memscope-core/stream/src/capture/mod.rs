//! The capture: a process's records as the collector emitted them (in ID order), kept at rest
//! compressed — the primary artifact of a run, from which every view (CSV/SQLite dumps,
//! analyses, exports) can be made again (`memscope export`).
//!
//! ```text
//! file    = header block* [trailer footer]
//! header  = "MSCAPTUR" version:u32le json_len:u32le json(CaptureInfo)
//! block   = "MSCB" comp_len:u32le raw_len:u32le records:u32le first_ts:u64le last_ts:u64le
//!           zstd(raw)                               (BLOCK_HEADER bytes, then comp_len bytes)
//! raw     = n_images   (image pid ppid start_ns zigzag(clock_offset) exe)*
//!           n_sources  (image tid records col_len[NCOL])*
//!           n_deferred (position_delta source)*
//!           column 0 of every source, column 1 of every source, … (source order)
//! trailer = "MSCT" json_len:u32le json(CaptureEnd)
//! footer  = trailer_offset:u64le "MSCAPEND"
//! ```
//! All numbers in `raw` are LEB128 varints. A *source* is one thread of one process image;
//! its records are split into byte columns ([`columns`]: record codes, time-stamp deltas,
//! address deltas, sizes, stacks, frees as references to their allocation, other records in
//! the stream's own encoding), each with its own delta state (fresh per block), so zstd sees
//! like bytes together. The emission order is the merge of the sources by time stamp, with
//! the few records the collector emitted out of that order listed (deferred) with their
//! positions. Blocks are independent (the index in the trailer lets a reader start at any
//! block). A capture whose collector was killed has
//! no trailer: readers scan its blocks up to the first incomplete one.

mod block;
pub mod columns;
mod compress;
mod legacy;
mod reader;
mod writer;

pub use reader::{CaptureError, CaptureReader, CapturedRecord};
pub use writer::{AllocRef, CaptureStats, CaptureWriter};

use serde::{Deserialize, Serialize};

/// First 8 bytes of a capture file.
pub const MAGIC: [u8; 8] = *b"MSCAPTUR";
/// Capture format version (3: the CANN records travel in per-source envelopes; 4: compact
/// MALLOC/FREE events of registered types take the allocation columns. Formats 2 and 3 are
/// still read, see `legacy`).
pub const VERSION: u32 = 4;
/// Magic of a block header.
pub const BLOCK_MAGIC: [u8; 4] = *b"MSCB";
/// Magic of the trailer.
pub const TRAILER_MAGIC: [u8; 4] = *b"MSCT";
/// Last 8 bytes of a complete capture.
pub const FOOTER_MAGIC: [u8; 8] = *b"MSCAPEND";
/// Bytes of a block header.
pub const BLOCK_HEADER: usize = 32;
/// Uncompressed bytes after which the writer closes a block.
pub const BLOCK_RAW: usize = 2 << 20;
/// Largest block (compressed or not) a reader accepts.
pub const MAX_BLOCK: usize = 64 << 20;
/// Largest header or trailer JSON a reader accepts.
pub const MAX_JSON: usize = 16 << 20;
/// zstd level of the blocks.
pub const ZSTD_LEVEL: i32 = 3;
/// File name suffix of captures.
pub const EXTENSION: &str = "mscap";

/// Who the capture is of (the capture header).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CaptureInfo {
    /// Process id.
    pub pid: u32,
    /// Parent process id.
    pub ppid: u32,
    /// Executable of the first image.
    pub exe: String,
    /// Start of the first image, ns since the epoch.
    pub start_ns: u64,
    /// memscope version that wrote it.
    pub memscope: String,
    /// The run's configuration (config.json keys), so views are made as the run made them.
    pub config: serde_json::Value,
    /// `ASCEND_RT_VISIBLE_DEVICES` of the process (its own value when the probe recorded
    /// it, else the run's): logical index → physical id.
    pub visible_devices: Vec<u32>,
    /// The process's own rank environment (`RANK`, `LOCAL_RANK`, `WORLD_SIZE`, …; issue 18),
    /// `(name, value)` pairs as the probe recorded them; empty in older captures.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rank_env: Vec<(String, String)>,
}

/// One process image as the trailer describes it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ImageInfo {
    /// Stream file it was read from.
    pub stream: String,
    /// Executable.
    pub exe: String,
    /// Start, ns since the epoch.
    pub start_ns: u64,
    /// Events the probe could not record.
    pub dropped: u64,
    /// Stream header flags (`wire::FLAG_*`).
    pub flags: u32,
    /// Chunks that did not decode.
    pub corrupt_chunks: u64,
    /// The status the image passed to `exit` (the probe's `on_exit`), when it exited so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_status: Option<i32>,
}

/// Where a block is (the trailer's index).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockIndex {
    /// File offset of the block header.
    pub offset: u64,
    /// Records in the block.
    pub records: u32,
    /// Earliest time stamp in the block (0: none).
    pub first_ts: u64,
    /// Latest time stamp in the block.
    pub last_ts: u64,
}

/// What the trailer of a complete capture holds.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CaptureEnd {
    /// Records in the capture.
    pub records: u64,
    /// The process's images, in order.
    pub images: Vec<ImageInfo>,
    /// Every block, in file order.
    pub blocks: Vec<BlockIndex>,
}

/// Header fields of one image as a block carries them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ImageHeader {
    /// Process id.
    pub pid: u32,
    /// Parent pid.
    pub ppid: u32,
    /// Start, ns since the epoch.
    pub start_ns: u64,
    /// Monotonic-to-epoch offset of the probe's clock, ns.
    pub clock_offset: i64,
    /// Executable.
    pub exe: String,
}

#[cfg(test)]
mod tests;
