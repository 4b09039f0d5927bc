//! Interning of traced callables: a code object, a C function, an `nn.Module` class or a
//! `RecordFunction` name gets a process-wide id, defined in the stream once per process image
//! ([`Record::PyCodeDef`]) before its first use; calls and returns then carry only the id.
//!
//! Keys are addresses of long-lived objects. A code object is kept alive (one reference held by
//! the table) so its address cannot be reused for another function while its id is in use. The
//! table is touched only with the GIL held (profile hook, `ctypes.PyDLL` calls), and a spin
//! flag covers the rest. Python stacks on every row (`stack.rs`) read code ids from the
//! per-thread shadow stacks; allocator hooks touch this table only through
//! [`ensure_defined`] when a thread defines a new stack node (bounded spin, never waiting on
//! the GIL).

use super::cpython::{Api, Frame, Obj};
use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use memscope_runtime as rt;
use memscope_wire::{PyCodeKind, Record};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// What a table entry stands for.
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum Key {
    /// A code object (address).
    Code(usize),
    /// A C function: its `PyMethodDef` and the type of its `self` (or the module).
    CFunc(usize, usize),
    /// `nn.Module._call_impl` (code address) for a module class (type address).
    Module(usize, usize),
    /// A `RecordFunction` name.
    User(Box<[u8]>),
}

/// Multiplicative hash: keys are addresses, already well spread.
#[derive(Default)]
pub struct AddrHasher(u64);

impl Hasher for AddrHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    fn write_usize(&mut self, v: usize) {
        self.0 = (self.0 ^ v as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0 ^ v).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

struct Entry {
    id: u32,
    /// A code object that is `nn.Module._call_impl`.
    module_call: bool,
    /// Stream generation in which the definition was written.
    gen: u32,
    def: Def,
}

#[derive(Clone)]
struct Def {
    kind: PyCodeKind,
    line: u32,
    file: Box<[u8]>,
    name: Box<[u8]>,
}

#[derive(Default)]
struct Table {
    map: HashMap<Key, Entry, BuildHasherDefault<AddrHasher>>,
    /// Key of each id.
    keys: HashMap<u32, Key, BuildHasherDefault<AddrHasher>>,
}

static LOCK: AtomicBool = AtomicBool::new(false);

/// The table behind [`LOCK`], a spin lock a caller in a signal handler can give up on (which
/// `std::sync::Mutex` cannot offer).
struct Guarded(core::cell::UnsafeCell<Option<Table>>);

// SAFETY: the table is only reached through `with_table`/`try_with_table`, which hold LOCK.
unsafe impl Sync for Guarded {}

static TABLE: Guarded = Guarded(core::cell::UnsafeCell::new(None));
static NEXT_ID: AtomicU32 = AtomicU32::new(1);

/// Releases [`LOCK`] when dropped (also if `f` panics: the hook must never spin forever).
struct Unlock;

impl Drop for Unlock {
    fn drop(&mut self) {
        LOCK.store(false, Ordering::Release);
    }
}

fn with_table<R>(f: impl FnOnce(&mut Table) -> R) -> R {
    while LOCK
        .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        core::hint::spin_loop();
    }
    let _unlock = Unlock;
    // SAFETY: LOCK gives exclusive access to TABLE until `_unlock` drops.
    f(unsafe { (*TABLE.0.get()).get_or_insert_with(Table::default) })
}

/// As [`with_table`], but gives up (`None`) after a bounded spin: for callers that may run
/// inside a signal handler that interrupted the lock holder (allocator hooks).
fn try_with_table<R>(f: impl FnOnce(&mut Table) -> R) -> Option<R> {
    let mut spins = 0u32;
    while LOCK
        .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        spins += 1;
        if spins > 20_000 {
            return None;
        }
        core::hint::spin_loop();
    }
    let _unlock = Unlock;
    // SAFETY: LOCK gives exclusive access to TABLE until `_unlock` drops.
    Some(f(unsafe {
        (*TABLE.0.get()).get_or_insert_with(Table::default)
    }))
}

/// Makes sure code id `id` is defined in the current stream generation (a fork child's stream
/// needs the definitions of frames that were already running at the fork), writing its
/// definition again if not. `false` when that could not be done (no stream, lock busy).
/// Lock-bounded: callable from allocator hooks without the GIL.
pub fn ensure_defined(id: u32) -> bool {
    let Some(gen) = rt::stream_generation() else {
        return false;
    };
    try_with_table(|t| {
        let Some(key) = t.keys.get(&id) else {
            return false;
        };
        let Some(e) = t.map.get_mut(key) else {
            return false;
        };
        if e.gen != gen && write_def(e.id, &e.def) {
            e.gen = gen;
        }
        e.gen == gen
    })
    .unwrap_or(false)
}

/// The id of `key` if it is defined in the current stream generation (the hot path), and
/// whether it is a module-call code object.
#[inline]
pub fn lookup_flag(key: &Key) -> Option<(u32, bool)> {
    let gen = rt::stream_generation()?;
    with_table(|t| match t.map.get_mut(key) {
        Some(e) if e.gen == gen => Some((e.id, e.module_call)),
        Some(e) => {
            // A fork child (new stream): define it again in this image.
            if write_def(e.id, &e.def) {
                e.gen = gen;
                Some((e.id, e.module_call))
            } else {
                None
            }
        }
        None => None,
    })
}

/// The id of `key` if it is defined in the current stream generation.
#[inline]
pub fn lookup(key: &Key) -> Option<u32> {
    lookup_flag(key).map(|(id, _)| id)
}

fn write_def(id: u32, d: &Def) -> bool {
    rt::record(&Record::PyCodeDef {
        id,
        kind: d.kind,
        line: d.line,
        file: &d.file,
        name: &d.name,
    })
}

/// What [`define`] needs to describe a new key: kind, first line, file, name.
pub type Described = (PyCodeKind, u32, Vec<u8>, Vec<u8>);

/// Defines `key` with the description `make` builds (called only when the key is new) and
/// returns its id. `hold` is an object the table keeps a reference to (a code object).
pub fn define(api: &Api, key: Key, hold: Obj, make: impl FnOnce() -> Described) -> Option<u32> {
    define_flag(api, key, hold, false, make)
}

fn define_flag(
    api: &Api,
    key: Key,
    hold: Obj,
    module_call: bool,
    make: impl FnOnce() -> Described,
) -> Option<u32> {
    if let Some(id) = lookup(&key) {
        return Some(id);
    }
    let gen = rt::stream_generation()?;
    let (kind, line, file, name) = make();
    let def = Def {
        kind,
        line,
        file: file.into_boxed_slice(),
        name: name.into_boxed_slice(),
    };
    with_table(|t| {
        if let Some(e) = t.map.get(&key) {
            return Some(e.id);
        }
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        if !write_def(id, &def) {
            return None;
        }
        if !hold.is_null() {
            if let Some(inc) = api.incref {
                // SAFETY: GIL held; the table owns this reference from now on.
                unsafe { inc(hold) };
            }
        }
        t.keys.insert(id, key.clone());
        t.map.insert(
            key,
            Entry {
                id,
                module_call,
                gen,
                def,
            },
        );
        Some(id)
    })
}

/// The id of the code object `code` (a Python function), defining it from its attributes, and
/// whether it is `torch.nn.Module._call_impl` (whose rows are `nn.Module: <Class>`).
pub fn code_id(api: &Api, code: Obj) -> Option<(u32, bool)> {
    let key = Key::Code(code as usize);
    if let Some(r) = lookup_flag(&key) {
        return Some(r);
    }
    let file = api.attr_text(code, b"co_filename\0").unwrap_or_default();
    let name = api.attr_text(code, b"co_name\0").unwrap_or_default();
    let line = api.attr_long(code, b"co_firstlineno\0").unwrap_or(0);
    let module_call = name == b"_call_impl" && file.ends_with(b"torch/nn/modules/module.py");
    let id = define_flag(api, key, code, module_call, || {
        (
            PyCodeKind::Function,
            line.clamp(0, u32::MAX as i64) as u32,
            file,
            name,
        )
    })?;
    Some((id, module_call))
}

/// The id of `nn.Module: <Class>` for a `_call_impl` frame: the class of its `self`.
pub fn module_id(api: &Api, code: Obj, frame: Frame) -> Option<u32> {
    let locals = api.attr(frame, b"f_locals\0");
    let slf = match (api.get_item, locals.is_null()) {
        // SAFETY: GIL held; `locals` is a live mapping, the key is NUL-terminated.
        (Some(g), false) => unsafe { g(locals, c"self".as_ptr()) },
        _ => core::ptr::null_mut(),
    };
    api.decref(locals);
    if slf.is_null() {
        api.clear();
        return code_id(api, code).map(|(id, _)| id);
    }
    let ty = api.type_ptr(slf);
    let key = Key::Module(code as usize, ty as usize);
    let id = match lookup(&key) {
        Some(id) => Some(id),
        None => define(api, key, ty, || {
            let name = api.attr_text(ty, b"__name__\0").unwrap_or_default();
            (PyCodeKind::Module, 0, Vec::new(), name)
        }),
    };
    api.decref(slf);
    id
}

/// The table key of the C function object `f` (no call into the interpreter: the hot path of
/// `PyTrace_C_CALL` looks it up without saving the exception state).
pub fn cfunc_key(api: &Api, f: Obj) -> Key {
    match api.cfunction_parts(f) {
        Some((ml, slf)) => {
            let owner = if slf.is_null() || api.is_module(slf) {
                0
            } else {
                api.type_ptr(slf) as usize
            };
            Key::CFunc(ml as usize, owner)
        }
        None => Key::CFunc(0, api.type_ptr(f) as usize),
    }
}

/// The id of the C function object `f` (`PyTrace_C_CALL` argument). Described like its repr
/// without the address (`<built-in method append of list object>`, `<built-in function len>`),
/// so rows of the same function aggregate.
pub fn cfunc_id(api: &Api, f: Obj) -> Option<u32> {
    let (ml, slf, key) = match api.cfunction_parts(f) {
        Some((ml, slf)) => {
            let owner = if slf.is_null() || api.is_module(slf) {
                0
            } else {
                api.type_ptr(slf) as usize
            };
            (ml, slf, Key::CFunc(ml as usize, owner))
        }
        None => (
            core::ptr::null(),
            core::ptr::null_mut(),
            Key::CFunc(0, api.type_ptr(f) as usize),
        ),
    };
    if let Some(id) = lookup(&key) {
        return Some(id);
    }
    define(api, key, core::ptr::null_mut(), || {
        let name = if ml.is_null() {
            let t = api.type_ptr(f);
            let tn = api.attr_text(t, b"__name__\0").unwrap_or_default();
            [b"<".as_slice(), &tn, b">"].concat()
        } else {
            // SAFETY: `ml` points to a PyMethodDef whose first field is the NUL-terminated
            // method name (static storage of the defining module).
            let n = unsafe { core::ffi::CStr::from_ptr(*ml) }
                .to_bytes()
                .to_vec();
            if slf.is_null() || api.is_module(slf) {
                [b"<built-in function ".as_slice(), &n, b">"].concat()
            } else {
                let t = api.type_ptr(slf);
                let tn = api.attr_text(t, b"__name__\0").unwrap_or_default();
                [
                    b"<built-in method ".as_slice(),
                    &n,
                    b" of ",
                    &tn,
                    b" object>",
                ]
                .concat()
            }
        };
        (PyCodeKind::CFunction, 0, Vec::new(), name)
    })
}

/// The id of a `RecordFunction(name)` block.
pub fn user_id(api: &Api, name: &[u8]) -> Option<u32> {
    let key = Key::User(name.into());
    if let Some(id) = lookup(&key) {
        return Some(id);
    }
    define(api, key, core::ptr::null_mut(), || {
        (PyCodeKind::User, 0, Vec::new(), name.to_vec())
    })
}
