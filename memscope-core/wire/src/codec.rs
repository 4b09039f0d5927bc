//! Varint codec of the stream: tags, delta state, the byte writer and reader.

use super::MAX_TEXT;

pub(crate) mod tag {
    pub const THREAD: u8 = 1;
    pub const MARK: u8 = 2;
    pub const MARK_NULL: u8 = 3;
    pub const RANGE_START: u8 = 4;
    pub const RANGE_START_NULL: u8 = 5;
    pub const RANGE_END: u8 = 6;
    pub const HEAP_REGISTER: u8 = 7;
    pub const HEAP_UNREGISTER: u8 = 8;
    pub const REGION_REGISTER: u8 = 9;
    pub const REGION_UNREGISTER: u8 = 10;
    pub const OWNER_PUSH: u8 = 11;
    pub const OWNER_POP: u8 = 12;
    pub const SYSTEM: u8 = 13;
    pub const HOST_MALLOC: u8 = 14;
    pub const HOST_MALLOC_STACK: u8 = 15;
    pub const HOST_FREE: u8 = 16;
    pub const STACK_DEF: u8 = 17;
    pub const PLUGIN: u8 = 18;
    pub const TEXT_DEF: u8 = 60;
    pub const MARK_REF: u8 = 61;
    pub const RANGE_START_REF: u8 = 62;
    pub const THREAD_DEVICE: u8 = 63;
    pub const MODULE: u8 = 19;
    pub const HOST_MMAP: u8 = 20;
    pub const HOST_MMAP_STACK: u8 = 21;
    pub const HOST_MUNMAP: u8 = 22;
    // HOST_MALLOC, HOST_MALLOC_STACK and HOST_FREE whose address delta is a multiple of 16 (the
    // malloc alignment): the zig-zag delta is stored divided by 16, saving about half a byte.
    pub const HOST_MALLOC_A16: u8 = 23;
    pub const HOST_MALLOC_STACK_A16: u8 = 24;
    pub const HOST_FREE_A16: u8 = 25;
    pub const HOST_MREMAP: u8 = 26;
    pub const HOST_MREMAP_KEEP: u8 = 27;
    pub const CALL_STACK: u8 = 28;
    pub const SHADOW: u8 = 29;
    // 30-59: the CANN records of stream format 3 and capture format 2, which moved to their
    // adapters (HAL, ACL, ATB) as per-source records; capture readers map them (see
    // `memscope-stream`'s capture `legacy`).
    pub const SOURCE: u8 = 64;
}

/// Delta state of one chunk, shared by encoder and decoder. Starts at zero for every chunk.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChunkState {
    /// Timestamp of the previous record.
    pub last_ts: u64,
    /// Address of the previous host-allocator record.
    pub last_addr: u64,
}

/// Why a buffer did not decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WireError {
    /// The buffer ends inside a record.
    Truncated,
    /// A tag or enum value this version does not know.
    BadTag(u8),
    /// A varint longer than 10 bytes or a length past the buffer.
    Malformed,
}

impl core::fmt::Display for WireError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            WireError::Truncated => f.write_str("stream record truncated"),
            WireError::BadTag(t) => write!(f, "unknown stream record tag {t}"),
            WireError::Malformed => f.write_str("malformed stream record"),
        }
    }
}

impl std::error::Error for WireError {}

/// The byte writer of the stream: varints and texts into a fixed buffer, allocation-free (the
/// probe writes through it inside hooks). A write past the end marks it failed instead of
/// panicking; [`Out::finish`] tells.
pub struct Out<'b> {
    pub(crate) buf: &'b mut [u8],
    pub(crate) pos: usize,
    pub(crate) ok: bool,
}

impl<'b> Out<'b> {
    /// A writer at the start of `buf`.
    #[inline]
    pub fn new(buf: &'b mut [u8]) -> Out<'b> {
        Out {
            buf,
            pos: 0,
            ok: true,
        }
    }

    /// The bytes written, or `None` when a write did not fit.
    #[inline]
    pub fn finish(&self) -> Option<usize> {
        self.ok.then_some(self.pos)
    }

    /// Writes one byte.
    #[inline]
    pub fn u8(&mut self, v: u8) {
        if let Some(b) = self.buf.get_mut(self.pos) {
            *b = v;
            self.pos += 1;
        } else {
            self.ok = false;
        }
    }
    /// Writes `v` as a LEB128 varint.
    #[inline]
    pub fn var(&mut self, mut v: u64) {
        loop {
            let byte = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                self.u8(byte);
                return;
            }
            self.u8(byte | 0x80);
        }
    }
    /// Writes the bytes of `t` as they are (no length).
    #[inline]
    pub fn bytes(&mut self, t: &[u8]) {
        match self.buf.get_mut(self.pos..self.pos + t.len()) {
            Some(dst) => {
                dst.copy_from_slice(t);
                self.pos += t.len();
            }
            None => self.ok = false,
        }
    }

    /// Writes a length and the bytes of `t` (cut at [`MAX_TEXT`]).
    #[inline]
    pub fn text(&mut self, t: &[u8]) {
        let t = &t[..t.len().min(MAX_TEXT)];
        self.var(t.len() as u64);
        match self.buf.get_mut(self.pos..self.pos + t.len()) {
            Some(dst) => {
                dst.copy_from_slice(t);
                self.pos += t.len();
            }
            None => self.ok = false,
        }
    }
}

/// Appends `v` to `out` as the stream's varint (LEB128), for the collector's own encodings
/// (capture columns, sort spills, protobuf); the probe writes through the fixed-buffer writer (`codec::Out`) instead.
#[inline]
pub fn put_var(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Zig-zag mapping of a signed difference to an unsigned varint value.
#[inline]
pub fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// Inverse of [`zigzag`].
#[inline]
pub fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// The byte reader of the stream, the inverse of [`Out`].
pub struct In<'a> {
    pub(crate) buf: &'a [u8],
    pub(crate) pos: usize,
}

impl<'a> In<'a> {
    /// A reader at the start of `buf`.
    #[inline]
    pub fn new(buf: &'a [u8]) -> In<'a> {
        In { buf, pos: 0 }
    }

    /// Bytes read so far.
    #[inline]
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// Reads one byte.
    ///
    /// # Errors
    /// [`WireError::Truncated`] at the end of the buffer.
    pub fn u8(&mut self) -> Result<u8, WireError> {
        let b = *self.buf.get(self.pos).ok_or(WireError::Truncated)?;
        self.pos += 1;
        Ok(b)
    }
    /// Reads a LEB128 varint.
    ///
    /// # Errors
    /// [`WireError::Truncated`] or [`WireError::Malformed`] (longer than 10 bytes).
    #[inline(always)]
    pub fn var(&mut self) -> Result<u64, WireError> {
        // Fast path (the collector decodes tens of millions of these, most of one or two
        // bytes), inlined into every decoder; longer values (and a last byte) take `var_long`.
        if let Some(w) = self.buf.get(self.pos..self.pos + 2) {
            if w[0] < 0x80 {
                self.pos += 1;
                return Ok(w[0] as u64);
            }
            if w[1] < 0x80 {
                self.pos += 2;
                return Ok((w[0] & 0x7f) as u64 | (w[1] as u64) << 7);
            }
        }
        self.var_long()
    }

    /// [`In::var`] past two bytes (or at the buffer's last byte): any value when 10 bytes are
    /// left, without a bounds check per byte, else byte by byte.
    #[inline(never)]
    fn var_long(&mut self) -> Result<u64, WireError> {
        if let Some(w) = self.buf.get(self.pos..self.pos + 2) {
            if w[1] < 0x80 {
                self.pos += 2;
                return Ok((w[0] & 0x7f) as u64 | (w[1] as u64) << 7);
            }
            if let Some(w) = self.buf.get(self.pos..self.pos + 10) {
                let w: &[u8; 10] = w.try_into().expect("10 bytes");
                let mut v = 0u64;
                for (i, &b) in w.iter().enumerate() {
                    if i == 9 && b > 1 {
                        return Err(WireError::Malformed);
                    }
                    v |= ((b & 0x7f) as u64) << (7 * i);
                    if b & 0x80 == 0 {
                        self.pos += i + 1;
                        return Ok(v);
                    }
                }
                return Err(WireError::Malformed);
            }
        }
        self.var_slow()
    }

    fn var_slow(&mut self) -> Result<u64, WireError> {
        let mut v = 0u64;
        for shift in (0..70).step_by(7) {
            let b = self.u8()?;
            if shift == 63 && b > 1 {
                return Err(WireError::Malformed);
            }
            v |= ((b & 0x7f) as u64) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(WireError::Malformed)
    }
    /// Reads a varint that must fit a `u32`.
    ///
    /// # Errors
    /// As [`In::var`], and [`WireError::Malformed`] for a larger value.
    #[inline]
    pub fn u32(&mut self) -> Result<u32, WireError> {
        u32::try_from(self.var()?).map_err(|_| WireError::Malformed)
    }
    /// Takes the next `n` bytes.
    ///
    /// # Errors
    /// [`WireError::Truncated`] when fewer are left.
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        let end = self.pos.checked_add(n).ok_or(WireError::Malformed)?;
        let s = self.buf.get(self.pos..end).ok_or(WireError::Truncated)?;
        self.pos = end;
        Ok(s)
    }
    /// Reads a length and that many bytes.
    ///
    /// # Errors
    /// As [`In::var`] and [`In::bytes`].
    pub fn text(&mut self) -> Result<&'a [u8], WireError> {
        let n = self.var()? as usize;
        self.bytes(n)
    }
    #[inline]
    pub(crate) fn ts(&mut self, st: &mut ChunkState) -> Result<u64, WireError> {
        let t = st.last_ts.wrapping_add(self.var()?);
        st.last_ts = t;
        Ok(t)
    }
    pub(crate) fn pool(&mut self) -> Result<u8, WireError> {
        self.u8()
    }
    #[inline]
    pub(crate) fn addr(&mut self, st: &mut ChunkState) -> Result<u64, WireError> {
        let a = st.last_addr.wrapping_add(unzigzag(self.var()?) as u64);
        st.last_addr = a;
        Ok(a)
    }
    #[inline]
    pub(crate) fn addr16(&mut self, st: &mut ChunkState) -> Result<u64, WireError> {
        let a = st
            .last_addr
            .wrapping_add((unzigzag(self.var()?) as u64).wrapping_mul(16));
        st.last_addr = a;
        Ok(a)
    }
}

/// Encodes stack frames (raw addresses, innermost first) as varints into `out` for a
/// [`crate::Record::StackDef`]; returns the bytes written or `None` if `out` is too small.
pub fn encode_frames(frames: &[u64], out: &mut [u8]) -> Option<usize> {
    let mut o = Out {
        buf: out,
        pos: 0,
        ok: true,
    };
    for f in frames {
        o.var(*f);
    }
    o.ok.then_some(o.pos)
}

/// Iterates the frames of a [`crate::Record::StackDef`].
pub struct StackFrames<'a> {
    inner: In<'a>,
}

impl<'a> StackFrames<'a> {
    /// Frames encoded in `raw`.
    pub fn new(raw: &'a [u8]) -> StackFrames<'a> {
        StackFrames {
            inner: In { buf: raw, pos: 0 },
        }
    }
}

impl Iterator for StackFrames<'_> {
    type Item = u64;
    fn next(&mut self) -> Option<u64> {
        if self.inner.pos >= self.inner.buf.len() {
            return None;
        }
        self.inner.var().ok()
    }
}
