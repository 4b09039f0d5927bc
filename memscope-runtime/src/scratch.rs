//! Per-thread buffers too large for static TLS: mapped on the thread's first use, outside the
//! hooked allocator (an anonymous mapping made with a raw system call), and recycled at thread
//! exit. Also [`on_stack`], which runs a closure on such a buffer instead of the thread's stack.
//!
//! glibc carves every thread's static TLS out of its stack, so a thread created with a small
//! stack (32 KiB) loses what the probe keeps there; the probe's TLS is therefore a few hundred
//! bytes, and the stack-capture buffers and the text cache live here instead. A block holds one
//! [`Scratch`] per hook depth that may capture a stack (an ordinary hook and a signal handler's
//! hook that interrupted it) and the msTX text cache of [`crate::intern`]. Its pages are touched
//! only as far as they are used (a 32-frame stack touches two). At thread exit the block goes to
//! a small free list that the next new thread takes it from (so a program that starts many
//! short threads maps a few blocks in all), or is unmapped when the list is full.

use crate::intern::TextCache;
use crate::sys::{map_anon, raw_munmap};
use crate::writer::ThreadState;
use core::ptr::null_mut;
use core::sync::atomic::{AtomicPtr, Ordering};

/// Most frames a captured stack may have (`MEMSCOPE_C_STACK` is capped at this).
pub const MAX_FRAMES: usize = 1000;

/// Bytes of the alternate call stack in each [`Scratch`].
pub const ALT_STACK: usize = 64 * 1024;

/// Scratch space of one hook: room for a stack, for its encoding (≤ 10 bytes per frame as
/// varints), and an alternate call stack for the rare heavy work of a hook (evaluating a
/// module's unwind tables on first sight of a return address), so that a hook needs little of
/// the thread's own stack ([`crate::on_stack`]). Nothing in it survives the hook.
#[repr(C)]
pub struct Scratch {
    /// Return addresses, innermost first.
    pub frames: [u64; MAX_FRAMES],
    /// Encoded frames of a stack definition.
    pub bytes: [u8; 10 * MAX_FRAMES],
    /// An alternate call stack (grows down from its end; pages touched as used).
    pub stack: [u8; ALT_STACK],
}

/// Hook depths with a scratch of their own.
pub(crate) const LEVELS: usize = 2;

/// One thread's mapped block.
#[repr(C)]
pub(crate) struct Block {
    /// `scratch[d - 1]` belongs to the hook of depth `d`.
    pub(crate) scratch: [Scratch; LEVELS],
    /// The msTX text cache (used at depth 1 only).
    pub(crate) texts: TextCache,
}

const BLOCK_BYTES: usize = core::mem::size_of::<Block>().next_multiple_of(4096);

const FREE_BLOCKS: usize = 16;
static FREE: [AtomicPtr<Block>; FREE_BLOCKS] = [const { AtomicPtr::new(null_mut()) }; FREE_BLOCKS];

/// This thread's block, mapping (or reusing) one on first use. `None` when mapping failed (the
/// next call tries again).
#[inline]
pub(crate) fn block(ts: &ThreadState) -> Option<*mut Block> {
    let b = ts.block.load(Ordering::Relaxed);
    if !b.is_null() {
        return Some(b);
    }
    attach(ts)
}

#[cold]
fn attach(ts: &ThreadState) -> Option<*mut Block> {
    let b = take()?;
    crate::writer::ensure_exit_key(ts);
    // A signal handler's hook may have attached one meanwhile: keep the first.
    match ts
        .block
        .compare_exchange(null_mut(), b, Ordering::Relaxed, Ordering::Relaxed)
    {
        Ok(_) => Some(b),
        Err(other) => {
            release(b);
            Some(other)
        }
    }
}

#[cold]
fn take() -> Option<*mut Block> {
    for s in &FREE {
        if s.load(Ordering::Relaxed).is_null() {
            continue;
        }
        let b = s.swap(null_mut(), Ordering::Acquire);
        if !b.is_null() {
            return Some(b);
        }
    }
    // Zeroed memory is a valid `Block`: arrays of integers and an empty text cache.
    map_anon(BLOCK_BYTES).map(|p| p.cast::<Block>())
}

/// Gives a thread's block back at its exit (null: it had none).
pub(crate) fn release(b: *mut Block) {
    if b.is_null() {
        return;
    }
    // SAFETY: the exiting thread's block, no longer referenced by it; the cache is reset so the
    // next thread defines its texts itself.
    unsafe { (*b).texts.invalidate() };
    for s in &FREE {
        if s.compare_exchange(null_mut(), b, Ordering::Release, Ordering::Relaxed)
            .is_ok()
        {
            return;
        }
    }
    // SAFETY: our mapping of BLOCK_BYTES bytes, referenced by nobody.
    unsafe { raw_munmap(b.cast(), BLOCK_BYTES) };
}

/// Runs `f` on `stack` (from its 16-byte aligned end downwards) instead of the calling thread's
/// stack, and returns its result. For heavy, rare work inside a hook on a thread whose own stack
/// may be small (a thread created with 32 KiB). `f` must not unwind (a panic aborts the process,
/// as it would crossing the hook's `extern "C"` boundary anyway). On x86_64 and aarch64;
/// elsewhere `f` runs in place.
pub fn on_stack<R, F: FnOnce() -> R>(stack: &mut [u8], f: F) -> R {
    struct Call<F, R> {
        f: Option<F>,
        r: Option<R>,
    }
    extern "C" fn trampoline<F: FnOnce() -> R, R>(call: *mut core::ffi::c_void) {
        // SAFETY: `call` is the `Call` on the caller's stack frame, alive and not otherwise
        // used during the switched call.
        let call = unsafe { &mut *call.cast::<Call<F, R>>() };
        if let Some(f) = call.f.take() {
            call.r = Some(f());
        }
    }
    let mut call = Call {
        f: Some(f),
        r: None,
    };
    #[cfg(target_arch = "x86_64")]
    {
        let top = (stack.as_mut_ptr() as usize + stack.len()) & !15;
        let arg = (&mut call as *mut Call<F, R>).cast::<core::ffi::c_void>();
        // SAFETY: `top` is the 16-byte aligned end of a writable buffer that outlives the call
        // and that nothing else uses meanwhile; the old stack pointer waits in r12, which the
        // callee preserves (C ABI), and is restored after the call; the call gets an
        // ABI-aligned stack (16 bytes at the call); every register the C ABI lets the callee
        // clobber is declared clobbered, and r12 too.
        unsafe {
            core::arch::asm!(
                "mov r12, rsp",
                "mov rsp, {top}",
                "call {tramp}",
                "mov rsp, r12",
                top = in(reg) top,
                tramp = sym trampoline::<F, R>,
                in("rdi") arg,
                out("r12") _,
                clobber_abi("C"),
            );
        }
    }
    #[cfg(target_arch = "aarch64")]
    {
        let top = (stack.as_mut_ptr() as usize + stack.len()) & !15;
        let arg = (&mut call as *mut Call<F, R>).cast::<core::ffi::c_void>();
        // SAFETY: as on x86_64: `top` is the 16-byte aligned end of a writable buffer that
        // outlives the call and nothing else uses meanwhile (AAPCS64 wants `sp` 16-aligned
        // always); the old stack pointer waits in x20, which the callee preserves, and is
        // restored after the call; every register the C ABI lets the callee clobber (LR
        // included) is declared clobbered, and x20 too.
        unsafe {
            core::arch::asm!(
                "mov x20, sp",
                "mov sp, {top}",
                "bl {tramp}",
                "mov sp, x20",
                top = in(reg) top,
                tramp = sym trampoline::<F, R>,
                in("x0") arg,
                out("x20") _,
                clobber_abi("C"),
            );
        }
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        let _ = stack;
        trampoline::<F, R>((&mut call as *mut Call<F, R>).cast());
    }
    match call.r {
        Some(r) => r,
        // The trampoline always runs `f` (it has no other exit than returning).
        None => std::process::abort(),
    }
}

#[cfg(all(test, any(target_arch = "x86_64", target_arch = "aarch64")))]
mod tests {
    #[test]
    fn on_stack_runs_the_closure_on_the_given_buffer() {
        let mut buf = vec![0u8; 64 * 1024];
        let (lo, hi) = (buf.as_ptr() as usize, buf.as_ptr() as usize + buf.len());
        let (inside, sum) = super::on_stack(&mut buf, || {
            let local = [1u64; 64];
            let at = local.as_ptr() as usize;
            (at > lo && at < hi, local.iter().sum::<u64>())
        });
        assert!(inside, "the closure's locals live on the buffer");
        assert_eq!(sum, 64);
        // And back on the thread's stack afterwards.
        let here = 0u8;
        let at = &here as *const u8 as usize;
        assert!(at < lo || at >= hi);
    }
}
