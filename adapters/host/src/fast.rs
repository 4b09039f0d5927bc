//! The HOST fast path of the collector: when HOST rows are neither written nor analysed, the
//! HOST heap records (`Malloc`, `Free`, `Module`) are accounted
//! here straight from the decoded record — no `Event` is built — with exactly the effects
//! the HOST typer followed by the leak layer ([`crate::leaks`]) would have: the same event
//! IDs and `allocation_id`s consumed, the same warnings, the same peak and live-at-exit
//! summaries. Each live block is in the leak layer's live account, keyed by its address
//! (`memscope_collect::live_account`: one map per block, shared with the HOST blocks of other
//! sources that reach the leak layer as events). Mappings
//! (`Mmap`, `Munmap`: rare, and typed as ranges) go through the HOST typer as events;
//! [`HostFast::observe`] accounts them in the same leak layer.
#![forbid(unsafe_code)]

use crate::addr_hash::AddrHasher;
use crate::leaks::HostLeaks;
use memscope_collect::adapter::TypeCtx;
use memscope_collect::fast_path::FastPath;
pub use memscope_collect::fast_path::{PyStack, Typed};
use memscope_collect::live_account::Block;
use memscope_collect::symbolize::Symbolizer;
use memscope_core::bus::ReportSection;
use memscope_core::event::Event;
use memscope_wire::Record;
use std::collections::HashMap;
use std::hash::BuildHasherDefault;

/// No Python stack (a key no stack has).
const NO_PY: u64 = u64::MAX;

/// HOST typer and leak/peak accounting of one process, without events.
#[derive(Default)]
pub struct HostFast {
    leaks: HostLeaks,
    syms: HashMap<usize, Symbolizer>,
    /// Stack group by (image << 32 | C stack id, Python stack key); emptied for an image when
    /// it gets a module.
    groups: HashMap<(u64, u64), u32, BuildHasherDefault<AddrHasher>>,
    /// The last entry of `groups` used (a loop allocates from one place many times over).
    last_group: Option<((u64, u64), u32)>,
    image: usize,
    unknown_frees: u64,
    /// Bytes of the fast path's own blocks (by address) live now.
    live_bytes: u64,
    /// Live blocks the fast path accounted (keys of its exec boundary).
    live_keys: u64,
}

/// Whether `rec` is one the fast path handles.
pub fn is_host_record<B>(rec: &Record<B>) -> bool {
    matches!(
        rec,
        Record::Malloc { .. } | Record::Free { .. } | Record::Module { .. }
    )
}

impl HostFast {
    /// No live blocks.
    pub fn new() -> HostFast {
        HostFast::default()
    }

    /// No live blocks, for a run with `cfg` (its leak summary knows whether C stacks were
    /// asked for).
    pub fn for_config(cfg: &memscope_collect::config::RunConfig) -> HostFast {
        HostFast {
            leaks: HostLeaks::new(crate::leaks::stacks_requested(cfg)),
            ..HostFast::default()
        }
    }

    /// Frees of addresses that were not live (ignored, as the typer ignores them).
    pub fn unknown_frees(&self) -> u64 {
        self.unknown_frees
    }

    fn group(&mut self, ctx: &TypeCtx, stack: u32, py: Option<PyStack<'_>>) -> u32 {
        let key = ((ctx.image() as u64) << 32) | stack as u64;
        let py_key = py.map_or(NO_PY, |p| p.key);
        if let Some((k, g)) = self.last_group {
            if k == (key, py_key) {
                return g;
            }
        }
        if let Some(&g) = self.groups.get(&(key, py_key)) {
            self.last_group = Some(((key, py_key), g));
            return g;
        }
        let py_text = py.map(|p| p.text);
        if stack == 0 {
            let g = self.leaks.stack_index(py_text, None);
            self.groups.insert((key, py_key), g);
            return g;
        }
        let Some(frames) = ctx.stack(stack) else {
            // Not defined (yet): no C text, and nothing cached (as the typer does).
            return self.leaks.stack_index(py_text, None);
        };
        let text = self.syms.entry(ctx.image()).or_default().stack_text(frames);
        let g = self.leaks.stack_index(py_text, Some(&text));
        self.groups.insert((key, py_key), g);
        g
    }

    /// Accounts HOST record `rec` (of the image `ctx` is set to, made by a thread whose
    /// Python stack is `py`) whose first event, if any, gets ID `first_id`. Returns the events
    /// it stood for, or `None` when `rec` is not a HOST record.
    pub fn record<B: AsRef<[u8]>>(
        &mut self,
        ctx: &mut TypeCtx,
        rec: &Record<B>,
        first_id: u64,
        py: Option<PyStack<'_>>,
    ) -> Option<Typed> {
        self.record_tagged(ctx, rec, first_id, py, 0)
            .map(|(t, _)| t)
    }

    /// [`HostFast::record`] of a record whose allocation has the capture's reference
    /// `capture_ref` (kept with the live block; 0: none); returns also the reference of the
    /// block a `Free` released (0: none), see `FastPath::record_tagged`.
    #[inline(always)]
    pub fn record_tagged<B: AsRef<[u8]>>(
        &mut self,
        ctx: &mut TypeCtx,
        rec: &Record<B>,
        first_id: u64,
        py: Option<PyStack<'_>>,
        capture_ref: u64,
    ) -> Option<(Typed, u64)> {
        let mut freed_ref = 0;
        // `t` is built from values, never through a reference: a count stored to the stack
        // and read back whole at once stalls (the hottest path of HOST-only runs)
        let boundary = if ctx.image() != self.image
            && !matches!(rec, Record::Module { .. })
            && is_host_record(rec)
        {
            self.image = ctx.image();
            self.exec_boundary()
        } else {
            0
        };
        let t = match *rec {
            Record::Malloc {
                ts,
                addr,
                size,
                stack,
            } => Typed {
                frees: self.malloc(ctx, (ts, addr, size, stack), py, first_id, capture_ref),
                mallocs: 1,
            },
            Record::Free { addr, .. } => match self.leaks.heap().free_tagged(addr) {
                Some((b, r)) => {
                    self.live_bytes -= b.size;
                    self.live_keys -= 1;
                    freed_ref = r;
                    Typed {
                        frees: 1,
                        mallocs: 0,
                    }
                }
                None => {
                    self.unknown_frees += 1;
                    Typed::default()
                }
            },
            Record::Module {
                base,
                start,
                size,
                ref build_id,
                ref path,
                ..
            } => {
                let image = ctx.image();
                self.syms.entry(image).or_default().add_module(
                    base,
                    start,
                    size,
                    path.as_ref(),
                    build_id.as_ref(),
                );
                // Stacks grouped before this module was known are symbolised again on next use.
                self.groups.retain(|k, _| (k.0 >> 32) as usize != image);
                self.last_group = None;
                Typed::default()
            }
            _ => return None,
        };
        Some((
            Typed {
                frees: t.frees + boundary,
                mallocs: t.mallocs,
            },
            freed_ref,
        ))
    }

    /// A `Malloc` (`ts, addr, size, stack`) whose allocation has the capture's reference
    /// `capture_ref`; returns the synthetic FREEs it made (1 when the address was still live).
    fn malloc(
        &mut self,
        ctx: &mut TypeCtx,
        (ts, addr, size, stack): (u64, u64, u64, u32),
        py: Option<PyStack<'_>>,
        first_id: u64,
        capture_ref: u64,
    ) -> u64 {
        // Consumed as the typer does: allocation ids are shared with the other pools.
        let id = ctx.next_allocation_id();
        let group = self.group(ctx, stack, py);
        let b = Block { size, group, id };
        let mut frees = 0;
        if let Some(old) =
            self.leaks
                .heap()
                .alloc_closing_tagged(addr, b, capture_ref, first_id, ts)
        {
            self.live_bytes -= old.size;
            self.live_keys -= 1;
            ctx.warn(format!("HOST: block 0x{addr:x} allocated again before its free was seen; closed with a synthetic FREE"));
            frees = 1;
        }
        self.live_bytes += size;
        self.live_keys += 1;
        frees
    }

    /// `exec` replaced the process image: every live block gets a synthetic FREE. Returns
    /// how many.
    #[cold]
    fn exec_boundary(&mut self) -> u64 {
        let mut frees = 0;
        if self.live_keys > 0 {
            frees = self
                .leaks
                .heap()
                .drain_matching(|key| key & crate::leaks::EVENT_KEY == 0);
        }
        self.live_bytes = 0;
        self.live_keys = 0;
        frees
    }

    /// Bytes of the HOST heap blocks live on the fast path now (the tracked part of a memory
    /// sample, issue 25).
    pub fn live_bytes(&self) -> u64 {
        self.live_bytes
    }

    /// Accounts an event of another source (a host block the HAL or ACL adapter typed, a
    /// mapping the HOST typer typed).
    pub fn observe(&mut self, ev: &Event) {
        self.leaks.observe(ev);
    }

    /// The peak and live-at-exit report sections (as the leak layer's).
    pub fn report(&self, pid: Option<u32>) -> Vec<ReportSection> {
        let mut v = vec![self.leaks.peak_report(pid), self.leaks.report(pid)];
        v.extend(self.leaks.maps_report(pid));
        v
    }
}

impl FastPath for HostFast {
    fn handles(&self, rec: &Record) -> bool {
        is_host_record(rec)
    }

    fn record(
        &mut self,
        ctx: &mut TypeCtx,
        rec: &Record,
        first_id: u64,
        py: Option<PyStack<'_>>,
    ) -> Option<Typed> {
        HostFast::record(self, ctx, rec, first_id, py)
    }

    fn record_tagged(
        &mut self,
        ctx: &mut TypeCtx,
        rec: &Record,
        first_id: u64,
        py: Option<PyStack<'_>>,
        capture_ref: u64,
    ) -> Option<(Typed, u64)> {
        HostFast::record_tagged(self, ctx, rec, first_id, py, capture_ref)
    }

    fn live_bytes(&self) -> u64 {
        HostFast::live_bytes(self)
    }

    fn observe(&mut self, ev: &Event) {
        HostFast::observe(self, ev)
    }

    fn report(&self, pid: Option<u32>) -> Vec<ReportSection> {
        HostFast::report(self, pid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::leaks::Peak;

    fn malloc(ts: u64, addr: u64, size: u64) -> Record {
        Record::Malloc {
            ts,
            addr,
            size,
            stack: 0,
        }
    }

    #[test]
    fn a_free_hands_back_the_capture_reference_its_malloc_was_given() {
        let mut f = HostFast::new();
        let mut ctx = TypeCtx::new(7, vec![]);
        let free = |addr| -> Record { Record::Free { ts: 9, addr } };
        let t = f.record_tagged(&mut ctx, &malloc(1, 0x10, 100), 0, None, 41);
        assert_eq!(t.map(|(t, r)| (t.mallocs, r)), Some((1, 0)));
        f.record_tagged(&mut ctx, &malloc(2, 0x20, 50), 1, None, 42);
        // the address allocated again before its free was seen: its new reference counts
        f.record_tagged(&mut ctx, &malloc(3, 0x10, 10), 2, None, 43);
        let back = |f: &mut HostFast, ctx: &mut TypeCtx, addr| {
            f.record_tagged(ctx, &free(addr), 5, None, 0)
                .map(|(_, r)| r)
        };
        assert_eq!(back(&mut f, &mut ctx, 0x20), Some(42));
        assert_eq!(back(&mut f, &mut ctx, 0x10), Some(43));
        // freed already, never allocated: no reference
        assert_eq!(back(&mut f, &mut ctx, 0x10), Some(0));
        assert_eq!(back(&mut f, &mut ctx, 0x99), Some(0));
    }

    #[test]
    fn fast_path_counts_events_and_peak_like_the_typer_and_leak_layer() {
        let mut f = HostFast::new();
        let mut ctx = TypeCtx::new(7, vec![]);
        let mut id = 0;
        let mut feed = |f: &mut HostFast, ctx: &mut TypeCtx, r: Record| {
            let t = f.record(ctx, &r, id, None).unwrap();
            id += t.frees + t.mallocs;
            t
        };
        assert_eq!(feed(&mut f, &mut ctx, malloc(1, 0x10, 100)).mallocs, 1);
        assert_eq!(feed(&mut f, &mut ctx, malloc(2, 0x20, 50)).mallocs, 1);
        // Unknown free: no event.
        let t = feed(&mut f, &mut ctx, Record::Free { ts: 3, addr: 0x99 });
        assert_eq!(t, Typed::default());
        assert_eq!(f.unknown_frees(), 1);
        // Reused address: synthetic FREE, then the MALLOC.
        let t = feed(&mut f, &mut ctx, malloc(4, 0x10, 10));
        assert_eq!(
            t,
            Typed {
                frees: 1,
                mallocs: 1
            }
        );
        assert_eq!(ctx.take_warnings().len(), 1);
        let t = feed(&mut f, &mut ctx, Record::Free { ts: 5, addr: 0x20 });
        assert_eq!(t.frees, 1);
        assert_eq!(ctx.next_allocation_id(), 4, "three allocation ids consumed");
        assert_eq!(
            f.leaks.peak(),
            Peak {
                bytes: 150,
                blocks: 2,
                id: 1,
                ts_ns: 2
            }
        );
        let r = f.report(Some(7));
        assert_eq!(r[0].title, "HOST peak (pid 7): 150 bytes in 2 block(s)");
        assert_eq!(
            r[1].title,
            "HOST memory live at exit (pid 7): 1 block(s), 10 bytes"
        );
        assert_eq!(f.live_bytes(), 10);
        // An exec: the live block gets a synthetic FREE before the new image's first record.
        ctx.set_image(1);
        let t = feed(&mut f, &mut ctx, Record::Free { ts: 6, addr: 0x10 });
        assert_eq!(t.frees, 1);
        assert_eq!(
            f.report(None)[1].title,
            "HOST memory live at exit: 0 block(s), 0 bytes"
        );
        assert_eq!(f.live_bytes(), 0);
    }

    #[test]
    fn fast_path_matches_the_typer_and_leak_layer_on_a_random_sequence() {
        use crate::typer::HostTyper;
        use memscope_collect::adapter::Typer;
        use memscope_core::bus::{BusCtx, Layer};
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut rnd = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let (mut typer, mut leaks, mut fast) =
            (HostTyper::new(), HostLeaks::default(), HostFast::new());
        // Beside the fast path, mappings go through a typer as events (as in the collector).
        let mut ftyper = HostTyper::new();
        let (mut tctx, mut fctx) = (TypeCtx::new(3, vec![]), TypeCtx::new(3, vec![]));
        let (mut id_t, mut id_f) = (0u64, 0u64);
        let bctx = BusCtx::default();
        for i in 0..20_000u64 {
            let addr = 0x1000 + 16 * rnd(300);
            let rec: Record = match rnd(10) {
                0..=3 => malloc(i, addr, rnd(5000)),
                4..=7 => Record::Free { ts: i, addr },
                8 => Record::Mmap {
                    ts: i,
                    addr: addr << 12,
                    size: 4096 * (1 + rnd(3)),
                    stack: 0,
                },
                _ => Record::Munmap {
                    ts: i,
                    addr: addr << 12,
                    size: 8192,
                },
            };
            if i == 15_000 {
                tctx.set_image(1);
                fctx.set_image(1);
            }
            let mut out = Vec::new();
            assert!(typer.type_record(&mut tctx, 1, &rec, &mut out));
            for mut ev in out {
                ev.id = id_t;
                id_t += 1;
                leaks.feed(ev, &bctx, &mut Vec::new()).unwrap();
            }
            if is_host_record(&rec) {
                let t = fast.record(&mut fctx, &rec, id_f, None).unwrap();
                id_f += t.frees + t.mallocs;
            } else {
                let mut out = Vec::new();
                assert!(ftyper.type_record(&mut fctx, 1, &rec, &mut out));
                for mut ev in out {
                    ev.id = id_f;
                    id_f += 1;
                    fast.observe(&ev);
                }
            }
            // Across the exec the synthetic FREEs of the old image's heap blocks come at the new
            // image's first heap record, those of its mappings at its first mapping record (the
            // typer alone emits both at the first of either): the IDs agree again once both
            // kinds were seen.
            if !(15_000..15_100).contains(&i) {
                assert_eq!(id_t, id_f, "event {i}");
            }
        }
        assert_eq!(tctx.next_allocation_id(), fctx.next_allocation_id());
        assert_eq!(tctx.take_warnings(), fctx.take_warnings());
        assert_eq!(leaks.peak(), fast.leaks.peak());
        let mut want = vec![leaks.peak_report(Some(3)), leaks.report(Some(3))];
        want.extend(leaks.maps_report(Some(3)));
        assert_eq!(want, fast.report(Some(3)));
        assert_eq!(
            typer.unknown_frees(),
            fast.unknown_frees() + ftyper.unknown_frees()
        );
    }
}
