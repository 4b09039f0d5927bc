//! Writes a capture: records in emission order, grouped per source (chunk × thread) within a
//! block, each block zstd-compressed as it closes, the index in a trailer at the end.

use super::{
    put_var, BlockIndex, CaptureEnd, CaptureInfo, ImageHeader, BLOCK_MAGIC, BLOCK_RAW,
    FOOTER_MAGIC, MAGIC, TRAILER_MAGIC, VERSION, ZSTD_LEVEL,
};
use crate::wire::{zigzag, ChunkState, Record};
use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

struct Source {
    image: usize,
    tid: u32,
    state: ChunkState,
    bytes: Vec<u8>,
}

/// Figures of a finished capture.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CaptureStats {
    /// Records written.
    pub records: u64,
    /// Bytes of the file.
    pub bytes: u64,
    /// Uncompressed bytes of the blocks.
    pub raw_bytes: u64,
}

/// A capture being written.
pub struct CaptureWriter {
    file: File,
    path: PathBuf,
    offset: u64,
    images: HashMap<usize, ImageHeader>,
    sources: Vec<Source>,
    by_key: HashMap<(usize, u32, u32), u32>,
    /// The source of the previous record (most records continue the same source).
    last: Option<((usize, u32, u32), u32)>,
    runs: Vec<(u32, u32)>,
    raw_len: usize,
    block_records: u32,
    first_ts: u64,
    last_ts: u64,
    index: Vec<BlockIndex>,
    stats: CaptureStats,
    scratch: Vec<u8>,
    zstd: zstd::bulk::Compressor<'static>,
}

impl CaptureWriter {
    /// Starts a capture in `file` (already created, mode 0600) at `path`.
    ///
    /// # Errors
    /// Writing the header failed.
    pub fn new(file: File, path: PathBuf, info: &CaptureInfo) -> std::io::Result<CaptureWriter> {
        let json = serde_json::to_vec(info).map_err(std::io::Error::other)?;
        let mut head = Vec::with_capacity(16 + json.len());
        head.extend_from_slice(&MAGIC);
        head.extend_from_slice(&VERSION.to_le_bytes());
        head.extend_from_slice(&(json.len() as u32).to_le_bytes());
        head.extend_from_slice(&json);
        let mut file = file;
        file.write_all(&head)?;
        Ok(CaptureWriter {
            file,
            path,
            offset: head.len() as u64,
            images: HashMap::new(),
            sources: Vec::new(),
            by_key: HashMap::new(),
            last: None,
            runs: Vec::new(),
            raw_len: 0,
            block_records: 0,
            first_ts: 0,
            last_ts: 0,
            index: Vec::new(),
            stats: CaptureStats {
                bytes: head.len() as u64,
                ..CaptureStats::default()
            },
            scratch: Vec::new(),
            zstd: zstd::bulk::Compressor::new(ZSTD_LEVEL)?,
        })
    }

    /// Path of the capture.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Records written so far (closed blocks and the open one).
    pub fn records(&self) -> u64 {
        self.stats.records
    }

    /// Declares image `image`'s header (needed before its first record).
    pub fn set_image(&mut self, image: usize, h: ImageHeader) {
        self.images.insert(image, h);
    }

    /// Appends one record of image `image`, chunk `chunk`, thread `tid`.
    ///
    /// # Errors
    /// Writing a full block failed.
    pub fn record(
        &mut self,
        image: usize,
        chunk: u32,
        tid: u32,
        rec: &Record<Box<[u8]>>,
    ) -> std::io::Result<()> {
        let key = (image, chunk, tid);
        let src = match self.last {
            Some((k, s)) if k == key => s,
            _ => match self.by_key.get(&key) {
                Some(&s) => s,
                None => {
                    let s = self.sources.len() as u32;
                    self.sources.push(Source {
                        image,
                        tid,
                        state: ChunkState::default(),
                        bytes: Vec::with_capacity(4096),
                    });
                    self.by_key.insert(key, s);
                    s
                }
            },
        };
        self.last = Some((key, src));
        let s = &mut self.sources[src as usize];
        let old = s.bytes.len();
        let mut room = 64;
        loop {
            s.bytes.resize(old + room, 0);
            match rec.encode(&mut s.state, &mut s.bytes[old..]) {
                Some(n) => {
                    s.bytes.truncate(old + n);
                    self.raw_len += n;
                    break;
                }
                None if room < (1 << 24) => room *= 8,
                None => {
                    s.bytes.truncate(old);
                    return Err(std::io::Error::other("record too large for the capture"));
                }
            }
        }
        match self.runs.last_mut() {
            Some((last, n)) if *last == src => *n += 1,
            _ => self.runs.push((src, 1)),
        }
        if let Some(ts) = rec.ts() {
            if self.first_ts == 0 {
                self.first_ts = ts;
            }
            self.first_ts = self.first_ts.min(ts);
            self.last_ts = self.last_ts.max(ts);
        }
        self.block_records += 1;
        self.stats.records += 1;
        if self.raw_len >= BLOCK_RAW {
            self.close_block()?;
        }
        Ok(())
    }

    /// Compresses and writes the open block (no-op when empty).
    ///
    /// # Errors
    /// Compression or the write failed.
    pub fn close_block(&mut self) -> std::io::Result<()> {
        if self.block_records == 0 {
            return Ok(());
        }
        let raw = &mut self.scratch;
        raw.clear();
        let mut imgs: Vec<usize> = self.sources.iter().map(|s| s.image).collect();
        imgs.sort_unstable();
        imgs.dedup();
        put_var(raw, imgs.len() as u64);
        for i in imgs {
            let h = self.images.get(&i).cloned().unwrap_or_default();
            put_var(raw, i as u64);
            put_var(raw, h.pid as u64);
            put_var(raw, h.ppid as u64);
            put_var(raw, h.start_ns);
            put_var(raw, zigzag(h.clock_offset));
            put_var(raw, h.exe.len() as u64);
            raw.extend_from_slice(h.exe.as_bytes());
        }
        put_var(raw, self.sources.len() as u64);
        for s in &self.sources {
            put_var(raw, s.image as u64);
            put_var(raw, s.tid as u64);
            put_var(raw, s.bytes.len() as u64);
        }
        put_var(raw, self.runs.len() as u64);
        for (s, n) in &self.runs {
            put_var(raw, *s as u64);
            put_var(raw, *n as u64);
        }
        for s in &self.sources {
            raw.extend_from_slice(&s.bytes);
        }
        let comp = self.zstd.compress(raw)?;
        let mut head = [0u8; super::BLOCK_HEADER];
        head[..4].copy_from_slice(&BLOCK_MAGIC);
        head[4..8].copy_from_slice(&(comp.len() as u32).to_le_bytes());
        head[8..12].copy_from_slice(&(raw.len() as u32).to_le_bytes());
        head[12..16].copy_from_slice(&self.block_records.to_le_bytes());
        head[16..24].copy_from_slice(&self.first_ts.to_le_bytes());
        head[24..32].copy_from_slice(&self.last_ts.to_le_bytes());
        self.file.write_all(&head)?;
        self.file.write_all(&comp)?;
        self.index.push(BlockIndex {
            offset: self.offset,
            records: self.block_records,
            first_ts: self.first_ts,
            last_ts: self.last_ts,
        });
        let n = (head.len() + comp.len()) as u64;
        self.offset += n;
        self.stats.bytes += n;
        self.stats.raw_bytes += raw.len() as u64;
        self.sources.clear();
        self.by_key.clear();
        self.last = None;
        self.runs.clear();
        self.raw_len = 0;
        self.block_records = 0;
        self.first_ts = 0;
        self.last_ts = 0;
        Ok(())
    }

    /// Closes the last block and writes the trailer and footer.
    ///
    /// # Errors
    /// A write failed.
    pub fn finish(mut self, mut end: CaptureEnd) -> std::io::Result<CaptureStats> {
        self.close_block()?;
        end.records = self.stats.records;
        end.blocks = std::mem::take(&mut self.index);
        let json = serde_json::to_vec(&end).map_err(std::io::Error::other)?;
        let mut t = Vec::with_capacity(json.len() + 24);
        t.extend_from_slice(&TRAILER_MAGIC);
        t.extend_from_slice(&(json.len() as u32).to_le_bytes());
        t.extend_from_slice(&json);
        t.extend_from_slice(&self.offset.to_le_bytes());
        t.extend_from_slice(&FOOTER_MAGIC);
        self.file.write_all(&t)?;
        self.stats.bytes += t.len() as u64;
        Ok(self.stats)
    }
}
