//! The PYMEM adapter: every allocation, reallocation and free of CPython's three allocator
//! domains (`PYMEM_DOMAIN_RAW`, `_MEM`, `_OBJ`) as `PYMEM` MALLOC/FREE rows (device `cpu`,
//! Attr `domain:raw|mem|obj`), and pymalloc's arenas as `PYMEM_ARENA` rows, so the memory of
//! Python objects and the arenas that hold them are never summed together.
//!
//! Written on the adapter SDK only, as a third party writes an adapter; memscope ships it and
//! selects it with `--adapters pymem` (config.json `"adapters"`, `memscope.config(adapters=…)`).
//!
//! How it installs (issue 16):
//! * At plugin init (process start, before `main`), if CPython's API is in the process, it
//!   registers an audit hook (`PySys_AddAuditHook`, callable before `Py_Initialize`; the
//!   runtime keeps it across initialisation). The first audit event raised once
//!   `Py_IsInitialized()` holds — with the GIL held, before the script, command or module runs
//!   (`cpython.run_*`), or an embedder's first import or exec — installs the hooks. Standalone
//!   and embedded interpreters, and `multiprocessing` children (forked: inherited; spawned: a
//!   new process that loads the plugin again), are covered the same way; sub-interpreters share
//!   the process-wide allocators.
//! * Each hook wraps the allocator it found (`PyMem_GetAllocator`), so pymalloc, the debug
//!   hooks, `PYTHONMALLOC=malloc` and tracemalloc keep working beneath it. The wrapper keeps
//!   the previous allocator's `ctx` as its own, so a thread that reads the pair half-updated
//!   still calls a function with its right context.
//! * Realloc is a FREE of the old block then a MALLOC of the new one (after the call
//!   succeeded); a FREE is emitted before the real free (the address may be reused at once).
//!
//! Python stacks come from the runtime's context service (`--call-stack python:N`): every row
//! written on a thread carries that thread's Python stack. C stacks come on request
//! (`--call-stack c:N`).

mod atexit;
mod cpython;

use core::cell::{Cell, UnsafeCell};
use core::ffi::{c_char, c_int, c_void, CStr};
use core::sync::atomic::{AtomicBool, Ordering};
use cpython::{Api, ArenaAllocator, MemAllocator, DOMAINS};
use memscope_adapter_sdk::{self as sdk, Kind};

/// The event types the adapter registers at init (plugin ABI 1.2): one per domain's MALLOC
/// (`domain:…`), the objects' FREE, and the arenas. Object types are account-only: summed up
/// by Python stack, rows only with `--host-rows`.
const SPECS: [(&CStr, &CStr, bool); TYPES] = [
    (c"PYMEM", c"domain:raw", true),
    (c"PYMEM", c"domain:mem", true),
    (c"PYMEM", c"domain:obj", true),
    (c"PYMEM", c"", true),
    (c"PYMEM_ARENA", c"arena:true", false),
];
const TYPES: usize = 5;
/// Index of the objects' FREE type in [`SPECS`].
const T_FREE: usize = 3;
/// Index of the arena type in [`SPECS`].
const T_ARENA: usize = 4;

/// A value written once, before it is published (by `PyMem_SetAllocator`), read after.
struct Once<T>(UnsafeCell<T>);

// SAFETY: written only by `install` (once, under the GIL, before the hooks that read it are
// installed), read only by those hooks afterwards.
unsafe impl<T> Sync for Once<T> {}

/// The allocators found before ours, per domain.
static PREV: [Once<MemAllocator>; DOMAINS] = [
    Once(UnsafeCell::new(MemAllocator::EMPTY)),
    Once(UnsafeCell::new(MemAllocator::EMPTY)),
    Once(UnsafeCell::new(MemAllocator::EMPTY)),
];
/// The arena allocator found before ours.
static PREV_ARENA: Once<ArenaAllocator> = Once(UnsafeCell::new(ArenaAllocator::EMPTY));
/// The API (set by init when CPython is in the process).
static API: Once<Option<Api>> = Once(UnsafeCell::new(None));
/// The registered type ids, in [`SPECS`] order (set by init).
static TYPE_IDS: Once<[Option<sdk::TypeId>; TYPES]> = Once(UnsafeCell::new([None; TYPES]));
/// `atexit` could not take our stop function: check `Py_IsInitialized` on every event instead.
static CHECK_INIT: AtomicBool = AtomicBool::new(false);
/// The hooks are in (or being put in).
static INSTALLED: AtomicBool = AtomicBool::new(false);
/// The interpreter is finalising (our `atexit` function ran — after the program's own ones —,
/// the modules are about to be torn down; [`atexit`]): nothing more is recorded, so the blocks live at that
/// point are the program's, reported live at exit (memray's "leaks" are the same: what was
/// live when its tracker stopped).
static FINALIZING: AtomicBool = AtomicBool::new(false);

/// An event of this thread, kept while the thread is inside an emit.
#[derive(Clone, Copy)]
struct Pending {
    /// 0..3: a domain's MALLOC; [`FREE`]; [`ARENA_MALLOC`]; [`ARENA_FREE`].
    what: u8,
    ptr: u64,
    size: u64,
}

const FREE: u8 = 3;
const ARENA_MALLOC: u8 = 4;
const ARENA_FREE: u8 = 5;
/// Events kept while inside an emit (the runtime's Python-stack service runs CPython code,
/// which allocates and frees objects, while it writes a row's context).
const QUEUE: usize = 64;

/// Per-thread state: the emit in progress and the events that arrived during it.
struct Tls {
    busy: Cell<bool>,
    /// Inside the previous allocator of the mem or object domain: pymalloc serves requests
    /// over 512 bytes (and tracemalloc, the debug hooks, …) through the raw domain, and that
    /// block is the outer call's, recorded once, by the outer hook.
    nested: Cell<bool>,
    head: Cell<usize>,
    len: Cell<usize>,
    queue: UnsafeCell<[Pending; QUEUE]>,
}

thread_local! {
    static TLS: Tls = const {
        Tls {
            busy: Cell::new(false),
            nested: Cell::new(false),
            head: Cell::new(0),
            len: Cell::new(0),
            queue: UnsafeCell::new([Pending { what: 0, ptr: 0, size: 0 }; QUEUE]),
        }
    };
}

impl Tls {
    fn push(&self, p: Pending) {
        let len = self.len.get();
        if len == QUEUE {
            return; // a burst of nested events this large is not the job's pattern; dropped
        }
        // SAFETY: the queue is this thread's, touched only by `push`/`pop`, never re-entered.
        unsafe { (*self.queue.get())[(self.head.get() + len) % QUEUE] = p };
        self.len.set(len + 1);
    }

    fn pop(&self) -> Option<Pending> {
        let len = self.len.get();
        if len == 0 {
            return None;
        }
        let h = self.head.get();
        // SAFETY: as in `push`.
        let p = unsafe { (*self.queue.get())[h] };
        self.head.set((h + 1) % QUEUE);
        self.len.set(len - 1);
        Some(p)
    }
}

/// One compact event (no text, no event struct: a type id and four numbers).
#[inline(always)]
fn emit_now(h: sdk::Host, p: Pending) {
    // SAFETY: see `Once`: `TYPE_IDS` was written by init before any hook existed.
    let ids = unsafe { &*TYPE_IDS.0.get() };
    let c = sdk::sys::EVENT_C_STACK;
    let (ty, kind, size, flags) = match p.what {
        FREE => (ids[T_FREE], Kind::Free, 0, 0),
        ARENA_MALLOC => (ids[T_ARENA], Kind::Malloc, p.size, c),
        ARENA_FREE => (ids[T_ARENA], Kind::Free, p.size, 0),
        d => (ids[d as usize % DOMAINS], Kind::Malloc, p.size, c),
    };
    if let Some(ty) = ty {
        ty.emit(h, kind, p.ptr, size, flags, &[]);
    }
}

/// Whether the interpreter is finalising (see [`FINALIZING`]).
#[inline(always)]
fn finalizing() -> bool {
    if FINALIZING.load(Ordering::Relaxed) {
        return true;
    }
    if !CHECK_INIT.load(Ordering::Relaxed) {
        return false;
    }
    // SAFETY: see `Once`: `API` was written by init before any hook existed.
    if let Some(api) = unsafe { &*API.0.get() } {
        // SAFETY: CPython's `Py_IsInitialized` (reads one field; any thread).
        if unsafe { (api.is_initialized)() } == 0 {
            FINALIZING.store(true, Ordering::Relaxed);
            return true;
        }
    }
    false
}

/// Emits `p`; while this thread is already emitting, `p` waits and is emitted right after, in
/// order, so every block's MALLOC and FREE are both written. The host answers "not recording"
/// itself (outside a run), so nothing is asked before the emit.
#[inline]
fn record(p: Pending) {
    if finalizing() {
        return;
    }
    let Some(h) = sdk::host() else {
        return;
    };
    let _ = TLS.try_with(|t| {
        if t.busy.replace(true) {
            t.push(p);
            return;
        }
        // the one panic guard of the hot path
        sdk::guard((), || {
            let mut next = Some(p);
            while let Some(p) = next {
                emit_now(h, p);
                next = t.pop();
            }
        });
        t.busy.set(false);
    });
}

#[inline]
fn prev(d: usize) -> &'static MemAllocator {
    // SAFETY: see `Once`: read after `install` wrote it.
    unsafe { &*PREV[d].0.get() }
}

#[inline]
fn on_malloc(d: usize, p: *mut c_void, size: usize) {
    if !p.is_null() {
        record(Pending {
            what: d as u8,
            ptr: p as u64,
            size: size as u64,
        });
    }
}

#[inline]
fn on_free(p: *mut c_void) {
    if !p.is_null() {
        record(Pending {
            what: FREE,
            ptr: p as u64,
            size: 0,
        });
    }
}

/// Runs the previous allocator's `f` of domain `D`; for mem and object, marks the thread as
/// inside it (see [`Tls::nested`]). Returns whether this call is itself nested (a raw call made
/// by an outer hook's allocator: not recorded).
#[inline]
fn call_prev<R>(d: usize, f: impl FnOnce() -> R) -> (R, bool) {
    if d == 0 {
        let nested = TLS.try_with(|t| t.nested.get()).unwrap_or(true);
        return (f(), nested);
    }
    let outer = TLS.try_with(|t| t.nested.replace(true)).unwrap_or(true);
    let r = f();
    if !outer {
        let _ = TLS.try_with(|t| t.nested.set(false));
    }
    (r, false)
}

unsafe extern "C" fn hook_malloc<const D: usize>(_ctx: *mut c_void, size: usize) -> *mut c_void {
    let a = prev(D);
    let Some(f) = a.malloc else {
        return core::ptr::null_mut();
    };
    // SAFETY: the previous allocator's own function with its own context.
    let (p, nested) = call_prev(D, || unsafe { f(a.ctx, size) });
    if !nested {
        on_malloc(D, p, size);
    }
    p
}

unsafe extern "C" fn hook_calloc<const D: usize>(
    _ctx: *mut c_void,
    nelem: usize,
    elsize: usize,
) -> *mut c_void {
    let a = prev(D);
    let Some(f) = a.calloc else {
        return core::ptr::null_mut();
    };
    // SAFETY: as in `hook_malloc`.
    let (p, nested) = call_prev(D, || unsafe { f(a.ctx, nelem, elsize) });
    if !nested {
        on_malloc(D, p, nelem.saturating_mul(elsize));
    }
    p
}

unsafe extern "C" fn hook_realloc<const D: usize>(
    _ctx: *mut c_void,
    ptr: *mut c_void,
    size: usize,
) -> *mut c_void {
    let a = prev(D);
    let Some(f) = a.realloc else {
        return core::ptr::null_mut();
    };
    // SAFETY: as in `hook_malloc`; `ptr` is the caller's block of this domain (or NULL).
    let (q, nested) = call_prev(D, || unsafe { f(a.ctx, ptr, size) });
    if !q.is_null() && !nested {
        on_free(ptr);
        on_malloc(D, q, size);
    }
    q
}

unsafe extern "C" fn hook_free<const D: usize>(_ctx: *mut c_void, ptr: *mut c_void) {
    let a = prev(D);
    if D != 0 || !TLS.try_with(|t| t.nested.get()).unwrap_or(true) {
        on_free(ptr);
    }
    if let Some(f) = a.free {
        // SAFETY: as in `hook_malloc`.
        let _ = call_prev(D, || unsafe { f(a.ctx, ptr) });
    }
}

unsafe extern "C" fn arena_alloc(_ctx: *mut c_void, size: usize) -> *mut c_void {
    // SAFETY: see `Once`.
    let a = unsafe { &*PREV_ARENA.0.get() };
    let Some(f) = a.alloc else {
        return core::ptr::null_mut();
    };
    // SAFETY: the previous arena allocator's function with its context.
    let p = unsafe { f(a.ctx, size) };
    if !p.is_null() {
        record(Pending {
            what: ARENA_MALLOC,
            ptr: p as u64,
            size: size as u64,
        });
    }
    p
}

unsafe extern "C" fn arena_free(_ctx: *mut c_void, ptr: *mut c_void, size: usize) {
    // SAFETY: see `Once`.
    let a = unsafe { &*PREV_ARENA.0.get() };
    if !ptr.is_null() {
        record(Pending {
            what: ARENA_FREE,
            ptr: ptr as u64,
            size: size as u64,
        });
    }
    if let Some(f) = a.free {
        // SAFETY: as in `arena_alloc`.
        unsafe { f(a.ctx, ptr, size) };
    }
}

/// The wrapper of domain `D` around `prev`.
fn wrapper<const D: usize>(prev: &MemAllocator) -> MemAllocator {
    MemAllocator {
        ctx: prev.ctx,
        malloc: Some(hook_malloc::<D>),
        calloc: Some(hook_calloc::<D>),
        realloc: Some(hook_realloc::<D>),
        free: Some(hook_free::<D>),
    }
}

/// Puts the hooks in. Runs once, on a thread holding the GIL of an initialised interpreter.
fn install(api: &Api) {
    let wrappers: [fn(&MemAllocator) -> MemAllocator; DOMAINS] =
        [wrapper::<0>, wrapper::<1>, wrapper::<2>];
    for (d, make) in wrappers.into_iter().enumerate() {
        // SAFETY: `PREV[d]` is written here only, before the wrapper reading it is installed;
        // both calls take a valid `PyMemAllocatorEx` of a valid domain (0..3).
        unsafe {
            (api.get_allocator)(d as c_int, PREV[d].0.get());
            if (*PREV[d].0.get()).malloc.is_none() {
                continue;
            }
            let mut w = make(&*PREV[d].0.get());
            (api.set_allocator)(d as c_int, &mut w);
        }
    }
    // SAFETY: as above, for the arena allocator.
    unsafe {
        (api.get_arena)(PREV_ARENA.0.get());
        if (*PREV_ARENA.0.get()).alloc.is_some() {
            let mut w = ArenaAllocator {
                ctx: (*PREV_ARENA.0.get()).ctx,
                alloc: Some(arena_alloc),
                free: Some(arena_free),
            };
            (api.set_arena)(&mut w);
        }
    }
}

/// The audit hook: installs the allocator hooks at the first event of an initialised
/// interpreter, then costs one atomic load per audit event.
unsafe extern "C" fn on_audit(_event: *const c_char, _args: *mut c_void, _: *mut c_void) -> c_int {
    if INSTALLED.load(Ordering::Relaxed) {
        return 0;
    }
    sdk::guard((), || {
        // SAFETY: see `Once`: written by init before this hook was registered.
        let Some(api) = (unsafe { &*API.0.get() }) else {
            return;
        };
        // SAFETY: CPython's `Py_IsInitialized`; audit hooks run with the GIL held.
        if unsafe { (api.is_initialized)() } == 0 {
            return;
        }
        if INSTALLED.swap(true, Ordering::AcqRel) {
            return;
        }
        install(api);
        if !atexit::register(|| FINALIZING.store(true, Ordering::Relaxed)) {
            CHECK_INIT.store(true, Ordering::Relaxed);
        }
    });
    0
}

fn init(host: &sdk::Host) -> Result<(), i32> {
    // A process without CPython (or whose libpython is loaded later with dlopen) stays inert.
    let Some(api) = Api::find() else {
        return Ok(());
    };
    let mut ids = [None; TYPES];
    for (id, (event_type, attrs, account)) in ids.iter_mut().zip(SPECS) {
        let mut spec = sdk::TypeSpec::new(event_type).device(sdk::Device::Cpu);
        if !attrs.is_empty() {
            spec = spec.attrs(attrs);
        }
        if account {
            spec = spec.account();
        }
        let Some(t) = host.register(&spec) else {
            sdk::log(
                sdk::Level::Warn,
                c"pymem: this probe has no registered event types (plugin ABI < 1.2); Python allocations are not recorded",
            );
            return Ok(());
        };
        *id = Some(t);
    }
    // SAFETY: init runs once, before the hooks that read `TYPE_IDS` are installed.
    unsafe { *TYPE_IDS.0.get() = ids };
    // SAFETY: init runs once, before the audit hook that reads `API` is registered.
    unsafe { *API.0.get() = Some(api) };
    // SAFETY: CPython's `PySys_AddAuditHook`, documented as safe before `Py_Initialize`.
    if unsafe { (api.add_audit_hook)(on_audit, core::ptr::null_mut()) } != 0 {
        sdk::log(
            sdk::Level::Warn,
            c"pymem: PySys_AddAuditHook failed; Python allocations are not recorded",
        );
    }
    Ok(())
}

sdk::memscope_adapter!(name: "pymem", init: init);
