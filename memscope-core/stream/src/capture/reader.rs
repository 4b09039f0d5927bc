//! Reads a capture back, block by block (one decompressed block in memory at a time), giving
//! its records in emission order. Every length is checked before it is used: a damaged or
//! foreign file gives a [`CaptureError`], never a panic or an unbounded allocation.

use super::block::Block;
use super::{
    BlockIndex, CaptureEnd, CaptureInfo, ImageHeader, BLOCK_HEADER, BLOCK_MAGIC, FOOTER_MAGIC,
    MAGIC, MAX_BLOCK, MAX_JSON, TRAILER_MAGIC, VERSION,
};
use memscope_wire::Record;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// Why a capture could not be read.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    /// I/O failure.
    #[error("{path}: {source}")]
    Io {
        /// The capture.
        path: String,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// Not a capture, another version, or damaged.
    #[error("{path}: {reason}")]
    Format {
        /// The capture.
        path: String,
        /// What is wrong, at which offset.
        reason: String,
    },
}

/// One record of a capture.
#[derive(Clone, Debug, PartialEq)]
pub struct CapturedRecord {
    /// Process image (stream index within the pid, from 0).
    pub image: usize,
    /// Writer thread.
    pub tid: u32,
    /// The record.
    pub rec: Record<Box<[u8]>>,
}

/// Reads one capture file.
pub struct CaptureReader {
    path: PathBuf,
    file: File,
    info: CaptureInfo,
    /// Format version of the file (`super::legacy::OLDEST..=VERSION`).
    version: u32,
    end: Option<CaptureEnd>,
    images: Vec<(usize, ImageHeader)>,
    next_offset: u64,
    data_end: u64,
    block: Option<Block>,
    /// File offset of `block`.
    block_at: u64,
    dctx: zstd::bulk::Decompressor<'static>,
    /// A damaged block ended the read early (a capture without trailer ends at a torn block).
    pub truncated: Option<String>,
}

impl CaptureReader {
    /// Opens a capture and reads its header (and trailer, if it has one).
    ///
    /// # Errors
    /// Not a capture, another version, a damaged header or trailer, or I/O.
    pub fn open(path: &Path) -> Result<CaptureReader, CaptureError> {
        let io = |e| CaptureError::Io {
            path: path.display().to_string(),
            source: e,
        };
        let fmt = |reason: String| CaptureError::Format {
            path: path.display().to_string(),
            reason,
        };
        let mut file = File::open(path).map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        let mut head = [0u8; 16];
        if len < 16 || file.read_exact(&mut head).is_err() || head[..8] != MAGIC {
            return Err(fmt("not a memscope capture (no MSCAPTUR header)".into()));
        }
        let version = u32::from_le_bytes(head[8..12].try_into().expect("4"));
        if !(super::legacy::OLDEST..=VERSION).contains(&version) {
            return Err(fmt(format!(
                "capture format {version} not supported (this memscope reads formats {}-{VERSION})",
                super::legacy::OLDEST
            )));
        }
        let json_len = u32::from_le_bytes(head[12..16].try_into().expect("4")) as u64;
        if json_len as usize > MAX_JSON || 16 + json_len > len {
            return Err(fmt("header length past the end of the file".into()));
        }
        let mut json = vec![0u8; json_len as usize];
        file.read_exact(&mut json).map_err(io)?;
        let info: CaptureInfo =
            serde_json::from_slice(&json).map_err(|e| fmt(format!("header: {e}")))?;
        let mut r = CaptureReader {
            path: path.to_path_buf(),
            file,
            info,
            version,
            end: None,
            images: Vec::new(),
            next_offset: 16 + json_len,
            data_end: len,
            block: None,
            block_at: 0,
            dctx: zstd::bulk::Decompressor::new().map_err(io)?,
            truncated: None,
        };
        r.read_trailer(len)?;
        Ok(r)
    }

    fn read_trailer(&mut self, len: u64) -> Result<(), CaptureError> {
        if len < self.next_offset + 16 {
            return Ok(());
        }
        let mut foot = [0u8; 16];
        self.read_at(len - 16, &mut foot)?;
        if foot[8..] != FOOTER_MAGIC {
            return Ok(());
        }
        let at = u64::from_le_bytes(foot[..8].try_into().expect("8"));
        if at < self.next_offset || at + 8 > len - 16 {
            return Err(self.fmt(format!("trailer offset {at} out of range")));
        }
        let mut th = [0u8; 8];
        self.read_at(at, &mut th)?;
        let json_len = u32::from_le_bytes(th[4..8].try_into().expect("4")) as u64;
        if th[..4] != TRAILER_MAGIC || json_len as usize > MAX_JSON || at + 8 + json_len > len - 16
        {
            return Err(self.fmt(format!("damaged trailer at offset {at}")));
        }
        let mut json = vec![0u8; json_len as usize];
        self.read_at(at + 8, &mut json)?;
        let end: CaptureEnd = serde_json::from_slice(&json)
            .map_err(|e| self.fmt(format!("trailer at offset {at}: {e}")))?;
        self.end = Some(end);
        self.data_end = at;
        Ok(())
    }

    fn fmt(&self, reason: String) -> CaptureError {
        CaptureError::Format {
            path: self.path.display().to_string(),
            reason,
        }
    }

    fn read_at(&mut self, at: u64, buf: &mut [u8]) -> Result<(), CaptureError> {
        let r = self
            .file
            .seek(SeekFrom::Start(at))
            .and_then(|_| self.file.read_exact(buf));
        r.map_err(|e| CaptureError::Io {
            path: self.path.display().to_string(),
            source: e,
        })
    }

    /// Path of the capture.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The header.
    pub fn info(&self) -> &CaptureInfo {
        &self.info
    }

    /// The trailer, if the capture is complete (its writer finished).
    pub fn end(&self) -> Option<&CaptureEnd> {
        self.end.as_ref()
    }

    /// The block index (complete captures only).
    pub fn index(&self) -> &[BlockIndex] {
        self.end.as_ref().map_or(&[], |e| &e.blocks)
    }

    /// Header of image `image`, once a block naming it was read.
    pub fn image_header(&self, image: usize) -> Option<&ImageHeader> {
        self.images
            .iter()
            .find(|(i, _)| *i == image)
            .map(|(_, h)| h)
    }

    /// Loads the next block. `Ok(false)`: no more blocks.
    fn load_block(&mut self) -> Result<bool, CaptureError> {
        let at = self.next_offset;
        if at + BLOCK_HEADER as u64 > self.data_end {
            if at < self.data_end && self.end.is_none() {
                self.truncated = Some(format!("incomplete block at offset {at}"));
            }
            return Ok(false);
        }
        let mut h = [0u8; BLOCK_HEADER];
        self.read_at(at, &mut h)?;
        let comp_len = u32::from_le_bytes(h[4..8].try_into().expect("4")) as u64;
        let raw_len = u32::from_le_bytes(h[8..12].try_into().expect("4")) as usize;
        let records = u32::from_le_bytes(h[12..16].try_into().expect("4"));
        if h[..4] != BLOCK_MAGIC {
            return self.damaged(at, "no block magic");
        }
        if comp_len as usize > MAX_BLOCK || raw_len > MAX_BLOCK {
            return self.damaged(at, "block larger than 64 MiB");
        }
        if at + BLOCK_HEADER as u64 + comp_len > self.data_end {
            return self.damaged(at, "block runs past the end of the file");
        }
        let mut comp = vec![0u8; comp_len as usize];
        self.read_at(at + BLOCK_HEADER as u64, &mut comp)?;
        let raw = match self.dctx.decompress(&comp, raw_len) {
            Ok(r) if r.len() == raw_len => r,
            _ => return self.damaged(at, "block does not decompress"),
        };
        let Some(block) = Block::parse(raw, records, &mut self.images, self.version) else {
            return self.damaged(at, "block contents malformed");
        };
        self.next_offset = at + BLOCK_HEADER as u64 + comp_len;
        self.block = Some(block);
        self.block_at = at;
        Ok(true)
    }

    fn damaged(&mut self, at: u64, why: &str) -> Result<bool, CaptureError> {
        let msg = format!("{why} (block at offset {at})");
        if self.end.is_some() {
            return Err(self.fmt(msg));
        }
        self.truncated = Some(msg);
        self.next_offset = self.data_end;
        Ok(false)
    }

    /// The next record, or `None` at the end. A damaged block of a capture without trailer
    /// ends the read (see [`CaptureReader::truncated`]).
    ///
    /// # Errors
    /// I/O failure, or damage inside a complete capture.
    pub fn next_record(&mut self) -> Result<Option<CapturedRecord>, CaptureError> {
        loop {
            if let Some(b) = &mut self.block {
                match b.next() {
                    Ok(Some((image, tid, rec))) => {
                        return Ok(Some(CapturedRecord { image, tid, rec }));
                    }
                    Ok(None) => self.block = None,
                    Err(()) => {
                        let msg =
                            format!("record does not decode (block at offset {})", self.block_at);
                        self.block = None;
                        if self.end.is_some() {
                            return Err(self.fmt(msg));
                        }
                        self.truncated = Some(msg);
                        self.next_offset = self.data_end;
                        return Ok(None);
                    }
                }
                continue;
            }
            if !self.load_block()? {
                return Ok(None);
            }
        }
    }
}
