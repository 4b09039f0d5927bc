//! pymalloc's arenas on the HOST adapter's mapping rows: with `--adapters host,pymem` and
//! `MEMSCOPE_HOST_MMAP=1`, the `HOST_MMAP` MALLOC row of an `mmap` that pymalloc made for an
//! arena gets the Attr pair `pymalloc_arena:true`, so the mapped memory that holds Python
//! objects is told apart from the rest (and never summed with the objects twice).
//!
//! The arena's `PYMEM_ARENA` MALLOC (the pymem plugin's, emitted once pymalloc's arena
//! allocator returned) is the event right after that `mmap`'s row, on the same thread, with the
//! same address. The layer holds a `HOST_MMAP` MALLOC back by at most one bus event: when the
//! next event is that arena's MALLOC the pair is added to the held row; either way both go on in
//! their order (rows stay in ID order). A row still held when the stream ends is passed on by
//! [`Layer::finish`]. The layer sits with the summaries, before the write filter, so it sees
//! the `PYMEM_ARENA` rows, which are account-only (written with `--host-rows` only). A held row
//! goes on in the step context of the event after it (a step boundary right after an `mmap`
//! moves the row into that step for `--steps`).

use memscope_collect::config::RunConfig;
use memscope_core::bus::{BusCtx, BusError, Flow, Layer, ReportSection};
use memscope_core::event::{Event, EventKind, EventType};

/// The Attr key added to an arena's `HOST_MMAP` MALLOC row.
pub const KEY: &str = "pymalloc_arena";

/// The layer, when the run selects both the HOST and the pymem adapters (none otherwise).
pub fn layers(cfg: &RunConfig) -> Vec<Box<dyn Layer>> {
    let selection = cfg.selection();
    let on = |name| selection.adapters.iter().any(|d| d.name == name);
    if on("host") && on("pymem") {
        vec![Box::new(PymallocArenas::default())]
    } else {
        Vec::new()
    }
}

/// Marks the `HOST_MMAP` MALLOC row of each pymalloc arena (see the module documentation).
#[derive(Default)]
pub struct PymallocArenas {
    /// A `HOST_MMAP` MALLOC waiting for the event after it.
    held: Option<Event>,
}

fn is_mapping(ev: &Event) -> bool {
    ev.kind == EventKind::Malloc && ev.event_type == EventType::HostMmap
}

/// Whether `ev` is the `PYMEM_ARENA` MALLOC of the mapping `held`: same thread, same address.
fn is_its_arena(ev: &Event, held: &Event) -> bool {
    ev.kind == EventKind::Malloc
        && ev.event_type.as_str() == "PYMEM_ARENA"
        && ev.tid == held.tid
        && ev.ptr.is_some()
        && ev.ptr == held.ptr
}

impl Layer for PymallocArenas {
    fn name(&self) -> &'static str {
        "pymalloc-arenas"
    }

    fn on_event(
        &mut self,
        ev: &mut Event,
        _: &BusCtx,
        out: &mut Vec<Event>,
    ) -> Result<Flow, BusError> {
        if let Some(mut held) = self.held.take() {
            if is_its_arena(ev, &held) {
                if let Some(m) = held.memory_mut() {
                    m.extra.push((KEY.to_owned(), "true".to_owned()));
                }
            }
            out.push(held);
        }
        if is_mapping(ev) {
            self.held = Some(ev.take());
            Ok(Flow::Stop)
        } else {
            Ok(Flow::Pass)
        }
    }

    fn finish(
        &mut self,
        _: &BusCtx,
        out: &mut Vec<Event>,
        _: &mut Vec<ReportSection>,
    ) -> Result<(), BusError> {
        out.extend(self.held.take());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memscope_core::event::{Attrs, Device, MemoryAttrs};

    fn malloc(id: u64, ty: EventType, tid: u32, addr: u64) -> Event {
        let mut e = Event::new(ty, id, 1, tid);
        e.id = id;
        e.kind = EventKind::Malloc;
        e.device = Device::Cpu;
        e.ptr = Some(addr);
        e.attrs = Attrs::Memory(MemoryAttrs {
            allocation_id: id,
            addr,
            size: 1 << 20,
            ..MemoryAttrs::default()
        });
        e
    }

    fn arena(id: u64, tid: u32, addr: u64) -> Event {
        malloc(id, EventType::custom("PYMEM_ARENA"), tid, addr)
    }

    fn mapping(id: u64, tid: u32, addr: u64) -> Event {
        malloc(id, EventType::HostMmap, tid, addr)
    }

    /// The events that come out, in order, with whether each carries the pair.
    fn run(events: Vec<Event>) -> Vec<(u64, bool)> {
        let mut l = PymallocArenas::default();
        let ctx = BusCtx::default();
        let mut out = Vec::new();
        for e in events {
            l.feed(e, &ctx, &mut out).unwrap();
        }
        l.finish(&ctx, &mut out, &mut Vec::new()).unwrap();
        out.iter()
            .map(|e| {
                let marked = e
                    .memory()
                    .is_some_and(|m| m.extra.iter().any(|(k, v)| k == KEY && v == "true"));
                (e.id, marked)
            })
            .collect()
    }

    #[test]
    fn a_mapping_followed_by_its_arena_on_the_same_thread_is_marked_and_order_is_kept() {
        let got = run(vec![mapping(1, 7, 0x1000), arena(2, 7, 0x1000)]);
        assert_eq!(got, [(1, true), (2, false)]);
    }

    #[test]
    fn a_mapping_followed_by_anything_else_passes_on_unmarked() {
        // another thread's arena, another address, another event in between
        let got = run(vec![
            mapping(1, 7, 0x1000),
            arena(2, 8, 0x1000),
            mapping(3, 7, 0x2000),
            arena(4, 7, 0x3000),
            mapping(5, 7, 0x4000),
            malloc(6, EventType::custom("PYMEM"), 7, 0x4030),
            arena(7, 7, 0x4000),
        ]);
        assert_eq!(
            got,
            [
                (1, false),
                (2, false),
                (3, false),
                (4, false),
                (5, false),
                (6, false),
                (7, false)
            ]
        );
    }

    #[test]
    fn back_to_back_mappings_are_each_held_one_event_and_the_last_is_marked() {
        let got = run(vec![
            mapping(1, 7, 0x1000),
            mapping(2, 7, 0x2000),
            arena(3, 7, 0x2000),
        ]);
        assert_eq!(got, [(1, false), (2, true), (3, false)]);
    }

    #[test]
    fn a_mapping_still_held_at_the_end_of_the_stream_is_passed_on_by_finish() {
        let got = run(vec![arena(1, 7, 0x1000), mapping(2, 7, 0x1000)]);
        assert_eq!(got, [(1, false), (2, false)]);
    }

    #[test]
    fn a_free_of_a_mapping_is_not_held() {
        let mut free = mapping(1, 7, 0x1000);
        free.kind = EventKind::Free;
        let mut l = PymallocArenas::default();
        let mut out = Vec::new();
        l.feed(free, &BusCtx::default(), &mut out).unwrap();
        assert_eq!(out.len(), 1);
    }

    #[test]
    fn the_layer_is_on_only_when_host_and_pymem_are_both_selected() {
        crate::builtin::install();
        let cfg = |adapters: &str| {
            memscope_collect::config::RawOptions {
                adapters: Some(adapters.into()),
                ..Default::default()
            }
            .validate(&std::env::temp_dir())
            .unwrap()
        };
        assert_eq!(layers(&cfg("host,pymem")).len(), 1);
        assert!(layers(&cfg("pymem")).is_empty());
        assert!(layers(&cfg("host")).is_empty());
    }
}
