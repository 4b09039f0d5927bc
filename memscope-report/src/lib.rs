//! `memscope report`: one self-contained HTML file (all JS/CSS inlined, the data as an embedded
//! JSON block, no network access) about one run, or two runs side by side.
//!
//! The figures come from memscope-core's readers and analyses; this crate only routes events
//! through them, decimates the memory levels for plotting, caps the tables and writes the page.
//!
//! * [`input::discover`] finds a run's dump files (run directory, process directory, file).
//! * [`RunBuilder`] consumes `Event`s per process in ID order — from dumps through
//!   [`read_run`], or from any other source that can replay a process's events (a kept capture)
//!   by calling [`RunBuilder::begin_group`], [`RunBuilder::push`] and [`RunBuilder::end_group`].
//! * [`build_report`] assembles the page's [`model::ReportData`]; [`html::render`] turns it
//!   into the page within [`Budget::max_bytes`]; [`html::write_new`] writes it atomically.
#![forbid(unsafe_code)]

pub mod budget;
pub mod compare_view;
pub mod diff_view;
pub mod feed;
pub mod html;
pub mod input;
pub mod model;
pub mod process;
pub mod roles_view;
pub mod series;
pub mod tree;
pub mod views;

use std::path::Path;

use memscope_analysis::compare::{Level, Sequence, SequenceBuilder};
use memscope_core::event::Event;
use memscope_dump::reader::{ProcessEvents, ReadError};

use model::*;
use process::ProcessBuilder;

pub use input::{discover, RunInput};

/// Caps that keep the page small and fast whatever the size of the run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Budget {
    /// Time buckets per plotted series (≤ 4 points each).
    pub series_buckets: usize,
    /// Points of all plotted series together.
    pub total_points: usize,
    /// Rows per table.
    pub table_rows: usize,
    /// Nodes per flame graph.
    pub tree_nodes: usize,
    /// Lines per console-text section.
    pub text_lines: usize,
    /// Largest page, bytes.
    pub max_bytes: usize,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            series_buckets: 4096,
            total_points: 400_000,
            table_rows: 5000,
            tree_nodes: 2000,
            text_lines: 200,
            max_bytes: 20 << 20,
        }
    }
}

/// Why no report was written. Every message is one line naming the input or output.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// A path given is unusable.
    #[error("{path}: {msg}")]
    Input {
        /// The path as given.
        path: String,
        /// What is wrong.
        msg: String,
    },
    /// A dump could not be read.
    #[error("{0}")]
    Read(#[from] ReadError),
    /// The inputs hold no event.
    #[error("{0}: the run recorded no events (every dump file is empty)")]
    Empty(String),
    /// An analysis failed.
    #[error("{0}")]
    Analysis(String),
    /// The page could not be written.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The output path.
        path: String,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// The page stays over the size limit even with every cap at its smallest.
    #[error(
        "the report would be {size} bytes, over the {max}-byte limit, even with the smallest caps"
    )]
    TooLarge {
        /// Smallest size reached.
        size: usize,
        /// Limit.
        max: usize,
    },
}

impl ReportError {
    /// An [`ReportError::Input`] about `path`.
    pub fn input(path: &Path, msg: impl Into<String>) -> ReportError {
        ReportError::Input {
            path: path.display().to_string(),
            msg: msg.into(),
        }
    }
}

/// Builds one run's data from events delivered per process, in ID order.
///
/// Usage: for each process directory (or capture), [`begin_group`](Self::begin_group), then
/// [`push`](Self::push) its events (processes one after another, each in ID order), then
/// [`end_group`](Self::end_group); [`restart`](Self::restart) drops what the current group
/// delivered so far; [`finish`](Self::finish) at the end.
pub struct RunBuilder {
    label: String,
    budget: Budget,
    inputs: Vec<String>,
    sides: Option<[SequenceBuilder; 2]>,
    processes: Vec<ProcessData>,
    group_start: usize,
    source: String,
    current: Option<(Option<u32>, ProcessBuilder)>,
    rows: u64,
    warnings: Vec<String>,
    /// Live memory by site and owner, for the +/− view of a two-run report.
    live: Option<diff_view::RunLive>,
}

impl RunBuilder {
    /// A builder for the run `label`; `compare` also collects the op and kernel sequences of
    /// the compare analysis (for a two-run report).
    pub fn new(label: &str, budget: &Budget, compare: bool) -> RunBuilder {
        RunBuilder {
            label: label.to_owned(),
            budget: budget.clone(),
            inputs: Vec::new(),
            sides: compare.then(|| {
                [
                    SequenceBuilder::new(Level::Op),
                    SequenceBuilder::new(Level::Kernel),
                ]
            }),
            processes: Vec::new(),
            group_start: 0,
            source: String::new(),
            current: None,
            rows: 0,
            warnings: Vec::new(),
            live: compare.then(diff_view::RunLive::default),
        }
    }

    /// Records a warning about the inputs (kept in [`RunData::warnings`]).
    pub fn add_warning(&mut self, warning: String) {
        self.warnings.push(warning);
    }

    /// Records an input file name (shown in the report).
    pub fn add_input(&mut self, name: &str) {
        self.inputs.push(name.to_owned());
    }

    /// Starts the events of one process directory (or capture) named `source`.
    pub fn begin_group(&mut self, source: &str) {
        self.source = source.to_owned();
        self.group_start = self.processes.len();
        self.current = None;
    }

    /// One event; a new process id starts a new process.
    ///
    /// # Errors
    /// An analysis error.
    pub fn push(&mut self, ev: Event) -> Result<(), ReportError> {
        self.rows += 1;
        if let Some(s) = self.sides.as_mut() {
            s[0].observe(&ev);
            s[1].observe(&ev);
        }
        if self.current.as_ref().is_some_and(|(pid, _)| *pid != ev.pid) {
            self.close_process()?;
        }
        if let Some(l) = self.live.as_mut() {
            l.push(&ev);
        }
        let (_, b) = self.current.get_or_insert_with(|| {
            (
                ev.pid,
                ProcessBuilder::new(ev.pid, &self.source, &self.budget),
            )
        });
        b.push(ev).map_err(|e| ReportError::Analysis(e.to_string()))
    }

    fn close_process(&mut self) -> Result<(), ReportError> {
        if let Some(l) = self.live.as_mut() {
            l.end_process();
        }
        if let Some((_, b)) = self.current.take() {
            let mut p = b
                .finish()
                .map_err(|e| ReportError::Analysis(e.to_string()))?;
            for s in &mut p.text {
                if s.lines.len() > self.budget.text_lines {
                    let more = s.lines.len() - self.budget.text_lines;
                    s.lines.truncate(self.budget.text_lines);
                    s.lines.push(format!("… {more} more line(s)"));
                }
            }
            self.processes.push(p);
        }
        Ok(())
    }

    /// Drops what the current group delivered (it will be delivered again). Only valid
    /// without compare sequences (which cannot be rolled back).
    pub fn restart(&mut self) {
        self.current = None;
        self.processes.truncate(self.group_start);
    }

    /// Ends the current group.
    ///
    /// # Errors
    /// An analysis error.
    pub fn end_group(&mut self) -> Result<(), ReportError> {
        self.close_process()
    }

    /// The run's data (times relative to its first event) and, when asked for, the compare
    /// sequences at op and kernel level and the live memory of the +/− view.
    ///
    /// # Errors
    /// [`ReportError::Empty`] when no process had an event.
    pub fn finish(mut self) -> Result<(RunData, Option<CompareSide>), ReportError> {
        self.close_process()?;
        if self.processes.is_empty() {
            return Err(ReportError::Empty(self.label));
        }
        let t0 = self.processes.iter().map(|p| p.start).min().unwrap_or(0);
        let t1 = self.processes.iter().map(|p| p.end).max().unwrap_or(t0);
        for p in &mut self.processes {
            views::rebase(p, t0);
        }
        let overview = budget::overview(&self.processes);
        let run = RunData {
            label: self.label,
            inputs: self.inputs,
            t0_ns: t0.to_string(),
            duration_ns: t1 - t0,
            events: self.rows,
            processes: self.processes,
            overview,
            warnings: self.warnings,
        };
        let sides = self.sides.map(|[op, kernel]| CompareSide {
            sequences: [op.finish(), kernel.finish()],
            live: self.live.unwrap_or_default(),
        });
        Ok((run, sides))
    }
}

/// What a run of a two-run report brings to the compare and +/− views.
pub struct CompareSide {
    /// Op and kernel sequences of the compare analysis.
    pub sequences: [Sequence; 2],
    /// Live memory by site and owner.
    pub live: diff_view::RunLive,
}

/// Reads every dump of `input` through a [`RunBuilder`].
///
/// # Errors
/// A read or analysis error, or [`ReportError::Empty`].
pub fn read_run(
    input: &RunInput,
    budget: &Budget,
    compare: bool,
) -> Result<(RunData, Option<CompareSide>), ReportError> {
    let mut b = RunBuilder::new(&input.label, budget, compare);
    for f in input.files() {
        b.add_input(f.name());
    }
    for c in input.captures() {
        b.add_input(&c.origin().display().to_string());
    }
    for g in &input.groups {
        b.begin_group(&g.source);
        if let Some(c) = &g.capture {
            feed_capture(&mut b, c.as_ref())?;
            b.end_group()?;
            continue;
        }
        let cell = std::cell::RefCell::new(&mut b);
        let mut failed: Option<ReportError> = None;
        let res = feed::feed_group(
            g,
            !compare,
            &mut |ev| {
                cell.borrow_mut()
                    .push(ev)
                    .map_err(|e| Box::new(e) as memscope_dump::reader::ConsumerError)
            },
            &mut || cell.borrow_mut().restart(),
        );
        let res = match res {
            Ok(fed) => {
                fed.warnings
                    .into_iter()
                    .for_each(|w| cell.borrow_mut().add_warning(w));
                Ok(())
            }
            Err(e) => Err(e),
        };
        if let Err(e) = res {
            failed = Some(match e {
                ReadError::Consumer(c) => match c.downcast::<ReportError>() {
                    Ok(r) => *r,
                    Err(c) => ReportError::Analysis(c.to_string()),
                },
                e => ReportError::Read(e),
            });
        }
        if let Some(e) = failed {
            return Err(e);
        }
        b.end_group()?;
    }
    b.finish()
}

/// Pushes the events of a kept capture into `b` (one group).
fn feed_capture(b: &mut RunBuilder, c: &dyn ProcessEvents) -> Result<(), ReportError> {
    c.replay(&mut |ev| {
        b.push(ev)
            .map_err(|e| Box::new(e) as memscope_dump::reader::ConsumerError)
    })
    .map_err(|e| match e.downcast::<ReportError>() {
        Ok(r) => *r,
        // the source's own error names the capture
        Err(e) => ReportError::Analysis(e.to_string()),
    })
}

/// The page's data for one run, or two (base, then compare) with the compare view.
///
/// # Errors
/// As [`read_run`]; more than two runs is an input error.
pub fn build_report(inputs: &[RunInput], budget: &Budget) -> Result<ReportData, ReportError> {
    if inputs.is_empty() || inputs.len() > 2 {
        return Err(ReportError::Input {
            path: inputs
                .get(2)
                .map_or_else(|| "report".to_owned(), |r| r.label.clone()),
            msg: "give one run, or two runs to compare (base first)".into(),
        });
    }
    let compare = inputs.len() == 2;
    let mut runs = Vec::new();
    let mut sides = Vec::new();
    for i in inputs {
        let (run, s) = read_run(i, budget, compare)?;
        runs.push(run);
        sides.extend(s);
    }
    let (compare, diff) = match sides.as_slice() {
        [a, b] => (
            Some(compare_view::compare(
                &runs[0].label,
                &runs[1].label,
                &a.sequences,
                &b.sequences,
                budget,
            )),
            Some(diff_view::view(
                &runs[0].label,
                &runs[1].label,
                &a.live,
                &b.live,
                budget,
            )),
        ),
        _ => (None, None),
    };
    Ok(ReportData {
        schema: SCHEMA,
        generated: chrono::Local::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, false),
        tool: format!("memscope {}", env!("CARGO_PKG_VERSION")),
        runs,
        compare,
        diff,
        limits: Limits {
            series_buckets: budget.series_buckets,
            table_rows: budget.table_rows,
            tree_nodes: budget.tree_nodes,
            max_bytes: budget.max_bytes,
        },
    })
}
