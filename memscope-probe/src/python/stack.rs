//! Python stacks on every row (issue 13): a per-thread shadow stack kept by the profile hook
//! of `trace.rs`, turned into a stack id only when a row is recorded.
//!
//! * **Shadow stack.** Kept through `sys.monitoring` on CPython ≥ 3.12 (`monitoring.rs`), else
//!   by the profile hook of `trace.rs`. The hook (GIL held) pushes `(function code id, frame)` when
//!   a Python function is entered and pops at its return — matched by frame, so a missed event
//!   never shifts the stack. Each entry holds a reference to its frame object (taken and dropped by
//!   the hook, under the GIL), so a row never reads a frame that was freed. Frames already running
//!   when stacks start are seeded from the frame chain: the calling thread's at start, every other
//!   thread's at its first hook event.
//! * **Interning.** A stack is a node of a trie: `(parent node, code id, line)`, defined once
//!   per thread and process image (`Record::PyFrameDef`); a row carries only its thread's
//!   innermost node, and only when it changed (`Record::PyStack`, written by the runtime's
//!   context service just before the row, like `ThreadDevice` for devices). Every adapter's
//!   rows get stacks without a record format change.
//! * **Cost per row.** A suspended frame's line cannot change while a callee runs, so nodes
//!   below the innermost frame are cached in the shadow stack; a row resolves the innermost
//!   frame's line (`PyFrame_GetLineNumber`, which only reads the frame and its code object)
//!   and, when it moved, looks one node up in the thread's table. No frame walk, no GIL: rows
//!   raised by a thread that released the GIL (a `ctypes` call, a framework op) get the stack
//!   of the Python frames suspended beneath them.
//!
//! The depth (`--call-stack python:N`) is applied by the collector when it writes the
//! innermost N frames; the probe keeps the whole trie.
//!
//! Limits: the shadow stack is only as right as the hook's events — code that replaces the
//! profile function of a thread (`sys.setprofile` by a profiler or debugger) or switches
//! stacks without events (greenlets) leaves it stale (old frames, still valid objects) until
//! an older frame's return is seen; free-threaded builds are refused by the package.

use super::cpython::{self, Api, Frame};
use core::cell::RefCell;
use core::mem::ManuallyDrop;
use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use memscope_runtime as rt;
use memscope_wire::Record;
use std::collections::HashMap;
use std::hash::BuildHasherDefault;

/// Stacks are on in this process.
static ON: AtomicBool = AtomicBool::new(false);
/// Next node id (per process image; a fork child goes on counting, harmless).
static NEXT_NODE: AtomicU32 = AtomicU32::new(1);

#[derive(Clone, Copy)]
struct Entry {
    /// Code id of the function (0: unknown; the frame is kept for matching only).
    func: u32,
    /// Its frame (`PyFrameObject *`; the entry holds a reference to it).
    frame: usize,
    /// Line of the cached node.
    line: u32,
    /// Trie node of the stack up to this frame (0: not computed).
    node: u32,
}

#[derive(Default)]
struct Shadow {
    entries: Vec<Entry>,
    /// Lowest index whose line may have moved since its node was computed.
    dirty: usize,
    /// Frames already running were seeded.
    seeded: bool,
    /// Stream generation of `nodes` and of the entries' cached nodes.
    gen: u32,
    /// Node this thread last wrote a `PyStack` for (0: none yet, or no Python frame).
    last: u32,
    /// `(parent, code, line)` → node, defined in generation `gen` by this thread.
    nodes: HashMap<(u32, u32, u32), u32, BuildHasherDefault<super::intern::AddrHasher>>,
}

thread_local! {
    // No TLS destructor (ManuallyDrop): rows of a thread's own TLS teardown still find it.
    static SHADOW: ManuallyDrop<RefCell<Shadow>> = ManuallyDrop::new(RefCell::new(Shadow::default()));
}

fn with_shadow<R>(f: impl FnOnce(&mut Shadow) -> R) -> Option<R> {
    SHADOW
        .try_with(|s| s.try_borrow_mut().ok().map(|mut s| f(&mut s)))
        .ok()
        .flatten()
}

/// Whether Python stacks are on.
#[inline]
pub fn on() -> bool {
    ON.load(Ordering::Relaxed)
}

/// Turns stacks on (GIL held): seeds the calling thread with the frames running now and
/// registers the row hook. `false` when it was already on.
pub fn start(api: &Api) -> bool {
    if ON.swap(true, Ordering::AcqRel) {
        return false;
    }
    let f = api.get_frame.map_or(core::ptr::null_mut(), |g| {
        // SAFETY: GIL held; a borrowed frame or null.
        unsafe { g() }
    });
    seed(api, f, false);
    rt::set_context_hook(on_row);
    true
}

/// Takes a reference to `frame` (GIL held): the shadow stack owns one per entry, so a frame
/// whose return was never seen (its thread's profile function replaced by another tool) stays
/// a valid object until its entry goes, and a row never reads freed memory.
fn hold(api: &Api, frame: Frame) {
    if let (Some(inc), false) = (api.incref, frame.is_null()) {
        // SAFETY: GIL held; `frame` is a live frame object.
        unsafe { inc(frame) };
    }
}

/// Drops the references of entries taken off the shadow stack (GIL held, borrow released:
/// a last reference runs the frame's deallocation here).
fn release(api: &Api, gone: Vec<Entry>) {
    for e in gone {
        api.decref(e.frame as Frame);
    }
}

/// Seeds this thread's shadow stack with `frame` and its callers (unless already seeded).
/// `owned`: `frame` is a new reference (kept by the entry, or released here).
fn seed(api: &Api, frame: Frame, owned: bool) {
    let need = with_shadow(|s| !std::mem::replace(&mut s.seeded, true)).unwrap_or(false);
    if !need {
        if owned {
            api.decref(frame);
        }
        return;
    }
    let mut chain = Vec::new();
    let mut f = frame;
    if !owned {
        hold(api, f);
    }
    while !f.is_null() {
        if chain.len() >= 10_000 {
            api.decref(f);
            break;
        }
        let id = super::codes::func_id(api, f).unwrap_or(0);
        // the entry keeps the reference `f` came with
        chain.push(Entry {
            func: id,
            frame: f as usize,
            line: 0,
            node: 0,
        });
        f = match api.frame_back {
            // SAFETY: GIL held; `f` is a live frame; returns a new reference or null.
            Some(b) => unsafe { b(f) },
            None => core::ptr::null_mut(),
        };
    }
    chain.reverse();
    let left = with_shadow(|s| {
        let mut seeded = std::mem::take(&mut chain);
        seeded.append(&mut s.entries);
        s.entries = seeded;
        s.dirty = 0;
    });
    if left.is_none() {
        release(api, chain);
    }
}

/// The profile hook entered Python function `func` (0: unknown) running in `frame`.
#[inline]
pub fn push(api: &Api, func: u32, frame: Frame) {
    if with_shadow(|s| s.seeded) == Some(false) {
        let back = match api.frame_back {
            // SAFETY: GIL held; `frame` is the frame being entered.
            Some(b) => unsafe { b(frame) },
            None => core::ptr::null_mut(),
        };
        seed(api, back, true);
    }
    hold(api, frame);
    let pushed = with_shadow(|s| {
        let n = s.entries.len();
        s.entries.push(Entry {
            func,
            frame: frame as usize,
            line: 0,
            node: 0,
        });
        s.dirty = s.dirty.min(n.saturating_sub(1));
    });
    if pushed.is_none() {
        api.decref(frame);
    }
}

/// The profile hook saw `frame` return (or yield, or unwind).
#[inline]
pub fn pop(api: &Api, frame: Frame) {
    if with_shadow(|s| s.seeded) == Some(false) {
        let back = match api.frame_back {
            // SAFETY: GIL held; `frame` is the returning frame.
            Some(b) => unsafe { b(frame) },
            None => core::ptr::null_mut(),
        };
        seed(api, back, true);
        return;
    }
    let gone = with_shadow(|s| {
        let at = s.entries.iter().rposition(|e| e.frame == frame as usize)?;
        s.dirty = s.dirty.min(at.saturating_sub(1));
        Some(s.entries.split_off(at))
    })
    .flatten();
    if let Some(g) = gone {
        release(api, g);
    }
}

/// The runtime's context hook: before a row of this thread, writes its Python stack if it
/// changed since the thread's last row.
fn on_row(ts: u64) {
    if !on() {
        return;
    }
    let Some(api) = cpython::api_checked() else {
        return;
    };
    let Some(gen) = rt::stream_generation() else {
        return;
    };
    let _ = with_shadow(|s| {
        if s.gen != gen {
            s.gen = gen;
            s.nodes.clear();
            s.last = 0;
            s.dirty = 0;
            s.entries.iter_mut().for_each(|e| e.node = 0);
        }
        let Some(node) = current(api, s) else {
            return;
        };
        if node != s.last && rt::record(&Record::PyStack { ts, node }) {
            s.last = node;
        }
    });
}

fn line_of(api: &Api, frame: usize) -> u32 {
    match api.frame_line {
        // SAFETY: `frame` is a frame of this thread that is running (suspended in a call while
        // this hook runs); PyFrame_GetLineNumber only reads it and its immutable code object.
        Some(f) => unsafe { f(frame as Frame) }.max(0) as u32,
        None => 0,
    }
}

/// The innermost node of the thread's stack (0: no Python frame), defining what is new.
/// `None` when a definition could not be written.
fn current(api: &Api, s: &mut Shadow) -> Option<u32> {
    let n = s.entries.len();
    if n == 0 {
        return Some(0);
    }
    let start = s.dirty.min(n - 1);
    let mut parent = if start == 0 {
        0
    } else {
        s.entries[start - 1].node
    };
    let mut changed = false;
    for i in start..n {
        let e = s.entries[i];
        let line = line_of(api, e.frame);
        if !changed && e.node != 0 && e.line == line {
            parent = e.node;
            continue;
        }
        changed = true;
        let node = if e.func == 0 {
            parent
        } else {
            node_id(&mut s.nodes, parent, e.func, line)?
        };
        s.entries[i].line = line;
        s.entries[i].node = node;
        parent = node;
    }
    s.dirty = n - 1;
    Some(parent)
}

fn node_id(
    nodes: &mut HashMap<(u32, u32, u32), u32, BuildHasherDefault<super::intern::AddrHasher>>,
    parent: u32,
    code: u32,
    line: u32,
) -> Option<u32> {
    if let Some(&id) = nodes.get(&(parent, code, line)) {
        return Some(id);
    }
    if !super::intern::ensure_defined(code) {
        return None;
    }
    let id = NEXT_NODE.fetch_add(1, Ordering::Relaxed);
    if !rt::record(&Record::PyFrameDef {
        id,
        parent,
        code,
        line,
    }) {
        return None;
    }
    nodes.insert((parent, code, line), id);
    Some(id)
}
