//! The allocator of one device as memory_viz sees it: segments (device reservations) holding
//! blocks (pool allocations), replayed from the dump's MALLOC/FREE rows into trace entries, and
//! the final state written as `segments`.
//!
//! Rules that keep every view of the viewer consistent (its "Allocator State History" replays
//! the trace backwards from `segments` and crashes on a block outside any segment or a
//! `free_requested` of an unknown block):
//!
//! * Pool rows (PTA, PTA_WORKSPACE, MindSpore, ATB and plugin pools) are blocks: MALLOC →
//!   `alloc`; FREE of a live block → `free_requested` + `free_completed` (the free's own stack
//!   if it has one, else the allocation's). A FREE marked `shadow:true` (msMemScope closes every
//!   block at exit with one) does not end the block: it stays in the final state.
//! * [`Mode::Reservations`]: HAL rows are the segments (`segment_alloc` / `segment_free`). Every
//!   block must lie inside a live segment; the first that does not ends this mode
//!   ([`Step::Violation`]) and the device is written again in [`Mode::Synthetic`]. A segment
//!   freed with blocks still inside first frees them.
//! * [`Mode::Synthetic`] (PyTorch's own fallback for traces without segments): no segment
//!   entries; one segment spans every address the trace touches, and a FREE of a block never
//!   allocated in the trace becomes a lone `free_completed` (drawn as allocated before
//!   recording).
//! * A block overlapping a live one cannot be drawn: a new allocation at the start of a live
//!   block of the same pool replaces it (its FREE was lost), any other overlap (a pool carving
//!   blocks out of another pool's block) is left out with its FREE, and counted.
//! * `OOM_Snapshot` rows become `oom` entries (`device_free` from the row, the requested size from
//!   the `OOM_TRIGGER` row that follows it, when present).
//! * Each trace ends with a `snapshot` entry (the moment `segments` describes), whose category
//!   is `"unknown"`: the viewer crashes when categories are used and `"unknown"` is not one.

use std::collections::{BTreeMap, HashSet};
use std::io;

use memscope_core::event::{Attrs, Device, Event, EventKind, EventType};

use super::doc::{Category, Doc, Entry, FramesArg, FramesRef, UNKNOWN};
use super::pickle::{Sink, BATCH};

/// How segments are made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// From the captured device reservations (HAL rows).
    Reservations,
    /// One synthetic segment over every address used.
    Synthetic,
}

/// Outcome of one event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Written (or nothing to write).
    Ok,
    /// A block outside every segment: [`Mode::Reservations`] does not hold for this device.
    Violation,
}

/// Rows that could not be drawn as they are, per device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Pool blocks replaced by a new allocation at their address (their FREE was missing).
    pub replaced: u64,
    /// Allocations left out because they overlap a live block of another pool.
    pub overlapping: u64,
    /// FREE rows of blocks the trace never allocated, left out (reservation mode).
    pub unknown_frees: u64,
    /// Zero-byte allocations left out.
    pub zero_size: u64,
    /// Trace entries written.
    pub entries: u64,
}

struct Block {
    size: u64,
    pool: EventType,
    frames: FramesRef,
    category: Category,
}

struct Segment {
    size: u64,
    frames: FramesRef,
    category: Category,
}

struct Oom {
    time_us: i64,
    device_free: u64,
    size: u64,
}

/// One device's trace being written.
pub struct DeviceTrace {
    device: u32,
    mode: Mode,
    blocks: BTreeMap<u64, Block>,
    segments: BTreeMap<u64, Segment>,
    skipped: HashSet<(EventType, u64)>,
    lo: u64,
    hi: u64,
    oom: Option<Oom>,
    in_batch: usize,
    last_us: i64,
    /// What had to be adapted.
    pub counts: Counts,
}

fn pool(t: EventType) -> bool {
    t.is_framework_pool() || matches!(t, EventType::Custom(_))
}

fn pair<'a>(ev: &'a Event, key: &str) -> Option<&'a str> {
    match &ev.attrs {
        Attrs::Pairs(p) => p.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str()),
        _ => None,
    }
}

fn us(ev: &Event) -> i64 {
    i64::try_from(ev.ts_ns / 1000).unwrap_or(i64::MAX)
}

impl DeviceTrace {
    /// Starts the trace of NPU `device` (its list must be open: see [`DeviceTrace::open`]).
    pub fn new(device: u32, mode: Mode) -> DeviceTrace {
        DeviceTrace {
            device,
            mode,
            blocks: BTreeMap::new(),
            segments: BTreeMap::new(),
            skipped: HashSet::new(),
            lo: u64::MAX,
            hi: 0,
            oom: None,
            in_batch: 0,
            last_us: 0,
            counts: Counts::default(),
        }
    }

    /// The NPU ordinal.
    pub fn device(&self) -> u32 {
        self.device
    }

    /// The mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Opens the device's entry list.
    ///
    /// # Errors
    /// The sink's error (here and in every writing method).
    pub fn open<W: Sink>(&mut self, doc: &mut Doc<W>) -> io::Result<()> {
        doc.p.empty_list()?;
        doc.p.mark()
    }

    fn put<W: Sink>(&mut self, doc: &mut Doc<W>, e: &Entry<'_>) -> io::Result<FramesRef> {
        let frames = doc.entry(e)?;
        self.counts.entries += 1;
        self.in_batch += 1;
        if self.in_batch == BATCH {
            doc.p.appends()?;
            doc.p.mark()?;
            self.in_batch = 0;
        }
        Ok(frames)
    }

    /// `free_requested` + `free_completed` of live block `addr`, with the free's own stacks
    /// (`ev`) when it has some, else the allocation's frames.
    fn free_block<W: Sink>(
        &mut self,
        doc: &mut Doc<W>,
        addr: u64,
        ev: Option<&Event>,
        t: i64,
    ) -> io::Result<()> {
        let Some(b) = self.blocks.remove(&addr) else {
            return Ok(());
        };
        let first = match ev {
            Some(ev) if ev.py_stack.is_some() || ev.c_stack.is_some() => {
                FramesArg::Stacks(ev.py_stack.as_deref(), ev.c_stack.as_deref())
            }
            _ => FramesArg::Ref(&b.frames),
        };
        let mut entry = Entry {
            action: "free_requested",
            addr,
            size: b.size,
            time_us: t,
            frames: first,
            category: b.category,
            device_free: None,
        };
        let frames = self.put(doc, &entry)?;
        entry.action = "free_completed";
        entry.frames = FramesArg::Ref(&frames);
        self.put(doc, &entry).map(|_| ())
    }

    fn flush_oom<W: Sink>(&mut self, doc: &mut Doc<W>) -> io::Result<()> {
        if let Some(o) = self.oom.take() {
            self.put(
                doc,
                &Entry {
                    action: "oom",
                    addr: o.device_free,
                    size: o.size,
                    time_us: o.time_us,
                    frames: FramesArg::Ref(&FramesRef::Empty),
                    category: UNKNOWN,
                    device_free: Some(o.device_free),
                },
            )?;
        }
        Ok(())
    }

    /// Live blocks overlapping `[a, a + s)`, by start address.
    fn overlaps(&self, a: u64, s: u64) -> Vec<u64> {
        let end = a.saturating_add(s);
        let mut v: Vec<u64> = self.blocks.range(a..end).map(|(k, _)| *k).collect();
        if let Some((k, b)) = self.blocks.range(..a).next_back() {
            if k.saturating_add(b.size) > a {
                v.insert(0, *k);
            }
        }
        v
    }

    /// Handles one event of the device's replay (other devices' and device-less events are
    /// ignored).
    pub fn on_event<W: Sink>(&mut self, doc: &mut Doc<W>, ev: &Event) -> io::Result<Step> {
        if ev.device != Device::Npu(self.device) {
            // msMemScope's 2025 dumps write some FREE rows without a device: they belong to
            // the device where their block is live
            if !(ev.device == Device::NotApplicable && self.owns_free(ev)) {
                return Ok(Step::Ok);
            }
        }
        if ev.event_type == EventType::OomTrigger {
            if let (Some(o), Some(req)) = (self.oom.as_mut(), pair(ev, "req_size")) {
                o.size = req.parse().unwrap_or(0);
            }
            self.flush_oom(doc)?;
            return Ok(Step::Ok);
        }
        self.flush_oom(doc)?;
        let t = us(ev);
        self.last_us = self.last_us.max(t);
        if ev.event_type == EventType::Snapshot && ev.name.as_deref() == Some("OOM_Snapshot") {
            self.oom = Some(Oom {
                time_us: t,
                // the seed's key (issue 10: readers give msMemScope's `free` as `free_mem`)
                device_free: pair(ev, "free_mem")
                    .or_else(|| pair(ev, "free"))
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0),
                size: pair(ev, "req_size")
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0),
            });
            return Ok(Step::Ok);
        }
        let Some(m) = ev.memory() else {
            return Ok(Step::Ok);
        };
        let addr = ev.ptr.unwrap_or(m.addr);
        match (ev.kind, ev.event_type) {
            (EventKind::Malloc, EventType::Hal) if self.mode == Mode::Reservations => {
                for k in self.segments_overlapping(addr, m.size) {
                    self.free_segment(doc, k, None, t)?;
                }
                let category = match &m.owner {
                    Some(o) if !o.is_empty() => doc.category(&o.to_string()),
                    _ => UNKNOWN,
                };
                let frames = self.put(
                    doc,
                    &Entry {
                        action: "segment_alloc",
                        addr,
                        size: m.size,
                        time_us: t,
                        frames: FramesArg::Stacks(ev.py_stack.as_deref(), ev.c_stack.as_deref()),
                        category,
                        device_free: None,
                    },
                )?;
                self.segments.insert(
                    addr,
                    Segment {
                        size: m.size,
                        frames,
                        category,
                    },
                );
            }
            (EventKind::Free, EventType::Hal)
                if self.mode == Mode::Reservations
                    && !m.shadow
                    && self.segments.contains_key(&addr) =>
            {
                self.free_segment(doc, addr, Some(ev), t)?;
            }
            (EventKind::Malloc, p) if pool(p) => return self.alloc(doc, ev, addr, m.size, p, t),
            (EventKind::Free, p) if pool(p) && !m.shadow => {
                self.free(doc, ev, addr, m.size, p, t)?
            }
            _ => {}
        }
        Ok(Step::Ok)
    }

    /// Whether `ev` is a FREE of a block or segment live on this device.
    fn owns_free(&self, ev: &Event) -> bool {
        let Some(m) = ev.memory() else {
            return false;
        };
        if ev.kind != EventKind::Free {
            return false;
        }
        let addr = ev.ptr.unwrap_or(m.addr);
        match ev.event_type {
            EventType::Hal => self.segments.contains_key(&addr),
            t => self.blocks.get(&addr).is_some_and(|b| b.pool == t),
        }
    }

    fn segments_overlapping(&self, a: u64, s: u64) -> Vec<u64> {
        let end = a.saturating_add(s);
        let mut v: Vec<u64> = self.segments.range(a..end).map(|(k, _)| *k).collect();
        if let Some((k, seg)) = self.segments.range(..a).next_back() {
            if k.saturating_add(seg.size) > a {
                v.insert(0, *k);
            }
        }
        v
    }

    fn free_segment<W: Sink>(
        &mut self,
        doc: &mut Doc<W>,
        addr: u64,
        ev: Option<&Event>,
        t: i64,
    ) -> io::Result<()> {
        let Some(seg) = self.segments.remove(&addr) else {
            return Ok(());
        };
        let inside: Vec<u64> = self
            .blocks
            .range(addr..addr.saturating_add(seg.size))
            .map(|(k, _)| *k)
            .collect();
        for b in inside {
            self.free_block(doc, b, None, t)?;
        }
        let frames = match ev {
            Some(ev) if ev.py_stack.is_some() || ev.c_stack.is_some() => {
                FramesArg::Stacks(ev.py_stack.as_deref(), ev.c_stack.as_deref())
            }
            _ => FramesArg::Ref(&seg.frames),
        };
        self.put(
            doc,
            &Entry {
                action: "segment_free",
                addr,
                size: seg.size,
                time_us: t,
                frames,
                category: seg.category,
                device_free: None,
            },
        )
        .map(|_| ())
    }

    fn alloc<W: Sink>(
        &mut self,
        doc: &mut Doc<W>,
        ev: &Event,
        addr: u64,
        size: u64,
        p: EventType,
        t: i64,
    ) -> io::Result<Step> {
        if size == 0 {
            self.counts.zero_size += 1;
            return Ok(Step::Ok);
        }
        let mut over = self.overlaps(addr, size);
        if over.first() == Some(&addr) && self.blocks.get(&addr).is_some_and(|b| b.pool == p) {
            self.free_block(doc, addr, None, t)?;
            self.counts.replaced += 1;
            over.remove(0);
        }
        if !over.is_empty() {
            self.counts.overlapping += 1;
            self.skipped.insert((p, addr));
            return Ok(Step::Ok);
        }
        match self.mode {
            Mode::Reservations => {
                let inside = self
                    .segments
                    .range(..=addr)
                    .next_back()
                    .is_some_and(|(k, s)| addr.saturating_add(size) <= k.saturating_add(s.size));
                if !inside {
                    return Ok(Step::Violation);
                }
            }
            Mode::Synthetic => self.widen(addr, size),
        }
        let category = match ev.memory().and_then(|m| m.owner.as_ref()) {
            Some(o) if !o.is_empty() => doc.category(&o.to_string()),
            _ => UNKNOWN,
        };
        let frames = self.put(
            doc,
            &Entry {
                action: "alloc",
                addr,
                size,
                time_us: t,
                frames: FramesArg::Stacks(ev.py_stack.as_deref(), ev.c_stack.as_deref()),
                category,
                device_free: None,
            },
        )?;
        self.blocks.insert(
            addr,
            Block {
                size,
                pool: p,
                frames,
                category,
            },
        );
        Ok(Step::Ok)
    }

    fn widen(&mut self, addr: u64, size: u64) {
        self.lo = self.lo.min(addr);
        self.hi = self.hi.max(addr.saturating_add(size));
    }

    fn free<W: Sink>(
        &mut self,
        doc: &mut Doc<W>,
        ev: &Event,
        addr: u64,
        size: u64,
        p: EventType,
        t: i64,
    ) -> io::Result<()> {
        if self.blocks.get(&addr).is_some_and(|b| b.pool == p) {
            return self.free_block(doc, addr, Some(ev), t);
        }
        if self.skipped.remove(&(p, addr)) {
            return Ok(());
        }
        if self.mode == Mode::Reservations || size == 0 {
            self.counts.unknown_frees += 1;
            return Ok(());
        }
        self.widen(addr, size);
        self.put(
            doc,
            &Entry {
                action: "free_completed",
                addr,
                size,
                time_us: t,
                frames: FramesArg::Stacks(ev.py_stack.as_deref(), ev.c_stack.as_deref()),
                category: UNKNOWN,
                device_free: None,
            },
        )
        .map(|_| ())
    }

    /// Closes the device's list with the `snapshot` entry and appends it to `device_traces`.
    pub fn close<W: Sink>(&mut self, doc: &mut Doc<W>) -> io::Result<()> {
        self.flush_oom(doc)?;
        let t = self.last_us;
        self.put(
            doc,
            &Entry {
                action: "snapshot",
                addr: 0,
                size: 0,
                time_us: t,
                frames: FramesArg::Ref(&FramesRef::Empty),
                category: UNKNOWN,
                device_free: None,
            },
        )?;
        doc.p.appends()?;
        doc.p.append()
    }

    fn tile<W: Sink>(
        &self,
        doc: &mut Doc<W>,
        start: u64,
        size: u64,
        frames: &FramesRef,
    ) -> io::Result<()> {
        let end = start.saturating_add(size);
        let live: Vec<(&u64, &Block)> = self.blocks.range(start..end).collect();
        let allocated: u64 = live.iter().map(|(_, b)| b.size).sum();
        doc.begin_segment(self.device, start, size, allocated, frames)?;
        doc.p.empty_list()?;
        doc.p.mark()?;
        let mut n = 0usize;
        let mut cursor = start;
        let mut item =
            |doc: &mut Doc<W>, at: u64, sz: u64, active: bool, f: &FramesRef| -> io::Result<()> {
                doc.block(at, sz, active, f)?;
                n += 1;
                if n.is_multiple_of(BATCH) {
                    doc.p.appends()?;
                    doc.p.mark()?;
                }
                Ok(())
            };
        for (a, b) in live {
            if *a > cursor {
                item(doc, cursor, a - cursor, false, &FramesRef::Empty)?;
            }
            item(doc, *a, b.size, true, &b.frames)?;
            cursor = a.saturating_add(b.size);
        }
        if cursor < end {
            item(doc, cursor, end - cursor, false, &FramesRef::Empty)?;
        }
        doc.p.appends()?;
        doc.end_segment()
    }

    /// Writes the device's final segments (with their blocks) into the open `segments` list.
    /// Returns how many segments were written.
    pub fn write_segments<W: Sink>(&self, doc: &mut Doc<W>) -> io::Result<usize> {
        match self.mode {
            Mode::Reservations => {
                for (a, s) in &self.segments {
                    self.tile(doc, *a, s.size, &s.frames)?;
                }
                Ok(self.segments.len())
            }
            Mode::Synthetic if self.lo < self.hi => {
                self.tile(doc, self.lo, self.hi - self.lo, &FramesRef::Empty)?;
                Ok(1)
            }
            Mode::Synthetic => Ok(0),
        }
    }
}
