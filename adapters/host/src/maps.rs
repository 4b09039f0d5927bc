//! Mapped memory of the HOST adapter (`MEMSCOPE_HOST_MMAP=1`) as page ranges, so that live and
//! peak mapped bytes equal what the process has mapped (collector side, safe code).
//!
//! The kernel maps and unmaps whole pages (the probe records page-rounded lengths), and a
//! mapping's pages can go piece by piece. Rows (Event Type `HOST_MMAP`, device `cpu`, `total` =
//! live mapped bytes after the row):
//!
//! * `mmap` of `[a, a+n)`: first whatever was mapped in that range ends (a `MAP_FIXED` overlay
//!   replaces those pages; without `MAP_FIXED` the kernel only returns free ranges), then one
//!   MALLOC of the new mapping.
//! * `munmap` of `[a, a+n)`: every mapping it touches gets a FREE (its whole range, its own
//!   `allocation_id`), then one MALLOC per piece still mapped — head and/or tail — with a new
//!   `allocation_id` and the mapping's call stack. Unmapping pages that hold no mapping writes
//!   nothing.
//! * `mremap` from `[o, o+n)` to `[p, p+m)`: the old range is unmapped as above (unless the old
//!   range stays mapped: an old size of 0 or `MREMAP_DONTUNMAP`), then `[p, p+m)` is mapped, with
//!   the call stack of the mapping that held `o`.
//!
//! So every MALLOC row has at most one FREE row with its `allocation_id`, and summing MALLOC and
//! FREE sizes in row order gives the mapped bytes at each point (a split lowers the sum before it
//! raises it again: the peak is never overstated).

use crate::row::{host_row, Block};
use memscope_collect::adapter::TypeCtx;
use memscope_core::event::{Event, EventKind, EventType};
use std::collections::BTreeMap;

/// One change of the mapped ranges (sizes already rounded to pages by the probe).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapOp {
    /// `mmap` returned `addr` for `size` bytes.
    Map {
        /// Time.
        ts: u64,
        /// Start.
        addr: u64,
        /// Bytes.
        size: u64,
        /// Interned call stack id (0: none).
        stack: u32,
    },
    /// `munmap(addr, size)` succeeded.
    Unmap {
        /// Time.
        ts: u64,
        /// Start.
        addr: u64,
        /// Bytes.
        size: u64,
    },
    /// `mremap` moved `old` (start, bytes) to `new`.
    Remap {
        /// Time.
        ts: u64,
        /// Old start and bytes.
        old: (u64, u64),
        /// New start and bytes.
        new: (u64, u64),
        /// The old range stays mapped.
        keep_old: bool,
    },
}

#[derive(Clone, Copy, Debug)]
struct Mapping {
    end: u64,
    id: u64,
    stack: u32,
}

/// The live mappings of one process: disjoint `[start, end)` ranges.
#[derive(Debug, Default)]
pub struct Maps {
    live: BTreeMap<u64, Mapping>,
    total: i64,
}

/// Where rows go, and the (row index, stack id) of MALLOC rows whose stack the typer fills in.
struct Sink<'a> {
    ctx: &'a mut TypeCtx,
    tid: u32,
    ts: u64,
    out: &'a mut Vec<Event>,
    stacks: &'a mut Vec<(usize, u32)>,
}

impl Maps {
    /// Bytes mapped now.
    pub fn live_bytes(&self) -> i64 {
        self.total
    }

    /// Number of live mappings.
    pub fn len(&self) -> usize {
        self.live.len()
    }

    /// Whether nothing is mapped.
    pub fn is_empty(&self) -> bool {
        self.live.is_empty()
    }

    /// Applies `op`, pushing its rows onto `out`; `stacks` gets (index in `out`, stack id) for
    /// each MALLOC row with a stack.
    pub(crate) fn apply(
        &mut self,
        ctx: &mut TypeCtx,
        tid: u32,
        op: MapOp,
        out: &mut Vec<Event>,
        stacks: &mut Vec<(usize, u32)>,
    ) {
        let ts = match op {
            MapOp::Map { ts, .. } | MapOp::Unmap { ts, .. } | MapOp::Remap { ts, .. } => ts,
        };
        let mut s = Sink {
            ctx,
            tid,
            ts,
            out,
            stacks,
        };
        match op {
            MapOp::Map {
                addr, size, stack, ..
            } => self.map(&mut s, addr, size, stack),
            MapOp::Unmap { addr, size, .. } => self.unmap(&mut s, addr, size),
            MapOp::Remap {
                old, new, keep_old, ..
            } => {
                let stack = self
                    .live
                    .range(..=old.0)
                    .next_back()
                    .filter(|(_, m)| old.0 < m.end)
                    .map_or(0, |(_, m)| m.stack);
                if !keep_old {
                    self.unmap(&mut s, old.0, old.1);
                }
                self.map(&mut s, new.0, new.1, stack);
            }
        }
    }

    fn row(&self, s: &mut Sink<'_>, kind: EventKind, start: u64, m: Mapping) {
        let b = Block {
            id: m.id,
            size: m.end - start,
        };
        let e = host_row(
            s.ctx,
            EventType::HostMmap,
            kind,
            s.ts,
            s.tid,
            start,
            b,
            self.total,
            false,
        );
        if kind == EventKind::Malloc && m.stack != 0 {
            s.stacks.push((s.out.len(), m.stack));
        }
        s.out.push(e);
    }

    fn insert(&mut self, s: &mut Sink<'_>, start: u64, end: u64, stack: u32) {
        let m = Mapping {
            end,
            id: s.ctx.next_allocation_id(),
            stack,
        };
        self.live.insert(start, m);
        self.total += (end - start) as i64;
        self.row(s, EventKind::Malloc, start, m);
    }

    fn map(&mut self, s: &mut Sink<'_>, addr: u64, size: u64, stack: u32) {
        if size == 0 {
            return;
        }
        self.unmap(s, addr, size);
        self.insert(s, addr, addr.saturating_add(size), stack);
    }

    fn unmap(&mut self, s: &mut Sink<'_>, addr: u64, size: u64) {
        let end = addr.saturating_add(size);
        if size == 0 {
            return;
        }
        let mut hit: Vec<u64> = self
            .live
            .range(..end)
            .rev()
            .take_while(|(_, m)| m.end > addr)
            .map(|(s, _)| *s)
            .collect();
        hit.reverse();
        for start in hit {
            let Some(m) = self.live.remove(&start) else {
                continue;
            };
            self.total -= (m.end - start) as i64;
            self.row(s, EventKind::Free, start, m);
            if start < addr {
                self.insert(s, start, addr, m.stack);
            }
            if m.end > end {
                self.insert(s, end, m.end, m.stack);
            }
        }
    }

    /// The process image went away (exec): every mapping gets a synthetic FREE
    /// (`shadow:true`, no `total`).
    pub(crate) fn close_all(&mut self, ctx: &TypeCtx, tid: u32, ts: u64, out: &mut Vec<Event>) {
        for (start, m) in std::mem::take(&mut self.live) {
            self.total -= (m.end - start) as i64;
            let b = Block {
                id: m.id,
                size: m.end - start,
            };
            out.push(host_row(
                ctx,
                EventType::HostMmap,
                EventKind::Free,
                ts,
                tid,
                start,
                b,
                self.total,
                true,
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: u64 = 4096;

    /// (kind, addr, size, allocation id, total) of a row.
    type Summary = (EventKind, u64, u64, u64, i64);

    /// Applies `ops` and returns the rows' summaries and the final state.
    fn run(ops: &[MapOp]) -> (Vec<Summary>, Maps) {
        let mut ctx = TypeCtx::new(1, vec![]);
        let mut maps = Maps::default();
        let mut out = Vec::new();
        for op in ops {
            maps.apply(&mut ctx, 1, *op, &mut out, &mut Vec::new());
        }
        let rows = out
            .iter()
            .map(|e| {
                let m = e.memory().unwrap();
                assert_eq!(e.event_type, EventType::HostMmap);
                (e.kind, m.addr, m.size, m.allocation_id, m.total.unwrap())
            })
            .collect();
        (rows, maps)
    }

    fn map(addr: u64, pages: u64) -> MapOp {
        MapOp::Map {
            ts: 1,
            addr,
            size: pages * P,
            stack: 0,
        }
    }

    fn unmap(addr: u64, pages: u64) -> MapOp {
        MapOp::Unmap {
            ts: 2,
            addr,
            size: pages * P,
        }
    }

    use EventKind::{Free, Malloc};

    #[test]
    fn unmapping_the_head_page_of_four_frees_one_page() {
        let (rows, maps) = run(&[map(0x10000, 4), unmap(0x10000, 1)]);
        assert_eq!(
            rows,
            [
                (Malloc, 0x10000, 4 * P, 1, 4 * P as i64),
                (Free, 0x10000, 4 * P, 1, 0),
                (Malloc, 0x10000 + P, 3 * P, 2, 3 * P as i64),
            ]
        );
        assert_eq!(maps.live_bytes(), 3 * P as i64);
    }

    #[test]
    fn unmapping_a_tail_page_or_a_middle_page_leaves_the_rest_mapped() {
        let (_, maps) = run(&[map(0x10000, 4), unmap(0x10000 + 3 * P, 1)]);
        assert_eq!(maps.live_bytes(), 3 * P as i64);
        let (rows, maps) = run(&[map(0x10000, 4), unmap(0x10000 + P, 2)]);
        assert_eq!(maps.live_bytes(), 2 * P as i64);
        assert_eq!(maps.len(), 2);
        assert_eq!(rows[2], (Malloc, 0x10000, P, 2, P as i64));
        assert_eq!(rows[3], (Malloc, 0x10000 + 3 * P, P, 3, 2 * P as i64));
    }

    #[test]
    fn a_map_fixed_overlay_replaces_the_pages_it_covers_and_the_peak_is_what_is_mapped() {
        let (rows, maps) = run(&[map(0x10000, 2), map(0x20000, 8), map(0x20000 + 2 * P, 2)]);
        let peak = rows.iter().map(|r| r.4).max().unwrap();
        assert_eq!(peak, 10 * P as i64);
        assert_eq!(maps.live_bytes(), 10 * P as i64);
        assert_eq!(
            maps.len(),
            4,
            "head, overlay, tail of the 8-page mapping, and the first"
        );
    }

    #[test]
    fn unmapping_a_range_over_several_mappings_and_holes_ends_each() {
        let (_, maps) = run(&[
            map(0x10000, 1),
            map(0x10000 + 2 * P, 1),
            map(0x10000 + 4 * P, 2),
            unmap(0x10000, 5),
        ]);
        assert_eq!(maps.live_bytes(), P as i64);
        let (rows, _) = run(&[unmap(0x10000, 4)]);
        assert!(rows.is_empty(), "nothing mapped there: no rows");
    }

    #[test]
    fn mremap_moves_a_mapping_and_keeps_its_stack() {
        let mut ctx = TypeCtx::new(1, vec![]);
        let mut maps = Maps::default();
        let (mut out, mut stacks) = (Vec::new(), Vec::new());
        let ops = [
            MapOp::Map {
                ts: 1,
                addr: 0x10000,
                size: P,
                stack: 7,
            },
            MapOp::Remap {
                ts: 2,
                old: (0x10000, P),
                new: (0x40000, 3 * P),
                keep_old: false,
            },
            MapOp::Remap {
                ts: 3,
                old: (0x40000, 0),
                new: (0x80000, P),
                keep_old: true,
            },
        ];
        for op in ops {
            maps.apply(&mut ctx, 1, op, &mut out, &mut stacks);
        }
        assert_eq!(maps.live_bytes(), 4 * P as i64);
        let kinds: Vec<(EventKind, u64)> = out
            .iter()
            .map(|e| (e.kind, e.memory().unwrap().addr))
            .collect();
        assert_eq!(
            kinds,
            [
                (Malloc, 0x10000),
                (Free, 0x10000),
                (Malloc, 0x40000),
                (Malloc, 0x80000)
            ]
        );
        assert_eq!(stacks, [(0, 7), (2, 7), (3, 7)]);
    }
}
