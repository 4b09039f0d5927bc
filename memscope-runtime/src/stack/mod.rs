//! C stack capture, a service of the runtime for every adapter (`--call-stack c:N`,
//! `MEMSCOPE_C_STACK`): the walk ([`unwind`], with the cached CFI rules of [`cfi`]), the
//! process-wide stack interning ([`intern`]: each distinct stack is written once as a
//! `StackDef`) and the module map the collector symbolises with ([`modules`]: a `Module`
//! record before the first stack that has a frame in it).
//!
//! Two ways in:
//! * the HOST allocator entry stubs pass the registers at the hook's entry (return address,
//!   stack and frame pointer: [`unwind::Entry`]) to [`unwind::capture`] themselves (exact, no
//!   frame of the probe on the stack);
//! * every other hook (HAL, ACL, ATB, the msTX pool domains, plugins) calls
//!   [`record_call_stack`] before writing its record: it walks from where it is, leaves out the
//!   frames inside the probe library (and, for a plugin, those of the plugin's own library),
//!   interns the rest and writes a `CallStack { ts, stack }` record that the collector attaches
//!   to the thread's next record with that `ts`.
//!
//! The walk is architecture-neutral; reading the registers it starts from takes one naked
//! trampoline per architecture (x86_64 and aarch64). Elsewhere no stack is recorded.

pub mod cfi;
pub mod intern;
pub mod modules;
pub mod unwind;

use crate::scratch::{Scratch, MAX_FRAMES};
use crate::Guard;
use core::sync::atomic::{AtomicBool, Ordering};
use memscope_wire::Record;

/// Frames of the probe (and a plugin) a walk from inside a hook may have to leave out before
/// it reaches the caller's code; captured on top of the requested depth.
const SKIP_MAX: usize = 32;

/// Which leading frames [`record_call_stack`] leaves out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Skip {
    /// The frames inside the probe library (the hook and the runtime).
    Probe,
    /// The probe's frames and then those of the library that called into the probe (a
    /// plugin's `emit` call: the stack starts at the code that called the plugin).
    ProbeAndCaller,
}

/// Captures the calling thread's C stack (depth `MEMSCOPE_C_STACK`; nothing when 0), interns
/// it and records `CallStack { ts, stack }`, to be written right before the record stamped
/// `ts`. `false` when nothing was written (stacks off, no scratch at this hook depth, an empty
/// walk, or a drop). No allocation; the unwind-rule evaluation and the interning run on the
/// scratch's alternate stack.
pub fn record_call_stack(g: &mut Guard, ts: u64, skip: Skip) -> bool {
    let depth = crate::c_stack_depth() as usize;
    if depth == 0 {
        return false;
    }
    let Some(s) = g.scratch() else {
        return false;
    };
    let Scratch {
        frames,
        bytes,
        stack,
    } = s;
    let want = (depth + SKIP_MAX).min(MAX_FRAMES);
    let n = walk_here(&mut frames[..want], Some(&mut stack[..]));
    let n = keep_callers(&mut frames[..n], skip).min(depth);
    if n == 0 {
        return false;
    }
    let id = crate::on_stack(stack, || intern::intern(&frames[..n], bytes));
    id != 0 && g.record(&Record::CallStack { ts, stack: id })
}

/// Moves the frames to keep to the front of `frames` and returns how many there are: every
/// frame inside the probe library is left out (the hook that captures, and a hook further out
/// when one hooked call runs inside another: an ATB kernel inside an operator), and with
/// [`Skip::ProbeAndCaller`] also the innermost run of frames of the library that called into
/// the probe.
fn keep_callers(frames: &mut [u64], skip: Skip) -> usize {
    let probe = cfi::find_object(record_call_stack as *const () as u64);
    let inside = |pc: u64, o: Option<(u64, u64, u64)>| o.is_some_and(|(s, e, _)| s <= pc && pc < e);
    let mut i = frames.iter().take_while(|&&pc| inside(pc, probe)).count();
    if skip == Skip::ProbeAndCaller {
        if let Some(&first) = frames.get(i) {
            let caller = cfi::find_object(first);
            i += frames[i..]
                .iter()
                .take_while(|&&pc| inside(pc, caller))
                .count();
        }
    }
    let mut k = 0;
    for j in i..frames.len() {
        let pc = frames[j];
        if !inside(pc, probe) {
            frames[k] = pc;
            k += 1;
        }
    }
    k
}

/// What [`walk_here`] hands through the trampoline to [`walk_from`].
#[repr(C)]
struct WalkArgs {
    out: *mut u64,
    len: usize,
    alt: *mut u8,
    alt_len: usize,
}

/// Walks the stack from the caller of this function: its return addresses, innermost first.
#[inline(never)]
fn walk_here(out: &mut [u64], alt: Option<&mut [u8]>) -> usize {
    let (alt, alt_len) = match alt {
        Some(a) => (a.as_mut_ptr(), a.len()),
        None => (core::ptr::null_mut(), 0),
    };
    let mut args = WalkArgs {
        out: out.as_mut_ptr(),
        len: out.len(),
        alt,
        alt_len,
    };
    // SAFETY: `args` describes `out` and `alt`, valid for writes of their lengths for the call;
    // the trampoline only adds the entry registers and jumps to `walk_from`.
    unsafe { walk_trampoline(&mut args) }
}

/// Passes the state at its entry — the return address into [`walk_here`] (at `[rsp]`), the
/// stack pointer after that return (`rsp + 8`) and `rbp` — to [`walk_from`], which runs in
/// this function's place, so that return address stays intact during the walk.
///
/// # Safety
/// As [`walk_from`].
#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
unsafe extern "C" fn walk_trampoline(args: *mut WalkArgs) -> usize {
    core::arch::naked_asm!(
        "mov rsi, [rsp]",
        "lea rdx, [rsp + 8]",
        "mov rcx, rbp",
        "jmp {walk}",
        walk = sym walk_from,
    )
}

/// Passes the state at its entry — the return address into [`walk_here`] (LR), the stack
/// pointer (already the caller's) and the frame pointer `x29` — to [`walk_from`], which runs
/// in this function's place and returns through the untouched LR.
///
/// # Safety
/// As [`walk_from`].
#[cfg(target_arch = "aarch64")]
#[unsafe(naked)]
unsafe extern "C" fn walk_trampoline(args: *mut WalkArgs) -> usize {
    core::arch::naked_asm!(
        "mov x1, x30",
        "mov x2, sp",
        "mov x3, x29",
        "b {walk}",
        walk = sym walk_from,
    )
}

/// No C stacks on this architecture.
///
/// # Safety
/// None.
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
unsafe extern "C" fn walk_trampoline(_: *mut WalkArgs) -> usize {
    0
}

/// # Safety
/// `args.out` is writable for `args.len` frames; `args.alt` is NULL or writable for
/// `args.alt_len` bytes; `ra`, `sp` and `fp` are the state at the trampoline's entry.
#[cfg_attr(
    not(any(target_arch = "x86_64", target_arch = "aarch64")),
    allow(dead_code)
)]
unsafe extern "C" fn walk_from(args: *mut WalkArgs, ra: usize, sp: usize, fp: usize) -> usize {
    // SAFETY: caller contract.
    let a = unsafe { &*args };
    // SAFETY: caller contract.
    let out = unsafe { core::slice::from_raw_parts_mut(a.out, a.len) };
    let alt = (!a.alt.is_null()).then(|| {
        // SAFETY: caller contract.
        unsafe { core::slice::from_raw_parts_mut(a.alt, a.alt_len) }
    });
    unwind::capture(unwind::Entry { ra, sp, fp }, out, alt)
}

/// Records `rec` through `g`, preceded by its C stack ([`record_call_stack`], leaving out the
/// probe's frames) when C stacks are on: the one call an adapter hook makes for a row that
/// should carry `Call Stack(C)`. Records without a time stamp, and shadow records (outside a
/// collection window: [`crate::tracking`]), are written without a stack.
#[inline]
pub fn record_with_stack(g: &mut Guard, rec: &Record<&[u8]>) -> bool {
    if let Some(ts) = rec.ts() {
        if crate::c_stack_depth() != 0 && crate::recording() {
            record_call_stack(g, ts, Skip::Probe);
        }
    }
    g.record(rec)
}

/// Whether the stack service's fork handler is registered.
static ATFORK: AtomicBool = AtomicBool::new(false);

/// Registers, once, the fork-child handler that empties the stack tables and the module
/// announcements (the child writes a new stream, which must define both again).
#[inline]
fn ensure_atfork() {
    if !ATFORK.load(Ordering::Relaxed) && !ATFORK.swap(true, Ordering::AcqRel) {
        // SAFETY: `after_fork_child` is an `extern "C" fn()` that lives as long as the probe
        // (the runtime pins the library).
        unsafe { libc::pthread_atfork(None, None, Some(after_fork_child)) };
    }
}

extern "C" fn after_fork_child() {
    modules::reset_after_fork();
    intern::reset_after_fork();
}
