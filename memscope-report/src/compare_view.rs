//! The compare view of a two-run report: memscope-core's compare analysis
//! ([`memscope_analysis::compare`]) at op and at kernel level, its rows (the largest
//! differences when there are more than the table cap, each with its position in the aligned
//! sequence) and the totals per name and device.

use std::collections::HashMap;

use memscope_analysis::compare::{compare as align, Level, Sequence};

use crate::model::{CompareAgg, CompareData, CompareLevel, CompareRowData};
use crate::Budget;

fn level(base: &Sequence, cmp: &Sequence, level: Level, budget: &Budget) -> CompareLevel {
    let res = align(base, cmp, level);
    let rows_total = res.rows.len() as u64;
    let mut agg: HashMap<(&str, u32), CompareAgg> = HashMap::new();
    for r in &res.rows {
        let a = agg
            .entry((r.name.as_str(), r.device))
            .or_insert_with(|| CompareAgg {
                name: r.name.clone(),
                device: r.device,
                base_n: 0,
                compare_n: 0,
                base: 0,
                compare: 0,
                diff: 0,
            });
        if let Some(b) = r.base {
            a.base_n += 1;
            a.base += b;
        }
        if let Some(c) = r.compare {
            a.compare_n += 1;
            a.compare += c;
        }
        a.diff = a.compare - a.base;
    }
    let names_total = agg.len() as u64;
    let mut by_name: Vec<CompareAgg> = agg.into_values().collect();
    by_name.sort_by(|a, b| {
        b.diff
            .unsigned_abs()
            .cmp(&a.diff.unsigned_abs())
            .then(a.device.cmp(&b.device))
            .then(a.name.cmp(&b.name))
    });
    by_name.truncate(budget.table_rows);
    let mut rows: Vec<CompareRowData> = res
        .rows
        .iter()
        .enumerate()
        .map(|(i, r)| CompareRowData {
            i: i as u64,
            name: r.name.clone(),
            device: r.device,
            base: r.base,
            compare: r.compare,
            diff: r.diff(),
        })
        .collect();
    if rows.len() > budget.table_rows {
        rows.sort_by(|a, b| {
            b.diff
                .unsigned_abs()
                .cmp(&a.diff.unsigned_abs())
                .then(a.i.cmp(&b.i))
        });
        rows.truncate(budget.table_rows);
        rows.sort_by_key(|r| r.i);
    }
    CompareLevel {
        level: match level {
            Level::Op => "op",
            Level::Kernel => "kernel",
        },
        rows,
        rows_total,
        by_name,
        names_total,
        notes: res.notes,
    }
}

/// Compares two runs whose sides are `[op, kernel]` sequences; levels without rows on either
/// side are left out.
pub fn compare(
    base_label: &str,
    cmp_label: &str,
    base: &[Sequence; 2],
    cmp: &[Sequence; 2],
    budget: &Budget,
) -> CompareData {
    let mut levels = Vec::new();
    for (i, l) in [Level::Op, Level::Kernel].into_iter().enumerate() {
        if base[i].devices.is_empty() && cmp[i].devices.is_empty() {
            continue;
        }
        levels.push(level(&base[i], &cmp[i], l, budget));
    }
    CompareData {
        base: base_label.to_owned(),
        compare: cmp_label.to_owned(),
        levels,
    }
}
