//! Interning of msTX message texts: a job repeats the same few mark and range names millions of
//! times, so each thread sends a text once (`Record::TextDef`) and then refers to it by id
//! (`Record::MarkRef` / `RangeStartRef`), which brings a mark from ~17 bytes to ~5.
//!
//! Each thread keeps a direct-mapped cache of 256 (64-bit FNV-1a hash → id) slots in
//! const-initialised TLS (no allocation, no lock, no destructor). Ids come from one process-wide
//! counter, so two threads interning the same text get two ids — harmless. The definition is
//! written by the same thread before its first reference, so the collector (which stores
//! definitions when it reads them and resolves references only after its reorder window) always
//! has it. The cache is keyed by the stream generation: a fork child starts with an empty one.

use crate::{stream, writer};
use memscope_core::wire::Record;
use std::cell::Cell;
use std::sync::atomic::{AtomicU32, Ordering};

const SLOTS: usize = 256;
/// Longer texts are written inline: rare, and not worth a cache slot.
const MAX_INTERNED: usize = 256;

static NEXT_ID: AtomicU32 = AtomicU32::new(1);

struct Cache {
    gen: Cell<u32>,
    hash: [Cell<u64>; SLOTS],
    id: [Cell<u32>; SLOTS],
}

thread_local! {
    static CACHE: Cache = const {
        Cache {
            gen: Cell::new(0),
            hash: [const { Cell::new(0) }; SLOTS],
            id: [const { Cell::new(0) }; SLOTS],
        }
    };
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
/// interned (too long, no stream, TLS gone, or the definition could not be written) — the caller
/// writes the text inline.
fn id_of(text: &[u8]) -> Option<u32> {
    if text.len() > MAX_INTERNED {
        return None;
    }
    let gen = stream::open_gen()?;
    let h = fnv1a(text);
    CACHE
        .try_with(|c| {
            if c.gen.get() != gen {
                c.hash.iter().for_each(|s| s.set(0));
                c.gen.set(gen);
            }
            let slot = (h as usize) % SLOTS;
            if c.hash[slot].get() == h {
                return Some(c.id[slot].get());
            }
            let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
            if !writer::record(&Record::TextDef { id, text }) {
                return None;
            }
            c.hash[slot].set(h);
            c.id[slot].set(id);
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
