//! One decompressed capture block: its source table, the column decoder and the merge that
//! hands out its records in emission order (format: [`super::columns`]). Every length, index
//! and reference is checked: a damaged block gives `None`/`Err`, never a panic.

use super::columns::{self as col, code, NCOL};
use super::ImageHeader;
use memscope_wire::{self as wire, unzigzag, ChunkState, Record};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// A record of a block: (image, thread, record).
pub(super) type BlockRecord = (usize, u32, Record<Box<[u8]>>);

/// LEB128 reader over a byte slice.
pub(super) struct Cur<'a> {
    pub(super) b: &'a [u8],
    pub(super) pos: usize,
}

impl Cur<'_> {
    pub(super) fn var(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = *self.b.get(self.pos)?;
            self.pos += 1;
            v |= ((byte & 0x7f) as u64) << shift;
            if byte & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }
    pub(super) fn bytes(&mut self, n: u64) -> Option<&[u8]> {
        let n = usize::try_from(n).ok()?;
        let end = self.pos.checked_add(n)?;
        let s = self.b.get(self.pos..end)?;
        self.pos = end;
        Some(s)
    }
}

/// A decoded record waiting to be emitted (free references resolve at emission).
enum Pending {
    Malloc {
        ts: u64,
        addr: u64,
        size: u64,
        stack: u32,
    },
    FreeRef {
        ts: u64,
        src: u32,
        dist: u64,
    },
    Free {
        ts: u64,
        addr: u64,
    },
    /// A compact MALLOC (`free`: false) or FREE of registered type `ty`.
    Typed {
        ts: u64,
        ty: u32,
        free: bool,
        addr: u64,
        size: u64,
    },
    Other(Record<Box<[u8]>>),
}

struct Head {
    /// Merge key time stamp (a definition's: its source's previous time stamp).
    key_ts: u64,
    deferred: bool,
    rec: Pending,
}

struct Src {
    image: usize,
    tid: u32,
    /// Records not decoded yet.
    left: u64,
    pos: [usize; NCOL],
    end: [usize; NCOL],
    last_ts: u64,
    last_addr: u64,
    generic: ChunkState,
    /// The capture is of format 2 (`super::legacy`).
    legacy: bool,
    /// Addresses of the allocations emitted so far (targets of free references).
    mallocs: Vec<u64>,
    head: Option<Head>,
}

impl Src {
    fn byte(&mut self, raw: &[u8], c: usize) -> Option<u8> {
        if self.pos[c] >= self.end[c] {
            return None;
        }
        let b = raw[self.pos[c]];
        self.pos[c] += 1;
        Some(b)
    }

    fn var(&mut self, raw: &[u8], c: usize) -> Option<u64> {
        let mut cur = Cur {
            b: &raw[..self.end[c]],
            pos: self.pos[c],
        };
        let v = cur.var()?;
        self.pos[c] = cur.pos;
        Some(v)
    }

    fn lo_hi(&mut self, raw: &[u8], lo: usize, hi: usize) -> Option<u64> {
        let l = self.byte(raw, lo)? as u64;
        let h = self.var(raw, hi)?;
        Some(l | h.checked_mul(256)?)
    }

    fn addr_delta(&mut self, raw: &[u8], a16: bool) -> Option<u64> {
        let l = self.byte(raw, col::ADDR_LO)? as u64;
        let m = self.byte(raw, col::ADDR_MID)? as u64;
        let h = self.var(raw, col::ADDR_HI)?;
        let d = unzigzag(l | (m << 8) | h.checked_mul(1 << 16)?);
        Some(if a16 { d.wrapping_mul(16) } else { d } as u64)
    }

    /// Decodes the next record into `head` (none left: stays `None`).
    fn decode(&mut self, raw: &[u8], me: u32) -> Option<()> {
        if self.left == 0 {
            return Some(());
        }
        self.left -= 1;
        let tag = self.byte(raw, col::TAG)?;
        let c = tag & col::CODE;
        let mut ts = self.last_ts;
        if c != code::GENERIC {
            let d = self.lo_hi(raw, col::TS_LO, col::TS_HI)?;
            ts = if tag & col::NEG_TS != 0 {
                self.last_ts.wrapping_sub(d)
            } else {
                self.last_ts.wrapping_add(d)
            };
            self.last_ts = ts;
        }
        let rec = match c {
            code::MALLOC | code::MALLOC_A16 | code::MALLOC_STACK | code::MALLOC_STACK_A16 => {
                let a16 = c == code::MALLOC_A16 || c == code::MALLOC_STACK_A16;
                let addr = self.last_addr.wrapping_add(self.addr_delta(raw, a16)?);
                self.last_addr = addr;
                let size = self.var(raw, col::SIZE)?;
                let stack = if c == code::MALLOC_STACK || c == code::MALLOC_STACK_A16 {
                    u32::try_from(self.var(raw, col::STACK)?).ok()?
                } else {
                    0
                };
                Pending::Malloc {
                    ts,
                    addr,
                    size,
                    stack,
                }
            }
            code::FREE_REF => {
                let v = self.lo_hi(raw, col::REF_LO, col::REF_HI)?;
                let src = if v & 1 == 1 {
                    u32::try_from(self.var(raw, col::XSRC)?).ok()?
                } else {
                    me
                };
                Pending::FreeRef {
                    ts,
                    src,
                    dist: v >> 1,
                }
            }
            code::FREE | code::FREE_A16 => Pending::Free {
                ts,
                addr: self
                    .last_addr
                    .wrapping_add(self.addr_delta(raw, c == code::FREE_A16)?),
            },
            code::TMALLOC | code::TMALLOC_A16 => {
                let addr = self
                    .last_addr
                    .wrapping_add(self.addr_delta(raw, c == code::TMALLOC_A16)?);
                self.last_addr = addr;
                let size = self.var(raw, col::SIZE)?;
                Pending::Typed {
                    ts,
                    ty: u32::try_from(self.var(raw, col::STACK)?).ok()?,
                    free: false,
                    addr,
                    size,
                }
            }
            code::TFREE | code::TFREE_A16 => {
                let size = self.var(raw, col::SIZE)?;
                let ty = u32::try_from(self.var(raw, col::STACK)?).ok()?;
                Pending::Typed {
                    ts,
                    ty,
                    free: true,
                    addr: self
                        .last_addr
                        .wrapping_add(self.addr_delta(raw, c == code::TFREE_A16)?),
                    size,
                }
            }
            code::GENERIC_TS | code::GENERIC => {
                if c == code::GENERIC_TS {
                    self.generic.last_ts = ts;
                }
                let g = raw.get(self.pos[col::GENERIC]..self.end[col::GENERIC])?;
                let (rec, used) = if self.legacy {
                    super::legacy::decode_v2(g, &mut self.generic).ok()?
                } else {
                    wire::decode(g, &mut self.generic).ok()?
                };
                if rec.ts().is_some() != (c == code::GENERIC_TS)
                    || matches!(rec, Record::Thread { .. })
                {
                    return None;
                }
                self.pos[col::GENERIC] += used;
                Pending::Other(rec.to_owned())
            }
            _ => return None,
        };
        self.head = Some(Head {
            key_ts: ts,
            deferred: tag & col::DEFERRED != 0,
            rec,
        });
        Some(())
    }
}

/// The compact record of a typed allocation column entry.
fn compact(ts: u64, ty: u32, free: bool, addr: u64, size: u64) -> Record<Box<[u8]>> {
    Record::Compact {
        ts,
        ty,
        kind: if free { 2 } else { 1 },
        addr,
        size,
        values: Box::default(),
    }
}

/// A decoded block being handed out.
pub(super) struct Block {
    raw: Vec<u8>,
    srcs: Vec<Src>,
    heap: BinaryHeap<Reverse<(u64, u32)>>,
    /// (position, source) of the records emitted out of key order.
    deferred: Vec<(u64, u32)>,
    next_deferred: usize,
    pos: u64,
    records: u64,
}

impl Block {
    /// Parses a decompressed block of `records` records; image headers it declares are
    /// recorded in `images`.
    pub(super) fn parse(
        raw: Vec<u8>,
        records: u32,
        images: &mut Vec<(usize, ImageHeader)>,
        version: u32,
    ) -> Option<Block> {
        let mut c = Cur { b: &raw, pos: 0 };
        let n_images = c.var()?;
        for _ in 0..n_images {
            let image = usize::try_from(c.var()?).ok()?;
            let pid = u32::try_from(c.var()?).ok()?;
            let ppid = u32::try_from(c.var()?).ok()?;
            let start_ns = c.var()?;
            let clock_offset = unzigzag(c.var()?);
            let n = c.var()?;
            let exe = String::from_utf8_lossy(c.bytes(n)?).into_owned();
            let h = ImageHeader {
                pid,
                ppid,
                start_ns,
                clock_offset,
                exe,
            };
            match images.iter_mut().find(|(i, _)| *i == image) {
                Some(slot) => slot.1 = h,
                None => images.push((image, h)),
            }
        }
        let n_sources = c.var()?;
        if n_sources > raw.len() as u64 {
            return None;
        }
        let mut srcs = Vec::with_capacity(n_sources as usize);
        let mut lens = Vec::with_capacity(n_sources as usize);
        let mut total = 0u64;
        for _ in 0..n_sources {
            let image = usize::try_from(c.var()?).ok()?;
            let tid = u32::try_from(c.var()?).ok()?;
            let n = c.var()?;
            total = total.checked_add(n)?;
            let mut l = [0u64; NCOL];
            for x in &mut l {
                *x = c.var()?;
            }
            lens.push(l);
            srcs.push(Src {
                image,
                tid,
                left: n,
                pos: [0; NCOL],
                end: [0; NCOL],
                last_ts: 0,
                last_addr: 0,
                generic: ChunkState::default(),
                legacy: version < 3,
                mallocs: Vec::new(),
                head: None,
            });
        }
        if total != records as u64 {
            return None;
        }
        let n_deferred = c.var()?;
        if n_deferred > records as u64 {
            return None;
        }
        let mut deferred = Vec::with_capacity(n_deferred as usize);
        let mut at = 0u64;
        for _ in 0..n_deferred {
            at = at.checked_add(c.var()?)?;
            let s = u32::try_from(c.var()?).ok()?;
            if at >= records as u64 || s as u64 >= n_sources {
                return None;
            }
            deferred.push((at, s));
        }
        let mut pos = c.pos;
        for k in 0..NCOL {
            for (s, l) in srcs.iter_mut().zip(&lens) {
                let end = pos.checked_add(usize::try_from(l[k]).ok()?)?;
                if end > raw.len() {
                    return None;
                }
                s.pos[k] = pos;
                s.end[k] = end;
                pos = end;
            }
        }
        if pos != raw.len() {
            return None;
        }
        let mut heap = BinaryHeap::with_capacity(srcs.len());
        for (i, s) in srcs.iter_mut().enumerate() {
            s.decode(&raw, i as u32)?;
            if let Some(h) = &s.head {
                if !h.deferred {
                    heap.push(Reverse((h.key_ts, i as u32)));
                }
            }
        }
        Some(Block {
            raw,
            srcs,
            heap,
            deferred,
            next_deferred: 0,
            pos: 0,
            records: records as u64,
        })
    }

    /// The next record; `Ok(None)` at the end of the block.
    ///
    /// # Errors
    /// The block's contents are inconsistent.
    pub(super) fn next(&mut self) -> Result<Option<BlockRecord>, ()> {
        if self.pos >= self.records {
            return Ok(None);
        }
        let s = match self.deferred.get(self.next_deferred) {
            Some(&(at, s)) if at == self.pos => {
                self.next_deferred += 1;
                s
            }
            _ => self.heap.pop().ok_or(())?.0 .1,
        };
        let src = self.srcs.get_mut(s as usize).ok_or(())?;
        let head = src.head.take().ok_or(())?;
        let rec = match head.rec {
            Pending::Malloc {
                ts,
                addr,
                size,
                stack,
            } => {
                src.mallocs.push(addr);
                Record::Malloc {
                    ts,
                    addr,
                    size,
                    stack,
                }
            }
            Pending::Free { ts, addr } => Record::Free { ts, addr },
            Pending::Typed {
                ts,
                ty,
                free,
                addr,
                size,
            } => compact(ts, ty, free, addr, size),
            Pending::FreeRef { ts, src: of, dist } => {
                let m = &self.srcs.get(of as usize).ok_or(())?.mallocs;
                let i = (m.len() as u64).checked_sub(dist).filter(|_| dist > 0);
                let addr = *m.get(i.ok_or(())? as usize).ok_or(())?;
                Record::Free { ts, addr }
            }
            Pending::Other(r) => r,
        };
        let src = &mut self.srcs[s as usize];
        let (image, tid) = (src.image, src.tid);
        src.decode(&self.raw, s).ok_or(())?;
        if let Some(h) = &src.head {
            if !h.deferred {
                self.heap.push(Reverse((h.key_ts, s)));
            }
        }
        self.pos += 1;
        Ok(Some((image, tid, rec)))
    }
}
