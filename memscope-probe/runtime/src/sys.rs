//! Small allocation-free helpers over libc: fixed buffers, stderr lines, C strings, errno text.

use core::ffi::c_char;
use core::fmt;

/// A fixed-capacity byte buffer that formats without allocating. Text that does not fit is cut
/// (formatting never fails); one byte is always kept free for a terminating NUL.
pub(crate) struct FixedBuf<const N: usize> {
    buf: [u8; N],
    len: usize,
}

impl<const N: usize> FixedBuf<N> {
    /// An empty buffer.
    pub(crate) const fn new() -> Self {
        FixedBuf {
            buf: [0; N],
            len: 0,
        }
    }

    /// The bytes written so far (without the NUL).
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    /// Appends `b`, cutting what does not fit. Returns `false` if anything was cut.
    pub(crate) fn push(&mut self, b: &[u8]) -> bool {
        let room = N.saturating_sub(1).saturating_sub(self.len);
        let n = b.len().min(room);
        self.buf[self.len..self.len + n].copy_from_slice(&b[..n]);
        self.len += n;
        n == b.len()
    }

    /// A NUL-terminated view of the contents, valid while `self` is neither moved nor changed.
    pub(crate) fn c_str(&mut self) -> *const c_char {
        // `push` always leaves index `len` free (len <= N - 1).
        if let Some(b) = self.buf.get_mut(self.len) {
            *b = 0;
        }
        self.buf.as_ptr().cast()
    }
}

impl<const N: usize> fmt::Write for FixedBuf<N> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.push(s.as_bytes());
        Ok(())
    }
}

/// Writes `line` to fd 2 with `write(2)` calls (no stdio, no locks, no allocation).
pub(crate) fn stderr_write(line: &[u8]) {
    let mut rest = line;
    while !rest.is_empty() {
        // SAFETY: `rest` is a valid readable slice for its whole length.
        let n = unsafe { libc::write(2, rest.as_ptr().cast(), rest.len()) };
        if n > 0 {
            rest = &rest[(n as usize).min(rest.len())..];
        } else if n < 0 && errno() == libc::EINTR {
            continue;
        } else {
            return;
        }
    }
}

/// The calling thread's `errno`.
pub(crate) fn errno() -> i32 {
    // SAFETY: `__errno_location` always returns a valid pointer to this thread's errno.
    unsafe { *libc::__errno_location() }
}

/// Appends the text of error number `err` to `out`, from a fixed table. Never `strerror_r`:
/// it may translate through gettext, which takes glibc's locale lock — a hook running inside
/// `setlocale` (bash, Python at start-up) would then wait for itself forever.
pub(crate) fn push_strerror<const N: usize>(out: &mut FixedBuf<N>, err: i32) {
    let text: &[u8] = match err {
        libc::EPERM => b"Operation not permitted",
        libc::ENOENT => b"No such file or directory",
        libc::EIO => b"Input/output error",
        libc::ENOMEM => b"Cannot allocate memory",
        libc::EACCES => b"Permission denied",
        libc::EEXIST => b"File exists",
        libc::ENOTDIR => b"Not a directory",
        libc::EISDIR => b"Is a directory",
        libc::EINVAL => b"Invalid argument",
        libc::EMFILE => b"Too many open files",
        libc::EFBIG => b"File too large",
        libc::ENOSPC => b"No space left on device",
        libc::EROFS => b"Read-only file system",
        libc::EDQUOT => b"Disk quota exceeded",
        libc::EOPNOTSUPP => b"Operation not supported",
        _ => b"",
    };
    if text.is_empty() {
        let _ = fmt::write(out, format_args!("errno {err}"));
    } else {
        out.push(text);
    }
}

/// Bytes of the C string at `p`, at most `max` of them; `None` for a NULL pointer.
///
/// # Safety
/// `p` is NULL or points to memory readable up to its NUL or `max` bytes, whichever is first,
/// that stays valid and unchanged for `'a`.
pub(crate) unsafe fn cstr_bytes<'a>(p: *const c_char, max: usize) -> Option<&'a [u8]> {
    if p.is_null() {
        return None;
    }
    // SAFETY: the caller guarantees `p` is readable up to NUL or `max` bytes.
    let n = unsafe { libc::strnlen(p, max) };
    // SAFETY: `strnlen` found `n` readable bytes at `p`.
    Some(unsafe { core::slice::from_raw_parts(p.cast::<u8>(), n) })
}

/// Kernel thread id of the caller.
pub(crate) fn gettid() -> u32 {
    // SAFETY: `gettid` has no preconditions.
    unsafe { libc::syscall(libc::SYS_gettid) as u32 }
}
