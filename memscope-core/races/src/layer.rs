//! The race check as a bus [`Layer`]: rows are mapped to [`StreamOp`]s by a [`RowMapper`],
//! checked in bus order, passed on unchanged, and the findings reported at the end — or, when
//! nothing the check needs was recorded, a line that says so (never a clean bill for what was
//! not looked at).

use memscope_core::bus::{BusCtx, BusError, Flow, Layer, ReportSection};
use memscope_core::event::Event;
use memscope_core::listing::{top_n, CONSOLE_TOP};

use super::{MapStats, RaceChecker, RaceFinding, RowMapper, StreamOp};

/// Findings kept for the report (the collector's memory stays bounded on a racy job); more
/// are counted.
pub const KEPT_FINDINGS: usize = 10_000;

/// Where a streaming layer hands each finding as it is found, with the process id of the row
/// that revealed it.
pub type FindingSink = Box<dyn FnMut(Option<u32>, RaceFinding) + Send>;

/// Watches the bus for stream operations and reports cross-stream races at the end.
pub struct RaceLayer {
    map: RowMapper,
    checker: RaceChecker,
    ops: Vec<StreamOp>,
    found: Vec<RaceFinding>,
    findings: Vec<RaceFinding>,
    total: u64,
    sink: Option<FindingSink>,
}

impl Default for RaceLayer {
    fn default() -> Self {
        Self::new()
    }
}

impl RaceLayer {
    /// A layer that has seen nothing.
    #[must_use]
    pub fn new() -> Self {
        Self {
            map: RowMapper::new(),
            checker: RaceChecker::new(),
            ops: Vec::new(),
            found: Vec::new(),
            findings: Vec::new(),
            total: 0,
            sink: None,
        }
    }

    /// A layer that hands every finding to `sink` as it is found and keeps none (a report of
    /// any length in constant memory).
    #[must_use]
    pub fn streaming(sink: FindingSink) -> Self {
        Self {
            sink: Some(sink),
            ..Self::new()
        }
    }

    /// The findings so far, in the order found (the first [`KEPT_FINDINGS`]).
    #[must_use]
    pub fn findings(&self) -> &[RaceFinding] {
        &self.findings
    }

    /// Every finding so far, counted.
    #[must_use]
    pub fn total(&self) -> u64 {
        self.total
    }

    /// What the rows held for the check.
    #[must_use]
    pub fn stats(&self) -> MapStats {
        self.map.stats()
    }

    /// The number of races, or `None` when nothing the check needs was recorded.
    #[must_use]
    pub fn count(&self) -> Option<u64> {
        self.stats().recorded().then_some(self.total)
    }

    /// `sanitizer-op:` marks that could not be checked (malformed, or cut by the recorder): a
    /// gate must not pass them as clean.
    #[must_use]
    pub fn unchecked(&self) -> u64 {
        self.stats().malformed_marks
    }

    /// Maps and checks one row.
    pub fn observe(&mut self, ev: &Event) {
        self.map.map(ev, &mut self.ops);
        for op in self.ops.drain(..) {
            self.checker.apply(op, &mut self.found);
        }
        for f in self.found.drain(..) {
            self.total += 1;
            if let Some(sink) = &mut self.sink {
                sink(ev.pid, f);
            } else if self.findings.len() < KEPT_FINDINGS {
                self.findings.push(f);
            }
        }
    }

    /// The report's lines: the findings, or what was not recorded.
    #[must_use]
    pub fn lines(&self) -> Vec<String> {
        let st = self.stats();
        let mut all: Vec<String> = if !st.recorded() {
            vec!["Not recorded: no kernel launch with its stream, operator accesses or sanitizer-op: mark was seen (memscope run --analysis races records them; custom operators report theirs with sanitizer-op: marks).".to_owned()]
        } else if self.total == 0 {
            vec![format!(
                "No unsynchronized cross-stream accesses in {} checked launch(es) ({} stream/event call(s)).",
                st.launches, st.stream_calls
            )]
        } else {
            let mut v = vec![format!(
                "{} race(s) in {} checked launch(es):",
                self.total, st.launches
            )];
            v.extend(self.findings.iter().map(ToString::to_string));
            if self.sink.is_none() && self.total > self.findings.len() as u64 {
                v.push(format!(
                    "... {} more not kept (memscope analyze races --json lists every one)",
                    self.total - self.findings.len() as u64
                ));
            }
            v
        };
        if st.on_streams > 0 && st.stream_calls == 0 {
            all.push("No stream or event call was recorded (stream creation, aclrtRecordEvent, aclrtStreamWaitEvent, the synchronisations): the launches were checked as if nothing ordered them; record them with memscope run --analysis races (or --events launch --level kernel).".to_owned());
        } else if st.launches > 0 && st.on_streams == 0 && st.stream_calls == 0 {
            all.push("Every launch was taken as on the default stream: no KERNEL_LAUNCH row named its stream (memscope run --analysis races records them).".to_owned());
        }
        if st.malformed_marks > 0 {
            all.push(format!(
                "{} sanitizer-op: mark(s) did not parse and were not checked; the first: {}",
                st.malformed_marks,
                self.map.first_malformed().unwrap_or("")
            ));
        }
        all
    }
}

impl Layer for RaceLayer {
    fn name(&self) -> &'static str {
        "races"
    }

    fn on_event(
        &mut self,
        ev: &mut Event,
        _ctx: &BusCtx,
        _: &mut Vec<Event>,
    ) -> Result<Flow, BusError> {
        self.observe(ev);
        Ok(Flow::Pass)
    }

    fn finish(
        &mut self,
        ctx: &BusCtx,
        _out: &mut Vec<Event>,
        report: &mut Vec<ReportSection>,
    ) -> Result<(), BusError> {
        let all = self.lines();
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
