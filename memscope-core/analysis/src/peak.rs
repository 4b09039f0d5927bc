//! What was live at the peak: per device and allocator (Event Type), the blocks live when the
//! allocator's live bytes were highest, and at the end of the run, summed by Python stack, by C
//! stack, by owner and by the op or kernel they were allocated under, with the largest blocks.
//!
//! * Blocks, owners and the peak follow decompose ([`super::decompose`]): a block is keyed by
//!   allocator and address, its owner is [`owner_label`] (or the chain of a later
//!   `MEMORY_OWNER` row, [`memscope_core::roles`]), a `shadow:true` FREE does not end it,
//!   and the peak is the first moment the allocator's live bytes were highest.
//! * The live set at the peak is rebuilt at the end without copying it at every new peak: the
//!   peak is the state after the event with ID `peak_id`, so it holds the blocks still live whose
//!   MALLOC ID is ≤ `peak_id`, plus those freed after the peak that were live at it (kept in a
//!   list emptied at each new peak). Each block enters that list at most once, so the cost stays
//!   O(1) amortised per event and memory O(live blocks).
//! * Stacks, owners and op names are interned (one copy of each distinct text).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use memscope_core::bus::{BusCtx, BusError, Flow, Layer, ReportSection};
use memscope_core::event::{Device, Event, EventKind, EventType};

use super::decompose::owner_label;
use super::ops::{OpTracker, Under};

/// Largest blocks kept per allocator and moment.
pub const MAX_TOP_BLOCKS: usize = 100;

/// A block of a live set. Text fields are indices into [`PeakResult::texts`] (0: none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LiveBlock {
    /// ID of its MALLOC row.
    pub id: u64,
    /// Timestamp of its MALLOC row, ns since the epoch.
    pub ts_ns: u64,
    /// Start address.
    pub addr: u64,
    /// Bytes.
    pub size: u64,
    /// Owner chain text.
    pub owner: u32,
    /// Name of the op or kernel it was allocated under.
    pub under: u32,
    /// Python stack text.
    pub py: u32,
    /// C stack text.
    pub c: u32,
}

/// Bytes and blocks of one group of a live set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Group {
    /// Bytes live.
    pub bytes: u64,
    /// Blocks live.
    pub blocks: u64,
}

/// The blocks live at one moment, summed up.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LiveSet {
    /// Bytes and blocks in all.
    pub total: Group,
    /// By Python stack text (index into [`PeakResult::texts`], 0 = no stack).
    pub by_py: Vec<(u32, Group)>,
    /// By C stack text.
    pub by_c: Vec<(u32, Group)>,
    /// By the pair (Python stack text, C stack text): what the sites are made of
    /// ([`crate::attribution`]).
    pub by_stacks: Vec<((u32, u32), Group)>,
    /// By owner text.
    pub by_owner: Vec<(u32, Group)>,
    /// By op/kernel name.
    pub by_under: Vec<(u32, Group)>,
    /// The largest blocks (at most [`MAX_TOP_BLOCKS`]), largest first.
    pub top: Vec<LiveBlock>,
}

/// Peak and end of one allocator on one device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AllocatorPeak {
    /// Device.
    pub device: Device,
    /// Allocator.
    pub pool: EventType,
    /// ID of the event after which the live bytes were highest.
    pub peak_id: u64,
    /// Its timestamp, ns since the epoch.
    pub peak_ts_ns: u64,
    /// Live at the peak.
    pub peak: LiveSet,
    /// Live at the end of the run.
    pub end: LiveSet,
}

/// Result of the analysis for one process.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PeakResult {
    /// Interned texts; index 0 is the empty text.
    pub texts: Vec<Arc<str>>,
    /// Allocators by device, then Event Type.
    pub allocators: Vec<AllocatorPeak>,
}

impl PeakResult {
    /// The text of an index (empty for 0 or out of range).
    pub fn text(&self, i: u32) -> &str {
        self.texts.get(i as usize).map_or("", |t| t)
    }
}

struct Block {
    device: Device,
    b: LiveBlock,
}

#[derive(Default)]
struct Allocator {
    total: i64,
    peak: i64,
    peak_id: u64,
    peak_ts: u64,
    seen_peak: bool,
    freed_since_peak: Vec<LiveBlock>,
}

/// The analysis as a bus layer (passes events on unchanged).
pub struct PeakLayer {
    ops: OpTracker,
    ids: HashMap<Arc<str>, u32>,
    texts: Vec<Arc<str>>,
    live: HashMap<(EventType, u64), Block>,
    alloc: BTreeMap<(Device, EventType), Allocator>,
}

impl Default for PeakLayer {
    fn default() -> Self {
        PeakLayer::new()
    }
}

impl PeakLayer {
    /// A fresh layer.
    pub fn new() -> PeakLayer {
        let empty: Arc<str> = Arc::from("");
        PeakLayer {
            ops: OpTracker::default(),
            ids: HashMap::from([(empty.clone(), 0)]),
            texts: vec![empty],
            live: HashMap::new(),
            alloc: BTreeMap::new(),
        }
    }

    fn intern(&mut self, s: Option<&str>) -> u32 {
        let s = s.unwrap_or("");
        if let Some(&i) = self.ids.get(s) {
            return i;
        }
        let a: Arc<str> = Arc::from(s);
        let i = self.texts.len() as u32;
        self.texts.push(a.clone());
        self.ids.insert(a, i);
        i
    }

    fn remove(&mut self, key: (EventType, u64)) {
        if let Some(old) = self.live.remove(&key) {
            let a = self.alloc.entry((old.device, key.0)).or_default();
            a.total -= old.b.size as i64;
            if a.seen_peak && old.b.id <= a.peak_id {
                a.freed_since_peak.push(old.b);
            }
        }
    }

    fn observe(&mut self, ev: &Event) {
        self.ops.observe(ev);
        if let Some(tag) = memscope_core::roles::OwnerTag::from_event(ev) {
            // an owner given after the MALLOC is the block's owner for its whole life
            let owner = self.intern(Some(&tag.owner));
            if let Some(b) = self.live.get_mut(&(tag.pool, tag.addr)) {
                b.b.owner = owner;
            }
            return;
        }
        let Some(m) = ev.memory() else { return };
        let addr = ev.ptr.unwrap_or(m.addr);
        let key = (ev.event_type, addr);
        match ev.kind {
            EventKind::Malloc if ev.device != Device::NotApplicable => {
                self.remove(key);
                let under = match self.ops.label(ev) {
                    Under::Op(n) | Under::Kernel(_, Some(n)) => self.intern(Some(&n)),
                    Under::Kernel(_, None) => self.intern(Some("kernel")),
                    Under::Nothing => 0,
                };
                let owner = owner_label(ev);
                let b = LiveBlock {
                    id: ev.id,
                    ts_ns: ev.ts_ns,
                    addr,
                    size: m.size,
                    owner: self.intern(Some(&owner)),
                    under,
                    py: self.intern(ev.py_stack.as_deref()),
                    c: self.intern(ev.c_stack.as_deref()),
                };
                let a = self.alloc.entry((ev.device, ev.event_type)).or_default();
                a.total += m.size as i64;
                if a.total > a.peak || !a.seen_peak {
                    a.peak = a.total;
                    a.peak_id = ev.id;
                    a.peak_ts = ev.ts_ns;
                    a.seen_peak = true;
                    a.freed_since_peak.clear();
                }
                self.live.insert(
                    key,
                    Block {
                        device: ev.device,
                        b,
                    },
                );
            }
            EventKind::Free if !m.shadow => self.remove(key),
            _ => {}
        }
    }

    /// The result so far: the live sets at each allocator's peak and now.
    pub fn result(&self) -> PeakResult {
        let mut at_peak: BTreeMap<(Device, EventType), Vec<LiveBlock>> = BTreeMap::new();
        let mut at_end: BTreeMap<(Device, EventType), Vec<LiveBlock>> = BTreeMap::new();
        for ((pool, _), blk) in &self.live {
            let k = (blk.device, *pool);
            let peak_id = self.alloc.get(&k).map_or(0, |a| a.peak_id);
            if blk.b.id <= peak_id {
                at_peak.entry(k).or_default().push(blk.b);
            }
            at_end.entry(k).or_default().push(blk.b);
        }
        let allocators = self
            .alloc
            .iter()
            .filter(|(_, a)| a.seen_peak)
            .map(|(k, a)| {
                let mut p = at_peak.remove(k).unwrap_or_default();
                p.extend_from_slice(&a.freed_since_peak);
                AllocatorPeak {
                    device: k.0,
                    pool: k.1,
                    peak_id: a.peak_id,
                    peak_ts_ns: a.peak_ts,
                    peak: summarise(p),
                    end: summarise(at_end.remove(k).unwrap_or_default()),
                }
            })
            .collect();
        PeakResult {
            texts: self.texts.clone(),
            allocators,
        }
    }
}

fn summarise(mut blocks: Vec<LiveBlock>) -> LiveSet {
    fn group<K: std::hash::Hash + Eq + Ord + Copy>(
        blocks: &[LiveBlock],
        key: impl Fn(&LiveBlock) -> K,
    ) -> Vec<(K, Group)> {
        let mut m: HashMap<K, Group> = HashMap::new();
        for b in blocks {
            let g = m.entry(key(b)).or_default();
            g.bytes += b.size;
            g.blocks += 1;
        }
        let mut v: Vec<(K, Group)> = m.into_iter().collect();
        v.sort_by(|a, b| b.1.bytes.cmp(&a.1.bytes).then(a.0.cmp(&b.0)));
        v
    }
    let total = Group {
        bytes: blocks.iter().map(|b| b.size).sum(),
        blocks: blocks.len() as u64,
    };
    let set = LiveSet {
        total,
        by_py: group(&blocks, |b| b.py),
        by_c: group(&blocks, |b| b.c),
        by_stacks: group(&blocks, |b| (b.py, b.c)),
        by_owner: group(&blocks, |b| b.owner),
        by_under: group(&blocks, |b| b.under),
        top: Vec::new(),
    };
    blocks.sort_by(|a, b| b.size.cmp(&a.size).then(a.id.cmp(&b.id)));
    blocks.truncate(MAX_TOP_BLOCKS);
    LiveSet { top: blocks, ..set }
}

impl Layer for PeakLayer {
    fn name(&self) -> &'static str {
        "peak"
    }

    fn on_event(
        &mut self,
        ev: &mut Event,
        _ctx: &BusCtx,
        _: &mut Vec<Event>,
    ) -> Result<Flow, BusError> {
        self.observe(ev);
        Ok(Flow::Pass)
    }

    fn finish(
        &mut self,
        ctx: &BusCtx,
        _out: &mut Vec<Event>,
        report: &mut Vec<ReportSection>,
    ) -> Result<(), BusError> {
        let r = self.result();
        let mut lines = Vec::new();
        for a in &r.allocators {
            lines.push(format!(
                "Device {} {}: peak {} bytes in {} block(s) at ID {}, {} bytes in {} block(s) at the end",
                a.device.to_text(),
                a.pool.as_str(),
                a.peak.total.bytes,
                a.peak.total.blocks,
                a.peak_id,
                a.end.total.bytes,
                a.end.total.blocks
            ));
        }
        if lines.is_empty() {
            lines.push("No MALLOC rows on any device.".to_owned());
        }
        let sfx = ctx.pid.map_or(String::new(), |p| format!(" (pid {p})"));
        report.push(ReportSection {
            title: format!("Live at the peak{sfx}"),
            lines,
            full: None,
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memscope_core::event::{Attrs, MemoryAttrs};

    fn mem(id: u64, kind: EventKind, addr: u64, size: u64, stack: &str) -> Event {
        let mut e = Event::new(EventType::Host, id, 1, 1);
        e.id = id;
        e.kind = kind;
        e.device = Device::Cpu;
        e.ptr = Some(addr);
        e.c_stack = (!stack.is_empty()).then(|| stack.to_owned());
        e.attrs = Attrs::Memory(MemoryAttrs {
            addr,
            size,
            ..MemoryAttrs::default()
        });
        e
    }

    #[test]
    fn the_live_set_at_the_peak_includes_blocks_freed_after_it_and_not_those_allocated_after() {
        let mut l = PeakLayer::new();
        let evs = [
            mem(1, EventKind::Malloc, 0x10, 100, "f\nmain"),
            mem(2, EventKind::Malloc, 0x20, 50, "g\nmain"),
            mem(3, EventKind::Free, 0x10, 100, ""), // the peak (150) was after ID 2
            mem(4, EventKind::Malloc, 0x30, 60, "h\nmain"),
            mem(5, EventKind::Malloc, 0x40, 20, "h\nmain"),
        ];
        for e in evs {
            l.observe(&e);
        }
        let r = l.result();
        assert_eq!(r.allocators.len(), 1);
        let a = &r.allocators[0];
        assert_eq!(
            (a.peak_id, a.peak.total.bytes, a.peak.total.blocks),
            (2, 150, 2)
        );
        let top: Vec<u64> = a.peak.top.iter().map(|b| b.id).collect();
        assert_eq!(top, vec![1, 2]);
        assert_eq!(r.text(a.peak.by_c[0].0), "f\nmain");
        assert_eq!((a.end.total.bytes, a.end.total.blocks), (130, 3));
        assert_eq!(r.text(a.end.by_c[0].0), "h\nmain");
        assert_eq!(
            a.end.by_c[0].1,
            Group {
                bytes: 80,
                blocks: 2
            }
        );
        // a new, higher peak empties the list of blocks freed since the old one
        let mut l2 = PeakLayer::new();
        for e in [
            mem(1, EventKind::Malloc, 0x10, 100, ""),
            mem(2, EventKind::Free, 0x10, 100, ""),
            mem(3, EventKind::Malloc, 0x20, 300, ""),
        ] {
            l2.observe(&e);
        }
        let a = &l2.result().allocators[0];
        assert_eq!(
            (a.peak_id, a.peak.total.blocks, a.peak.total.bytes),
            (3, 1, 300)
        );
    }

    #[test]
    fn shadow_frees_keep_blocks_live_at_the_end() {
        let mut l = PeakLayer::new();
        l.observe(&mem(1, EventKind::Malloc, 0x10, 8, ""));
        let mut f = mem(2, EventKind::Free, 0x10, 8, "");
        if let Some(m) = f.memory_mut() {
            m.shadow = true;
        }
        l.observe(&f);
        assert_eq!(l.result().allocators[0].end.total.blocks, 1);
    }
}
