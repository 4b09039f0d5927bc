//! A dump sink's writer thread: once a process has written [`THREAD_AFTER`] rows, its
//! [`DeviceRouter`] moves to a thread of its own and the bus hands it batches of events, so
//! formatting and writing rows (CSV quoting, SQLite's inserts) runs beside the typing and the
//! layers instead of after them (issue 37: they were a third of the pipeline thread's time on
//! HOST rows). Small processes never start one.
//!
//! Order and durability are the inline sink's: one thread writes every row in bus order, and a
//! flush waits until the thread has written and flushed everything handed to it before.

use super::{DeviceRouter, DeviceWriter, SharedStats};
use memscope_core::event::Event;
use std::sync::mpsc::{channel, sync_channel, Receiver, Sender, SyncSender};
use std::thread::JoinHandle;

/// Rows a process writes inline before its sink moves to a thread.
pub const THREAD_AFTER: u64 = 50_000;

/// Events per batch handed to the thread.
const BATCH: usize = 1024;

/// Batches in flight (bounds the memory the thread can fall behind by).
const QUEUE: usize = 8;

enum Msg {
    /// Rows to write, in order.
    Rows(Vec<Event>),
    /// Flush (publishing the backlog first for a reader); answer when done.
    Flush { readers: bool, done: Sender<()> },
}

/// The bus's end of a writer thread.
pub(super) struct Worker<W: DeviceWriter> {
    /// `None` once the thread was told to stop.
    tx: Option<SyncSender<Msg>>,
    /// Emptied batches coming back, to be filled again.
    spare: Receiver<Vec<Event>>,
    batch: Vec<Event>,
    /// `None` once joined.
    thread: Option<JoinHandle<Option<Box<DeviceRouter<W>>>>>,
}

impl<W: DeviceWriter + 'static> Worker<W> {
    /// Moves `router` to a new thread; gives it back when no thread can be started.
    pub(super) fn start(
        router: Box<DeviceRouter<W>>,
        stats: SharedStats,
    ) -> Result<Worker<W>, Box<DeviceRouter<W>>> {
        let (tx, rx) = sync_channel::<Msg>(QUEUE);
        let (spare_tx, spare) = channel::<Vec<Event>>();
        // the router is sent once the thread exists, so a failed spawn still has it here
        let (router_tx, router_rx) = sync_channel::<Box<DeviceRouter<W>>>(1);
        let spawned = std::thread::Builder::new()
            .name("memscope-sink".into())
            .spawn(move || {
                let mut router = router_rx.recv().ok()?;
                serve(&mut router, &stats, rx, spare_tx);
                Some(router)
            });
        let Ok(thread) = spawned else {
            return Err(router);
        };
        // the thread waits for it: this cannot fail
        let _ = router_tx.send(router);
        Ok(Worker {
            tx: Some(tx),
            spare,
            batch: Vec::with_capacity(BATCH),
            thread: Some(thread),
        })
    }

    /// Queues `ev` (moved out) for the thread.
    pub(super) fn push(&mut self, ev: &mut Event) {
        self.batch.push(ev.take());
        if self.batch.len() >= BATCH {
            self.send_batch();
        }
    }

    fn send_batch(&mut self) {
        if self.batch.is_empty() {
            return;
        }
        let next = self
            .spare
            .try_recv()
            .unwrap_or_else(|_| Vec::with_capacity(BATCH));
        let full = std::mem::replace(&mut self.batch, next);
        // the thread only goes away when it panicked; `finish` reports that
        if let Some(tx) = &self.tx {
            let _ = tx.send(Msg::Rows(full));
        }
    }

    /// Hands over what is queued and waits until the thread has written and flushed it.
    pub(super) fn flush(&mut self, readers: bool) {
        self.send_batch();
        let (done, wait) = channel();
        if let Some(tx) = &self.tx {
            if tx.send(Msg::Flush { readers, done }).is_ok() {
                let _ = wait.recv();
            }
        }
    }

    /// Hands over what is queued, stops the thread and gives back its router.
    pub(super) fn finish(mut self) -> Box<DeviceRouter<W>> {
        self.send_batch();
        self.tx = None;
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(Some(router))) => router,
            Some(Err(p)) => std::panic::resume_unwind(p),
            _ => unreachable!("the thread got the router and is joined only here or on drop"),
        }
    }
}

impl<W: DeviceWriter> Drop for Worker<W> {
    /// A sink dropped without `finish` (its process's output failed) still has what it was
    /// handed written before the files close, as the inline sink's files would on drop.
    fn drop(&mut self) {
        self.send_batch();
        self.tx = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve<W: DeviceWriter>(
    router: &mut DeviceRouter<W>,
    stats: &SharedStats,
    rx: Receiver<Msg>,
    spare: Sender<Vec<Event>>,
) {
    for msg in rx {
        match msg {
            Msg::Rows(mut batch) => {
                // routed where they lie (an Event is 312 bytes), dropped together after
                for ev in &batch {
                    router.route(ev);
                }
                batch.clear();
                let _ = spare.send(batch);
            }
            Msg::Flush { readers, done } => {
                if readers {
                    router.publish_backlog();
                }
                router.flush();
                take_warnings(router, stats);
                let _ = done.send(());
            }
        }
        take_warnings(router, stats);
    }
}

/// Moves the router's warning lines to the shared stats.
pub(super) fn take_warnings<W: DeviceWriter>(router: &mut DeviceRouter<W>, stats: &SharedStats) {
    if router.warnings.is_empty() {
        return;
    }
    if let Ok(mut s) = stats.lock() {
        s.warnings.append(&mut router.warnings);
    }
}

#[cfg(test)]
mod tests {
    use super::super::{csv::CsvFile, DumpSink, Place};
    use super::THREAD_AFTER;
    use memscope_core::bus::{BusCtx, Layer};
    use memscope_core::event::{Device, Event, EventType};

    fn rows_in(path: &std::path::Path) -> Vec<u64> {
        let text = std::fs::read_to_string(path).unwrap();
        text.lines()
            .skip(1)
            .map(|l| l.split(',').next().unwrap().parse().unwrap())
            .collect()
    }

    #[test]
    fn a_sink_past_its_thread_threshold_writes_every_row_in_order_and_a_flush_waits_for_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dump.csv");
        let p = path.clone();
        let mut sink: DumpSink<CsvFile> = DumpSink::new(Box::new(move |place| {
            let f = match place {
                Place::Device(_) => p.clone(),
                Place::Backlog => p.with_extension("backlog"),
            };
            Ok((std::fs::File::create(&f).unwrap(), f))
        }));
        let ctx = BusCtx::default();
        let n = THREAD_AFTER + 5000;
        for id in 0..n {
            let mut ev = Event::new(EventType::Host, id, 1, 1);
            ev.id = id;
            ev.device = Device::Cpu;
            sink.feed(ev, &ctx, &mut Vec::new()).unwrap();
        }
        // the rows past the threshold went to the writer thread (which names itself once it
        // runs: look until it has)
        let sink_thread = || {
            std::fs::read_dir("/proc/self/task")
                .unwrap()
                .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
                .any(|c| c.trim() == "memscope-sink")
        };
        let named = (0..500).any(|_| {
            sink_thread() || {
                std::thread::sleep(std::time::Duration::from_millis(10));
                false
            }
        });
        assert!(named, "no memscope-sink thread");
        // a flush returns once every row handed over is in the file
        sink.flush().unwrap();
        assert_eq!(rows_in(&path), (0..n).collect::<Vec<_>>());
        let mut report = Vec::new();
        sink.finish(&ctx, &mut Vec::new(), &mut report).unwrap();
        assert_eq!(sink.files(), vec![(path.clone(), n)]);
        assert_eq!(rows_in(&path).len() as u64, n);
    }
}
