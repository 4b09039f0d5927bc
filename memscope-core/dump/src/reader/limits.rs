//! Bounds on what a reader reads, counted on the bytes actually read (never on `st_size`,
//! which is 0 for `/proc` files and says nothing about a file that grows): the whole input,
//! the header record and any one record. Memory stays bounded whatever the file holds: a
//! sparse gigabyte of NULs or an endless procfs file fails after at most one record's bound.

use std::io::{self, Read};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

/// Largest input read (msMemScope's limit for offline inputs), in bytes read.
pub const MAX_INPUT_BYTES: u64 = 8 << 30;
/// Largest header record of a CSV dump (a real one is about 120 bytes).
pub const MAX_HEADER_BYTES: u64 = 1 << 20;
/// Largest record (row) of a CSV dump, and largest row of a `.db` (`SQLITE_LIMIT_LENGTH`):
/// any cell, a 50 MB call stack or Attr included, fits.
pub const MAX_RECORD_BYTES: u64 = 64 << 20;
/// Read-ahead of the CSV parser: a record can hold this much more than its bound before the
/// bound trips.
pub const READ_BUFFER: usize = 1 << 20;

/// Which bound was hit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bound {
    /// The whole input ([`MAX_INPUT_BYTES`]).
    Input,
    /// The current record ([`MAX_HEADER_BYTES`] or [`MAX_RECORD_BYTES`]).
    Record,
}

/// The error a [`Bounded`] reader returns past a bound (inside an [`io::Error`]).
#[derive(Debug)]
pub struct LimitHit(pub Bound);

impl std::fmt::Display for LimitHit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Bound::Input => write!(f, "more than {} GiB read", MAX_INPUT_BYTES >> 30),
            Bound::Record => write!(f, "record too long"),
        }
    }
}

impl std::error::Error for LimitHit {}

/// The bound hit, if `e` is a [`LimitHit`].
pub fn limit_hit(e: &io::Error) -> Option<Bound> {
    e.get_ref()
        .and_then(|i| i.downcast_ref::<LimitHit>())
        .map(|l| l.0)
}

/// What the reader has seen, shared with the parser that owns it.
#[derive(Debug, Default)]
pub struct ReadState {
    read: AtomicU64,
    allowed: AtomicU64,
    last: AtomicU8,
    eof: AtomicBool,
}

impl ReadState {
    /// Bytes read from the input so far.
    pub fn read(&self) -> u64 {
        self.read.load(Ordering::Relaxed)
    }

    /// Allows reading up to byte `until` (exclusive), capped at [`MAX_INPUT_BYTES`] + 1.
    pub fn allow_until(&self, until: u64) {
        self.allowed
            .store(until.min(MAX_INPUT_BYTES + 1), Ordering::Relaxed);
    }

    /// Whether the input has reported its end.
    pub fn eof(&self) -> bool {
        self.eof.load(Ordering::Relaxed)
    }

    /// The last byte read (0 before any).
    pub fn last_byte(&self) -> u8 {
        self.last.load(Ordering::Relaxed)
    }
}

/// A reader that stops with [`LimitHit`] at the allowed byte ([`ReadState::allow_until`]),
/// and records the byte count, the last byte and the end of the input.
pub struct Bounded<R> {
    inner: R,
    state: Arc<ReadState>,
}

impl<R: Read> Bounded<R> {
    /// Wraps `inner`, allowing `first` bytes until the owner allows more.
    pub fn new(inner: R, first: u64) -> (Bounded<R>, Arc<ReadState>) {
        let state = Arc::new(ReadState::default());
        state.allow_until(first);
        (
            Bounded {
                inner,
                state: state.clone(),
            },
            state,
        )
    }
}

impl<R: Read> Read for Bounded<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let s = &self.state;
        let read = s.read();
        let allowed = s.allowed.load(Ordering::Relaxed);
        if read >= allowed {
            let which = if read > MAX_INPUT_BYTES {
                Bound::Input
            } else {
                Bound::Record
            };
            return Err(io::Error::other(LimitHit(which)));
        }
        let room = usize::try_from(allowed - read).unwrap_or(usize::MAX);
        let n = buf.len().min(room);
        let got = self.inner.read(&mut buf[..n])?;
        if got == 0 && n > 0 {
            s.eof.store(true, Ordering::Relaxed);
        } else if got > 0 {
            s.read.fetch_add(got as u64, Ordering::Relaxed);
            s.last.store(buf[got - 1], Ordering::Relaxed);
        }
        Ok(got)
    }
}

/// Reads at most `limit` bytes of `r` into a string, failing when there are more (config
/// files and other small inputs: memory is bounded by `limit`, whatever `st_size` says).
///
/// # Errors
/// I/O, invalid UTF-8, or more than `limit` bytes (`ErrorKind::FileTooLarge`-like
/// [`io::ErrorKind::InvalidData`] with the limit in the message).
pub fn read_to_string_capped(r: impl Read, limit: u64) -> io::Result<String> {
    let mut buf = Vec::new();
    // one page more than the limit, not one byte: some procfs files (pagemap) refuse reads
    // that are not a multiple of 8 bytes
    r.take(limit + 4096).read_to_end(&mut buf)?;
    if buf.len() as u64 > limit {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("larger than {}", human(limit)),
        ));
    }
    String::from_utf8(buf).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "stream did not contain valid UTF-8",
        )
    })
}

/// Reads a whole regular file of a real size (an executable, a shared library): at most its
/// `st_size` bytes and at most `max`, opened without blocking (a FIFO or device is refused), so
/// a `/proc` file (size 0, endless content) reads as empty instead of filling memory.
///
/// # Errors
/// Missing, unreadable, not a regular file, or larger than `max`.
pub fn read_file_by_size(path: &std::path::Path, max: u64) -> io::Result<Vec<u8>> {
    let (f, len) = super::open_regular_io(path)?;
    if len > max {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("larger than {}", human(max)),
        ));
    }
    let mut buf = Vec::with_capacity(len as usize);
    f.take(len).read_to_end(&mut buf)?;
    Ok(buf)
}

/// `1 MiB`, `64 KiB`, `123 bytes`.
pub fn human(n: u64) -> String {
    if n >= 1 << 30 && n.is_multiple_of(1 << 30) {
        format!("{} GiB", n >> 30)
    } else if n >= 1 << 20 && n.is_multiple_of(1 << 20) {
        format!("{} MiB", n >> 20)
    } else if n >= 1 << 10 && n.is_multiple_of(1 << 10) {
        format!("{} KiB", n >> 10)
    } else {
        format!("{n} bytes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bounded_reader_stops_at_the_allowed_byte_of_an_endless_input() {
        let (mut b, st) = Bounded::new(io::repeat(0), 1000);
        let mut buf = vec![0u8; 4096];
        assert_eq!(b.read(&mut buf).unwrap(), 1000);
        let e = b.read(&mut buf).unwrap_err();
        assert_eq!(limit_hit(&e), Some(Bound::Record));
        st.allow_until(1500);
        assert_eq!(b.read(&mut buf).unwrap(), 500);
        assert_eq!(st.read(), 1500);
        assert!(!st.eof());
    }

    #[test]
    fn files_are_read_by_their_size_so_proc_files_are_empty() {
        let b = read_file_by_size(std::path::Path::new("/proc/self/pagemap"), 1 << 30).unwrap();
        assert!(b.is_empty());
        let e = read_file_by_size(std::path::Path::new("/dev/zero"), 1 << 30).unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
    }

    #[test]
    fn capped_reads_refuse_one_byte_more() {
        assert_eq!(read_to_string_capped(&b"abc"[..], 3).unwrap(), "abc");
        let e = read_to_string_capped(io::repeat(b' '), 1 << 20).unwrap_err();
        assert!(e.to_string().contains("larger than 1 MiB"), "{e}");
    }
}
