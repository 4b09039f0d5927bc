//! `memscope diff A B` and `memscope diff A --between P1 P2` (issue 24): the live memory of
//! two runs, dumps or captures (or of two points of one), per device, allocator and site,
//! sorted by growth (B − A), as text or `--json`.
//!
//! Processes are paired by rank when both sides know every rank, else in order (a note says
//! so); a process without a partner is compared with nothing. Every error is one line naming
//! the input; `main` prints it and exits 2. `--fail-over SIZE` exits 23 (as `--fail-on`) when
//! an allocator grew by more than SIZE.

use std::path::PathBuf;

use anyhow::{anyhow, Result};
use clap::Args;
use serde_json::{json, Value};

use memscope_analysis::diff::{diff, signed_size, size, totals, DiffRow};
use memscope_analysis::figures::Site;
use memscope_analysis::live_points::{By, LivePointsLayer, Point, Snapshot};
use memscope_analysis::thresholds::{parse_size, Crossing};
use memscope_core::sanitize::escape_controls;
use memscope_export::ProcessInput;

/// `memscope diff`.
#[derive(Clone, Debug, Args)]
pub struct DiffArgs {
    /// Base: a run output directory, a process directory, a dump (.csv, .db) or a capture
    /// (.mscap).
    #[arg(value_name = "A")]
    pub a: PathBuf,
    /// Compared with the base (growth is B − A); omit it with --between.
    #[arg(value_name = "B", required_unless_present = "between")]
    pub b: Option<PathBuf>,
    /// Two points of A: peak, end, step:N (when step N ends), mark:MESSAGE[#K] (after the
    /// K-th msTX mark so named), ts:NS (ns since the epoch) or id:N.
    #[arg(long, num_args = 2, value_names = ["P1", "P2"], conflicts_with_all = ["b", "at"])]
    pub between: Option<Vec<String>>,
    /// The point taken on both sides (as --between's).
    #[arg(long, default_value = "end")]
    pub at: String,
    /// Group by: python (innermost Python frame), c (innermost C frame), owner (owner chain),
    /// op (operator or kernel allocated under), role (the owner chain's role level —
    /// weight, gradient, optimizer_state, activation, temp — where present; issue 25 adds
    /// roles, older runs show "(no role)").
    #[arg(long, default_value = "python")]
    pub by: String,
    /// Only this device: npu:N or cpu.
    #[arg(long)]
    pub device: Option<String>,
    // Only this allocator (an Event Type).
    #[arg(long = "type", value_name = "EVENT_TYPE", help = crate::registry::event_type_help())]
    pub event_type: Option<String>,
    /// Rows printed per allocator (the JSON has them all).
    #[arg(long, default_value_t = 10)]
    pub top: usize,
    /// Keep groups that did not change.
    #[arg(long)]
    pub all: bool,
    /// Print JSON (schemas/memscope_diff.schema.json) instead of text.
    #[arg(long)]
    pub json: bool,
    /// Exit 23 when an allocator of a process grew by more than SIZE (e.g. 64MiB).
    #[arg(long = "fail-over", value_name = "SIZE", allow_hyphen_values = true)]
    pub fail_over: Option<String>,
    /// Exit code when --fail-over is crossed: 1 or 3–125, not 2 (memscope's own errors) [default:
    /// 23].
    #[arg(long = "fail-exit-code", value_name = "N", requires = "fail_over",
          value_parser = crate::ci::parse_exit_code)]
    pub fail_exit_code: Option<u8>,
    /// Which run of an output directory that holds several (`N` for A, `N,M` for A and B:
    /// the runs' numbers as memscope lists them) [default: the newest].
    #[arg(long, value_name = "N[,M]", allow_hyphen_values = true)]
    pub run: Option<String>,
    /// Summary JSON of both inputs and the diff.
    #[command(flatten)]
    pub summary: crate::ci::SummaryArgs,
}

/// One side of a pair.
struct Side {
    label: String,
    snap: Snapshot,
}

/// Two processes compared.
struct Pair {
    a: Option<Side>,
    b: Option<Side>,
    rows: Vec<DiffRow>,
    totals: Vec<DiffRow>,
    /// (device, allocator) of every total before `--device`/`--type` kept some.
    seen: Vec<(String, String)>,
}

/// The processes of one side (`choice`: its run of a directory that holds several).
fn processes(path: &PathBuf, choice: Option<usize>) -> Result<Vec<ProcessInput>> {
    crate::run_select::resolve_paths(
        std::slice::from_ref(path),
        &[choice],
        &mut memscope_export::progress::Silent,
    )
}

/// Live memory of `p` at `points`, grouped `by`.
fn snapshots(p: &ProcessInput, points: &[Point], by: By) -> Result<Vec<Snapshot>> {
    let mut layer =
        crate::ci::summary::replay_through(p, &|| LivePointsLayer::new(points.to_vec(), by))?;
    let snaps = layer.result();
    for (pt, s) in points.iter().zip(&snaps) {
        if !s.reached {
            return Err(anyhow!(
                "{}: {}: point {pt} is never reached",
                p.origin(),
                p.label()
            ));
        }
    }
    Ok(snaps)
}

/// Pairs the processes of both sides: by rank when every process has one, else in order.
fn pair(
    a: Vec<ProcessInput>,
    b: Vec<ProcessInput>,
) -> Vec<(Option<ProcessInput>, Option<ProcessInput>)> {
    let ranked = a.iter().chain(&b).all(|p| p.rank.rank.is_some());
    if ranked {
        let mut out: Vec<(Option<ProcessInput>, Option<ProcessInput>)> = Vec::new();
        let mut b = b;
        for p in a {
            let i = b.iter().position(|q| q.rank.rank == p.rank.rank);
            out.push((Some(p), i.map(|i| b.remove(i))));
        }
        out.extend(b.into_iter().map(|q| (None, Some(q))));
        return out;
    }
    if a.len() > 1 || b.len() > 1 {
        eprintln!("memscope: note: processes without ranks are paired in order (rank, node, pid)");
    }
    let n = a.len().max(b.len());
    let mut ai = a.into_iter();
    let mut bi = b.into_iter();
    (0..n).map(|_| (ai.next(), bi.next())).collect()
}

fn keep(r: &DiffRow, a: &DiffArgs) -> bool {
    let dev_ok = a.device.as_deref().is_none_or(|d| {
        let name = match r.device {
            memscope_core::event::Device::Npu(n) => format!("npu:{n}"),
            other => other.to_text(),
        };
        name == d
    });
    dev_ok && a.event_type.as_deref().is_none_or(|t| t == r.pool.as_str())
}

fn device_name(r: &DiffRow) -> String {
    match r.device {
        memscope_core::event::Device::Npu(n) => format!("npu:{n}"),
        other => other.to_text(),
    }
}

fn row_json(r: &DiffRow) -> Value {
    json!({
        "device": r.device.to_text(),
        "allocator": r.pool.as_str(),
        "key": r.key,
        "a_bytes": r.a.bytes,
        "a_blocks": r.a.blocks,
        "b_bytes": r.b.bytes,
        "b_blocks": r.b.blocks,
        "delta_bytes": r.delta_bytes(),
        "delta_blocks": r.delta_blocks(),
    })
}

fn diff_json(a: &DiffArgs, by: By, pa: &str, pb: &str, pairs: &[Pair]) -> Value {
    json!({
        "format": "memscope-diff",
        "version": 1,
        "by": by.as_str(),
        "a": {"path": a.a.display().to_string(), "point": pa},
        "b": {"path": a.b.as_ref().unwrap_or(&a.a).display().to_string(), "point": pb},
        "pairs": pairs.iter().map(|p| json!({
            "a": p.a.as_ref().map(|s| s.label.clone()),
            "b": p.b.as_ref().map(|s| s.label.clone()),
            "totals": p.totals.iter().map(row_json).collect::<Vec<_>>(),
            "rows": p.rows.iter().map(row_json).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}

fn print_text(a: &DiffArgs, by: By, pa: &str, pb: &str, pairs: &[Pair]) {
    let bpath = a.b.as_ref().unwrap_or(&a.a);
    println!(
        "memscope diff: A = {} ({pa}), B = {} ({pb}), by {}; growth is B - A",
        escape_controls(&a.a.display().to_string()),
        escape_controls(&bpath.display().to_string()),
        by.as_str()
    );
    for p in pairs {
        let name = |s: &Option<Side>| s.as_ref().map_or("(none)".to_owned(), |s| s.label.clone());
        println!("{} -> {}:", name(&p.a), name(&p.b));
        if p.totals.is_empty() {
            println!("  no memory blocks on either side");
        }
        for t in &p.totals {
            println!(
                "  {} {}: {} -> {} ({}, {:+} block{})",
                device_name(t),
                t.pool.as_str(),
                size(t.a.bytes),
                size(t.b.bytes),
                signed_size(t.delta_bytes()),
                t.delta_blocks(),
                if t.delta_blocks().abs() == 1 { "" } else { "s" }
            );
            let rows: Vec<&DiffRow> = p
                .rows
                .iter()
                .filter(|r| r.device == t.device && r.pool == t.pool)
                .collect();
            for r in rows.iter().take(a.top) {
                println!(
                    "    {:>12} {:>+9} blocks  ({} -> {})  {}",
                    signed_size(r.delta_bytes()),
                    r.delta_blocks(),
                    size(r.a.bytes),
                    size(r.b.bytes),
                    escape_controls(&r.key)
                );
            }
            if rows.len() > a.top {
                println!(
                    "    ... {} more group(s) (--top N, or --json for all)",
                    rows.len() - a.top
                );
            }
        }
    }
}

/// Crossings of `--fail-over`: an allocator of a pair that grew by more than `max`.
fn growth_crossings(text: &str, max: u64, pairs: &[Pair]) -> Vec<Crossing> {
    let mut v = Vec::new();
    for p in pairs {
        let label =
            p.b.as_ref()
                .or(p.a.as_ref())
                .map_or(String::new(), |s| s.label.clone());
        for t in &p.totals {
            let grew = t.delta_bytes();
            if grew <= 0 || grew as u64 <= max {
                continue;
            }
            let top = p
                .rows
                .iter()
                .find(|r| r.device == t.device && r.pool == t.pool && r.delta_bytes() > 0);
            let c = Crossing {
                limit: format!("growth>{text}"),
                process: label.clone(),
                device: Some(device_name(t)),
                allocator: Some(t.pool.as_str().to_owned()),
                value: grew as u64,
                max,
                site: top.map(|r| Site {
                    site: r.key.clone(),
                    bytes: r.delta_bytes().max(0) as u64,
                    blocks: r.delta_blocks().max(0) as u64,
                }),
            };
            eprintln!("memscope: {}", c.line(false));
            v.push(c);
        }
    }
    v
}

/// Runs `memscope diff`.
///
/// # Errors
/// A bad point, grouping or input (one line); [`crate::ci::LimitsCrossed`] when --fail-over
/// is crossed.
pub fn run(a: &DiffArgs) -> Result<()> {
    let by = By::parse(&a.by)
        .ok_or_else(|| anyhow!("--by {}: expected owner, python, c, op or role", a.by))?;
    let (pa, pb) = match &a.between {
        Some(v) => (v[0].clone(), v[1].clone()),
        None => (a.at.clone(), a.at.clone()),
    };
    let p1 = Point::parse(&pa).map_err(|e| anyhow!("--at/--between {e}"))?;
    let p2 = Point::parse(&pb).map_err(|e| anyhow!("--at/--between {e}"))?;
    let max = a
        .fail_over
        .as_deref()
        .map(|t| parse_size(t).map_err(|e| anyhow!("--fail-over {e}")))
        .transpose()?;
    if let Some(d) = a.device.as_deref() {
        let ok = d == "cpu"
            || d.strip_prefix("npu:")
                .is_some_and(|n| n.parse::<u32>().is_ok());
        if !ok {
            return Err(anyhow!("--device {d}: expected npu:N or cpu"));
        }
    }
    if let Some(p) = &a.summary.summary_json {
        crate::ci::check_summary_path(p).map_err(|e| anyhow!("{e}"))?;
    }
    let sides = if a.between.is_some() { 1 } else { 2 };
    let runs = crate::run_select::choices(a.run.as_deref(), sides)?;
    let mut pairs = Vec::new();
    if a.between.is_some() {
        for p in processes(&a.a, runs.first().copied().flatten())? {
            let s = snapshots(&p, &[p1.clone(), p2.clone()], by)?;
            let mut s = s.into_iter();
            let (sa, sb) = (s.next().unwrap_or_default(), s.next().unwrap_or_default());
            pairs.push(make_pair(
                a,
                Some(Side {
                    label: p.label(),
                    snap: sa,
                }),
                Some(Side {
                    label: p.label(),
                    snap: sb,
                }),
            ));
        }
    } else {
        let b =
            a.b.as_ref()
                .ok_or_else(|| anyhow!("give B, or --between P1 P2"))?;
        let (ra, rb) = (
            runs.first().copied().flatten(),
            runs.get(1).copied().flatten(),
        );
        for (pa_in, pb_in) in pair(processes(&a.a, ra)?, processes(b, rb)?) {
            let side = |p: Option<ProcessInput>, pt: &Point| -> Result<Option<Side>> {
                p.map(|p| {
                    let s = snapshots(&p, std::slice::from_ref(pt), by)?;
                    Ok(Side {
                        label: p.label(),
                        snap: s.into_iter().next().unwrap_or_default(),
                    })
                })
                .transpose()
            };
            let sa = side(pa_in, &p1)?;
            let sb = side(pb_in, &p2)?;
            pairs.push(make_pair(a, sa, sb));
        }
    }
    check_filters(a, &pairs)?;
    let doc = diff_json(a, by, &pa, &pb, &pairs);
    if a.json {
        println!("{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
    } else {
        print_text(a, by, &pa, &pb, &pairs);
    }
    let crossed = max.map_or_else(Vec::new, |m| {
        growth_crossings(a.fail_over.as_deref().unwrap_or(""), m, &pairs)
    });
    if a.summary.summary_json.is_none() && crossed.is_empty() {
        return Ok(());
    }
    let mut inputs = Vec::new();
    if a.summary.summary_json.is_some() {
        let sides: Vec<(&str, &PathBuf, &str)> = match &a.b {
            Some(b) if a.between.is_none() => vec![("A", &a.a, &pa), ("B", b, &pb)],
            _ => vec![("A", &a.a, pa.as_str())],
        };
        for (i, (label, path, point)) in sides.into_iter().enumerate() {
            let run = [runs.get(i).copied().flatten()];
            inputs.push(crate::ci::Input {
                label: label.to_owned(),
                path: path.clone(),
                point: Some(point.to_owned()),
                processes: crate::ci::compute(std::slice::from_ref(path), &run, &[])?,
            });
        }
    }
    crate::ci::finish_offline(
        "diff",
        &[],
        crossed,
        a.fail_exit_code.unwrap_or(crate::ci::EXIT_LIMIT),
        a.summary.summary_json.as_deref(),
        inputs,
        Some(doc),
    )
}

fn make_pair(a: &DiffArgs, sa: Option<Side>, sb: Option<Side>) -> Pair {
    let empty = Snapshot::default();
    let (x, y) = (
        sa.as_ref().map_or(&empty, |s| &s.snap),
        sb.as_ref().map_or(&empty, |s| &s.snap),
    );
    let rows = diff(x, y, a.all)
        .into_iter()
        .filter(|r| keep(r, a))
        .collect();
    let all = totals(x, y);
    let seen = all
        .iter()
        .map(|r| (device_name(r), r.pool.as_str().to_owned()))
        .collect();
    let totals = all.into_iter().filter(|r| keep(r, a)).collect();
    Pair {
        a: sa,
        b: sb,
        rows,
        totals,
        seen,
    }
}

/// A `--device`/`--type` that keeps nothing of inputs that hold blocks is a mistake (a typo
/// would pass a `--fail-over` gate): one line naming what the inputs hold.
fn check_filters(a: &DiffArgs, pairs: &[Pair]) -> Result<()> {
    if a.device.is_none() && a.event_type.is_none() {
        return Ok(());
    }
    let seen: std::collections::BTreeSet<&(String, String)> =
        pairs.iter().flat_map(|p| &p.seen).collect();
    if seen.is_empty() || pairs.iter().any(|p| !p.totals.is_empty()) {
        return Ok(());
    }
    let what: Vec<String> = seen.iter().map(|(d, t)| format!("{d} {t}")).collect();
    let filter = [
        a.device.as_deref().map(|d| format!("--device {d}")),
        a.event_type.as_deref().map(|t| format!("--type {t}")),
    ]
    .into_iter()
    .flatten()
    .collect::<Vec<_>>()
    .join(" ");
    Err(anyhow!(
        "{}: no blocks of the inputs match (they hold: {}); nothing compared",
        escape_controls(&filter),
        what.join(", ")
    ))
}
