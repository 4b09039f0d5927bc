//! The per-process stream file: creation, the mapped header, chunk allocation, stopping, and
//! the fork reset.
//!
//! Layout and field offsets are `memscope_wire`'s (`FH_*`, `CH_*`). One file per process
//! image: `<spool>/<pid>-<start_ns>.stream`, created `O_CREAT|O_EXCL|O_CLOEXEC`, mode 0600, and
//! `flock(LOCK_EX)`-ed for the life of the process so the collector can detect its death by
//! try-locking. The header page stays mapped (`MAP_SHARED`) for the drop counters and flags;
//! each chunk is `posix_fallocate`d then mapped on its own when a thread takes it.
//!
//! # Growing the file never hurts the program
//! Before each reservation the probe checks what would make it fail or kill the program, and
//! stops recording instead ([`crate::stop`]: one warning line, the reason in the header, later
//! events counted as dropped; everything written so far stays readable):
//! * the chunk would pass `RLIMIT_FSIZE` (read at every reservation: the program may change it)
//!   — the kernel would answer `EFBIG` *and* SIGXFSZ, which kills the program;
//! * the reservation fails (`ENOSPC`, `EDQUOT`, `EIO`) or the mapping does;
//! * the collector is gone and the probe already took its few orphan chunks
//!   ([`crate::liveness`]);
//! * the program closed or replaced the stream's descriptor.
//!
//! Mappings are made with raw system calls: the symbol `mmap` would reach the probe's own hook.

use crate::stop::{self, Stop};
use crate::sync::RacyCell;
use crate::sys::{errno, file_size_limit, raw_mmap, raw_munmap, zeroed_stat};
use crate::{clock, drops, freelist, liveness, settings};
use core::fmt::Write;
use core::ptr::null_mut;
use core::sync::atomic::{fence, AtomicI32, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, Ordering};
use memscope_wire::{
    ChunkState, CHUNK_MAGIC, CHUNK_SIZE, CH_COMMITTED, CH_MAGIC, CH_SEALED, FH_CHUNK_SIZE,
    FH_CLOCK_OFFSET, FH_EXE, FH_EXE_LEN, FH_FLAGS, FH_MAGIC, FH_PID, FH_PPID, FH_START_NS,
    FH_VERSION, FILE_HEADER_SIZE, STREAM_MAGIC, STREAM_VERSION,
};

pub(crate) use freelist::{pop_free, push_free};

#[cfg(target_endian = "big")]
compile_error!("the stream format is little-endian; big-endian hosts are not supported");

const NONE: u8 = 0;
const OPENING: u8 = 1;
const OPEN: u8 = 2;
/// No stream: it could not be created (one line was printed) or the collector is gone.
const FAILED: u8 = 3;
/// The stream exists but recording stopped (see [`crate::stop`]).
const STOPPED: u8 = 4;

/// Lifecycle of the current process's stream.
static STATE: AtomicU8 = AtomicU8::new(NONE);
/// Stream generation: bumped in a fork child so chunks of the parent's stream are abandoned.
/// Starts at 1 so a thread state holding 0 means "no chunk yet".
static GEN: AtomicU32 = AtomicU32::new(1);
/// `GEN` while the stream is OPEN, else 0: the one word the record path loads.
static LIVE_GEN: AtomicU32 = AtomicU32::new(0);
static FD: AtomicI32 = AtomicI32::new(-1);
static HEADER: AtomicPtr<u8> = AtomicPtr::new(null_mut());
static NEXT_CHUNK: AtomicU64 = AtomicU64::new(0);
/// `FILE_HEADER_SIZE % page_size`: chunk offsets are page-aligned minus this on hosts whose
/// page is larger than the 4 KiB header (0 on x86_64).
static PAGE_DELTA: AtomicU64 = AtomicU64::new(0);
static FILE_DEV: AtomicU64 = AtomicU64::new(0);
static FILE_INO: AtomicU64 = AtomicU64::new(0);
/// Bytes of the exe path actually used.
const EXE_MAX: usize = FH_EXE_LEN - 1;

/// Longest stream path: the spool, `/`, two numbers and `.stream`, and a NUL.
const PATH_MAX: usize = settings::SPOOL_MAX + 64;
/// The stream file's path, NUL-terminated (written by the creating thread before the stream is
/// published; read afterwards, for messages).
static PATH: RacyCell<[u8; PATH_MAX]> = RacyCell::new([0; PATH_MAX]);
static PATH_LEN: AtomicU32 = AtomicU32::new(0);

/// Measures the page size; called once at init.
pub(crate) fn init_page() {
    // SAFETY: `sysconf` has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    let page = if page > 0 { page as u64 } else { 4096 };
    PAGE_DELTA.store(FILE_HEADER_SIZE as u64 % page, Ordering::Relaxed);
}

fn page_delta() -> usize {
    PAGE_DELTA.load(Ordering::Relaxed) as usize
}

/// Current stream generation.
#[inline]
pub(crate) fn gen() -> u32 {
    GEN.load(Ordering::Acquire)
}

/// The mapped header (null: none yet, or none in this process image).
#[inline]
pub(crate) fn header() -> *mut u8 {
    HEADER.load(Ordering::Acquire)
}

/// The stream file's path (empty before it was created).
pub(crate) fn path() -> &'static [u8] {
    let n = PATH_LEN.load(Ordering::Acquire) as usize;
    // SAFETY: written once by the creating thread before PATH_LEN was published (release);
    // never written again in this process image.
    unsafe { &(&*PATH.get())[..n.min(PATH_MAX)] }
}

/// The generation of an open stream, opening it first if none exists yet (a fork child opens
/// its own lazily, on its first record). `None`: no usable stream (opening elsewhere, failed,
/// recording stopped).
#[inline]
pub(crate) fn open_gen() -> Option<u32> {
    let g = LIVE_GEN.load(Ordering::Acquire);
    if g != 0 {
        return Some(g);
    }
    open_gen_slow()
}

#[cold]
fn open_gen_slow() -> Option<u32> {
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
        let g = GEN.load(Ordering::Acquire);
        STATE.store(OPEN, Ordering::Release);
        LIVE_GEN.store(g, Ordering::Release);
        Some(g)
    } else {
        STATE.store(FAILED, Ordering::Release);
        None
    }
}

/// Opens the stream at init; `false` if it could not be created (one line was printed) or
/// the collector is gone (silently).
pub(crate) fn open_at_init() -> bool {
    open_gen().is_some()
}

/// Stops recording for good in this process image: the record path finds no stream from now
/// on. `true` for the caller that made the change (it reports why).
pub(crate) fn stop_recording() -> bool {
    let won = STATE
        .compare_exchange(OPEN, STOPPED, Ordering::AcqRel, Ordering::Acquire)
        .is_ok();
    if won {
        LIVE_GEN.store(0, Ordering::Release);
    }
    won
}

/// Pid that already printed its "not traced" line (once per process image).
static FAIL_REPORTED_BY: AtomicI32 = AtomicI32::new(0);

fn fail_line(what: &[u8], err: i32) {
    // SAFETY: getpid has no preconditions and cannot fail.
    let pid = unsafe { libc::getpid() };
    if FAIL_REPORTED_BY.swap(pid, Ordering::Relaxed) == pid {
        return;
    }
    let mut e = crate::sys::TextBuf::<40>::new();
    crate::sys::push_strerror(&mut e, err);
    let n = PATH_LEN.load(Ordering::Relaxed) as usize;
    // SAFETY: the creating thread's own buffer (see `PATH`).
    let path = unsafe { &(&*PATH.get())[..n.min(PATH_MAX)] };
    crate::sys::stderr_parts(&[
        b"memscope: ",
        what,
        b" ",
        path,
        b": ",
        e.as_bytes(),
        b"; this process is not traced\n",
    ]);
}

/// Writes `v` little-endian at `off` of the mapped header.
///
/// # Safety
/// `h` is the mapped header (FILE_HEADER_SIZE writable bytes) and `off + 8 <= FILE_HEADER_SIZE`.
pub(crate) unsafe fn put_u64(h: *mut u8, off: usize, v: u64) {
    // SAFETY: in bounds per the contract; unaligned write is allowed for any offset.
    unsafe { h.add(off).cast::<u64>().write_unaligned(v.to_le()) }
}

/// As [`put_u64`] for a `u32`.
///
/// # Safety
/// As [`put_u64`], with `off + 4 <= FILE_HEADER_SIZE`.
pub(crate) unsafe fn put_u32(h: *mut u8, off: usize, v: u32) {
    // SAFETY: in bounds per the contract.
    unsafe { h.add(off).cast::<u32>().write_unaligned(v.to_le()) }
}

/// Writes `<spool>/<pid>-<start>.stream` into `PATH` (NUL-terminated).
fn set_path(pid: u32, start: u64) {
    let spool = settings::spool();
    let mut tail = crate::sys::TextBuf::<64>::new();
    let _ = write!(tail, "/{pid}-{start}.stream");
    // SAFETY: only the creating thread writes PATH, before the stream is published.
    let p = unsafe { &mut *PATH.get() };
    let t = tail.as_bytes();
    let n = (spool.len() + t.len()).min(PATH_MAX - 1);
    let s = spool.len().min(n);
    p[..s].copy_from_slice(&spool[..s]);
    p[s..n].copy_from_slice(&t[..n - s]);
    p[n] = 0;
    PATH_LEN.store(n as u32, Ordering::Release);
}

fn create() -> bool {
    if !liveness::at_create() {
        // The collector is gone (or its spool): stay passive and say nothing.
        return false;
    }
    // SAFETY: no preconditions.
    let pid = unsafe { libc::getpid() } as u32;
    // SAFETY: no preconditions.
    let ppid = unsafe { libc::getppid() } as u32;
    let mut start = clock::now_ns();

    // open(O_EXCL), retrying a few start stamps on a (theoretical) name clash.
    let mut fd: i32 = -1;
    for _ in 0..8 {
        set_path(pid, start);
        // SAFETY: PATH is NUL-terminated by `set_path`.
        fd = unsafe {
            libc::open(
                PATH.get().cast(),
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
        fail_line(b"cannot create stream file", errno());
        return false;
    }
    // (The descriptor is not moved to a high number: growing the fd table of a multi-threaded
    // process costs an RCU grace period — milliseconds during which other threads' hooks
    // would forward unrecorded.)
    let undo = |fd: i32, what: &[u8], err: i32| {
        fail_line(what, err);
        // SAFETY: PATH holds the NUL-terminated path of the file we created; `fd` is ours.
        unsafe {
            libc::unlink(PATH.get().cast());
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
    if FILE_HEADER_SIZE as u64 > file_size_limit() {
        // Growing the file at all would raise SIGXFSZ.
        undo(
            fd,
            b"the file size limit (ulimit -f) leaves no room for",
            libc::EFBIG,
        );
        return false;
    }
    // SAFETY: `fd` is open; the range is the header.
    let rc = unsafe { libc::posix_fallocate(fd, 0, FILE_HEADER_SIZE as libc::off_t) };
    if rc != 0 {
        undo(fd, b"cannot reserve space in stream file", rc);
        return false;
    }
    let Some(h) = raw_mmap(
        FILE_HEADER_SIZE,
        libc::PROT_READ | libc::PROT_WRITE,
        libc::MAP_SHARED,
        fd,
        0,
    ) else {
        undo(fd, b"cannot map stream file", errno());
        return false;
    };
    let mut st = zeroed_stat();
    // SAFETY: `st` is writable; `fd` is open.
    if unsafe { libc::fstat(fd, &mut st) } == 0 {
        FILE_DEV.store(st.st_dev, Ordering::Relaxed);
        FILE_INO.store(st.st_ino, Ordering::Relaxed);
    }

    let offset = clock::offset();
    // SAFETY: `h` maps FILE_HEADER_SIZE writable bytes (fresh zero pages of our new file);
    // every offset below is within it (FH_EXE + FH_EXE_LEN <= FILE_HEADER_SIZE by the wire
    // layout), and the exe path is read straight into its field (at most EXE_MAX bytes).
    unsafe {
        put_u32(h, FH_VERSION, STREAM_VERSION);
        put_u32(h, FH_CHUNK_SIZE, CHUNK_SIZE as u32);
        put_u32(h, FH_PID, pid);
        put_u32(h, FH_PPID, ppid);
        put_u64(h, FH_START_NS, start);
        put_u32(h, FH_FLAGS, 0);
        put_u64(h, FH_CLOCK_OFFSET, offset as u64);
        libc::readlink(c"/proc/self/exe".as_ptr(), h.add(FH_EXE).cast(), EXE_MAX);
        // the rank environment (issue 18): shorter than its field by construction
        let env = crate::settings::rank_env();
        let n = env.len().min(memscope_wire::FH_RANK_ENV_LEN);
        core::ptr::copy_nonoverlapping(env.as_ptr(), h.add(memscope_wire::FH_RANK_ENV), n);
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
    drops::flush_pending();
    true
}

/// Stores the status the process passes to `exit` in `FH_EXIT_STATUS` (no-op without a
/// stream); the caller sets `FLAG_EXITED` after it.
pub(crate) fn set_exit_status(status: i32) {
    let h = HEADER.load(Ordering::Acquire);
    if !h.is_null() {
        // SAFETY: as for `set_flag`; FH_EXIT_STATUS is 4-aligned and inside the header.
        unsafe {
            (*h.add(memscope_wire::FH_EXIT_STATUS).cast::<AtomicU32>())
                .store(status as u32, Ordering::Relaxed);
        }
    }
}

/// Sets `flag` in the header's `FH_FLAGS` (no-op without a stream).
pub(crate) fn set_flag(flag: u32) {
    let h = HEADER.load(Ordering::Acquire);
    if !h.is_null() {
        // SAFETY: the header stays mapped while HEADER points at it (only a fork child, single
        // threaded, unmaps it); FH_FLAGS is 4-aligned.
        unsafe {
            (*h.add(FH_FLAGS).cast::<AtomicU32>()).fetch_or(flag, Ordering::Relaxed);
        }
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
    let mut st = zeroed_stat();
    // SAFETY: `st` is writable.
    let ok = unsafe { libc::fstat(fd, &mut st) } == 0;
    ok && st.st_dev == FILE_DEV.load(Ordering::Relaxed)
        && st.st_ino == FILE_INO.load(Ordering::Relaxed)
}

/// Takes a fresh chunk: reserves it with `posix_fallocate`, maps it, initialises its header
/// (committed = 0, sealed = 0, then the magic with a release store). Returns its base, or
/// `None` (the stream is gone, or recording stopped here — see the module documentation); the
/// caller counts a drop. Chunk indexes are dense: a mapping failure after the reservation
/// leaves a chunk whose magic stays 0, and stops recording.
pub(crate) fn new_chunk() -> Option<*mut u8> {
    let fd = FD.load(Ordering::Acquire);
    if fd < 0 || STATE.load(Ordering::Acquire) != OPEN {
        return None;
    }
    if !check_fd(fd) {
        // The program closed (and maybe reused) our descriptor: stop rather than write into
        // someone else's file.
        stop::stop(Stop::FdClosed);
        return None;
    }
    if !liveness::may_grow() {
        stop::stop(Stop::CollectorGone);
        return None;
    }
    let limit = file_size_limit();
    // Reserve first, then claim the index: a failed reservation leaves no hole in the chunk
    // sequence and does not push later chunks further out. Two threads may reserve the same
    // range concurrently; fallocate is idempotent, the CAS loser moves on to the next index.
    let mut i = NEXT_CHUNK.load(Ordering::Relaxed);
    let off = loop {
        let off = (FILE_HEADER_SIZE as u64).checked_add(i.checked_mul(CHUNK_SIZE as u64)?)?;
        if off.saturating_add(CHUNK_SIZE as u64) > limit {
            // Growing the file past RLIMIT_FSIZE raises SIGXFSZ in the program.
            stop::stop(Stop::FileSizeLimit(limit));
            return None;
        }
        let off_t = libc::off_t::try_from(off).ok()?;
        let rc = loop {
            // SAFETY: `fd` is our open stream file.
            let rc = unsafe { libc::posix_fallocate(fd, off_t, CHUNK_SIZE as libc::off_t) };
            if rc != libc::EINTR {
                break rc;
            }
        };
        if rc != 0 {
            stop::stop(if rc == libc::EFBIG {
                Stop::FileSizeLimit(limit)
            } else {
                Stop::NoSpace(rc)
            });
            return None;
        }
        match NEXT_CHUNK.compare_exchange(i, i + 1, Ordering::AcqRel, Ordering::Relaxed) {
            Ok(_) => break off_t,
            Err(cur) => i = cur,
        }
    };
    let delta = page_delta();
    let Some(m) = raw_mmap(
        CHUNK_SIZE + delta,
        libc::PROT_READ | libc::PROT_WRITE,
        libc::MAP_SHARED,
        fd,
        off - delta as libc::off_t,
    ) else {
        stop::stop(Stop::MapFailed(errno()));
        return None;
    };
    // SAFETY: `delta < page <= mapping length`.
    let base = unsafe { m.add(delta) };
    // SAFETY: `base` starts a freshly mapped chunk of CHUNK_SIZE bytes; the header words are
    // 4-aligned; nobody else writes this chunk (its index came from the CAS).
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
    let delta = page_delta();
    // SAFETY: the mapping started `delta` bytes before `base` and spans CHUNK_SIZE + delta.
    unsafe { raw_munmap(base.sub(delta), CHUNK_SIZE + delta) };
}

/// Parks a chunk, or seals and unmaps it when the free list is full.
///
/// # Safety
/// As [`seal_and_unmap`].
pub(crate) unsafe fn park(base: *mut u8, st: ChunkState) {
    if !push_free(base, st) {
        // SAFETY: forwarded contract.
        unsafe { seal_and_unmap(base) };
    }
}

// ---- fork ----------------------------------------------------------------------------------

/// Child side of `fork`: abandon the parent's stream (unmap what this thread can find, close
/// the inherited descriptor WITHOUT `LOCK_UN` — the lock belongs to the shared open file
/// description, unlocking would unlock the parent), and arrange for a new stream to be opened
/// on the child's first record. Runs on the only thread of the child.
pub(crate) fn after_fork_child() {
    // SAFETY: each parked chunk is the parent's, mapped in our copy of the address space;
    // nobody else can use it in the single-threaded child.
    freelist::clear_after_fork(|b| unsafe { unmap(b) });
    LIVE_GEN.store(0, Ordering::Release);
    let h = HEADER.swap(null_mut(), Ordering::AcqRel);
    if !h.is_null() {
        // SAFETY: the header mapping made in `create`, inherited; no other thread exists.
        unsafe { raw_munmap(h, FILE_HEADER_SIZE) };
    }
    drops::after_fork_child();
    let fd = FD.swap(-1, Ordering::AcqRel);
    if fd >= 0 {
        // SAFETY: our inherited descriptor. close() (not flock(LOCK_UN)) keeps the parent's lock.
        unsafe { libc::close(fd) };
    }
    NEXT_CHUNK.store(0, Ordering::Relaxed);
    PATH_LEN.store(0, Ordering::Relaxed);
    GEN.fetch_add(1, Ordering::AcqRel);
    STATE.store(NONE, Ordering::Release);
}
