//! Per-window memory of a process (issue 24: the pytest plugin's per-test figures): for each
//! collection window (`START_TRACE` … `STOP_TRACE`, one per test), per device and allocator,
//! the peak of the memory allocated inside the window, what of it was still live when the
//! window closed (leaked), and where — written as one JSON line per window to a file the
//! plugin reads after each test.
//!
//! Only blocks allocated inside the window count (pytest-memray's rule: a test is charged
//! for what it allocates, not for what was live before it) — not the history rows written at
//! the window's start for blocks allocated before it (issue 26). The live set at the window's peak
//! is rebuilt as [`super::peak`] does (blocks live at the end allocated before the peak, plus
//! those freed after it). Sites are the innermost Python frame, else the innermost C frame,
//! else the owner chain.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use serde::Serialize;

use memscope_core::bus::{BusCtx, BusError, Flow, Layer, ReportSection};
use memscope_core::event::{Device, Event, EventKind, EventType};

use super::decompose::owner_label;
use super::live_points::By;

/// Sites listed per allocator and window.
pub const MAX_SITES: usize = 5;

#[derive(Clone)]
struct Block {
    id: u64,
    device: Device,
    pool: EventType,
    size: u64,
    site: Arc<str>,
    stack: Arc<str>,
}

#[derive(Default)]
struct Alloc {
    live: u64,
    peak: u64,
    peak_id: u64,
    mallocs: u64,
    frees: u64,
    allocated: u64,
    freed_since_peak: Vec<Block>,
}

/// A group of blocks in a window's record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct WindowSite {
    /// `file(line): function`, a C frame or an owner chain.
    pub site: String,
    /// Bytes.
    pub bytes: u64,
    /// Blocks.
    pub blocks: u64,
    /// The whole stack of its largest block (Python, else C), innermost first.
    pub stack: String,
}

/// One allocator in a window's record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct WindowAllocator {
    /// `0`, `1`, … or `cpu`.
    pub device: String,
    /// Event Type.
    pub allocator: String,
    /// Highest bytes live of the blocks allocated in the window.
    pub peak_bytes: u64,
    /// Blocks at that moment.
    pub peak_blocks: u64,
    /// Bytes allocated in the window and live when it closed.
    pub leaked_bytes: u64,
    /// Those blocks.
    pub leaked_blocks: u64,
    /// MALLOC rows in the window.
    pub mallocs: u64,
    /// FREE rows of the window's blocks.
    pub frees: u64,
    /// Bytes allocated in the window.
    pub allocated_bytes: u64,
    /// The largest groups at the peak.
    pub peak_sites: Vec<WindowSite>,
    /// The largest groups of leaked blocks.
    pub leak_sites: Vec<WindowSite>,
}

/// One window's record (a JSON line).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct WindowRecord {
    /// 1-based number of the window in the process.
    pub window: u32,
    /// The process.
    pub pid: Option<u32>,
    /// Timestamp of its `START_TRACE`.
    pub start_ns: u64,
    /// Timestamp of its `STOP_TRACE` (or of the last event, when the process ended first).
    pub end_ns: u64,
    /// Whether a `STOP_TRACE` closed it.
    pub closed: bool,
    /// Allocators with blocks allocated in the window.
    pub allocators: Vec<WindowAllocator>,
}

/// Writes a [`WindowRecord`] per window to a file, as a bus layer (passes events on).
pub struct WindowsLayer {
    path: PathBuf,
    file: Option<std::fs::File>,
    window: u32,
    open: Option<u64>,
    last_ts: u64,
    texts: HashMap<Arc<str>, ()>,
    blocks: HashMap<(EventType, u64), Block>,
    per: BTreeMap<(Device, EventType), Alloc>,
}

impl WindowsLayer {
    /// A layer appending its records to `path`.
    pub fn new(path: PathBuf) -> WindowsLayer {
        WindowsLayer {
            path,
            file: None,
            window: 0,
            open: None,
            last_ts: 0,
            texts: HashMap::new(),
            blocks: HashMap::new(),
            per: BTreeMap::new(),
        }
    }

    fn intern(&mut self, s: &str) -> Arc<str> {
        if let Some((k, ())) = self.texts.get_key_value(s) {
            return k.clone();
        }
        let a: Arc<str> = Arc::from(s);
        self.texts.insert(a.clone(), ());
        a
    }

    fn malloc(&mut self, ev: &Event, size: u64, key: (EventType, u64)) {
        let py = ev.py_stack.as_deref().unwrap_or("");
        let c = ev.c_stack.as_deref().unwrap_or("");
        let site = [(By::Python, py), (By::C, c)]
            .into_iter()
            .find(|(_, t)| !t.trim().is_empty() && t.trim() != "NA")
            .map_or_else(
                || By::Owner.key("", "", &owner_label(ev), ""),
                |(by, t)| match by {
                    By::Python => by.key(t, "", "", ""),
                    _ => by.key("", t, "", ""),
                },
            );
        let stack = if py.trim().is_empty() { c } else { py };
        let b = Block {
            id: ev.id,
            device: ev.device,
            pool: ev.event_type,
            size,
            site: self.intern(&site),
            stack: self.intern(stack),
        };
        if let Some(old) = self.blocks.insert(key, b) {
            self.release(&old);
        }
        let a = self.per.entry((ev.device, ev.event_type)).or_default();
        a.live += size;
        a.mallocs += 1;
        a.allocated += size;
        if a.live > a.peak {
            a.peak = a.live;
            a.peak_id = ev.id;
            a.freed_since_peak.clear();
        }
    }

    fn release(&mut self, b: &Block) {
        let a = self.per.entry((b.device, b.pool)).or_default();
        a.live = a.live.saturating_sub(b.size);
        if b.id <= a.peak_id {
            a.freed_since_peak.push(b.clone());
        }
    }

    fn record(&mut self, pid: Option<u32>, start: u64, closed: bool) -> WindowRecord {
        fn sites<'a>(blocks: impl Iterator<Item = &'a Block>) -> Vec<WindowSite> {
            let mut m: HashMap<&str, (u64, u64, &Block)> = HashMap::new();
            for b in blocks {
                let e = m.entry(&b.site).or_insert((0, 0, b));
                e.0 += b.size;
                e.1 += 1;
                if b.size > e.2.size {
                    e.2 = b;
                }
            }
            let mut v: Vec<WindowSite> = m
                .into_iter()
                .map(|(site, (bytes, blocks, big))| WindowSite {
                    site: site.to_owned(),
                    bytes,
                    blocks,
                    stack: big.stack.to_string(),
                })
                .collect();
            v.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.site.cmp(&b.site)));
            v.truncate(MAX_SITES);
            v
        }
        let mut allocators = Vec::new();
        for ((device, pool), a) in &self.per {
            let live: Vec<&Block> = self
                .blocks
                .values()
                .filter(|b| b.device == *device && b.pool == *pool)
                .collect();
            let at_peak = live
                .iter()
                .copied()
                .filter(|b| b.id <= a.peak_id)
                .chain(a.freed_since_peak.iter());
            let peak_blocks =
                live.iter().filter(|b| b.id <= a.peak_id).count() + a.freed_since_peak.len();
            allocators.push(WindowAllocator {
                device: device.to_text(),
                allocator: pool.as_str().to_owned(),
                peak_bytes: a.peak,
                peak_blocks: peak_blocks as u64,
                leaked_bytes: live.iter().map(|b| b.size).sum(),
                leaked_blocks: live.len() as u64,
                mallocs: a.mallocs,
                frees: a.frees,
                allocated_bytes: a.allocated,
                peak_sites: sites(at_peak),
                leak_sites: sites(live.into_iter()),
            });
        }
        WindowRecord {
            window: self.window,
            pid,
            start_ns: start,
            end_ns: self.last_ts,
            closed,
            allocators,
        }
    }

    fn write(&mut self, rec: &WindowRecord) -> Result<(), BusError> {
        let io = |e: std::io::Error, p: &PathBuf| BusError::Io {
            path: p.display().to_string(),
            source: e,
        };
        if self.file.is_none() {
            let f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.path)
                .map_err(|e| io(e, &self.path))?;
            self.file = Some(f);
        }
        let mut line = serde_json::to_vec(rec).map_err(|e| BusError::Other(e.to_string()))?;
        line.push(b'\n');
        if let Some(f) = self.file.as_mut() {
            f.write_all(&line).map_err(|e| io(e, &self.path))?;
        }
        Ok(())
    }

    fn close(&mut self, pid: Option<u32>, closed: bool) -> Result<(), BusError> {
        if let Some(start) = self.open.take() {
            let rec = self.record(pid, start, closed);
            self.blocks.clear();
            self.per.clear();
            self.texts.clear();
            self.write(&rec)?;
        }
        Ok(())
    }

    fn observe(&mut self, ev: &Event) -> Result<(), BusError> {
        self.last_ts = self.last_ts.max(ev.ts_ns);
        match (ev.kind, ev.event_type) {
            (EventKind::System, EventType::StartTrace) if self.open.is_none() => {
                self.window += 1;
                self.open = Some(ev.ts_ns);
            }
            (EventKind::System, EventType::StopTrace) => self.close(ev.pid, true)?,
            (EventKind::Malloc | EventKind::Free, _) if self.open.is_some() => {
                let Some(m) = ev.memory() else { return Ok(()) };
                let key = (ev.event_type, ev.ptr.unwrap_or(m.addr));
                match ev.kind {
                    // a block from before the window (written at its start, `shadow:true`) is
                    // not the test's
                    EventKind::Malloc
                        if ev.device != Device::NotApplicable && !ev.is_history_malloc() =>
                    {
                        self.malloc(ev, m.size, key);
                    }
                    EventKind::Free if !m.shadow => {
                        if let Some(b) = self.blocks.remove(&key) {
                            self.release(&b);
                            self.per.entry((b.device, b.pool)).or_default().frees += 1;
                        }
                    }
                    _ => {}
                }
            }
            _ => {}
        }
        Ok(())
    }
}

impl Layer for WindowsLayer {
    fn name(&self) -> &'static str {
        "windows"
    }

    fn on_event(
        &mut self,
        ev: &mut Event,
        _: &BusCtx,
        _: &mut Vec<Event>,
    ) -> Result<Flow, BusError> {
        self.observe(ev)?;
        Ok(Flow::Pass)
    }

    fn finish(
        &mut self,
        ctx: &BusCtx,
        _: &mut Vec<Event>,
        _: &mut Vec<ReportSection>,
    ) -> Result<(), BusError> {
        self.close(ctx.pid, false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memscope_core::event::{Attrs, MemoryAttrs};

    fn sys(id: u64, t: EventType) -> Event {
        let mut e = Event::new(t, id, 7, 1);
        e.id = id;
        e
    }

    fn mem(id: u64, kind: EventKind, addr: u64, size: u64, py: &str) -> Event {
        let mut e = Event::new(EventType::Pta, id, 7, 1);
        e.id = id;
        e.kind = kind;
        e.device = Device::Npu(0);
        e.ptr = Some(addr);
        e.py_stack = (!py.is_empty()).then(|| py.to_owned());
        e.attrs = Attrs::Memory(MemoryAttrs {
            addr,
            size,
            ..MemoryAttrs::default()
        });
        e
    }

    fn history(id: u64, addr: u64, size: u64) -> Event {
        let mut e = mem(id, EventKind::Malloc, addr, size, "");
        if let Some(m) = e.memory_mut() {
            m.shadow = true;
        }
        e
    }

    #[test]
    fn each_window_gets_its_own_peak_and_leaks_with_the_allocating_line() {
        let t = tempfile::tempdir().unwrap();
        let path = t.path().join("w.jsonl");
        let mut l = WindowsLayer::new(path.clone());
        let ctx = BusCtx {
            pid: Some(7),
            ..BusCtx::default()
        };
        let mut out = Vec::new();
        let evs = [
            mem(1, EventKind::Malloc, 0x10, 999, "before.py(1): f"), // outside: not counted
            sys(2, EventType::StartTrace),
            history(2, 0x50, 7777), // written at the start for a block from before: not counted
            mem(
                3,
                EventKind::Malloc,
                0x20,
                100,
                "t.py(4): test_a\nrunner.py(9): run",
            ),
            mem(4, EventKind::Malloc, 0x30, 4 << 20, "t.py(5): test_a"),
            mem(5, EventKind::Free, 0x20, 100, ""),
            mem(6, EventKind::Free, 0x10, 999, ""), // freed block of before: ignored
            sys(7, EventType::StopTrace),
            sys(8, EventType::StartTrace),
            mem(9, EventKind::Malloc, 0x40, 10, "t.py(8): test_b"),
            mem(10, EventKind::Free, 0x40, 10, ""),
            sys(11, EventType::StopTrace),
            sys(12, EventType::StartTrace),
        ];
        for e in evs {
            l.feed(e, &ctx, &mut out).unwrap();
        }
        l.finish(&ctx, &mut out, &mut Vec::new()).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let recs: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(recs.len(), 3);
        let a = &recs[0]["allocators"][0];
        assert_eq!(a["peak_bytes"], (4 << 20) + 100);
        assert_eq!(a["peak_blocks"], 2);
        assert_eq!(a["leaked_bytes"], 4 << 20);
        assert_eq!(a["leak_sites"][0]["site"], "t.py(5): test_a");
        assert_eq!(a["peak_sites"][0]["site"], "t.py(5): test_a");
        assert_eq!(
            a["peak_sites"][1]["stack"],
            "t.py(4): test_a\nrunner.py(9): run"
        );
        let b = &recs[1]["allocators"][0];
        assert_eq!(
            (b["peak_bytes"].as_u64(), b["leaked_bytes"].as_u64()),
            (Some(10), Some(0))
        );
        assert_eq!(recs[1]["window"], 2);
        assert_eq!(recs[2]["closed"], false);
        assert!(recs[2]["allocators"].as_array().unwrap().is_empty());
    }
}
