//! Aggregate mode (`memscope run --aggregate`, issue 38): per allocator (device and Event
//! Type), call site and owner, the allocations, their bytes, the frees, the blocks and bytes
//! live at the allocator's peak and live at the end — and no per-event row. Its size is
//! bounded by the number of sites, not of events (memray's `--aggregate`).
//!
//! * Blocks, owners and the peak follow [`crate::peak`]: a block is keyed by allocator and
//!   address; its owner is [`owner_label`], or the chain of a later `MEMORY_OWNER` row, which
//!   moves the block (with its allocation) to that owner's line; the peak is the first moment
//!   the allocator's live bytes were highest. As in the leak analyses, a block from before the
//!   collection window (`shadow:true` MALLOC) is no allocation of the window, and a
//!   `shadow:true` FREE (outside a window, or the collector's own at an exec) ends a block
//!   without counting as one of its frees.
//! * The site is [`crate::attribution`]'s: the first frame of the user's own code and its
//!   caller, from the Python stack, else the C stack; `(no stack)` without either.
//! * What each line held at the peak is kept without copying anything at a new peak: a line
//!   saves its live figures the first time it changes after the allocator's latest peak (the
//!   figures then are those of the peak), so a line that has not changed since holds its peak
//!   figures in its live ones. O(1) per event, memory O(lines + live blocks).

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use memscope_core::bus::{BusCtx, BusError, Flow, Layer, ReportSection};
use memscope_core::event::{Device, Event, EventKind, EventType};

use crate::attribution::site_of;
use crate::decompose::owner_label;

/// The aggregate file's header.
pub const HEADER: [&str; 13] = [
    "Device Id",
    "Event Type",
    "Site",
    "Owner",
    "Allocations",
    "Allocated Bytes",
    "Frees",
    "Blocks At Peak",
    "Bytes At Peak",
    "Live Blocks At Exit",
    "Live Bytes At Exit",
    "Call Stack(Python)",
    "Call Stack(C)",
];

/// One line: an allocator's blocks of one site and owner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    /// Device of the allocator.
    pub device: Device,
    /// Event Type of the allocator (HAL, PTA, HOST, …).
    pub pool: EventType,
    /// The site ([`crate::attribution::Site::label`]) or `(no stack)`.
    pub site: Arc<str>,
    /// Owner chain.
    pub owner: Arc<str>,
    /// MALLOC rows.
    pub allocations: u64,
    /// Their bytes.
    pub bytes: u64,
    /// FREE rows that ended one of its blocks.
    pub frees: u64,
    /// Live blocks now.
    pub live_blocks: u64,
    /// Live bytes now.
    pub live_bytes: u64,
    /// Blocks live at the allocator's peak.
    pub peak_blocks: u64,
    /// Bytes live at the allocator's peak.
    pub peak_bytes: u64,
    /// The first Python stack seen for it.
    pub py: Option<Arc<str>>,
    /// The first C stack seen for it.
    pub c: Option<Arc<str>>,
    /// The allocator's peak (its epoch) its saved peak figures belong to.
    saved_at: u64,
}

#[derive(Clone, Copy, Debug, Default)]
struct Allocator {
    live: u64,
    peak: u64,
    /// ID of the event after which the peak was reached.
    peak_id: u64,
    /// Peaks reached so far (0: none yet).
    epoch: u64,
}

#[derive(Clone, Copy, Debug)]
struct Block {
    line: usize,
    size: u64,
}

/// The aggregate of one process; [`AggregateLayer`] writes it.
#[derive(Debug, Default)]
pub struct Aggregate {
    lines: Vec<Line>,
    index: HashMap<(Device, EventType, Arc<str>, Arc<str>), usize>,
    allocators: HashMap<(Device, EventType), Allocator>,
    live: HashMap<(EventType, u64), Block>,
    texts: HashMap<Arc<str>, ()>,
}

impl Aggregate {
    /// An empty aggregate.
    pub fn new() -> Aggregate {
        Aggregate::default()
    }

    fn intern(&mut self, s: &str) -> Arc<str> {
        if let Some((k, _)) = self.texts.get_key_value(s) {
            return k.clone();
        }
        let a: Arc<str> = Arc::from(s);
        self.texts.insert(a.clone(), ());
        a
    }

    fn line(&mut self, device: Device, pool: EventType, site: &str, owner: &str) -> usize {
        let (site, owner) = (self.intern(site), self.intern(owner));
        let key = (device, pool, site.clone(), owner.clone());
        if let Some(i) = self.index.get(&key) {
            return *i;
        }
        self.lines.push(Line {
            device,
            pool,
            site,
            owner,
            allocations: 0,
            bytes: 0,
            frees: 0,
            live_blocks: 0,
            live_bytes: 0,
            peak_blocks: 0,
            peak_bytes: 0,
            py: None,
            c: None,
            saved_at: 0,
        });
        self.index.insert(key, self.lines.len() - 1);
        self.lines.len() - 1
    }

    /// Saves line `i`'s figures as its peak figures if this is its first change since its
    /// allocator's latest peak.
    fn settle(&mut self, i: usize) {
        let l = &self.lines[i];
        let epoch = self
            .allocators
            .get(&(l.device, l.pool))
            .map_or(0, |a| a.epoch);
        let l = &mut self.lines[i];
        if l.saved_at != epoch {
            l.peak_blocks = l.live_blocks;
            l.peak_bytes = l.live_bytes;
            l.saved_at = epoch;
        }
    }

    /// Adds one event.
    pub fn observe(&mut self, ev: &Event) {
        if let Some(tag) = memscope_core::roles::OwnerTag::from_event(ev) {
            self.retag(tag.pool, tag.addr, &tag.owner);
            return;
        }
        let Some(m) = ev.memory() else { return };
        let addr = ev.ptr.unwrap_or(m.addr);
        match ev.kind {
            EventKind::Malloc if ev.device != Device::NotApplicable && !ev.is_history_malloc() => {
                self.free(ev.event_type, addr, false);
                let site = site_of(ev.py_stack.as_deref(), ev.c_stack.as_deref())
                    .map_or_else(|| "(no stack)".to_owned(), |s| s.label());
                let i = self.line(ev.device, ev.event_type, &site, &owner_label(ev));
                self.settle(i);
                let py = ev.py_stack.as_deref().map(|s| self.intern(s));
                let c = ev.c_stack.as_deref().map(|s| self.intern(s));
                let l = &mut self.lines[i];
                l.allocations += 1;
                l.bytes += m.size;
                l.live_blocks += 1;
                l.live_bytes += m.size;
                l.py = l.py.take().or(py);
                l.c = l.c.take().or(c);
                self.live.insert(
                    (ev.event_type, addr),
                    Block {
                        line: i,
                        size: m.size,
                    },
                );
                let a = self
                    .allocators
                    .entry((ev.device, ev.event_type))
                    .or_default();
                a.live += m.size;
                if a.live > a.peak || a.epoch == 0 {
                    a.peak = a.live;
                    a.peak_id = ev.id;
                    a.epoch += 1;
                }
            }
            EventKind::Free => self.free(ev.event_type, addr, !m.shadow),
            _ => {}
        }
    }

    fn free(&mut self, pool: EventType, addr: u64, counted: bool) {
        let Some(b) = self.live.remove(&(pool, addr)) else {
            return;
        };
        self.settle(b.line);
        let l = &mut self.lines[b.line];
        l.live_blocks -= 1;
        l.live_bytes -= b.size;
        l.frees += u64::from(counted);
        if let Some(a) = self.allocators.get_mut(&(l.device, l.pool)) {
            a.live -= b.size;
        }
    }

    /// A `MEMORY_OWNER` row: the block moves, with its allocation, to its new owner's line.
    fn retag(&mut self, pool: EventType, addr: u64, owner: &str) {
        let Some(b) = self.live.get(&(pool, addr)).copied() else {
            return;
        };
        let old = self.lines[b.line].clone();
        if &*old.owner == owner {
            return;
        }
        let i = self.line(old.device, old.pool, &old.site, owner);
        self.settle(b.line);
        self.settle(i);
        let from = &mut self.lines[b.line];
        from.allocations -= 1;
        from.bytes -= b.size;
        from.live_blocks -= 1;
        from.live_bytes -= b.size;
        let to = &mut self.lines[i];
        to.allocations += 1;
        to.bytes += b.size;
        to.live_blocks += 1;
        to.live_bytes += b.size;
        to.py = to.py.take().or(old.py);
        to.c = to.c.take().or(old.c);
        self.live.insert(
            (pool, addr),
            Block {
                line: i,
                size: b.size,
            },
        );
    }

    /// Every line with its peak figures, by allocator, then bytes at the peak, then live bytes
    /// at the end (largest first); lines that never held a block are left out.
    pub fn lines(&self) -> Vec<Line> {
        let mut v: Vec<Line> = self
            .lines
            .iter()
            .filter(|l| l.allocations > 0)
            .map(|l| {
                let epoch = self
                    .allocators
                    .get(&(l.device, l.pool))
                    .map_or(0, |a| a.epoch);
                let mut l = l.clone();
                if l.saved_at != epoch {
                    l.peak_blocks = l.live_blocks;
                    l.peak_bytes = l.live_bytes;
                }
                l
            })
            .collect();
        v.sort_by(|a, b| {
            (a.device, a.pool.as_str())
                .cmp(&(b.device, b.pool.as_str()))
                .then(b.peak_bytes.cmp(&a.peak_bytes))
                .then(b.live_bytes.cmp(&a.live_bytes))
                .then(a.site.cmp(&b.site))
                .then(a.owner.cmp(&b.owner))
        });
        v
    }

    /// The lines holding blocks now (live figures; the live view, [`crate::live`]).
    pub fn live_lines(&self) -> impl Iterator<Item = &Line> {
        self.lines.iter().filter(|l| l.live_blocks > 0)
    }

    /// Per allocator now: device, Event Type, live bytes, live blocks and peak bytes.
    pub fn allocators_now(&self) -> Vec<(Device, EventType, u64, u64, u64)> {
        let mut blocks: HashMap<(Device, EventType), u64> = HashMap::new();
        for l in self.live_lines() {
            *blocks.entry((l.device, l.pool)).or_default() += l.live_blocks;
        }
        let mut v: Vec<_> = self
            .allocators
            .iter()
            .map(|((d, p), a)| {
                let n = blocks.get(&(*d, *p)).copied().unwrap_or(0);
                (*d, *p, a.live, n, a.peak)
            })
            .collect();
        v.sort_by(|a, b| (a.0, a.1.as_str()).cmp(&(b.0, b.1.as_str())));
        v
    }

    /// Per allocator: its peak bytes and the event ID after which it was reached.
    pub fn peaks(&self) -> Vec<(Device, EventType, u64, u64)> {
        let mut v: Vec<_> = self
            .allocators
            .iter()
            .map(|((d, p), a)| (*d, *p, a.peak, a.peak_id))
            .collect();
        v.sort_by(|a, b| (a.0, a.1.as_str()).cmp(&(b.0, b.1.as_str())));
        v
    }
}

/// Writes `lines` as the aggregate CSV ([`HEADER`]).
///
/// # Errors
/// The file cannot be written.
pub fn write_csv(w: impl Write, lines: &[Line]) -> csv::Result<()> {
    let mut out = csv::Writer::from_writer(w);
    out.write_record(HEADER)?;
    for l in lines {
        out.write_record([
            l.device.to_text().as_str(),
            l.pool.as_str(),
            &l.site,
            &l.owner,
            &l.allocations.to_string(),
            &l.bytes.to_string(),
            &l.frees.to_string(),
            &l.peak_blocks.to_string(),
            &l.peak_bytes.to_string(),
            &l.live_blocks.to_string(),
            &l.live_bytes.to_string(),
            l.py.as_deref().unwrap_or(""),
            l.c.as_deref().unwrap_or(""),
        ])?;
    }
    out.flush()?;
    Ok(())
}

/// The aggregate of the process's events, written at its end to `path` (a new file).
pub struct AggregateLayer {
    agg: Aggregate,
    path: PathBuf,
}

impl AggregateLayer {
    /// Writes to `path` at the end.
    pub fn new(path: PathBuf) -> AggregateLayer {
        AggregateLayer {
            agg: Aggregate::new(),
            path,
        }
    }
}

impl Layer for AggregateLayer {
    fn name(&self) -> &'static str {
        "aggregate"
    }

    fn on_event(
        &mut self,
        ev: &mut Event,
        _ctx: &BusCtx,
        _out: &mut Vec<Event>,
    ) -> Result<Flow, BusError> {
        // the end of the chain: no row goes further
        self.agg.observe(ev);
        Ok(Flow::Stop)
    }

    fn finish(
        &mut self,
        ctx: &BusCtx,
        _out: &mut Vec<Event>,
        report: &mut Vec<ReportSection>,
    ) -> Result<(), BusError> {
        let lines = self.agg.lines();
        if lines.is_empty() {
            // no block: no file (a launcher, a helper), as no dump is written without rows
            return Ok(());
        }
        let io = |e: std::io::Error| BusError::Io {
            path: self.path.display().to_string(),
            source: e,
        };
        let dir = self.path.parent().unwrap_or(std::path::Path::new("."));
        crate::outfile::create_dir_private(dir).map_err(io)?;
        let stem = self
            .path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("memscope_aggregate");
        let (path, f) = crate::outfile::create_unique(dir, stem, "csv").map_err(io)?;
        write_csv(std::io::BufWriter::new(f), &lines).map_err(|e| BusError::Io {
            path: path.display().to_string(),
            source: std::io::Error::other(e.to_string()),
        })?;
        let mut body = vec![format!(
            "{} line(s) (allocator, site, owner) in {}",
            lines.len(),
            path.display()
        )];
        for (d, p, bytes, id) in self.agg.peaks() {
            body.push(format!(
                "Device {} {}: peak {bytes} bytes at ID {id}",
                d.to_text(),
                p.as_str()
            ));
        }
        let sfx = ctx.pid.map_or(String::new(), |p| format!(" (pid {p})"));
        report.push(ReportSection::new(format!("Aggregate{sfx}"), body));
        Ok(())
    }
}

#[cfg(test)]
#[path = "aggregate_tests.rs"]
mod tests;
