//! Gap (memory fluctuation), as msMemScope's health analyzer (behaviour spec §10.2).
//!
//! Per pool (PTA, ATB, MindSpore) and device, the latest `used` value of the pool's MALLOC and
//! FREE rows is followed. From step 2 on, the minimum and maximum `used` within each step are
//! kept (starting from the level the step began with); when step S > 1 ends, its ratio
//! min/max is recorded; the largest ratio is MaxGap and the smallest MinGap (first one found on
//! ties). The table lists every judged step and then the MinGap and MaxGap rows in msMemScope's
//! layout (columns 25 wide, 4 decimals).

use std::collections::BTreeMap;

use memscope_core::bus::{BusCtx, BusError, Flow, Layer, ReportSection};
use memscope_core::event::{Device, Event, EventKind, EventType};

use super::steps::StepTracker;

/// One judged step of one pool.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GapStep {
    /// Step number.
    pub step: u32,
    /// Smallest `used` in the step, bytes.
    pub min: i64,
    /// Largest `used` in the step, bytes.
    pub max: i64,
}

impl GapStep {
    /// min/max in percent (100 when max is 0).
    pub fn ratio(&self) -> f64 {
        if self.max <= 0 {
            100.0
        } else {
            self.min as f64 / self.max as f64 * 100.0
        }
    }
}

#[derive(Default)]
struct PoolGap {
    latest: Option<i64>,
    range: Option<(i64, i64)>,
    steps: Vec<GapStep>,
}

/// The gap analysis as a bus layer (passes events on unchanged).
#[derive(Default)]
pub struct GapLayer {
    steps: StepTracker,
    pools: BTreeMap<(EventType, Device), PoolGap>,
}

fn pool_label(t: EventType) -> &'static str {
    match t {
        EventType::Pta => "PTA",
        EventType::Atb => "ATB",
        _ => "MINDSPORE",
    }
}

impl GapLayer {
    /// A fresh layer.
    pub fn new() -> GapLayer {
        GapLayer::default()
    }

    fn observe(&mut self, ev: &Event, ctx: &BusCtx) {
        let closed = self.steps.observe(ev, ctx);
        let tracking = self.steps.current() > 1;
        if matches!(ev.kind, EventKind::Malloc | EventKind::Free)
            && matches!(
                ev.event_type,
                EventType::Pta | EventType::Atb | EventType::MindSpore
            )
        {
            if let Some(used) = ev.memory().and_then(|m| m.used) {
                let p = self.pools.entry((ev.event_type, ev.device)).or_default();
                if tracking {
                    let start = p.latest.unwrap_or(used);
                    let (lo, hi) = p.range.unwrap_or((start, start));
                    p.range = Some((lo.min(used), hi.max(used)));
                }
                p.latest = Some(used);
            }
        }
        if let Some(s) = closed.filter(|s| *s > 1) {
            for p in self.pools.values_mut() {
                let range = p.range.or(p.latest.map(|l| (l, l)));
                if let Some((min, max)) = range {
                    p.steps.push(GapStep { step: s, min, max });
                }
                p.range = p.latest.map(|l| (l, l));
            }
        }
    }

    /// Judged steps per (pool, device).
    pub fn results(&self) -> Vec<((EventType, Device), Vec<GapStep>)> {
        self.pools
            .iter()
            .map(|(k, p)| (*k, p.steps.clone()))
            .collect()
    }
}

/// Console lines for one pool of one device: every step.
pub fn format_pool(pool: EventType, device: Device, steps: &[GapStep]) -> Vec<String> {
    format_pool_rows(pool, device, steps, usize::MAX)
}

/// As [`format_pool`], with at most `top` step rows (the first and the last ones, and a line
/// counting those between; the MinGap and MaxGap lines always).
pub fn format_pool_rows(
    pool: EventType,
    device: Device,
    steps: &[GapStep],
    top: usize,
) -> Vec<String> {
    let mb = |b: i64| b as f64 / 1_048_576.0;
    let mut lines = vec![format!(
        "======= {} Gap Analysis of Device {} =======",
        pool_label(pool),
        device.to_text()
    )];
    if steps.is_empty() {
        lines.push("No step after step 1 has ended; nothing to judge.".to_owned());
        return lines;
    }
    lines.push(format!(
        "{:<8}{:>25}{:>25}{:>25}",
        "Step", "MinAllocMem(MB)", "MaxAllocMem(MB)", "MinAlloc/MaxAlloc(%)"
    ));
    lines.extend(memscope_core::listing::ends(
        steps,
        top,
        |s| {
            format!(
                "{:<8}{:>25.4}{:>25.4}{:>25.4}",
                s.step,
                mb(s.min),
                mb(s.max),
                s.ratio()
            )
        },
        |n| format!("… {n} more step(s)"),
    ));
    let mut min_gap = steps[0];
    let mut max_gap = steps[0];
    for s in &steps[1..] {
        if s.ratio() > max_gap.ratio() {
            max_gap = *s;
        }
        if s.ratio() < min_gap.ratio() {
            min_gap = *s;
        }
    }
    lines.push(format!(
        "{:<8}{:>25}{:>25}{:>25}",
        "", "MinAlloc/MaxAlloc(%)", "MinAllocMem(MB)", "StepId"
    ));
    for (label, g) in [("MinGap", min_gap), ("MaxGap", max_gap)] {
        lines.push(format!(
            "{:<8}{:>25.4}{:>25.4}{:>25}",
            label,
            g.ratio(),
            mb(g.min),
            g.step
        ));
    }
    lines
}

impl Layer for GapLayer {
    fn name(&self) -> &'static str {
        "gap"
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
        let (mut shown, mut all) = (Vec::new(), Vec::new());
        for ((pool, dev), steps) in self.results() {
            shown.extend(format_pool_rows(
                pool,
                dev,
                &steps,
                memscope_core::listing::CONSOLE_TOP,
            ));
            all.extend(format_pool(pool, dev, &steps));
        }
        if all.is_empty() {
            let none = "No PTA, ATB or MindSpore rows with a used value.".to_owned();
            shown.push(none.clone());
            all.push(none);
        }
        let sfx = ctx.pid.map_or(String::new(), |p| format!(" (pid {p})"));
        report.push(ReportSection::bounded(
            format!("Memory gap{sfx}"),
            shown,
            all,
        ));
        Ok(())
    }
}
