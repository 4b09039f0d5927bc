//! The figures of one process that a CI job checks (issue 24): per device and allocator, the
//! peak, what was live at exit, what the leak analysis calls leaked, MALLOC/FREE counts and
//! where the memory was — the content of `--summary-json` and what `--fail-on` limits read.
//!
//! * Peak and live at exit: [`super::peak`] (each allocator's own peak; allocators nest, so
//!   they are never added together).
//! * Leaked: [`super::leaks`] — framework-pool blocks by msMemScope's step rule, and host
//!   blocks (HOST, Python objects, other host allocators) by the same rule once a step ended
//!   ([`super::host_leaks`]). HAL memory and arenas are not judged: their memory live at exit
//!   is `live_at_exit` (HAL's is what `hal_at_exit` limits read).
//! * Where: the group (the first frame of the user's code and its caller in the Python stack,
//!   else in the C stack, else the owner; [`super::live_points::By::key`]) holding the most
//!   bytes of the peak's live set, of the leaked blocks, of the blocks live at exit.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use memscope_core::bus::{BusCtx, BusError, Flow, Layer};
use memscope_core::event::{Device, Event, EventKind, EventType};

use super::host_leaks::{self, HostLeaks};
use super::leaks::LeakLayer;
use super::live_points::By;
use super::peak::{Group, LiveSet, PeakLayer, PeakResult};

/// Where memory was: a group and its bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Site {
    /// `file(line): function`, a C frame, or an owner chain.
    pub site: String,
    /// Bytes of the group.
    pub bytes: u64,
    /// Blocks of the group.
    pub blocks: u64,
}

/// Figures of one allocator on one device.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct AllocatorFigures {
    /// `0`, `1`, … for NPUs, `cpu`.
    pub device: String,
    /// Event Type: `PTA`, `HAL`, `HOST`, a plugin's, …
    pub allocator: String,
    /// Highest live bytes.
    pub peak_bytes: u64,
    /// Blocks live at the peak.
    pub peak_blocks: u64,
    /// ID of the event after which the peak was reached.
    pub peak_id: u64,
    /// Its timestamp, ns since the epoch.
    pub peak_ts_ns: u64,
    /// Highest bytes reserved by the pool (`total`), framework pools only.
    pub reserved_peak_bytes: Option<u64>,
    /// Bytes live at the end of the run.
    pub live_at_exit_bytes: u64,
    /// Blocks live at the end.
    pub live_at_exit_blocks: u64,
    /// Bytes the leak analysis calls leaked (framework pools: msMemScope's step rule); `None`
    /// for allocators it does not judge (HAL memory live at exit is
    /// [`AllocatorFigures::live_at_exit_bytes`], `hal_at_exit` in a limit).
    pub leaked_bytes: Option<u64>,
    /// Blocks leaked.
    pub leaked_blocks: Option<u64>,
    /// MALLOC rows.
    pub mallocs: u64,
    /// FREE rows.
    pub frees: u64,
    /// Where most of the peak was.
    pub peak_site: Option<Site>,
    /// Where most of the leaked memory was allocated.
    pub leak_site: Option<Site>,
    /// Where most of the memory live at exit was allocated.
    pub live_at_exit_site: Option<Site>,
}

impl AllocatorFigures {
    /// The device as `--fail-on` and the pytest markers name it: `npu:N` or `cpu`.
    pub fn device_name(&self) -> String {
        match self.device.parse::<u32>() {
            Ok(n) => format!("npu:{n}"),
            Err(_) => self.device.clone(),
        }
    }
}

/// Figures of one process.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ProcessFigures {
    /// Rows (events) read.
    pub rows: u64,
    /// Rows per `Event` kind.
    pub counts: BTreeMap<String, u64>,
    /// Steps that ended.
    pub steps_ended: u32,
    /// Allocators, by device then Event Type.
    pub allocators: Vec<AllocatorFigures>,
    /// Cross-stream races found (`memscope_races`); `None` when nothing the check needs was
    /// recorded (no launch with its stream, operator accesses or `sanitizer-op:` mark).
    pub races: Option<u64>,
    /// `sanitizer-op:` marks that could not be checked (malformed, or cut by the recorder).
    pub races_unchecked: u64,
}

/// Leaked bytes, blocks and bytes/blocks per site of one allocator.
type Leaked = (u64, u64, HashMap<String, (u64, u64)>);

#[derive(Default)]
struct Counts {
    mallocs: u64,
    frees: u64,
    reserved: Option<u64>,
}

/// Computes [`ProcessFigures`] as a bus layer (passes events on unchanged).
pub struct FiguresLayer {
    peak: PeakLayer,
    leaks: LeakLayer,
    host: HostLeaks,
    counts: BTreeMap<&'static str, u64>,
    per: BTreeMap<(Device, EventType), Counts>,
    rows: u64,
    races: memscope_races::RaceLayer,
}

impl Default for FiguresLayer {
    fn default() -> Self {
        FiguresLayer::new()
    }
}

/// The site of a block: where its Python stack says it was allocated (the first frame of the
/// user's code and its caller), else its C stack, else its owner.
fn site_of(py: &str, c: &str, owner: &str) -> String {
    for (by, text) in [(By::Python, py), (By::C, c)] {
        let k = by.key(py, c, owner, "");
        if !text.trim().is_empty() && !k.starts_with('(') {
            return k;
        }
    }
    By::Owner.key("", "", owner, "")
}

/// The owner chain of a memory event, as text (empty without one).
fn owner_text(e: &Event) -> String {
    e.memory()
        .and_then(|m| m.owner.as_ref())
        .map(|o| o.to_string())
        .unwrap_or_default()
}

fn top_site(groups: HashMap<String, (u64, u64)>) -> Option<Site> {
    groups
        .into_iter()
        .max_by(|a, b| a.1 .0.cmp(&b.1 .0).then(b.0.cmp(&a.0)))
        .map(|(site, (bytes, blocks))| Site {
            site,
            bytes,
            blocks,
        })
}

/// The biggest group of a live set: by Python site when the blocks have Python stacks, else by
/// C site, else by owner ([`site_of`]).
fn live_site(r: &PeakResult, set: &LiveSet) -> Option<Site> {
    let has = |l: &[(u32, Group)]| l.iter().any(|(i, _)| !r.text(*i).trim().is_empty());
    let (list, by) = if has(&set.by_py) {
        (&set.by_py, By::Python)
    } else if has(&set.by_c) {
        (&set.by_c, By::C)
    } else {
        (&set.by_owner, By::Owner)
    };
    let mut g: HashMap<String, (u64, u64)> = HashMap::new();
    for (i, grp) in list {
        let t = r.text(*i);
        let key = match by {
            By::Python => by.key(t, "", "", ""),
            By::C => by.key("", t, "", ""),
            _ => by.key("", "", t, ""),
        };
        let e = g.entry(key).or_default();
        e.0 += grp.bytes;
        e.1 += grp.blocks;
    }
    top_site(g)
}

impl FiguresLayer {
    /// A fresh layer.
    pub fn new() -> FiguresLayer {
        FiguresLayer {
            peak: PeakLayer::new(),
            leaks: LeakLayer::new(),
            host: HostLeaks::default(),
            counts: BTreeMap::new(),
            per: BTreeMap::new(),
            rows: 0,
            races: memscope_races::RaceLayer::new(),
        }
    }

    fn observe(&mut self, ev: &Event) {
        self.rows += 1;
        *self.counts.entry(ev.kind.as_str()).or_default() += 1;
        let Some(m) = ev.memory() else { return };
        if ev.device == Device::NotApplicable {
            return;
        }
        let c = self.per.entry((ev.device, ev.event_type)).or_default();
        match ev.kind {
            EventKind::Malloc => c.mallocs += 1,
            EventKind::Free => c.frees += 1,
            _ => {}
        }
        if ev.event_type.is_framework_pool() {
            if let Some(t) = m.total.filter(|t| *t >= 0) {
                c.reserved = Some(c.reserved.unwrap_or(0).max(t as u64));
            }
        }
    }

    /// The figures so far (at the end: the process's).
    pub fn result(&self) -> ProcessFigures {
        let r = self.peak.result();
        let mut leaked: HashMap<(Device, EventType), Leaked> = HashMap::new();
        for l in self.leaks.pool_leaks() {
            let e = leaked.entry((l.device, l.pool)).or_default();
            e.0 += l.size;
            e.1 += 1;
            let site = site_of(
                l.py_stack.as_deref().unwrap_or(""),
                l.c_stack.as_deref().unwrap_or(""),
                l.owner.as_deref().unwrap_or(""),
            );
            let s = e.2.entry(site).or_default();
            s.0 += l.size;
            s.1 += 1;
        }
        let mut host = self.host.leaked(self.leaks.steps_ended());
        let allocators = r
            .allocators
            .iter()
            .map(|a| {
                let c = self.per.get(&(a.device, a.pool));
                // msMemScope's leak rule judges pool blocks, and host blocks by the same step
                // rule once a step ended; HAL memory live at exit is its own figure
                // (`hal_at_exit`), as msMemScope logs it apart from leaks
                let on_host = host_leaks::judged(a.device, a.pool);
                let judged = a.pool.is_framework_pool() || (on_host && host.is_some());
                let l = if on_host {
                    host.as_mut().and_then(|h| h.remove(&a.pool))
                } else {
                    leaked.remove(&(a.device, a.pool))
                };
                let leak_site = l.as_ref().and_then(|l| top_site(l.2.clone()));
                AllocatorFigures {
                    device: a.device.to_text(),
                    allocator: a.pool.as_str().to_owned(),
                    peak_bytes: a.peak.total.bytes,
                    peak_blocks: a.peak.total.blocks,
                    peak_id: a.peak_id,
                    peak_ts_ns: a.peak_ts_ns,
                    reserved_peak_bytes: c.and_then(|c| c.reserved),
                    live_at_exit_bytes: a.end.total.bytes,
                    live_at_exit_blocks: a.end.total.blocks,
                    leaked_bytes: judged.then(|| l.as_ref().map_or(0, |l| l.0)),
                    leaked_blocks: judged.then(|| l.as_ref().map_or(0, |l| l.1)),
                    mallocs: c.map_or(0, |c| c.mallocs),
                    frees: c.map_or(0, |c| c.frees),
                    peak_site: live_site(&r, &a.peak),
                    leak_site,
                    live_at_exit_site: live_site(&r, &a.end),
                }
            })
            .collect();
        ProcessFigures {
            rows: self.rows,
            counts: self
                .counts
                .iter()
                .map(|(k, v)| ((*k).to_owned(), *v))
                .collect(),
            steps_ended: self.leaks.steps_ended(),
            allocators,
            races: self.races.count(),
            races_unchecked: self.races.unchecked(),
        }
    }
}

impl Layer for FiguresLayer {
    fn name(&self) -> &'static str {
        "figures"
    }

    fn on_event(
        &mut self,
        ev: &mut Event,
        ctx: &BusCtx,
        out: &mut Vec<Event>,
    ) -> Result<Flow, BusError> {
        self.observe(ev);
        self.races.observe(ev);
        self.host.observe(ev, self.leaks.current_step(), |e| {
            site_of(
                e.py_stack.as_deref().unwrap_or(""),
                e.c_stack.as_deref().unwrap_or(""),
                &owner_text(e),
            )
        });
        let mut before = Vec::new();
        let flow = self.leaks.on_event(ev, ctx, &mut before)?;
        for e in before {
            self.peak.feed(e, ctx, out)?;
        }
        match flow {
            Flow::Pass => self.peak.on_event(ev, ctx, out),
            Flow::Stop => Ok(Flow::Stop),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memscope_core::event::{Attrs, MemoryAttrs};

    fn mem(id: u64, t: EventType, kind: EventKind, addr: u64, size: u64, py: &str) -> Event {
        let mut e = Event::new(t, id, 1, 1);
        e.id = id;
        e.kind = kind;
        e.device = Device::Npu(0);
        e.ptr = Some(addr);
        e.py_stack = (!py.is_empty()).then(|| py.to_owned());
        e.attrs = Attrs::Memory(MemoryAttrs {
            addr,
            size,
            total: Some(1 << 20),
            ..MemoryAttrs::default()
        });
        e
    }

    #[test]
    fn figures_give_peak_live_at_exit_hal_at_exit_counts_and_the_biggest_site() {
        let mut l = FiguresLayer::new();
        let ctx = BusCtx::default();
        let mut out = Vec::new();
        for e in [
            mem(
                1,
                EventType::Hal,
                EventKind::Malloc,
                0x1000,
                1 << 30,
                "t.py(3): reserve",
            ),
            mem(
                2,
                EventType::Pta,
                EventKind::Malloc,
                0x1000,
                100,
                "t.py(5): f\nt.py(9): main",
            ),
            mem(
                3,
                EventType::Pta,
                EventKind::Malloc,
                0x2000,
                300,
                "t.py(6): g",
            ),
            mem(4, EventType::Pta, EventKind::Free, 0x2000, 300, ""),
        ] {
            l.feed(e, &ctx, &mut out).unwrap();
        }
        let f = l.result();
        assert_eq!(f.rows, 4);
        assert_eq!(f.counts["MALLOC"], 3);
        let pta = f.allocators.iter().find(|a| a.allocator == "PTA").unwrap();
        assert_eq!((pta.peak_bytes, pta.peak_blocks), (400, 2));
        assert_eq!(
            (pta.live_at_exit_bytes, pta.mallocs, pta.frees),
            (100, 2, 1)
        );
        assert_eq!(pta.reserved_peak_bytes, Some(1 << 20));
        assert_eq!(pta.leaked_bytes, Some(0)); // no step ended: nothing judged leaked
        assert_eq!(pta.peak_site.as_ref().unwrap().site, "t.py(6): g");
        assert_eq!(pta.device_name(), "npu:0");
        // HAL live at exit is not a leak (msMemScope logs it apart): its own figure and site
        let hal = f.allocators.iter().find(|a| a.allocator == "HAL").unwrap();
        assert_eq!(hal.leaked_bytes, None);
        assert_eq!(hal.live_at_exit_bytes, 1 << 30);
        assert_eq!(
            hal.live_at_exit_site.as_ref().unwrap().site,
            "t.py(3): reserve"
        );
    }
}
