//! The figures of every process of some inputs ([`compute`]) and the `--summary-json`
//! document ([`document`], `schemas/memscope_summary.schema.json`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Result};
use serde_json::{json, Value};

use memscope_analysis::figures::{FiguresLayer, ProcessFigures};
use memscope_analysis::thresholds::{Crossing, Limit};
use memscope_core::bus::{BusCtx, Layer};
use memscope_export::replay::{replay, Flow, Item};
use memscope_export::ProcessInput;

/// The summary format's `version`.
pub const VERSION: u32 = 1;

/// What the collector knows of a process it followed (pid, executable, dropped events).
#[derive(Clone, Debug)]
pub struct Known {
    /// Process id.
    pub pid: u32,
    /// Executable.
    pub exe: String,
    /// Events the probe could not record.
    pub dropped: u64,
}

/// The job of a `memscope run`, for the summary.
pub struct JobFacts<'a> {
    /// The job's command line.
    pub command: &'a [String],
    /// Its exit code (128+N when killed by signal N).
    pub exit_code: i32,
    /// The run's output directory.
    pub output: &'a Path,
    /// The processes the collector followed.
    pub known: &'a [Known],
}

/// One process and its figures.
#[derive(Clone, Debug)]
pub struct ProcessRow {
    /// Process id, when known.
    pub pid: Option<u32>,
    /// Rank, when known.
    pub rank: Option<u32>,
    /// Executable, when known (run index or collector).
    pub exe: Option<String>,
    /// Its directory, capture or dump file.
    pub source: String,
    /// Events dropped by the probe, when known.
    pub dropped: Option<u64>,
    /// Its figures.
    pub figures: ProcessFigures,
}

impl ProcessRow {
    /// `pid 42 (rank 0)`, for messages.
    pub fn label(&self) -> String {
        let pid = self
            .pid
            .map_or("pid N/A".to_owned(), |p| format!("pid {p}"));
        match self.rank {
            Some(r) => format!("{pid} (rank {r})"),
            None => pid,
        }
    }
}

/// One input of the summary: what the user named, its processes.
#[derive(Clone, Debug)]
pub struct Input {
    /// `run`, `input`, `A`, `B`.
    pub label: String,
    /// The path.
    pub path: PathBuf,
    /// The point of a diff side (`end`, `step:3`), if any.
    pub point: Option<String>,
    /// Its processes.
    pub processes: Vec<ProcessRow>,
}

/// `(exe, dropped)` of the processes listed in the run indexes at or above `inputs`, by
/// canonical process directory.
fn indexed(inputs: &[PathBuf]) -> HashMap<PathBuf, (String, u64)> {
    let mut m = HashMap::new();
    for p in inputs.iter().filter(|p| p.is_dir()) {
        for root in [Some(p.as_path()), p.parent()].into_iter().flatten() {
            let root = if root.as_os_str().is_empty() {
                Path::new(".")
            } else {
                root
            };
            let Ok(Some(file)) = memscope_dump::run_index::read(root) else {
                continue;
            };
            for e in file.runs.iter().flat_map(|r| &r.processes) {
                if let Some(d) = &e.dir {
                    let dir = root.join(d);
                    let key = std::fs::canonicalize(&dir).unwrap_or(dir);
                    m.insert(key, (e.exe.clone(), e.dropped));
                }
            }
        }
    }
    m
}

/// Replays the events of `p` (its capture or dumps, in ID order) through a layer made by
/// `make`, with the bus's step state; a replay that restarts (a file out of order) starts a
/// new layer. Returns the layer.
///
/// # Errors
/// A read error naming the file, or the layer's.
pub fn replay_through<L: Layer>(p: &ProcessInput, make: &dyn Fn() -> L) -> Result<L> {
    let mut layer = make();
    let mut ctx = BusCtx {
        pid: p.pid,
        ..BusCtx::default()
    };
    let mut sink = Vec::new();
    replay(
        p,
        None,
        &mut memscope_export::progress::Silent,
        &mut |item| {
            match item {
                Item::Event(ev) => {
                    ctx.steps.observe(&ev);
                    sink.clear();
                    layer.feed(ev, &ctx, &mut sink).map_err(|e| {
                        memscope_export::ExportError::Read(
                            memscope_dump::reader::ReadError::Consumer(Box::new(e)),
                        )
                    })?;
                }
                Item::Restart => {
                    layer = make();
                    ctx.steps = Default::default();
                }
            }
            Ok(Flow::Continue)
        },
    )
    .map_err(|e| anyhow!("{e}"))?;
    Ok(layer)
}

/// The figures of one process, replayed from its capture or dumps.
///
/// # Errors
/// A read error naming the file.
pub fn figures_of(p: &ProcessInput) -> Result<ProcessFigures> {
    Ok(replay_through(p, &FiguresLayer::new)?.result())
}

/// The processes of `inputs` with their figures (one run of an output directory that holds
/// several: `choices`, as [`crate::run_select::narrow`]); `known` adds what the collector
/// knows of them (a run's own processes).
///
/// # Errors
/// An input that cannot be resolved or read (one line naming it).
pub fn compute(
    inputs: &[PathBuf],
    choices: &[Option<usize>],
    known: &[Known],
) -> Result<Vec<ProcessRow>> {
    let procs =
        crate::run_select::resolve_paths(inputs, choices, &mut memscope_export::progress::Silent)?;
    let index = indexed(inputs);
    procs
        .iter()
        .map(|p| {
            let from_index = p
                .dir
                .as_deref()
                .map(|d| std::fs::canonicalize(d).unwrap_or_else(|_| d.to_path_buf()))
                .and_then(|d| index.get(&d).cloned());
            let from_run = known.iter().find(|k| Some(k.pid) == p.pid);
            Ok(ProcessRow {
                pid: p.pid,
                rank: p.rank.rank,
                exe: from_run
                    .map(|k| k.exe.clone())
                    .or_else(|| from_index.as_ref().map(|i| i.0.clone()))
                    .filter(|e| !e.is_empty()),
                source: p.origin(),
                dropped: from_run
                    .map(|k| k.dropped)
                    .or_else(|| from_index.map(|i| i.1)),
                figures: figures_of(p)?,
            })
        })
        .collect()
}

fn process_json(p: &ProcessRow) -> Value {
    json!({
        "pid": p.pid,
        "rank": p.rank,
        "exe": p.exe,
        "source": p.source,
        "dropped": p.dropped,
        "rows": p.figures.rows,
        "counts": p.figures.counts,
        "steps_ended": p.figures.steps_ended,
        "allocators": p.figures.allocators,
        "races": p.figures.races,
        "races_unchecked": p.figures.races_unchecked,
    })
}

/// `crossed`, `not recorded` or `kept`: what became of `limit` over `inputs`.
fn status(limit: &Limit, crossed: &[Crossing], inputs: &[Input]) -> &'static str {
    let procs: Vec<ProcessRow> = inputs.iter().flat_map(|i| i.processes.clone()).collect();
    if crossed.iter().any(|c| c.limit == limit.text) {
        "crossed"
    } else if super::not_recorded(limit, &procs) {
        "not recorded"
    } else {
        "kept"
    }
}

/// The `--summary-json` document.
pub fn document(
    command: &str,
    exit_code: i32,
    job: Option<&JobFacts<'_>>,
    limits: &[Limit],
    crossed: &[Crossing],
    inputs: &[Input],
    diff: Option<Value>,
) -> Value {
    json!({
        "format": "memscope-summary",
        "version": VERSION,
        "memscope": env!("CARGO_PKG_VERSION"),
        "command": command,
        "exit_code": exit_code,
        "job": job.map(|j| json!({"command": j.command, "exit_code": j.exit_code})),
        "limits": limits.iter().map(|l| json!({
            "limit": l.text,
            "metric": l.metric.as_str(),
            "device": l.scope.device,
            "allocator": l.scope.allocator,
            "max": l.max,
            "status": status(l, crossed, inputs),
        })).collect::<Vec<_>>(),
        "crossed": crossed,
        "inputs": inputs.iter().map(|i| json!({
            "label": i.label,
            "path": i.path.display().to_string(),
            "point": i.point,
            "processes": i.processes.iter().map(process_json).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "diff": diff,
    })
}
