//! One process's events, in ID order: the common input of every exporter.
//!
//! A process of msMemScope's layout has one dump per device, and device-less rows (`N/A`:
//! SYSTEM, marks without a device) are copied into each of them. [`replay`] reads each file in
//! [`Order::ById`] (memscope's dumps stream; msMemScope's go through the reader's
//! bounded-memory sort), merges the files by (pid, ID) — one reader thread per file, bounded
//! channels, so memory stays flat — and passes a device-less row that several files hold once.
//!
//! The replay of a capture (the collector's kept event stream, [`crate::captured`]) is one
//! more source of the same per-process events; exporters only see [`Event`]s.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;

use memscope_core::event::{Device, Event};
use memscope_dump::reader::{ConsumerError, DumpFile, Order, ReadError, ReadOptions};

use crate::error::ExportError;
use crate::feed::{outcome, pass, wanted, Consumer, Stopped};
pub use crate::feed::{Flow, Item, ReplayStats};
use crate::process::ProcessInput;
use crate::progress::Progress;

/// Events per batch sent by a reader thread.
const BATCH: usize = 1024;
/// Batches in flight per reader thread.
const IN_FLIGHT: usize = 4;

/// Sorting key of the reader's ID order: pid (`N/A` last), then ID.
fn key(ev: &Event) -> (u64, u64) {
    (ev.pid.map_or(u64::MAX, u64::from), ev.id)
}

/// Reports read bytes to `progress` as the counters grow.
struct Meter<'a> {
    progress: &'a mut dyn Progress,
    counters: Vec<Arc<AtomicU64>>,
    reported: u64,
    total: u64,
}

impl Meter<'_> {
    fn tick(&mut self) {
        let now: u64 = self
            .counters
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .sum();
        let now = now.min(self.total);
        if now > self.reported {
            self.progress.advance(now - self.reported);
            self.reported = now;
        }
    }

    fn finish(&mut self) {
        if self.total > self.reported {
            self.progress.advance(self.total - self.reported);
            self.reported = self.total;
        }
    }
}

fn counted_options(counter: &Arc<AtomicU64>) -> ReadOptions {
    let c = counter.clone();
    ReadOptions {
        progress: Some(Box::new(move |done, _| c.store(done, Ordering::Relaxed))),
        ..ReadOptions::default()
    }
}

/// Passes the events of process `p` to `f` in ID order; with `device`, only that device's
/// files (when known from the layout) and rows, plus device-less rows. A single file is
/// streamed as stored until a row comes out of order; then `f` gets [`Item::Restart`] and the
/// events again from the first, sorted.
///
/// # Errors
/// A [`ReadError`] of an input (naming file and line), or `f`'s error.
pub fn replay(
    p: &ProcessInput,
    device: Option<Device>,
    progress: &mut dyn Progress,
    f: &mut Consumer<'_>,
) -> Result<ReplayStats, ExportError> {
    if let Some(c) = &p.capture {
        return crate::captured::replay(p, c.as_ref(), device, progress, f);
    }
    let files: Vec<DumpFile> = p
        .files_for(device)
        .into_iter()
        .map(|f| f.dump.clone())
        .collect();
    let total = files.iter().map(DumpFile::size).sum();
    let counters: Vec<Arc<AtomicU64>> = files.iter().map(|_| Arc::default()).collect();
    let mut meter = Meter {
        progress,
        counters: counters.clone(),
        reported: 0,
        total,
    };
    let mut stats = ReplayStats::default();
    let r = match files.len() {
        0 => Ok(()),
        1 => {
            // streamed as stored while in ID order (memscope's own dumps: one read); at the
            // first row out of order the reader starts over through its sort
            let mut opts = counted_options(&counters[0]);
            let restarted = std::cell::Cell::new(false);
            let r = files[0].for_each_by_id_restartable(
                &mut opts,
                &mut |ev| {
                    if restarted.take() {
                        stats.events = 0;
                        pass(f(Item::Restart))?;
                    }
                    if !wanted(p, device, &ev) {
                        return Ok(());
                    }
                    stats.events += 1;
                    if stats.events & 0xfff == 0 {
                        meter.tick();
                    }
                    pass(f(Item::Event(ev)))
                },
                &mut || restarted.set(true),
            );
            outcome(r.map(|_| ()), &mut stats)
        }
        _ => merge(p, device, &files, &counters, &mut meter, &mut stats, f),
    };
    meter.finish();
    r.map(|()| stats)
}

type Batch = Result<Vec<Event>, ReadError>;

fn read_file(file: &DumpFile, counter: &Arc<AtomicU64>, tx: &SyncSender<Batch>) {
    let mut opts = counted_options(counter);
    let mut batch = Vec::with_capacity(BATCH);
    let r = file.for_each(Order::ById, &mut opts, &mut |ev| {
        batch.push(ev);
        if batch.len() == BATCH {
            let full = std::mem::replace(&mut batch, Vec::with_capacity(BATCH));
            tx.send(Ok(full))
                .map_err(|_| Box::new(Stopped) as ConsumerError)?;
        }
        Ok(())
    });
    match r {
        Ok(_) => {
            if !batch.is_empty() {
                let _ = tx.send(Ok(batch));
            }
        }
        Err(ReadError::Consumer(_)) => {} // the merger is gone
        Err(e) => {
            let _ = tx.send(Err(e));
        }
    }
}

struct Source {
    rx: Receiver<Batch>,
    batch: std::vec::IntoIter<Event>,
}

impl Source {
    /// The next event of this file, or `None` at its end.
    fn next(&mut self) -> Result<Option<Event>, ReadError> {
        loop {
            if let Some(ev) = self.batch.next() {
                return Ok(Some(ev));
            }
            match self.rx.recv() {
                Ok(Ok(b)) => self.batch = b.into_iter(),
                Ok(Err(e)) => return Err(e),
                Err(_) => return Ok(None),
            }
        }
    }
}

fn merge(
    p: &ProcessInput,
    device: Option<Device>,
    files: &[DumpFile],
    counters: &[Arc<AtomicU64>],
    meter: &mut Meter<'_>,
    stats: &mut ReplayStats,
    f: &mut Consumer<'_>,
) -> Result<(), ExportError> {
    std::thread::scope(|s| {
        let mut sources = Vec::new();
        for (file, counter) in files.iter().zip(counters) {
            let (tx, rx) = sync_channel::<Batch>(IN_FLIGHT);
            s.spawn(move || read_file(file, counter, &tx));
            sources.push(Source {
                rx,
                batch: Vec::new().into_iter(),
            });
        }
        // heap of (key, source index) with each source's head event kept aside
        let mut heads: Vec<Option<Event>> = Vec::with_capacity(sources.len());
        let mut heap = BinaryHeap::new();
        for (i, src) in sources.iter_mut().enumerate() {
            let head = src.next()?;
            if let Some(ev) = &head {
                heap.push(Reverse((key(ev), i)));
            }
            heads.push(head);
        }
        let mut last: Option<((u64, u64), bool)> = None;
        while let Some(Reverse((k, i))) = heap.pop() {
            let ev = heads[i].take().expect("a head for every heap entry");
            if let Some(next) = sources[i].next()? {
                heap.push(Reverse((key(&next), i)));
                heads[i] = Some(next);
            }
            let deviceless = ev.device == Device::NotApplicable;
            // the same device-less row copied into several device files
            if last == Some((k, true)) && deviceless {
                continue;
            }
            last = Some((k, deviceless));
            if !wanted(p, device, &ev) {
                continue;
            }
            stats.events += 1;
            if stats.events & 0xfff == 0 {
                meter.tick();
            }
            if f(Item::Event(ev))? == Flow::Stop {
                stats.stopped = true;
                break;
            }
        }
        // dropping the receivers stops the reader threads at their next batch
        drop(sources);
        Ok(())
    })
}
