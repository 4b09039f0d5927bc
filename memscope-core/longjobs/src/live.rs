//! The live view of a running process (`memscope top`, issue 38): what its device-memory
//! allocators hold now, which owners and call sites hold it, how that grew over the last
//! minute, and its steps.
//!
//! [`LiveLayer`] sits in every process's bus and keeps the live blocks with the same
//! bookkeeping as aggregate mode ([`crate::aggregate::Aggregate`]: owners retagged by
//! `MEMORY_OWNER`, blocks from before a window not counted). HOST and account-only blocks
//! are left out (HOST's own fast path accounts those, and its event rate would make this a
//! cost for every run). Every ten seconds it notes the owners' and sites' live bytes, so
//! growth is known over the last minute even for a viewer that has just attached; a frame
//! ([`ProcessFrame`]) is built only while a viewer asks for it ([`LiveHandle::wanted`]), at
//! the collector's periodic flush.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use memscope_core::bus::{BusCtx, BusError, Flow, Layer, ReportSection};
use memscope_core::event::{Device, Event, EventType};
use serde::{Deserialize, Serialize};

use memscope_analysis::aggregate::Aggregate;
use memscope_analysis::steps::StepTracker;

/// Owners and sites a frame lists, each.
pub const TOP_N: usize = 10;
/// How far back growth and step rates look.
pub const GROWTH_WINDOW: Duration = Duration::from_secs(60);
/// How often the totals growth is measured against are noted.
const NOTE_EVERY: Duration = Duration::from_secs(10);

/// One allocator (device and Event Type) of a process, now.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolFrame {
    /// Device, as the dumps write it (`0`, `cpu`).
    pub device: String,
    /// Event Type (`PTA`, `HAL`, …).
    pub pool: String,
    /// Bytes of its live blocks.
    pub allocated: u64,
    /// Its live blocks.
    pub blocks: u64,
    /// Bytes the pool has reserved, as its latest row says (`None`: the source does not say).
    pub reserved: Option<u64>,
    /// The highest `allocated` so far.
    pub peak: u64,
}

/// An owner or a call site, with what it holds now.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HolderFrame {
    /// Owner chain or site label.
    pub name: String,
    /// Live bytes.
    pub bytes: u64,
    /// Live blocks.
    pub blocks: u64,
    /// Change of its live bytes over [`ProcessFrame::growth_window_s`].
    pub growth: i64,
}

/// What one process holds now.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcessFrame {
    /// Process id.
    pub pid: u32,
    /// Its executable.
    pub exe: String,
    /// Its rank (`RANK`, …), where it has one.
    pub rank: Option<u32>,
    /// Whether it still runs (set by the collector when it writes the frames).
    pub alive: bool,
    /// When the frame was built (ns since the epoch).
    pub at_ns: u64,
    /// Steps ended so far.
    pub steps: u64,
    /// Steps per second over the growth window.
    pub steps_per_s: f64,
    /// Seconds the growth figures cover (up to a minute; less early in a run).
    pub growth_window_s: f64,
    /// Events the live view has seen.
    pub events: u64,
    /// Its allocators.
    pub pools: Vec<PoolFrame>,
    /// The owners holding most, largest first.
    pub owners: Vec<HolderFrame>,
    /// The call sites holding most, largest first.
    pub sites: Vec<HolderFrame>,
}

/// The frame a [`LiveLayer`] publishes, and whether anybody is watching.
#[derive(Clone, Debug, Default)]
pub struct LiveHandle {
    frame: Arc<Mutex<ProcessFrame>>,
    wanted: Arc<AtomicBool>,
}

impl LiveHandle {
    /// A handle for process `pid`, nobody watching yet.
    pub fn new(pid: u32, exe: &str, rank: Option<u32>) -> LiveHandle {
        let frame = ProcessFrame {
            pid,
            exe: exe.to_owned(),
            rank,
            alive: true,
            ..ProcessFrame::default()
        };
        LiveHandle {
            frame: Arc::new(Mutex::new(frame)),
            wanted: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Says whether a viewer asks for frames (the collector, from `memscope top`'s request).
    pub fn set_wanted(&self, on: bool) {
        self.wanted.store(on, Ordering::Relaxed);
    }

    /// Whether a viewer asks for frames.
    pub fn wanted(&self) -> bool {
        self.wanted.load(Ordering::Relaxed)
    }

    /// The latest frame.
    pub fn frame(&self) -> ProcessFrame {
        self.frame.lock().map(|f| f.clone()).unwrap_or_default()
    }

    fn publish(&self, f: ProcessFrame) {
        if let Ok(mut g) = self.frame.lock() {
            *g = f;
        }
    }
}

/// Totals noted at one moment, for growth.
struct Note {
    at: Instant,
    owners: HashMap<Arc<str>, u64>,
    sites: HashMap<Arc<str>, u64>,
    steps: u64,
}

/// The live view's layer: passes every event on, keeps what is live.
pub struct LiveLayer {
    agg: Aggregate,
    reserved: HashMap<(Device, EventType), u64>,
    steps: StepTracker,
    events: u64,
    notes: VecDeque<Note>,
    handle: LiveHandle,
}

impl LiveLayer {
    /// A layer publishing to `handle`.
    pub fn new(handle: LiveHandle) -> LiveLayer {
        LiveLayer {
            agg: Aggregate::new(),
            reserved: HashMap::new(),
            steps: StepTracker::default(),
            events: 0,
            notes: VecDeque::new(),
            handle,
        }
    }

    /// Owners' and sites' live bytes and blocks now.
    fn holders(&self) -> (Totals, Totals) {
        let mut owners = Totals::default();
        let mut sites = Totals::default();
        for l in self.agg.live_lines() {
            owners.add(&l.owner, l.live_bytes, l.live_blocks);
            sites.add(&l.site, l.live_bytes, l.live_blocks);
        }
        (owners, sites)
    }

    /// Notes the totals every [`NOTE_EVERY`], keeping a minute of them.
    fn note(&mut self, now: Instant) {
        if self
            .notes
            .back()
            .is_some_and(|n| now.duration_since(n.at) < NOTE_EVERY)
        {
            return;
        }
        let (owners, sites) = self.holders();
        self.notes.push_back(Note {
            at: now,
            owners: owners.bytes_only(),
            sites: sites.bytes_only(),
            steps: u64::from(self.steps.closed_max()),
        });
        // keep the newest note at least a window old, drop the ones before it
        while self.notes.len() > 1 && now.duration_since(self.notes[1].at) >= GROWTH_WINDOW {
            self.notes.pop_front();
        }
    }

    fn frame(&self, now: Instant) -> ProcessFrame {
        let mut f = self.handle.frame();
        f.at_ns = now_ns();
        f.events = self.events;
        f.steps = u64::from(self.steps.closed_max());
        let base = self.notes.front();
        let window = base.map_or(0.0, |n| now.duration_since(n.at).as_secs_f64());
        f.growth_window_s = window;
        f.steps_per_s = match base {
            Some(n) if window >= 1.0 => f.steps.saturating_sub(n.steps) as f64 / window,
            _ => 0.0,
        };
        f.pools = self
            .agg
            .allocators_now()
            .into_iter()
            .map(|(d, p, live, blocks, peak)| PoolFrame {
                device: d.to_text(),
                pool: p.as_str().to_owned(),
                allocated: live,
                blocks,
                reserved: self.reserved.get(&(d, p)).copied(),
                peak,
            })
            .collect();
        let (owners, sites) = self.holders();
        f.owners = owners.top(base.map(|n| &n.owners));
        f.sites = sites.top(base.map(|n| &n.sites));
        f
    }
}

/// Live bytes and blocks per owner or site.
#[derive(Default)]
struct Totals(HashMap<Arc<str>, (u64, u64)>);

impl Totals {
    fn add(&mut self, name: &Arc<str>, bytes: u64, blocks: u64) {
        let e = self.0.entry(name.clone()).or_default();
        e.0 += bytes;
        e.1 += blocks;
    }

    fn bytes_only(&self) -> HashMap<Arc<str>, u64> {
        self.0.iter().map(|(k, v)| (k.clone(), v.0)).collect()
    }

    /// The [`TOP_N`] holding most now, with their growth since `base`.
    fn top(&self, base: Option<&HashMap<Arc<str>, u64>>) -> Vec<HolderFrame> {
        let mut v: Vec<HolderFrame> = self
            .0
            .iter()
            .filter(|(_, (bytes, _))| *bytes > 0)
            .map(|(name, (bytes, blocks))| HolderFrame {
                name: name.to_string(),
                bytes: *bytes,
                blocks: *blocks,
                growth: *bytes as i64 - base.and_then(|b| b.get(name)).copied().unwrap_or(0) as i64,
            })
            .collect();
        v.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.name.cmp(&b.name)));
        v.truncate(TOP_N);
        v
    }
}

fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

impl Layer for LiveLayer {
    fn name(&self) -> &'static str {
        "live view"
    }

    fn on_event(
        &mut self,
        ev: &mut Event,
        ctx: &BusCtx,
        _: &mut Vec<Event>,
    ) -> Result<Flow, BusError> {
        self.events += 1;
        self.steps.observe(ev, ctx);
        if let Some(m) = ev.memory() {
            // not HOST's mallocs (its fast path accounts them) nor account-only blocks; torch's
            // CPU tensors are kept
            if !m.account_only && (ev.event_type != EventType::Host || m.cpu_tensor) {
                if let Some(t) = m.total.and_then(|t| u64::try_from(t).ok()) {
                    self.reserved.insert((ev.device, ev.event_type), t);
                }
                self.agg.observe(ev);
            }
        } else if memscope_core::roles::OwnerTag::from_event(ev).is_some() {
            self.agg.observe(ev);
        }
        Ok(Flow::Pass)
    }

    fn flush(&mut self) -> Result<(), BusError> {
        let now = Instant::now();
        self.note(now);
        if self.handle.wanted() {
            self.handle.publish(self.frame(now));
        }
        Ok(())
    }

    fn finish(
        &mut self,
        _ctx: &BusCtx,
        _out: &mut Vec<Event>,
        _report: &mut Vec<ReportSection>,
    ) -> Result<(), BusError> {
        // the last frame stays for a viewer: what the process held when it ended
        let now = Instant::now();
        let mut f = self.frame(now);
        f.alive = false;
        self.handle.publish(f);
        Ok(())
    }
}

#[cfg(test)]
#[path = "live_tests.rs"]
mod tests;
