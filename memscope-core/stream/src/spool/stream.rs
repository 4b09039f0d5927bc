//! One process image's stream file, read through per-chunk cursors that decode lazily: a
//! cursor holds a small read window (`WINDOW` bytes, grown only for a record that does not fit)
//! and a run of at most 32 decoded records, so memory stays bounded whatever the file holds.
//! Safe code only: `pread` through `FileExt::read_at`.

use memscope_wire::{self as wire, ChunkState, Record};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// Bytes a cursor reads ahead of its decoding position.
pub const WINDOW: usize = 16 * 1024;

/// Records a cursor decodes at a time (a power of two).
const RUN: usize = 32;

/// Header fields of a stream file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StreamHeader {
    /// Process id.
    pub pid: u32,
    /// Parent process id.
    pub ppid: u32,
    /// Start time, ns since the epoch.
    pub start_ns: u64,
    /// Offset of the probe's monotonic clock to the epoch, ns.
    pub clock_offset: i64,
    /// Executable path.
    pub exe: String,
    /// The process's own rank environment ([`wire::FH_RANK_ENV`]): `(name, value)` pairs.
    pub rank_env: Vec<(String, String)>,
}

impl StreamHeader {
    /// The value of rank environment variable `name`, if the process had it.
    pub fn env(&self, name: &str) -> Option<&str> {
        self.rank_env
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The process's own `ASCEND_RT_VISIBLE_DEVICES` (logical index → physical id), if set.
    pub fn visible_devices(&self) -> Option<Vec<u32>> {
        self.env("ASCEND_RT_VISIBLE_DEVICES")
            .map(memscope_wire::probe_env::parse_visible_devices)
    }
}

fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes(b[off..off + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(b[off..off + 8].try_into().expect("8 bytes"))
}

/// Parses a stream file header (`FILE_HEADER_SIZE` bytes). `Ok(None)`: not written yet (no
/// magic).
///
/// # Errors
/// A header of another format version or chunk size, worded for the user.
pub fn parse_header(h: &[u8]) -> Result<Option<StreamHeader>, String> {
    if h.len() < wire::FILE_HEADER_SIZE || h[..8] != wire::STREAM_MAGIC {
        return Ok(None);
    }
    let version = u32_at(h, wire::FH_VERSION);
    let chunk = u32_at(h, wire::FH_CHUNK_SIZE) as usize;
    if version != wire::STREAM_VERSION || chunk != wire::CHUNK_SIZE {
        return Err(format!(
            "stream format {version} / chunk {chunk} not supported (this memscope reads {} / {})",
            wire::STREAM_VERSION,
            wire::CHUNK_SIZE
        ));
    }
    let exe = &h[wire::FH_EXE..wire::FH_EXE + wire::FH_EXE_LEN];
    let end = exe.iter().position(|&b| b == 0).unwrap_or(exe.len());
    Ok(Some(StreamHeader {
        pid: u32_at(h, wire::FH_PID),
        ppid: u32_at(h, wire::FH_PPID),
        start_ns: u64_at(h, wire::FH_START_NS),
        clock_offset: u64_at(h, wire::FH_CLOCK_OFFSET) as i64,
        exe: String::from_utf8_lossy(&exe[..end]).into_owned(),
        rank_env: wire::parse_rank_env(
            &h[wire::FH_RANK_ENV..wire::FH_RANK_ENV + wire::FH_RANK_ENV_LEN],
        ),
    }))
}

/// A record with where it came from.
#[derive(Clone, Debug, PartialEq)]
pub struct Sourced {
    /// Writer thread.
    pub tid: u32,
    /// Chunk index within the stream file.
    pub chunk: u32,
    /// Order within the stream: (chunk index << 32) | byte offset; breaks timestamp ties.
    pub seq: u64,
    /// The record with owned texts.
    pub rec: Record<Box<[u8]>>,
}

/// The highest pid Linux gives (`PID_MAX_LIMIT` on 64-bit kernels).
const PID_MAX_LIMIT: u32 = 4_194_304;

/// Cursor over one chunk.
#[derive(Default)]
pub(crate) struct Cursor {
    /// Payload bytes the probe has committed (as last read).
    committed: u32,
    /// Payload offset of `buf[0]`.
    buf_at: u32,
    /// Decoding position within `buf`.
    pos: usize,
    buf: Vec<u8>,
    state: ChunkState,
    tid: u32,
    sealed: bool,
    /// Chunk header seen (magic set).
    live: bool,
    /// Nothing more will come from this chunk (sealed and consumed, or corrupt).
    pub(crate) done: bool,
    /// The chunk did not decode; the rest of it is skipped.
    pub(crate) corrupt: bool,
    /// Decoded records waiting in the merge (`ProcessMerge`), oldest first: decoded
    /// [`RUN`] at a time, so a record is not read back right after it was written.
    pub(crate) ready: Ready,
}

/// A cursor's decoded records, oldest first: a ring of [`RUN`] slots, each written where it
/// lies (a record built aside and copied in is read back before its stores land, which
/// stalls).
#[derive(Default)]
pub(crate) struct Ready {
    slots: Vec<Option<Sourced>>,
    head: usize,
    len: usize,
}

impl Ready {
    #[inline(always)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    #[inline(always)]
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The oldest record.
    #[inline(always)]
    pub(crate) fn front(&self) -> Option<&Sourced> {
        if self.len == 0 {
            return None;
        }
        self.slots[self.head].as_ref()
    }

    /// Takes the oldest record.
    #[inline(always)]
    pub(crate) fn pop_front(&mut self) -> Option<Sourced> {
        if self.len == 0 {
            return None;
        }
        let s = self.slots[self.head].take();
        self.head = (self.head + 1) % RUN;
        self.len -= 1;
        s
    }

    /// The oldest record's slot, to be read where it lies or taken, then passed by with
    /// [`Ready::discard_front`].
    #[inline(always)]
    pub(crate) fn front_slot(&mut self) -> Option<&mut Option<Sourced>> {
        if self.len == 0 {
            return None;
        }
        Some(&mut self.slots[self.head])
    }

    /// Drops the oldest record (or what the lender left of it) in its slot.
    #[inline(always)]
    pub(crate) fn discard_front(&mut self) {
        if self.len == 0 {
            return;
        }
        self.slots[self.head] = None;
        self.head = (self.head + 1) % RUN;
        self.len -= 1;
    }

    /// Appends the record `make` builds; the caller keeps `len() < RUN`. It is built in its
    /// slot, which is empty (nothing to drop first).
    #[inline(always)]
    fn push_back(&mut self, make: impl FnOnce() -> Sourced) {
        if self.slots.is_empty() {
            self.slots.resize_with(RUN, || None);
        }
        let slot = &mut self.slots[(self.head + self.len) % RUN];
        // the slots past the queue's end are empty: pops and discards empty theirs
        debug_assert!(slot.is_none() && self.len < RUN);
        if slot.is_none() {
            // the slot is empty: nothing to drop (assigning would call the drop glue)
            std::mem::forget(slot.replace(make()));
            self.len += 1;
        }
    }

    /// Appends the record `rec` builds, written by thread `tid` at payload offset `at` of
    /// chunk `idx`.
    #[inline(always)]
    fn push_record(&mut self, tid: u32, idx: usize, at: u32, rec: impl FnOnce() -> Record) {
        self.push_back(|| Sourced {
            tid,
            chunk: idx as u32,
            seq: ((idx as u64) << 32) | at as u64,
            rec: rec(),
        });
    }

    /// Drops the slots of a finished chunk.
    fn release(&mut self) {
        if self.len == 0 {
            self.slots = Vec::new();
        }
    }
}

impl Cursor {
    fn consumed(&self) -> u32 {
        self.buf_at + self.pos as u32
    }
}

/// Follows one stream file.
pub struct StreamFile {
    path: PathBuf,
    file: File,
    header: Option<StreamHeader>,
    pub(crate) chunks: Vec<Cursor>,
    /// Consumed chunks are punched out ([`StreamFile::punch_consumed`]).
    punch: bool,
}

impl StreamFile {
    /// Opens a stream file for reading.
    ///
    /// # Errors
    /// The file cannot be opened.
    pub fn open(path: &Path) -> std::io::Result<StreamFile> {
        Ok(StreamFile {
            path: path.to_path_buf(),
            file: File::open(path)?,
            header: None,
            chunks: Vec::new(),
            punch: false,
        })
    }

    /// Frees the disk blocks of each chunk once it is sealed and read (`--keep`, issue 38:
    /// a job of any length then keeps only its unread chunks on disk). The file keeps its
    /// size; a punched chunk reads as zeros, so a later reader (`memscope recover`) finds it
    /// empty.
    ///
    /// # Errors
    /// The file cannot be opened for writing.
    pub fn punch_consumed(&mut self) -> std::io::Result<()> {
        self.file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&self.path)?;
        self.punch = true;
        Ok(())
    }

    /// Punches chunk `idx` out of the file, if asked and done with.
    fn punch(&self, idx: usize) {
        use std::os::fd::AsRawFd;
        if !self.punch {
            return;
        }
        let flags = nix::fcntl::FallocateFlags::FALLOC_FL_PUNCH_HOLE
            | nix::fcntl::FallocateFlags::FALLOC_FL_KEEP_SIZE;
        // a file system without hole punching keeps the chunk: nothing lost, only room
        let _ = nix::fcntl::fallocate(
            self.file.as_raw_fd(),
            flags,
            Self::chunk_base(idx) as i64,
            wire::CHUNK_SIZE as i64,
        );
    }

    /// Path of the stream file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The header, once the probe has written it.
    ///
    /// # Errors
    /// Read failure, a stream of another format version, or a damaged header (a pid that is
    /// no Linux pid, or not the one the file is named after).
    pub fn header(&mut self) -> std::io::Result<Option<&StreamHeader>> {
        if self.header.is_none() {
            let mut h = vec![0u8; wire::FILE_HEADER_SIZE];
            let n = read_full(&self.file, &mut h, 0)?;
            h.truncate(n);
            let h = parse_header(&h).map_err(|e| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("{}: {e}", self.path.display()),
                )
            })?;
            // the probe names its stream after its pid: a header naming another, or no Linux
            // pid at all, is damaged (its pid and start time would name the outputs)
            let named = self
                .path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(super::pid_of_stream_name);
            let wrong = h.as_ref().and_then(|h| match named {
                _ if h.pid == 0 || h.pid > PID_MAX_LIMIT => {
                    Some(format!("pid {} is no Linux pid", h.pid))
                }
                Some(pid) if h.pid != pid => {
                    Some(format!("it names pid {}, the file pid {pid}", h.pid))
                }
                _ => None,
            });
            if let Some(what) = wrong {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("{}: damaged stream header: {what}", self.path.display()),
                ));
            }
            self.header = h;
        }
        Ok(self.header.as_ref())
    }

    /// The header if already read.
    pub fn known_header(&self) -> Option<&StreamHeader> {
        self.header.as_ref()
    }

    /// Events the probe could not record (read live from the header).
    ///
    /// # Errors
    /// Read failure.
    pub fn dropped(&self) -> std::io::Result<u64> {
        let mut b = [0u8; 8];
        self.file.read_exact_at(&mut b, wire::FH_DROPPED as u64)?;
        Ok(u64::from_le_bytes(b))
    }

    /// Header flags (`wire::FLAG_*`).
    ///
    /// # Errors
    /// Read failure.
    pub fn flags(&self) -> std::io::Result<u32> {
        let mut b = [0u8; 4];
        self.file.read_exact_at(&mut b, wire::FH_FLAGS as u64)?;
        Ok(u32::from_le_bytes(b))
    }

    /// The status the process passed to `exit`, once the probe saw it exit
    /// ([`wire::FLAG_EXITED`], [`wire::FH_EXIT_STATUS`]); `None` while it runs or when it
    /// ended otherwise (a signal, `_exit` past the C library).
    ///
    /// # Errors
    /// Read failure.
    pub fn exit_status(&self) -> std::io::Result<Option<i32>> {
        if self.flags()? & wire::FLAG_EXITED == 0 {
            return Ok(None);
        }
        let mut b = [0u8; 4];
        self.file
            .read_exact_at(&mut b, wire::FH_EXIT_STATUS as u64)?;
        Ok(Some(i32::from_le_bytes(b)))
    }

    /// Whether the writing process is gone (its `flock` is released at death or exec).
    pub fn writer_gone(&self) -> bool {
        match self.file.try_lock() {
            Ok(()) => {
                let _ = self.file.unlock();
                true
            }
            Err(std::fs::TryLockError::WouldBlock) => false,
            Err(std::fs::TryLockError::Error(_)) => true,
        }
    }

    /// Bytes past the last whole chunk. The probe grows its stream a whole chunk at a time, so
    /// anything but 0 means the file was cut short inside a chunk (a truncated copy), whose
    /// part is never read.
    ///
    /// # Errors
    /// `stat` failure.
    pub fn partial_chunk_bytes(&self) -> std::io::Result<u64> {
        let len = self.file.metadata()?.len();
        let body = len.saturating_sub(wire::FILE_HEADER_SIZE as u64);
        Ok(body % wire::CHUNK_SIZE as u64)
    }

    /// Chunks that did not decode (the rest of each was skipped).
    pub fn corrupt_chunks(&self) -> u64 {
        self.chunks.iter().filter(|c| c.corrupt).count() as u64
    }

    /// Adds cursors for chunks the file has grown to hold. Returns the index of the first new
    /// one.
    ///
    /// # Errors
    /// `stat` failure.
    pub(crate) fn discover_chunks(&mut self) -> std::io::Result<usize> {
        let first = self.chunks.len();
        if self.header.is_none() {
            return Ok(first);
        }
        let len = self.file.metadata()?.len() as usize;
        let n = len.saturating_sub(wire::FILE_HEADER_SIZE) / wire::CHUNK_SIZE;
        while self.chunks.len() < n {
            self.chunks.push(Cursor::default());
        }
        Ok(first)
    }

    fn chunk_base(idx: usize) -> u64 {
        (wire::FILE_HEADER_SIZE + idx * wire::CHUNK_SIZE) as u64
    }

    /// Re-reads chunk `idx`'s header (magic, committed length, sealed flag).
    fn refresh(&mut self, idx: usize) -> std::io::Result<()> {
        let mut h = [0u8; 16];
        let n = read_full(&self.file, &mut h, Self::chunk_base(idx))?;
        let c = &mut self.chunks[idx];
        if n < 16 || u32_at(&h, wire::CH_MAGIC) != wire::CHUNK_MAGIC {
            return Ok(());
        }
        c.live = true;
        // Sealed is read before committed is used: the probe seals after its last commit.
        c.sealed = u32_at(&h, wire::CH_SEALED) != 0;
        c.committed = u32_at(&h, wire::CH_COMMITTED)
            .min(wire::CHUNK_PAYLOAD as u32)
            .max(c.committed);
        Ok(())
    }

    /// Decodes up to [`RUN`] more records of chunk `idx` into its `ready` queue, reading more
    /// of the chunk as needed; returns whether the queue holds any. `Thread` records are
    /// absorbed (they set the writer). `writer_gone`: a chunk that is not sealed and has
    /// nothing more committed will never get more, so it is done.
    ///
    /// # Errors
    /// Read failure of the file.
    pub(crate) fn next_record(&mut self, idx: usize, writer_gone: bool) -> std::io::Result<bool> {
        loop {
            let c = &mut self.chunks[idx];
            if c.done {
                // a finished chunk keeps no slots once its last record is out
                c.ready.release();
                return Ok(!c.ready.is_empty());
            }
            if c.ready.len() >= RUN {
                return Ok(true);
            }
            if c.pos >= c.buf.len() && c.consumed() >= c.committed {
                if !c.ready.is_empty() {
                    return Ok(true);
                }
                self.refresh(idx)?;
                let c = &mut self.chunks[idx];
                if c.consumed() >= c.committed {
                    if (c.live && c.sealed) || writer_gone {
                        let sealed = c.live && c.sealed;
                        c.done = true;
                        c.buf = Vec::new();
                        if sealed {
                            self.punch(idx);
                        }
                    }
                    return Ok(false);
                }
            }
            let c = &mut self.chunks[idx];
            if let Some((h, used)) = wire::decode_host(&c.buf[c.pos..], &mut c.state) {
                let at = c.consumed();
                c.pos += used;
                c.ready.push_record(c.tid, idx, at, || h.record());
                continue;
            }
            match wire::decode(&c.buf[c.pos..], &mut c.state) {
                Ok((Record::Thread { tid }, used)) => {
                    c.pos += used;
                    c.tid = tid;
                }
                Ok((rec, used)) => {
                    let at = c.consumed();
                    c.pos += used;
                    c.ready.push_record(c.tid, idx, at, || rec.to_owned());
                }
                Err(_) if !c.ready.is_empty() => return Ok(true),
                Err(wire::WireError::Truncated)
                    if c.consumed() + (c.buf.len() - c.pos) as u32 >= c.committed =>
                {
                    // Everything committed is in the buffer but ends inside a record: more
                    // may be committed now.
                    let before = c.committed;
                    self.refresh(idx)?;
                    let c = &mut self.chunks[idx];
                    if c.committed == before {
                        if c.sealed || writer_gone {
                            c.corrupt = c.pos < c.buf.len();
                            c.done = true;
                            c.buf = Vec::new();
                        }
                        return Ok(false);
                    }
                    self.fill(idx)?;
                }
                Err(wire::WireError::Truncated) => self.fill(idx)?,
                Err(_) => {
                    c.corrupt = true;
                    c.done = true;
                    c.buf = Vec::new();
                    return Ok(false);
                }
            }
        }
    }

    /// Moves the unconsumed bytes of chunk `idx`'s window to its start and reads up to
    /// `WINDOW` more committed bytes (the window grows only if one record is larger).
    fn fill(&mut self, idx: usize) -> std::io::Result<()> {
        let base = Self::chunk_base(idx) + wire::CHUNK_HEADER_SIZE as u64;
        let c = &mut self.chunks[idx];
        let keep = c.buf.len() - c.pos;
        c.buf.drain(..c.pos);
        c.buf_at += c.pos as u32;
        c.pos = 0;
        let have_end = c.buf_at + keep as u32;
        let want = (c.committed - have_end) as usize;
        let room = WINDOW.saturating_sub(keep).max(keep.max(256)).min(want);
        let old = c.buf.len();
        c.buf.resize(old + room, 0);
        let n = read_full(&self.file, &mut c.buf[old..], base + have_end as u64)?;
        c.buf.truncate(old + n);
        if n == 0 {
            // The file is shorter than its committed length says (truncated copy).
            c.corrupt = true;
            c.done = true;
            c.buf = Vec::new();
        }
        Ok(())
    }
}

fn read_full(f: &File, buf: &mut [u8], mut off: u64) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read_at(&mut buf[n..], off) {
            Ok(0) => break,
            Ok(k) => {
                n += k;
                off += k as u64;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}
