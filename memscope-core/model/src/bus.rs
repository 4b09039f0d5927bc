//! The per-process event bus: typed events flow, in ID order, through a chain of [`Layer`]s
//! (filters, attribution, online analyses) that end in sinks (CSV, SQLite). The same layers run
//! offline over dump files (`memscope analyze`), fed by the dump reader.
//!
//! Modeled on tracing-subscriber's layers and ripgrep's push-model sinks: a layer is handed each
//! event in place and says whether it goes on ([`Flow`]); what it adds (held-back or new
//! events) it pushes onto `out`, and those go on first. At the end [`Layer::finish`] flushes and
//! contributes report sections. Handing events in place keeps the common case — every layer
//! looks and passes — free of copies of the event (issue 37: moving it by value through the
//! layers was a fifth of the collector's time on HOST rows).

use crate::event::{Attrs, Event, EventKind, EventType};

/// Why a layer failed; fatal for the run's output, never for the traced job.
#[derive(Debug, thiserror::Error)]
pub enum BusError {
    /// Writing an output file failed.
    #[error("cannot write {path}: {source}")]
    Io {
        /// File or directory.
        path: String,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// SQLite refused a statement.
    #[error("cannot write {path}: {source}")]
    Sqlite {
        /// Database file.
        path: String,
        /// Cause (a `rusqlite::Error`: the model links no SQLite).
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// Anything else, already worded for the user.
    #[error("{0}")]
    Other(String),
}

/// Step state maintained by the bus before any layer sees an event (msMemScope rule: an msTX
/// range whose message is exactly `step start` opens a step, numbered from 1; its `Range_end`
/// closes it; behaviour spec §8).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StepState {
    /// Step the current event belongs to (the open step), if any.
    pub current: Option<u32>,
    /// Steps opened so far.
    pub opened: u32,
    open_range: Option<u64>,
    /// Set while handling the `Range_end` that closes a step (that row still belongs to it).
    pub closing: bool,
}

/// Name of the msTX range that opens a step.
pub const STEP_RANGE_NAME: &str = "step start";

impl StepState {
    /// Updates the state for `ev` before layers see it.
    pub fn observe(&mut self, ev: &Event) {
        if self.closing {
            self.closing = false;
            self.current = None;
        }
        if ev.kind != EventKind::Mstx {
            return;
        }
        match ev.event_type {
            EventType::RangeStart if ev.name.as_deref() == Some(STEP_RANGE_NAME) => {
                self.opened += 1;
                self.current = Some(self.opened);
                self.open_range = range_id(ev);
            }
            EventType::RangeEnd if self.current.is_some() && range_id(ev) == self.open_range => {
                self.closing = true;
                self.open_range = None;
            }
            _ => {}
        }
    }
}

/// The `range_id` Attr of an MSTX range row.
pub fn range_id(ev: &Event) -> Option<u64> {
    match &ev.attrs {
        Attrs::Pairs(p) => p
            .iter()
            .find(|(k, _)| k == "range_id")
            .and_then(|(_, v)| v.parse().ok()),
        _ => None,
    }
}

/// Context every layer sees with each event.
#[derive(Clone, Debug, Default)]
pub struct BusCtx {
    /// Process the bus belongs to (`None` offline when a file mixes processes).
    pub pid: Option<u32>,
    /// Step state after observing the current event.
    pub steps: StepState,
}

/// A section of the end-of-run report (console and log).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReportSection {
    /// Heading, e.g. `Leaks (pid 42)`.
    pub title: String,
    /// Body lines: what the console shows (a bounded excerpt when [`ReportSection::full`] is
    /// set, `crate::listing`).
    pub lines: Vec<String>,
    /// Every line, when `lines` leaves some out: the process log and the run's summary file
    /// get these (issue 23: console lists are bounded, the files have everything).
    pub full: Option<Vec<String>>,
}

impl ReportSection {
    /// A section whose lines are all shown.
    pub fn new(title: String, lines: Vec<String>) -> ReportSection {
        ReportSection {
            title,
            lines,
            full: None,
        }
    }

    /// A section whose console lines `shown` leave out some of `all` (no `full` when they are
    /// the same).
    pub fn bounded(title: String, shown: Vec<String>, all: Vec<String>) -> ReportSection {
        let full = (shown != all).then_some(all);
        ReportSection {
            title,
            lines: shown,
            full,
        }
    }

    /// Every line (the full list when the console lines are an excerpt).
    pub fn all_lines(&self) -> &[String] {
        self.full.as_deref().unwrap_or(&self.lines)
    }
}

/// What becomes of the event a layer was handed ([`Layer::on_event`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub enum Flow {
    /// It goes on down the chain, after whatever the layer pushed onto `out`.
    Pass,
    /// It goes no further: dropped, or moved out with [`Event::take`] (to be held back, or
    /// pushed onto `out` among others).
    Stop,
}

/// One stage of the bus.
pub trait Layer: Send {
    /// Short name for messages.
    fn name(&self) -> &'static str;

    /// Handles one event in place. Events the layer adds or releases (held back earlier) go
    /// onto `out` and continue before this one, which continues if the answer is
    /// [`Flow::Pass`].
    ///
    /// # Errors
    /// A [`BusError`] stops this process's output.
    fn on_event(
        &mut self,
        ev: &mut Event,
        ctx: &BusCtx,
        out: &mut Vec<Event>,
    ) -> Result<Flow, BusError>;

    /// Hands an owned event to [`Layer::on_event`]; what continues, this event included when it
    /// passes, ends up on `out` in order. For code that drives a layer by hand.
    ///
    /// # Errors
    /// As [`Layer::on_event`].
    fn feed(&mut self, mut ev: Event, ctx: &BusCtx, out: &mut Vec<Event>) -> Result<(), BusError> {
        if self.on_event(&mut ev, ctx, out)? == Flow::Pass {
            out.push(ev);
        }
        Ok(())
    }

    /// Makes output written so far durable (called periodically by the collector, so a killed
    /// collector loses at most one period).
    ///
    /// # Errors
    /// As [`Layer::on_event`].
    fn flush(&mut self) -> Result<(), BusError> {
        Ok(())
    }

    /// As [`Layer::flush`], for a reader of the output files (a job's `stop()`, issue 39):
    /// what is written so far must also be where a reader looks (a sink that parks rows in a
    /// staging file puts them in the dump).
    ///
    /// # Errors
    /// As [`Layer::on_event`].
    fn flush_for_readers(&mut self) -> Result<(), BusError> {
        self.flush()
    }

    /// The stream ended: push held-back events, flush files, add report sections.
    ///
    /// # Errors
    /// As [`Layer::on_event`].
    fn finish(
        &mut self,
        _ctx: &BusCtx,
        _out: &mut Vec<Event>,
        _report: &mut Vec<ReportSection>,
    ) -> Result<(), BusError> {
        Ok(())
    }
}

/// A chain of layers for one process.
pub struct Bus {
    layers: Vec<Box<dyn Layer>>,
    ctx: BusCtx,
    a: Vec<Event>,
    b: Vec<Event>,
}

impl Bus {
    /// A bus over `layers`, applied in order.
    pub fn new(pid: Option<u32>, layers: Vec<Box<dyn Layer>>) -> Bus {
        Bus {
            layers,
            ctx: BusCtx {
                pid,
                ..BusCtx::default()
            },
            a: Vec::new(),
            b: Vec::new(),
        }
    }

    /// Current context (steps seen so far).
    pub fn ctx(&self) -> &BusCtx {
        &self.ctx
    }

    /// Sends one event through every layer.
    ///
    /// # Errors
    /// The first layer error.
    pub fn push(&mut self, mut ev: Event) -> Result<(), BusError> {
        self.push_in_place(&mut ev)
    }

    /// As [`Bus::push`], for an event the caller owns elsewhere (not moved unless a layer
    /// keeps it or adds events; what is left in `ev` afterwards is unspecified).
    ///
    /// # Errors
    /// The first layer error.
    pub fn push_in_place(&mut self, ev: &mut Event) -> Result<(), BusError> {
        self.ctx.steps.observe(ev);
        self.a.clear();
        for i in 0..self.layers.len() {
            let flow = self.layers[i].on_event(ev, &self.ctx, &mut self.a)?;
            if flow == Flow::Pass && self.a.is_empty() {
                continue;
            }
            // a layer dropped, held back or added events: the rest of the chain takes a queue
            if flow == Flow::Pass {
                self.a.push(ev.take());
            }
            return pass_on(
                &mut self.layers[i + 1..],
                &self.ctx,
                &mut self.a,
                &mut self.b,
            );
        }
        Ok(())
    }

    /// Flushes every layer.
    ///
    /// # Errors
    /// The first layer error.
    pub fn flush(&mut self) -> Result<(), BusError> {
        self.layers.iter_mut().try_for_each(|l| l.flush())
    }

    /// Flushes every layer for a reader of the files ([`Layer::flush_for_readers`]).
    ///
    /// # Errors
    /// The first layer error.
    pub fn flush_for_readers(&mut self) -> Result<(), BusError> {
        self.layers
            .iter_mut()
            .try_for_each(|l| l.flush_for_readers())
    }

    /// Ends the stream: each layer flushes (its held-back events pass through the later layers)
    /// and reports.
    ///
    /// # Errors
    /// The first layer error.
    pub fn finish(&mut self) -> Result<Vec<ReportSection>, BusError> {
        let mut report = Vec::new();
        for i in 0..self.layers.len() {
            self.a.clear();
            self.layers[i].finish(&self.ctx, &mut self.a, &mut report)?;
            pass_on(
                &mut self.layers[i + 1..],
                &self.ctx,
                &mut self.a,
                &mut self.b,
            )?;
        }
        Ok(report)
    }
}

/// Passes `queue`, in order, through `layers`; `spare` is scratch. Both are left empty.
fn pass_on(
    layers: &mut [Box<dyn Layer>],
    ctx: &BusCtx,
    queue: &mut Vec<Event>,
    spare: &mut Vec<Event>,
) -> Result<(), BusError> {
    for layer in layers {
        if queue.is_empty() {
            break;
        }
        spare.clear();
        for mut e in queue.drain(..) {
            if layer.on_event(&mut e, ctx, spare)? == Flow::Pass {
                spare.push(e);
            }
        }
        std::mem::swap(queue, spare);
    }
    queue.clear();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    type Seen = std::sync::Arc<std::sync::Mutex<Vec<(u64, Option<u32>)>>>;
    struct Collect(Seen);
    impl Layer for Collect {
        fn name(&self) -> &'static str {
            "collect"
        }
        fn on_event(
            &mut self,
            ev: &mut Event,
            ctx: &BusCtx,
            _: &mut Vec<Event>,
        ) -> Result<Flow, BusError> {
            self.0.lock().unwrap().push((ev.id, ctx.steps.current));
            Ok(Flow::Pass)
        }
    }

    fn mstx(id: u64, t: EventType, name: &str, range: u64) -> Event {
        let mut e = Event::new(t, id, 1, 1);
        e.id = id;
        e.name = Some(name.into());
        e.attrs = Attrs::Pairs(vec![("range_id".into(), range.to_string())]);
        e
    }

    #[test]
    fn steps_open_on_step_start_ranges_and_close_after_their_end_row() {
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut bus = Bus::new(Some(1), vec![Box::new(Collect(seen.clone()))]);
        bus.push(mstx(0, EventType::Mark, "before", 0)).unwrap();
        bus.push(mstx(1, EventType::RangeStart, "step start", 7))
            .unwrap();
        bus.push(mstx(2, EventType::RangeStart, "inner", 8))
            .unwrap();
        bus.push(mstx(3, EventType::RangeEnd, "inner", 8)).unwrap();
        bus.push(mstx(4, EventType::RangeEnd, "step start", 7))
            .unwrap();
        bus.push(mstx(5, EventType::Mark, "between", 0)).unwrap();
        bus.push(mstx(6, EventType::RangeStart, "step start", 9))
            .unwrap();
        let got = seen.lock().unwrap().clone();
        assert_eq!(
            got,
            vec![
                (0, None),
                (1, Some(1)),
                (2, Some(1)),
                (3, Some(1)),
                (4, Some(1)),
                (5, None),
                (6, Some(2))
            ]
        );
    }

    /// Passes every event on as `copies` events (0: drops it), each id tagged with the layer.
    struct Fan(u64, usize);

    impl Layer for Fan {
        fn name(&self) -> &'static str {
            "fan"
        }
        fn on_event(
            &mut self,
            ev: &mut Event,
            _: &BusCtx,
            out: &mut Vec<Event>,
        ) -> Result<Flow, BusError> {
            for k in 0..self.1 {
                let mut e = ev.clone();
                e.id = ev.id * 10 + k as u64 + self.0;
                out.push(e);
            }
            Ok(Flow::Stop)
        }
    }

    /// Holds each event back until the next (taking it out of the chain), then lets it go
    /// before that one; the last goes at the end.
    struct Hold(Option<Event>);

    impl Layer for Hold {
        fn name(&self) -> &'static str {
            "hold"
        }
        fn on_event(
            &mut self,
            ev: &mut Event,
            _: &BusCtx,
            out: &mut Vec<Event>,
        ) -> Result<Flow, BusError> {
            out.extend(self.0.take());
            self.0 = Some(ev.take());
            Ok(Flow::Stop)
        }
        fn finish(
            &mut self,
            _: &BusCtx,
            out: &mut Vec<Event>,
            _: &mut Vec<ReportSection>,
        ) -> Result<(), BusError> {
            out.extend(self.0.take());
            Ok(())
        }
    }

    #[test]
    fn a_layer_that_holds_events_back_releases_them_in_order_and_the_last_at_the_end() {
        let seen = Seen::default();
        let mut bus = Bus::new(
            Some(1),
            vec![
                Box::new(Hold(None)),
                Box::new(Fan(0, 1)),
                Box::new(Collect(seen.clone())),
            ],
        );
        for id in 1..=3 {
            bus.push(mstx(id, EventType::Mark, "m", 0)).unwrap();
        }
        let ids = |v: &Seen| -> Vec<u64> { v.lock().unwrap().iter().map(|s| s.0).collect() };
        assert_eq!(ids(&seen), [10, 20]);
        bus.finish().unwrap();
        assert_eq!(ids(&seen), [10, 20, 30]);
    }

    #[test]
    fn events_reach_later_layers_in_order_whether_a_layer_passes_one_drops_or_adds() {
        let seen = Seen::default();
        let ids = |v: &Seen| -> Vec<u64> {
            std::mem::take(&mut *v.lock().unwrap())
                .into_iter()
                .map(|(id, _)| id)
                .collect()
        };
        // one passes one: every event at the end
        let mut bus = Bus::new(
            Some(1),
            vec![Box::new(Fan(0, 1)), Box::new(Collect(seen.clone()))],
        );
        bus.push(mstx(1, EventType::Mark, "m", 0)).unwrap();
        bus.push(mstx(2, EventType::Mark, "m", 0)).unwrap();
        assert_eq!(ids(&seen), [10, 20]);
        // a layer that adds: the two go on through the later layers in order, every push
        let mut bus = Bus::new(
            Some(1),
            vec![
                Box::new(Fan(0, 1)),
                Box::new(Fan(0, 2)),
                Box::new(Fan(1, 1)),
                Box::new(Collect(seen.clone())),
            ],
        );
        bus.push(mstx(1, EventType::Mark, "m", 0)).unwrap();
        bus.push(mstx(2, EventType::Mark, "m", 0)).unwrap();
        assert_eq!(ids(&seen), [1001, 1011, 2001, 2011]);
        // the last layer adds: nothing after it
        let mut bus = Bus::new(
            Some(1),
            vec![Box::new(Collect(seen.clone())), Box::new(Fan(0, 3))],
        );
        bus.push(mstx(3, EventType::Mark, "m", 0)).unwrap();
        assert_eq!(ids(&seen), [3]);
        // a layer that drops: nothing reaches the later ones
        let mut bus = Bus::new(
            Some(1),
            vec![Box::new(Fan(0, 0)), Box::new(Collect(seen.clone()))],
        );
        bus.push(mstx(4, EventType::Mark, "m", 0)).unwrap();
        assert!(ids(&seen).is_empty());
    }
}
