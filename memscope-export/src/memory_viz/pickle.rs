//! A streaming pickle writer restricted to what PyTorch's memory_viz unpickler accepts
//! (`torch/utils/viz/MemoryViz.js`): protocol 4 and only the opcodes PROTO, STOP, MARK,
//! EMPTY_DICT, SETITEMS, EMPTY_LIST, APPENDS, APPEND, TUPLE2, BININT1, BININT2, BININT, LONG1
//! (at most 8 bytes), SHORT_BINUNICODE, BINUNICODE, NEWTRUE, NEWFALSE, NONE, MEMOIZE, BINGET,
//! LONG_BINGET. Integers are i64.
//!
//! Repeated values (dictionary keys, action names, frames, frame lists) are memoized: written
//! once, then fetched by memo index (2 or 5 bytes). Memo entries are assigned in MEMOIZE order,
//! as both Python's and the viewer's unpickler count them. The memo table is bounded
//! ([`MEMO_CAP_BYTES`] of keys); past it new values are written in full.
//!
//! [`Pickler::checkpoint`] / [`Pickler::rewind`] cut the output back to an earlier point, memo
//! included, so a part can be rewritten in another way.

use std::collections::HashMap;
use std::io;

pub use crate::out_file::Sink;

/// Largest total size of memo keys kept.
pub const MEMO_CAP_BYTES: usize = 64 << 20;

/// Items per APPENDS / SETITEMS batch (as Python's pickler: keeps the JS unpickler's argument
/// spreads small).
pub const BATCH: usize = 1000;

const PROTO: u8 = 0x80;
const STOP: u8 = b'.';
const MARK: u8 = b'(';
const EMPTY_DICT: u8 = b'}';
const SETITEMS: u8 = b'u';
const EMPTY_LIST: u8 = b']';
const APPENDS: u8 = b'e';
const APPEND: u8 = b'a';
const TUPLE2: u8 = 0x86;
const BININT: u8 = b'J';
const BININT1: u8 = b'K';
const BININT2: u8 = b'M';
const LONG1: u8 = 0x8a;
const SHORT_BINUNICODE: u8 = 0x8c;
const BINUNICODE: u8 = b'X';
const NEWTRUE: u8 = 0x88;
const NEWFALSE: u8 = 0x89;
const NONE: u8 = b'N';
const MEMOIZE: u8 = 0x94;
const BINGET: u8 = b'h';
const LONG_BINGET: u8 = b'j';

/// The opcodes this writer emits (the tests check files against this list and the viewer's).
pub const OPCODES: [u8; 21] = [
    PROTO,
    STOP,
    MARK,
    EMPTY_DICT,
    SETITEMS,
    EMPTY_LIST,
    APPENDS,
    APPEND,
    TUPLE2,
    BININT,
    BININT1,
    BININT2,
    LONG1,
    SHORT_BINUNICODE,
    BINUNICODE,
    NEWTRUE,
    NEWFALSE,
    NONE,
    MEMOIZE,
    BINGET,
    LONG_BINGET,
];

/// A point of the output to come back to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Checkpoint {
    pos: u64,
    memo_next: u32,
}

/// The writer. Output is buffered; call [`Pickler::flush`] (or [`Pickler::finish`]) at the end.
pub struct Pickler<W: Sink> {
    w: W,
    buf: Vec<u8>,
    memo: HashMap<Box<[u8]>, u32>,
    memo_next: u32,
    memo_bytes: usize,
    cap: usize,
}

impl<W: Sink> Pickler<W> {
    /// A writer into `w`, starting with `PROTO 4`.
    pub fn new(w: W) -> Pickler<W> {
        Pickler::with_memo_cap(w, MEMO_CAP_BYTES)
    }

    /// As [`Pickler::new`], with another memo bound (tests).
    pub fn with_memo_cap(w: W, cap: usize) -> Pickler<W> {
        let mut p = Pickler {
            w,
            buf: Vec::with_capacity(1 << 16),
            memo: HashMap::new(),
            memo_next: 0,
            memo_bytes: 0,
            cap,
        };
        p.buf.extend_from_slice(&[PROTO, 4]);
        p
    }

    fn spill(&mut self) -> io::Result<()> {
        if self.buf.len() >= 1 << 16 {
            self.w.write_all(&self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }

    /// Writes buffered bytes to the sink.
    ///
    /// # Errors
    /// The sink's error.
    pub fn flush(&mut self) -> io::Result<()> {
        self.w.write_all(&self.buf)?;
        self.buf.clear();
        self.w.flush()
    }

    /// Bytes of pickle written so far.
    pub fn pos(&self) -> u64 {
        self.w.pos() + self.buf.len() as u64
    }

    fn op(&mut self, b: u8) -> io::Result<()> {
        self.buf.push(b);
        self.spill()
    }

    /// MARK.
    ///
    /// # Errors
    /// The sink's error (here and in every other writing method).
    pub fn mark(&mut self) -> io::Result<()> {
        self.op(MARK)
    }
    /// EMPTY_DICT.
    pub fn empty_dict(&mut self) -> io::Result<()> {
        self.op(EMPTY_DICT)
    }
    /// SETITEMS: the key/value pairs since the last MARK go into the dict below it.
    pub fn setitems(&mut self) -> io::Result<()> {
        self.op(SETITEMS)
    }
    /// EMPTY_LIST.
    pub fn empty_list(&mut self) -> io::Result<()> {
        self.op(EMPTY_LIST)
    }
    /// APPENDS: the items since the last MARK go into the list below it.
    pub fn appends(&mut self) -> io::Result<()> {
        self.op(APPENDS)
    }
    /// APPEND: the top item goes into the list below it.
    pub fn append(&mut self) -> io::Result<()> {
        self.op(APPEND)
    }
    /// TUPLE2 of the two top items.
    pub fn tuple2(&mut self) -> io::Result<()> {
        self.op(TUPLE2)
    }
    /// NONE.
    pub fn none(&mut self) -> io::Result<()> {
        self.op(NONE)
    }
    /// NEWTRUE / NEWFALSE.
    pub fn bool(&mut self, v: bool) -> io::Result<()> {
        self.op(if v { NEWTRUE } else { NEWFALSE })
    }

    /// An integer, in the shortest form Python would write.
    pub fn int(&mut self, v: i64) -> io::Result<()> {
        if (0..=0xff).contains(&v) {
            self.buf.extend_from_slice(&[BININT1, v as u8]);
        } else if (0..=0xffff).contains(&v) {
            self.buf.push(BININT2);
            self.buf.extend_from_slice(&(v as u16).to_le_bytes());
        } else if i32::try_from(v).is_ok() {
            self.buf.push(BININT);
            self.buf.extend_from_slice(&(v as i32).to_le_bytes());
        } else {
            // LONG1: minimal little-endian two's complement (at most 8 bytes for an i64)
            let bytes = v.to_le_bytes();
            let mut n = 8;
            while n > 1 {
                let top = bytes[n - 1];
                let below_sign = bytes[n - 2] & 0x80;
                if (top == 0 && below_sign == 0) || (top == 0xff && below_sign != 0) {
                    n -= 1;
                } else {
                    break;
                }
            }
            self.buf.extend_from_slice(&[LONG1, n as u8]);
            self.buf.extend_from_slice(&bytes[..n]);
        }
        self.spill()
    }

    /// An unsigned quantity as an i64 integer (values past `i64::MAX` saturate: the viewer
    /// cannot hold them).
    pub fn uint(&mut self, v: u64) -> io::Result<()> {
        self.int(i64::try_from(v).unwrap_or(i64::MAX))
    }

    /// A string, not memoized.
    pub fn str(&mut self, s: &str) -> io::Result<()> {
        let b = s.as_bytes();
        if b.len() < 256 {
            self.buf
                .extend_from_slice(&[SHORT_BINUNICODE, b.len() as u8]);
        } else {
            self.buf.push(BINUNICODE);
            let n = u32::try_from(b.len()).unwrap_or(u32::MAX);
            self.buf.extend_from_slice(&n.to_le_bytes());
        }
        self.buf
            .extend_from_slice(&b[..b.len().min(u32::MAX as usize)]);
        self.spill()
    }

    /// Fetches memo entry `idx` (BINGET / LONG_BINGET).
    pub fn get(&mut self, idx: u32) -> io::Result<()> {
        if idx < 256 {
            self.buf.extend_from_slice(&[BINGET, idx as u8]);
        } else {
            self.buf.push(LONG_BINGET);
            self.buf.extend_from_slice(&idx.to_le_bytes());
        }
        self.spill()
    }

    /// The memo index of the value stored under `key`, if any.
    pub fn lookup(&self, key: &[u8]) -> Option<u32> {
        self.memo.get(key).copied()
    }

    /// Memoizes the top of the stack under `key` (MEMOIZE) unless the memo is full. Returns
    /// its index.
    pub fn memoize(&mut self, key: &[u8]) -> io::Result<Option<u32>> {
        if self.memo_bytes + key.len() > self.cap || self.memo_next == u32::MAX {
            return Ok(None);
        }
        let idx = self.memo_next;
        self.memo_next += 1;
        self.memo_bytes += key.len();
        self.memo.insert(key.into(), idx);
        self.op(MEMOIZE)?;
        Ok(Some(idx))
    }

    /// A string, memoized: written once, fetched afterwards.
    pub fn str_memo(&mut self, s: &str) -> io::Result<()> {
        let mut key = Vec::with_capacity(s.len() + 1);
        key.push(b'S');
        key.extend_from_slice(s.as_bytes());
        match self.lookup(&key) {
            Some(i) => self.get(i),
            None => {
                self.str(s)?;
                self.memoize(&key).map(|_| ())
            }
        }
    }

    /// The current point of the output.
    pub fn checkpoint(&self) -> Checkpoint {
        Checkpoint {
            pos: self.pos(),
            memo_next: self.memo_next,
        }
    }

    /// Cuts the output back to `cp`, forgetting memo entries made since.
    ///
    /// # Errors
    /// The sink's error.
    pub fn rewind(&mut self, cp: Checkpoint) -> io::Result<()> {
        self.flush()?;
        self.w.truncate_to(cp.pos)?;
        let mut bytes = 0;
        self.memo.retain(|k, v| {
            let keep = *v < cp.memo_next;
            if keep {
                bytes += k.len();
            }
            keep
        });
        self.memo_bytes = bytes;
        self.memo_next = cp.memo_next;
        Ok(())
    }

    /// STOP, flush; returns the sink.
    ///
    /// # Errors
    /// The sink's error.
    pub fn finish(mut self) -> io::Result<W> {
        self.op(STOP)?;
        self.flush()?;
        Ok(self.w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_take_pythons_shortest_form_and_stay_within_i64() {
        let mut p = Pickler::new(Vec::new());
        for v in [
            0,
            255,
            256,
            65535,
            65536,
            -1,
            i32::MIN as i64,
            1 << 40,
            -(1 << 40),
        ] {
            p.int(v).unwrap();
        }
        p.uint(u64::MAX).unwrap();
        let out = p.finish().unwrap();
        let expect: Vec<u8> = [
            vec![PROTO, 4],
            vec![BININT1, 0],
            vec![BININT1, 255],
            vec![BININT2, 0, 1],
            vec![BININT2, 255, 255],
            vec![BININT, 0, 0, 1, 0],
            vec![BININT, 255, 255, 255, 255],
            vec![BININT, 0, 0, 0, 0x80],
            vec![LONG1, 6, 0, 0, 0, 0, 0, 1],
            vec![LONG1, 6, 0, 0, 0, 0, 0, 0xff],
            vec![LONG1, 8, 255, 255, 255, 255, 255, 255, 255, 0x7f],
            vec![STOP],
        ]
        .concat();
        assert_eq!(out, expect);
    }

    #[test]
    fn memoized_strings_are_fetched_and_rewind_forgets_later_entries() {
        let mut p = Pickler::new(Vec::new());
        p.str_memo("alloc").unwrap();
        let cp = p.checkpoint();
        p.str_memo("free").unwrap();
        p.str_memo("alloc").unwrap();
        p.rewind(cp).unwrap();
        assert_eq!(p.lookup(b"Sfree"), None);
        p.str_memo("free").unwrap();
        let out = p.finish().unwrap();
        let expect: Vec<u8> = [
            vec![PROTO, 4, SHORT_BINUNICODE, 5],
            b"alloc".to_vec(),
            vec![MEMOIZE, SHORT_BINUNICODE, 4],
            b"free".to_vec(),
            vec![MEMOIZE, STOP],
        ]
        .concat();
        assert_eq!(out, expect);
    }

    #[test]
    fn a_full_memo_writes_values_in_full() {
        let mut p = Pickler::with_memo_cap(Vec::new(), 4);
        p.str_memo("ab").unwrap();
        p.str_memo("cdef").unwrap();
        p.str_memo("cdef").unwrap();
        let out = p.finish().unwrap();
        assert_eq!(out.iter().filter(|b| **b == MEMOIZE).count(), 1);
    }
}
