//! The CPython C API, resolved at run time with `dlsym(RTLD_DEFAULT, …)`.
//!
//! The probe never links libpython: one `libmemscope_probe.so` serves every CPython ≥ 3.9 and
//! every non-Python program (msMemScope declares the same symbols weak, design notes §4.2). The
//! symbols are looked up once, the first time the Python API of the probe is used — always from
//! a thread that holds the GIL (the `memscope` module calls through `ctypes.PyDLL`) — never from
//! an allocator hook. Only the stable, long-lived functions of 3.9–3.13 are used; struct layouts
//! are read in exactly one place ([`Api::cfunction_parts`]), guarded by a type check, and only on
//! builds with the GIL (free-threaded builds are refused by the caller).

use core::ffi::{c_char, c_int, c_long, c_void};
use std::sync::OnceLock;

/// `PyObject *` (opaque).
pub type Obj = *mut c_void;
/// `PyFrameObject *` (opaque).
pub type Frame = *mut c_void;
/// `Py_tracefunc`.
pub type TraceFn = unsafe extern "C" fn(Obj, Frame, c_int, Obj) -> c_int;

/// `PyTrace_CALL` & co. (`Include/cpython/pystate.h`, unchanged since 2.x).
pub mod what {
    use core::ffi::c_int;
    /// A Python function is entered (or a generator resumed).
    pub const CALL: c_int = 0;
    /// A Python function returns (also on exception, and on yield).
    pub const RETURN: c_int = 3;
    /// A C function is about to be called.
    pub const C_CALL: c_int = 4;
    /// A C function raised.
    pub const C_EXCEPTION: c_int = 5;
    /// A C function returned.
    pub const C_RETURN: c_int = 6;
}

macro_rules! api {
    ($( $field:ident : $name:literal => fn($($arg:ty),*) $(-> $ret:ty)? ;)*) => {
        /// The resolved functions (each `None` when the symbol is absent).
        #[allow(missing_docs)]
        pub struct Api {
            /// `(major, minor)` from `Py_GetVersion()`.
            pub version: (u32, u32),
            /// `&PyCFunction_Type` (null when absent).
            pub cfunction_type: Obj,
            /// `&PyModule_Type` (null when absent).
            pub module_type: Obj,
            /// `Py_None` (`&_Py_NoneStruct`; null when absent).
            pub none: Obj,
            $( pub $field: Option<unsafe extern "C" fn($($arg),*) $(-> $ret)?>, )*
        }

        impl Api {
            fn resolve() -> Api {
                Api {
                    version: (0, 0),
                    cfunction_type: sym(b"PyCFunction_Type\0"),
                    module_type: sym(b"PyModule_Type\0"),
                    none: sym(b"_Py_NoneStruct\0"),
                    $( $field: {
                        let p = sym(concat!($name, "\0").as_bytes());
                        // SAFETY: a non-null `dlsym` result for this CPython symbol is a
                        // function with exactly this C signature (stable ABI since 3.9).
                        (!p.is_null()).then(|| unsafe { core::mem::transmute::<Obj, _>(p) })
                    }, )*
                }
            }
        }
    };
}

api! {
    is_initialized: "Py_IsInitialized" => fn() -> c_int;
    get_version: "Py_GetVersion" => fn() -> *const c_char;
    set_profile: "PyEval_SetProfile" => fn(Option<TraceFn>, Obj);
    set_profile_all: "PyEval_SetProfileAllThreads" => fn(Option<TraceFn>, Obj);
    set_profile_ts: "_PyEval_SetProfile" => fn(Obj, Option<TraceFn>, Obj) -> c_int;
    thread_state_get: "PyThreadState_Get" => fn() -> Obj;
    thread_state_interp: "PyThreadState_GetInterpreter" => fn(Obj) -> Obj;
    interp_thread_head: "PyInterpreterState_ThreadHead" => fn(Obj) -> Obj;
    thread_state_next: "PyThreadState_Next" => fn(Obj) -> Obj;
    get_frame: "PyEval_GetFrame" => fn() -> Frame;
    frame_code: "PyFrame_GetCode" => fn(Frame) -> Obj;
    frame_back: "PyFrame_GetBack" => fn(Frame) -> Frame;
    frame_line: "PyFrame_GetLineNumber" => fn(Frame) -> c_int;
    incref: "Py_IncRef" => fn(Obj);
    decref: "Py_DecRef" => fn(Obj);
    getattr: "PyObject_GetAttrString" => fn(Obj, *const c_char) -> Obj;
    get_item: "PyMapping_GetItemString" => fn(Obj, *const c_char) -> Obj;
    as_utf8: "PyUnicode_AsUTF8AndSize" => fn(Obj, *mut isize) -> *const c_char;
    as_long: "PyLong_AsLong" => fn(Obj) -> c_long;
    is_subtype: "PyType_IsSubtype" => fn(Obj, Obj) -> c_int;
    err_fetch: "PyErr_Fetch" => fn(*mut Obj, *mut Obj, *mut Obj);
    err_restore: "PyErr_Restore" => fn(Obj, Obj, Obj);
    err_clear: "PyErr_Clear" => fn();
    import_module: "PyImport_ImportModule" => fn(*const c_char) -> Obj;
    call_object: "PyObject_CallObject" => fn(Obj, Obj) -> Obj;
    tuple_new: "PyTuple_New" => fn(isize) -> Obj;
    tuple_set: "PyTuple_SetItem" => fn(Obj, isize, Obj) -> c_int;
    long_from: "PyLong_FromLong" => fn(c_long) -> Obj;
    unicode_from: "PyUnicode_FromString" => fn(*const c_char) -> Obj;
    cfunction_new: "PyCFunction_NewEx" => fn(*const c_void, Obj, Obj) -> Obj;
}

fn sym(name: &[u8]) -> Obj {
    // SAFETY: `name` is NUL-terminated; RTLD_DEFAULT searches the global scope.
    unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr().cast()) }
}

/// Parses `"3.11.7 (main, …"` into `(3, 11)`.
pub fn parse_version(s: &[u8]) -> Option<(u32, u32)> {
    let mut it = s.split(|&b| b == b'.' || b == b' ');
    let num = |p: Option<&[u8]>| -> Option<u32> {
        let p = p?;
        let digits: Vec<u8> = p.iter().copied().take_while(u8::is_ascii_digit).collect();
        std::str::from_utf8(&digits).ok()?.parse().ok()
    };
    Some((num(it.next())?, num(it.next())?))
}

// SAFETY: the two raw pointers are addresses of static type objects of the interpreter, only
// compared and passed back to it; the rest are plain function pointers.
unsafe impl Send for Api {}
// SAFETY: as above; the struct is never mutated after initialisation.
unsafe impl Sync for Api {}

static API: OnceLock<Api> = OnceLock::new();

/// The resolved API, or a one-line reason why the Python features cannot work here (no
/// interpreter in this process, older than 3.9, symbols missing).
pub fn api() -> Result<&'static Api, &'static str> {
    let a = API.get_or_init(|| {
        // `dlsym` may allocate: the probe's own doing, never an event
        let mut a = memscope_runtime::internal(Api::resolve);
        if let Some(v) = a.get_version {
            // SAFETY: Py_GetVersion returns a static NUL-terminated string.
            let s = unsafe { core::ffi::CStr::from_ptr(v()) };
            a.version = parse_version(s.to_bytes()).unwrap_or((0, 0));
        }
        a
    });
    let ready = a.is_initialized.is_some_and(|f| {
        // SAFETY: Py_IsInitialized has no preconditions.
        unsafe { f() != 0 }
    });
    if !ready {
        return Err("no Python interpreter is running in this process");
    }
    if a.version < (3, 9) {
        return Err("Python 3.9 or newer is needed for Python tracing");
    }
    let needed = a.set_profile.is_some()
        && a.get_frame.is_some()
        && a.frame_code.is_some()
        && a.frame_back.is_some()
        && a.incref.is_some()
        && a.decref.is_some()
        && a.getattr.is_some()
        && a.as_utf8.is_some()
        && a.as_long.is_some()
        && a.err_fetch.is_some()
        && a.err_restore.is_some()
        && a.err_clear.is_some();
    if !needed {
        return Err("this Python lacks a C API function memscope's tracer needs");
    }
    CHECKED.store(true, core::sync::atomic::Ordering::Release);
    Ok(a)
}

/// The API already validated by [`api`] (the tracer checked it at start): one load, for the
/// profile hook's hot path. `None` before the first successful [`api`].
#[inline]
pub fn api_checked() -> Option<&'static Api> {
    if CHECKED.load(core::sync::atomic::Ordering::Acquire) {
        API.get()
    } else {
        None
    }
}

static CHECKED: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);

/// Exception state saved around API calls made from inside the profile hook (which may run
/// while an exception propagates).
pub struct SavedError(Obj, Obj, Obj);

impl Api {
    /// Saves and clears the current exception (GIL held).
    pub fn save_error(&self) -> SavedError {
        let mut e = SavedError(
            core::ptr::null_mut(),
            core::ptr::null_mut(),
            core::ptr::null_mut(),
        );
        if let Some(f) = self.err_fetch {
            // SAFETY: GIL held (caller contract); the out-pointers are valid.
            unsafe { f(&mut e.0, &mut e.1, &mut e.2) };
        }
        e
    }

    /// Restores an exception saved by [`Api::save_error`], dropping any raised since.
    pub fn restore_error(&self, e: SavedError) {
        // SAFETY: GIL held; PyErr_Restore steals the three (possibly null) references.
        unsafe {
            if let Some(c) = self.err_clear {
                c();
            }
            if let Some(r) = self.err_restore {
                r(e.0, e.1, e.2);
            }
        }
    }

    /// Drops a reference (null is ignored).
    pub fn decref(&self, o: Obj) {
        if !o.is_null() {
            if let Some(d) = self.decref {
                // SAFETY: GIL held; `o` is an owned reference.
                unsafe { d(o) };
            }
        }
    }

    /// Attribute `name` (NUL-terminated) of `o` as a new reference, or null (error cleared).
    pub fn attr(&self, o: Obj, name: &[u8]) -> Obj {
        let Some(g) = self.getattr else {
            return core::ptr::null_mut();
        };
        if o.is_null() {
            return core::ptr::null_mut();
        }
        // SAFETY: GIL held; `o` is a live object and `name` is NUL-terminated.
        let r = unsafe { g(o, name.as_ptr().cast()) };
        if r.is_null() {
            self.clear();
        }
        r
    }

    /// Clears the error indicator.
    pub fn clear(&self) {
        if let Some(c) = self.err_clear {
            // SAFETY: GIL held.
            unsafe { c() };
        }
    }

    /// The UTF-8 text of a `str` object (copied), or `None` (error cleared).
    pub fn text(&self, s: Obj) -> Option<Vec<u8>> {
        let f = self.as_utf8?;
        if s.is_null() {
            return None;
        }
        let mut n: isize = 0;
        // SAFETY: GIL held; `s` is a live object; the buffer lives as long as `s`.
        let p = unsafe { f(s, &mut n) };
        if p.is_null() || n < 0 {
            self.clear();
            return None;
        }
        // SAFETY: `p` points to `n` bytes owned by `s`, which is alive here.
        Some(unsafe { core::slice::from_raw_parts(p.cast::<u8>(), n as usize) }.to_vec())
    }

    /// `str(getattr(o, name))` bytes for a `str` attribute, owning nothing afterwards.
    pub fn attr_text(&self, o: Obj, name: &[u8]) -> Option<Vec<u8>> {
        let a = self.attr(o, name);
        let t = self.text(a);
        self.decref(a);
        t
    }

    /// An `int` attribute, or `None`.
    pub fn attr_long(&self, o: Obj, name: &[u8]) -> Option<i64> {
        let f = self.as_long?;
        let a = self.attr(o, name);
        if a.is_null() {
            return None;
        }
        // SAFETY: GIL held; `a` is a live object.
        let v = unsafe { f(a) };
        self.decref(a);
        if v == -1 {
            self.clear();
        }
        #[allow(clippy::unnecessary_cast)] // `c_long` is not i64 on every target
        Some(v as i64)
    }

    /// `Py_TYPE(o)` (borrowed). Valid for every object on GIL builds (`ob_type` follows
    /// `ob_refcnt` at offset 8 on LP64 since 2.x).
    pub fn type_ptr(&self, o: Obj) -> Obj {
        // SAFETY: `o` is a live object; PyObject_HEAD is {Py_ssize_t ob_refcnt; PyTypeObject
        // *ob_type;} on every GIL build.
        unsafe { *(o.cast::<u8>().add(8).cast::<Obj>()) }
    }

    /// For a built-in function object (`PyCFunction_Type` or a subtype): its `PyMethodDef *`
    /// (whose first field is `const char *ml_name`) and `m_self`. `None` for anything else.
    pub fn cfunction_parts(&self, o: Obj) -> Option<(*const *const c_char, Obj)> {
        let sub = self.is_subtype?;
        if self.cfunction_type.is_null() || o.is_null() {
            return None;
        }
        let t = self.type_ptr(o);
        // SAFETY: GIL held; both are type objects.
        if t != self.cfunction_type && unsafe { sub(t, self.cfunction_type) } == 0 {
            return None;
        }
        // SAFETY: `o` is a PyCFunctionObject: {PyObject_HEAD; PyMethodDef *m_ml; PyObject
        // *m_self; …} (unchanged 3.9–3.13 on GIL builds).
        unsafe {
            let base = o.cast::<u8>().add(16);
            let ml = *(base.cast::<*const *const c_char>());
            let slf = *(base.add(8).cast::<Obj>());
            (!ml.is_null()).then_some((ml, slf))
        }
    }

    /// Whether `o` is a module object.
    pub fn is_module(&self, o: Obj) -> bool {
        let Some(sub) = self.is_subtype else {
            return false;
        };
        if o.is_null() || self.module_type.is_null() {
            return false;
        }
        let t = self.type_ptr(o);
        // SAFETY: GIL held; both are type objects.
        t == self.module_type || unsafe { sub(t, self.module_type) } != 0
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn python_versions_parse_from_py_get_version() {
        assert_eq!(
            super::parse_version(b"3.11.7 (main, Dec  4 2023) [GCC]"),
            Some((3, 11))
        );
        assert_eq!(super::parse_version(b"3.13.0rc1"), Some((3, 13)));
        assert_eq!(super::parse_version(b"x"), None);
    }
}
