//! Per-step memory figures: for every step, when it started and ended and, per memory level
//! ([`super::levels`]), the highest allocated bytes within the step, the bytes allocated when it
//! ended, the highest reserved bytes, and the MALLOC/FREE rows it saw.
//!
//! Steps are numbered as the leak and gap analyses number them ([`super::steps`]): msTX
//! `step start` ranges, or Python `step()` calls (call *k* ends step *k*; step 1 then starts with
//! the process's first event). A step's peak starts from the level it began with, so a level
//! that did not move in the step reports that level. A step still open at the end has no end.

use std::collections::BTreeMap;

use memscope_core::bus::{BusCtx, BusError, Flow, Layer, ReportSection};
use memscope_core::event::Event;

use super::levels::{LevelKey, MemoryLevels};
use super::steps::StepTracker;

/// Figures of one level in one step, bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StepLevel {
    /// Highest allocated bytes in the step.
    pub peak: i64,
    /// Allocated bytes when the step ended (or at the end of the run for an open step).
    pub end: i64,
    /// Allocated bytes when the step started.
    pub start: i64,
    /// Highest reserved bytes in the step (framework pools).
    pub reserved_peak: Option<i64>,
    /// MALLOC rows in the step.
    pub mallocs: u64,
    /// FREE rows in the step.
    pub frees: u64,
    /// Bytes of the MALLOC rows in the step.
    pub malloc_bytes: u64,
}

/// One step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StepRecord {
    /// Step number, from 1.
    pub step: u32,
    /// Timestamp of the event that opened the step (ns since the epoch).
    pub start_ns: u64,
    /// Timestamp of the event that ended it, `None` while open at the end.
    pub end_ns: Option<u64>,
    /// Figures per level (levels seen so far when the step ended).
    pub levels: BTreeMap<LevelKey, StepLevel>,
}

/// The per-step figures as a bus layer (passes events on unchanged).
#[derive(Default)]
pub struct StepStatsLayer {
    steps: StepTracker,
    levels: MemoryLevels,
    open: Option<StepRecord>,
    done: Vec<StepRecord>,
    started: bool,
    provisional: bool,
}

impl StepStatsLayer {
    /// A fresh layer.
    pub fn new() -> StepStatsLayer {
        StepStatsLayer::default()
    }

    fn begin(&mut self, step: u32, ts: u64) {
        let levels = self
            .levels
            .current()
            .iter()
            .map(|(k, l)| {
                (
                    *k,
                    StepLevel {
                        peak: l.allocated,
                        end: l.allocated,
                        start: l.allocated,
                        reserved_peak: l.reserved,
                        ..StepLevel::default()
                    },
                )
            })
            .collect();
        self.open = Some(StepRecord {
            step,
            start_ns: ts,
            end_ns: None,
            levels,
        });
    }

    fn observe(&mut self, ev: &Event, ctx: &BusCtx) {
        if !self.started {
            // Python step() calls: step 1 runs from the first event to the first call; kept
            // only if such a call comes (an msTX step 1 starts afresh at its range)
            self.started = true;
            self.begin(1, ev.ts_ns);
            self.provisional = true;
        }
        let before = self.steps.current();
        let closed = self.steps.observe(ev, ctx);
        let now = self.steps.current();
        if let Some(s) = closed {
            if self.open.as_ref().is_some_and(|r| r.step == s) {
                if let Some(mut rec) = self.open.take() {
                    rec.end_ns = Some(ev.ts_ns);
                    self.done.push(rec);
                }
                self.provisional = false;
            }
        }
        if now != before && now > 0 {
            let same = self.open.as_ref().is_some_and(|r| r.step == now);
            if !same || self.provisional {
                self.begin(now, ev.ts_ns);
                self.provisional = false;
            }
        }
        let Some((key, level)) = self.levels.observe(ev) else {
            return;
        };
        if let Some(rec) = self.open.as_mut() {
            let s = rec.levels.entry(key).or_default();
            s.peak = s.peak.max(level.allocated);
            s.end = level.allocated;
            if let Some(r) = level.reserved {
                s.reserved_peak = Some(s.reserved_peak.map_or(r, |p| p.max(r)));
            }
            if ev.kind == memscope_core::event::EventKind::Malloc {
                s.mallocs += 1;
                s.malloc_bytes += ev.memory().map_or(0, |m| m.size);
            } else {
                s.frees += 1;
            }
        }
    }

    /// Steps so far, in order; the step still open (if any) last, without an end.
    pub fn records(&self) -> Vec<StepRecord> {
        let mut v = self.done.clone();
        if let Some(r) = self.open.as_ref().filter(|_| !self.provisional) {
            v.push(r.clone());
        }
        v
    }
}

impl Layer for StepStatsLayer {
    fn name(&self) -> &'static str {
        "step-stats"
    }

    fn on_event(
        &mut self,
        ev: &mut Event,
        ctx: &BusCtx,
        _: &mut Vec<Event>,
    ) -> Result<Flow, BusError> {
        self.observe(ev, ctx);
        Ok(Flow::Pass)
    }

    fn finish(
        &mut self,
        ctx: &BusCtx,
        _out: &mut Vec<Event>,
        report: &mut Vec<ReportSection>,
    ) -> Result<(), BusError> {
        let recs = self.records();
        let mut lines = Vec::new();
        if recs.is_empty() {
            lines.push("No step seen (msTX \"step start\" ranges or Python step() calls).".into());
        }
        for r in &recs {
            let dur = r.end_ns.map_or("open".to_owned(), |e| {
                format!("{:.3} ms", e.saturating_sub(r.start_ns) as f64 / 1e6)
            });
            let levels: Vec<String> = r
                .levels
                .iter()
                .map(|(k, l)| {
                    format!(
                        "{}@{} peak {} end {}",
                        k.label(),
                        k.device.to_text(),
                        l.peak,
                        l.end
                    )
                })
                .collect();
            lines.push(format!("step {} ({dur}): {}", r.step, levels.join(", ")));
        }
        let sfx = ctx.pid.map_or(String::new(), |p| format!(" (pid {p})"));
        report.push(ReportSection {
            title: format!("Steps{sfx}"),
            lines,
            full: None,
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memscope_core::bus::Bus;
    use memscope_core::event::{Attrs, Device, EventKind, EventType, MemoryAttrs};

    fn ev(id: u64, t: EventType, name: Option<&str>) -> Event {
        let mut e = Event::new(t, id * 10, 1, 1);
        e.id = id;
        e.name = name.map(str::to_owned);
        e.device = Device::Npu(0);
        e
    }

    fn pool(id: u64, kind: EventKind, used: i64) -> Event {
        let mut e = ev(id, EventType::Pta, None);
        e.kind = kind;
        e.ptr = Some(0x100 + id);
        e.attrs = Attrs::Memory(MemoryAttrs {
            size: 8,
            used: Some(used),
            total: Some(1 << 20),
            ..MemoryAttrs::default()
        });
        e
    }

    fn range(id: u64, t: EventType, rid: u64) -> Event {
        let mut e = ev(id, t, Some("step start"));
        e.attrs = Attrs::Pairs(vec![("range_id".into(), rid.to_string())]);
        e
    }

    #[test]
    fn steps_record_peak_end_and_rows_per_level_between_step_ranges() {
        let layer = StepStatsLayer::new();
        let mut bus = Bus::new(Some(1), vec![Box::new(layer)]);
        let evs = vec![
            pool(1, EventKind::Malloc, 100),
            range(2, EventType::RangeStart, 1),
            pool(3, EventKind::Malloc, 300),
            pool(4, EventKind::Free, 200),
            range(5, EventType::RangeEnd, 1),
            range(6, EventType::RangeStart, 2),
            pool(7, EventKind::Malloc, 250),
        ];
        // drive the layer directly to read its records afterwards
        let mut l = StepStatsLayer::new();
        let mut ctx = BusCtx::default();
        let mut out = Vec::new();
        for e in evs.clone() {
            ctx.steps.observe(&e);
            l.feed(e, &ctx, &mut out).unwrap();
        }
        for e in evs {
            bus.push(e).unwrap();
        }
        let recs = l.records();
        assert_eq!(recs.len(), 2);
        assert_eq!(
            (recs[0].step, recs[0].start_ns, recs[0].end_ns),
            (1, 20, Some(50))
        );
        let s1 = recs[0].levels.values().next().unwrap();
        assert_eq!(
            (s1.start, s1.peak, s1.end, s1.mallocs, s1.frees),
            (100, 300, 200, 1, 1)
        );
        assert_eq!(s1.reserved_peak, Some(1 << 20));
        assert_eq!((recs[1].step, recs[1].end_ns), (2, None));
        let s2 = recs[1].levels.values().next().unwrap();
        assert_eq!((s2.start, s2.peak, s2.end), (200, 250, 250));
        assert_eq!(bus.finish().unwrap()[0].lines.len(), 2);
    }

    #[test]
    fn python_step_calls_end_step_one_which_began_with_the_first_event() {
        let mut l = StepStatsLayer::new();
        let ctx = BusCtx::default();
        let mut out = Vec::new();
        l.feed(pool(1, EventKind::Malloc, 10), &ctx, &mut out)
            .unwrap();
        l.feed(ev(2, EventType::Step, None), &ctx, &mut out)
            .unwrap();
        l.feed(pool(3, EventKind::Malloc, 20), &ctx, &mut out)
            .unwrap();
        l.feed(ev(4, EventType::Step, None), &ctx, &mut out)
            .unwrap();
        let recs = l.records();
        assert_eq!(recs.len(), 3);
        assert_eq!(
            (recs[0].step, recs[0].start_ns, recs[0].end_ns),
            (1, 10, Some(20))
        );
        assert_eq!(
            (recs[1].step, recs[1].start_ns, recs[1].end_ns),
            (2, 20, Some(40))
        );
        assert_eq!(recs[1].levels.values().next().unwrap().peak, 20);
        assert_eq!((recs[2].step, recs[2].end_ns), (3, None));
    }
}
