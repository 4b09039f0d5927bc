//! The +/− view of a two-run report (issue 24): the live memory of each run grouped by
//! allocation site (innermost Python frame) and by owner, at the end and at each allocator's
//! peak, compare run minus base run — the figures of `memscope diff`
//! ([`memscope_analysis::diff`]), summed over each run's processes.

use serde::Serialize;

use memscope_analysis::diff::diff;
use memscope_analysis::live_points::{By, LivePointsLayer, Point, Snapshot};
use memscope_core::bus::{BusCtx, Layer};
use memscope_core::event::Event;

use crate::Budget;

/// The groupings and points of the view, in the order of [`RunLive::snapshots`].
const VIEWS: [(By, &str); 2] = [(By::Python, "python"), (By::Owner, "owner")];
const POINTS: [&str; 2] = ["end", "peak"];

/// Follows the live memory of one run's processes.
#[derive(Default)]
pub struct RunLive {
    current: Option<Vec<LivePointsLayer>>,
    ctx: BusCtx,
    /// By (python, owner) × point (end, peak), summed over the processes.
    acc: [[Snapshot; 2]; 2],
}

impl RunLive {
    /// Feeds one event of the current process.
    pub fn push(&mut self, ev: &Event) {
        let layers = self.current.get_or_insert_with(|| {
            VIEWS
                .iter()
                .map(|(by, _)| LivePointsLayer::new(vec![Point::End, Point::Peak], *by))
                .collect()
        });
        self.ctx.steps.observe(ev);
        let mut sink = Vec::with_capacity(1);
        for l in layers.iter_mut() {
            sink.clear();
            // the layer only watches; it cannot fail
            let _ = l.on_event(&mut ev.clone(), &self.ctx, &mut sink);
        }
    }

    /// Ends the current process: its snapshots join the run's.
    pub fn end_process(&mut self) {
        let Some(layers) = self.current.take() else {
            return;
        };
        self.ctx = BusCtx::default();
        for (i, mut l) in layers.into_iter().enumerate() {
            for (j, s) in l.result().into_iter().enumerate() {
                for (k, g) in s.groups {
                    let e = self.acc[i][j].groups.entry(k).or_default();
                    e.bytes += g.bytes;
                    e.blocks += g.blocks;
                }
            }
        }
    }
}

/// One group of the view.
#[derive(Clone, Debug, Serialize)]
pub struct DiffRowData {
    /// `0`, `1`, … or `cpu`.
    pub device: String,
    /// Event Type.
    pub pool: String,
    /// Site or owner.
    pub key: String,
    /// Bytes in the base run.
    pub base: u64,
    /// Bytes in the compare run.
    pub compare: u64,
    /// compare − base.
    pub diff: i64,
    /// Blocks, compare − base.
    pub diff_blocks: i64,
}

/// One grouping at one point.
#[derive(Clone, Debug, Serialize)]
pub struct DiffTable {
    /// `python` or `owner`.
    pub by: &'static str,
    /// `end` or `peak`.
    pub point: &'static str,
    /// The groups that changed, largest growth first within each allocator.
    pub rows: Vec<DiffRowData>,
    /// Groups that changed, before the table cap.
    pub rows_total: u64,
}

/// The +/− view.
#[derive(Clone, Debug, Serialize)]
pub struct DiffData {
    /// Label of the base run.
    pub base: String,
    /// Label of the compare run.
    pub compare: String,
    /// Every grouping at every point.
    pub views: Vec<DiffTable>,
}

/// The view of two runs.
pub fn view(
    base_label: &str,
    cmp_label: &str,
    base: &RunLive,
    cmp: &RunLive,
    budget: &Budget,
) -> DiffData {
    let mut views = Vec::new();
    for (i, (_, by)) in VIEWS.iter().enumerate() {
        for (j, point) in POINTS.iter().enumerate() {
            let rows = diff(&base.acc[i][j], &cmp.acc[i][j], false);
            let rows_total = rows.len() as u64;
            let mut rows: Vec<DiffRowData> = rows
                .into_iter()
                .map(|r| DiffRowData {
                    device: r.device.to_text(),
                    pool: r.pool.as_str().to_owned(),
                    diff: r.delta_bytes(),
                    diff_blocks: r.delta_blocks(),
                    key: r.key,
                    base: r.a.bytes,
                    compare: r.b.bytes,
                })
                .collect();
            if rows.len() > budget.table_rows {
                rows.sort_by_key(|r| std::cmp::Reverse(r.diff.unsigned_abs()));
                rows.truncate(budget.table_rows);
            }
            views.push(DiffTable {
                by,
                point,
                rows,
                rows_total,
            });
        }
    }
    DiffData {
        base: base_label.to_owned(),
        compare: cmp_label.to_owned(),
        views,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memscope_core::event::{Attrs, Device, EventKind, EventType, MemoryAttrs};

    fn malloc(pid: u32, id: u64, addr: u64, size: u64, py: &str) -> Event {
        let mut e = Event::new(EventType::Pta, id, pid, 1);
        e.id = id;
        e.kind = EventKind::Malloc;
        e.device = Device::Npu(0);
        e.ptr = Some(addr);
        e.py_stack = Some(py.to_owned());
        e.attrs = Attrs::Memory(MemoryAttrs {
            addr,
            size,
            ..MemoryAttrs::default()
        });
        e
    }

    #[test]
    fn the_view_shows_what_the_compare_run_holds_more_by_site_summed_over_processes() {
        let mut base = RunLive::default();
        base.push(&malloc(1, 1, 0x10, 100, "t.py(1): f"));
        base.end_process();
        let mut cmp = RunLive::default();
        for pid in [2, 3] {
            cmp.push(&malloc(pid, 1, 0x10, 100, "t.py(1): f"));
            cmp.push(&malloc(pid, 2, 0x20, 4 << 20, "t.py(9): leak"));
            cmp.end_process();
        }
        let d = view("a", "b", &base, &cmp, &Budget::default());
        let end = d
            .views
            .iter()
            .find(|v| v.by == "python" && v.point == "end")
            .unwrap();
        assert_eq!(end.rows[0].key, "t.py(9): leak");
        assert_eq!((end.rows[0].diff, end.rows[0].diff_blocks), (8 << 20, 2));
        assert_eq!(end.rows[1].diff, 100);
        assert_eq!(d.views.len(), 4);
    }
}
