//! Compact MALLOC/FREE records of account-only registered types (plugin ABI 1.2,
//! `MEMSCOPE_TYPE_ACCOUNT`: PYMEM's objects) on the pipeline: accounted in the process's
//! [`crate::account_summary::Accounts`], the one map of their blocks. Without rows (the
//! default) no event is built — IDs and per-kind counts move as if it had been, so the row
//! numbering is the same with and without `--host-rows` — and nothing is allocated per record.
//! With rows, the event takes its `allocation_id`, FREE size and `used` from the account.

use super::*;
use memscope_core::event::{Attrs, MemoryAttrs};

impl Pipeline {
    /// Handles `rec` if it is an account-only compact MALLOC or FREE of image `image`, thread
    /// `tid` (`shadow`: made outside a collection window). `false`: not such a record.
    pub(super) fn compact_account(
        &mut self,
        image: usize,
        tid: u32,
        rec: &Record<Box<[u8]>>,
        shadow: bool,
    ) -> bool {
        let Record::Compact {
            ts,
            ty,
            kind: kind @ (1 | 2),
            addr,
            size,
            ..
        } = *rec
        else {
            return false;
        };
        let Some(info) = self.ctx.types.get(image, ty).filter(|t| t.account) else {
            return false;
        };
        let (ety, malloc) = (info.event_type, kind == 1);
        if self.failed.is_some() {
            return true;
        }
        if shadow {
            // Outside a collection window only the free of a block from a window counts.
            if malloc || self.accounts.live_bytes(ety) == 0 {
                return true;
            }
        }
        if self.account_rows {
            // the row's emit makes the output directory on the process's first event
            self.compact_account_row(image, tid, rec);
            return true;
        }
        if self.next_id == 0 && !self.dry {
            if let Err(e) = self.materialize() {
                eprintln!("memscope: pid {}: {e}", self.summary.pid);
                self.failed = Some(e);
                return true;
            }
        }
        self.ctx.discard_call_stack(tid, Some(ts));
        if malloc {
            self.account_malloc(image, tid, ety, (addr, size, ts));
            self.next_id += 1;
            self.typed[MALLOC_SLOT] += 1;
        } else if self.accounts.free(ety, addr).is_some() {
            self.next_id += 1;
            self.typed[FREE_SLOT] += 1;
        }
        true
    }

    /// Accounts a MALLOC of `ety` at `addr` (`size` bytes, stamped `ts`, by thread `tid` of
    /// image `image`, with its Python stack) as the next event; returns its allocation id.
    #[inline]
    fn account_malloc(
        &mut self,
        image: usize,
        tid: u32,
        ety: memscope_core::event::EventType,
        (addr, size, ts): (u64, u64, u64),
    ) -> u64 {
        let id = self.ctx.next_allocation_id();
        let py = self.pystacks.current_key(image, tid);
        let stacks = &mut self.pystacks;
        let text = || stacks.current(image, tid).map(|(_, t)| t);
        if self
            .accounts
            .malloc(ety, (addr, size, id), (self.next_id, ts), py, text)
            .is_some()
        {
            self.warn_reused(ety, addr);
        }
        id
    }

    #[cold]
    fn warn_reused(&mut self, ety: memscope_core::event::EventType, addr: u64) {
        self.ctx.warn(format!(
            "{}: allocation at live address 0x{addr:x}",
            ety.as_str()
        ));
    }

    /// The row of an account-only compact MALLOC or FREE (`--host-rows`, or an analysis that
    /// reads every row).
    fn compact_account_row(&mut self, image: usize, tid: u32, rec: &Record<Box<[u8]>>) {
        let Record::Compact {
            ts,
            ty,
            kind,
            addr,
            size,
            ref values,
        } = *rec
        else {
            return;
        };
        let Some(info) = self.ctx.types.get(image, ty) else {
            return;
        };
        let (ety, malloc) = (info.event_type, kind == 1);
        let mut ev = Event::new(ety, ts, self.ctx.pid, tid);
        ev.device = info.device(|d| self.ctx.map_device(d));
        let pairs = info.pairs_with(values);
        let owner = malloc.then(|| info.owner.clone());
        let (id, size) = if malloc {
            ev.kind = EventKind::Malloc;
            (self.account_malloc(image, tid, ety, (addr, size, ts)), size)
        } else {
            let Some(b) = self.accounts.free(ety, addr) else {
                self.ctx.discard_call_stack(tid, Some(ts));
                return;
            };
            ev.kind = EventKind::Free;
            (b.id, b.size)
        };
        ev.ptr = Some(addr);
        ev.attrs = Attrs::Memory(MemoryAttrs {
            allocation_id: id,
            addr,
            size,
            used: Some(self.accounts.live_bytes(ety) as i64),
            owner,
            account_only: true,
            extra: pairs,
            ..MemoryAttrs::default()
        });
        ev.c_stack = self.ctx.take_call_stack(tid, Some(ts));
        self.pystacks.attach(image, tid, &mut ev);
        self.python.observe(&ev);
        self.emit(ev);
    }
}
