//! Interning of msTX message texts: a job repeats the same few mark and range names millions of
//! times, so each thread sends a text once (`Record::TextDef`) and then refers to it by id
//! (`Record::MarkRef` / `RangeStartRef`), which brings a mark from ~17 bytes to ~5.
//!
//! Each thread keeps a direct-mapped cache of 256 (64-bit FNV-1a hash → id) slots in its
//! mapped scratch block ([`crate::scratch`]; no allocation, no lock, no static TLS). Ids come
//! from one process-wide counter, so two threads interning the same text get two ids —
//! harmless. The definition is written by the same thread before its first reference, so the
//! collector (which stores definitions when it reads them and resolves references only after
//! its reorder window) always has it. The cache is keyed by the stream generation: a fork child
//! starts with an empty one. Only a hook of depth 1 uses it (see [`crate::guard`]): a signal
//! handler's hook, which may have interrupted an update of the cache, writes its text inline.

use crate::writer::TS;
use crate::{scratch, stream, writer};
use memscope_wire::Record;
use std::sync::atomic::{AtomicU32, Ordering};

const SLOTS: usize = 256;
/// Longer texts are written inline: rare, and not worth a cache slot.
const MAX_INTERNED: usize = 256;

static NEXT_ID: AtomicU32 = AtomicU32::new(1);

/// One thread's text cache (all-zero bytes: empty).
#[repr(C)]
pub(crate) struct TextCache {
    gen: u32,
    hash: [u64; SLOTS],
    id: [u32; SLOTS],
    /// The stream generation `types` belongs to.
    pub(crate) types_gen: u32,
    /// Plugin event types (ABI 1.2) this thread defined in that stream: bit `id`.
    pub(crate) types: [u64; crate::plugin_types::MAX_TYPES / 64],
}

impl TextCache {
    /// Forgets every entry (the block goes to another thread).
    pub(crate) fn invalidate(&mut self) {
        self.gen = 0;
        self.types_gen = 0;
    }
}

fn fnv1a(b: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &x in b {
        h ^= x as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h | 1
}

/// The id of `text` for this thread, defining it in the stream first if needed. `None`: not
/// interned (too long, no stream, not at depth 1, no scratch block, or the definition could not
/// be written) — the caller writes the text inline.
fn id_of(text: &[u8]) -> Option<u32> {
    if text.len() > MAX_INTERNED {
        return None;
    }
    let gen = stream::open_gen()?;
    let h = fnv1a(text);
    TS.try_with(|ts| {
        if ts.depth.get() != 1 {
            return None;
        }
        let b = scratch::block(ts)?;
        // SAFETY: the thread's own block; at depth 1 nothing else on this thread uses the cache
        // (deeper hooks skip it, depth-0 callers too), and the reference ends with this call.
        let c = unsafe { &mut (*b).texts };
        if c.gen != gen {
            c.hash.fill(0);
            c.gen = gen;
        }
        let slot = (h as usize) % SLOTS;
        if c.hash[slot] == h {
            return Some(c.id[slot]);
        }
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        if !writer::record(&Record::TextDef { id, text }) {
            return None;
        }
        c.hash[slot] = h;
        c.id[slot] = id;
        Some(id)
    })
    .ok()
    .flatten()
}

/// Records an `mstxMarkA`: by text id when the text can be interned, inline otherwise (NULL
/// messages are always inline so the collector keeps the NULL/empty distinction).
pub fn record_mark(ts: u64, stream: u64, msg: &[u8], null: bool) -> bool {
    match (!null).then(|| id_of(msg)).flatten() {
        Some(text) => writer::record(&Record::MarkRef { ts, stream, text }),
        None => writer::record(&Record::Mark {
            ts,
            stream,
            msg,
            null,
        }),
    }
}

/// Records an `mstxRangeStartA` with range `id`, interning its message like [`record_mark`].
pub fn record_range_start(ts: u64, id: u64, stream: u64, msg: &[u8], null: bool) -> bool {
    match (!null).then(|| id_of(msg)).flatten() {
        Some(text) => writer::record(&Record::RangeStartRef {
            ts,
            id,
            stream,
            text,
        }),
        None => writer::record(&Record::RangeStart {
            ts,
            id,
            stream,
            msg,
            null,
        }),
    }
}
