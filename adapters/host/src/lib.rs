//! memscope adapter `host`: the libc allocator of any dynamically linked process, with C call
//! stacks.
//!
//! Two halves, as every built-in adapter (`memscope_collect::adapter`):
//!
//! * In the traced process (probe side, no allocation on any hook path):
//!   - [`hooks`] — `malloc`, `calloc`, `realloc`, `reallocarray`, `free`, `posix_memalign`,
//!     `aligned_alloc`, `memalign`, `valloc`, `pvalloc`, and with `MEMSCOPE_HOST_MMAP=1`
//!     `mmap`/`mmap64`/`munmap`/`mremap`. Nothing else is interposed (notably not `dlopen`: glibc
//!     resolves a bare library name with the `RUNPATH` of the calling object, which a wrapper
//!     would change). The probe exports them through [`export_hooks!`]; the allocator entry points
//!     are naked x86_64 stubs that hand the hook the caller's stack pointer and frame pointer, so
//!     stacks start exactly at the caller and never contain probe frames.
//!   - [`real`] — where the hooks forward: glibc's `__libc_*` entry points, or the next
//!     definition (`dlsym(RTLD_NEXT)`) when another allocator (jemalloc, tcmalloc) is preloaded
//!     after the probe; a bootstrap arena serves `dlsym`'s own allocations.
//!   - [`unwind`] + [`cfi`] — C stack capture: a frame walk whose per-return-address rules come
//!     from the module's `.eh_frame` (evaluated once, cached lock-free); frames with a frame
//!     pointer follow it, frames without one are unwound by their CFI rule.
//!   - [`intern`] — lock-free stack interning: each distinct stack is written once per process
//!     as a `StackDef` record.
//!   - [`modules`] — the module map (`Module` records: path, load bias, range, build id),
//!     announced for each object the first time a captured stack runs through it (found with
//!     `_dl_find_object`), so libraries loaded after start are symbolised too.
//! * In the collector (feature `collector`, safe code):
//!   - `typer` — `Malloc`/`Free` records into `MALLOC`/`FREE` events of
//!     type `HOST` on device `cpu` (`allocation_id`, `addr`, `size`, `total` = live heap
//!     bytes), with the symbolised `Call Stack(C)`; `Mmap`/`Munmap`/`Mremap` into
//!     the page ranges of type `HOST_MMAP` (`total` = live mapped bytes).
//!   - symbolisation is the collector's shared C stack service (`memscope_collect::symbolize`,
//!     through `TypeCtx::c_stack_text`), as stack capture is the runtime's.
//!   - `leaks` — the end-of-run leak summary layer (live blocks by allocation stack).
//!   - `fast` — the same typing and leak/peak accounting straight from the records, without
//!     events, for runs that write no HOST rows (the default).
//!   - `preflight` — the statically-linked-program check made before launch.
//!
//! # Recorded semantics (glibc's documented behaviour)
//! * A successful allocation is one `Malloc` (size = requested bytes; `calloc`: `n * m`;
//!   zero-size requests that return a pointer are recorded with size 0). A failed one (NULL,
//!   or an error code from `posix_memalign`) records nothing.
//! * `free(NULL)` records nothing; `free(p)` records `Free` stamped *before* the block is
//!   released, so another thread that receives the same address is ordered after it.
//! * `realloc(NULL, n)` is `malloc(n)`. `realloc(p, 0)` frees `p` and returns NULL (glibc):
//!   one `Free`. A successful `realloc(p, n)` is a `Free` of `p` (stamped before the
//!   call) and a `Malloc` of the result (also when the address did not change). A failed
//!   `realloc` leaves `p` alive and records nothing. `reallocarray` is `realloc` after its
//!   overflow check (`ENOMEM`, nothing recorded).
//! * With `MEMSCOPE_HOST_MMAP=1`: a successful `mmap` is one `Mmap` (length rounded up to
//!   whole pages); a successful `munmap` one `Munmap` and a successful `mremap` one
//!   `Mremap` (old and new range, page-rounded), both stamped before the call; failed calls
//!   record nothing. The collector keeps the mapped page ranges: a partial `munmap` or a
//!   `MAP_FIXED` overlay splits a mapping, `mremap` moves it.
//! * A call made inside another hook — a signal handler that interrupted a hook, a foreign
//!   allocator's `mmap` — is the program's and is recorded (`memscope_runtime::enter`); the
//!   probe's own allocations (symbol lookups, its init) never are. Calls made before the
//!   probe is ready (before libc's own initialisation, passive probe) are forwarded and not
//!   recorded; those that gave up waiting for another thread's init, and every call that
//!   could not be written, are counted as dropped. The collector ignores frees of blocks it
//!   never saw allocated.
//!
//! # Limits
//! * `RTLD_DEEPBIND`: a library opened with `dlopen(…, RTLD_DEEPBIND)` looks symbols up in its
//!   own dependencies first, so its `malloc`/`free` calls bind to glibc's directly and are not
//!   traced (the flag is left as the program passed it: a hook never changes how the target
//!   runs). Blocks such a library allocates and the program frees reach the `free` hook as
//!   addresses it never saw: the hook records the `Free` and forwards to the real `free`
//!   (glibc, which owns the block), and the collector drops that free silently. Blocks the
//!   program allocates and such a library frees stay live in the trace and appear in the leak
//!   summary.
//! * Libraries are only announced when `_dl_find_object` exists (glibc ≥ 2.35); elsewhere C
//!   stacks print raw addresses. Objects with no file (the vDSO) or a relative `l_name`
//!   (loaded through a relative path) print as addresses too.
//! * C stacks are captured on x86_64 only.
#![deny(clippy::undocumented_unsafe_blocks)]

/// This adapter's source id: its bit in the selection mask (`MEMSCOPE_ADAPTERS`, part of the
/// probe's environment protocol, so it never changes).
pub const SOURCE: memscope_wire::SourceId = memscope_wire::SourceId(6);

pub mod hooks;
pub mod real;

/// The runtime's C stack service (walk, CFI rules, interning, module map), shared with every
/// adapter since issue 11; re-exported under the names this crate used.
pub use memscope_runtime::stack::{cfi, intern, modules, unwind};

#[cfg(feature = "collector")]
pub mod addr_hash;
#[cfg(feature = "collector")]
pub mod fast;
#[cfg(feature = "collector")]
pub mod leaks;
#[cfg(feature = "collector")]
pub mod maps;
#[cfg(feature = "collector")]
pub mod preflight;
#[cfg(feature = "collector")]
mod row;
#[cfg(feature = "collector")]
pub mod typer;

#[cfg(feature = "collector")]
pub use descriptor::DESCRIPTOR;
#[cfg(feature = "collector")]
pub use leaks::leak_layer;

/// Defines this adapter's exported C symbols in the invoking crate (the probe cdylib only).
///
/// On x86_64 and aarch64 the allocation entry points are naked stubs: they pass the state at
/// their entry — the return address into the caller, the caller's stack pointer after that
/// return, its frame pointer — as three extra arguments and tail-jump to the hook, which
/// therefore returns straight to the caller.
#[macro_export]
macro_rules! export_hooks {
    () => {
        $crate::__host_stub!(malloc, ["rsi", "rdx", "rcx"], ["x1", "x2", "x3"], (size: usize) -> *mut ::core::ffi::c_void);
        $crate::__host_stub!(calloc, ["rdx", "rcx", "r8"], ["x2", "x3", "x4"], (n: usize, m: usize) -> *mut ::core::ffi::c_void);
        $crate::__host_stub!(realloc, ["rdx", "rcx", "r8"], ["x2", "x3", "x4"], (p: *mut ::core::ffi::c_void, size: usize) -> *mut ::core::ffi::c_void);
        $crate::__host_stub!(reallocarray, ["rcx", "r8", "r9"], ["x3", "x4", "x5"], (p: *mut ::core::ffi::c_void, n: usize, m: usize) -> *mut ::core::ffi::c_void);
        $crate::__host_stub!(posix_memalign, ["rcx", "r8", "r9"], ["x3", "x4", "x5"], (out: *mut *mut ::core::ffi::c_void, align: usize, size: usize) -> ::core::ffi::c_int);
        $crate::__host_stub!(aligned_alloc, ["rdx", "rcx", "r8"], ["x2", "x3", "x4"], (align: usize, size: usize) -> *mut ::core::ffi::c_void);
        $crate::__host_stub!(memalign, ["rdx", "rcx", "r8"], ["x2", "x3", "x4"], (align: usize, size: usize) -> *mut ::core::ffi::c_void);
        $crate::__host_stub!(valloc, ["rsi", "rdx", "rcx"], ["x1", "x2", "x3"], (size: usize) -> *mut ::core::ffi::c_void);
        $crate::__host_stub!(pvalloc, ["rsi", "rdx", "rcx"], ["x1", "x2", "x3"], (size: usize) -> *mut ::core::ffi::c_void);

        /// `free`: forwards to the real allocator; records the free when HOST is enabled.
        ///
        /// # Safety
        /// `p` is NULL or a live block of this process's allocator.
        #[no_mangle]
        pub unsafe extern "C" fn free(p: *mut ::core::ffi::c_void) {
            // SAFETY: forwarded caller contract.
            unsafe { $crate::hooks::free(p) }
        }

        /// `mmap` (recorded with `MEMSCOPE_HOST_MMAP=1`).
        ///
        /// # Safety
        /// As `mmap(2)`.
        #[no_mangle]
        pub unsafe extern "C" fn mmap(
            addr: *mut ::core::ffi::c_void,
            len: usize,
            prot: ::core::ffi::c_int,
            flags: ::core::ffi::c_int,
            fd: ::core::ffi::c_int,
            off: i64,
        ) -> *mut ::core::ffi::c_void {
            // SAFETY: forwarded caller contract.
            unsafe { $crate::hooks::mmap(addr, len, prot, flags, fd, off) }
        }

        /// `mmap64` (the same function on LP64).
        ///
        /// # Safety
        /// As `mmap(2)`.
        #[no_mangle]
        pub unsafe extern "C" fn mmap64(
            addr: *mut ::core::ffi::c_void,
            len: usize,
            prot: ::core::ffi::c_int,
            flags: ::core::ffi::c_int,
            fd: ::core::ffi::c_int,
            off: i64,
        ) -> *mut ::core::ffi::c_void {
            // SAFETY: forwarded caller contract.
            unsafe { $crate::hooks::mmap(addr, len, prot, flags, fd, off) }
        }

        /// `munmap` (recorded with `MEMSCOPE_HOST_MMAP=1`).
        ///
        /// # Safety
        /// As `munmap(2)`.
        #[no_mangle]
        pub unsafe extern "C" fn munmap(addr: *mut ::core::ffi::c_void, len: usize) -> ::core::ffi::c_int {
            // SAFETY: forwarded caller contract.
            unsafe { $crate::hooks::munmap(addr, len) }
        }

        /// `mremap` (recorded with `MEMSCOPE_HOST_MMAP=1`). The C function is variadic; its
        /// only optional argument, `new_address`, is passed like a fifth fixed argument on
        /// the supported ABIs and only read with `MREMAP_FIXED`.
        ///
        /// # Safety
        /// As `mremap(2)`.
        #[no_mangle]
        pub unsafe extern "C" fn mremap(
            old: *mut ::core::ffi::c_void,
            old_size: usize,
            new_size: usize,
            flags: ::core::ffi::c_int,
            new_addr: *mut ::core::ffi::c_void,
        ) -> *mut ::core::ffi::c_void {
            // SAFETY: forwarded caller contract.
            unsafe { $crate::hooks::mremap(old, old_size, new_size, flags, new_addr) }
        }
    };
}

/// One exported allocation entry point (internal to [`export_hooks!`]): the registers of the
/// three extra arguments (return address, stack pointer, frame pointer) on x86_64 and on
/// aarch64, then the C signature.
#[doc(hidden)]
#[macro_export]
macro_rules! __host_stub {
    ($name:ident, [$ra:literal, $sp:literal, $fp:literal], [$ra64:literal, $sp64:literal, $fp64:literal],
     ($($arg:ident: $ty:ty),*) -> $ret:ty) => {
        /// Allocator entry point of the HOST adapter (forwards to the real allocator, records
        /// when HOST is enabled).
        ///
        /// # Safety
        /// As the C function of the same name.
        #[cfg(target_arch = "x86_64")]
        #[unsafe(naked)]
        #[no_mangle]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> $ret {
            // The return address is at [rsp]; the caller's stack pointer is past it.
            ::core::arch::naked_asm!(
                concat!("mov ", $ra, ", [rsp]"),
                concat!("lea ", $sp, ", [rsp + 8]"),
                concat!("mov ", $fp, ", rbp"),
                "jmp {hook}",
                hook = sym $crate::hooks::$name,
            )
        }

        /// Allocator entry point of the HOST adapter (forwards to the real allocator, records
        /// when HOST is enabled).
        ///
        /// # Safety
        /// As the C function of the same name.
        #[cfg(target_arch = "aarch64")]
        #[unsafe(naked)]
        #[no_mangle]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> $ret {
            // The return address is in LR (x30), `sp` is the caller's, x29 its frame pointer;
            // the hook returns through the untouched LR.
            ::core::arch::naked_asm!(
                concat!("mov ", $ra64, ", x30"),
                concat!("mov ", $sp64, ", sp"),
                concat!("mov ", $fp64, ", x29"),
                "b {hook}",
                hook = sym $crate::hooks::$name,
            )
        }

        /// Allocator entry point of the HOST adapter (no C stacks on this architecture).
        ///
        /// # Safety
        /// As the C function of the same name.
        #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
        #[no_mangle]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> $ret {
            // SAFETY: forwarded caller contract; a return address 0 means "no stack".
            unsafe { $crate::hooks::$name($($arg,)* 0, 0, 0) }
        }
    };
}

#[cfg(feature = "collector")]
mod descriptor {
    use memscope_collect::adapter::{AdapterDescriptor, ConfigKey, Setting, Volume};

    /// This adapter's descriptor: listed once, in the CLI's registration list
    /// (`memscope-cli/src/builtin.rs`); nothing registers it at load time, so the probe,
    /// which never names it, links none of the collector code it points to.
    pub static DESCRIPTOR: AdapterDescriptor = AdapterDescriptor {
        name: "host",
        source: crate::SOURCE,
        summary: "libc allocator (malloc & co., optional mmap) with C call stacks; opt-in",
        symbols: &[
            "malloc",
            "calloc",
            "realloc",
            "reallocarray",
            "free",
            "posix_memalign",
            "aligned_alloc",
            "memalign",
            "valloc",
            "pvalloc",
            "mmap",
            "mmap64",
            "munmap",
            "mremap",
        ],
        events: &[
            "MALLOC/HOST",
            "FREE/HOST",
            "MALLOC/HOST_MMAP",
            "FREE/HOST_MMAP",
        ],
        config_keys: &[ConfigKey {
            name: "MEMSCOPE_HOST_MMAP (environment)",
            summary:
                "1: also record mmap/munmap/mremap as HOST_MMAP mappings (page ranges; default off)",
        }],
        host_memory: true,
        new_typer: Some(|| Box::new(crate::typer::HostTyper::new())),
        // the end-of-run leak summary (issue 4), when HOST is selected
        layers: |cfg| crate::leaks::leak_layer(cfg).into_iter().collect(),
        // the same summary over the HOST rows of a dump (`memscope analyze leaks`)
        offline_leaks: || vec![Box::new(crate::leaks::HostLeaks::offline())],
        // issue 9: HOST heap records typed and accounted without events when HOST rows are
        // neither written nor analysed
        fast_path: Some(|cfg| Box::new(crate::fast::HostFast::for_config(cfg))),
        // statically linked programs, and (with HOST) programs with their own malloc (issue 4)
        preflight: Some(crate::preflight::warnings),
        settings: &[Setting {
            key: "",
            env: memscope_wire::probe_env::ENV_HOST_MMAP,
            summary: "1: also record mmap/munmap/mremap as HOST_MMAP mappings",
            value: None,
        }],
        volume: Volume::Account {
            is_row: memscope_collect::layers::is_host_adapter_row,
        },
        ..AdapterDescriptor::BASE
    };
}
