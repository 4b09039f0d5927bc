//! C stack capture inside the hooks: up to N return addresses of the caller, innermost first.
//!
//! The walk starts from the registers at the hook's entry: the return address at `sp`, the
//! caller's stack pointer `sp + 8` and its frame pointer `fp`. Each step applies the cached
//! rule of [`super::cfi`] for the current return address: frames with a frame pointer follow
//! it, frames without one use their CFI rule (stack-pointer based), code with no CFI falls back
//! to the frame pointer. Every read is bounds-checked against the thread's stack
//! (`[lo, hi)`, cached per thread) and must move strictly up the stack, so a corrupt or foreign
//! frame ends the walk instead of faulting. No allocation, no locks.

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

/// Captures up to `out.len()` return addresses of the caller of a hook entered with stack
/// pointer `sp` and frame pointer `fp`. Returns how many were written. Unwind rules not cached
/// yet are evaluated on `alt` when given (an alternate stack: the thread's may be small).
pub fn capture(sp: usize, fp: usize, out: &mut [u64], mut alt: Option<&mut [u8]>) -> usize {
    if out.is_empty() || sp == 0 {
        return 0;
    }
    let (lo, hi) = stack_bounds();
    if sp < lo || sp >= hi {
        // Running on a stack we do not know (sigaltstack, coroutine): no walk.
        return 0;
    }
    let lo = sp;
    let Some(mut pc) = read(sp, lo, hi) else {
        return 0;
    };
    let mut sp = sp + 8;
    let mut fp = fp;
    let mut n = 0;
    while pc >= 4096 {
        out[n] = pc as u64;
        n += 1;
        if n == out.len() {
            break;
        }
        let (cfa, fp_off) = match rule_for_return_address_on(pc as u64, alt.as_deref_mut()) {
            Rule::Sp { cfa_off, fp_off } => (sp.wrapping_add(cfa_off as isize as usize), fp_off),
            Rule::Fp { cfa_off, fp_off } => (fp.wrapping_add(cfa_off as isize as usize), fp_off),
            Rule::NoInfo => {
                if fp < sp {
                    break;
                }
                (fp.wrapping_add(16), Some(-16))
            }
            Rule::Stop => break,
        };
        if cfa <= sp || cfa > hi {
            break;
        }
        let Some(ra) = read(cfa - 8, lo, hi) else {
            break;
        };
        if let Some(off) = fp_off {
            match read(cfa.wrapping_add(off as isize as usize), lo, hi) {
                Some(v) => fp = v,
                None => break,
            }
        }
        sp = cfa;
        pc = ra;
    }
    n
}
