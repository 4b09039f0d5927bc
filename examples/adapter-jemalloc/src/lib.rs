//! memscope adapter for jemalloc's non-standard API, written with `memscope-adapter-sdk`
//! outside memscope's workspace: a program linked with `-ljemalloc` that calls `mallocx`,
//! `rallocx`, `xallocx`, `sdallocx` or `dallocx` gets one row per call, of Event Type
//! `JEMALLOC` on device `cpu`:
//!
//! * owner: the arena the flags name, `JEMALLOC@arena<N>` (`MALLOCX_ARENA(N)`), else
//!   `JEMALLOC@default`;
//! * the adapter's own Attr keys: `flags` (hex), `lg_align` (when `MALLOCX_LG_ALIGN` is set),
//!   `zero:1` (`MALLOCX_ZERO`), `tcache:none` (`MALLOCX_TCACHE_NONE`), `usable` (the block's
//!   real size, `sallocx`);
//! * `Call Stack(C)` of the code that called jemalloc (`--call-stack c:N`).
//!
//! `rallocx` that moves or resizes a block is a FREE of the old block and a MALLOC of the new
//! one (written after the call, which may fail and keep the old block); `xallocx` that resizes
//! in place is the same pair at one address; `sdallocx`/`dallocx` are FREEs stamped before the
//! call (once freed, another thread may get the address back before the event is written).
//! The standard `malloc`/`free` of jemalloc are the HOST adapter's (`--adapters host`).
//!
//! ```sh
//! cargo build --release --manifest-path examples/adapter-jemalloc/Cargo.toml
//! memscope run --device npu,cpu --call-stack c:16 \
//!     --adapter-path examples/adapter-jemalloc/target/release/libmemscope_jemalloc_adapter.so \
//!     -- ./my_jemalloc_program
//! ```
//!
//! How it hooks: memscope preloads the adapter after its probe, so the functions below
//! interpose libjemalloc's; each forwards to the next definition (`dlsym(RTLD_NEXT)`:
//! libjemalloc's) and always returns what jemalloc returned. Nothing here allocates; attrs are
//! formatted on the stack.

use core::ffi::{c_char, c_int, c_void, CStr};
use core::fmt::Write;
use core::sync::atomic::{AtomicPtr, Ordering};
use memscope_adapter_sdk::{self as sdk, Event, TextBuf};

const EVENT_TYPE: &CStr = c"JEMALLOC";

extern "C" {
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
}
/// glibc's `RTLD_NEXT`.
const RTLD_NEXT: *mut c_void = -1isize as *mut c_void;

/// jemalloc's flag bits (`jemalloc/jemalloc.h`).
mod flag {
    /// `MALLOCX_LG_ALIGN(la)`: the low 6 bits.
    pub const LG_ALIGN_MASK: i32 = 0x3f;
    /// `MALLOCX_ZERO`.
    pub const ZERO: i32 = 0x40;
    /// `MALLOCX_TCACHE(tc)` = `(tc + 2) << 8`; `MALLOCX_TCACHE_NONE` = `1 << 8`.
    pub const TCACHE_SHIFT: u32 = 8;
    /// Mask of the tcache field.
    pub const TCACHE_MASK: i32 = 0xfff << TCACHE_SHIFT;
    /// `MALLOCX_ARENA(a)` = `(a + 1) << 20`.
    pub const ARENA_SHIFT: u32 = 20;
}

/// One real jemalloc function, looked up on first use.
struct Real(AtomicPtr<c_void>, &'static CStr);

impl Real {
    const fn new(name: &'static CStr) -> Real {
        Real(AtomicPtr::new(core::ptr::null_mut()), name)
    }

    fn get(&self) -> *mut c_void {
        let mut p = self.0.load(Ordering::Acquire);
        if p.is_null() {
            // SAFETY: `self.1` is NUL-terminated; RTLD_NEXT is a valid pseudo-handle.
            p = unsafe { dlsym(RTLD_NEXT, self.1.as_ptr()) };
            self.0.store(p, Ordering::Release);
        }
        p
    }
}

static MALLOCX: Real = Real::new(c"mallocx");
static RALLOCX: Real = Real::new(c"rallocx");
static XALLOCX: Real = Real::new(c"xallocx");
static SDALLOCX: Real = Real::new(c"sdallocx");
static DALLOCX: Real = Real::new(c"dallocx");
static SALLOCX: Real = Real::new(c"sallocx");

type MallocxFn = unsafe extern "C" fn(usize, c_int) -> *mut c_void;
type RallocxFn = unsafe extern "C" fn(*mut c_void, usize, c_int) -> *mut c_void;
type XallocxFn = unsafe extern "C" fn(*mut c_void, usize, usize, c_int) -> usize;
type SdallocxFn = unsafe extern "C" fn(*mut c_void, usize, c_int);
type DallocxFn = unsafe extern "C" fn(*mut c_void, c_int);
type SallocxFn = unsafe extern "C" fn(*const c_void, c_int) -> usize;

/// `sallocx(p, flags)`: the real size of a live block (0 when unknown).
fn usable(p: *mut c_void, flags: c_int) -> usize {
    let f = SALLOCX.get();
    if f.is_null() || p.is_null() {
        return 0;
    }
    // SAFETY: `f` is jemalloc's `sallocx`; `p` is a live block of jemalloc.
    unsafe { core::mem::transmute::<*mut c_void, SallocxFn>(f)(p, flags) }
}

/// The attrs of a MALLOC with `flags`: owner (arena), the flag fields, the usable size.
fn attrs(flags: c_int, usable: usize, out: &mut TextBuf<192>) {
    let arena = (flags as u32) >> flag::ARENA_SHIFT;
    let _ = if arena == 0 {
        write!(out, "owner:default")
    } else {
        write!(out, "owner:arena{}", arena - 1)
    };
    let _ = write!(out, ",flags:0x{:x}", flags as u32);
    if flags & flag::LG_ALIGN_MASK != 0 {
        let _ = write!(out, ",lg_align:{}", flags & flag::LG_ALIGN_MASK);
    }
    if flags & flag::ZERO != 0 {
        let _ = write!(out, ",zero:1");
    }
    if (flags & flag::TCACHE_MASK) >> flag::TCACHE_SHIFT == 1 {
        let _ = write!(out, ",tcache:none");
    }
    if usable != 0 {
        let _ = write!(out, ",usable:{usable}");
    }
}

fn emit_malloc(p: *mut c_void, size: usize, flags: c_int) {
    if p.is_null() || !sdk::enabled() {
        return;
    }
    sdk::guard((), || {
        let mut a = TextBuf::<192>::new();
        attrs(flags, usable(p, flags), &mut a);
        sdk::emit(
            &Event::malloc(EVENT_TYPE, p as u64, size as u64)
                .attrs(a.as_c_str())
                .c_stack(),
        );
    });
}

fn emit_free(p: *mut c_void, size: usize) {
    if p.is_null() || !sdk::enabled() {
        return;
    }
    sdk::guard((), || {
        sdk::emit(&Event::free(EVENT_TYPE, p as u64, size as u64));
    });
}

fn init(host: &sdk::Host) -> Result<(), i32> {
    if !host.supports_c_stack() {
        host.log(
            sdk::Level::Warn,
            c"jemalloc adapter: this memscope probe predates ABI 1.1; rows will have no C stacks",
        );
    }
    Ok(())
}

sdk::memscope_adapter!(name: "jemalloc", init: init);

/// `void *mallocx(size_t size, int flags)`.
///
/// # Safety
/// jemalloc's contract.
#[no_mangle]
pub unsafe extern "C" fn mallocx(size: usize, flags: c_int) -> *mut c_void {
    let f = MALLOCX.get();
    if f.is_null() {
        return core::ptr::null_mut();
    }
    // SAFETY: jemalloc's `mallocx`, arguments forwarded.
    let p = unsafe { core::mem::transmute::<*mut c_void, MallocxFn>(f)(size, flags) };
    emit_malloc(p, size, flags);
    p
}

/// `void *rallocx(void *ptr, size_t size, int flags)`.
///
/// # Safety
/// jemalloc's contract: `ptr` a live block.
#[no_mangle]
pub unsafe extern "C" fn rallocx(ptr: *mut c_void, size: usize, flags: c_int) -> *mut c_void {
    let f = RALLOCX.get();
    if f.is_null() {
        return core::ptr::null_mut();
    }
    // SAFETY: jemalloc's `rallocx`, arguments forwarded.
    let p = unsafe { core::mem::transmute::<*mut c_void, RallocxFn>(f)(ptr, size, flags) };
    if !p.is_null() {
        emit_free(ptr, 0);
        emit_malloc(p, size, flags);
    }
    p
}

/// `size_t xallocx(void *ptr, size_t size, size_t extra, int flags)`: resizes in place.
///
/// # Safety
/// jemalloc's contract: `ptr` a live block.
#[no_mangle]
pub unsafe extern "C" fn xallocx(
    ptr: *mut c_void,
    size: usize,
    extra: usize,
    flags: c_int,
) -> usize {
    let f = XALLOCX.get();
    if f.is_null() {
        return 0;
    }
    let before = usable(ptr, flags);
    // SAFETY: jemalloc's `xallocx`, arguments forwarded.
    let n = unsafe { core::mem::transmute::<*mut c_void, XallocxFn>(f)(ptr, size, extra, flags) };
    if n != before {
        emit_free(ptr, 0);
        emit_malloc(ptr, n, flags);
    }
    n
}

/// `void sdallocx(void *ptr, size_t size, int flags)`.
///
/// # Safety
/// jemalloc's contract.
#[no_mangle]
pub unsafe extern "C" fn sdallocx(ptr: *mut c_void, size: usize, flags: c_int) {
    emit_free(ptr, 0);
    let f = SDALLOCX.get();
    if !f.is_null() {
        // SAFETY: jemalloc's `sdallocx`, arguments forwarded.
        unsafe { core::mem::transmute::<*mut c_void, SdallocxFn>(f)(ptr, size, flags) };
    }
}

/// `void dallocx(void *ptr, int flags)`.
///
/// # Safety
/// jemalloc's contract.
#[no_mangle]
pub unsafe extern "C" fn dallocx(ptr: *mut c_void, flags: c_int) {
    emit_free(ptr, 0);
    let f = DALLOCX.get();
    if !f.is_null() {
        // SAFETY: jemalloc's `dallocx`, arguments forwarded.
        unsafe { core::mem::transmute::<*mut c_void, DallocxFn>(f)(ptr, flags) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_become_the_owner_and_attr_keys() {
        let mut t = TextBuf::<192>::new();
        attrs(((3 + 1) << 20) | 0x100 | 0x40 | 6, 4096, &mut t);
        assert_eq!(
            t.as_str(),
            "owner:arena3,flags:0x400146,lg_align:6,zero:1,tcache:none,usable:4096"
        );
        t.clear();
        attrs(0, 0, &mut t);
        assert_eq!(t.as_str(), "owner:default,flags:0x0");
    }
}
