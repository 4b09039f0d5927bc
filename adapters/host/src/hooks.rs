//! The allocator hooks. Each forwards to [`crate::real`] and, when the HOST adapter records,
//! writes `Malloc`/`Free` records (semantics: crate documentation). The entry points
//! exported by the probe (see [`crate::export_hooks!`]) pass the state at their entry for C
//! stacks: `ra` (the return address into the caller), `sp` (the caller's stack pointer after
//! that return) and `fp` (the caller's frame pointer); `ra` 0 means "no stack".

use crate::SOURCE;
use crate::{intern, real, unwind};
use core::ffi::{c_int, c_void};
use memscope_runtime as rt;
use memscope_wire::Record;

/// Whether HOST records now: one relaxed load once the runtime is ready (a second one outside
/// collection windows, where allocations and frees are shadow records: `rt::tracking`). Before
/// libc has initialised, `environ` is not set yet and the runtime must not initialise (it would
/// find no settings and stay passive for good), so such early calls only forward.
#[inline]
fn host_on() -> bool {
    rt::active(SOURCE) || rt::shadow_active(SOURCE) || host_on_slow()
}

#[cold]
fn host_on_slow() -> bool {
    if rt::init_state() == rt::InitState::Uninit && !real::libc_ready() {
        return false;
    }
    rt::tracking(SOURCE)
}

/// Captures and interns the caller's stack into the hook's scratch buffers (0: none, or no
/// scratch at this depth). The walk, the interning and a first sight's stack definition run
/// on the scratch's alternate stack: the thread's own may be small (32 KiB), and unwind-rule
/// evaluation needs several KiB of it (tens in debug builds).
#[inline]
fn stack_id(g: &mut rt::Guard, entry: unwind::Entry) -> u32 {
    let depth = rt::c_stack_depth() as usize;
    // no stacks on shadow records (outside a collection window)
    if depth == 0 || entry.ra == 0 || !rt::recording() {
        return 0;
    }
    let Some(s) = g.scratch() else {
        return 0;
    };
    let rt::Scratch {
        frames,
        bytes,
        stack,
    } = s;
    rt::on_stack(stack, || {
        let n = unwind::capture(entry, &mut frames[..depth.min(rt::MAX_FRAMES)], None);
        intern::intern(&frames[..n], bytes)
    })
}

/// Records a successful allocation of `size` bytes at `p`.
#[inline]
fn on_alloc(g: &mut rt::Guard, p: *mut c_void, size: usize, entry: unwind::Entry) {
    let stack = stack_id(g, entry);
    g.record(&Record::Malloc {
        ts: rt::now_ns(),
        addr: p as u64,
        size: size as u64,
        stack,
    });
}

macro_rules! alloc_hook {
    ($(#[$m:meta])* $name:ident ($($arg:ident: $ty:ty),*) size = $size:expr) => {
        $(#[$m])*
        ///
        /// # Safety
        /// As the C function of the same name; `ra`/`sp`/`fp` are the entry state or 0.
        pub unsafe extern "C" fn $name($($arg: $ty,)* ra: usize, sp: usize, fp: usize) -> *mut c_void {
            if !host_on() {
                // SAFETY: forwarded contract.
                return unsafe { real::$name($($arg),*) };
            }
            let Some(mut g) = rt::enter() else {
                // SAFETY: forwarded contract.
                return unsafe { real::$name($($arg),*) };
            };
            // SAFETY: forwarded contract.
            let p = unsafe { real::$name($($arg),*) };
            if !p.is_null() {
                on_alloc(&mut g, p, $size, unwind::Entry { ra, sp, fp });
            }
            p
        }
    };
}

alloc_hook!(
    /// `malloc(size)`.
    malloc(size: usize) size = size
);
alloc_hook!(
    /// `calloc(n, m)` (recorded size `n * m`).
    calloc(n: usize, m: usize) size = n.saturating_mul(m)
);
alloc_hook!(
    /// `memalign(align, size)`.
    memalign(align: usize, size: usize) size = size
);
alloc_hook!(
    /// `aligned_alloc(align, size)`.
    aligned_alloc(align: usize, size: usize) size = size
);
alloc_hook!(
    /// `valloc(size)`.
    valloc(size: usize) size = size
);
alloc_hook!(
    /// `pvalloc(size)` (recorded size: the requested one).
    pvalloc(size: usize) size = size
);

/// `realloc(p, size)`: FREE of `p` (stamped before the call) + MALLOC of the result.
///
/// # Safety
/// As `realloc(3)`; `ra`/`sp`/`fp` are the entry state or 0.
pub unsafe extern "C" fn realloc(
    p: *mut c_void,
    size: usize,
    ra: usize,
    sp: usize,
    fp: usize,
) -> *mut c_void {
    if !host_on() {
        // SAFETY: forwarded contract.
        return unsafe { real::realloc(p, size) };
    }
    let Some(mut g) = rt::enter() else {
        // SAFETY: forwarded contract.
        return unsafe { real::realloc(p, size) };
    };
    // SAFETY: forwarded contract.
    unsafe { realloc_recorded(&mut g, p, size, unwind::Entry { ra, sp, fp }) }
}

/// `realloc` with the guard held.
///
/// # Safety
/// As `realloc(3)`.
unsafe fn realloc_recorded(
    g: &mut rt::Guard,
    p: *mut c_void,
    size: usize,
    entry: unwind::Entry,
) -> *mut c_void {
    let ts_free = if p.is_null() { 0 } else { rt::now_ns_before() };
    // SAFETY: forwarded contract.
    let q = unsafe { real::realloc(p, size) };
    if !p.is_null() && (!q.is_null() || size == 0) {
        // Moved, resized in place, or `realloc(p, 0)` (glibc frees `p`, returns NULL).
        g.record(&Record::Free {
            ts: ts_free,
            addr: p as u64,
        });
    }
    if !q.is_null() {
        on_alloc(g, q, size, entry);
    }
    q
}

/// `reallocarray(p, n, m)`: `realloc(p, n * m)` unless the product overflows (ENOMEM).
///
/// # Safety
/// As `reallocarray(3)`; `ra`/`sp`/`fp` are the entry state or 0.
pub unsafe extern "C" fn reallocarray(
    p: *mut c_void,
    n: usize,
    m: usize,
    ra: usize,
    sp: usize,
    fp: usize,
) -> *mut c_void {
    let Some(size) = n.checked_mul(m) else {
        // SAFETY: `__errno_location` returns this thread's errno.
        unsafe { *libc::__errno_location() = libc::ENOMEM };
        return core::ptr::null_mut();
    };
    // SAFETY: forwarded contract.
    unsafe { realloc(p, size, ra, sp, fp) }
}

/// `posix_memalign(out, align, size)`.
///
/// # Safety
/// As `posix_memalign(3)`; `ra`/`sp`/`fp` are the entry state or 0.
pub unsafe extern "C" fn posix_memalign(
    out: *mut *mut c_void,
    align: usize,
    size: usize,
    ra: usize,
    sp: usize,
    fp: usize,
) -> c_int {
    if !host_on() {
        // SAFETY: forwarded contract.
        return unsafe { real::posix_memalign(out, align, size) };
    }
    let Some(mut g) = rt::enter() else {
        // SAFETY: forwarded contract.
        return unsafe { real::posix_memalign(out, align, size) };
    };
    // SAFETY: forwarded contract.
    let rc = unsafe { real::posix_memalign(out, align, size) };
    if rc == 0 {
        // SAFETY: on success `*out` holds the new block (`out` is writable per the contract).
        let p = unsafe { out.read() };
        on_alloc(&mut g, p, size, unwind::Entry { ra, sp, fp });
    }
    rc
}

/// `free(p)`: records the FREE before the block is released.
///
/// # Safety
/// As `free(3)`.
pub unsafe fn free(p: *mut c_void) {
    if !p.is_null() && host_on() {
        if let Some(g) = rt::enter() {
            g.record(&Record::Free {
                ts: rt::now_ns_before(),
                addr: p as u64,
            });
            // SAFETY: forwarded contract.
            return unsafe { real::free(p) };
        }
    }
    // SAFETY: forwarded contract.
    unsafe { real::free(p) }
}

fn mmap_on() -> bool {
    host_on() && rt::host_mmap()
}

/// `len` rounded up to whole pages: what the kernel maps or unmaps.
fn page_round(len: usize) -> u64 {
    use core::sync::atomic::{AtomicUsize, Ordering};
    static PAGE: AtomicUsize = AtomicUsize::new(0);
    let mut page = PAGE.load(Ordering::Relaxed);
    if page == 0 {
        // SAFETY: sysconf has no preconditions and does not allocate.
        let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        page = if p > 0 { p as usize } else { 4096 };
        PAGE.store(page, Ordering::Relaxed);
    }
    (len as u64).div_ceil(page as u64) * page as u64
}

/// `mmap`: the system call, recorded as a mapping with `MEMSCOPE_HOST_MMAP=1` (length rounded
/// up to whole pages; an overlay by `MAP_FIXED` is the collector's business: a new mapping
/// replaces whatever was mapped in its range).
///
/// # Safety
/// As `mmap(2)`.
pub unsafe fn mmap(
    addr: *mut c_void,
    len: usize,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    off: i64,
) -> *mut c_void {
    // SAFETY: the raw system call glibc's `mmap` makes on LP64; errno is set by `syscall`.
    let r =
        unsafe { libc::syscall(libc::SYS_mmap, addr, len, prot, flags, fd, off) } as *mut c_void;
    if r != libc::MAP_FAILED && mmap_on() {
        if let Some(g) = rt::enter() {
            g.record(&Record::Mmap {
                ts: rt::now_ns(),
                addr: r as u64,
                size: page_round(len),
                stack: 0,
            });
        }
    }
    r
}

/// `munmap`: recorded with `MEMSCOPE_HOST_MMAP=1` when it succeeds, stamped before the call
/// (so a mapping another thread gets at the same address afterwards sorts after it).
///
/// # Safety
/// As `munmap(2)`.
pub unsafe fn munmap(addr: *mut c_void, len: usize) -> c_int {
    let ts = if mmap_on() { rt::now_ns_before() } else { 0 };
    // SAFETY: the raw system call; errno is set by `syscall`.
    let rc = unsafe { libc::syscall(libc::SYS_munmap, addr, len) as c_int };
    if rc == 0 && ts != 0 {
        if let Some(g) = rt::enter() {
            g.record(&Record::Munmap {
                ts,
                addr: addr as u64,
                size: page_round(len),
            });
        }
    }
    rc
}

/// `mremap(old, old_size, new_size, flags[, new_address])`: recorded with
/// `MEMSCOPE_HOST_MMAP=1` when it succeeds, stamped before the call: the pages move from the
/// old range to the one returned (the old range stays mapped when `old_size` is 0 or with
/// `MREMAP_DONTUNMAP`). `new_addr` is only read by the kernel with `MREMAP_FIXED`, as for the C
/// library's variadic function.
///
/// # Safety
/// As `mremap(2)`.
pub unsafe fn mremap(
    old: *mut c_void,
    old_size: usize,
    new_size: usize,
    flags: c_int,
    new_addr: *mut c_void,
) -> *mut c_void {
    let ts = if mmap_on() { rt::now_ns_before() } else { 0 };
    // SAFETY: the raw system call glibc's `mremap` makes; errno is set by `syscall`.
    let r = unsafe { libc::syscall(libc::SYS_mremap, old, old_size, new_size, flags, new_addr) }
        as *mut c_void;
    if r != libc::MAP_FAILED && ts != 0 {
        if let Some(g) = rt::enter() {
            g.record(&Record::Mremap {
                ts,
                old_addr: old as u64,
                old_size: page_round(old_size),
                new_addr: r as u64,
                new_size: page_round(new_size),
                keep_old: old_size == 0 || flags & libc::MREMAP_DONTUNMAP != 0,
            });
        }
    }
    r
}
