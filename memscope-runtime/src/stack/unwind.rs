//! C stack capture inside the hooks: up to N return addresses of the caller, innermost first.
//!
//! The walk is the same on every architecture: it starts from the state at the hook's entry —
//! the return address into the caller, the caller's stack pointer after that return, and its
//! frame pointer ([`Entry`]; an entry stub reads them: on x86_64 the return address is at
//! `[rsp]` and the caller's stack pointer `rsp + 8`, on aarch64 it is in LR (`x30`) and `sp` is
//! already the caller's). Each step applies the cached rule of [`super::cfi`] for the current
//! return address: frames with a frame pointer follow it, frames without one use their CFI rule
//! (stack-pointer based), code with no CFI falls back to the frame record. Return addresses
//! read from the stack have their pointer-authentication bits stripped ([`strip`]). Every read is
//! bounds-checked against the thread's stack (`[lo, hi)`, cached per thread) and must move strictly
//! up the stack, so a corrupt or foreign frame ends the walk instead of faulting. No allocation, no
//! locks.

use super::cfi::{rule_for_return_address_on, Rule};
use core::cell::Cell;

thread_local! {
    /// This thread's stack `[lo, hi)`; `(0, 0)`: not known yet; `(1, 1)`: unknown for good.
    static BOUNDS: Cell<(usize, usize)> = const { Cell::new((0, 0)) };
}

extern "C" {
    /// Set by the dynamic loader: the main thread's stack top at process start (argc).
    static __libc_stack_end: *mut core::ffi::c_void;
}

fn main_thread() -> bool {
    // SAFETY: no preconditions.
    let pid = unsafe { libc::getpid() };
    // SAFETY: no preconditions.
    let tid = unsafe { libc::syscall(libc::SYS_gettid) } as i32;
    pid == tid
}

#[cold]
fn compute_bounds() -> (usize, usize) {
    if main_thread() {
        // SAFETY: reading the loader's exported variable.
        let hi = unsafe { __libc_stack_end } as usize;
        // The loader's variable points at argc; the frames of the process are all below it.
        let mut rl = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: `rl` is writable.
        let lim = if unsafe { libc::getrlimit(libc::RLIMIT_STACK, &mut rl) } == 0
            && rl.rlim_cur != libc::RLIM_INFINITY
        {
            (rl.rlim_cur as usize).max(8 << 20)
        } else {
            1 << 30
        };
        return if hi == 0 {
            (1, 1)
        } else {
            (hi.saturating_sub(lim).max(1), hi)
        };
    }
    // Threads created by glibc (also with a stack given by `pthread_attr_setstack`) have their
    // descriptor at the top of their stack, so every frame lies below `pthread_self()`. Reading
    // it needs no lock and no allocation (`pthread_getattr_np` takes the thread's lock and
    // calls `realloc`, which deadlocks when the hook runs inside glibc code holding that lock).
    // SAFETY: no preconditions.
    let hi = unsafe { libc::pthread_self() } as usize;
    if hi == 0 {
        return (1, 1);
    }
    // (`max(1)`: 0 means "not computed yet"; a stack that low is only seen under emulators.)
    (hi.saturating_sub(MAX_THREAD_STACK).max(1), hi)
}

/// Largest stack assumed for a thread other than the main one (only used to reject a stack
/// pointer that is clearly elsewhere, e.g. on a `sigaltstack`).
const MAX_THREAD_STACK: usize = 1 << 30;

/// This thread's stack bounds.
#[inline]
pub fn stack_bounds() -> (usize, usize) {
    BOUNDS
        .try_with(|b| {
            let v = b.get();
            if v.0 != 0 {
                return v;
            }
            let v = compute_bounds();
            b.set(v);
            v
        })
        .unwrap_or((1, 1))
}

#[inline]
fn read(addr: usize, lo: usize, hi: usize) -> Option<usize> {
    if addr < lo || !addr.is_multiple_of(8) || addr.checked_add(8)? > hi {
        return None;
    }
    // SAFETY: `addr` is 8-aligned and `[addr, addr + 8)` lies inside this thread's stack, at or
    // above the stack pointer of the running hook, so it is mapped and readable.
    Some(unsafe { (addr as *const usize).read() })
}

/// The registers a walk starts from, as an entry stub saw them at a function's entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The return address into the caller (0: no stack).
    pub ra: usize,
    /// The caller's stack pointer once the call has returned.
    pub sp: usize,
    /// The caller's frame pointer.
    pub fp: usize,
}

/// A return address without its pointer-authentication code: aarch64 code built with
/// `-mbranch-protection` signs LR before saving it, in the bits above the 48-bit user address
/// space (and the top byte), which Linux never hands out to user code.
#[inline]
pub fn strip(ra: usize) -> usize {
    if cfg!(target_arch = "aarch64") {
        ra & ((1 << 48) - 1)
    } else {
        ra
    }
}

/// Captures up to `out.len()` return addresses of the caller of a hook entered in state
/// `entry`, innermost (`entry.ra`) first. Returns how many were written. Unwind rules not
/// cached yet are evaluated on `alt` when given (an alternate stack: the thread's may be
/// small).
pub fn capture(entry: Entry, out: &mut [u64], mut alt: Option<&mut [u8]>) -> usize {
    let Entry { ra, sp, fp } = entry;
    if out.is_empty() || sp == 0 || ra == 0 {
        return 0;
    }
    let (lo, hi) = stack_bounds();
    if sp < lo || sp >= hi {
        // Running on a stack we do not know (sigaltstack, coroutine): no walk.
        return 0;
    }
    // Everything the walk reads lies at or above the caller's stack pointer.
    let lo = sp;
    let mut pc = strip(ra);
    let mut sp = sp;
    let mut fp = fp;
    let mut n = 0;
    while pc >= 4096 {
        out[n] = pc as u64;
        n += 1;
        if n == out.len() {
            break;
        }
        let off = |base: usize, o: i32| base.wrapping_add(o as isize as usize);
        let (cfa, ra_off, fp_off) = match rule_for_return_address_on(pc as u64, alt.as_deref_mut())
        {
            Rule::Sp {
                cfa_off,
                ra_off,
                fp_off,
            } => (off(sp, cfa_off), ra_off, fp_off),
            Rule::Fp {
                cfa_off,
                ra_off,
                fp_off,
            } => (off(fp, cfa_off), ra_off, fp_off),
            Rule::NoInfo => {
                if fp < sp {
                    break;
                }
                (fp.wrapping_add(16), -8, Some(-16))
            }
            Rule::Stop => break,
        };
        if cfa <= sp || cfa > hi {
            break;
        }
        let Some(ra) = read(off(cfa, ra_off), lo, hi) else {
            break;
        };
        let ra = strip(ra);
        if let Some(o) = fp_off {
            match read(off(cfa, o), lo, hi) {
                Some(v) => fp = v,
                None => break,
            }
        }
        sp = cfa;
        pc = ra;
    }
    n
}
