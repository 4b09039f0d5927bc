//! The page's answers to "what holds the memory" (issue 25): bytes by role over time, per step
//! and at each allocator's peak, the activations at their peak by module (the decompose
//! analysis and its role timeline), and the framework pools' fragmentation over time with the
//! out-of-memory verdicts (the fragmentation analysis), each exactly as `memscope analyze`
//! computes them.

use std::collections::BTreeMap;

use memscope_analysis::decompose::by_role;
use memscope_analysis::decompose::{DecomposeLayer, DecomposeRow};
use memscope_analysis::fragmentation::{Figures, FragmentationLayer, PoolKey, Verdict};
use memscope_analysis::role_timeline::N;
use memscope_core::roles::ROLES;

use crate::model::{
    ActivationData, FragData, RoleBytes, RoleStep, RoleTotals, RolesData, SeriesData, VerdictData,
};
use crate::series::Series;
use crate::Budget;

fn role_bytes(levels: &[i64]) -> RoleBytes {
    ROLES
        .iter()
        .zip(levels)
        .filter(|(_, v)| **v != 0)
        .map(|(r, v)| (*r, *v))
        .collect()
}

fn series(
    device: String,
    pool: String,
    what: &'static str,
    t: Vec<u64>,
    v: Vec<i64>,
) -> SeriesData {
    let (peak_t, peak_v) =
        t.iter().zip(&v).fold(
            (0, i64::MIN),
            |m, (t, v)| if *v > m.1 { (*t, *v) } else { m },
        );
    SeriesData {
        device,
        pool,
        what,
        last_v: v.last().copied().unwrap_or(0),
        raw_points: t.len() as u64,
        t,
        v,
        peak_t,
        peak_v: peak_v.max(0),
    }
}

/// The roles of a process from its decompose layer and rows.
pub fn roles_data(d: &DecomposeLayer, rows: &[DecomposeRow], budget: &Budget) -> RolesData {
    let t = d.timeline();
    if !t.has_roles() {
        return RolesData::default();
    }
    let totals = by_role(rows)
        .into_iter()
        .filter(|(_, r)| r[..N - 1].iter().any(|(p, e)| *p != 0 || *e != 0))
        .map(|((dev, pool), r)| RoleTotals {
            device: dev.to_text(),
            pool: pool.as_str().to_owned(),
            peak: role_bytes(&r.map(|x| x.0)),
            end: role_bytes(&r.map(|x| x.1)),
        })
        .collect::<Vec<_>>();
    let keep = |dev: &str, pool: &str| totals.iter().any(|x| x.device == dev && x.pool == pool);
    let series = t
        .series()
        .into_iter()
        .filter(|s| keep(&s.device.to_text(), s.pool.as_str()))
        .map(|s| {
            series(
                s.device.to_text(),
                s.pool.as_str().to_owned(),
                s.role,
                s.t,
                s.v,
            )
        })
        .collect();
    let mut steps: Vec<RoleStep> = Vec::new();
    for s in t.steps() {
        for ((dev, pool), a) in &s.allocs {
            if keep(&dev.to_text(), pool.as_str()) {
                steps.push(RoleStep {
                    step: s.step,
                    device: dev.to_text(),
                    pool: pool.as_str().to_owned(),
                    high: a.high.total,
                    high_roles: role_bytes(&a.high.levels),
                    low: a.low.total,
                    low_roles: role_bytes(&a.low.levels),
                });
            }
        }
    }
    let (steps, _) = crate::views::thin(steps, budget.table_rows);
    let activations = d
        .activations_at_peak()
        .into_iter()
        .map(|(dev, pool, mut m)| {
            let total = m.iter().map(|x| x.1).sum();
            m.truncate(budget.table_rows);
            ActivationData {
                device: dev.to_text(),
                pool: pool.as_str().to_owned(),
                total,
                modules: m,
            }
        })
        .collect();
    RolesData {
        any: true,
        series,
        totals,
        steps,
        activations,
    }
}

/// What the fragmentation curves plot.
const CURVES: [&str; 3] = ["free", "largest", "fragmentation"];

/// The fragmentation curves of a process, fed as its events go.
#[derive(Default)]
pub struct FragCurves {
    series: BTreeMap<(PoolKey, usize), Series>,
}

impl FragCurves {
    /// Adds the figures of the pools the last event changed.
    pub fn observe(&mut self, changes: &[(PoolKey, Figures)], ts: u64, cap: usize) {
        for (key, f) in changes {
            let (Some(l), Some(x)) = (f.largest, f.fragmentation()) else {
                continue;
            };
            let values = [f.free as i64, l as i64, (x * 1e6).round() as i64];
            for (i, v) in values.into_iter().enumerate() {
                self.series
                    .entry((*key, i))
                    .or_insert_with(|| Series::new(cap))
                    .push(ts, v);
            }
        }
    }
}

fn verdict_data(v: &Verdict) -> VerdictData {
    VerdictData {
        t: v.ts_ns,
        device: v.device.to_text(),
        step: v.step,
        kind: v.kind.as_str(),
        headline: v.headline(),
        request: v.request,
        free: v.pools.free,
        extents: v.pools.extents,
        largest: v.pools.largest,
        device_mem: v.device_mem,
        process_held: v.process_held,
        others: v.others,
        holders: v.holders.clone(),
    }
}

/// The fragmentation of a process from its layer and curves.
pub fn frag_data(layer: &FragmentationLayer, curves: FragCurves) -> FragData {
    let series = curves
        .series
        .into_iter()
        .map(|(((dev, pool), i), s)| {
            let pts = s.points();
            series(
                dev.to_text(),
                pool.as_str().to_owned(),
                CURVES[i],
                pts.iter().map(|p| p.0).collect(),
                pts.iter().map(|p| p.1).collect(),
            )
        })
        .collect();
    FragData {
        series,
        verdicts: layer.verdicts().iter().map(verdict_data).collect(),
    }
}
