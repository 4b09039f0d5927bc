//! Blocks from before a collection window (issue 26, item 5; msMemScope's "shadow" blocks).
//!
//! Outside a collection window (`--collect-mode deferred` before `start()`, between `stop()`
//! and the next `start()`, after the Python API's `config()`) the probe's memory hooks keep
//! recording allocations and frees, without stacks, each announced by a `Shadow` record. They
//! are typed like any other record — so pool totals, HAL sizes and allocation ids stay right —
//! and then held here instead of written:
//!
//! * a block allocated outside a window is held; freed outside a window, it disappears;
//! * when a window opens (`START_TRACE`), every block still held is written once, right after
//!   the `START_TRACE` row, as a MALLOC stamped with the window's start and marked
//!   `shadow:true` (msMemScope's mark; no `used`/`total` figures, as msMemScope writes none on
//!   such rows) — so a FREE inside the window always has its MALLOC;
//! * a block allocated inside a window and freed outside one gets its FREE row (at its own
//!   time, an ordinary FREE), so the MALLOC is not reported as leaked;
//! * the written MALLOCs of held blocks take no part in the leak, decompose and inefficient
//!   analyses (`Event::is_history_malloc`), as in msMemScope; memory levels count them.
//! * a shadow record that lands inside a window by its time stamp (another thread raced the
//!   `start()`) counts as inside; a held block touched by a FREE inside a window (the same race)
//!   is written just before that FREE.
//!
//! With the HOST fast path (HOST rows neither written nor analysed, only summarised) the HOST
//! blocks from outside windows are not accounted at all — the HOST summaries leave history
//! blocks out either way — while the frees outside windows of blocks from a window are.

use memscope_core::event::{Event, EventKind, EventType};
use memscope_wire::Record;
use std::collections::HashMap;

/// What identifies a block across its MALLOC and FREE events.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Key {
    event_type: EventType,
    /// Pinned host memory and CPU tensors share addresses with HOST adapter blocks.
    flavour: u8,
    ptr: u64,
}

impl Key {
    fn of(ev: &Event) -> Option<Key> {
        let m = ev.memory()?;
        Some(Key {
            event_type: ev.event_type,
            flavour: u8::from(m.pinned) | (u8::from(m.cpu_tensor) << 1),
            ptr: ev.ptr.unwrap_or(m.addr),
        })
    }
}

struct Held {
    seq: u64,
    image: usize,
    ev: Event,
}

/// What to do with an event of a record made inside a window.
#[derive(Debug, PartialEq)]
pub enum Touch {
    /// Write it.
    Pass,
    /// Write this held block's MALLOC first, then the event.
    PromoteFirst(Box<Event>),
    /// A synthetic FREE (exec, reused address) of a held block: neither is written.
    Drop,
}

/// The shadow state of one process.
#[derive(Default)]
pub struct History {
    /// (image, thread) → time stamp of a `Shadow` record waiting for its record.
    pending: HashMap<(usize, u32), u64>,
    /// Start of the open window, when a `START_TRACE` was seen and no `STOP_TRACE` since.
    open_since: Option<u64>,
    held: HashMap<Key, Held>,
    /// HOST fast path: addresses of blocks allocated outside a window, still live.
    host: std::collections::HashSet<u64>,
    seq: u64,
}

/// Marks `ev` as written for a block seen outside a window: `shadow:true`, no figures.
fn mark(mut ev: Event) -> Event {
    if let Some(m) = ev.memory_mut() {
        m.shadow = true;
        m.used = None;
        m.total = None;
        m.process_used = None;
        m.device_used = None;
    }
    ev
}

impl History {
    /// A `Shadow { ts }` record of thread `tid`: its next record is a shadow record.
    pub fn marker(&mut self, image: usize, tid: u32, ts: u64) {
        self.pending.insert((image, tid), ts);
    }

    /// Whether the record of thread `tid` stamped `ts` is a shadow record (consumes its marker;
    /// a marker of an earlier time stamp, whose record was dropped, is discarded).
    pub fn is_shadow(&mut self, image: usize, tid: u32, ts: Option<u64>) -> bool {
        if self.pending.is_empty() {
            return false;
        }
        let Some(&pts) = self.pending.get(&(image, tid)) else {
            return false;
        };
        match ts {
            Some(t) if t == pts => {
                self.pending.remove(&(image, tid));
                // a record stamped inside the open window counts as inside (a racing thread)
                self.open_since.is_none_or(|s| t < s)
            }
            Some(t) if t > pts => {
                self.pending.remove(&(image, tid));
                false
            }
            _ => false,
        }
    }

    /// A window closed (`STOP_TRACE`).
    pub fn closed(&mut self) {
        self.open_since = None;
    }

    /// A window opened at `ts` (`START_TRACE`): the MALLOC rows of the blocks held for image
    /// `image`, in allocation order, stamped `ts`. Blocks of earlier images died with them.
    pub fn opened(&mut self, image: usize, ts: u64) -> Vec<Event> {
        self.open_since = Some(ts);
        // the HOST fast path does not account blocks from outside windows
        self.host.clear();
        let mut held: Vec<Held> = self.held.drain().map(|(_, h)| h).collect();
        held.retain(|h| h.image == image);
        held.sort_by_key(|h| h.seq);
        held.into_iter()
            .map(|h| {
                let mut ev = mark(h.ev);
                ev.ts_ns = ts;
                ev
            })
            .collect()
    }

    /// An event typed from a shadow record: held, dropped, or (a FREE of a block allocated
    /// inside a window) returned, to be written.
    pub fn divert(&mut self, image: usize, ev: Event) -> Option<Event> {
        let key = Key::of(&ev)?;
        match ev.kind {
            EventKind::Malloc => {
                self.seq += 1;
                self.held.insert(
                    key,
                    Held {
                        seq: self.seq,
                        image,
                        ev,
                    },
                );
                None
            }
            EventKind::Free => match self.held.remove(&key) {
                Some(_) => None,
                None => Some(ev),
            },
            _ => None,
        }
    }

    /// An event of a record made inside a window (see [`Touch`]).
    pub fn touch(&mut self, image: usize, ev: &Event) -> Touch {
        if self.held.is_empty() || !matches!(ev.kind, EventKind::Malloc | EventKind::Free) {
            return Touch::Pass;
        }
        let Some(key) = Key::of(ev) else {
            return Touch::Pass;
        };
        let Some(h) = self.held.remove(&key) else {
            return Touch::Pass;
        };
        if ev.kind == EventKind::Malloc || h.image != image {
            // the address was reused: what was held is gone
            return Touch::Pass;
        }
        if ev.memory().is_some_and(|m| m.shadow) {
            return Touch::Drop;
        }
        let mut m = mark(h.ev);
        m.ts_ns = ev.ts_ns;
        Touch::PromoteFirst(Box::new(m))
    }

    /// A HOST record of the fast path made outside a window: an allocation is remembered (not
    /// accounted); a free of such a block drops it; a free of a block from a window is
    /// returned, to be accounted.
    pub fn divert_host<'r>(&mut self, rec: &'r Record<Box<[u8]>>) -> Option<&'r Record<Box<[u8]>>> {
        match *rec {
            Record::Malloc { addr, .. } => {
                self.host.insert(addr);
                None
            }
            Record::Free { addr, .. } if self.host.remove(&addr) => None,
            _ => Some(rec),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memscope_core::event::{Attrs, Device, MemoryAttrs};

    fn block(kind: EventKind, ts: u64, ptr: u64, synthetic: bool) -> Event {
        let mut e = Event::new(EventType::Pta, ts, 1, 2);
        e.kind = kind;
        e.device = Device::Npu(0);
        e.ptr = Some(ptr);
        e.attrs = Attrs::Memory(MemoryAttrs {
            allocation_id: ptr,
            addr: ptr,
            size: 64,
            used: Some(64),
            total: Some(128),
            shadow: synthetic,
            ..MemoryAttrs::default()
        });
        e
    }

    #[test]
    fn blocks_live_when_a_window_opens_are_written_once_at_its_start_marked_shadow() {
        let mut h = History::default();
        assert_eq!(
            h.divert(0, block(EventKind::Malloc, 10, 0x100, false)),
            None
        );
        assert_eq!(
            h.divert(0, block(EventKind::Malloc, 11, 0x200, false)),
            None
        );
        assert_eq!(
            h.divert(0, block(EventKind::Malloc, 12, 0x300, false)),
            None
        );
        // born and dead outside the window: never written
        assert_eq!(h.divert(0, block(EventKind::Free, 13, 0x200, false)), None);
        let rows = h.opened(0, 50);
        let got: Vec<(u64, u64, bool, Option<i64>)> = rows
            .iter()
            .map(|e| {
                let m = e.memory().unwrap();
                (e.ptr.unwrap(), e.ts_ns, m.shadow, m.used)
            })
            .collect();
        assert_eq!(got, vec![(0x100, 50, true, None), (0x300, 50, true, None)]);
        assert!(h.opened(0, 60).is_empty(), "written once");
        // their frees inside the window are ordinary rows
        assert_eq!(
            h.touch(0, &block(EventKind::Free, 70, 0x100, false)),
            Touch::Pass
        );
    }

    #[test]
    fn a_free_outside_a_window_of_a_block_from_a_window_is_written_as_it_happened() {
        let mut h = History::default();
        let free = block(EventKind::Free, 90, 0x400, false);
        assert_eq!(h.divert(0, free.clone()), Some(free));
    }

    #[test]
    fn shadow_markers_pair_with_the_next_record_of_their_thread_and_respect_the_open_window() {
        let mut h = History::default();
        h.marker(0, 7, 100);
        assert!(!h.is_shadow(0, 8, Some(100)), "another thread");
        assert!(h.is_shadow(0, 7, Some(100)));
        assert!(!h.is_shadow(0, 7, Some(100)), "consumed");
        h.marker(0, 7, 110);
        assert!(!h.is_shadow(0, 7, Some(120)), "its record was dropped");
        assert!(!h.is_shadow(0, 7, Some(110)), "discarded");
        // a window opened at 200: a racing shadow record stamped 205 is inside it
        h.opened(0, 200);
        h.marker(0, 7, 205);
        assert!(!h.is_shadow(0, 7, Some(205)));
        h.closed();
        h.marker(0, 7, 305);
        assert!(h.is_shadow(0, 7, Some(305)));
    }

    #[test]
    fn a_window_free_of_a_held_block_writes_the_block_first_and_synthetic_frees_drop_it() {
        let mut h = History::default();
        h.divert(0, block(EventKind::Malloc, 10, 0x100, false));
        h.divert(0, block(EventKind::Malloc, 11, 0x200, false));
        match h.touch(0, &block(EventKind::Free, 40, 0x100, false)) {
            Touch::PromoteFirst(m) => {
                assert_eq!((m.kind, m.ts_ns), (EventKind::Malloc, 40));
                assert!(m.memory().unwrap().shadow);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            h.touch(0, &block(EventKind::Free, 41, 0x200, true)),
            Touch::Drop
        );
        assert!(h.opened(0, 50).is_empty());
    }

    #[test]
    fn blocks_of_an_image_replaced_by_exec_are_not_written() {
        let mut h = History::default();
        h.divert(0, block(EventKind::Malloc, 10, 0x100, false));
        h.divert(1, block(EventKind::Malloc, 20, 0x200, false));
        let rows = h.opened(1, 30);
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].ptr, Some(0x200));
    }

    #[test]
    fn host_fast_path_blocks_from_outside_windows_are_not_accounted() {
        let mut h = History::default();
        let m = |ts, addr| Record::Malloc {
            ts,
            addr,
            size: 32,
            stack: 0,
        };
        let f = |ts, addr| Record::Free { ts, addr };
        assert!(h.divert_host(&m(1, 0x10)).is_none());
        assert!(h.divert_host(&m(2, 0x20)).is_none());
        assert!(
            h.divert_host(&f(3, 0x20)).is_none(),
            "born and dead outside"
        );
        assert!(
            h.divert_host(&f(4, 0x90)).is_some(),
            "a window block's free is accounted"
        );
        h.opened(0, 9);
        assert!(
            h.divert_host(&f(10, 0x10)).is_some(),
            "forgotten at the window's start"
        );
    }
}
