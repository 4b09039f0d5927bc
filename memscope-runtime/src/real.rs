//! A runtime service of every adapter (moved from the HAL adapter in issue 11, so no adapter
//! imports another): finding the real functions behind the probe's hooks (abi.md §2.5, §3 "Real
//! from", §4.1).
//!
//! A [`Real`] is a static, lazily resolved function pointer with an ordered list of lookup
//! [`Step`]s. The first step that yields a pointer wins and is cached; a failed lookup is *not*
//! cached (abi.md §2.5 Rec: the library may be loaded later), so a hook called before the
//! driver is loaded still finds it afterwards.
//!
//! Steps, in the order each hook lists them:
//! * [`Step::Default`] — `dlsym(RTLD_DEFAULT, sym)`: the global scope (how msMemScope finds
//!   `halMemAllocInner`).
//! * [`Step::Next`] — `dlsym(RTLD_NEXT, sym)`: the next definition after the probe, i.e. the
//!   library the job meant to call (never our own export).
//! * [`Step::Loaded`] — `dlopen(lib, RTLD_NOW | RTLD_NOLOAD)` then `dlsym(handle, sym)`: works
//!   when the library was loaded `RTLD_LOCAL` and the two lookups above cannot see it
//!   (verified pitfall of abi.md §2.5); never loads a second copy.
//! * [`Step::Load`] — `dlopen("$ENV/<sub>/<lib>", RTLD_NOW | RTLD_GLOBAL)`, then the bare
//!   `lib` through the normal search path, then `dlsym`: the explicit handle msMemScope uses
//!   ("vallina symbol", behaviour spec §9), kept as the last resort.
//!
//! A failed `dlsym` allocates on glibc (design notes §3): callers resolve while holding the
//! runtime's reentrancy guard when they can, so allocator hooks forward instead of recording.

use core::ffi::{c_char, c_void, CStr};
use core::ptr::null_mut;
use core::sync::atomic::{AtomicPtr, Ordering};

/// One way of looking a symbol up.
#[derive(Clone, Copy, Debug)]
pub enum Step {
    /// `dlsym(RTLD_DEFAULT, sym)`.
    Default(&'static CStr),
    /// `dlsym(RTLD_NEXT, sym)`.
    Next(&'static CStr),
    /// `dlsym(dlopen(lib, RTLD_NOW | RTLD_NOLOAD), sym)`.
    Loaded {
        /// Library name or path as `dlopen` takes it (a bare soname matches a loaded object).
        lib: &'static CStr,
        /// Symbol.
        sym: &'static CStr,
    },
    /// `dlsym(dlopen("$env/sub/lib" or "lib", RTLD_NOW | RTLD_GLOBAL), sym)`.
    Load {
        /// Environment variable holding the install root (`ASCEND_HOME_PATH`, …).
        env: &'static CStr,
        /// Directory under the root (`lib64`, `lib`).
        sub: &'static str,
        /// Library file name.
        lib: &'static CStr,
        /// Symbol.
        sym: &'static CStr,
    },
}

/// A lazily resolved real function. Holds the address only; callers transmute it to the
/// function type they declared in the `Real`'s documentation.
#[derive(Debug)]
pub struct Real {
    cache: AtomicPtr<c_void>,
    steps: &'static [Step],
}

impl Real {
    /// A resolver trying `steps` in order.
    pub const fn new(steps: &'static [Step]) -> Real {
        Real {
            cache: AtomicPtr::new(null_mut()),
            steps,
        }
    }

    /// The address if a lookup already found it; never looks anything up.
    #[inline]
    pub fn peek(&self) -> Option<*mut c_void> {
        let p = self.cache.load(Ordering::Acquire);
        (!p.is_null()).then_some(p)
    }

    /// The function's address, resolving it on first use. `None` when no step finds it (not
    /// cached: the next call tries again).
    #[inline]
    pub fn get(&self) -> Option<*mut c_void> {
        let p = self.cache.load(Ordering::Acquire);
        if !p.is_null() {
            return Some(p);
        }
        self.resolve()
    }

    #[cold]
    fn resolve(&self) -> Option<*mut c_void> {
        // Internal: lookups allocate, and the probe's own calls are no events. A step that may
        // load a library (constructors may start threads, which inherit the signal mask) runs
        // with signals as they are.
        let p = self
            .steps
            .iter()
            .map(|s| match s {
                Step::Load { .. } => crate::internal_unmasked(|| lookup(*s)),
                _ => crate::internal(|| lookup(*s)),
            })
            .find(|p| !p.is_null())?;
        self.cache.store(p, Ordering::Release);
        Some(p)
    }
}

/// Runs one step; null when it finds nothing.
pub fn lookup(step: Step) -> *mut c_void {
    match step {
        // SAFETY: `sym` is NUL-terminated; RTLD_DEFAULT/RTLD_NEXT are valid pseudo-handles.
        Step::Default(sym) => unsafe { libc::dlsym(libc::RTLD_DEFAULT, sym.as_ptr()) },
        // SAFETY: as above. RTLD_NEXT is relative to the object containing this code: the
        // probe, where the hooks live.
        Step::Next(sym) => unsafe { libc::dlsym(libc::RTLD_NEXT, sym.as_ptr()) },
        Step::Loaded { lib, sym } => {
            // SAFETY: NUL-terminated name; NOLOAD never loads or initialises anything.
            let h = unsafe { libc::dlopen(lib.as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
            sym_in(h, sym)
        }
        Step::Load { env, sub, lib, sym } => {
            let mut path = [0u8; 4096];
            let h = match install_path(env, sub, lib, &mut path) {
                // SAFETY: `p` is a NUL-terminated path in `path`, alive for the call.
                Some(p) => unsafe { libc::dlopen(p, libc::RTLD_NOW | libc::RTLD_GLOBAL) },
                None => null_mut(),
            };
            let h = if h.is_null() {
                // SAFETY: NUL-terminated name.
                unsafe { libc::dlopen(lib.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) }
            } else {
                h
            };
            sym_in(h, sym)
        }
    }
}

/// `dlsym(h, sym)`, null for a null handle. The handle is never closed (a loaded CANN library
/// stays loaded for the life of the process anyway).
fn sym_in(h: *mut c_void, sym: &CStr) -> *mut c_void {
    if h.is_null() {
        return null_mut();
    }
    // SAFETY: `h` is a live handle returned by dlopen; `sym` is NUL-terminated.
    unsafe { libc::dlsym(h, sym.as_ptr()) }
}

/// Builds `"$env/sub/lib"` into `buf` without allocating; `None` when `env` is unset or empty
/// or the path does not fit.
fn install_path(env: &CStr, sub: &str, lib: &CStr, buf: &mut [u8; 4096]) -> Option<*const c_char> {
    // SAFETY: `env` is NUL-terminated; getenv does not allocate. The returned string belongs to
    // the C library and is read before this function returns.
    let root = unsafe { libc::getenv(env.as_ptr()) };
    if root.is_null() {
        return None;
    }
    // SAFETY: getenv returns a NUL-terminated string.
    let root = unsafe { CStr::from_ptr(root) }.to_bytes();
    if root.is_empty() {
        return None;
    }
    let parts: [&[u8]; 5] = [root, b"/", sub.as_bytes(), b"/", lib.to_bytes()];
    let mut n = 0;
    for p in parts {
        buf.get_mut(n..n + p.len())?.copy_from_slice(p);
        n += p.len();
    }
    *buf.get_mut(n)? = 0;
    Some(buf.as_ptr().cast())
}

/// The path of the loaded object containing the address `addr` (its `dli_fname`), copied
/// NUL-terminated into `buf`; `None` if `addr` is in no object or the path does not fit.
pub fn object_of(addr: usize, buf: &mut [u8; 4096]) -> Option<*const c_char> {
    // SAFETY: an all-zero Dl_info is a valid out-parameter.
    let mut info: libc::Dl_info = unsafe { core::mem::zeroed() };
    // SAFETY: dladdr only compares its first argument with the loaded objects' ranges.
    if unsafe { libc::dladdr(addr as *const c_void, &mut info) } == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dli_fname is the NUL-terminated path the loader knows the object by.
    let name = unsafe { CStr::from_ptr(info.dli_fname) }.to_bytes_with_nul();
    buf.get_mut(..name.len())?.copy_from_slice(name);
    Some(buf.as_ptr().cast())
}

#[cfg(test)]
mod tests {
    use super::*;

    static ABS: Real = Real::new(&[
        Step::Next(c"memscope_no_such_symbol"),
        Step::Default(c"abs"),
    ]);
    static NONE: Real = Real::new(&[Step::Default(c"memscope_no_such_symbol")]);

    #[test]
    fn first_step_that_finds_the_symbol_wins_and_is_cached() {
        let p = ABS.get().expect("abs is in libc");
        // SAFETY: `abs` has this signature.
        let f: extern "C" fn(i32) -> i32 = unsafe { core::mem::transmute(p) };
        assert_eq!(f(-4), 4);
        assert_eq!(ABS.get(), Some(p));
    }

    #[test]
    fn a_failed_lookup_is_not_cached() {
        assert_eq!(NONE.get(), None);
        assert!(NONE.cache.load(Ordering::Relaxed).is_null());
    }

    #[test]
    fn loaded_step_finds_libc_by_soname_and_load_step_builds_the_install_path() {
        assert!(!lookup(Step::Loaded {
            lib: c"libc.so.6",
            sym: c"abs"
        })
        .is_null());
        assert!(lookup(Step::Loaded {
            lib: c"libmemscope_not_loaded.so",
            sym: c"abs"
        })
        .is_null());
        let mut buf = [0u8; 4096];
        assert!(install_path(c"MEMSCOPE_TEST_UNSET_ROOT", "lib64", c"x.so", &mut buf).is_none());
        let p = install_path(c"PATH", "lib64", c"x.so", &mut buf).expect("PATH is set");
        // SAFETY: install_path wrote a NUL-terminated string.
        let s = unsafe { CStr::from_ptr(p) }.to_str().unwrap();
        assert!(s.ends_with("/lib64/x.so"), "{s}");
    }

    #[test]
    fn object_of_names_the_library_holding_an_address() {
        let mut buf = [0u8; 4096];
        let p = object_of(libc::abs as *const () as usize, &mut buf).expect("in libc");
        // SAFETY: object_of wrote a NUL-terminated string.
        let s = unsafe { CStr::from_ptr(p) }.to_str().unwrap();
        assert!(s.contains("libc"), "{s}");
    }
}
