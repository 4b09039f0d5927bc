//! Delivers a group's events in process, then ID order (the order they happened in).
//!
//! One file is read by [`DumpFile::for_each_by_id_restartable`] (memscope's own dumps stream
//! without a sort; the consumer is told to restart if the file turns out not to be in order).
//! Several files (one process's devices) are each read in ID order on their own thread and
//! merged by (process, ID) through bounded channels, so memory stays a few batches per file.

use std::collections::VecDeque;
use std::sync::mpsc::{sync_channel, Receiver};

use memscope_core::event::Event;
use memscope_dump::reader::{ConsumerError, Order, ReadError, ReadOptions};

use crate::input::Group;

/// Events per batch sent from a reader thread.
const BATCH: usize = 2048;

fn key(ev: &Event) -> (u64, u64) {
    (ev.pid.map_or(u64::MAX, u64::from), ev.id)
}

#[derive(Debug)]
struct Stopped;

impl std::fmt::Display for Stopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("stopped")
    }
}

impl std::error::Error for Stopped {}

/// What [`feed_group`] read: the rows, and one warning per file whose torn last row was left
/// out (`ReadStats::torn_warning`, for the caller to print).
#[derive(Debug, Default)]
pub struct Fed {
    /// Rows read.
    pub rows: u64,
    /// Warnings about the inputs.
    pub warnings: Vec<String>,
}

/// Passes every event of `group` to `f` in (process, ID) order; returns the rows read and the
/// warnings about the files. `restart` is called when the events delivered so far must be
/// dropped and come again (only when `restartable`; otherwise a file is checked for order
/// before it streams).
///
/// # Errors
/// A [`ReadError`] naming the file at fault; `f`'s error as [`ReadError::Consumer`].
pub fn feed_group(
    group: &Group,
    restartable: bool,
    f: &mut dyn FnMut(Event) -> Result<(), ConsumerError>,
    restart: &mut dyn FnMut(),
) -> Result<Fed, ReadError> {
    if let [file] = group.files.as_slice() {
        let mut opts = ReadOptions::default();
        let stats = if restartable {
            file.for_each_by_id_restartable(&mut opts, f, restart)?
        } else {
            file.for_each(Order::ById, &mut opts, f)?
        };
        return Ok(Fed {
            rows: stats.rows,
            warnings: stats.torn_warning(file.name()).into_iter().collect(),
        });
    }
    std::thread::scope(|scope| {
        let mut rx: Vec<Receiver<Vec<Event>>> = Vec::new();
        let mut handles = Vec::new();
        for file in &group.files {
            let (tx, r) = sync_channel::<Vec<Event>>(4);
            rx.push(r);
            handles.push(Some(scope.spawn(move || {
                let mut batch = Vec::with_capacity(BATCH);
                let stats = file.for_each(Order::ById, &mut ReadOptions::default(), &mut |ev| {
                    batch.push(ev);
                    if batch.len() >= BATCH {
                        let full = std::mem::replace(&mut batch, Vec::with_capacity(BATCH));
                        tx.send(full)
                            .map_err(|_| Box::new(Stopped) as ConsumerError)?;
                    }
                    Ok(())
                })?;
                if !batch.is_empty() {
                    // the merger may have stopped already; its error is the one reported
                    let _ = tx.send(batch);
                }
                Ok::<(u64, Option<String>), ReadError>((
                    stats.rows,
                    stats.torn_warning(file.name()),
                ))
            })));
        }
        let mut heads: Vec<VecDeque<Event>> = rx.iter().map(|_| VecDeque::new()).collect();
        let mut open: Vec<bool> = vec![true; rx.len()];
        let mut fed = Fed::default();
        let mut join = |i: usize, handles: &mut Vec<Option<_>>| -> Result<(), ReadError> {
            type Read = Result<(u64, Option<String>), ReadError>;
            let h: Option<std::thread::ScopedJoinHandle<'_, Read>> = handles[i].take();
            match h.map(|h| h.join()) {
                Some(Ok(r)) => r.map(|(n, w)| {
                    fed.rows += n;
                    fed.warnings.extend(w);
                }),
                Some(Err(_)) => Err(ReadError::Consumer("a dump reader thread panicked".into())),
                None => Ok(()),
            }
        };
        let result = (|| -> Result<(), ReadError> {
            loop {
                for i in 0..heads.len() {
                    while open[i] && heads[i].is_empty() {
                        match rx[i].recv() {
                            Ok(b) => heads[i].extend(b),
                            Err(_) => {
                                open[i] = false;
                                join(i, &mut handles)?;
                            }
                        }
                    }
                }
                let next = (0..heads.len())
                    .filter_map(|i| heads[i].front().map(|e| (key(e), i)))
                    .min();
                let Some((_, i)) = next else { return Ok(()) };
                if let Some(ev) = heads[i].pop_front() {
                    f(ev).map_err(ReadError::Consumer)?;
                }
            }
        })();
        drop(rx);
        // end the readers (their sends now fail) and keep the first error
        let mut first_err = result.err();
        for i in 0..handles.len() {
            if let Err(e) = join(i, &mut handles) {
                if first_err.is_none() && !matches!(&e, ReadError::Consumer(c) if c.is::<Stopped>())
                {
                    first_err = Some(e);
                }
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(fed),
        }
    })
}
