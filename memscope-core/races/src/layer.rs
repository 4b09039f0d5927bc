//! The race check as a bus [`Layer`]: events are mapped to [`StreamOp`]s by a function the
//! caller gives (the recording of stream and event calls decides the mapping), checked in bus
//! order, passed on unchanged, and the findings reported at the end.

use memscope_core::bus::{BusCtx, BusError, Layer, ReportSection};
use memscope_core::event::Event;
use memscope_core::listing::{top_n, CONSOLE_TOP};

use super::{RaceChecker, RaceFinding, StreamOp};

/// Maps one bus event to the stream operations it stands for (none for most events).
pub type EventMapper = Box<dyn FnMut(&Event, &mut Vec<StreamOp>) + Send>;

/// Watches the bus for stream operations and reports cross-stream races at the end.
pub struct RaceLayer {
    map: EventMapper,
    checker: RaceChecker,
    ops: Vec<StreamOp>,
    findings: Vec<RaceFinding>,
}

impl RaceLayer {
    /// A layer that maps events with `map`.
    #[must_use]
    pub fn new(map: EventMapper) -> Self {
        Self {
            map,
            checker: RaceChecker::new(),
            ops: Vec::new(),
            findings: Vec::new(),
        }
    }

    /// The findings so far, in the order found.
    #[must_use]
    pub fn findings(&self) -> &[RaceFinding] {
        &self.findings
    }
}

impl Layer for RaceLayer {
    fn name(&self) -> &'static str {
        "races"
    }

    fn on_event(&mut self, ev: Event, _ctx: &BusCtx, out: &mut Vec<Event>) -> Result<(), BusError> {
        (self.map)(&ev, &mut self.ops);
        for op in self.ops.drain(..) {
            self.checker.apply(op, &mut self.findings);
        }
        out.push(ev);
        Ok(())
    }

    fn finish(
        &mut self,
        ctx: &BusCtx,
        _out: &mut Vec<Event>,
        report: &mut Vec<ReportSection>,
    ) -> Result<(), BusError> {
        let all: Vec<String> = if self.findings.is_empty() {
            vec!["No unsynchronized cross-stream accesses.".to_owned()]
        } else {
            self.findings.iter().map(ToString::to_string).collect()
        };
        let shown = top_n(
            &all,
            CONSOLE_TOP,
            |l, out| out.push(l.clone()),
            |rest| format!("... and {} more", rest.len()),
        );
        let sfx = ctx.pid.map_or(String::new(), |p| format!(" (pid {p})"));
        report.push(ReportSection::bounded(
            format!("Stream races{sfx}"),
            shown,
            all,
        ));
        Ok(())
    }
}
