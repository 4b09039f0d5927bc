//! The probe's own `#[global_allocator]`: glibc's internal entry points `__libc_malloc` & co.
//!
//! In a cdylib, Rust's `System` allocator calls the *symbol* `malloc`, which an allocator
//! adapter of this very library interposes; the `__libc_*` functions bypass interposition,
//! allocate nothing themselves and work before any constructor (design notes §3). The runtime
//! allocates nothing on hook paths; this covers the rest (panic messages, plugin loading).

use core::alloc::{GlobalAlloc, Layout};
use core::ffi::c_void;

extern "C" {
    fn __libc_malloc(size: usize) -> *mut c_void;
    fn __libc_calloc(n: usize, size: usize) -> *mut c_void;
    fn __libc_realloc(p: *mut c_void, size: usize) -> *mut c_void;
    fn __libc_free(p: *mut c_void);
    fn __libc_memalign(align: usize, size: usize) -> *mut c_void;
}

/// Alignment glibc's malloc guarantees on LP64 (x86_64, aarch64).
const MALLOC_ALIGN: usize = 16;

/// Forwards to glibc's `__libc_*` allocator entry points.
pub struct LibcAlloc;

// SAFETY: every method forwards to glibc's allocator, which returns suitably aligned blocks
// (memalign beyond malloc's guaranteed alignment) or NULL, and frees what it returned.
unsafe impl GlobalAlloc for LibcAlloc {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if l.align() <= MALLOC_ALIGN && l.align() <= l.size() {
            // SAFETY: plain malloc of a non-zero size (GlobalAlloc never asks for 0).
            unsafe { __libc_malloc(l.size()).cast() }
        } else {
            // SAFETY: align is a power of two (Layout invariant).
            unsafe { __libc_memalign(l.align(), l.size()).cast() }
        }
    }

    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        if l.align() <= MALLOC_ALIGN && l.align() <= l.size() {
            // SAFETY: calloc of one element of the layout's size.
            unsafe { __libc_calloc(1, l.size()).cast() }
        } else {
            // SAFETY: as `alloc`.
            let p = unsafe { self.alloc(l) };
            if !p.is_null() {
                // SAFETY: `p` has `l.size()` writable bytes.
                unsafe { core::ptr::write_bytes(p, 0, l.size()) };
            }
            p
        }
    }

    unsafe fn dealloc(&self, p: *mut u8, _l: Layout) {
        // SAFETY: `p` came from this allocator (GlobalAlloc contract).
        unsafe { __libc_free(p.cast()) }
    }

    unsafe fn realloc(&self, p: *mut u8, l: Layout, new_size: usize) -> *mut u8 {
        if l.align() <= MALLOC_ALIGN && l.align() <= new_size {
            // SAFETY: `p` came from this allocator with a malloc-compatible alignment.
            unsafe { __libc_realloc(p.cast(), new_size).cast() }
        } else {
            // Over-aligned: allocate, copy, free.
            // SAFETY: a valid layout (same align, new size, GlobalAlloc contract).
            let new = unsafe { self.alloc(Layout::from_size_align_unchecked(new_size, l.align())) };
            if !new.is_null() {
                // SAFETY: both blocks hold at least `min(old, new)` bytes and do not overlap.
                unsafe {
                    core::ptr::copy_nonoverlapping(p, new, l.size().min(new_size));
                    self.dealloc(p, l);
                }
            }
            new
        }
    }
}
