//! Lock-free interning of call stacks: each distinct stack is written once per process image as
//! a `StackDef` record and referred to by id afterwards.
//!
//! Tables of 64-bit slots (`tag:40 | id:24`, 0 = empty), open addressing with linear probing,
//! no deletion. The first table has 2^16 slots (512 KiB of lazily touched zero pages); when the
//! newest table is 70 % full a table four times larger is mapped, up to four tables
//! (≈ 22 M slots). Lookups probe the tables oldest first; an empty slot ends the search in a
//! table. The 40-bit tag comes from the high bits of a 64-bit hash of the frames and the slot
//! index from the low bits, so a wrong match needs a 56-bit collision.
//!
//! A thread that claims an empty slot marks it "being defined", writes the `StackDef` with a
//! fresh id into its own chunk and then publishes the id; a thread that finds a slot still being
//! defined writes its own (duplicate) definition with another fresh id instead of waiting, so a
//! stack id is always defined earlier in the same chunk as its first use. Ids beyond 24 bits
//! are not stored (their stacks are defined at each use). A fork child starts with empty tables
//! (its stream is new).

use crate as rt;
use core::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use memscope_wire::{encode_frames, Record};

const TABLES: usize = 4;
const FIRST_BITS: u32 = 16;
const ID_BITS: u32 = 24;
const ID_MASK: u64 = (1 << ID_BITS) - 1;
const PENDING: u64 = ID_MASK;
const MAX_PROBES: usize = 64;

static TABLE: [AtomicPtr<AtomicU64>; TABLES] =
    [const { AtomicPtr::new(core::ptr::null_mut()) }; TABLES];
static COUNT: [AtomicUsize; TABLES] = [const { AtomicUsize::new(0) }; TABLES];
static NEXT_ID: AtomicU32 = AtomicU32::new(1);
/// Stacks defined so far (for tests and the benchmark notes).
static DEFINED: AtomicU64 = AtomicU64::new(0);

fn bits(t: usize) -> u32 {
    FIRST_BITS + 2 * t as u32
}

fn bytes(t: usize) -> usize {
    8usize << bits(t)
}

/// 64-bit hash of the frames (multiply-xorshift per word, then a final avalanche).
pub fn hash(frames: &[u64]) -> u64 {
    let mut h = 0x243F_6A88_85A3_08D3u64 ^ frames.len() as u64;
    for &f in frames {
        h = (h ^ f).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        h ^= h >> 29;
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xFF51_AFD7_ED55_8CCD);
    h ^= h >> 33;
    h = h.wrapping_mul(0xC4CE_B9FE_1A85_EC53);
    h ^ (h >> 33)
}

fn table(t: usize) -> Option<&'static [AtomicU64]> {
    let p = TABLE[t].load(Ordering::Acquire);
    if p.is_null() {
        return None;
    }
    // SAFETY: a non-null table pointer was published (release) after mapping `1 << bits(t)`
    // zeroed slots; tables are never unmapped (a fork child zeroes them in place).
    Some(unsafe { core::slice::from_raw_parts(p, 1 << bits(t)) })
}

/// Maps table `t` (zeroed anonymous memory) unless another thread did.
#[cold]
fn map_table(t: usize) -> Option<&'static [AtomicU64]> {
    if let Some(tab) = table(t) {
        return Some(tab);
    }
    // A raw system call, not the symbol `mmap` (the probe's own hook: the table is no event).
    let m = rt::map_anon(bytes(t))?.cast::<AtomicU64>();
    if TABLE[t]
        .compare_exchange(
            core::ptr::null_mut(),
            m,
            Ordering::AcqRel,
            Ordering::Acquire,
        )
        .is_err()
    {
        // SAFETY: our own mapping, never published.
        unsafe { rt::raw_munmap(m.cast(), bytes(t)) };
    }
    table(t)
}

enum Probe {
    Found(u32),
    /// Another thread is defining this stack right now.
    Pending,
    /// Not in this table; index of the empty slot that ended the search.
    Absent(usize),
    /// Probed `MAX_PROBES` slots without a match or an empty slot.
    Full,
}

fn probe(tab: &[AtomicU64], t: usize, h: u64, tag: u64) -> Probe {
    let mask = tab.len() - 1;
    let start = (h as usize) & mask;
    let _ = t;
    for i in 0..MAX_PROBES {
        let idx = (start + i) & mask;
        let v = tab[idx].load(Ordering::Acquire);
        if v == 0 {
            return Probe::Absent(idx);
        }
        if v >> ID_BITS == tag {
            let id = v & ID_MASK;
            return if id == PENDING {
                Probe::Pending
            } else {
                Probe::Found(id as u32)
            };
        }
    }
    Probe::Full
}

/// Writes the definition of a stack with a fresh id, after the `Module` records of the objects
/// its frames lie in ([`super::modules::announce`]), encoding it in `raw` (the hook's scratch:
/// ≤ 10 bytes per frame); returns the id (0 if it could not be written).
fn define(frames: &[u64], raw: &mut [u8]) -> u32 {
    super::modules::announce(frames);
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    let Some(n) = encode_frames(frames, raw) else {
        return 0;
    };
    let ok = rt::record(&Record::StackDef {
        id,
        count: frames.len() as u32,
        raw: &raw[..n],
    });
    if ok {
        DEFINED.fetch_add(1, Ordering::Relaxed);
        id
    } else {
        0
    }
}

/// The id of `frames` (innermost first), defining it in the stream on first sight (encoded in
/// `raw`, scratch space of at least 10 bytes per frame). 0 for an empty stack or when the
/// definition could not be written. Called with the runtime's reentrancy guard held.
pub fn intern(frames: &[u64], raw: &mut [u8]) -> u32 {
    if frames.is_empty() {
        return 0;
    }
    let h = hash(frames);
    let tag = (h >> ID_BITS) | 1;
    let mut last = None;
    for t in 0..TABLES {
        let Some(tab) = table(t) else { break };
        match probe(tab, t, h, tag) {
            Probe::Found(id) => return id,
            Probe::Pending => return define(frames, raw),
            Probe::Absent(idx) => last = Some((t, idx)),
            Probe::Full => last = None,
        }
    }
    // Not found: insert into the newest table with room.
    let newest = (0..TABLES).rev().find(|&t| table(t).is_some());
    let mut t = newest.unwrap_or(0);
    if newest.is_none() || COUNT[t].load(Ordering::Relaxed) * 10 >= (7 << bits(t)) {
        if newest.is_some() {
            t += 1;
        }
        if t >= TABLES || map_table(t).is_none() {
            return define(frames, raw);
        }
        last = None;
    }
    let Some(tab) = table(t) else {
        return define(frames, raw);
    };
    let idx = match last {
        Some((lt, idx)) if lt == t => idx,
        _ => match probe(tab, t, h, tag) {
            Probe::Found(id) => return id,
            Probe::Pending => return define(frames, raw),
            Probe::Absent(idx) => idx,
            Probe::Full => return define(frames, raw),
        },
    };
    let claim = (tag << ID_BITS) | PENDING;
    if tab[idx]
        .compare_exchange(0, claim, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        // Lost the slot to another thread (maybe for this very stack): define without caching.
        return define(frames, raw);
    }
    COUNT[t].fetch_add(1, Ordering::Relaxed);
    let id = define(frames, raw);
    if id != 0 && (id as u64) < PENDING {
        tab[idx].store((tag << ID_BITS) | id as u64, Ordering::Release);
    } else {
        // Not representable (or not written): leave the slot pending, so every use of this
        // stack defines it afresh.
    }
    id
}

/// Distinct stacks defined in this process image so far.
pub fn defined() -> u64 {
    DEFINED.load(Ordering::Relaxed)
}

/// Fork child: empty every table (the child writes a new stream, which must define its stacks
/// again). Runs on the only thread of the child.
pub fn reset_after_fork() {
    for t in 0..TABLES {
        let p = TABLE[t].load(Ordering::Acquire);
        if !p.is_null() {
            // SAFETY: our private anonymous mapping of `bytes(t)` bytes; DONTNEED gives back
            // zero pages. No other thread exists in the fork child.
            unsafe { libc::madvise(p.cast(), bytes(t), libc::MADV_DONTNEED) };
        }
        COUNT[t].store(0, Ordering::Relaxed);
    }
    DEFINED.store(0, Ordering::Relaxed);
}
