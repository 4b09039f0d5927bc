//! Keeping the page within its budget, and the multi-process overview.
//!
//! [`fit_points`] re-decimates the largest series until all series together hold at most
//! [`Budget::total_points`]; [`shrink`] halves every cap (series buckets, table rows, tree
//! nodes, text lines) and is applied by [`crate::html::render`] until the page fits
//! [`Budget::max_bytes`].

use crate::model::*;
use crate::series::Series;
use crate::tree::prune;
use crate::views::thin_vec;

/// Re-decimates `s` to at most `cap` buckets (peaks and troughs are kept).
pub fn redecimate(s: &mut SeriesData, cap: usize) {
    let mut d = Series::new(cap);
    for (t, v) in s.t.iter().zip(&s.v) {
        d.push(*t, *v);
    }
    let pts = d.points();
    s.t = pts.iter().map(|p| p.0).collect();
    s.v = pts.iter().map(|p| p.1).collect();
}

fn all_series(data: &mut ReportData) -> Vec<&mut SeriesData> {
    data.runs
        .iter_mut()
        .flat_map(|r| r.processes.iter_mut())
        .flat_map(|p| {
            p.series
                .iter_mut()
                .chain(p.headline.iter_mut())
                .chain(p.roles.series.iter_mut())
                .chain(p.fragmentation.series.iter_mut())
        })
        .collect()
}

/// Re-decimates the largest series until every series together holds ≤ `total` points.
pub fn fit_points(data: &mut ReportData, total: usize) {
    loop {
        let mut series = all_series(data);
        let sum: usize = series.iter().map(|s| s.t.len()).sum();
        if sum <= total {
            return;
        }
        let Some(big) = series.iter_mut().max_by_key(|s| s.t.len()) else {
            return;
        };
        let n = big.t.len();
        if n <= 8 {
            return;
        }
        // each bucket gives up to 4 points
        redecimate(big, (n / 8).max(1));
    }
}

/// Halves every cap of `data` (at least 1 each); returns false when nothing can shrink more.
pub fn shrink(data: &mut ReportData) -> bool {
    let l = &mut data.limits;
    if l.series_buckets <= 16 && l.table_rows <= 10 && l.tree_nodes <= 16 {
        return false;
    }
    l.series_buckets = (l.series_buckets / 2).max(16);
    l.table_rows = (l.table_rows / 2).max(10);
    l.tree_nodes = (l.tree_nodes / 2).max(16);
    let (buckets, rows, nodes) = (l.series_buckets, l.table_rows, l.tree_nodes);
    for s in all_series(data) {
        redecimate(s, buckets);
    }
    for run in &mut data.runs {
        for p in &mut run.processes {
            p.leaks.pool.truncate(rows);
            p.leaks.hal.truncate(rows);
            p.inefficient.blocks.truncate(rows);
            let n = p.steps.len();
            p.steps = thin_vec(std::mem::take(&mut p.steps), rows);
            p.steps_omitted += (n - p.steps.len()) as u64;
            let n = p.marks.len();
            p.marks = thin_vec(std::mem::take(&mut p.marks), rows);
            p.marks_omitted += (n - p.marks.len()) as u64;
            for a in &mut p.allocators {
                for v in a.at.values_mut() {
                    v.sites.truncate(rows);
                    v.blocks.truncate(rows);
                    prune(&mut v.owners, nodes);
                    let trees = [&mut v.py, &mut v.c, &mut v.py_inverted, &mut v.c_inverted];
                    for t in trees.into_iter().flatten() {
                        prune(t, nodes);
                    }
                }
            }
            for s in &mut p.text {
                if s.lines.len() > rows {
                    let more = s.lines.len() - rows;
                    s.lines.truncate(rows);
                    s.lines.push(format!("… {more} more line(s)"));
                }
            }
        }
    }
    if let Some(c) = data.compare.as_mut() {
        for l in &mut c.levels {
            if l.rows.len() > rows {
                l.rows
                    .sort_by_key(|r| std::cmp::Reverse(r.diff.unsigned_abs()));
                l.rows.truncate(rows);
                l.rows.sort_by_key(|r| r.i);
            }
            l.by_name.truncate(rows);
        }
    }
    if let Some(d) = data.diff.as_mut() {
        for v in &mut d.views {
            if v.rows.len() > rows {
                v.rows
                    .sort_by_key(|r| std::cmp::Reverse(r.diff.unsigned_abs()));
                v.rows.truncate(rows);
            }
        }
    }
    true
}

fn metric_name(pool: &str) -> &'static str {
    match pool {
        "HAL" => "HAL device memory",
        "pools" => "framework pool memory (reserved)",
        _ => "HOST memory",
    }
}

/// One row per process with its headline series (device memory), and the imbalance of the
/// peaks of the processes measured the same way (the most device-like measure present).
pub fn overview(procs: &[ProcessData]) -> Overview {
    let rows: Vec<OverviewRow> = procs
        .iter()
        .enumerate()
        .filter_map(|(i, p)| {
            let h = p.headline.as_ref()?;
            Some(OverviewRow {
                process: i,
                label: p.label.clone(),
                devices: p.devices.clone(),
                peak: h.peak_v,
                peak_t: h.peak_t,
                end: h.last_v,
                metric: metric_name(&h.pool).to_owned(),
                events: p.events,
                leaks: p.leaks.pool_count,
                leak_bytes: p.leaks.pool_bytes,
            })
        })
        .collect();
    let best = ["HAL", "pools", "HOST"]
        .into_iter()
        .map(metric_name)
        .find(|m| rows.iter().any(|r| r.metric == *m))
        .unwrap_or("");
    let same: Vec<&OverviewRow> = rows.iter().filter(|r| r.metric == best).collect();
    let imbalance = (same.len() >= 2).then(|| {
        let max = same
            .iter()
            .max_by_key(|r| (r.peak, std::cmp::Reverse(r.process)));
        let min = same.iter().min_by_key(|r| (r.peak, r.process));
        let (max, min) = (max.map_or(0, |r| r.peak), min.map_or(0, |r| r.peak));
        let label = |v: i64| {
            same.iter()
                .find(|r| r.peak == v)
                .map_or(String::new(), |r| r.label.clone())
        };
        let mean = same.iter().map(|r| r.peak as f64).sum::<f64>() / same.len() as f64;
        Imbalance {
            max,
            max_label: label(max),
            min,
            min_label: label(min),
            mean,
            spread_pct: if max > 0 {
                (max - min) as f64 / max as f64 * 100.0
            } else {
                0.0
            },
            max_over_mean: if mean > 0.0 { max as f64 / mean } else { 1.0 },
        }
    });
    Overview {
        metric: best.to_owned(),
        rows,
        imbalance,
    }
}
