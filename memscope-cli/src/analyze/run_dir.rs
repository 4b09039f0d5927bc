//! `memscope analyze leaks|gap|decompose <run dir>` (issue 18): the analysis over every
//! process of an output directory (any tree of `msmemscope_<pid>_<ts>_ascend/` directories),
//! one line per process — its rank (from `memscope_run.json` when there is one, else its NPU),
//! pid, devices, rows, peak per pool and the analysis's figures — sorted by peak, largest
//! first, then the imbalance between the largest and the smallest peak.
//!
//! Each process's NPU device files are analysed one by one (`rows analysed` counts their rows;
//! its `device_cpu` file only when it has no other); their figures are combined: peaks and gaps
//! take the extreme, leaks add up, decompose rows are concatenated into one `decompose_<ts>.csv`
//! per process. A process with no dump (its HOST and Python-object events only in its capture)
//! is analysed from its capture, gap and decompose alike; its pool leaks are said not recorded.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::{Arc, Mutex};

use anyhow::{anyhow, Result};

use memscope_analysis::decompose::{write_decompose_csv, DecomposeLayer};
use memscope_analysis::gap::GapLayer;
use memscope_analysis::leaks::LeakLayer;
use memscope_core::bus::{Bus, BusCtx, BusError, Flow, Layer, ReportSection};
use memscope_core::event::{Device, Event, EventKind};
use memscope_export::rank::{RunIndex, RunIndexFiles};
use memscope_export::ProcessInput;

use super::{print_sections, run_offline, say, ReplayArgs};

/// Which analysis runs over the directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Which {
    /// Memory-pool leaks by step.
    Leaks,
    /// Min/max pool usage per step.
    Gap,
    /// Bytes per owner (writes CSVs).
    Decompose,
}

/// Peak `used` bytes per pool (`Event Type`) of the MALLOC rows on NPUs, and the rows seen,
/// shared with the caller.
#[derive(Default)]
struct PeakLayer(Arc<Mutex<(BTreeMap<String, u64>, u64)>>);

impl Layer for PeakLayer {
    fn name(&self) -> &'static str {
        "peak"
    }

    fn on_event(
        &mut self,
        ev: &mut Event,
        _: &BusCtx,
        _: &mut Vec<Event>,
    ) -> Result<Flow, BusError> {
        if let Ok(mut m) = self.0.lock() {
            m.1 += 1;
            if ev.kind == EventKind::Malloc && matches!(ev.device, Device::Npu(_)) {
                if let Some(used) = ev.memory().and_then(|m| m.used) {
                    let p = m.0.entry(ev.event_type.as_str().to_owned()).or_default();
                    *p = (*p).max(used.max(0) as u64);
                }
            }
        }
        Ok(Flow::Pass)
    }
}

/// Figures of one process.
#[derive(Default)]
struct Figures {
    rows: u64,
    peaks: BTreeMap<String, u64>,
    sections: Vec<ReportSection>,
    /// Decompose: (largest owner at the peak, bytes), and the CSV written.
    top_owner: Option<(String, i64)>,
    csv: Option<String>,
}

/// `(MiB, allocations)` of the `====== SUMMARY: …` lines of leak sections.
fn leak_totals(sections: &[ReportSection]) -> (f64, u64) {
    let mut t = (0.0, 0);
    for l in sections
        .iter()
        .filter(|s| s.title.starts_with("Memory pool leaks"))
        .flat_map(|s| &s.lines)
    {
        let Some(rest) = l.strip_prefix("====== SUMMARY: ") else {
            continue;
        };
        let mb = rest
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<f64>().ok());
        let n = rest
            .split_once("leaked in ")
            .and_then(|(_, r)| r.split_whitespace().next()?.parse::<u64>().ok());
        if let (Some(mb), Some(n)) = (mb, n) {
            t.0 += mb;
            t.1 += n;
        }
    }
    t
}

/// The lowest `MinGap` and highest `MaxGap` ratio (%) with their steps, of gap sections.
fn gap_extremes(sections: &[ReportSection]) -> Option<((f64, String), (f64, String))> {
    let mut min: Option<(f64, String)> = None;
    let mut max: Option<(f64, String)> = None;
    for l in sections.iter().flat_map(|s| &s.lines) {
        let cells: Vec<&str> = l.split_whitespace().collect();
        let [label, ratio, _, step] = cells[..] else {
            continue;
        };
        let Ok(r) = ratio.parse::<f64>() else {
            continue;
        };
        match label {
            "MinGap" if min.as_ref().is_none_or(|m| r < m.0) => min = Some((r, step.into())),
            "MaxGap" if max.as_ref().is_none_or(|m| r > m.0) => max = Some((r, step.into())),
            _ => {}
        }
    }
    Some((min?, max?))
}

fn mib(b: u64) -> String {
    crate::rank_table::mib(b)
}

fn analyse(p: &ProcessInput, which: Which, replay: ReplayArgs, out_dir: &Path) -> Result<Figures> {
    let npu: Vec<_> = p
        .files
        .iter()
        .filter(|f| matches!(f.device, Some(Device::Npu(_))))
        .collect();
    let files: Vec<_> = if npu.is_empty() {
        p.files.iter().collect()
    } else {
        npu
    };
    let mut fig = Figures::default();
    if files.is_empty() && which == Which::Leaks {
        // its events are all in its capture (HOST, Python objects): no pool block to judge
        fig.sections.push(ReportSection::new(
            "Memory pool leaks".into(),
            vec!["Not recorded: this process wrote no dump rows (its host and Python-object events are in its capture; `memscope run --fail-on leaks.host>SIZE` or `leaks.pymem>SIZE` judges them, `memscope export --to csv` writes them)".into()],
        ));
    }
    let mut decompose = Vec::new();
    let peaks = Arc::new(Mutex::new((BTreeMap::new(), 0u64)));
    let mut handles = Vec::new();
    let mut make = || {
        let mut v: Vec<Box<dyn Layer>> = vec![Box::new(PeakLayer(peaks.clone()))];
        match which {
            Which::Leaks => {
                v.push(Box::new(LeakLayer::new()));
                v.extend(crate::analyze_cmd::adapter_leak_layers());
            }
            Which::Gap => v.push(Box::new(GapLayer::new())),
            Which::Decompose => {
                let (layer, h) = DecomposeLayer::collecting();
                handles.push(h);
                v.push(Box::new(layer));
            }
        }
        v
    };
    for f in &files {
        fig.sections
            .extend(run_offline(&f.dump, replay, &mut make)?);
    }
    // a process whose events are all in its capture (HOST, Python objects) is analysed from
    // it, as `memscope analyze` over that capture is (its pool leaks are said above)
    let capture = p.capture.as_ref().filter(|_| files.is_empty());
    if let Some(c) = capture.filter(|_| which != Which::Leaks) {
        let mut bus = Bus::new(p.pid, make());
        c.replay(&mut |ev| bus.push(ev).map_err(|e| Box::new(e) as _))
            .map_err(|e| anyhow!("{e}"))?;
        fig.sections
            .extend(bus.finish().map_err(|e| anyhow!("{}: {e}", p.label()))?);
    }
    let seen = peaks.lock().map_err(|_| anyhow!("peak analysis failed"))?;
    fig.rows += seen.1;
    for (k, v) in seen.0.iter() {
        let e = fig.peaks.entry(k.clone()).or_default();
        *e = (*e).max(*v);
    }
    for h in handles {
        decompose.extend(
            h.lock()
                .map_err(|_| anyhow!("decompose analysis failed"))?
                .drain(..),
        );
    }
    if which == Which::Decompose {
        fig.top_owner = decompose
            .iter()
            .map(|(_, r)| r)
            .max_by_key(|r| r.peak)
            .map(|r| (r.owner.clone(), r.peak));
        let path = write_decompose_csv(out_dir, &decompose)
            .map_err(|e| anyhow!("cannot write into {}: {e}", out_dir.display()))?;
        fig.csv = Some(path.display().to_string());
    }
    Ok(fig)
}

/// Runs `which` over every process under `dir` and prints the per-rank table (every
/// process's own sections before it with `full`).
///
/// # Errors
/// No dumps under `dir`, an unreadable run index or dump, an output that cannot be written.
pub fn run(
    dir: &Path,
    which: Which,
    replay: ReplayArgs,
    (full, run): (bool, Option<usize>),
    out_dir: &Path,
) -> Result<()> {
    // one run of a directory that holds several (issue 23)
    let inputs = match crate::run_select::choose(dir, run)? {
        Some(dirs) => dirs,
        None => vec![dir.to_path_buf()],
    };
    let index = RunIndexFiles::load(&[dir.to_path_buf()]).map_err(|e| anyhow!("{e}"))?;
    let index_ref: Option<&dyn RunIndex> = (!index.is_empty()).then_some(&index as _);
    // a process whose events are all in its capture (HOST, Python objects) has no dump: its
    // capture is read instead (a process with dumps is analysed from them, as before)
    let mut captures = Vec::new();
    for input in &inputs {
        for f in crate::capture_input::find(input).map_err(|e| anyhow!("{e}"))? {
            if f.dir.as_deref().is_none_or(crate::capture_input::has_dumps) {
                continue;
            }
            captures.push(memscope_export::Captured {
                dir: f.dir,
                events: f.events,
            });
        }
    }
    let (procs, notes) = memscope_export::resolve_with(
        &inputs,
        &captures,
        index_ref,
        &mut memscope_export::progress::Silent,
    )
    .map_err(|e| anyhow!("{e}"))?;
    // with a run index, ranks are what it says (`memscope_export::rank`)
    for n in notes {
        eprintln!("memscope: note: {n}");
    }
    let mut results = Vec::new();
    for p in &procs {
        results.push((p, analyse(p, which, replay, out_dir)?));
    }
    let pools: BTreeSet<String> = results
        .iter()
        .flat_map(|(_, f)| f.peaks.keys().cloned())
        .collect();
    let framework = pools.iter().any(|p| p != "HAL");
    let ranking = |f: &Figures| -> u64 {
        if framework {
            f.peaks
                .iter()
                .filter(|(k, _)| *k != "HAL")
                .map(|(_, v)| v)
                .sum()
        } else {
            f.peaks.get("HAL").copied().unwrap_or(0)
        }
    };
    results.sort_by_key(|(p, f)| (std::cmp::Reverse(ranking(f)), p.rank.rank, p.pid));
    if full {
        for (p, f) in &results {
            say(&format!("==== {} ====", process_name(p)));
            print_sections(&f.sections, true);
        }
    }
    let mut header: Vec<String> = ["rank", "pid", "device", "rows analysed"]
        .map(String::from)
        .to_vec();
    header.extend(pools.iter().map(|p| format!("peak {p}")));
    match which {
        Which::Leaks => header.push("pool leaks".into()),
        Which::Gap => header.extend(["min gap % (step)", "max gap % (step)"].map(String::from)),
        Which::Decompose => header.extend(["largest owner at peak", "csv"].map(String::from)),
    }
    let mut table = vec![header];
    for (p, f) in &results {
        let devices: Vec<String> = p
            .devices
            .iter()
            .filter(|d| **d != Device::NotApplicable)
            .map(|d| d.to_text())
            .collect();
        let mut row = vec![
            p.rank.rank.map_or("-".into(), |r| r.to_string()),
            p.pid.map_or("-".into(), |r| r.to_string()),
            if devices.is_empty() {
                "-".into()
            } else {
                devices.join(",")
            },
            f.rows.to_string(),
        ];
        row.extend(
            pools
                .iter()
                .map(|k| f.peaks.get(k).map_or("-".into(), |b| mib(*b))),
        );
        match which {
            Which::Leaks => {
                let (mb, n) = leak_totals(&f.sections);
                // the leak section says "Not recorded" without framework-pool blocks
                let unrecorded = f
                    .sections
                    .iter()
                    .filter(|s| s.title.starts_with("Memory pool leaks"))
                    .flat_map(|s| &s.lines)
                    .any(|l| l.starts_with("Not recorded"));
                row.push(if n == 0 && unrecorded {
                    "not recorded".into()
                } else if n == 0 {
                    "0".into()
                } else {
                    format!("{mb:.1} MiB in {n}")
                });
            }
            Which::Gap => match gap_extremes(&f.sections) {
                Some((lo, hi)) => {
                    row.push(format!("{:.2} ({})", lo.0, lo.1));
                    row.push(format!("{:.2} ({})", hi.0, hi.1));
                }
                None => row.extend(["-".to_owned(), "-".to_owned()]),
            },
            Which::Decompose => {
                row.push(f.top_owner.as_ref().map_or("-".into(), |(o, b)| {
                    format!("{o} {}", mib((*b).max(0) as u64))
                }));
                row.push(f.csv.clone().unwrap_or_else(|| "-".into()));
            }
        }
        table.push(row);
    }
    let mut width = vec![0usize; table[0].len()];
    for r in &table {
        for (w, c) in width.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let any_rank = results.iter().any(|(p, _)| p.rank.rank.is_some());
    say(&format!(
        "==== per {}: {} process(es), sorted by peak{} ====",
        if any_rank { "rank" } else { "process" },
        results.len(),
        if framework {
            " (framework pools)"
        } else if pools.is_empty() {
            // no NPU pool rows at all (a host-only run): the order is the processes'
            " (no NPU pool rows)"
        } else {
            " (HAL)"
        }
    ));
    for r in &table {
        let cells: Vec<String> = r
            .iter()
            .zip(&width)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        say(cells.join("  ").trim_end());
    }
    let ranked: Vec<_> = results
        .iter()
        .filter(|(_, f)| !f.peaks.is_empty())
        .collect();
    if ranked.len() < 2 {
        // one process: there is nothing to be imbalanced against
        return Ok(());
    }
    // the smallest peak: of equal ones, the lowest rank
    let least = ranked.last().map(|(_, f)| ranking(f));
    let min = ranked.iter().find(|(_, f)| Some(ranking(f)) == least);
    if let (Some(max), Some(min)) = (ranked.first(), min) {
        let (hi, lo) = (ranking(&max.1), ranking(&min.1));
        let who = process_name;
        say(&format!(
            "imbalance: largest peak {} {}, smallest {} {}: {} more ({:.2}x)",
            who(max.0),
            mib(hi),
            who(min.0),
            mib(lo),
            mib(hi - lo),
            if lo == 0 {
                f64::INFINITY
            } else {
                hi as f64 / lo as f64
            }
        ));
    }
    Ok(())
}

/// `rank R (pid P)`, or `pid P` for a process without a rank (the table's `-`).
fn process_name(p: &ProcessInput) -> String {
    let pid = p.pid.map_or("?".into(), |r| r.to_string());
    match p.rank.rank {
        Some(r) => format!("rank {r} (pid {pid})"),
        None => format!("pid {pid}"),
    }
}
