//! HOST records on the pipeline's fast path (accounted without events, IDs and counts moving
//! as if they had been emitted) and the history rows written when a collection window opens.

use super::*;
use crate::fast_path::PyStack;
use memscope_stream::capture::AllocRef;

impl Pipeline {
    /// A collection window opened at `ts`: the blocks held from outside windows are written
    /// once, right after the `START_TRACE` row.
    pub(super) fn window_opened(&mut self, image: usize, ts: u64) {
        for ev in self.history.opened(image, ts) {
            self.emit(ev);
        }
    }

    /// A HOST record of thread `tid` on the fast path, captured and accounted (`shadow`: made
    /// outside a collection window, see `history`: not accounted unless it frees a block from
    /// a window; the capture looks its allocations up in its own map).
    pub(super) fn host_record(
        &mut self,
        image: usize,
        tid: u32,
        rec: &Record<Box<[u8]>>,
        shadow: bool,
    ) {
        if shadow {
            self.capture_record(image, tid, rec);
            if let Some(rec) = self.history.divert_host(rec) {
                self.host_account(image, tid, rec, 0);
            }
            return;
        }
        self.host_captured(image, tid, rec);
    }

    /// A HOST `Malloc` or `Free` of thread `tid` on the fast path, made inside a collection
    /// window: written to the capture and accounted, the capture's reference to each
    /// allocation kept with the fast path's live block (one map lookup per record where the
    /// capture's own map took a second).
    fn host_captured(&mut self, image: usize, tid: u32, rec: &Record<Box<[u8]>>) {
        if let Record::Malloc { .. } = rec {
            let made = match self.capture.as_mut().and_then(|c| c.writer.as_mut()) {
                Some(w) => w.record_malloc(image, tid, rec),
                None => Ok(None),
            };
            let made = made.unwrap_or_else(|e| {
                self.capture_failed(e);
                None
            });
            self.host_account(image, tid, rec, made.map_or(0, AllocRef::get));
        } else {
            let freed = AllocRef::from_u64(self.host_account(image, tid, rec, 0));
            if let Some(w) = self.capture.as_mut().and_then(|c| c.writer.as_mut()) {
                if let Err(e) = w.record_free(image, tid, rec, freed) {
                    self.capture_failed(e);
                }
            }
        }
    }

    /// Accounts a HOST record of thread `tid` on the fast path without events (with the
    /// thread's Python stack, so its summaries name Python lines); the IDs and per-kind counts
    /// move as if its events had been emitted. `capture_ref`: the capture's reference to the
    /// record's allocation (0: none); returns that of the block a free released (0: none).
    fn host_account(
        &mut self,
        image: usize,
        tid: u32,
        rec: &Record<Box<[u8]>>,
        capture_ref: u64,
    ) -> u64 {
        if self.failed.is_some() {
            return 0;
        }
        if self.next_id == 0 && !self.dry {
            if let Err(e) = self.materialize() {
                eprintln!("memscope: pid {}: {e}", self.summary.pid);
                self.failed = Some(e);
                return 0;
            }
        }
        let Some(fast) = &mut self.host_fast else {
            return 0;
        };
        let py = match rec {
            Record::Malloc { .. } => self.pystacks.current(image, tid),
            _ => None,
        };
        let py = py.as_ref().map(|(key, text)| PyStack { key: *key, text });
        match fast.record_tagged(&mut self.ctx, rec, self.next_id, py, capture_ref) {
            Some((t, freed)) => {
                self.next_id += t.frees + t.mallocs;
                self.typed[FREE_SLOT] += t.frees;
                self.typed[MALLOC_SLOT] += t.mallocs;
                freed
            }
            None => 0,
        }
    }
}
