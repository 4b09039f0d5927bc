//! [`TextBuf`]: a fixed-size, stack-allocated text for attrs and names built at run time
//! (`owner:arena3,flags:0x40`) without allocating — a hook must not allocate through the
//! allocator it may be hooking.

use core::ffi::CStr;
use core::fmt;

/// A NUL-terminated text of at most `N - 1` bytes, written with `core::fmt::Write`
/// (`write!(t, "owner:{}", x)`). Text past the capacity is cut (at a UTF-8 boundary) and
/// [`TextBuf::truncated`] says so; an interior NUL byte is written as `?`.
pub struct TextBuf<const N: usize> {
    buf: [u8; N],
    len: usize,
    truncated: bool,
}

impl<const N: usize> TextBuf<N> {
    /// An empty text. `N` must be at least 1 (room for the NUL).
    pub const fn new() -> TextBuf<N> {
        assert!(N >= 1, "TextBuf needs room for the NUL byte");
        TextBuf {
            buf: [0; N],
            len: 0,
            truncated: false,
        }
    }

    /// Empties the text.
    pub fn clear(&mut self) {
        self.len = 0;
        self.truncated = false;
        self.buf[0] = 0;
    }

    /// Appends `s`, cut to the capacity.
    pub fn push_str(&mut self, s: &str) {
        let room = N - 1 - self.len;
        let mut take = s.len().min(room);
        while !s.is_char_boundary(take) {
            take -= 1;
        }
        if take < s.len() {
            self.truncated = true;
        }
        self.push_bytes(&s.as_bytes()[..take]);
    }

    /// Appends raw bytes (a path, a C string's bytes: not always UTF-8), cut to the capacity;
    /// an interior NUL byte is written as `?`. Returns `false` when something was cut.
    pub fn push_bytes(&mut self, b: &[u8]) -> bool {
        let take = b.len().min(N - 1 - self.len);
        for (d, &x) in self.buf[self.len..self.len + take].iter_mut().zip(b) {
            *d = if x == 0 { b'?' } else { x };
        }
        self.len += take;
        self.buf[self.len] = 0;
        if take < b.len() {
            self.truncated = true;
        }
        take == b.len()
    }

    /// The bytes so far (without the NUL).
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    /// The text so far (without the NUL): its longest valid UTF-8 prefix ([`TextBuf::push_str`]
    /// copies whole characters only; [`TextBuf::push_bytes`] may not).
    pub fn as_str(&self) -> &str {
        let b = &self.buf[..self.len];
        match core::str::from_utf8(b) {
            Ok(s) => s,
            // the first `valid_up_to` bytes are valid UTF-8
            Err(e) => core::str::from_utf8(&b[..e.valid_up_to()]).unwrap_or(""),
        }
    }

    /// The text as a C string, for [`crate::Event`].
    pub fn as_c_str(&self) -> &CStr {
        CStr::from_bytes_with_nul(&self.buf[..=self.len]).unwrap_or(c"")
    }

    /// Whether something was cut.
    pub fn truncated(&self) -> bool {
        self.truncated
    }
}

impl<const N: usize> Default for TextBuf<N> {
    fn default() -> Self {
        TextBuf::new()
    }
}

impl<const N: usize> fmt::Write for TextBuf<N> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.push_str(s);
        Ok(())
    }
}

impl<const N: usize> fmt::Debug for TextBuf<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("TextBuf").field(&self.as_str()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::fmt::Write;

    #[test]
    fn text_buf_formats_without_allocating_and_cuts_at_capacity() {
        let mut t = TextBuf::<8>::new();
        write!(t, "owner:{}", 12345).unwrap();
        assert_eq!(t.as_str(), "owner:1");
        assert!(t.truncated());
        assert_eq!(t.as_c_str().to_bytes(), b"owner:1");
        let mut u = TextBuf::<6>::new();
        u.push_str("a\0é€");
        assert_eq!(u.as_str(), "a?é");
        assert!(u.truncated());
        t.clear();
        assert_eq!(t.as_c_str(), c"");
    }

    #[test]
    fn text_buf_takes_raw_bytes_cut_at_capacity_with_nul_replaced() {
        let mut t = TextBuf::<8>::new();
        assert!(t.push_bytes(b"/a\0b"));
        assert_eq!(t.as_bytes(), b"/a?b");
        assert!(!t.push_bytes(b"\xffcdef"));
        assert_eq!(t.as_bytes(), b"/a?b\xffcd");
        assert!(t.truncated());
        assert_eq!(t.as_str(), "/a?b", "the valid UTF-8 prefix");
        assert_eq!(t.as_c_str().to_bytes(), b"/a?b\xffcd");
    }
}
