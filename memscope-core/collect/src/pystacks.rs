//! Python stacks of the rows (issue 13): the `Call Stack(Python)` column.
//!
//! The probe writes a trie of stack nodes (`PyFrameDef`: parent node, code id, line) and, before
//! a row, its thread's innermost node when it changed (`PyStack`). This keeps each thread's
//! current node and writes `file(line): function` lines, innermost first, one `\n` after each
//! (msMemScope's spelling, behaviour spec §5.2), at most `--call-stack python:N` of them, into
//! the rows typed from that thread's later records. A row of a thread that never had a Python
//! frame gets `NA`, as msMemScope writes for non-Python threads. Synthetic rows (`shadow:true`,
//! end-of-run FREEs) get no stack.

use memscope_core::event::Event;
use memscope_wire::{PyCodeKind, Record};
use std::collections::HashMap as StdMap;
use std::sync::Arc;

/// The maps here are looked up on every row (tens of millions): a fast hasher (keys are ids the
/// traced process chose, not attacker-controlled input).
type HashMap<K, V> =
    StdMap<K, V, std::hash::BuildHasherDefault<memscope_core::addr_hash::AddrHasher>>;

/// Python stacks of one process.
#[derive(Default)]
pub struct PyStacks {
    /// Frames written per row; `None`: Python stacks are off.
    depth: Option<u32>,
    /// (image, code id) → (file, function).
    codes: HashMap<(usize, u32), (Arc<str>, Arc<str>)>,
    /// (image, node) → (parent, code, line).
    nodes: HashMap<(usize, u32), (u32, u32, u32)>,
    /// tid → (image, innermost node) of its last `PyStack`.
    current: HashMap<u32, (usize, u32)>,
    /// Rendered stacks.
    text: HashMap<(usize, u32), Arc<str>>,
}

impl PyStacks {
    /// Whether rows get Python stacks.
    pub fn on(&self) -> bool {
        self.depth.is_some_and(|d| d > 0)
    }

    /// Frames per row from now on (`None`: off), definitions kept.
    pub fn set_depth(&mut self, depth: Option<u32>) {
        self.depth = depth;
    }

    /// Stacks of `depth` frames per row (`None`: off).
    pub fn new(depth: Option<u32>) -> PyStacks {
        PyStacks {
            depth,
            ..PyStacks::default()
        }
    }

    /// Stores a definition (`PyCodeDef` of a function, `PyFrameDef`) of image `image`, read
    /// before any record that uses it is released. `false`: not one of those.
    pub fn define(&mut self, image: usize, rec: &Record<Box<[u8]>>) -> bool {
        match rec {
            Record::PyCodeDef {
                id,
                kind: PyCodeKind::Function,
                file,
                name,
                ..
            } => {
                self.codes.insert(
                    (image, *id),
                    (
                        String::from_utf8_lossy(file).into(),
                        String::from_utf8_lossy(name).into(),
                    ),
                );
                false // the python_trace state wants it too
            }
            Record::PyFrameDef {
                id,
                parent,
                code,
                line,
            } => {
                self.nodes.insert((image, *id), (*parent, *code, *line));
                true
            }
            _ => false,
        }
    }

    /// Follows a `PyStack` record of thread `tid`; `false` for any other record.
    pub fn on_record(&mut self, image: usize, tid: u32, rec: &Record<Box<[u8]>>) -> bool {
        match rec {
            Record::PyStack { node, .. } => {
                self.current.insert(tid, (image, *node));
                true
            }
            _ => false,
        }
    }

    /// The key of the Python stack thread `tid` of image `image` is in now ([`Self::current`]
    /// without its text: one lookup).
    #[inline]
    pub fn current_key(&self, image: usize, tid: u32) -> Option<u64> {
        self.depth.filter(|d| *d > 0)?;
        let (img, node) = *self.current.get(&tid)?;
        (img == image && node != 0).then_some(((image as u64) << 32) | node as u64)
    }

    /// The Python stack thread `tid` of image `image` is in now, as a key that identifies it
    /// in this process and its text; `None` when Python stacks are off or the thread has no
    /// Python frame.
    pub fn current(&mut self, image: usize, tid: u32) -> Option<(u64, Arc<str>)> {
        let depth = self.depth.filter(|d| *d > 0)?;
        let (img, node) = *self.current.get(&tid)?;
        if img != image || node == 0 {
            return None;
        }
        let text = self.render(image, node, depth);
        Some((((image as u64) << 32) | node as u64, text))
    }

    /// Sets the Python stack of `ev`, a row typed from a record of thread `tid`.
    pub fn attach(&mut self, image: usize, tid: u32, ev: &mut Event) {
        let Some(depth) = self.depth else {
            return;
        };
        if depth == 0
            || ev.py_stack.is_some()
            || ev.tid != Some(tid)
            || ev.memory().is_some_and(|m| m.shadow)
        {
            return;
        }
        let text = match self.current.get(&tid) {
            Some(&(img, node)) if img == image && node != 0 => self.render(image, node, depth),
            _ => "NA".into(),
        };
        ev.py_stack = Some(text.to_string());
    }

    fn render(&mut self, image: usize, node: u32, depth: u32) -> Arc<str> {
        if let Some(t) = self.text.get(&(image, node)) {
            return t.clone();
        }
        let mut s = String::new();
        let mut at = node;
        let mut n = 0;
        let mut inner = true;
        let mut skipped = false;
        while at != 0 && n < depth {
            let Some(&(parent, code, line)) = self.nodes.get(&(image, at)) else {
                s.push_str(&format!("<stack #{at}>\n"));
                break;
            };
            let code_info = self.codes.get(&(image, code));
            // The innermost frames of memscope's own torch hooks (and torch's wrappers around
            // a dispatch mode's handler) are not the user's code.
            if inner
                && code_info.is_some_and(|(file, _)| {
                    is_hook_file(file) || (skipped && is_dispatch_wrapper(file))
                })
            {
                skipped = true;
                at = parent;
                continue;
            }
            inner = false;
            match code_info {
                Some((file, func)) => s.push_str(&format!("{file}({line}): {func}\n")),
                None => s.push_str(&format!("<code #{code}>({line})\n")),
            }
            at = parent;
            n += 1;
        }
        let t: Arc<str> = s.into();
        self.text.insert((image, node), t.clone());
        t
    }
}

/// Files of memscope's torch and framework hooks (`python/memscope/_aten.py`,
/// `framework_hooks.py`, the launcher's copies).
fn is_hook_file(file: &str) -> bool {
    [
        "/memscope_torch_hooks.py",
        "/memscope/_aten.py",
        "/memscope_framework_hooks.py",
        "/memscope/framework_hooks.py",
    ]
    .iter()
    .any(|f| file.ends_with(f))
}

/// torch's wrappers around a `TorchDispatchMode` handler (seen between the hook's frame and
/// the user's code).
fn is_dispatch_wrapper(file: &str) -> bool {
    [
        "torch/_compile.py",
        "torch/_dynamo/eval_frame.py",
        "torch/utils/_python_dispatch.py",
    ]
    .iter()
    .any(|w| file.ends_with(w))
}

#[cfg(test)]
mod tests {
    use super::*;
    use memscope_core::event::EventType;

    fn code(id: u32, file: &str, name: &str) -> Record<Box<[u8]>> {
        Record::PyCodeDef {
            id,
            kind: PyCodeKind::Function,
            line: 1,
            file: file.as_bytes().into(),
            name: name.as_bytes().into(),
        }
    }

    #[test]
    fn python_stacks_are_innermost_first_cut_at_depth_and_na_without_frames() {
        let mut p = PyStacks::new(Some(2));
        p.define(0, &code(1, "/w/t.py", "<module>"));
        p.define(0, &code(2, "/w/t.py", "main"));
        p.define(0, &code(3, "/w/t.py", "make_big"));
        for (id, parent, code, line) in [(1, 0, 1, 30), (2, 1, 2, 20), (3, 2, 3, 5)] {
            assert!(p.define(
                0,
                &Record::PyFrameDef {
                    id,
                    parent,
                    code,
                    line
                }
            ));
        }
        let mut ev = Event::new(EventType::Host, 1, 9, 7);
        p.attach(0, 7, &mut ev);
        assert_eq!(ev.py_stack.as_deref(), Some("NA"));
        assert!(p.on_record(0, 7, &Record::PyStack { ts: 1, node: 3 }));
        let mut ev = Event::new(EventType::Host, 2, 9, 7);
        p.attach(0, 7, &mut ev);
        assert_eq!(
            ev.py_stack.as_deref(),
            Some("/w/t.py(5): make_big\n/w/t.py(20): main\n")
        );
        let mut other = Event::new(EventType::Host, 2, 9, 8);
        p.attach(0, 7, &mut other);
        assert_eq!(other.py_stack, None, "a row of another thread");
        let mut off = PyStacks::new(None);
        let mut ev = Event::new(EventType::Host, 2, 9, 7);
        off.attach(0, 7, &mut ev);
        assert_eq!(ev.py_stack, None);
    }
}
