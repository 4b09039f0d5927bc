//! The per-process stream file: creation, the mapped header, chunk allocation, the free list of
//! partly filled chunks, and the fork reset.
//!
//! Layout and field offsets are `memscope_core::wire`'s (`FH_*`, `CH_*`). One file per process
//! image: `<spool>/<pid>-<start_ns>.stream`, created `O_CREAT|O_EXCL|O_CLOEXEC`, mode 0600, and
//! `flock(LOCK_EX)`-ed for the life of the process so the collector can detect its death by
//! try-locking. The header page stays mapped (`MAP_SHARED`) for the dropped-event counter and
//! flags; each chunk is `posix_fallocate`d then mapped on its own when a thread takes it.

use crate::clock;
use crate::settings;
use crate::sys::{errno, push_strerror, stderr_write, FixedBuf};
use core::fmt::Write;
use core::ptr::null_mut;
use core::sync::atomic::{
    fence, AtomicI32, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};
use memscope_core::wire::{
    ChunkState, CHUNK_MAGIC, CHUNK_SIZE, CH_COMMITTED, CH_MAGIC, CH_SEALED, FH_CHUNK_SIZE,
    FH_CLOCK_OFFSET, FH_DROPPED, FH_EXE, FH_EXE_LEN, FH_FLAGS, FH_MAGIC, FH_PID, FH_PPID,
    FH_START_NS, FH_VERSION, FILE_HEADER_SIZE, STREAM_MAGIC, STREAM_VERSION,
};

#[cfg(target_endian = "big")]
compile_error!("the stream format is little-endian; big-endian hosts are not supported");

const NONE: u8 = 0;
const OPENING: u8 = 1;
const OPEN: u8 = 2;
const FAILED: u8 = 3;

/// Lifecycle of the current process's stream.
static STATE: AtomicU8 = AtomicU8::new(NONE);
/// Stream generation: bumped in a fork child so chunks of the parent's stream are abandoned.
/// Starts at 1 so a thread state holding 0 means "no chunk yet".
static GEN: AtomicU32 = AtomicU32::new(1);
static FD: AtomicI32 = AtomicI32::new(-1);
static HEADER: AtomicPtr<u8> = AtomicPtr::new(null_mut());
static NEXT_CHUNK: AtomicU64 = AtomicU64::new(0);
/// Drops counted while no header was mapped; moved into the header when one is.
static PENDING_DROPS: AtomicU64 = AtomicU64::new(0);
/// `FILE_HEADER_SIZE % page_size`: chunk offsets are page-aligned minus this on hosts whose
/// page is larger than the 4 KiB header (0 on x86_64).
static PAGE_DELTA: AtomicUsize = AtomicUsize::new(0);
static FILE_DEV: AtomicU64 = AtomicU64::new(0);
static FILE_INO: AtomicU64 = AtomicU64::new(0);
/// No new chunk is tried before this time (ns) after a failed reservation.
static RETRY_AT: AtomicU64 = AtomicU64::new(0);
/// Back-off after a failed `posix_fallocate` (disk full).
const RETRY_NS: u64 = 50_000_000;
/// Bytes of the exe path actually used.
const EXE_MAX: usize = FH_EXE_LEN - 1;

/// Measures the page size; called once at init.
pub(crate) fn init_page() {
    // SAFETY: `sysconf` has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    let page = if page > 0 { page as usize } else { 4096 };
    PAGE_DELTA.store(FILE_HEADER_SIZE % page, Ordering::Relaxed);
}

/// Current stream generation.
#[inline]
pub(crate) fn gen() -> u32 {
    GEN.load(Ordering::Acquire)
}

/// The generation of an open stream, opening it first if none exists yet (a fork child opens
/// its own lazily, on its first record). `None`: no usable stream (opening elsewhere, failed).
#[inline]
pub(crate) fn open_gen() -> Option<u32> {
    match STATE.load(Ordering::Acquire) {
        OPEN => Some(GEN.load(Ordering::Acquire)),
        NONE => open_slow(),
        _ => None,
    }
}

#[cold]
fn open_slow() -> Option<u32> {
    if STATE
        .compare_exchange(NONE, OPENING, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        return (STATE.load(Ordering::Acquire) == OPEN).then(|| GEN.load(Ordering::Acquire));
    }
    if create() {
        STATE.store(OPEN, Ordering::Release);
        Some(GEN.load(Ordering::Acquire))
    } else {
        STATE.store(FAILED, Ordering::Release);
        None
    }
}

/// Opens the stream at init; `false` if it could not be created (one line was printed).
pub(crate) fn open_at_init() -> bool {
    open_gen().is_some()
}

fn push_num<const N: usize>(b: &mut FixedBuf<N>, v: u64) {
    let _ = write!(b, "{v}");
}

/// Pid that already printed its "not traced" line: a process whose stream cannot be made
/// retries (with back-off) on later records, but says so once.
static FAIL_REPORTED_BY: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

fn fail_line(what: &[u8], path: &[u8], err: i32) {
    // SAFETY: getpid has no preconditions and cannot fail.
    let pid = unsafe { libc::getpid() };
    if FAIL_REPORTED_BY.swap(pid, std::sync::atomic::Ordering::Relaxed) == pid {
        return;
    }
    let mut m = FixedBuf::<4400>::new();
    m.push(b"memscope: ");
    m.push(what);
    m.push(b" ");
    m.push(path);
    m.push(b": ");
    push_strerror(&mut m, err);
    m.push(b"; this process is not traced\n");
    stderr_write(m.as_bytes());
}

/// Writes `v` little-endian at `off` of the mapped header.
///
/// # Safety
/// `h` is the mapped header (FILE_HEADER_SIZE writable bytes) and `off + 8 <= FILE_HEADER_SIZE`.
unsafe fn put_u64(h: *mut u8, off: usize, v: u64) {
    // SAFETY: in bounds per the contract; unaligned write is allowed for any offset.
    unsafe { h.add(off).cast::<u64>().write_unaligned(v.to_le()) }
}

/// As [`put_u64`] for a `u32`.
///
/// # Safety
/// As [`put_u64`], with `off + 4 <= FILE_HEADER_SIZE`.
unsafe fn put_u32(h: *mut u8, off: usize, v: u32) {
    // SAFETY: in bounds per the contract.
    unsafe { h.add(off).cast::<u32>().write_unaligned(v.to_le()) }
}

fn create() -> bool {
    let spool = settings::spool();
    // SAFETY: no preconditions.
    let pid = unsafe { libc::getpid() } as u32;
    // SAFETY: no preconditions.
    let ppid = unsafe { libc::getppid() } as u32;
    let mut start = clock::now_ns();

    // open(O_EXCL), retrying a few start stamps on a (theoretical) name clash.
    let mut path = FixedBuf::<4200>::new();
    let mut fd: i32 = -1;
    for _ in 0..8 {
        path = FixedBuf::new();
        path.push(spool);
        path.push(b"/");
        push_num(&mut path, pid as u64);
        path.push(b"-");
        push_num(&mut path, start);
        path.push(b".stream");
        let c = path.c_str();
        // SAFETY: `c` is NUL-terminated and lives in `path` for the call.
        fd = unsafe {
            libc::open(
                c,
                libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC,
                0o600,
            )
        };
        if fd >= 0 || errno() != libc::EEXIST {
            break;
        }
        start += 1;
    }
    if fd < 0 {
        fail_line(b"cannot create stream file", path.as_bytes(), errno());
        return false;
    }
    // (The descriptor is not moved to a high number: growing the fd table of a multi-threaded
    // process costs an RCU grace period — milliseconds during which other threads' hooks
    // would forward unrecorded.)
    let undo = |fd: i32, what: &[u8], err: i32| {
        fail_line(what, path.as_bytes(), err);
        let mut p2 = FixedBuf::<4200>::new();
        p2.push(path.as_bytes());
        // SAFETY: `p2` holds a NUL-terminated copy of the path; `fd` is ours.
        unsafe {
            libc::unlink(p2.c_str());
            libc::close(fd);
        }
    };
    // Lock without blocking the target for long: the collector only try-locks briefly.
    let mut locked = false;
    for i in 0..2000 {
        // SAFETY: `fd` is open.
        if unsafe { libc::flock(fd, libc::LOCK_EX | libc::LOCK_NB) } == 0 {
            locked = true;
            break;
        }
        if i > 100 {
            // SAFETY: no preconditions.
            unsafe { libc::usleep(100) };
        } else {
            // SAFETY: no preconditions.
            unsafe { libc::sched_yield() };
        }
    }
    if !locked {
        undo(fd, b"cannot lock stream file", errno());
        return false;
    }
    // SAFETY: `fd` is open; the range is the header.
    let rc = unsafe { libc::posix_fallocate(fd, 0, FILE_HEADER_SIZE as libc::off_t) };
    if rc != 0 {
        undo(fd, b"cannot reserve space in stream file", rc);
        return false;
    }
    // SAFETY: mapping the first FILE_HEADER_SIZE bytes of our file, which exist (fallocate).
    let h = unsafe {
        libc::mmap(
            null_mut(),
            FILE_HEADER_SIZE,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd,
            0,
        )
    };
    if h == libc::MAP_FAILED {
        undo(fd, b"cannot map stream file", errno());
        return false;
    }
    let h = h.cast::<u8>();
    let mut st: libc::stat = unsafe_zeroed_stat();
    // SAFETY: `st` is writable; `fd` is open.
    if unsafe { libc::fstat(fd, &mut st) } == 0 {
        FILE_DEV.store(st.st_dev, Ordering::Relaxed);
        FILE_INO.store(st.st_ino, Ordering::Relaxed);
    }

    let mut exe = [0u8; EXE_MAX];
    // SAFETY: `exe` is writable for EXE_MAX bytes; the path literal is NUL-terminated.
    let n = unsafe { libc::readlink(c"/proc/self/exe".as_ptr(), exe.as_mut_ptr().cast(), EXE_MAX) };
    let n = if n > 0 { n as usize } else { 0 };
    let offset = clock::offset();
    // SAFETY: `h` maps FILE_HEADER_SIZE writable bytes; every offset below is within it
    // (FH_EXE + FH_EXE_LEN <= FILE_HEADER_SIZE by the wire layout).
    unsafe {
        put_u32(h, FH_VERSION, STREAM_VERSION);
        put_u32(h, FH_CHUNK_SIZE, CHUNK_SIZE as u32);
        put_u32(h, FH_PID, pid);
        put_u32(h, FH_PPID, ppid);
        put_u64(h, FH_START_NS, start);
        put_u32(h, FH_FLAGS, 0);
        put_u64(h, FH_CLOCK_OFFSET, offset as u64);
        core::ptr::copy_nonoverlapping(exe.as_ptr(), h.add(FH_EXE), n);
        put_u64(h, FH_DROPPED, PENDING_DROPS.swap(0, Ordering::Relaxed));
    }
    fence(Ordering::Release);
    // SAFETY: FH_MAGIC (0) is 8-aligned in a page-aligned mapping; the magic is published last,
    // with release ordering, so a reader that sees it sees every field above.
    unsafe {
        (*h.add(FH_MAGIC).cast::<AtomicU64>())
            .store(u64::from_le_bytes(STREAM_MAGIC), Ordering::Release)
    };

    NEXT_CHUNK.store(0, Ordering::Relaxed);
    FD.store(fd, Ordering::Release);
    HEADER.store(h, Ordering::Release);
    true
}

fn unsafe_zeroed_stat() -> libc::stat {
    // SAFETY: `stat` is a plain C struct for which all-zero bytes are a valid value.
    unsafe { core::mem::zeroed() }
}

/// Adds `n` to the stream's dropped-event counter (`FH_DROPPED`, visible to the collector even
/// after SIGKILL); kept aside until a header exists.
pub(crate) fn count_drop(n: u64) {
    let h = HEADER.load(Ordering::Acquire);
    if h.is_null() {
        PENDING_DROPS.fetch_add(n, Ordering::Relaxed);
    } else {
        // SAFETY: the header stays mapped while HEADER points at it (only a fork child, single
        // threaded, unmaps it); FH_DROPPED is 8-aligned.
        unsafe { (*h.add(FH_DROPPED).cast::<AtomicU64>()).fetch_add(n, Ordering::Relaxed) };
    }
}

/// Sets `flag` in the header's `FH_FLAGS` (no-op without a stream).
pub(crate) fn set_flag(flag: u32) {
    let h = HEADER.load(Ordering::Acquire);
    if !h.is_null() {
        // SAFETY: as in `count_drop`; FH_FLAGS is 4-aligned.
        unsafe { (*h.add(FH_FLAGS).cast::<AtomicU32>()).fetch_or(flag, Ordering::Relaxed) };
    }
}

/// The committed-length word of a chunk.
///
/// # Safety
/// `base` is the start of a mapped chunk that stays mapped for `'a`.
#[inline]
pub(crate) unsafe fn committed<'a>(base: *mut u8) -> &'a AtomicU32 {
    // SAFETY: CH_COMMITTED is 4-aligned in the page-aligned (+delta, itself 4-aligned) chunk.
    unsafe { &*base.add(CH_COMMITTED).cast::<AtomicU32>() }
}

fn check_fd(fd: i32) -> bool {
    let mut st = unsafe_zeroed_stat();
    // SAFETY: `st` is writable.
    let ok = unsafe { libc::fstat(fd, &mut st) } == 0;
    ok && st.st_dev == FILE_DEV.load(Ordering::Relaxed)
        && st.st_ino == FILE_INO.load(Ordering::Relaxed)
}

/// Takes a fresh chunk: reserves it with `posix_fallocate`, maps it, initialises its header
/// (committed = 0, sealed = 0, then the magic with a release store). Returns its base, or
/// `None` (disk full — then no retry for 50 ms —, map failure, stream gone); the caller counts
/// a drop. Chunk indexes are dense: only a mapping failure after the reservation leaves a
/// chunk whose magic stays 0.
pub(crate) fn new_chunk() -> Option<*mut u8> {
    let fd = FD.load(Ordering::Acquire);
    if fd < 0 {
        return None;
    }
    if !check_fd(fd) {
        // The program closed (and maybe reused) our descriptor: stop rather than write into
        // someone else's file.
        if STATE.swap(FAILED, Ordering::AcqRel) == OPEN {
            stderr_write(
                b"memscope: the program closed the stream file descriptor; recording stops\n",
            );
        }
        return None;
    }
    let now = clock::now_ns();
    if now < RETRY_AT.load(Ordering::Relaxed) {
        return None;
    }
    // Reserve first, then claim the index: a failed reservation leaves no hole in the chunk
    // sequence and does not push later chunks further out (no sparse growth on a full disk).
    // Two threads may reserve the same range concurrently; fallocate is idempotent, the CAS
    // loser moves on to the next index.
    let mut i = NEXT_CHUNK.load(Ordering::Relaxed);
    let off = loop {
        let off = (FILE_HEADER_SIZE as u64).checked_add(i.checked_mul(CHUNK_SIZE as u64)?)?;
        let off = libc::off_t::try_from(off).ok()?;
        // SAFETY: `fd` is our open stream file.
        let rc = unsafe { libc::posix_fallocate(fd, off, CHUNK_SIZE as libc::off_t) };
        if rc != 0 {
            // Disk full (or quota): drop for a while without further syscalls.
            RETRY_AT.store(now.saturating_add(RETRY_NS), Ordering::Relaxed);
            return None;
        }
        match NEXT_CHUNK.compare_exchange(i, i + 1, Ordering::AcqRel, Ordering::Relaxed) {
            Ok(_) => break off,
            Err(cur) => i = cur,
        }
    };
    let delta = PAGE_DELTA.load(Ordering::Relaxed);
    // SAFETY: mapping [off - delta, off + CHUNK_SIZE) of our file, which now exists; the offset
    // is page-aligned by construction of `delta`.
    let m = unsafe {
        libc::mmap(
            null_mut(),
            CHUNK_SIZE + delta,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd,
            off - delta as libc::off_t,
        )
    };
    if m == libc::MAP_FAILED {
        return None;
    }
    // SAFETY: `delta < page <= mapping length`.
    let base = unsafe { m.cast::<u8>().add(delta) };
    // SAFETY: `base` starts a freshly mapped chunk of CHUNK_SIZE bytes; the header words are
    // 4-aligned; nobody else writes this chunk (its index came from fetch_add).
    unsafe {
        committed(base).store(0, Ordering::Relaxed);
        (*base.add(CH_SEALED).cast::<AtomicU32>()).store(0, Ordering::Relaxed);
        (*base.add(CH_MAGIC).cast::<AtomicU32>()).store(CHUNK_MAGIC, Ordering::Release);
    }
    Some(base)
}

/// Marks a chunk sealed (the writer moved on; nothing more will be appended) and unmaps it.
///
/// # Safety
/// `base` came from [`new_chunk`] of the current stream and is not used afterwards.
pub(crate) unsafe fn seal_and_unmap(base: *mut u8) {
    // SAFETY: `base` is a mapped chunk per the contract.
    unsafe { (*base.add(CH_SEALED).cast::<AtomicU32>()).store(1, Ordering::Release) };
    // SAFETY: as above.
    unsafe { unmap(base) };
}

/// Unmaps a chunk without touching it.
///
/// # Safety
/// `base` came from [`new_chunk`] (this process image) and is not used afterwards.
pub(crate) unsafe fn unmap(base: *mut u8) {
    let delta = PAGE_DELTA.load(Ordering::Relaxed);
    // SAFETY: the mapping started `delta` bytes before `base` and spans CHUNK_SIZE + delta.
    unsafe { libc::munmap(base.sub(delta).cast(), CHUNK_SIZE + delta) };
}

// ---- free list of partly filled chunks -------------------------------------------------------

/// Chunks a thread left behind at exit, ready to be continued by another thread (so a program
/// that starts many short threads keeps filling the same few chunks and mappings). Fixed array
/// of slots, each a tiny state machine; no allocation, no locks, no waiting.
const FREE_SLOTS: usize = 64;
const EMPTY: u32 = 0;
const BUSY: u32 = 1;
const FULL: u32 = 2;

struct Slot {
    state: AtomicU32,
    base: AtomicPtr<u8>,
    last_ts: AtomicU64,
    last_addr: AtomicU64,
}

static FREE: [Slot; FREE_SLOTS] = [const {
    Slot {
        state: AtomicU32::new(EMPTY),
        base: AtomicPtr::new(null_mut()),
        last_ts: AtomicU64::new(0),
        last_addr: AtomicU64::new(0),
    }
}; FREE_SLOTS];
static FREE_COUNT: AtomicUsize = AtomicUsize::new(0);

/// Parks a partly filled chunk with its delta state; `false` if the list is full.
pub(crate) fn push_free(base: *mut u8, st: ChunkState) -> bool {
    for s in &FREE {
        if s.state
            .compare_exchange(EMPTY, BUSY, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            s.base.store(base, Ordering::Relaxed);
            s.last_ts.store(st.last_ts, Ordering::Relaxed);
            s.last_addr.store(st.last_addr, Ordering::Relaxed);
            s.state.store(FULL, Ordering::Release);
            FREE_COUNT.fetch_add(1, Ordering::Relaxed);
            return true;
        }
    }
    false
}

/// Takes a parked chunk, if any.
pub(crate) fn pop_free() -> Option<(*mut u8, ChunkState)> {
    if FREE_COUNT.load(Ordering::Relaxed) == 0 {
        return None;
    }
    for s in &FREE {
        if s.state
            .compare_exchange(FULL, BUSY, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            let base = s.base.load(Ordering::Relaxed);
            let st = ChunkState {
                last_ts: s.last_ts.load(Ordering::Relaxed),
                last_addr: s.last_addr.load(Ordering::Relaxed),
            };
            s.state.store(EMPTY, Ordering::Release);
            FREE_COUNT.fetch_sub(1, Ordering::Relaxed);
            return Some((base, st));
        }
    }
    None
}

// ---- fork ----------------------------------------------------------------------------------

/// Child side of `fork`: abandon the parent's stream (unmap what this thread can find, close
/// the inherited descriptor WITHOUT `LOCK_UN` — the lock belongs to the shared open file
/// description, unlocking would unlock the parent), and arrange for a new stream to be opened
/// on the child's first record. Runs on the only thread of the child.
pub(crate) fn after_fork_child() {
    for s in &FREE {
        if s.state.load(Ordering::Relaxed) == FULL {
            let b = s.base.load(Ordering::Relaxed);
            if !b.is_null() {
                // SAFETY: a parked chunk of the parent's stream, mapped in our copy of the
                // address space; nobody else can use it in the single-threaded child.
                unsafe { unmap(b) };
            }
        }
        s.base.store(null_mut(), Ordering::Relaxed);
        s.state.store(EMPTY, Ordering::Relaxed);
    }
    FREE_COUNT.store(0, Ordering::Relaxed);
    let h = HEADER.swap(null_mut(), Ordering::AcqRel);
    if !h.is_null() {
        // SAFETY: the header mapping made in `create`, inherited; no other thread exists.
        unsafe { libc::munmap(h.cast(), FILE_HEADER_SIZE) };
    }
    let fd = FD.swap(-1, Ordering::AcqRel);
    if fd >= 0 {
        // SAFETY: our inherited descriptor. close() (not flock(LOCK_UN)) keeps the parent's lock.
        unsafe { libc::close(fd) };
    }
    PENDING_DROPS.store(0, Ordering::Relaxed);
    NEXT_CHUNK.store(0, Ordering::Relaxed);
    RETRY_AT.store(0, Ordering::Relaxed);
    GEN.fetch_add(1, Ordering::AcqRel);
    STATE.store(NONE, Ordering::Release);
}
