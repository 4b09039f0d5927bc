//! When the interpreter starts finalising, without a check per allocation: a C function
//! registered with Python's `atexit` at install time. `atexit` runs its functions last
//! registered first, so ours, registered before the script runs, runs after every function
//! the program registered — right before `Py_FinalizeEx` tears the modules down (the point at
//! which `Py_IsInitialized()` turns 0).

use core::ffi::{c_char, c_int, c_void, CStr};

type PyObj = *mut c_void;

/// `PyMethodDef`.
#[repr(C)]
struct MethodDef {
    name: *const c_char,
    meth: Option<unsafe extern "C" fn(PyObj, PyObj) -> PyObj>,
    flags: c_int,
    doc: *const c_char,
}

// SAFETY: immutable data (a name literal and a function pointer) that CPython only reads.
unsafe impl Sync for MethodDef {}

/// `METH_NOARGS`.
const METH_NOARGS: c_int = 0x0004;

/// The function `atexit` calls: set by [`register`] before the definition is handed out.
static ON_EXIT: std::sync::OnceLock<fn()> = std::sync::OnceLock::new();
/// `Py_None` and `Py_IncRef`, found by [`register`].
static NONE: std::sync::OnceLock<(usize, usize)> = std::sync::OnceLock::new();

static DEF: MethodDef = MethodDef {
    name: c"memscope_pymem_stop".as_ptr(),
    meth: Some(at_exit),
    flags: METH_NOARGS,
    doc: core::ptr::null(),
};

unsafe extern "C" fn at_exit(_self: PyObj, _args: PyObj) -> PyObj {
    if let Some(f) = ON_EXIT.get() {
        f();
    }
    let Some(&(none, incref)) = NONE.get() else {
        return core::ptr::null_mut();
    };
    // SAFETY: `incref` is CPython's `Py_IncRef(PyObject *)`, `none` is `&_Py_NoneStruct`; a
    // function called by `atexit` holds the GIL. Returning a new reference to None is the
    // protocol of a C function that returns nothing.
    unsafe {
        let incref: unsafe extern "C" fn(PyObj) = core::mem::transmute::<usize, _>(incref);
        incref(none as PyObj);
    }
    none as PyObj
}

fn sym(name: &CStr) -> *mut c_void {
    extern "C" {
        fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
    }
    // SAFETY: `name` is NUL-terminated; NULL is glibc's RTLD_DEFAULT pseudo-handle.
    unsafe { dlsym(core::ptr::null_mut(), name.as_ptr()) }
}

/// Registers `f` to run from `atexit`. Call with the GIL held, on an initialised interpreter.
/// `false` when it could not be registered (the caller falls back to another check).
pub fn register(f: fn()) -> bool {
    let names: [&CStr; 7] = [
        c"PyImport_ImportModule",
        c"PyObject_GetAttrString",
        c"PyCFunction_NewEx",
        c"PyObject_CallFunctionObjArgs",
        c"Py_DecRef",
        c"Py_IncRef",
        c"_Py_NoneStruct",
    ];
    let mut p = [core::ptr::null_mut(); 7];
    for (slot, name) in p.iter_mut().zip(names) {
        *slot = sym(name);
        if slot.is_null() {
            return false;
        }
    }
    let _ = ON_EXIT.set(f);
    let _ = NONE.set((p[6] as usize, p[5] as usize));
    // SAFETY: each symbol is CPython's public function of that name with the signature below
    // (unchanged since 3.0); the caller holds the GIL. References are released as the API
    // says; a NULL result (an exception) is cleared by `PyErr_Clear` when present.
    unsafe {
        let import: unsafe extern "C" fn(*const c_char) -> PyObj = core::mem::transmute(p[0]);
        let getattr: unsafe extern "C" fn(PyObj, *const c_char) -> PyObj =
            core::mem::transmute(p[1]);
        let new_fn: unsafe extern "C" fn(*const MethodDef, PyObj, PyObj) -> PyObj =
            core::mem::transmute(p[2]);
        let call: unsafe extern "C" fn(PyObj, ...) -> PyObj = core::mem::transmute(p[3]);
        let decref: unsafe extern "C" fn(PyObj) = core::mem::transmute(p[4]);
        let m = import(c"atexit".as_ptr());
        if m.is_null() {
            clear_error();
            return false;
        }
        let reg = getattr(m, c"register".as_ptr());
        decref(m);
        if reg.is_null() {
            clear_error();
            return false;
        }
        let func = new_fn(&DEF, core::ptr::null_mut(), core::ptr::null_mut());
        if func.is_null() {
            decref(reg);
            clear_error();
            return false;
        }
        let r = call(reg, func, core::ptr::null_mut::<c_void>());
        decref(func);
        decref(reg);
        if r.is_null() {
            clear_error();
            return false;
        }
        decref(r);
    }
    true
}

fn clear_error() {
    let p = sym(c"PyErr_Clear");
    if !p.is_null() {
        // SAFETY: CPython's `void PyErr_Clear(void)`, called with the GIL held.
        unsafe {
            let f: unsafe extern "C" fn() = core::mem::transmute(p);
            f();
        }
    }
}
