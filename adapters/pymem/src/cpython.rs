//! The slice of CPython's C API the adapter uses, resolved at run time (`dlsym`): the adapter
//! links against no libpython, so one build serves every CPython 3.8+ (standalone `python`,
//! whose executable exports the API, or an embedding program linked with `libpython3.x.so`).
//!
//! Layouts and values are CPython's stable ones (`Include/cpython/pymem.h`,
//! `Include/cpython/objimpl.h`): unchanged from 3.5 to 3.14.

use core::ffi::{c_char, c_int, c_void, CStr};

/// `PyMemAllocatorDomain`: `PYMEM_DOMAIN_RAW`, `_MEM`, `_OBJ`.
pub const DOMAINS: usize = 3;

/// `PyMemAllocatorEx`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct MemAllocator {
    /// Passed as first argument to the four functions.
    pub ctx: *mut c_void,
    /// `void *malloc(void *ctx, size_t size)`.
    pub malloc: Option<unsafe extern "C" fn(*mut c_void, usize) -> *mut c_void>,
    /// `void *calloc(void *ctx, size_t nelem, size_t elsize)`.
    pub calloc: Option<unsafe extern "C" fn(*mut c_void, usize, usize) -> *mut c_void>,
    /// `void *realloc(void *ctx, void *ptr, size_t new_size)`.
    pub realloc: Option<unsafe extern "C" fn(*mut c_void, *mut c_void, usize) -> *mut c_void>,
    /// `void free(void *ctx, void *ptr)`.
    pub free: Option<unsafe extern "C" fn(*mut c_void, *mut c_void)>,
}

impl MemAllocator {
    /// All NULL (filled by `PyMem_GetAllocator`).
    pub const EMPTY: MemAllocator = MemAllocator {
        ctx: core::ptr::null_mut(),
        malloc: None,
        calloc: None,
        realloc: None,
        free: None,
    };
}

/// `PyObjectArenaAllocator`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ArenaAllocator {
    /// Passed as first argument to both functions.
    pub ctx: *mut c_void,
    /// `void *alloc(void *ctx, size_t size)`.
    pub alloc: Option<unsafe extern "C" fn(*mut c_void, usize) -> *mut c_void>,
    /// `void free(void *ctx, void *ptr, size_t size)`.
    pub free: Option<unsafe extern "C" fn(*mut c_void, *mut c_void, usize)>,
}

impl ArenaAllocator {
    /// All NULL (filled by `PyObject_GetArenaAllocator`).
    pub const EMPTY: ArenaAllocator = ArenaAllocator {
        ctx: core::ptr::null_mut(),
        alloc: None,
        free: None,
    };
}

/// `Py_AuditHookFunction`.
pub type AuditHook = unsafe extern "C" fn(*const c_char, *mut c_void, *mut c_void) -> c_int;

/// The API functions, all found or none.
#[derive(Clone, Copy)]
pub struct Api {
    /// `void PyMem_GetAllocator(PyMemAllocatorDomain, PyMemAllocatorEx *)`.
    pub get_allocator: unsafe extern "C" fn(c_int, *mut MemAllocator),
    /// `void PyMem_SetAllocator(PyMemAllocatorDomain, PyMemAllocatorEx *)`.
    pub set_allocator: unsafe extern "C" fn(c_int, *mut MemAllocator),
    /// `void PyObject_GetArenaAllocator(PyObjectArenaAllocator *)`.
    pub get_arena: unsafe extern "C" fn(*mut ArenaAllocator),
    /// `void PyObject_SetArenaAllocator(PyObjectArenaAllocator *)`.
    pub set_arena: unsafe extern "C" fn(*mut ArenaAllocator),
    /// `int Py_IsInitialized(void)`.
    pub is_initialized: unsafe extern "C" fn() -> c_int,
    /// `int PySys_AddAuditHook(Py_AuditHookFunction, void *)` (3.8+; callable before
    /// `Py_Initialize`, hooks kept across it).
    pub add_audit_hook: unsafe extern "C" fn(AuditHook, *mut c_void) -> c_int,
}

extern "C" {
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
}

/// glibc's `RTLD_DEFAULT`: the global symbol scope of the process.
const RTLD_DEFAULT: *mut c_void = core::ptr::null_mut();

fn sym(name: &CStr) -> *mut c_void {
    // SAFETY: `name` is NUL-terminated; RTLD_DEFAULT is a valid pseudo-handle.
    unsafe { dlsym(RTLD_DEFAULT, name.as_ptr()) }
}

impl Api {
    /// The API of the CPython in the process's global scope, or `None` (no CPython there, or
    /// one older than 3.8).
    pub fn find() -> Option<Api> {
        let names: [&CStr; 6] = [
            c"PyMem_GetAllocator",
            c"PyMem_SetAllocator",
            c"PyObject_GetArenaAllocator",
            c"PyObject_SetArenaAllocator",
            c"Py_IsInitialized",
            c"PySys_AddAuditHook",
        ];
        let mut p = [core::ptr::null_mut(); 6];
        for (slot, name) in p.iter_mut().zip(names) {
            *slot = sym(name);
            if slot.is_null() {
                return None;
            }
        }
        // SAFETY: each symbol is CPython's function of that name, whose C signature is the
        // field's type (CPython's public API, unchanged since 3.8); a function pointer and a
        // data pointer have the same size and representation on the platforms memscope runs on.
        unsafe {
            Some(Api {
                get_allocator: fn_ptr(p[0]),
                set_allocator: fn_ptr(p[1]),
                get_arena: fn_ptr(p[2]),
                set_arena: fn_ptr(p[3]),
                is_initialized: fn_ptr(p[4]),
                add_audit_hook: fn_ptr(p[5]),
            })
        }
    }
}

/// `p` as a function pointer of type `F`.
///
/// # Safety
/// `p` is non-NULL and points to a function whose signature is `F`, itself a function pointer
/// type.
unsafe fn fn_ptr<F: Copy>(p: *mut c_void) -> F {
    const { assert!(core::mem::size_of::<F>() == core::mem::size_of::<*mut c_void>()) };
    // SAFETY: the caller's contract; sizes checked above.
    unsafe { core::mem::transmute_copy::<*mut c_void, F>(&p) }
}
