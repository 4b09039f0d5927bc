//! Fragmentation of the framework pools and the out-of-memory verdict (issue 25).
//!
//! **Segments.** A pool (PTA, PTA_WORKSPACE, ATB, MindSpore) carves its blocks out of segments
//! it reserved from the driver; those segments are HAL blocks. A HAL block on an NPU becomes a
//! segment of a pool when the first block of that pool is allocated inside it, and stays one
//! until its HAL FREE. Per device and pool, at every moment:
//!
//! * reserved = bytes of its segments; allocated = bytes of its live blocks in them;
//! * free = reserved − allocated, in *extents* (the gaps between live blocks of a segment);
//! * largest = the largest extent; fragmentation = 1 − largest / free (0 when nothing is free).
//!
//! Without HAL rows (`--adapters` without `hal`) no segment is known: reserved and allocated
//! are the pool's own `total` and `used` figures and the extents are unknown.
//!
//! **Verdict.** At an `OOM_Snapshot` (the driver refused `R` bytes, `req_size`; the dumps hold
//! it on the `OOM_TRIGGER` row of `--analysis oom`, the capture always), and on request at the
//! end of a step, the device's pools are judged: "asked R, free F in N extents, largest L" and
//!
//! * **fragmentation** — F ≥ R but no extent holds R;
//! * **held by other processes** — F < R, but the device memory other processes hold (device
//!   used − this process's HAL bytes) plus the device's free memory would hold R;
//! * **true shortage** — neither;
//! * (**fits** — an extent of L ≥ R is free: the pools could serve it.)
//!
//! with the live blocks of the device grouped by role, owner and allocating frame (top
//! holders). Memory: one entry per live block and per HAL block; every update is O(log n).

mod extents;
mod verdict;

use std::collections::{BTreeMap, HashMap};

use memscope_core::bus::{BusCtx, BusError, Flow, Layer, ReportSection};
use memscope_core::event::{Attrs, Device, Event, EventKind, EventType};
use memscope_core::roles::{role_of, OwnerTag};

use super::decompose::owner_label;
use super::mib;

pub use extents::Figures;
pub use verdict::{Holder, Verdict, VerdictKind};

use extents::Extents;

/// Name of the SNAPSHOT row of an out-of-memory failure.
pub const OOM_SNAPSHOT: &str = "OOM_Snapshot";
/// Holders listed per grouping in a verdict.
pub const TOP_HOLDERS: usize = 5;
/// Step figures kept (beyond it, the first ones).
pub const MAX_STEP_FIGURES: usize = 100_000;

/// A device's pool.
pub type PoolKey = (Device, EventType);

/// The analysis as a bus layer (passes events on unchanged).
pub struct FragmentationLayer {
    ext: Extents,
    texts: Vec<String>,
    ids: HashMap<String, u32>,
    changed: Vec<(PoolKey, Figures)>,
    /// Figures at each step's end.
    step_ends: Vec<(u32, PoolKey, Figures)>,
    verdicts: Vec<Verdict>,
    /// Most stranded bytes (free − largest) per pool, with the moment.
    stranded: BTreeMap<PoolKey, (u64, u64, Figures)>,
    peak_reserved: BTreeMap<PoolKey, u64>,
    request: Option<(u64, Option<u32>)>,
    last_request_trigger: Option<u64>,
    /// The last step that ended (a `--request` at a step past it gets no verdict, said so).
    last_step: Option<u32>,
    /// The `--request` was judged.
    request_judged: bool,
    open_step: Option<u32>,
    last: (u64, u64),
    full: bool,
    seen: bool,
}

fn pairs(ev: &Event) -> &[(String, String)] {
    match &ev.attrs {
        Attrs::Pairs(p) => p,
        _ => &[],
    }
}

fn pair_u64(ev: &Event, key: &str) -> Option<u64> {
    pairs(ev)
        .iter()
        .find(|(k, _)| k == key)
        .and_then(|(_, v)| v.parse().ok())
}

impl FragmentationLayer {
    /// A layer that reports only the OOM verdicts (`memscope run`), or with `full` the pools'
    /// figures too (`memscope analyze fragmentation`).
    pub fn new(full: bool) -> FragmentationLayer {
        FragmentationLayer {
            ext: Extents::default(),
            texts: vec![String::new()],
            ids: HashMap::from([(String::new(), 0)]),
            changed: Vec::new(),
            step_ends: Vec::new(),
            verdicts: Vec::new(),
            stranded: BTreeMap::new(),
            peak_reserved: BTreeMap::new(),
            request: None,
            last_request_trigger: None,
            last_step: None,
            request_judged: false,
            open_step: None,
            last: (0, 0),
            full,
            seen: false,
        }
    }

    /// Also judges a request of `bytes` at the end of step `step` (at the end of the run when
    /// `None`).
    pub fn with_request(mut self, bytes: u64, step: Option<u32>) -> FragmentationLayer {
        self.request = Some((bytes, step));
        self
    }

    fn intern(&mut self, s: &str) -> u32 {
        if let Some(&i) = self.ids.get(s) {
            return i;
        }
        let i = self.texts.len() as u32;
        self.texts.push(s.to_owned());
        self.ids.insert(s.to_owned(), i);
        i
    }

    /// The pools changed by the last event, with their new figures.
    pub fn changes(&self) -> &[(PoolKey, Figures)] {
        &self.changed
    }

    /// The verdicts so far.
    pub fn verdicts(&self) -> &[Verdict] {
        &self.verdicts
    }

    /// The figures of every pool now.
    pub fn figures(&self) -> Vec<(PoolKey, Figures)> {
        let mut v = Vec::new();
        for (d, s) in &self.ext.devices {
            for (p, pool) in &s.pools {
                v.push(((*d, *p), pool.figures()));
            }
        }
        v
    }

    /// Figures of each pool at the end of each step.
    pub fn step_ends(&self) -> &[(u32, PoolKey, Figures)] {
        &self.step_ends
    }

    fn touched(&mut self, dev: Device, pool: EventType, id: u64) {
        let Some(f) = self
            .ext
            .devices
            .get(&dev)
            .and_then(|s| s.pools.get(&pool))
            .map(extents::Pool::figures)
        else {
            return;
        };
        let key = (dev, pool);
        let pr = self.peak_reserved.entry(key).or_default();
        *pr = (*pr).max(f.reserved);
        if let Some(l) = f.largest {
            let s = f.free - l.min(f.free);
            let e = self.stranded.entry(key).or_insert((0, 0, f));
            if s > e.0 {
                *e = (s, id, f);
            }
        }
        self.changed.push((key, f));
    }

    fn observe(&mut self, ev: &Event, ctx: &BusCtx) {
        self.changed.clear();
        self.last = (ev.id, ev.ts_ns);
        if ctx.steps.current != self.open_step {
            if let Some(s) = self.open_step {
                self.step_end(s);
            }
            self.open_step = ctx.steps.current;
        }
        if let Some(tag) = OwnerTag::from_event(ev) {
            let o = self.intern(&tag.owner);
            if let Some(b) = self.ext.blocks.get_mut(&(tag.pool, tag.device, tag.addr)) {
                b.owner = o;
            }
            return;
        }
        let Device::Npu(_) = ev.device else {
            return;
        };
        match ev.kind {
            EventKind::Snapshot if ev.name.as_deref() == Some(OOM_SNAPSHOT) => {
                if let (Some(t), Some(f)) = (pair_u64(ev, "total_mem"), pair_u64(ev, "free_mem")) {
                    self.ext.devices.entry(ev.device).or_default().mem = Some((t, f));
                }
                let st = self.ext.devices.entry(ev.device).or_default();
                if st.pools.is_empty() && st.hal_live == 0 {
                    return; // memory rows not collected: nothing to judge
                }
                let req = pair_u64(ev, "req_size");
                self.judge(ev.device, req, ev.id, ev.ts_ns, ctx.steps.current, false);
                return;
            }
            EventKind::OomDetail if ev.event_type == EventType::OomTrigger => {
                // the dumps keep the request size on this row (`--analysis oom`)
                if let (Some(r), Some(v)) = (pair_u64(ev, "req_size"), self.verdicts.last_mut()) {
                    if v.request.is_none() && v.device == ev.device && !v.asked {
                        *v = verdict::judge(v.clone(), r);
                    }
                }
                return;
            }
            _ => {}
        }
        let Some(m) = ev.memory() else { return };
        if m.pinned {
            return;
        }
        let addr = if m.addr != 0 {
            m.addr
        } else {
            ev.ptr.unwrap_or(0)
        };
        let shadow_free = ev.kind == EventKind::Free && m.shadow;
        if ev.event_type == EventType::Hal && !shadow_free {
            match ev.kind {
                EventKind::Malloc => {
                    if let Some(p) = self.ext.hal_malloc(ev.device, addr, m.size) {
                        self.touched(ev.device, p, ev.id);
                    }
                }
                EventKind::Free => {
                    if let Some(p) = self.ext.hal_free(ev.device, addr) {
                        self.touched(ev.device, p, ev.id);
                    }
                }
                _ => {}
            }
        } else if ev.event_type.is_framework_pool() && !shadow_free {
            match ev.kind {
                EventKind::Malloc => {
                    self.ext.free(ev.device, ev.event_type, addr);
                    let owner = self.intern(&owner_label(ev));
                    // the first frame of the user's code, as every "where" answer (issue 23)
                    let frame =
                        crate::attribution::site_of(ev.py_stack.as_deref(), ev.c_stack.as_deref())
                            .map(|s| s.label())
                            .unwrap_or_default();
                    let frame = self.intern(&frame);
                    self.ext
                        .malloc(ev.device, ev.event_type, addr, m.size, owner, frame);
                }
                EventKind::Free => self.ext.free(ev.device, ev.event_type, addr),
                _ => return,
            }
            self.ext
                .pool_figures(ev.device, ev.event_type, m.used, m.total);
            self.touched(ev.device, ev.event_type, ev.id);
        }
    }

    fn step_end(&mut self, step: u32) {
        for (key, f) in self.figures() {
            if self.step_ends.len() < MAX_STEP_FIGURES {
                self.step_ends.push((step, key, f));
            }
        }
        self.last_step = Some(step);
        if let Some((r, Some(s))) = self.request {
            if s == step {
                self.request_judged = true;
                self.ask(r, Some(step));
            }
        }
    }

    fn ask(&mut self, r: u64, step: Option<u32>) {
        let devs: Vec<Device> = self.ext.devices.keys().copied().collect();
        let (id, ts) = self.last;
        if self.last_request_trigger == Some(id) {
            return;
        }
        self.last_request_trigger = Some(id);
        for d in devs {
            if self.ext.devices[&d].pools.is_empty() {
                continue;
            }
            self.judge(d, Some(r), id, ts, step, true);
        }
    }

    fn judge(
        &mut self,
        dev: Device,
        req: Option<u64>,
        id: u64,
        ts: u64,
        step: Option<u32>,
        asked: bool,
    ) {
        let st = self.ext.devices.entry(dev).or_default();
        let mut pools = Figures::default();
        let mut known = true;
        for p in st.pools.values() {
            let f = p.figures();
            pools.reserved += f.reserved;
            pools.allocated += f.allocated;
            pools.free += f.free;
            match (f.extents, f.largest) {
                (Some(n), Some(l)) => {
                    pools.extents = Some(pools.extents.unwrap_or(0) + n);
                    pools.largest = Some(pools.largest.unwrap_or(0).max(l));
                }
                _ => known = false,
            }
        }
        if !known {
            pools.extents = None;
            pools.largest = None;
        }
        let process_held = st.hal_live;
        let device_mem = st.mem;
        let others = device_mem.map(|(t, f)| t.saturating_sub(f).saturating_sub(process_held));
        let holders = self.holders(dev);
        let v = Verdict {
            id,
            ts_ns: ts,
            device: dev,
            step,
            asked,
            request: None,
            pools,
            device_mem,
            process_held,
            others,
            kind: VerdictKind::Unknown,
            holders,
        };
        let v = match req {
            Some(r) => verdict::judge(v, r),
            None => v,
        };
        self.verdicts.push(v);
    }

    fn holders(&self, dev: Device) -> [Vec<Holder>; 3] {
        let mut by: [HashMap<String, u64>; 3] = Default::default();
        for ((_, d, _), b) in &self.ext.blocks {
            if *d != dev {
                continue;
            }
            let owner = &self.texts[b.owner as usize];
            *by[0].entry(role_of(owner).to_owned()).or_default() += b.size;
            *by[1].entry(owner.clone()).or_default() += b.size;
            let f = &self.texts[b.frame as usize];
            let f = if f.is_empty() { "(no stack)" } else { f };
            *by[2].entry(f.to_owned()).or_default() += b.size;
        }
        by.map(|m| {
            let mut v: Vec<Holder> = m.into_iter().collect();
            v.sort_by(|x, y| y.1.cmp(&x.1).then(x.0.cmp(&y.0)));
            v.truncate(TOP_HOLDERS);
            v
        })
    }

    fn pool_lines(&self) -> Vec<String> {
        let mut l = Vec::new();
        for ((dev, pool), f) in self.figures() {
            let peak = self.peak_reserved.get(&(dev, pool)).copied().unwrap_or(0);
            l.push(format!(
                "Device {} {}: reserved peak {:.6} MiB; at the end reserved {:.6} MiB, allocated {:.6} MiB, free {:.6} MiB{}",
                dev.to_text(),
                pool.as_str(),
                mib(peak),
                mib(f.reserved),
                mib(f.allocated),
                mib(f.free),
                fig_tail(&f)
            ));
            if let Some((s, id, g)) = self.stranded.get(&(dev, pool)).filter(|s| s.0 > 0) {
                l.push(format!(
                    "  most stranded at ID {id}: {:.6} MiB free outside the largest extent (free {:.6} MiB{})",
                    mib(*s),
                    mib(g.free),
                    fig_tail(g)
                ));
            }
            let steps: Vec<&(u32, PoolKey, Figures)> = self
                .step_ends
                .iter()
                .filter(|(_, k, _)| *k == (dev, pool))
                .collect();
            for (n, _, g) in steps.iter().take(20) {
                l.push(format!(
                    "  end of step {n}: reserved {:.6} MiB, allocated {:.6} MiB, free {:.6} MiB{}",
                    mib(g.reserved),
                    mib(g.allocated),
                    mib(g.free),
                    fig_tail(g)
                ));
            }
            if steps.len() > 20 {
                l.push(format!("  ({} more steps)", steps.len() - 20));
            }
        }
        l
    }
}

fn fig_tail(f: &Figures) -> String {
    match (f.extents, f.largest, f.fragmentation()) {
        (Some(n), Some(l), Some(x)) => format!(
            " in {n} extents, largest {:.6} MiB, fragmentation {x:.4}",
            mib(l)
        ),
        _ => " (extents unknown: no HAL rows)".to_owned(),
    }
}

impl Layer for FragmentationLayer {
    fn name(&self) -> &'static str {
        "fragmentation"
    }

    fn on_event(
        &mut self,
        ev: &mut Event,
        ctx: &BusCtx,
        _: &mut Vec<Event>,
    ) -> Result<Flow, BusError> {
        self.seen = true;
        self.observe(ev, ctx);
        Ok(Flow::Pass)
    }

    fn finish(
        &mut self,
        ctx: &BusCtx,
        _out: &mut Vec<Event>,
        report: &mut Vec<ReportSection>,
    ) -> Result<(), BusError> {
        if let Some(s) = self.open_step.take() {
            self.step_end(s);
        }
        if let Some((r, None)) = self.request {
            self.ask(r, None);
        }
        let sfx = ctx.pid.map_or(String::new(), |p| format!(" (pid {p})"));
        if self.full && self.seen {
            let mut lines = self.pool_lines();
            if lines.is_empty() {
                lines.push("No framework-pool rows on any NPU.".to_owned());
            }
            report.push(ReportSection::new(
                format!("Pool fragmentation{sfx}"),
                lines,
            ));
        }
        // the OOMs of the run, then the user's request (which may well fit): each under its
        // own heading
        for (asked, title) in [
            (false, "Out-of-memory verdict"),
            (true, "Verdict on the request"),
        ] {
            let lines: Vec<String> = self
                .verdicts
                .iter()
                .filter(|v| v.asked == asked)
                .flat_map(Verdict::lines)
                .collect();
            if !lines.is_empty() {
                report.push(ReportSection::new(format!("{title}{sfx}"), lines));
            }
        }
        if let Some((r, Some(s))) = self.request.filter(|_| !self.request_judged && self.seen) {
            let last = self.last_step.map_or("no step ended".to_owned(), |l| {
                format!("the last step was {l}")
            });
            report.push(ReportSection::new(
                format!("Verdict on the request{sfx}"),
                vec![format!(
                    "no verdict for the request of {r} B at step:{s}: step {s} never ended in this process ({last})"
                )],
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
