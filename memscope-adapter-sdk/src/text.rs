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
        for (d, &b) in self.buf[self.len..self.len + take]
            .iter_mut()
            .zip(s.as_bytes())
        {
            *d = if b == 0 { b'?' } else { b };
        }
        self.len += take;
        self.buf[self.len] = 0;
    }

    /// The text so far (without the NUL).
    pub fn as_str(&self) -> &str {
        // Only whole UTF-8 characters of `&str`s were copied (NUL replaced by an ASCII byte).
        core::str::from_utf8(&self.buf[..self.len]).unwrap_or("")
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
}
