//! `memscope analyze races FILE|RUN_DIR` (issue 36): memscope's cross-stream race check over
//! every process of a dump, a capture or an output directory — each process's events replayed
//! whole, in ID order (its capture, else its dump files), through `memscope_races`'s layer.
//! Prints a `Stream races` section per process, or with `--json` one JSON object per finding.

use std::path::PathBuf;

use anyhow::{anyhow, Result};
use clap::Args;
use serde_json::{json, Value};

use memscope_core::bus::{BusCtx, Layer, ReportSection};
use memscope_races::{AccessRole, OpSide, RaceFinding, RaceLayer};

use super::{print_sections, say, sections_of, ReplayArgs};

/// `memscope analyze races FILE|RUN_DIR [--json] [--fail-over N]`.
#[derive(Clone, Debug, Args)]
pub struct RacesArgs {
    /// Dump, capture (`.mscap`) or output directory: every process in it.
    pub file: PathBuf,
    /// Print every line of long lists (top items only by default).
    #[arg(long)]
    pub full: bool,
    /// With an output directory that holds several runs: which one (its number as memscope
    /// lists them) [default: the newest].
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    pub run: Option<usize>,
    /// One JSON object per finding on stdout (kind, address, size, both operations with their
    /// streams, owners and stacks, the process) instead of the report.
    #[arg(long)]
    pub json: bool,
    /// Exit 23 (--fail-exit-code) when a process has more than N races; the same check as
    /// `memscope run --fail-on races>N`.
    #[arg(long = "fail-over", value_name = "N", allow_hyphen_values = true)]
    pub fail_over: Option<String>,
    /// Exit code when --fail-over is crossed: 1 or 3–125, not 2 [default: 23].
    #[arg(long = "fail-exit-code", value_name = "N", requires = "fail_over",
          value_parser = crate::ci::parse_exit_code)]
    pub fail_exit_code: Option<u8>,
    /// Summary JSON.
    #[command(flatten)]
    pub summary: crate::ci::SummaryArgs,
}

fn side_json(s: &OpSide) -> Value {
    json!({
        "id": s.id,
        "seq": s.seq,
        "name": &*s.name,
        "stream": s.stream.map(|x| format!("{x:#x}")),
        "role": match s.role {
            AccessRole::Read => "read",
            AccessRole::Write => "write",
            AccessRole::Free => "free",
        },
        "output": s.is_output,
        "aliases": s.aliases,
        "owner": s.owner,
        "size": s.size,
        "timestamp_ns": s.time_ns,
        "python_stack": s.python_stack.as_deref(),
        "c_stack": s.c_stack.as_deref(),
    })
}

/// One finding as JSON (the `--json` line).
pub fn finding_json(pid: Option<u32>, f: &RaceFinding) -> Value {
    json!({
        "pid": pid,
        "kind": f.kind.as_str(),
        "addr": format!("{:#x}", f.addr),
        "size": f.size,
        "current": side_json(&f.current),
        "previous": side_json(&f.previous),
        "free": f.free.as_ref().map(side_json),
    })
}

/// With `--json`, what is not a finding (the count, "not recorded", notes on what was not
/// checked) goes to stderr, so that stdout holds only findings and a clean run is told apart
/// from one that recorded nothing.
fn to_stderr(sections: &[ReportSection]) {
    for s in sections {
        for l in s.all_lines() {
            eprintln!(
                "memscope: {}: {}",
                memscope_core::sanitize::escape_controls(&s.title),
                memscope_core::sanitize::escape_controls(l)
            );
        }
    }
}

/// Runs the check and prints its result: a dump or capture file in one pass (as the other
/// analyses read it), an output directory process by process.
///
/// # Errors
/// An input that cannot be resolved or read (one line naming it).
pub fn run(a: &RacesArgs) -> Result<()> {
    let json = |pid: Option<u32>, f: RaceFinding| say(&finding_json(pid, &f).to_string());
    if !a.file.is_dir() {
        if a.run.is_some() {
            return Err(anyhow!(
                "{}: --run goes with an output directory that holds several runs",
                a.file.display()
            ));
        }
        let replay = ReplayArgs {
            order: super::OrderArg::Id,
        };
        let sections = sections_of(&a.file, replay, &mut || -> Vec<Box<dyn Layer>> {
            if a.json {
                vec![Box::new(RaceLayer::streaming(Box::new(json)))]
            } else {
                vec![Box::new(RaceLayer::new())]
            }
        })?;
        if a.json {
            to_stderr(&sections);
        } else {
            print_sections(&sections, a.full);
        }
        return Ok(());
    }
    let procs = crate::run_select::resolve_paths(
        std::slice::from_ref(&a.file),
        &[a.run],
        &mut memscope_export::progress::Silent,
    )?;
    let mut sections: Vec<ReportSection> = Vec::new();
    let mut total = 0u64;
    for p in &procs {
        let mut layer = if a.json {
            crate::ci::summary::replay_through(p, &|| RaceLayer::streaming(Box::new(json)))?
        } else {
            crate::ci::summary::replay_through(p, &RaceLayer::new)?
        };
        total += layer.total();
        let ctx = BusCtx {
            pid: p.pid,
            ..BusCtx::default()
        };
        layer.finish(&ctx, &mut Vec::new(), &mut sections)?;
    }
    if a.json {
        to_stderr(&sections);
    } else {
        print_sections(&sections, a.full);
        if procs.len() > 1 {
            say(&format!("races: {total} in {} process(es)", procs.len()));
        }
    }
    Ok(())
}
