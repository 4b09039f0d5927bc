//! One process: its events (in ID order) pass through memscope-core's analyses — leaks, gap,
//! decompose (with roles), per-step figures, live set at the peak, fragmentation, inefficient
//! memory, cross-stream races — exactly as
//! `memscope analyze` runs them, and through the memory levels that are plotted. `finish`
//! turns their results into the page's [`ProcessData`] (times still absolute here).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use memscope_analysis::decompose::DecomposeLayer;
use memscope_analysis::fragmentation::FragmentationLayer;
use memscope_analysis::gap::GapLayer;
use memscope_analysis::inefficient::{IneffConfig, IneffTracker};
use memscope_analysis::leaks::LeakLayer;
use memscope_analysis::levels::{LevelKey, MemoryLevels};
use memscope_analysis::ops::{OpTracker, Under};
use memscope_analysis::peak::PeakLayer;
use memscope_analysis::step_stats::StepStatsLayer;
use memscope_core::bus::{BusCtx, BusError, Flow, Layer, ReportSection};
use memscope_core::event::{Device, Event, EventKind, EventType, Inefficiency};

use crate::model::*;
use crate::roles_view::{frag_data, roles_data, FragCurves};
use crate::series::Series;
use crate::views::{allocators, hex, series_data, series_of, thin};
use crate::Budget;
use memscope_core::sample::SamplePoint;

/// Marks kept per process before thinning.
pub const MAX_MARKS: usize = 2000;

struct IneffBlock {
    ts: u64,
    device: Device,
    pool: EventType,
    size: u64,
    op: String,
    pre: Vec<Inefficiency>,
}

/// Marks thinned evenly: every `stride`-th is kept; when over the cap, every other one goes.
struct Thinned<T> {
    items: Vec<T>,
    stride: u64,
    seen: u64,
    cap: usize,
}

impl<T> Thinned<T> {
    fn new(cap: usize) -> Self {
        Thinned {
            items: Vec::new(),
            stride: 1,
            seen: 0,
            cap,
        }
    }

    fn push(&mut self, t: T) {
        if self.seen.checked_rem(self.stride) == Some(0) {
            self.items.push(t);
            if self.items.len() > self.cap {
                let mut i = 0;
                self.items.retain(|_| {
                    i += 1;
                    i % 2 == 1
                });
                self.stride *= 2;
            }
        }
        self.seen += 1;
    }
}

/// Builds the data of one process from its events.
pub struct ProcessBuilder {
    pid: Option<u32>,
    source: String,
    budget: Budget,
    ctx: BusCtx,
    leaks: LeakLayer,
    gap: GapLayer,
    decompose: DecomposeLayer,
    steps: StepStatsLayer,
    peak: PeakLayer,
    frag: FragmentationLayer,
    races: memscope_races::RaceLayer,
    frag_curves: FragCurves,
    ineff: IneffTracker,
    ineff_cfg: IneffConfig,
    ineff_ops: OpTracker,
    ineff_live: HashMap<u64, IneffBlock>,
    ineff_found: Vec<IneffRow>,
    ineff_counts: [u64; 3],
    ineff_total: u64,
    levels: MemoryLevels,
    series: BTreeMap<(LevelKey, bool), Series>,
    last_level: HashMap<LevelKey, i64>,
    headline: [(i64, Series); 3],
    /// Memory samples (`--sample`, issue 25) per device (`cpu`: the host): sampled bytes (RSS,
    /// device used) and untracked bytes over time.
    sampled: BTreeMap<Device, [Series; 2]>,
    marks: Thinned<MarkData>,
    counts: BTreeMap<&'static str, u64>,
    devices: BTreeSet<Device>,
    events: u64,
    first: Option<u64>,
    last: u64,
    py_stacks: bool,
    c_stacks: bool,
    buf: Vec<Event>,
}

impl ProcessBuilder {
    /// A builder for process `pid`, read from `source`.
    pub fn new(pid: Option<u32>, source: &str, budget: &Budget) -> ProcessBuilder {
        let ineff_cfg = IneffConfig::default();
        ProcessBuilder {
            pid,
            source: source.to_owned(),
            budget: budget.clone(),
            ctx: BusCtx {
                pid,
                ..BusCtx::default()
            },
            leaks: LeakLayer::new(),
            gap: GapLayer::new(),
            decompose: DecomposeLayer::new(None),
            steps: StepStatsLayer::new(),
            peak: PeakLayer::new(),
            frag: FragmentationLayer::new(false),
            races: memscope_races::RaceLayer::new(),
            frag_curves: FragCurves::default(),
            ineff: IneffTracker::new(ineff_cfg.clone()),
            ineff_cfg,
            ineff_ops: OpTracker::default(),
            ineff_live: HashMap::new(),
            ineff_found: Vec::new(),
            ineff_counts: [0; 3],
            ineff_total: 0,
            levels: MemoryLevels::new(),
            series: BTreeMap::new(),
            last_level: HashMap::new(),
            headline: [
                (0, Series::new(budget.series_buckets)),
                (0, Series::new(budget.series_buckets)),
                (0, Series::new(budget.series_buckets)),
            ],
            sampled: BTreeMap::new(),
            marks: Thinned::new(MAX_MARKS),
            counts: BTreeMap::new(),
            devices: BTreeSet::new(),
            events: 0,
            first: None,
            last: 0,
            py_stacks: false,
            c_stacks: false,
            buf: Vec::with_capacity(2),
        }
    }

    /// Feeds one event (in ID order).
    ///
    /// # Errors
    /// An analysis layer's error.
    pub fn push(&mut self, ev: Event) -> Result<(), BusError> {
        self.ctx.steps.observe(&ev);
        self.observe(&ev);
        let ts = ev.ts_ns;
        let mut cur = ev;
        let layers: [&mut dyn Layer; 7] = [
            &mut self.leaks,
            &mut self.gap,
            &mut self.decompose,
            &mut self.steps,
            &mut self.peak,
            &mut self.frag,
            &mut self.races,
        ];
        // the last event a layer lets through goes on to the next (these layers only watch)
        for l in layers {
            self.buf.clear();
            if l.on_event(&mut cur, &self.ctx, &mut self.buf)? == Flow::Stop {
                match self.buf.pop() {
                    Some(e) => cur = e,
                    None => break,
                }
            }
        }
        self.frag_curves
            .observe(self.frag.changes(), ts, self.budget.series_buckets);
        Ok(())
    }

    fn observe(&mut self, ev: &Event) {
        self.events += 1;
        *self.counts.entry(ev.kind.as_str()).or_default() += 1;
        self.first.get_or_insert(ev.ts_ns);
        self.last = self.last.max(ev.ts_ns);
        if ev.device != Device::NotApplicable {
            self.devices.insert(ev.device);
        }
        if ev.kind == EventKind::Malloc {
            self.py_stacks |= ev.py_stack.as_deref().is_some_and(|s| !s.is_empty());
            self.c_stacks |= ev.c_stack.as_deref().is_some_and(|s| !s.is_empty());
        }
        if ev.kind == EventKind::Mstx {
            self.marks.push(MarkData {
                t: ev.ts_ns,
                name: ev.name.clone().unwrap_or_default(),
                kind: ev.event_type.as_str().to_owned(),
            });
        }
        if let Some(p) = SamplePoint::of(ev) {
            let cap = self.budget.series_buckets;
            let s = self
                .sampled
                .entry(p.device)
                .or_insert_with(|| [Series::new(cap), Series::new(cap)]);
            s[0].push(p.ts_ns, p.sampled);
            s[1].push(p.ts_ns, p.untracked);
        }
        if let Some((key, level)) = self.levels.observe(ev) {
            let cap = self.budget.series_buckets;
            self.series
                .entry((key, false))
                .or_insert_with(|| Series::new(cap))
                .push(ev.ts_ns, level.allocated);
            if let Some(r) = level.reserved {
                self.series
                    .entry((key, true))
                    .or_insert_with(|| Series::new(cap))
                    .push(ev.ts_ns, r);
            }
            // headline sums: HAL on NPUs, framework pools (reserved, else allocated) on NPUs, HOST
            let (slot, value) = match (key.device, key.pool) {
                (Device::Npu(_), EventType::Hal) => (0, level.allocated),
                (Device::Npu(_), p) if p.is_framework_pool() => {
                    (1, level.reserved.unwrap_or(level.allocated))
                }
                (Device::Cpu, EventType::Host) => (2, level.allocated),
                _ => (3, 0),
            };
            if slot < 3 {
                let old = self.last_level.insert(key, value).unwrap_or(0);
                let (sum, s) = &mut self.headline[slot];
                *sum += value - old;
                s.push(ev.ts_ns, *sum);
            }
        }
        self.observe_inefficient(ev);
    }

    fn observe_inefficient(&mut self, ev: &Event) {
        self.ineff_ops.observe(ev);
        if ev.kind == EventKind::Malloc
            && matches!(
                ev.event_type,
                EventType::Pta | EventType::PtaWorkspace | EventType::Atb
            )
        {
            let m = ev.memory();
            let op = match self.ineff_ops.label(ev) {
                Under::Nothing => String::new(),
                u => u.to_string(),
            };
            self.ineff_live.insert(
                ev.id,
                IneffBlock {
                    ts: ev.ts_ns,
                    device: ev.device,
                    pool: ev.event_type,
                    size: m.map_or(0, |m| m.size),
                    op,
                    pre: m.map(|m| m.inefficient.clone()).unwrap_or_default(),
                },
            );
        }
        let obs = self.ineff.observe(ev);
        for f in obs.findings {
            self.finding(f.malloc_id, f.types);
        }
    }

    fn finding(&mut self, malloc_id: u64, mut types: Vec<Inefficiency>) {
        let Some(b) = self.ineff_live.remove(&malloc_id) else {
            return;
        };
        for t in b.pre {
            if !types.contains(&t) {
                types.push(t);
            }
        }
        if types.is_empty() {
            return;
        }
        for t in &types {
            self.ineff_counts[*t as usize] += 1;
        }
        self.ineff_total += 1;
        self.ineff_found.push(IneffRow {
            id: malloc_id,
            t: b.ts,
            device: b.device.to_text(),
            pool: b.pool.as_str().to_owned(),
            size: b.size,
            op: b.op,
            types: types.iter().map(|t| t.as_str()).collect(),
        });
        // keep the largest blocks once the table is twice over its cap
        let cap = self.budget.table_rows;
        if self.ineff_found.len() > 2 * cap {
            self.ineff_found
                .sort_by(|a, b| b.size.cmp(&a.size).then(a.id.cmp(&b.id)));
            self.ineff_found.truncate(cap);
        }
    }

    /// Ends the process: the analyses finish and their results become the page's data.
    ///
    /// # Errors
    /// An analysis layer's error.
    pub fn finish(mut self) -> Result<ProcessData, BusError> {
        let mut sections: Vec<ReportSection> = Vec::new();
        let mut sink = Vec::new();
        let layers: [&mut dyn Layer; 7] = [
            &mut self.leaks,
            &mut self.gap,
            &mut self.decompose,
            &mut self.steps,
            &mut self.peak,
            &mut self.frag,
            &mut self.races,
        ];
        for l in layers {
            l.finish(&self.ctx, &mut sink, &mut sections)?;
        }
        for f in self.ineff.finish() {
            self.finding(f.malloc_id, f.types);
        }
        let budget = self.budget.clone();
        let rows = self.decompose.rows();
        let peak = self.peak.result();
        let allocators = allocators(&peak, &rows, &budget);
        let roles = roles_data(&self.decompose, &rows, &budget);
        let fragmentation = frag_data(&self.frag, std::mem::take(&mut self.frag_curves));
        let leaks = self.leak_data(&budget);
        let steps = self.step_data();
        let (steps, steps_omitted) = thin(steps, budget.table_rows);
        let inefficient = self.ineff_data(&budget);
        let mut series: Vec<SeriesData> = self
            .series
            .iter()
            .map(|((k, reserved), s)| series_data(k, *reserved, s))
            .collect();
        for (d, s) in &self.sampled {
            let first = if *d == Device::Cpu {
                "RSS (sampled)"
            } else {
                "used (sampled)"
            };
            for (s, name) in s.iter().zip([first, "untracked"]) {
                series.push(series_of(d.to_text(), name.into(), "sampled", s));
            }
        }
        let names = ["HAL", "pools", "HOST"];
        let headline = self
            .headline
            .iter()
            .zip(names)
            .find(|((_, s), _)| !s.is_empty())
            .map(|((_, s), name)| {
                let mut d = series_data(
                    &LevelKey {
                        device: Device::NotApplicable,
                        pool: EventType::Hal,
                        pinned: false,
                    },
                    false,
                    s,
                );
                d.pool = name.to_owned();
                d.device = String::new();
                d
            });
        let text = sections
            .into_iter()
            .map(|s| TextSection {
                title: s.title,
                lines: s.lines,
            })
            .collect();
        let label = self
            .pid
            .map_or("pid N/A".to_owned(), |p| format!("pid {p}"));
        let marks_omitted = self.marks.seen - self.marks.items.len() as u64;
        Ok(ProcessData {
            pid: self.pid,
            label,
            source: self.source,
            events: self.events,
            counts: self
                .counts
                .iter()
                .map(|(k, v)| ((*k).to_owned(), *v))
                .collect(),
            start: self.first.unwrap_or(0),
            end: self.last,
            devices: self.devices.iter().map(|d| d.to_text()).collect(),
            has_py_stacks: self.py_stacks,
            has_c_stacks: self.c_stacks,
            series,
            headline,
            steps,
            steps_omitted,
            marks: self.marks.items,
            marks_omitted,
            leaks,
            allocators,
            inefficient,
            roles,
            fragmentation,
            text,
        })
    }

    fn leak_data(&self, budget: &Budget) -> LeakData {
        let pool = self.leaks.pool_leaks();
        let hal = self.leaks.hal_live();
        LeakData {
            pool_count: pool.len() as u64,
            pool_bytes: pool.iter().map(|l| l.size).sum(),
            steps_ended: self.leaks.steps_ended(),
            pool_recorded: self.leaks.pool_recorded(),
            hal_count: hal.len() as u64,
            hal_bytes: hal.iter().map(|h| h.size).sum(),
            pool: pool
                .into_iter()
                .take(budget.table_rows)
                .map(|l| LeakRow {
                    id: l.id,
                    t: Some(l.ts_ns),
                    device: l.device.to_text(),
                    pool: l.pool.as_str().to_owned(),
                    size: l.size,
                    addr: hex(l.addr),
                    step: l.step,
                    under: l.under,
                    owner: l.owner,
                    py_stack: l.py_stack,
                    c_stack: l.c_stack,
                })
                .collect(),
            hal: hal
                .into_iter()
                .take(budget.table_rows)
                .map(|h| HalRow {
                    device: h.device.to_text(),
                    addr: hex(h.addr),
                    size: h.size,
                    site: h.site,
                })
                .collect(),
        }
    }

    fn step_data(&self) -> Vec<StepData> {
        let mut gap: HashMap<(Device, EventType, u32), (i64, i64, f64)> = HashMap::new();
        for ((pool, dev), steps) in self.gap.results() {
            for s in steps {
                gap.insert((dev, pool, s.step), (s.min, s.max, s.ratio()));
            }
        }
        self.steps
            .records()
            .into_iter()
            .map(|r| StepData {
                step: r.step,
                start: r.start_ns,
                end: r.end_ns,
                levels: r
                    .levels
                    .iter()
                    .map(|(k, l)| {
                        let g = (!k.pinned)
                            .then(|| gap.get(&(k.device, k.pool, r.step)))
                            .flatten();
                        StepLevelData {
                            device: k.device.to_text(),
                            pool: k.label(),
                            peak: l.peak,
                            end: l.end,
                            delta: l.end - l.start,
                            reserved_peak: l.reserved_peak,
                            mallocs: l.mallocs,
                            frees: l.frees,
                            gap_min: g.map(|g| g.0),
                            gap_max: g.map(|g| g.1),
                            gap_ratio: g.map(|g| (g.2 * 100.0).round() / 100.0),
                        }
                    })
                    .collect(),
            })
            .collect()
    }

    fn ineff_data(&mut self, budget: &Budget) -> IneffData {
        let mut blocks = std::mem::take(&mut self.ineff_found);
        let total = self.ineff_total;
        blocks.sort_by(|a, b| b.size.cmp(&a.size).then(a.id.cmp(&b.id)));
        blocks.truncate(budget.table_rows);
        let mut counts = BTreeMap::new();
        for t in [
            Inefficiency::EarlyAllocation,
            Inefficiency::LateDeallocation,
            Inefficiency::TemporaryIdleness,
        ] {
            counts.insert(t.as_str(), self.ineff_counts[t as usize]);
        }
        IneffData {
            counts,
            blocks,
            total,
            idle_threshold: self.ineff_cfg.idle_threshold,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_are_thinned_evenly_within_their_cap() {
        let mut m = Thinned::new(4);
        for i in 0..100 {
            m.push(i);
        }
        assert!(m.items.len() <= 4 && m.items[0] == 0);
        assert_eq!(m.seen, 100);
    }
}
