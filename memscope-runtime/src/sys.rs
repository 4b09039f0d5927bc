//! Small allocation-free helpers over libc: fixed buffers, stderr lines, C strings, errno text.

use core::ffi::{c_char, c_void};
use core::fmt;

/// A fixed-capacity text that formats without allocating (the adapter SDK's, so one type
/// serves plugins and the runtime).
pub(crate) use memscope_adapter_sdk::TextBuf;

/// Writes `line` to fd 2 with `write(2)` calls (no stdio, no locks, no allocation). Nothing is
/// written when fd 2 is a regular file that the line would grow past `RLIMIT_FSIZE` (the kernel
/// would answer with SIGXFSZ, which kills the program).
pub(crate) fn stderr_write(line: &[u8]) {
    let mut st = zeroed_stat();
    // SAFETY: `st` is writable; fd 2 may be closed (then fstat fails and we try the write).
    if unsafe { libc::fstat(2, &mut st) } == 0 && (st.st_mode & libc::S_IFMT) == libc::S_IFREG {
        let end = (st.st_size.max(0) as u64).saturating_add(line.len() as u64);
        if end > file_size_limit() {
            return;
        }
    }
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

/// Writes the concatenation of `parts` to fd 2 as one line with one `writev(2)` (so lines of
/// several processes do not interleave), without a buffer the size of the line: for messages
/// with long paths on small thread stacks. Same `RLIMIT_FSIZE` rule as [`stderr_write`].
pub(crate) fn stderr_parts(parts: &[&[u8]]) {
    const MAX: usize = 12;
    let mut iov = [libc::iovec {
        iov_base: core::ptr::null_mut(),
        iov_len: 0,
    }; MAX];
    let mut n = 0;
    let mut total = 0usize;
    for p in parts.iter().take(MAX) {
        iov[n] = libc::iovec {
            iov_base: p.as_ptr() as *mut c_void,
            iov_len: p.len(),
        };
        total += p.len();
        n += 1;
    }
    let mut st = zeroed_stat();
    // SAFETY: `st` is writable; fd 2 may be closed (then fstat fails and writev fails too).
    if unsafe { libc::fstat(2, &mut st) } == 0 && (st.st_mode & libc::S_IFMT) == libc::S_IFREG {
        let end = (st.st_size.max(0) as u64).saturating_add(total as u64);
        if end > file_size_limit() {
            return;
        }
    }
    // SAFETY: `iov[..n]` describe readable slices that live for the call. A short write (a
    // full pipe) loses the rest of the line, which is acceptable for a warning.
    unsafe { libc::writev(2, iov.as_ptr(), n as i32) };
}

/// The calling thread's `errno`.
pub(crate) fn errno() -> i32 {
    // SAFETY: `__errno_location` always returns a valid pointer to this thread's errno.
    unsafe { *libc::__errno_location() }
}

/// Appends the text of error number `err` to `out`, from a fixed table. Never `strerror_r`:
/// it may translate through gettext, which takes glibc's locale lock — a hook running inside
/// `setlocale` (bash, Python at start-up) would then wait for itself forever.
pub(crate) fn push_strerror<const N: usize>(out: &mut TextBuf<N>, err: i32) {
    let text = strerror(err);
    if text.is_empty() {
        let _ = fmt::write(out, format_args!("errno {err}"));
    } else {
        out.push_bytes(text);
    }
}

/// The text of error number `err` from the fixed table of [`push_strerror`] (empty when the
/// table does not have it).
pub(crate) fn strerror(err: i32) -> &'static [u8] {
    match err {
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

/// An all-zero `struct stat` (a valid value of the plain C struct).
pub(crate) fn zeroed_stat() -> libc::stat {
    // SAFETY: `stat` is a plain C struct for which all-zero bytes are a valid value.
    unsafe { core::mem::zeroed() }
}

/// The calling process's current `RLIMIT_FSIZE` in bytes (`u64::MAX`: unlimited or unknown).
/// Read at every use: the program may change it.
#[allow(clippy::unnecessary_cast)] // `rlim_t` is not u64 on every target
pub(crate) fn file_size_limit() -> u64 {
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `rl` is writable.
    if unsafe { libc::getrlimit(libc::RLIMIT_FSIZE, &mut rl) } != 0
        || rl.rlim_cur == libc::RLIM_INFINITY
    {
        return u64::MAX;
    }
    rl.rlim_cur as u64
}

/// `mmap` as a raw system call: the probe exports its own `mmap` hook, and the symbol `mmap`
/// called from inside the probe would reach it (the runtime's mappings are not the program's
/// events). Returns `None` on failure.
pub fn raw_mmap(len: usize, prot: i32, flags: i32, fd: i32, off: i64) -> Option<*mut u8> {
    // SAFETY: a new mapping at an address of the kernel's choice (no MAP_FIXED), so no existing
    // memory is affected; the result is checked.
    let r = unsafe {
        libc::syscall(
            libc::SYS_mmap,
            core::ptr::null_mut::<c_void>(),
            len,
            prot,
            flags,
            fd,
            off,
        )
    };
    if r < 0 && r > -4096 {
        None
    } else {
        Some(r as *mut u8)
    }
}

/// Zeroed anonymous private memory of `len` bytes, mapped with a raw system call (pages are
/// touched lazily). `None` on failure.
pub fn map_anon(len: usize) -> Option<*mut u8> {
    raw_mmap(
        len,
        libc::PROT_READ | libc::PROT_WRITE,
        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
        -1,
        0,
    )
}

/// `munmap` as a raw system call (see [`raw_mmap`]).
///
/// # Safety
/// `[p, p + len)` is a mapping of this process that nothing uses any more.
pub unsafe fn raw_munmap(p: *mut u8, len: usize) {
    // SAFETY: per the contract.
    unsafe { libc::syscall(libc::SYS_munmap, p, len) };
}

/// Blocks every asynchronous signal of the calling thread; returns the previous mask for
/// [`restore_signals`]. Synchronous ones (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS) stay
/// deliverable: blocking them would only turn a fault into a kill.
pub(crate) fn block_signals() -> libc::sigset_t {
    // SAFETY: all-zero bytes are a valid `sigset_t`; the calls only write the sets we own.
    unsafe {
        let mut all: libc::sigset_t = core::mem::zeroed();
        let mut old: libc::sigset_t = core::mem::zeroed();
        libc::sigfillset(&mut all);
        for s in [
            libc::SIGSEGV,
            libc::SIGBUS,
            libc::SIGFPE,
            libc::SIGILL,
            libc::SIGTRAP,
            libc::SIGSYS,
        ] {
            libc::sigdelset(&mut all, s);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, &mut old);
        old
    }
}

/// Restores the mask saved by [`block_signals`] (pending signals are delivered now).
pub(crate) fn restore_signals(old: &libc::sigset_t) {
    // SAFETY: `old` is a mask returned by `block_signals`.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, old, core::ptr::null_mut()) };
}
