//! Writes a capture: records in emission order, split per source (image × thread) into the
//! byte columns of [`super::columns`], each block zstd-compressed as it closes (on a thread of
//! its own, [`super::compress`]), the index in a
//! trailer at the end.

use super::columns::{self as col, code, put_addr, put_lo_hi, put_var, NCOL};
use super::{
    CaptureEnd, CaptureInfo, ImageHeader, BLOCK_RAW, FOOTER_MAGIC, MAGIC, TRAILER_MAGIC, VERSION,
};
use memscope_core::addr_hash::AddrMap;
use memscope_wire::{zigzag, ChunkState, Record};
use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

struct Source {
    image: usize,
    tid: u32,
    /// Records of this source in the block.
    n: u32,
    /// Allocations of this source in the block.
    mallocs: u32,
    last_ts: u64,
    last_addr: u64,
    /// Delta state of the wire-encoded (generic) records.
    generic: ChunkState,
    cols: Box<[Vec<u8>; NCOL]>,
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

/// Where an allocation lies in a capture (block, source, index among the source's
/// allocations), for the free that refers back to it: 32 bits of block number, 12 of source,
/// 20 of index (an allocation beyond those is not given one; its free goes by address).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AllocRef(std::num::NonZeroU64);

impl AllocRef {
    fn new(block: u32, source: u32, index: u32) -> Option<AllocRef> {
        if source >= 1 << 12 || index >= 1 << 20 {
            return None;
        }
        let v = (block as u64) << 32 | (source as u64) << 20 | index as u64;
        std::num::NonZeroU64::new(v).map(AllocRef)
    }

    fn block(self) -> u32 {
        (self.0.get() >> 32) as u32
    }

    /// (source, index).
    fn at(self) -> (u32, u32) {
        let v = self.0.get();
        (((v >> 20) & 0xfff) as u32, (v & 0xf_ffff) as u32)
    }

    /// The reference as a number (never 0), for a caller's map.
    pub fn get(self) -> u64 {
        self.0.get()
    }

    /// A reference from [`AllocRef::get`]'s number (`None` for 0).
    pub fn from_u64(v: u64) -> Option<AllocRef> {
        std::num::NonZeroU64::new(v).map(AllocRef)
    }
}

/// How a `Malloc` or `Free` finds the allocation a free refers to.
#[derive(Clone, Copy)]
enum Refs {
    /// In the writer's own map.
    Map,
    /// The caller keeps the references (the `Free`'s, if it has one).
    Given(Option<AllocRef>),
}

/// Entries of [`CaptureWriter`]'s direct-mapped cache of recent sources.
const RECENT: usize = 256;

/// A capture being written.
pub struct CaptureWriter {
    file: File,
    /// Compresses and writes the closed blocks (`compress.rs`).
    background: super::compress::Background,
    path: PathBuf,
    offset: u64,
    images: HashMap<usize, ImageHeader>,
    sources: Vec<Source>,
    by_key: foldhash::HashMap<(usize, u32), u32>,
    /// Sources of recent threads, direct-mapped by thread id: `(key + 1, source)`, 0 empty
    /// (threads that take turns — every record of a many-thread job — find theirs without
    /// hashing).
    recent: Box<[(u64, u32); RECENT]>,
    /// Allocations of this block not yet freed: address → (source, allocation index) (those
    /// whose references the caller keeps are not here, see [`CaptureWriter::record_malloc`]).
    allocs: AddrMap<(u32, u32)>,
    /// Number of the open block (from 1, wrapping past 0), in the references it hands out.
    block_seq: u32,
    /// Largest key emitted in this block: (time stamp, source, record index in source).
    max_key: Option<(u64, u32, u32)>,
    /// Records emitted out of key order: (position in the block, source).
    deferred: Vec<(u32, u32)>,
    block_records: u32,
    first_ts: u64,
    last_ts: u64,
    stats: CaptureStats,
    /// Column buffers of the sources of closed blocks, emptied, for the next block's sources
    /// (so a steady stream of records allocates nothing per block for them).
    // the boxes themselves are reused (a source's `cols` is a box): no allocation per block
    #[allow(clippy::vec_box)]
    spare: Vec<Box<[Vec<u8>; NCOL]>>,
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
        let background = super::compress::Background::start(file.try_clone()?, head.len() as u64)?;
        Ok(CaptureWriter {
            file,
            background,
            path,
            offset: head.len() as u64,
            images: HashMap::new(),
            sources: Vec::new(),
            by_key: foldhash::HashMap::default(),
            recent: Box::new([(0, 0); RECENT]),
            block_seq: 1,
            allocs: AddrMap::default(),
            max_key: None,
            deferred: Vec::new(),
            block_records: 0,
            first_ts: 0,
            last_ts: 0,
            stats: CaptureStats {
                bytes: head.len() as u64,
                ..CaptureStats::default()
            },
            spare: Vec::new(),
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

    #[inline(always)]
    fn source(&mut self, image: usize, tid: u32) -> usize {
        let packed = ((image as u64) << 32 | tid as u64).wrapping_add(1);
        let slot = (tid as usize ^ image.wrapping_mul(0x9E37)) % RECENT;
        let (k, s) = self.recent[slot];
        if k == packed {
            return s as usize;
        }
        let s = self.source_slow(image, tid);
        self.recent[slot] = (packed, s as u32);
        s
    }

    #[inline(never)]
    fn source_slow(&mut self, image: usize, tid: u32) -> usize {
        let key = (image, tid);
        let s = match self.by_key.get(&key) {
            Some(&s) => s,
            None => {
                let s = self.sources.len() as u32;
                self.sources.push(Source {
                    image,
                    tid,
                    n: 0,
                    mallocs: 0,
                    last_ts: 0,
                    last_addr: 0,
                    generic: ChunkState::default(),
                    cols: self.spare.pop().unwrap_or_default(),
                });
                self.by_key.insert(key, s);
                s
            }
        };
        s as usize
    }

    /// Appends one record of image `image`, thread `tid` (the next in emission order).
    ///
    /// # Errors
    /// Writing a full block failed.
    pub fn record<B: AsRef<[u8]>>(
        &mut self,
        image: usize,
        tid: u32,
        rec: &Record<B>,
    ) -> std::io::Result<()> {
        self.put(image, tid, rec, Refs::Map).map(|_| ())
    }

    /// [`CaptureWriter::record`] of a `Malloc` whose caller keeps the allocation's reference
    /// (an [`AllocRef`], returned) in its own map of live blocks and hands it back with the
    /// block's `Free` ([`CaptureWriter::record_free`]): the capture then keeps no map of its
    /// own for it (one map lookup per allocation and per free instead of two). Any other
    /// record is appended as `record` appends it.
    ///
    /// # Errors
    /// Writing a full block failed.
    #[inline]
    pub fn record_malloc<B: AsRef<[u8]>>(
        &mut self,
        image: usize,
        tid: u32,
        rec: &Record<B>,
    ) -> std::io::Result<Option<AllocRef>> {
        self.put(image, tid, rec, Refs::Given(None))
    }

    /// [`CaptureWriter::record`] of a `Free` whose block's reference the caller kept
    /// (`alloc`, from [`CaptureWriter::record_malloc`]; `None`: the capture looks the address
    /// up in its own map, as `record` does).
    ///
    /// # Errors
    /// Writing a full block failed.
    #[inline]
    pub fn record_free<B: AsRef<[u8]>>(
        &mut self,
        image: usize,
        tid: u32,
        rec: &Record<B>,
        alloc: Option<AllocRef>,
    ) -> std::io::Result<()> {
        self.put(image, tid, rec, Refs::Given(alloc)).map(|_| ())
    }

    #[inline(always)]
    fn put<B: AsRef<[u8]>>(
        &mut self,
        image: usize,
        tid: u32,
        rec: &Record<B>,
        refs: Refs,
    ) -> std::io::Result<Option<AllocRef>> {
        let mut made = None;
        let si = self.source(image, tid);
        let ts = rec.ts();
        let s = &mut self.sources[si];
        let key = (ts.unwrap_or(s.last_ts), si as u32, s.n);
        s.n += 1;
        let mut tag = 0u8;
        if self.max_key.is_some_and(|m| key < m) {
            tag |= col::DEFERRED;
            self.deferred.push((self.block_records, si as u32));
        } else {
            self.max_key = Some(key);
        }
        if let Some(ts) = ts {
            let d = if ts >= s.last_ts {
                ts - s.last_ts
            } else {
                tag |= col::NEG_TS;
                s.last_ts - ts
            };
            put_lo_hi(&mut s.cols, col::TS_LO, col::TS_HI, d);
            s.last_ts = ts;
            if self.first_ts == 0 || ts < self.first_ts {
                self.first_ts = ts;
            }
            self.last_ts = self.last_ts.max(ts);
        }
        let c = match *rec {
            Record::Malloc {
                addr, size, stack, ..
            } => {
                let d = addr.wrapping_sub(s.last_addr) as i64;
                let a16 = d % 16 == 0;
                put_addr(&mut s.cols, zigzag(if a16 { d / 16 } else { d }));
                put_var(&mut s.cols[col::SIZE], size);
                s.last_addr = addr;
                match refs {
                    Refs::Map => {
                        self.allocs.insert(addr, (si as u32, s.mallocs));
                    }
                    Refs::Given(_) => made = AllocRef::new(self.block_seq, si as u32, s.mallocs),
                }
                s.mallocs += 1;
                match (stack != 0, a16) {
                    (false, false) => code::MALLOC,
                    (false, true) => code::MALLOC_A16,
                    (true, a16) => {
                        put_var(&mut s.cols[col::STACK], stack as u64);
                        if a16 {
                            code::MALLOC_STACK_A16
                        } else {
                            code::MALLOC_STACK
                        }
                    }
                }
            }
            Record::Compact {
                ty,
                kind: kind @ (1 | 2),
                addr,
                size,
                ref values,
                ..
            } if values.as_ref().is_empty() => {
                put_var(&mut s.cols[col::SIZE], size);
                if kind == 1 {
                    let d = addr.wrapping_sub(s.last_addr) as i64;
                    let a16 = d % 16 == 0;
                    put_addr(&mut s.cols, zigzag(if a16 { d / 16 } else { d }));
                    put_var(&mut s.cols[col::STACK], ty as u64);
                    s.last_addr = addr;
                    if a16 {
                        code::TMALLOC_A16
                    } else {
                        code::TMALLOC
                    }
                } else {
                    // by address: a free-by-reference, as the address records have, measured
                    // no smaller here and costs a map of the block's allocations
                    let d = addr.wrapping_sub(s.last_addr) as i64;
                    put_var(&mut s.cols[col::STACK], ty as u64);
                    if d % 16 == 0 {
                        put_addr(&mut s.cols, zigzag(d / 16));
                        code::TFREE_A16
                    } else {
                        put_addr(&mut s.cols, zigzag(d));
                        code::TFREE
                    }
                }
            }
            Record::Free { addr, .. } => match match refs {
                Refs::Given(Some(r)) if r.block() == self.block_seq => {
                    Some(r.at()).filter(|&(src, idx)| {
                        self.sources
                            .get(src as usize)
                            .is_some_and(|x| idx < x.mallocs)
                    })
                }
                _ => self.allocs.remove(&addr),
            } {
                Some((src, idx)) => {
                    let dist = (self.sources[src as usize].mallocs - idx) as u64;
                    let s = &mut self.sources[si];
                    if src as usize == si {
                        put_lo_hi(&mut s.cols, col::REF_LO, col::REF_HI, dist << 1);
                    } else {
                        put_lo_hi(&mut s.cols, col::REF_LO, col::REF_HI, (dist << 1) | 1);
                        put_var(&mut s.cols[col::XSRC], src as u64);
                    }
                    code::FREE_REF
                }
                None => {
                    let s = &mut self.sources[si];
                    let d = addr.wrapping_sub(s.last_addr) as i64;
                    if d % 16 == 0 {
                        put_addr(&mut s.cols, zigzag(d / 16));
                        code::FREE_A16
                    } else {
                        put_addr(&mut s.cols, zigzag(d));
                        code::FREE
                    }
                }
            },
            _ => {
                if let Some(ts) = ts {
                    // Its time stamp is in the time-stamp columns: the wire delta is 0.
                    s.generic.last_ts = ts;
                }
                let g = &mut s.cols[col::GENERIC];
                // most records fit a small stack buffer: no zero-filling of the column
                let mut small = [0u8; 64];
                if let Some(n) = rec.encode(&mut s.generic, &mut small) {
                    g.extend_from_slice(&small[..n]);
                    self.sources[si].cols[col::TAG].push(
                        if ts.is_some() {
                            code::GENERIC_TS
                        } else {
                            code::GENERIC
                        } | tag,
                    );
                    self.block_records += 1;
                    self.stats.records += 1;
                    if self.block_records & 4095 == 0 && self.raw_len() >= BLOCK_RAW {
                        self.close_block()?;
                    }
                    return Ok(None);
                }
                let old = g.len();
                let mut room = 1024;
                loop {
                    g.resize(old + room, 0);
                    match rec.encode(&mut s.generic, &mut g[old..]) {
                        Some(n) => {
                            g.truncate(old + n);
                            break;
                        }
                        None if room < (1 << 24) => room *= 8,
                        None => {
                            g.truncate(old);
                            return Err(std::io::Error::other("record too large for the capture"));
                        }
                    }
                }
                if ts.is_some() {
                    code::GENERIC_TS
                } else {
                    code::GENERIC
                }
            }
        };
        self.sources[si].cols[col::TAG].push(c | tag);
        self.block_records += 1;
        self.stats.records += 1;
        if self.block_records & 4095 == 0 && self.raw_len() >= BLOCK_RAW {
            self.close_block()?;
        }
        Ok(made)
    }

    fn raw_len(&self) -> usize {
        self.sources
            .iter()
            .map(|s| s.cols.iter().map(Vec::len).sum::<usize>())
            .sum()
    }

    /// Closes the open block and hands it to the thread that compresses and writes it (no-op
    /// when empty).
    ///
    /// # Errors
    /// That thread stopped: an earlier block could not be written.
    pub fn close_block(&mut self) -> std::io::Result<()> {
        if self.block_records == 0 {
            return Ok(());
        }
        let mut buf = self.background.buffer();
        let raw = &mut buf;
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
            put_var(raw, s.n as u64);
            for c in s.cols.iter() {
                put_var(raw, c.len() as u64);
            }
        }
        put_var(raw, self.deferred.len() as u64);
        let mut prev = 0;
        for &(pos, src) in &self.deferred {
            put_var(raw, (pos - prev) as u64);
            put_var(raw, src as u64);
            prev = pos;
        }
        for c in 0..NCOL {
            for s in &self.sources {
                raw.extend_from_slice(&s.cols[c]);
            }
        }
        self.stats.raw_bytes += raw.len() as u64;
        self.background.send(super::compress::Job {
            raw: buf,
            records: self.block_records,
            ts: (self.first_ts, self.last_ts),
        })?;
        for src in self.sources.drain(..) {
            let mut cols = src.cols;
            cols.iter_mut().for_each(Vec::clear);
            self.spare.push(cols);
        }
        self.by_key.clear();
        self.recent.fill((0, 0));
        // references into the closed block no longer resolve (their frees go by address)
        self.block_seq = self.block_seq.wrapping_add(1).max(1);
        self.allocs.clear();
        self.max_key = None;
        self.deferred.clear();
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
        let written = self.background.finish()?;
        self.stats.bytes = written.offset;
        self.offset = written.offset;
        end.records = self.stats.records;
        end.blocks = written.index;
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
