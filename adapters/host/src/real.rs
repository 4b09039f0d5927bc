//! Where the hooks forward: the real allocator.
//!
//! Normally that is glibc, called through its `__libc_*` entry points (no `dlsym`, works
//! before any constructor, allocates nothing). When another allocator is preloaded after the
//! probe or linked into a library (jemalloc, tcmalloc), the program's `malloc` without memscope
//! would be *that* one, so the hooks forward to the next definition of each symbol
//! (`dlsym(RTLD_NEXT, …)`), looked up once libc has initialised. While that lookup runs,
//! `dlsym`'s own allocations are served from a static bootstrap arena (their frees are ignored),
//! and the few blocks glibc handed out before the lookup are remembered so that their `free`
//! still goes to glibc.
//!
//! Everything here is allocation-free and lock-free.

use core::cell::Cell;
use core::ffi::{c_char, c_int, c_void};
use core::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};

extern "C" {
    fn __libc_malloc(size: usize) -> *mut c_void;
    fn __libc_calloc(n: usize, size: usize) -> *mut c_void;
    fn __libc_realloc(p: *mut c_void, size: usize) -> *mut c_void;
    fn __libc_free(p: *mut c_void);
    fn __libc_memalign(align: usize, size: usize) -> *mut c_void;
    fn __libc_valloc(size: usize) -> *mut c_void;
    fn __libc_pvalloc(size: usize) -> *mut c_void;
    static environ: *const *const c_char;
}

/// The next-definition lookup has not run.
const UNRESOLVED: u8 = 0;
/// A thread is running it.
const RESOLVING: u8 = 1;
/// Done: [`FOREIGN`] tells which allocator the hooks forward to.
const RESOLVED: u8 = 2;

static STATE: AtomicU8 = AtomicU8::new(UNRESOLVED);
/// Another allocator's `malloc` follows the probe: forward through [`NEXT`].
static FOREIGN: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// This thread is inside the `dlsym` lookup: allocate from the bootstrap arena.
    static IN_LOOKUP: Cell<bool> = const { Cell::new(false) };
}

/// Function addresses of the next definitions (valid when [`FOREIGN`]).
struct Next {
    malloc: AtomicUsize,
    calloc: AtomicUsize,
    realloc: AtomicUsize,
    free: AtomicUsize,
    memalign: AtomicUsize,
    posix_memalign: AtomicUsize,
    aligned_alloc: AtomicUsize,
    valloc: AtomicUsize,
    pvalloc: AtomicUsize,
}

static NEXT: Next = Next {
    malloc: AtomicUsize::new(0),
    calloc: AtomicUsize::new(0),
    realloc: AtomicUsize::new(0),
    free: AtomicUsize::new(0),
    memalign: AtomicUsize::new(0),
    posix_memalign: AtomicUsize::new(0),
    aligned_alloc: AtomicUsize::new(0),
    valloc: AtomicUsize::new(0),
    pvalloc: AtomicUsize::new(0),
};

// ---- bootstrap arena -------------------------------------------------------------------------

const ARENA_SIZE: usize = 256 * 1024;

#[repr(C, align(64))]
struct Arena(core::cell::UnsafeCell<[u8; ARENA_SIZE]>);

// SAFETY: the bytes are handed out in disjoint ranges reserved with a CAS on `ARENA_USED`; each
// range is used only by the code it was handed to.
unsafe impl Sync for Arena {}

/// Serves allocations made by `dlsym` while it looks up the next allocator. Never freed.
static ARENA: Arena = Arena(core::cell::UnsafeCell::new([0; ARENA_SIZE]));
static ARENA_USED: AtomicUsize = AtomicUsize::new(0);

fn arena_base() -> usize {
    ARENA.0.get() as usize
}

/// Whether `p` points into the bootstrap arena (such blocks are never given to an allocator).
#[inline]
pub fn in_arena(p: *mut c_void) -> bool {
    let a = p as usize;
    let b = arena_base();
    a >= b && a < b + ARENA_SIZE
}

/// Bump-allocates `size` bytes aligned to `align` (≥ 16) with the size stored in the 16 bytes
/// before the block (for `realloc`). NULL when the arena is exhausted.
fn arena_alloc(size: usize, align: usize) -> *mut c_void {
    let align = align.max(16);
    loop {
        let used = ARENA_USED.load(Ordering::Relaxed);
        let start = (arena_base() + used + 16).next_multiple_of(align);
        let end = match start.checked_add(size) {
            Some(e) => e,
            None => return core::ptr::null_mut(),
        };
        if end > arena_base() + ARENA_SIZE {
            return core::ptr::null_mut();
        }
        if ARENA_USED
            .compare_exchange(
                used,
                end - arena_base(),
                Ordering::Relaxed,
                Ordering::Relaxed,
            )
            .is_ok()
        {
            // SAFETY: [start - 16, end) lies inside the arena and was just reserved by this
            // thread alone (the CAS); start - 16 is 8-aligned.
            unsafe { ((start - 16) as *mut usize).write(size) };
            return start as *mut c_void;
        }
    }
}

/// Size stored before an arena block.
///
/// # Safety
/// `p` came from [`arena_alloc`].
unsafe fn arena_size(p: *mut c_void) -> usize {
    // SAFETY: the header written by `arena_alloc` precedes the block.
    unsafe { ((p as usize - 16) as *const usize).read() }
}

// ---- blocks glibc handed out before the lookup ---------------------------------------------

const EARLY_SLOTS: usize = 1024;
static EARLY: [AtomicUsize; EARLY_SLOTS] = [const { AtomicUsize::new(0) }; EARLY_SLOTS];
static EARLY_COUNT: AtomicUsize = AtomicUsize::new(0);

fn remember_early(p: *mut c_void) {
    if p.is_null() {
        return;
    }
    let i = EARLY_COUNT.fetch_add(1, Ordering::Relaxed);
    if let Some(slot) = EARLY.get(i) {
        slot.store(p as usize, Ordering::Relaxed);
    }
}

/// Removes `p` from the early set if it is there (it belongs to glibc).
fn take_early(p: *mut c_void) -> bool {
    let n = EARLY_COUNT.load(Ordering::Relaxed).min(EARLY_SLOTS);
    let a = p as usize;
    for slot in &EARLY[..n] {
        if a != 0 && slot.load(Ordering::Relaxed) == a {
            return slot
                .compare_exchange(a, 0, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok();
        }
    }
    false
}

// ---- lookup ------------------------------------------------------------------------------------

/// Whether libc has initialised (its `environ` is set); before that neither `dlsym` nor the
/// runtime's settings can be read.
pub fn libc_ready() -> bool {
    // SAFETY: reading the pointer value of libc's `environ`; it is set by libc's initialiser
    // (before that, NULL), which is the earliest point where `dlsym` may be called.
    !unsafe { environ }.is_null()
}

fn lookup(name: &core::ffi::CStr) -> usize {
    // SAFETY: `name` is NUL-terminated; RTLD_NEXT searches the objects after this one.
    unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) as usize }
}

#[cold]
fn resolve() {
    if IN_LOOKUP.try_with(Cell::get).unwrap_or(true) || !libc_ready() {
        return;
    }
    if STATE
        .compare_exchange(UNRESOLVED, RESOLVING, Ordering::AcqRel, Ordering::Relaxed)
        .is_err()
    {
        return;
    }
    // The lookup's own allocations (served from the arena) are the probe's, not the program's.
    memscope_runtime::internal(lookup_next);
    STATE.store(RESOLVED, Ordering::Release);
}

fn lookup_next() {
    let _ = IN_LOOKUP.try_with(|c| c.set(true));
    let next_malloc = lookup(c"malloc");
    let foreign = next_malloc != 0 && next_malloc != __libc_malloc as *const () as usize;
    if foreign {
        let or = |v: usize, d: usize| if v != 0 { v } else { d };
        NEXT.malloc.store(next_malloc, Ordering::Relaxed);
        NEXT.calloc.store(
            or(lookup(c"calloc"), __libc_calloc as *const () as usize),
            Ordering::Relaxed,
        );
        NEXT.realloc.store(
            or(lookup(c"realloc"), __libc_realloc as *const () as usize),
            Ordering::Relaxed,
        );
        NEXT.free.store(
            or(lookup(c"free"), __libc_free as *const () as usize),
            Ordering::Relaxed,
        );
        NEXT.memalign.store(
            or(lookup(c"memalign"), __libc_memalign as *const () as usize),
            Ordering::Relaxed,
        );
        NEXT.posix_memalign
            .store(lookup(c"posix_memalign"), Ordering::Relaxed);
        NEXT.aligned_alloc
            .store(lookup(c"aligned_alloc"), Ordering::Relaxed);
        NEXT.valloc.store(
            or(lookup(c"valloc"), __libc_valloc as *const () as usize),
            Ordering::Relaxed,
        );
        NEXT.pvalloc.store(
            or(lookup(c"pvalloc"), __libc_pvalloc as *const () as usize),
            Ordering::Relaxed,
        );
    }
    FOREIGN.store(foreign, Ordering::Release);
    let _ = IN_LOOKUP.try_with(|c| c.set(false));
}

/// Runs the next-allocator lookup if it has not run and libc is initialised. Cheap after the
/// first success (one relaxed load).
#[inline]
pub fn ensure_resolved() {
    if STATE.load(Ordering::Relaxed) != RESOLVED {
        resolve();
    }
}

/// Whether another allocator (jemalloc, tcmalloc, …) follows the probe and receives the calls.
pub fn foreign() -> bool {
    FOREIGN.load(Ordering::Acquire)
}

#[inline]
fn in_lookup() -> bool {
    STATE.load(Ordering::Relaxed) == RESOLVING && IN_LOOKUP.try_with(Cell::get).unwrap_or(false)
}

#[inline]
fn early() -> bool {
    STATE.load(Ordering::Relaxed) != RESOLVED
}

type FnMalloc = unsafe extern "C" fn(usize) -> *mut c_void;
type FnCalloc = unsafe extern "C" fn(usize, usize) -> *mut c_void;
type FnRealloc = unsafe extern "C" fn(*mut c_void, usize) -> *mut c_void;
type FnFree = unsafe extern "C" fn(*mut c_void);
type FnPosixMemalign = unsafe extern "C" fn(*mut *mut c_void, usize, usize) -> c_int;

macro_rules! next_fn {
    ($field:ident, $ty:ty) => {{
        let a = NEXT.$field.load(Ordering::Relaxed);
        #[allow(unused_unsafe)]
        // SAFETY: set in `resolve` from `dlsym` of the same C function name (or glibc's
        // equivalent), so it has this signature.
        let f = unsafe { core::mem::transmute::<usize, $ty>(a) };
        f
    }};
}

/// The real `malloc`.
///
/// # Safety
/// As `malloc(3)`.
#[inline]
pub unsafe fn malloc(size: usize) -> *mut c_void {
    if FOREIGN.load(Ordering::Relaxed) {
        // SAFETY: the next `malloc`.
        return unsafe { next_fn!(malloc, FnMalloc)(size) };
    }
    if early() {
        return early_alloc(size, 16);
    }
    // SAFETY: glibc's malloc.
    unsafe { __libc_malloc(size) }
}

#[cold]
fn early_alloc(size: usize, align: usize) -> *mut c_void {
    ensure_resolved();
    if in_lookup() {
        return arena_alloc(size, align);
    }
    if foreign() {
        // SAFETY: the next allocator, resolved just now.
        return unsafe {
            if align <= 16 {
                next_fn!(malloc, FnMalloc)(size)
            } else {
                next_fn!(memalign, FnCalloc)(align, size)
            }
        };
    }
    // SAFETY: glibc's allocator (still the one in use before the lookup).
    let p = unsafe {
        if align <= 16 {
            __libc_malloc(size)
        } else {
            __libc_memalign(align, size)
        }
    };
    // Allocated by glibc before the lookup finished: if the lookup finds another allocator, this
    // block must still be freed by glibc.
    remember_early(p);
    p
}

/// The real `calloc`.
///
/// # Safety
/// As `calloc(3)`.
#[inline]
pub unsafe fn calloc(n: usize, m: usize) -> *mut c_void {
    if FOREIGN.load(Ordering::Relaxed) {
        // SAFETY: the next `calloc`.
        return unsafe { next_fn!(calloc, FnCalloc)(n, m) };
    }
    if early() {
        let Some(size) = n.checked_mul(m) else {
            return core::ptr::null_mut();
        };
        let p = early_alloc(size, 16);
        if !p.is_null() && in_arena(p) {
            // Arena memory is zero and never reused.
            return p;
        }
        if !p.is_null() {
            // SAFETY: `p` has `size` writable bytes.
            unsafe { core::ptr::write_bytes(p.cast::<u8>(), 0, size) };
        }
        return p;
    }
    // SAFETY: glibc's calloc.
    unsafe { __libc_calloc(n, m) }
}

/// The real `realloc` (`p` may be an arena or early block).
///
/// # Safety
/// As `realloc(3)`.
#[inline]
pub unsafe fn realloc(p: *mut c_void, size: usize) -> *mut c_void {
    if in_arena(p) {
        return arena_realloc(p, size);
    }
    if FOREIGN.load(Ordering::Relaxed) {
        if take_early(p) {
            // SAFETY: an early block belongs to glibc; its successor stays with glibc.
            let q = unsafe { __libc_realloc(p, size) };
            remember_early(if q.is_null() && size != 0 { p } else { q });
            return q;
        }
        // SAFETY: the next `realloc`.
        return unsafe { next_fn!(realloc, FnRealloc)(p, size) };
    }
    if early() && p.is_null() {
        return early_alloc(size, 16);
    }
    // SAFETY: glibc's realloc of a glibc block.
    unsafe { __libc_realloc(p, size) }
}

#[cold]
fn arena_realloc(p: *mut c_void, size: usize) -> *mut c_void {
    // SAFETY: `p` is an arena block.
    let old = unsafe { arena_size(p) };
    // SAFETY: the new block comes from the real allocator (or the arena during the lookup).
    let q = unsafe { malloc(size) };
    if !q.is_null() {
        // SAFETY: both blocks hold at least min(old, size) bytes and do not overlap.
        unsafe { core::ptr::copy_nonoverlapping(p.cast::<u8>(), q.cast::<u8>(), old.min(size)) };
    }
    q
}

/// The real `free` (arena blocks are ignored).
///
/// # Safety
/// As `free(3)`.
#[inline]
pub unsafe fn free(p: *mut c_void) {
    if FOREIGN.load(Ordering::Relaxed) {
        if in_arena(p) {
            return;
        }
        if EARLY_COUNT.load(Ordering::Relaxed) != 0 && take_early(p) {
            // SAFETY: an early block belongs to glibc.
            return unsafe { __libc_free(p) };
        }
        // SAFETY: the next `free`.
        return unsafe { next_fn!(free, FnFree)(p) };
    }
    if in_arena(p) {
        return;
    }
    // SAFETY: glibc's free of a glibc block (or NULL).
    unsafe { __libc_free(p) }
}

/// The real `memalign`-family allocation with glibc's rules for `memalign` (any alignment is
/// rounded up to a power of two).
///
/// # Safety
/// As `memalign(3)`.
#[inline]
pub unsafe fn memalign(align: usize, size: usize) -> *mut c_void {
    if FOREIGN.load(Ordering::Relaxed) {
        // SAFETY: the next `memalign`.
        return unsafe { next_fn!(memalign, FnCalloc)(align, size) };
    }
    if early() {
        return early_alloc(size, align.max(16).next_power_of_two());
    }
    // SAFETY: glibc's memalign.
    unsafe { __libc_memalign(align, size) }
}

/// The real `aligned_alloc`: the next definition when foreign, glibc's (2.36: `memalign`)
/// otherwise.
///
/// # Safety
/// As `aligned_alloc(3)`.
#[inline]
pub unsafe fn aligned_alloc(align: usize, size: usize) -> *mut c_void {
    if FOREIGN.load(Ordering::Relaxed) {
        let f = NEXT.aligned_alloc.load(Ordering::Relaxed);
        if f != 0 {
            // SAFETY: the next `aligned_alloc`, same signature.
            return unsafe { core::mem::transmute::<usize, FnCalloc>(f)(align, size) };
        }
    }
    // SAFETY: as `memalign`.
    unsafe { memalign(align, size) }
}

/// The real `posix_memalign`, with its argument checks (EINVAL: alignment not a power of two
/// multiple of `sizeof(void *)`; ENOMEM; `*out` untouched on failure).
///
/// # Safety
/// `out` is writable (as `posix_memalign(3)`).
#[inline]
pub unsafe fn posix_memalign(out: *mut *mut c_void, align: usize, size: usize) -> c_int {
    if FOREIGN.load(Ordering::Relaxed) {
        let f = NEXT.posix_memalign.load(Ordering::Relaxed);
        if f != 0 {
            // SAFETY: the next `posix_memalign`, same signature; forwarded contract.
            return unsafe { core::mem::transmute::<usize, FnPosixMemalign>(f)(out, align, size) };
        }
    }
    if !align.is_multiple_of(core::mem::size_of::<usize>()) || !align.is_power_of_two() {
        return libc::EINVAL;
    }
    // SAFETY: as `memalign`.
    let p = unsafe { memalign(align, size) };
    if p.is_null() {
        return libc::ENOMEM;
    }
    // SAFETY: `out` is writable per the contract.
    unsafe { out.write(p) };
    0
}

/// The real `valloc`.
///
/// # Safety
/// As `valloc(3)`.
#[inline]
pub unsafe fn valloc(size: usize) -> *mut c_void {
    if FOREIGN.load(Ordering::Relaxed) {
        // SAFETY: the next `valloc`.
        return unsafe { next_fn!(valloc, FnMalloc)(size) };
    }
    if early() {
        return early_alloc(size, 4096);
    }
    // SAFETY: glibc's valloc.
    unsafe { __libc_valloc(size) }
}

/// The real `pvalloc`.
///
/// # Safety
/// As `pvalloc(3)`.
#[inline]
pub unsafe fn pvalloc(size: usize) -> *mut c_void {
    if FOREIGN.load(Ordering::Relaxed) {
        // SAFETY: the next `pvalloc`.
        return unsafe { next_fn!(pvalloc, FnMalloc)(size) };
    }
    if early() {
        return early_alloc(size.max(1).next_multiple_of(4096), 4096);
    }
    // SAFETY: glibc's pvalloc.
    unsafe { __libc_pvalloc(size) }
}
