//! Collector side: HOST records → `MALLOC`/`FREE` events of Event Type `HOST` on device `cpu`.
//!
//! * Attr: `allocation_id` (per process, shared counter of `TypeCtx`), `addr`, `size` (FREE:
//!   the block's size), `total` = live host bytes of the process after the event.
//! * `Call Stack(C)` of MALLOC rows: the allocation stack symbolised with the process's module
//!   map (`memscope_collect::symbolize`, through `TypeCtx::c_stack_text`), one frame per line,
//!   innermost first; cached per stack id.
//! * A FREE of an address that is not live (allocated before tracing started, by the parent
//!   of a fork child, in an untraced context, by a library opened with `RTLD_DEEPBIND`, or
//!   while its MALLOC was dropped) gives no row and no log line (these are normal,
//!   not the program's fault); they are only counted. A MALLOC at an address that is still live
//!   (its FREE was not seen) first closes the old block with a synthetic FREE (`shadow:true`), as
//!   the pools do.
//! * Blocks still live when the process ends get no FREE: they are what the leak summary
//!   ([`crate::leaks`]) reports.
//! * Mapped memory (`MEMSCOPE_HOST_MMAP=1`) has its own Event Type, `HOST_MMAP` (so leak and
//!   decompose figures keep heap and mapped bytes apart); its `total` is the live mapped bytes.
//!   The typer keeps the mapped page ranges (`crate::maps`), so live and peak mapped bytes are
//!   what is mapped: a mapping is one MALLOC row; a `munmap` or a `MAP_FIXED` overlay that
//!   covers part of it gives a FREE of the mapping and a MALLOC (new `allocation_id`, same call
//!   stack) for each piece still mapped; an `mremap` ends the old range and maps the new one.
#![forbid(unsafe_code)]

use crate::maps::{MapOp, Maps};
use crate::row::{host_row, Block};
use memscope_collect::adapter::{TypeCtx, Typer};
use memscope_core::event::{Event, EventKind, EventType};
use memscope_wire::Record;

/// The HOST typer of one process.
#[derive(Default)]
pub struct HostTyper {
    live: crate::addr_hash::AddrMap<Block>,
    maps: Maps,
    total: i64,
    unknown_frees: u64,
    /// Process image (exec'd program) the live blocks belong to.
    image: usize,
}

impl HostTyper {
    /// A typer with no live blocks.
    pub fn new() -> HostTyper {
        HostTyper::default()
    }

    /// Frees of addresses that were not live (ignored).
    pub fn unknown_frees(&self) -> u64 {
        self.unknown_frees
    }

    #[allow(clippy::too_many_arguments)]
    fn event(
        &self,
        ctx: &TypeCtx,
        kind: EventKind,
        ts: u64,
        tid: u32,
        addr: u64,
        b: Block,
        shadow: bool,
    ) -> Event {
        host_row(
            ctx,
            EventType::Host,
            kind,
            ts,
            tid,
            addr,
            b,
            self.total,
            shadow,
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn malloc(
        &mut self,
        ctx: &mut TypeCtx,
        tid: u32,
        ts: u64,
        addr: u64,
        size: u64,
        stack: u32,
        out: &mut Vec<Event>,
    ) {
        if let Some(old) = self.live.remove(&addr) {
            self.total -= old.size as i64;
            ctx.warn(format!("HOST: block 0x{addr:x} allocated again before its free was seen; closed with a synthetic FREE"));
            out.push(self.event(ctx, EventKind::Free, ts, tid, addr, old, true));
        }
        let b = Block {
            id: ctx.next_allocation_id(),
            size,
        };
        self.total += size as i64;
        self.live.insert(addr, b);
        let mut e = self.event(ctx, EventKind::Malloc, ts, tid, addr, b, false);
        e.c_stack = ctx.c_stack_text(stack);
        out.push(e);
    }

    fn free(&mut self, ctx: &mut TypeCtx, tid: u32, ts: u64, addr: u64, out: &mut Vec<Event>) {
        match self.live.remove(&addr) {
            Some(b) => {
                self.total -= b.size as i64;
                out.push(self.event(ctx, EventKind::Free, ts, tid, addr, b, false));
            }
            None => self.unknown_frees += 1,
        }
    }

    /// `exec` replaced the process image: the old image's heap and mappings are gone with it.
    /// Closes every block still live with a synthetic FREE (`shadow:true`, msMemScope's mark for
    /// rows it makes up) so the new program is not charged with them.
    fn exec_boundary(&mut self, ctx: &mut TypeCtx, tid: u32, ts: u64, out: &mut Vec<Event>) {
        let mut heap: Vec<(u64, Block)> = self.live.drain().collect();
        heap.sort_by_key(|(a, b)| (b.id, *a));
        for (addr, b) in heap {
            self.total -= b.size as i64;
            out.push(self.event(ctx, EventKind::Free, ts, tid, addr, b, true));
        }
        self.maps.close_all(ctx, tid, ts, out);
    }

    /// Rows of the mappings' page ranges after `op`.
    fn mapping(&mut self, ctx: &mut TypeCtx, tid: u32, op: MapOp, out: &mut Vec<Event>) {
        let mut stacks = Vec::new();
        self.maps.apply(ctx, tid, op, out, &mut stacks);
        for (i, stack) in stacks {
            if let Some(e) = out.get_mut(i) {
                e.c_stack = ctx.c_stack_text(stack);
            }
        }
    }
}

impl Typer for HostTyper {
    fn type_record(
        &mut self,
        ctx: &mut TypeCtx,
        tid: u32,
        rec: &Record<Box<[u8]>>,
        out: &mut Vec<Event>,
    ) -> bool {
        if ctx.image() != self.image {
            if let Some(ts) = rec.ts().filter(|_| {
                matches!(
                    rec,
                    Record::Malloc { .. }
                        | Record::Free { .. }
                        | Record::Mmap { .. }
                        | Record::Munmap { .. }
                        | Record::Mremap { .. }
                )
            }) {
                self.exec_boundary(ctx, tid, ts, out);
                self.image = ctx.image();
            }
        }
        match rec {
            Record::Malloc {
                ts,
                addr,
                size,
                stack,
            } => self.malloc(ctx, tid, *ts, *addr, *size, *stack, out),
            Record::Free { ts, addr } => self.free(ctx, tid, *ts, *addr, out),
            Record::Mmap {
                ts,
                addr,
                size,
                stack,
            } => {
                let op = MapOp::Map {
                    ts: *ts,
                    addr: *addr,
                    size: *size,
                    stack: *stack,
                };
                self.mapping(ctx, tid, op, out)
            }
            Record::Munmap { ts, addr, size } => {
                let op = MapOp::Unmap {
                    ts: *ts,
                    addr: *addr,
                    size: *size,
                };
                self.mapping(ctx, tid, op, out)
            }
            Record::Mremap {
                ts,
                old_addr,
                old_size,
                new_addr,
                new_size,
                keep_old,
            } => {
                let op = MapOp::Remap {
                    ts: *ts,
                    old: (*old_addr, *old_size),
                    new: (*new_addr, *new_size),
                    keep_old: *keep_old,
                };
                self.mapping(ctx, tid, op, out)
            }
            _ => return false,
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memscope_core::event::{Device, MemoryAttrs};

    fn run(recs: &[Record<Box<[u8]>>]) -> Vec<Event> {
        let mut ctx = TypeCtx::new(7, vec![]);
        let mut t = HostTyper::new();
        let mut out = Vec::new();
        for r in recs {
            assert!(t.type_record(&mut ctx, 9, r, &mut out));
        }
        out
    }

    fn mem(e: &Event) -> &MemoryAttrs {
        e.memory().unwrap()
    }

    #[test]
    fn malloc_free_pairs_share_ids_and_total_counts_live_bytes() {
        let ev = run(&[
            Record::Malloc {
                ts: 1,
                addr: 0x100,
                size: 10,
                stack: 0,
            },
            Record::Malloc {
                ts: 2,
                addr: 0x200,
                size: 20,
                stack: 0,
            },
            Record::Free { ts: 3, addr: 0x100 },
            Record::Free { ts: 4, addr: 0x999 },
            Record::Free { ts: 5, addr: 0x200 },
        ]);
        let got: Vec<_> = ev
            .iter()
            .map(|e| (e.kind, mem(e).allocation_id, mem(e).size, mem(e).total))
            .collect();
        assert_eq!(
            got,
            vec![
                (EventKind::Malloc, 1, 10, Some(10)),
                (EventKind::Malloc, 2, 20, Some(30)),
                (EventKind::Free, 1, 10, Some(20)),
                (EventKind::Free, 2, 20, Some(0)),
            ]
        );
        assert!(ev.iter().all(|e| e.event_type == EventType::Host
            && e.device == Device::Cpu
            && e.pid == Some(7)));
    }

    #[test]
    fn frees_of_blocks_never_seen_are_counted_silently() {
        let mut ctx = TypeCtx::new(7, vec![]);
        let mut t = HostTyper::new();
        let mut out = Vec::new();
        for addr in [0x999, 0x998] {
            assert!(t.type_record(&mut ctx, 9, &Record::Free { ts: 1, addr }, &mut out));
        }
        assert!(out.is_empty());
        assert_eq!(t.unknown_frees(), 2);
        assert!(ctx.take_warnings().is_empty());
    }

    #[test]
    fn a_second_malloc_at_a_live_address_closes_the_old_block() {
        let ev = run(&[
            Record::Malloc {
                ts: 1,
                addr: 0x100,
                size: 10,
                stack: 0,
            },
            Record::Malloc {
                ts: 2,
                addr: 0x100,
                size: 5,
                stack: 0,
            },
        ]);
        assert_eq!(ev.len(), 3);
        assert!(
            mem(&ev[1]).shadow && ev[1].kind == EventKind::Free && mem(&ev[1]).allocation_id == 1
        );
        assert_eq!(mem(&ev[2]).total, Some(5));
    }

    #[test]
    fn mappings_are_host_mmap_rows_apart_from_the_heap_totals() {
        let ev = run(&[
            Record::Malloc {
                ts: 1,
                addr: 0x100,
                size: 10,
                stack: 0,
            },
            Record::Mmap {
                ts: 2,
                addr: 0x10000,
                size: 4096,
                stack: 0,
            },
            Record::Mmap {
                ts: 3,
                addr: 0x20000,
                size: 8192,
                stack: 0,
            },
            Record::Munmap {
                ts: 4,
                addr: 0x10000,
                size: 0x20000,
            },
            Record::Free { ts: 5, addr: 0x100 },
        ]);
        let got: Vec<_> = ev
            .iter()
            .map(|e| (e.kind, e.event_type, mem(e).size, mem(e).total))
            .collect();
        use EventType::{Host, HostMmap};
        assert_eq!(
            got,
            vec![
                (EventKind::Malloc, Host, 10, Some(10)),
                (EventKind::Malloc, HostMmap, 4096, Some(4096)),
                (EventKind::Malloc, HostMmap, 8192, Some(12288)),
                (EventKind::Free, HostMmap, 4096, Some(8192)),
                (EventKind::Free, HostMmap, 8192, Some(0)),
                (EventKind::Free, Host, 10, Some(0)),
            ]
        );
        assert!(ev.iter().all(|e| mem(e).extra.is_empty()));
    }
}
