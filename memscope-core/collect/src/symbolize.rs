//! The collector's C stack service ([`CStacks`]) over [`memscope_symbolize`], the
//! symbolisation of raw return addresses (function, file:line and inlined frames from DWARF,
//! ELF symbols, module+offset), which lives in its own crate.

pub use memscope_symbolize::*;

use std::collections::HashMap;
use std::sync::Arc;

/// The C stack service of the collector, shared by every adapter: the module map and
/// symbolised stacks of each process image (kept in [`crate::adapter::TypeCtx`]), and the
/// per-thread `CallStack` records (the runtime's stack service, for any adapter's hook) waiting
/// for the record they belong to.
#[derive(Default)]
pub struct CStacks {
    /// Module map and symbol caches per process image (stream of the pid).
    syms: HashMap<usize, Symbolizer>,
    /// Symbolised stacks by (image, stack id).
    texts: HashMap<(usize, u32), Arc<str>>,
    /// (image, tid) → (ts, stack id) of a `CallStack` record whose record is still to come.
    pending: HashMap<(usize, u32), (u64, u32)>,
}

impl std::fmt::Debug for CStacks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CStacks")
            .field("images", &self.syms.len())
            .field("stacks", &self.texts.len())
            .finish_non_exhaustive()
    }
}

impl CStacks {
    /// Adds a module (a `Module` record) to image `image`'s map; stacks symbolised before it was
    /// known are redone on next use.
    pub fn add_module(
        &mut self,
        image: usize,
        module: (u64, u64, u64),
        path: &[u8],
        build_id: &[u8],
    ) {
        let (base, start, size) = module;
        self.syms
            .entry(image)
            .or_default()
            .add_module(base, start, size, path, build_id);
        self.texts.retain(|k, _| k.0 != image);
    }

    /// The text of stack `frames` (id `id` of image `image`): one frame per line, innermost
    /// first; cached per id.
    pub fn text(&mut self, image: usize, id: u32, frames: &[u64]) -> Arc<str> {
        if let Some(s) = self.texts.get(&(image, id)) {
            return s.clone();
        }
        let t: Arc<str> = self
            .syms
            .entry(image)
            .or_default()
            .stack_text(frames)
            .into();
        self.texts.insert((image, id), t.clone());
        t
    }

    /// A `CallStack { ts, stack }` record of thread `tid` (image `image`): kept for the thread's
    /// next record.
    pub fn set_pending(&mut self, image: usize, tid: u32, ts: u64, stack: u32) {
        self.pending.insert((image, tid), (ts, stack));
    }

    /// The stack id waiting for the record of thread `tid` stamped `ts`, if any. A pending stack
    /// of an earlier time stamp (its record was dropped) is discarded.
    #[inline]
    pub fn take_pending(&mut self, image: usize, tid: u32, ts: Option<u64>) -> Option<u32> {
        if self.pending.is_empty() {
            return None;
        }
        let (pts, id) = *self.pending.get(&(image, tid))?;
        match ts {
            Some(t) if t == pts => {
                self.pending.remove(&(image, tid));
                Some(id)
            }
            Some(t) if t > pts => {
                self.pending.remove(&(image, tid));
                None
            }
            _ => None,
        }
    }
}
