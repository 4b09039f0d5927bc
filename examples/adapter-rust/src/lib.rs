//! An example third-party memscope adapter written with `memscope-adapter-sdk`, outside
//! memscope's workspace: it reports the blocks of the demo pool library
//! (`examples/demo-pool/demo_pool.h`) as MALLOC/FREE rows of its own Event Type `DEMO_POOL_RS`,
//! with the pool's tag as owner (`DEMO_POOL_RS@kv_cache`), its own Attr key `pool_tag`, a
//! `Mark` row when the plugin starts, and C stacks on request.
//!
//! ```sh
//! cargo build --release --manifest-path examples/adapter-rust/Cargo.toml
//! memscope run --adapter-path examples/adapter-rust/target/release/libdemo_pool_adapter.so \
//!     --call-stack c:16 -- ./demo_job
//! ```
//!
//! memscope preloads the adapter after its probe, so the `demo_pool_*` functions below
//! interpose the library's; each forwards to the real one (`dlsym(RTLD_NEXT)`) and emits.

use core::ffi::{c_char, c_void, CStr};
use core::fmt::Write;
use core::sync::atomic::{AtomicPtr, Ordering};
use memscope_adapter_sdk::{self as sdk, Event, TextBuf};

const EVENT_TYPE: &CStr = c"DEMO_POOL_RS";

extern "C" {
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
}
/// glibc's `RTLD_NEXT`.
const RTLD_NEXT: *mut c_void = -1isize as *mut c_void;

type AllocFn = unsafe extern "C" fn(usize, *const c_char) -> *mut c_void;
type FreeFn = unsafe extern "C" fn(*mut c_void);

static REAL_ALLOC: AtomicPtr<c_void> = AtomicPtr::new(core::ptr::null_mut());
static REAL_FREE: AtomicPtr<c_void> = AtomicPtr::new(core::ptr::null_mut());

/// The next definition of `name` after this library (the pool library's), cached.
fn real(slot: &AtomicPtr<c_void>, name: &CStr) -> *mut c_void {
    let mut p = slot.load(Ordering::Acquire);
    if p.is_null() {
        // SAFETY: `name` is NUL-terminated; RTLD_NEXT is a valid pseudo-handle.
        p = unsafe { dlsym(RTLD_NEXT, name.as_ptr()) };
        slot.store(p, Ordering::Release);
    }
    p
}

fn init(host: &sdk::Host) -> Result<(), i32> {
    host.emit(&Event::mark(EVENT_TYPE, c"demo_pool_rs started"));
    Ok(())
}

sdk::memscope_adapter!(name: "demo_pool_rs", init: init);

/// `void *demo_pool_alloc(size_t, const char *)`, interposed.
///
/// # Safety
/// As the library's function: `tag` is NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn demo_pool_alloc(size: usize, tag: *const c_char) -> *mut c_void {
    let f = real(&REAL_ALLOC, c"demo_pool_alloc");
    if f.is_null() {
        return core::ptr::null_mut();
    }
    // SAFETY: `f` is the library's `demo_pool_alloc`; arguments forwarded unchanged.
    let p = unsafe { core::mem::transmute::<*mut c_void, AllocFn>(f)(size, tag) };
    if !p.is_null() && sdk::enabled() {
        sdk::guard((), || {
            let tag = if tag.is_null() {
                "none"
            } else {
                // SAFETY: caller contract: NUL-terminated.
                unsafe { CStr::from_ptr(tag) }.to_str().unwrap_or("?")
            };
            let mut attrs = TextBuf::<160>::new();
            let _ = write!(attrs, "owner:{tag},pool_tag:{tag}");
            sdk::emit(
                &Event::malloc(EVENT_TYPE, p as u64, size as u64)
                    .attrs(attrs.as_c_str())
                    .c_stack(),
            );
        });
    }
    p
}

/// `void demo_pool_free(void *)`, interposed. The FREE is emitted before the real call (once
/// freed, the address may be reused by another thread before the event is written).
///
/// # Safety
/// As the library's function.
#[no_mangle]
pub unsafe extern "C" fn demo_pool_free(p: *mut c_void) {
    if !p.is_null() && sdk::enabled() {
        sdk::guard((), || {
            sdk::emit(&Event::free(EVENT_TYPE, p as u64, 0));
        });
    }
    let f = real(&REAL_FREE, c"demo_pool_free");
    if !f.is_null() {
        // SAFETY: `f` is the library's `demo_pool_free`.
        unsafe { core::mem::transmute::<*mut c_void, FreeFn>(f)(p) };
    }
}
