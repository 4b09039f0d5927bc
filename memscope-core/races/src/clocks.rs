//! Vector clocks per stream, per event and for the host (CSAN's `StreamSynchronizations`).
//!
//! Streams get dense indices in order of first sight; a clock is a `Vec<i64>` by index where a
//! missing entry is -1 (CSAN's `dict.get(stream, -1)`: a missing key and -1 behave alike in
//! every comparison and merge).

use std::collections::HashMap;

use super::{EventId, StreamId};

/// A vector clock: sequence number per dense stream index; -1 where unknown.
pub(super) type Clock = Vec<i64>;

fn get(c: &Clock, i: usize) -> i64 {
    c.get(i).copied().unwrap_or(-1)
}

fn set(c: &mut Clock, i: usize, v: i64) {
    if c.len() <= i {
        c.resize(i + 1, -1);
    }
    c[i] = v;
}

/// `state = max(state, other)` entry by entry.
fn merge(state: &mut Clock, other: &Clock) {
    if state.len() < other.len() {
        state.resize(other.len(), -1);
    }
    for (s, &o) in state.iter_mut().zip(other) {
        *s = (*s).max(o);
    }
}

/// The happens-before state of all streams, events and the host.
#[derive(Default)]
pub(super) struct Syncs {
    index: HashMap<StreamId, usize>,
    /// Each stream's clock, by dense index.
    current: Vec<Clock>,
    /// What each event captured at its last record (empty if never recorded).
    events: HashMap<EventId, Clock>,
    /// What the host knows has completed.
    host: Clock,
}

impl Syncs {
    /// The state at start: the default stream 0 exists.
    pub(super) fn new() -> Self {
        let mut s = Self::default();
        s.stream(0);
        s
    }

    /// The stream's dense index, creating the stream (from the host's clock) if new.
    pub(super) fn stream(&mut self, id: StreamId) -> usize {
        if let Some(&i) = self.index.get(&id) {
            return i;
        }
        let i = self.current.len();
        self.index.insert(id, i);
        set(&mut self.host, i, 0);
        self.current.push(self.host.clone());
        i
    }

    /// The stream's dense index if it exists (no creation: CSAN's free touches no stream).
    pub(super) fn known(&self, id: StreamId) -> Option<usize> {
        self.index.get(&id).copied()
    }

    pub(super) fn create_event(&mut self, ev: EventId) {
        // CSAN: a duplicate creation deletes the old one first; either way the event is empty.
        self.events.insert(ev, Clock::new());
    }

    pub(super) fn delete_event(&mut self, ev: EventId) {
        self.events.remove(&ev);
    }

    /// A launch with sequence number `seq` on stream index `s`.
    pub(super) fn launch(&mut self, s: usize, seq: i64) {
        set(&mut self.current[s], s, seq);
    }

    pub(super) fn record(&mut self, ev: EventId, stream: StreamId) {
        let s = self.stream(stream);
        self.events.insert(ev, self.current[s].clone());
    }

    pub(super) fn wait(&mut self, stream: StreamId, ev: EventId) {
        let s = self.stream(stream);
        let e = self.events.entry(ev).or_default();
        merge(&mut self.current[s], e);
    }

    pub(super) fn sync_event(&mut self, ev: EventId) {
        let e = self.events.entry(ev).or_default();
        for c in &mut self.current {
            merge(c, e);
        }
        merge(&mut self.host, e);
    }

    pub(super) fn sync_stream(&mut self, stream: StreamId) {
        let s = self.stream(stream);
        let src = self.current[s].clone();
        for c in &mut self.current {
            merge(c, &src);
        }
        merge(&mut self.host, &src);
    }

    pub(super) fn sync_device(&mut self) {
        for (i, c) in self.current.iter().enumerate() {
            set(&mut self.host, i, get(c, i));
        }
        for c in &mut self.current {
            merge(c, &self.host);
        }
    }

    /// Whether an access with `seq` on stream index `other` is ordered before stream `s`'s
    /// next work (`None`: before the host).
    pub(super) fn ordered(&self, s: Option<usize>, seq: i64, other: usize) -> bool {
        let c = s.map_or(&self.host, |s| &self.current[s]);
        seq <= get(c, other)
    }

    /// Per stream index, the least sequence number every stream and the host know as done:
    /// an access at or below it is ordered before all present and future work (clocks only
    /// grow, and a new stream starts from the host's clock).
    pub(super) fn floor(&self) -> Clock {
        let mut f = self.host.clone();
        f.resize(self.current.len(), -1);
        for (i, v) in f.iter_mut().enumerate() {
            for c in &self.current {
                *v = (*v).min(get(c, i));
            }
        }
        f
    }
}
