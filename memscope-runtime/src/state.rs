//! The init state machine, the recording flag, and the selection mask hooks test.
//!
//! `UNINIT → INITIALIZING → READY | DISABLED`. The first hook (or API call) that finds
//! `UNINIT` wins a CAS and initialises: walks `environ`, measures the clock offset, registers
//! the fork/exit handlers and the thread-exit key, and creates the stream. Hooks that find
//! `INITIALIZING` (another thread is at it) wait for it, yielding, for at most 5 ms (never when
//! they are nested in another hook), then forward without recording.

use crate::sys::stderr_write;
use crate::{clock, drops, guard, settings, stream, writer};
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU8, Ordering};
use memscope_wire::SourceId;
use memscope_wire::{Record, SystemCode, FLAG_EXITED};

const UNINIT: u8 = 0;
const INITIALIZING: u8 = 1;
const READY: u8 = 2;
const DISABLED: u8 = 3;
/// Passive because `MEMSCOPE_SPOOL` was not set: like DISABLED for every hook, but [`wake`]
/// may initialise again once it is.
const DORMANT: u8 = 4;

static STATE: AtomicU8 = AtomicU8::new(UNINIT);
/// `selection mask | PLUGIN_BIT` while READY and recording, else 0: the one word a hook loads.
static ACTIVE: AtomicU32 = AtomicU32::new(0);
/// `selection mask | PLUGIN_BIT` while READY *outside* a collection window, else 0: the memory
/// hooks (allocations and frees) still record there, as shadow records ([`tracking`]).
static SHADOW: AtomicU32 = AtomicU32::new(0);
/// Inside a collection window (`immediate` mode: from init; `deferred`: after `start()`).
static RECORDING: AtomicBool = AtomicBool::new(false);
/// Process-wide one-time registrations (atfork, atexit, key, pinning) done.
static REGISTERED: AtomicBool = AtomicBool::new(false);

/// Bit of the active mask that stands for "third-party plugins may record" (above every
/// built-in [`SourceId`] bit).
pub const PLUGIN_BIT: u32 = 1 << 31;

/// Where the runtime stands in this process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InitState {
    /// No hook has run yet.
    Uninit,
    /// A thread is initialising right now.
    Initializing,
    /// A stream is open; hooks record according to [`enabled`].
    Ready,
    /// Passive: not launched by memscope (`MEMSCOPE_SPOOL` unset: [`wake`] can still start it)
    /// or the stream could not be created; every hook only forwards.
    Disabled,
}

/// The current init state (one atomic load).
pub fn init_state() -> InitState {
    match STATE.load(Ordering::Acquire) {
        UNINIT => InitState::Uninit,
        INITIALIZING => InitState::Initializing,
        READY => InitState::Ready,
        _ => InitState::Disabled,
    }
}

/// Initialises on first use; `true` once the runtime is READY. Cheap after the first call (one
/// acquire load). While another thread initialises it waits at most 5 ms (see `wait_init`).
#[inline]
pub fn ensure_init() -> bool {
    match STATE.load(Ordering::Acquire) {
        READY => true,
        UNINIT => init_slow(),
        INITIALIZING => wait_init(),
        _ => false,
    }
}

/// Longest a hook waits for another thread's init before forwarding unrecorded.
const INIT_WAIT_NS: u64 = 5_000_000;

/// Another thread is initialising (typically for 0.1–0.5 ms: a few syscalls). Threads that
/// start together would otherwise all lose their first events, so a hook waits for it —
/// yielding, bounded by [`INIT_WAIT_NS`] — unless it is itself inside a hook (which may be the
/// initialising thread's own nested call). After the bound it forwards.
#[cold]
fn wait_init() -> bool {
    if guard::in_internal() {
        return false;
    }
    let start = clock::now_ns();
    let mut spins = 0u32;
    loop {
        match STATE.load(Ordering::Acquire) {
            READY => return true,
            INITIALIZING => {}
            _ => return false,
        }
        // SAFETY: no preconditions.
        unsafe { libc::sched_yield() };
        spins = spins.wrapping_add(1);
        if spins & 15 == 0 && clock::now_ns().wrapping_sub(start) > INIT_WAIT_NS {
            return false;
        }
    }
}

#[cold]
fn init_slow() -> bool {
    if STATE
        .compare_exchange(UNINIT, INITIALIZING, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        return STATE.load(Ordering::Acquire) == READY;
    }
    // Everything below may call libc functions that allocate: internal, so our own allocator
    // hooks (when an adapter has them) forward instead of recording.
    let _internal = guard::Internal::begin(true);
    if !settings::load() {
        let passive = if settings::spool_unset() {
            DORMANT
        } else {
            DISABLED
        };
        STATE.store(passive, Ordering::Release);
        return false;
    }
    clock::init();
    stream::init_page();
    register_once();
    if !stream::open_at_init() {
        STATE.store(DISABLED, Ordering::Release);
        return false;
    }
    RECORDING.store(!settings::deferred(), Ordering::Release);
    STATE.store(READY, Ordering::Release);
    update_active();
    drops::fold_init_waits();
    drop(_internal);
    // The probe's constructor ran nested in this init (ld.so runs a pending constructor from
    // `pin_library`'s dlopen when the first hook came before it) and could not start the
    // plugins then: start them now, in the constructor's place.
    crate::plugin::start_deferred();
    true
}

fn register_once() {
    if REGISTERED.swap(true, Ordering::AcqRel) {
        return;
    }
    writer::init_exit_key();
    // SAFETY: the handlers are `extern "C" fn()` living as long as the library (pinned below).
    unsafe {
        libc::pthread_atfork(
            Some(writer::fork_prepare),
            Some(writer::fork_parent),
            Some(writer::fork_child),
        );
    }
    // SAFETY: `on_exit_status` has the handler signature of glibc's `on_exit` and lives as
    // long as the (pinned) library; the argument is unused.
    unsafe { on_exit(on_exit_status, core::ptr::null_mut()) };
    pin_library();
}

extern "C" {
    /// glibc's `on_exit(3)`: like `atexit`, and the handler gets the status given to `exit`.
    fn on_exit(
        f: extern "C" fn(libc::c_int, *mut libc::c_void),
        arg: *mut libc::c_void,
    ) -> libc::c_int;
}

/// Records the exit status (for the run index, issue 18), then `FLAG_EXITED`; then, when the
/// Python package asked for it, waits (bounded) for the collector to end (issue 23).
extern "C" fn on_exit_status(status: libc::c_int, _arg: *mut libc::c_void) {
    crate::sampler::sample_at_exit();
    stream::set_exit_status(status);
    stream::set_flag(FLAG_EXITED);
    crate::liveness::wait_at_exit();
}

/// Makes the library that holds this runtime impossible to unload (`RTLD_NODELETE`): its
/// pthread-key destructor and fork/exit handlers must outlive every `dlclose`.
fn pin_library() {
    // SAFETY: an all-zero `Dl_info` is valid; `dladdr` fills it for an address of ours.
    let mut info: libc::Dl_info = unsafe { core::mem::zeroed() };
    let addr = pin_library as *const libc::c_void;
    // SAFETY: `addr` is a code address of this library; `info` is writable.
    if unsafe { libc::dladdr(addr, &mut info) } != 0 && !info.dli_fname.is_null() {
        // SAFETY: `dli_fname` is the NUL-terminated path the loader knows us by; NOLOAD never
        // loads anything new, it only adds NODELETE to the already-loaded object.
        unsafe {
            libc::dlopen(
                info.dli_fname,
                libc::RTLD_NOW | libc::RTLD_NOLOAD | libc::RTLD_NODELETE,
            )
        };
    }
}

/// Fork child: an init that was in progress on a vanished thread starts over.
pub(crate) fn after_fork_child() {
    let _ = STATE.compare_exchange(INITIALIZING, UNINIT, Ordering::AcqRel, Ordering::Relaxed);
}

fn update_active() {
    let ready = STATE.load(Ordering::Acquire) == READY;
    let recording = RECORDING.load(Ordering::Acquire);
    let mask = settings::adapters() | PLUGIN_BIT;
    // Outside a window first on, inside first off: a memory hook never sees both words zero
    // while the window flips.
    if recording {
        ACTIVE.store(if ready { mask } else { 0 }, Ordering::Release);
        SHADOW.store(0, Ordering::Release);
    } else {
        SHADOW.store(if ready { mask } else { 0 }, Ordering::Release);
        ACTIVE.store(0, Ordering::Release);
    }
}

/// Whether source `id` should record now: it is selected (`MEMSCOPE_ADAPTERS`), the runtime is
/// READY and a collection window is open. One relaxed atomic load on the hot path; the first
/// call in the process also initialises (or briefly waits for another thread's init). `false`
/// while passive, before init completes, and outside start/stop windows.
#[inline]
pub fn enabled(id: SourceId) -> bool {
    active_bit(id.bit())
}

/// Whether third-party plugins may record now (READY and inside a collection window).
#[inline]
pub fn plugins_enabled() -> bool {
    active_bit(PLUGIN_BIT)
}

/// Whether a memory hook of source `id` (an allocation or a free) should record now: inside a
/// collection window as [`enabled`], and outside one too — there the record is written without
/// stacks and marked `Shadow` by the record path, so the collector can write the blocks
/// already live when the next window opens and give every free inside a window its malloc
/// (issue 26). Same cost as [`enabled`] inside a window.
#[inline]
pub fn tracking(id: SourceId) -> bool {
    active_bit(id.bit()) || SHADOW.load(Ordering::Relaxed) & id.bit() != 0
}

/// [`tracking`] for third-party plugins' allocation and free events.
#[inline]
pub fn plugins_tracking() -> bool {
    active_bit(PLUGIN_BIT) || SHADOW.load(Ordering::Relaxed) & PLUGIN_BIT != 0
}

/// Whether source `id` records outside a collection window now (one relaxed load, never
/// initialises): for hooks that test [`active`] first (the HOST adapter).
#[inline]
pub fn shadow_active(id: SourceId) -> bool {
    SHADOW.load(Ordering::Relaxed) & id.bit() != 0
}

/// Whether the runtime is READY outside a collection window (memory events are shadow
/// records now).
#[inline]
pub fn shadowing() -> bool {
    SHADOW.load(Ordering::Relaxed) != 0
}

#[inline]
fn active_bit(bit: u32) -> bool {
    let a = ACTIVE.load(Ordering::Relaxed);
    if a & bit != 0 {
        return true;
    }
    if a == 0 && matches!(STATE.load(Ordering::Relaxed), UNINIT | INITIALIZING) {
        return active_after_init(bit);
    }
    false
}

#[cold]
fn active_after_init(bit: u32) -> bool {
    if !ensure_init() && STATE.load(Ordering::Acquire) == INITIALIZING && !guard::in_internal() {
        // Gave up waiting for another thread's init: a drop if the adapter turns out selected.
        drops::count_init_wait(bit);
    }
    ACTIVE.load(Ordering::Relaxed) & bit != 0
}

/// Whether source `id` records now, without ever initialising (one relaxed load): for hooks
/// that must check something else before the first init (see the HOST adapter).
#[inline]
pub fn active(id: SourceId) -> bool {
    ACTIVE.load(Ordering::Relaxed) & id.bit() != 0
}

/// Whether source `id` is selected and the runtime READY, ignoring collection windows. For
/// state-only records a collector needs even outside windows (e.g. pool heap registration).
pub fn selected(id: SourceId) -> bool {
    ensure_init() && settings::adapters() & id.bit() != 0
}

/// Initialises a dormant runtime again: a probe preloaded without a spool (`source msmemscope
/// --load-api-env`, then `python train.py`) forwards everything until the Python package has
/// set `MEMSCOPE_SPOOL` and the other settings in `environ` and calls this. `true` once READY
/// (at once when it already was).
pub fn wake() -> bool {
    let _ = STATE.compare_exchange(DORMANT, UNINIT, Ordering::AcqRel, Ordering::Acquire);
    let ready = ensure_init();
    // the constructor found the probe dormant: the memory sampler starts now (`--sample`)
    crate::sampler::start();
    ready
}

/// Whether a collection window is open (READY and recording).
#[inline]
pub fn recording() -> bool {
    ACTIVE.load(Ordering::Relaxed) != 0
}

/// The selection mask (`MEMSCOPE_ADAPTERS`; 0 before init or when passive).
pub fn adapters_mask() -> u32 {
    if ensure_init() {
        settings::adapters()
    } else {
        0
    }
}

/// C stack depth requested (`MEMSCOPE_C_STACK`, frames; 0 = none).
pub fn c_stack_depth() -> u32 {
    settings::c_stack_depth()
}

/// Sets the C stack depth (frames, capped at 1000; 0: none) from now on: the Python API's
/// `config(call_stack=...)` when the probe was preloaded without the launcher.
pub fn set_c_stack_depth(depth: u32) {
    settings::set_c_stack_depth(depth);
}

/// Whether the HOST adapter should also record `mmap`/`munmap` (`MEMSCOPE_HOST_MMAP=1`).
pub fn host_mmap() -> bool {
    settings::host_mmap()
}

fn system(code: SystemCode) -> bool {
    crate::record(&Record::System {
        ts: clock::now_ns(),
        code,
        device: u32::MAX,
    })
}

/// Opens a collection window (`memscope_start()`). Records `System{StartTrace}` when the window
/// was closed. `false` when the probe is passive (or still initialising on another thread).
pub fn start() -> bool {
    if !ensure_init() {
        return false;
    }
    if !RECORDING.swap(true, Ordering::AcqRel) {
        system(SystemCode::StartTrace);
    }
    update_active();
    true
}

/// Closes the collection window (`memscope_stop()`). Records `System{StopTrace}` when a window
/// was open. `false` when passive.
pub fn stop() -> bool {
    if !ensure_init() {
        return false;
    }
    if RECORDING.swap(false, Ordering::AcqRel) {
        system(SystemCode::StopTrace);
    }
    update_active();
    true
}

/// Closes the collection window without a `StopTrace` record: the Python API's `config()`
/// switches an immediate run to deferred semantics (msMemScope's `config()` forces
/// `collectMode=deferred`), so nothing is recorded until its `start()`. `false` when passive.
pub fn defer() -> bool {
    if !ensure_init() {
        return false;
    }
    RECORDING.store(false, Ordering::Release);
    update_active();
    true
}

/// Records `System{Step}` (Python-API `step()`), inside a window only. `false` when nothing was
/// recorded (passive, outside a window, or dropped).
pub fn step() -> bool {
    ensure_init() && recording() && system(SystemCode::Step)
}

/// Barrier requests made so far by this process (a fork child keeps counting from its
/// parent's number: the collector answers with the highest number it saw per pid).
static BARRIERS: AtomicU32 = AtomicU32::new(0);

/// Records `System{Barrier}` (a flush request of the Python API's `stop()`), inside or outside
/// a window. Returns the request's number, 0 when nothing was recorded (passive or dropped).
pub fn barrier() -> u32 {
    if !ensure_init() {
        return 0;
    }
    let n = BARRIERS.fetch_add(1, Ordering::Relaxed) + 1;
    let ok = crate::record(&Record::System {
        ts: clock::now_ns(),
        code: SystemCode::Barrier,
        device: n,
    });
    if ok {
        n
    } else {
        0
    }
}

/// Records `OwnerPush{label}` for the calling thread. Owner records are written whenever the
/// runtime is READY, inside or outside windows, so attribution stays right across windows.
/// Labels longer than `wire::MAX_TEXT` are cut. `false` when passive or dropped.
pub fn owner_push(label: &[u8]) -> bool {
    ensure_init()
        && crate::record(&Record::OwnerPush {
            ts: clock::now_ns(),
            label,
        })
}

/// Records `OwnerPop` for the calling thread (see [`owner_push`]).
pub fn owner_pop() -> bool {
    ensure_init()
        && crate::record(&Record::OwnerPop {
            ts: clock::now_ns(),
        })
}

/// Prints one line to stderr (`memscope: …`) without allocating; for adapters' one-time
/// warnings.
pub fn warn(line: &[u8]) {
    stderr_write(line);
}
