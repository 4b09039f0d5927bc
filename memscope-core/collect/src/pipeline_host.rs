//! HOST records on the pipeline's fast path (accounted without events, IDs and counts moving
//! as if they had been emitted) and the history rows written when a collection window opens.

use super::*;
use crate::fast_path::PyStack;

impl Pipeline {
    /// A collection window opened at `ts`: the blocks held from outside windows are written
    /// once, right after the `START_TRACE` row.
    pub(super) fn window_opened(&mut self, image: usize, ts: u64) {
        for ev in self.history.opened(image, ts) {
            self.emit(ev);
        }
    }

    /// A HOST record of thread `tid` on the fast path (`shadow`: made outside a collection
    /// window, see `history`: not accounted unless it frees a block from a window).
    pub(super) fn host_record(
        &mut self,
        image: usize,
        tid: u32,
        rec: &Record<Box<[u8]>>,
        shadow: bool,
    ) {
        if shadow {
            if let Some(rec) = self.history.divert_host(rec) {
                self.host_account(image, tid, rec);
            }
            return;
        }
        self.host_account(image, tid, rec);
    }

    /// Accounts a HOST record of thread `tid` on the fast path without events (with the
    /// thread's Python stack, so its summaries name Python lines); the IDs and per-kind counts
    /// move as if its events had been emitted.
    fn host_account(&mut self, image: usize, tid: u32, rec: &Record<Box<[u8]>>) {
        if self.failed.is_some() {
            return;
        }
        if self.next_id == 0 && !self.dry {
            if let Err(e) = self.materialize() {
                eprintln!("memscope: pid {}: {e}", self.summary.pid);
                self.failed = Some(e);
                return;
            }
        }
        let Some(fast) = &mut self.host_fast else {
            return;
        };
        let py = match rec {
            Record::Malloc { .. } => self.pystacks.current(image, tid),
            _ => None,
        };
        let py = py.as_ref().map(|(key, text)| PyStack { key: *key, text });
        if let Some(t) = fast.record(&mut self.ctx, rec, self.next_id, py) {
            self.next_id += t.frees + t.mallocs;
            self.typed[FREE_SLOT] += t.frees;
            self.typed[MALLOC_SLOT] += t.mallocs;
        }
    }
}
