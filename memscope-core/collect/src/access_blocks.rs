//! `allocation_id` on ACCESS rows: a bus layer that follows the live blocks of the memory rows
//! it sees and gives every ACCESS whose address lies in one of them that block's
//! `allocation_id` (seed table 2 lists it for ACCESS; msMemScope writes it on every memory row
//! and its `check_inefficient` groups a block's rows by it).
//!
//! * A block is `[addr, addr + size)` of a MALLOC row (a zero-size block covers its address),
//!   until its FREE (a synthetic `shadow:true` FREE ends it too).
//! * The block searched first is one of the pool named by the ACCESS's `type` Attr (`ATB`,
//!   `PTA`, …), then any framework pool (PTA, PTA_WORKSPACE, MindSpore, ATB, third-party
//!   types), then driver (HAL) memory, then pinned host memory — a framework tensor lives in a
//!   pool block, which lives in a HAL block, and the innermost owner is the one that answers
//!   (msMemScope only searches the named pool, so ATB tensors that torch's caching allocator
//!   handed out would go unmatched there).
//! * Same device only, unless the ACCESS has none (`N/A`): then any device.
//! * An ACCESS that already carries an `allocation_id` (a dump read back) keeps it.
//! * Blocks of the host allocator (HOST without `pinned`, HOST_MMAP) are not followed: no
//!   source reports accesses of them, and following every `malloc` would cost the collector.
//!
//! Memory: one map entry per live block of the followed allocators.

use std::collections::{BTreeMap, HashMap};

use memscope_core::bus::{BusCtx, BusError, Flow, Layer};
use memscope_core::event::{Attrs, Device, Event, EventKind, EventType};

/// Live block: end address (exclusive) and `allocation_id`.
type Blocks = BTreeMap<u64, (u64, u64)>;

/// The layer; place it after the collection filter and before the analyses and sinks.
#[derive(Default)]
pub struct AccessBlocks {
    live: HashMap<(Device, EventType), Blocks>,
    matched: u64,
    unmatched: u64,
}

/// Search rank of an allocator for an ACCESS whose `type` names `named`: lower first.
fn rank(t: EventType, named: Option<EventType>) -> u8 {
    if Some(t) == named {
        0
    } else if t.is_framework_pool() || matches!(t, EventType::Custom(_)) {
        1
    } else if t == EventType::Hal {
        2
    } else {
        3
    }
}

fn followed(ev: &Event) -> bool {
    if ev.memory().is_some_and(|m| m.account_only) {
        // its live account holds the block (one map per block)
        return false;
    }
    match ev.event_type {
        EventType::Host => ev.memory().is_some_and(|m| m.pinned),
        EventType::HostMmap => false,
        t => t.is_memory(),
    }
}

impl AccessBlocks {
    /// A layer with no live blocks.
    pub fn new() -> AccessBlocks {
        AccessBlocks::default()
    }

    /// ACCESS rows given an `allocation_id` so far, and those that matched no block.
    pub fn counts(&self) -> (u64, u64) {
        (self.matched, self.unmatched)
    }

    fn observe_memory(&mut self, ev: &Event) {
        let Some(m) = ev.memory() else { return };
        let addr = ev.ptr.unwrap_or(m.addr);
        match ev.kind {
            EventKind::Malloc => {
                let end = addr.saturating_add(m.size.max(1));
                self.live
                    .entry((ev.device, ev.event_type))
                    .or_default()
                    .insert(addr, (end, m.allocation_id));
            }
            EventKind::Free => {
                let key = (ev.device, ev.event_type);
                let done = self.live.get_mut(&key).and_then(|b| b.remove(&addr));
                if done.is_none() {
                    // a FREE without a device (2025 dumps) ends the block wherever it lives
                    for ((_, t), b) in self.live.iter_mut() {
                        if *t == ev.event_type && b.remove(&addr).is_some() {
                            break;
                        }
                    }
                }
                if self.live.get(&key).is_some_and(BTreeMap::is_empty) {
                    self.live.remove(&key);
                }
            }
            _ => {}
        }
    }

    /// The `allocation_id` of the block holding `addr` for an ACCESS on `device` naming `named`.
    fn find(&self, device: Device, addr: u64, named: Option<EventType>) -> Option<u64> {
        let mut best: Option<(u8, u64)> = None;
        for ((d, t), blocks) in &self.live {
            if device != Device::NotApplicable && *d != device {
                continue;
            }
            let r = rank(*t, named);
            if best.is_some_and(|(b, _)| b <= r) {
                continue;
            }
            if let Some((_, &(end, id))) = blocks.range(..=addr).next_back() {
                if addr < end {
                    best = Some((r, id));
                }
            }
        }
        best.map(|(_, id)| id)
    }
}

impl Layer for AccessBlocks {
    fn name(&self) -> &'static str {
        "access-blocks"
    }

    fn on_event(
        &mut self,
        ev: &mut Event,
        _ctx: &BusCtx,
        _: &mut Vec<Event>,
    ) -> Result<Flow, BusError> {
        match ev.kind {
            EventKind::Malloc | EventKind::Free if followed(ev) => self.observe_memory(ev),
            EventKind::Access => {
                let (device, ptr) = (ev.device, ev.ptr);
                if let Attrs::Access(a) = &mut ev.attrs {
                    if a.allocation_id.is_none() {
                        let named = a.pool.as_deref().and_then(EventType::parse);
                        a.allocation_id = ptr.and_then(|p| self.find(device, p, named));
                        if a.allocation_id.is_some() {
                            self.matched += 1;
                        } else {
                            self.unmatched += 1;
                        }
                    }
                }
            }
            _ => {}
        }
        Ok(Flow::Pass)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memscope_core::event::{AccessAttrs, MemoryAttrs};

    fn mem(kind: EventKind, t: EventType, dev: u32, addr: u64, size: u64, id: u64) -> Event {
        let mut e = Event::new(t, 1, 1, 1);
        e.kind = kind;
        e.device = Device::Npu(dev);
        e.ptr = Some(addr);
        e.attrs = Attrs::Memory(MemoryAttrs {
            allocation_id: id,
            addr,
            size,
            ..MemoryAttrs::default()
        });
        e
    }

    fn access(dev: Device, addr: u64, pool: &str) -> Event {
        let mut e = Event::new(EventType::Write, 1, 1, 1);
        e.device = dev;
        e.ptr = Some(addr);
        e.attrs = Attrs::Access(AccessAttrs {
            pool: Some(pool.to_owned()),
            ..AccessAttrs::default()
        });
        e
    }

    fn id_of(l: &mut AccessBlocks, ev: Event) -> Option<u64> {
        let mut out = Vec::new();
        l.feed(ev, &BusCtx::default(), &mut out).unwrap();
        match &out[0].attrs {
            Attrs::Access(a) => a.allocation_id,
            _ => None,
        }
    }

    #[test]
    fn an_access_gets_the_id_of_the_innermost_live_block_holding_its_address() {
        use EventKind::{Free, Malloc};
        let mut l = AccessBlocks::new();
        let ctx = BusCtx::default();
        let mut out = Vec::new();
        for e in [
            mem(Malloc, EventType::Hal, 0, 0x1000, 0x10000, 1),
            mem(Malloc, EventType::Pta, 0, 0x2000, 0x100, 2),
            mem(Malloc, EventType::Atb, 0, 0x3000, 0x100, 3),
            mem(Malloc, EventType::Pta, 1, 0x2000, 0x100, 4),
        ] {
            l.feed(e, &ctx, &mut out).unwrap();
        }
        let d0 = Device::Npu(0);
        assert_eq!(
            id_of(&mut l, access(d0, 0x2080, "ATB")),
            Some(2),
            "pool before HAL"
        );
        assert_eq!(id_of(&mut l, access(d0, 0x3000, "ATB")), Some(3));
        assert_eq!(
            id_of(&mut l, access(d0, 0x5000, "ATB")),
            Some(1),
            "HAL last"
        );
        assert_eq!(
            id_of(&mut l, access(Device::Npu(1), 0x2000, "PTA")),
            Some(4)
        );
        assert_eq!(id_of(&mut l, access(Device::Npu(1), 0x3000, "ATB")), None);
        l.feed(
            mem(Free, EventType::Pta, 0, 0x2000, 0x100, 2),
            &ctx,
            &mut out,
        )
        .unwrap();
        assert_eq!(id_of(&mut l, access(d0, 0x2080, "PTA")), Some(1), "freed");
        assert_eq!(l.counts(), (5, 1));
        let mut read_back = access(d0, 0x3000, "ATB");
        if let Attrs::Access(a) = &mut read_back.attrs {
            a.allocation_id = Some(77);
        }
        assert_eq!(
            id_of(&mut l, read_back),
            Some(77),
            "an id already there is kept"
        );
    }
}
