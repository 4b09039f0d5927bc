//! From the analyses' results to the page's model: series points, live-set views (trees,
//! sites, blocks), allocators, even thinning of long lists, and times made relative to the run.

use std::collections::{BTreeMap, HashMap};

use memscope_analysis::attribution::site_of;
use memscope_analysis::decompose::DecomposeRow;
use memscope_analysis::levels::LevelKey;
use memscope_analysis::peak::{Group, LiveSet, PeakResult};

use crate::model::*;
use crate::series::Series;
use crate::tree::{label, TreeBuilder};
use crate::Budget;

/// `0x` and 16 hex digits.
pub fn hex(a: u64) -> String {
    format!("0x{a:016x}")
}

/// Keeps every k-th item so that at most `cap` remain (always the last one too).
pub fn thin_vec<T>(v: Vec<T>, cap: usize) -> Vec<T> {
    thin(v, cap).0
}

/// As [`thin_vec`], also returning how many items were left out.
pub fn thin<T>(v: Vec<T>, cap: usize) -> (Vec<T>, u64) {
    let n = v.len();
    if n <= cap || cap == 0 {
        return (v, 0);
    }
    // cap - 1 evenly spaced items, then the last one
    let stride = (n - 1).div_ceil(cap.saturating_sub(1).max(1));
    let kept: Vec<T> = v
        .into_iter()
        .enumerate()
        .filter(|(i, _)| i % stride == 0 || *i == n - 1)
        .map(|(_, x)| x)
        .collect();
    let omitted = (n - kept.len()) as u64;
    (kept, omitted)
}

/// A decimated series as the page plots it.
pub fn series_data(k: &LevelKey, reserved: bool, s: &Series) -> SeriesData {
    let what = if reserved { "reserved" } else { "allocated" };
    series_of(k.device.to_text(), k.label(), what, s)
}

/// A plotted series of `device`'s `pool` (`what`: `allocated`, `reserved`, `sampled`).
pub fn series_of(device: String, pool: String, what: &'static str, s: &Series) -> SeriesData {
    let pts = s.points();
    let (peak_t, peak_v) = s.peak().unwrap_or((0, 0));
    SeriesData {
        device,
        pool,
        what,
        t: pts.iter().map(|p| p.0).collect(),
        v: pts.iter().map(|p| p.1).collect(),
        peak_t,
        peak_v,
        last_v: s.last().map_or(0, |l| l.1),
        raw_points: s.raw_points(),
    }
}

fn view(
    r: &PeakResult,
    set: &LiveSet,
    owners: impl Iterator<Item = (String, i64)>,
    budget: &Budget,
) -> LiveView {
    let mut ob = TreeBuilder::new("all");
    for (o, bytes) in owners {
        if bytes > 0 {
            ob.add(o.split('@').filter(|l| !l.is_empty()), bytes as u64, 0);
        }
    }
    let stack_tree = |groups: &[(u32, Group)], inverted| {
        if groups.iter().all(|(s, _)| *s == 0) {
            return None;
        }
        let mut tb = TreeBuilder::new("all");
        for (s, g) in groups {
            tb.add_stack(r.text(*s), g.bytes, g.blocks, inverted);
        }
        Some(tb.finish(budget.tree_nodes))
    };
    let py = stack_tree(&set.by_py, false);
    let c = stack_tree(&set.by_c, false);
    let py_inverted = stack_tree(&set.by_py, true);
    let c_inverted = stack_tree(&set.by_c, true);
    let (sites, kind) = sites(r, set, budget);
    let blocks = set
        .top
        .iter()
        .map(|b| {
            let frame = site_of(nonempty(r.text(b.py)), nonempty(r.text(b.c)))
                .map(|s| s.label())
                .unwrap_or_default();
            BlockRow {
                id: b.id,
                t: b.ts_ns,
                size: b.size,
                addr: hex(b.addr),
                owner: r.text(b.owner).to_owned(),
                under: r.text(b.under).to_owned(),
                frame: label(&frame),
            }
        })
        .collect();
    LiveView {
        owners: ob.finish(budget.tree_nodes),
        py,
        c,
        py_inverted,
        c_inverted,
        sites,
        site_kind: kind,
        blocks,
    }
}

fn nonempty(s: &str) -> Option<&str> {
    (!s.is_empty()).then_some(s)
}

/// The top allocation sites of a live set and what a site is: with stacks, the first frame of
/// the user's code ([`memscope_analysis::attribution`]: Python over C, library and interpreter
/// frames skipped) with its caller, so a helper is split by who called it; without, the op or
/// kernel the blocks were allocated under.
fn sites(r: &PeakResult, set: &LiveSet, budget: &Budget) -> (Vec<SiteRow>, &'static str) {
    type Key = (String, Option<String>, &'static str);
    let mut m: HashMap<Key, SiteRow> = HashMap::new();
    let stacked = set.by_stacks.iter().any(|((p, c), _)| *p != 0 || *c != 0);
    let mut add = |key: Key, g: &Group, stack: String| {
        let e = m.entry(key.clone()).or_insert_with(|| SiteRow {
            site: label(&key.0),
            caller: key.1.as_deref().map(label),
            rule: key.2,
            bytes: 0,
            blocks: 0,
            stack: String::new(),
            top: 0,
        });
        e.bytes += g.bytes;
        e.blocks += g.blocks;
        // "full stack on demand": the stacks of the site's largest group
        if g.bytes > e.top {
            e.top = g.bytes;
            e.stack = stack;
        }
    };
    let kind = if stacked {
        for ((p, c), g) in &set.by_stacks {
            let (py, c) = (nonempty(r.text(*p)), nonempty(r.text(*c)));
            let key = match site_of(py, c) {
                Some(s) => (s.frame, s.caller, s.rule.describe()),
                None => ("(no stack)".to_owned(), None, ""),
            };
            let mut stack = String::new();
            for (name, t) in [("Python", py), ("C", c)] {
                if let Some(t) = t.filter(|t| t.trim() != "NA") {
                    stack.push_str(&format!("Call Stack({name}):\n{t}"));
                }
            }
            add(key, g, stack);
        }
        "first frame of your code, by caller"
    } else {
        for (u, g) in &set.by_under {
            let name = match r.text(*u) {
                "" => "(outside any op)".to_owned(),
                n => n.to_owned(),
            };
            add((name, None, ""), g, String::new());
        }
        "op/kernel"
    };
    let mut sites: Vec<SiteRow> = m.into_values().collect();
    sites.sort_by(|a, b| {
        b.bytes
            .cmp(&a.bytes)
            .then(a.site.cmp(&b.site))
            .then(a.caller.cmp(&b.caller))
    });
    sites.truncate(budget.table_rows.min(1000));
    (sites, kind)
}

/// The page's allocators: peak and end live sets with owners from decompose's rows.
pub fn allocators(r: &PeakResult, rows: &[DecomposeRow], budget: &Budget) -> Vec<AllocatorData> {
    r.allocators
        .iter()
        .map(|a| {
            let mine: Vec<&DecomposeRow> = rows
                .iter()
                .filter(|d| d.device == a.device && d.pool == a.pool)
                .collect();
            let mut at = BTreeMap::new();
            at.insert(
                "peak",
                view(
                    r,
                    &a.peak,
                    mine.iter().map(|d| (d.owner.clone(), d.peak)),
                    budget,
                ),
            );
            at.insert(
                "end",
                view(
                    r,
                    &a.end,
                    mine.iter().map(|d| (d.owner.clone(), d.end)),
                    budget,
                ),
            );
            AllocatorData {
                device: a.device.to_text(),
                pool: a.pool.as_str().to_owned(),
                peak: a.peak.total.bytes,
                peak_t: a.peak_ts_ns,
                peak_blocks: a.peak.total.blocks,
                end: a.end.total.bytes,
                end_blocks: a.end.total.blocks,
                at,
            }
        })
        .collect()
}

/// Shifts every time of `p` to be relative to `t0` (ns).
pub fn rebase(p: &mut ProcessData, t0: u64) {
    let r = |t: &mut u64| *t = t.saturating_sub(t0);
    r(&mut p.start);
    r(&mut p.end);
    let extra = p
        .roles
        .series
        .iter_mut()
        .chain(p.fragmentation.series.iter_mut());
    for s in p
        .series
        .iter_mut()
        .chain(p.headline.iter_mut())
        .chain(extra)
    {
        s.t.iter_mut().for_each(r);
        r(&mut s.peak_t);
    }
    for s in &mut p.steps {
        r(&mut s.start);
        if let Some(e) = s.end.as_mut() {
            r(e);
        }
    }
    p.marks.iter_mut().for_each(|m| r(&mut m.t));
    for l in &mut p.leaks.pool {
        if let Some(t) = l.t.as_mut() {
            r(t);
        }
    }
    for a in &mut p.allocators {
        r(&mut a.peak_t);
        for v in a.at.values_mut() {
            v.blocks.iter_mut().for_each(|b| r(&mut b.t));
        }
    }
    p.inefficient.blocks.iter_mut().for_each(|b| r(&mut b.t));
    p.fragmentation
        .verdicts
        .iter_mut()
        .for_each(|v| r(&mut v.t));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thinning_keeps_an_even_share_and_the_last_item() {
        let (v, omitted) = thin((0..10).collect::<Vec<_>>(), 4);
        assert_eq!(v, vec![0, 3, 6, 9]);
        assert_eq!(omitted, 6);
    }
}
