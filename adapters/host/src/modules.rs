//! The module map for C stacks, and the `dlopen` hook.
//!
//! When a stack is captured and the set of loaded objects may have changed (first capture,
//! after a `dlopen` returned, in a fork child), the loaded objects are listed with
//! `dl_iterate_phdr` and each one not yet written in this process image gets a `Module` record:
//! path (the executable's real path for the main program), load bias, mapped range and GNU
//! build id, read from its program headers in memory. The collector symbolises with these after
//! the process is gone, and can tell when a file on disk is not the one that was loaded.
//!
//! `dlopen` is hooked to notice loads and to strip `RTLD_DEEPBIND` while HOST records: a
//! library opened with it would bind its `malloc`/`free` to glibc directly, bypassing the hooks
//! (heaptrack does the same).

use core::ffi::{c_char, c_int, c_void};
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use memscope_core::adapter::AdapterId;
use memscope_core::wire::Record;
use memscope_runtime as rt;

/// Objects may have been loaded since the last scan.
static DIRTY: AtomicBool = AtomicBool::new(true);
/// The fork handler is registered.
static ATFORK: AtomicBool = AtomicBool::new(false);

const EMITTED_SLOTS: usize = 8192;
/// Keys (hash of bias, start and path) of the objects written in this process image.
static EMITTED: [AtomicU64; EMITTED_SLOTS] = [const { AtomicU64::new(0) }; EMITTED_SLOTS];

/// Scans the loaded objects if anything may have changed. Called with the reentrancy guard
/// held, before a stack is captured.
#[inline]
pub fn refresh_if_needed() {
    if DIRTY.load(Ordering::Relaxed) {
        refresh();
    }
}

/// Marks the module list as possibly changed.
pub fn mark_dirty() {
    DIRTY.store(true, Ordering::Relaxed);
}

#[cold]
fn refresh() {
    if !ATFORK.swap(true, Ordering::AcqRel) {
        // SAFETY: `after_fork_child` is an `extern "C" fn()` that lives as long as the probe
        // (the runtime pins the library).
        unsafe { libc::pthread_atfork(None, None, Some(after_fork_child)) };
    }
    DIRTY.store(false, Ordering::Relaxed);
    let ts = rt::now_ns();
    // SAFETY: the callback only reads the entries it is given; `ts` outlives the call.
    unsafe { libc::dl_iterate_phdr(Some(on_object), (&ts as *const u64).cast_mut().cast()) };
}

extern "C" fn after_fork_child() {
    for e in &EMITTED {
        e.store(0, Ordering::Relaxed);
    }
    crate::intern::reset_after_fork();
    DIRTY.store(true, Ordering::Relaxed);
}

fn mix(mut h: u64, v: u64) -> u64 {
    h = (h ^ v).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    h ^ (h >> 31)
}

/// Inserts `key`; `false` if it was already there (or the set is full).
fn first_sight(key: u64) -> bool {
    let start = (key as usize) & (EMITTED_SLOTS - 1);
    for i in 0..EMITTED_SLOTS {
        let s = &EMITTED[(start + i) & (EMITTED_SLOTS - 1)];
        match s.compare_exchange(0, key, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return true,
            Err(v) if v == key => return false,
            Err(_) => {}
        }
    }
    false
}

/// The GNU build id in a `PT_NOTE` segment `[p, p + len)`.
///
/// # Safety
/// `[p, p + len)` is mapped and readable.
unsafe fn build_id(p: usize, len: usize) -> Option<&'static [u8]> {
    let mut off = 0usize;
    let align4 = |v: usize| (v + 3) & !3;
    while off + 12 <= len {
        // SAFETY: within the note segment per the contract; notes are 4-aligned.
        let (namesz, descsz, ty) = unsafe {
            let h = (p + off) as *const u32;
            (
                h.read_unaligned() as usize,
                h.add(1).read_unaligned() as usize,
                h.add(2).read_unaligned(),
            )
        };
        let name_at = off + 12;
        let desc_at = name_at + align4(namesz);
        let next = desc_at + align4(descsz);
        if next > len {
            return None;
        }
        // SAFETY: `[name_at, name_at + namesz)` is inside the segment (checked above).
        let name = unsafe { core::slice::from_raw_parts((p + name_at) as *const u8, namesz) };
        if ty == 3 && name == b"GNU\0" {
            // SAFETY: as for the name.
            return Some(unsafe {
                core::slice::from_raw_parts((p + desc_at) as *const u8, descsz)
            });
        }
        off = next;
    }
    None
}

unsafe extern "C" fn on_object(
    info: *mut libc::dl_phdr_info,
    _size: usize,
    data: *mut c_void,
) -> c_int {
    // SAFETY: glibc passes a valid entry and our `ts` pointer for the duration of the call.
    let (info, ts) = unsafe { (&*info, *(data as *const u64)) };
    let bias = info.dlpi_addr;
    // SAFETY: `dlpi_phdr` points at `dlpi_phnum` program headers of a loaded object.
    let phdrs = unsafe { core::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) };
    let (mut lo, mut hi) = (u64::MAX, 0u64);
    for ph in phdrs.iter().filter(|ph| ph.p_type == libc::PT_LOAD) {
        lo = lo.min(ph.p_vaddr);
        hi = hi.max(ph.p_vaddr + ph.p_memsz);
    }
    if lo >= hi {
        return 0;
    }
    let (start, end) = (bias.wrapping_add(lo), bias.wrapping_add(hi));
    // SAFETY: `dlpi_name` is NULL or a NUL-terminated string owned by the loader.
    let name = unsafe { rt::c_text(info.dlpi_name) }.unwrap_or(b"");
    let mut exe = [0u8; 4096];
    let path: &[u8] = if name.is_empty() {
        // SAFETY: `exe` is writable for its length; the path literal is NUL-terminated.
        let n = unsafe {
            libc::readlink(
                c"/proc/self/exe".as_ptr(),
                exe.as_mut_ptr().cast(),
                exe.len(),
            )
        };
        if n <= 0 {
            return 0;
        }
        &exe[..n as usize]
    } else if name.first() == Some(&b'/') {
        name
    } else {
        return 0; // vdso and other objects without a file
    };
    let mut key = mix(mix(0x51_7CC1_B727_220A, bias), start);
    for chunk in path.chunks(8) {
        let mut w = [0u8; 8];
        w[..chunk.len()].copy_from_slice(chunk);
        key = mix(key, u64::from_le_bytes(w));
    }
    if !first_sight(key | 1) {
        return 0;
    }
    let mut id: &[u8] = &[];
    for ph in phdrs.iter().filter(|ph| ph.p_type == libc::PT_NOTE) {
        let at = bias.wrapping_add(ph.p_vaddr);
        if at < start || at.saturating_add(ph.p_memsz) > end {
            continue;
        }
        // SAFETY: the note segment lies inside the object's loaded range (checked above).
        if let Some(b) = unsafe { build_id(at as usize, ph.p_memsz as usize) } {
            id = b;
            break;
        }
    }
    rt::record(&Record::Module {
        ts,
        base: bias,
        start,
        size: end - start,
        build_id: id,
        path,
    });
    0
}

type DlopenFn = unsafe extern "C" fn(*const c_char, c_int) -> *mut c_void;
static REAL_DLOPEN: AtomicUsize = AtomicUsize::new(0);

fn real_dlopen() -> Option<DlopenFn> {
    let mut f = REAL_DLOPEN.load(Ordering::Acquire);
    if f == 0 {
        // SAFETY: RTLD_NEXT lookup of a NUL-terminated name.
        f = unsafe { libc::dlsym(libc::RTLD_NEXT, c"dlopen".as_ptr()) } as usize;
        if f == 0 {
            return None;
        }
        REAL_DLOPEN.store(f, Ordering::Release);
    }
    // SAFETY: `f` is the next `dlopen`, whose C signature this is.
    Some(unsafe { core::mem::transmute::<usize, DlopenFn>(f) })
}

/// The `dlopen` hook.
///
/// # Safety
/// As `dlopen(3)`.
pub unsafe fn dlopen(file: *const c_char, mode: c_int) -> *mut c_void {
    let Some(f) = real_dlopen() else {
        return core::ptr::null_mut();
    };
    let on = rt::init_state() != rt::InitState::Uninit && rt::enabled(AdapterId::Host);
    let mode = if on {
        mode & !libc::RTLD_DEEPBIND
    } else {
        mode
    };
    // SAFETY: forwarded contract.
    let h = unsafe { f(file, mode) };
    if !h.is_null() {
        mark_dirty();
    }
    h
}
