//! Registered event types and compact events of plugins (ABI 1.2, `schemas/memscope_plugin.h`):
//! `register_type` copies a type's texts once into a static table and gives an id;
//! `emit_compact` records an event by id — no text, no copy of an event struct — as a
//! [`Record::Compact`]. Each thread writes a type's [`Record::EventTypeDef`] into the stream
//! before its first event of it (as msTX texts are interned, [`crate::intern`]: the bitmap of
//! defined types sits in the thread's scratch block, keyed by the stream generation, so a fork
//! child, whose stream is new, defines them again).

use crate::sys::cstr_bytes;
use crate::{clock, guard, scratch, state, stream, writer};
use core::cell::UnsafeCell;
use core::ffi::c_int;
use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use memscope_adapter_sdk::sys::{EventType, EVENT_C_STACK, EVENT_TYPE_V1_2_SIZE, MAX_VALUES};
use memscope_wire::Record;

/// Most types a process may register.
pub(crate) const MAX_TYPES: usize = 256;
/// Longest text of a type (longer ones are cut).
const MAX_TYPE_TEXT: usize = 255;
/// Highest kind code of a compact event (MALLOC … ACCESS).
const KIND_MAX: u32 = 8;

/// One registered type: written once by `register_type` before `ready` is set, read-only after.
struct Slot {
    ready: AtomicBool,
    device: AtomicU32,
    flags: AtomicU32,
    nvalues: AtomicU32,
    /// Lengths of the texts: event type, name, attrs, value names.
    lens: [AtomicU32; 4],
    texts: UnsafeCell<[[u8; MAX_TYPE_TEXT]; 4]>,
}

// SAFETY: `texts` is written only by the one `register_type` call that took the slot's id,
// before it publishes the slot with a release store of `ready`; readers read it only after an
// acquire load of `ready` saw `true`.
unsafe impl Sync for Slot {}

static TYPES: [Slot; MAX_TYPES] = [const {
    Slot {
        ready: AtomicBool::new(false),
        device: AtomicU32::new(0),
        flags: AtomicU32::new(0),
        nvalues: AtomicU32::new(0),
        lens: [const { AtomicU32::new(0) }; 4],
        texts: UnsafeCell::new([[0; MAX_TYPE_TEXT]; 4]),
    }
}; MAX_TYPES];
static NEXT: AtomicU32 = AtomicU32::new(0);

impl Slot {
    fn text(&self, i: usize) -> &[u8] {
        let n = self.lens[i].load(Ordering::Relaxed) as usize;
        // SAFETY: see `Slot`'s `Sync`: callers checked `ready` with acquire first.
        unsafe { &(&*self.texts.get())[i][..n.min(MAX_TYPE_TEXT)] }
    }
}

/// `memscope_host.register_type`.
pub(crate) unsafe extern "C" fn host_register_type(t: *const EventType) -> i32 {
    std::panic::catch_unwind(|| {
        if t.is_null() {
            return -1;
        }
        // SAFETY: a non-NULL type points to at least its `struct_size` field (ABI contract).
        if unsafe { (*t).struct_size } < EVENT_TYPE_V1_2_SIZE {
            return -1;
        }
        // SAFETY: `struct_size` covers the 1.2 struct.
        let t = unsafe { *t };
        // SAFETY: ABI contract: the texts are NULL or NUL-terminated, valid during the call.
        let texts = unsafe {
            [
                cstr_bytes(t.event_type, MAX_TYPE_TEXT).unwrap_or(b""),
                cstr_bytes(t.name, MAX_TYPE_TEXT).unwrap_or(b""),
                cstr_bytes(t.attrs, MAX_TYPE_TEXT).unwrap_or(b""),
                cstr_bytes(t.value_names, MAX_TYPE_TEXT).unwrap_or(b""),
            ]
        };
        let nvalues = if texts[3].is_empty() {
            0
        } else {
            texts[3].split(|&b| b == b',').count()
        };
        if texts[0].is_empty() || nvalues > MAX_VALUES || !value_names_ok(texts[3]) {
            return -1;
        }
        let id = NEXT.fetch_add(1, Ordering::Relaxed) as usize;
        let Some(slot) = TYPES.get(id) else {
            NEXT.store(MAX_TYPES as u32, Ordering::Relaxed);
            return -1;
        };
        for (i, text) in texts.iter().enumerate() {
            let n = text.len().min(MAX_TYPE_TEXT);
            // SAFETY: this call owns slot `id` (it took the id) and has not published it.
            unsafe { (&mut *slot.texts.get())[i][..n].copy_from_slice(&text[..n]) };
            slot.lens[i].store(n as u32, Ordering::Relaxed);
        }
        slot.device.store(t.device, Ordering::Relaxed);
        slot.flags.store(t.flags, Ordering::Relaxed);
        slot.nvalues.store(nvalues as u32, Ordering::Relaxed);
        slot.ready.store(true, Ordering::Release);
        id as i32
    })
    .unwrap_or(-1)
}

/// Attr keys a value may not take: the row's own, and characters of the Attr syntax.
const RESERVED: [&[u8]; 5] = [b"size", b"addr", b"allocation_id", b"used", b"owner"];

/// Whether `names` (`k1,k2`, or empty) are usable Attr keys: non-empty, not reserved, without
/// `: , { } "` or spaces.
fn value_names_ok(names: &[u8]) -> bool {
    names.is_empty()
        || names.split(|&b| b == b',').all(|n| {
            !n.is_empty()
                && !RESERVED.contains(&n)
                && !n
                    .iter()
                    .any(|b| matches!(b, b':' | b'{' | b'}' | b'"' | b' ' | b'\n'))
        })
}

/// Writes type `id`'s definition unless this thread already did in the current stream (`g`:
/// the emit's guard, whose thread state saves a lookup). `false` when it could not be written.
fn ensure_defined(id: usize, slot: &Slot, g: Option<&guard::Guard>) -> bool {
    let Some(gen) = stream::open_gen() else {
        return false;
    };
    let (word, bit) = (id / 64, 1u64 << (id % 64));
    let block = match g {
        Some(g) => scratch::block(g.ts()),
        None => writer::TS.try_with(scratch::block).ok().flatten(),
    };
    let cache = block.map(|b| {
        // SAFETY: the thread's own block, mapped for the thread's life; the bitmap is touched
        // only here, by that thread. A signal handler's hook that interrupts this update at
        // worst writes the definition once more (harmless: the collector keeps the first).
        let c = unsafe { &mut (*b).texts };
        if c.types_gen != gen {
            c.types = [0; MAX_TYPES / 64];
            c.types_gen = gen;
        }
        c as *mut crate::intern::TextCache
    });
    // SAFETY: as above.
    if cache.is_some_and(|c| unsafe { (*c).types[word] } & bit != 0) {
        return true;
    }
    let def = Record::EventTypeDef {
        id: id as u32,
        device: slot.device.load(Ordering::Relaxed),
        flags: slot.flags.load(Ordering::Relaxed),
        event_type: slot.text(0),
        name: slot.text(1),
        attrs: slot.text(2),
        values: slot.text(3),
    };
    if !writer::record(&def) {
        return false;
    }
    if let Some(c) = cache {
        // SAFETY: as above (the block stays this thread's while the thread runs).
        unsafe {
            if (*c).types_gen == gen {
                (*c).types[word] |= bit;
            }
        }
    }
    true
}

/// `memscope_host.emit_compact`.
pub(crate) unsafe extern "C" fn host_emit_compact(
    type_id: i32,
    kind: u32,
    ptr: u64,
    size: u64,
    flags: u32,
    values: *const u64,
) -> c_int {
    std::panic::catch_unwind(|| {
        // a size past i64::MAX is no block (the collector's byte counts are signed)
        if kind == 0 || kind > KIND_MAX || size > i64::MAX as u64 {
            return -1;
        }
        let Some(slot) = usize::try_from(type_id)
            .ok()
            .and_then(|i| TYPES.get(i))
            .filter(|s| s.ready.load(Ordering::Acquire))
        else {
            return -1;
        };
        // MALLOC and FREE are kept outside collection windows too (shadow records), as `emit`.
        let on = if kind <= 2 {
            state::plugins_tracking()
        } else {
            state::plugins_enabled()
        };
        if !on {
            return 1;
        }
        let mut g = guard::enter();
        // A FREE is emitted before the block is released (ABI): a before-stamp, as the
        // built-in free hooks take (a plain TSC read); anything else follows what the call did.
        let ts = if kind == 2 {
            clock::now_ns_before()
        } else {
            clock::now_ns()
        };
        if flags & EVENT_C_STACK != 0 && state::recording() {
            if let Some(g) = g.as_mut() {
                crate::stack::record_call_stack(g, ts, crate::stack::Skip::ProbeAndCaller);
            }
        }
        let id = type_id as usize;
        let mut buf = [0u8; 10 * MAX_VALUES];
        let n = match slot.nvalues.load(Ordering::Relaxed) as usize {
            0 => 0,
            _ if values.is_null() => 0,
            k => {
                // SAFETY: ABI contract: a non-NULL `values` holds one value per registered name.
                let v = unsafe { core::slice::from_raw_parts(values, k.min(MAX_VALUES)) };
                memscope_wire::encode_values(v, &mut buf)
            }
        };
        let rec = Record::Compact {
            ts,
            ty: id as u32,
            kind: kind as u8,
            addr: ptr,
            size,
            values: &buf[..n],
        };
        if !ensure_defined(id, slot, g.as_ref()) {
            // no stream to write into (stopped, full): the event counts as dropped
            crate::drops::count(&rec);
            return -1;
        }
        let ok = match &g {
            Some(g) => g.record(&rec),
            None => writer::record(&rec),
        };
        if ok {
            0
        } else {
            -1
        }
    })
    .unwrap_or(-1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(event_type: &core::ffi::CStr, values: &core::ffi::CStr) -> EventType {
        EventType {
            struct_size: EVENT_TYPE_V1_2_SIZE,
            device: u32::MAX - 1,
            flags: 0,
            reserved: 0,
            event_type: event_type.as_ptr(),
            name: core::ptr::null(),
            attrs: core::ptr::null(),
            value_names: values.as_ptr(),
        }
    }

    #[test]
    fn register_type_refuses_bad_value_names_and_emit_compact_bad_arguments() {
        for bad in [
            c",",
            c"a,",
            c"size",
            c"owner,b",
            c"a:b",
            c"a b",
            c"{a}",
            c"a,b,c,d,e",
        ] {
            let t = spec(c"T", bad);
            // SAFETY: a valid struct whose texts live for the call.
            let id = unsafe { host_register_type(&t) };
            assert_eq!(id, -1, "{bad:?}");
        }
        // SAFETY: as above.
        let id = unsafe { host_register_type(&spec(c"T", c"arena,bin")) };
        assert!(id >= 0);
        // SAFETY: NULL values; the arguments are checked before anything is read.
        unsafe {
            assert_eq!(
                host_emit_compact(id, 1, 0x10, u64::MAX, 0, core::ptr::null()),
                -1
            );
            assert_eq!(host_emit_compact(id, 0, 0x10, 8, 0, core::ptr::null()), -1);
            assert_eq!(host_emit_compact(id, 9, 0x10, 8, 0, core::ptr::null()), -1);
            assert_eq!(host_emit_compact(-1, 1, 0x10, 8, 0, core::ptr::null()), -1);
            assert_eq!(
                host_emit_compact(MAX_TYPES as i32, 1, 0x10, 8, 0, core::ptr::null()),
                -1
            );
            assert_eq!(host_register_type(core::ptr::null()), -1);
        }
    }
}
