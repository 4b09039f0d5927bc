//! The end-of-run summary of a multi-process job (issue 18): one line per process — rank,
//! pid, devices, rows, drops, peak per pool, pool leaks, how it ended — and the rank with the
//! largest and the smallest peak, instead of every process's full sections (25+ lines each,
//! thousands with per-step gap tables). Each process's one-line row count (`memscope: pid P
//! (exe): N rows (...), D dropped`) is printed above the table as in a one-process run. The full
//! per-process summary goes to `memscope_summary_<ts>_<memscope pid>.txt` at the output root (the
//! process logs hold it too).

use memscope_collect::process::ProcessSummary;
use memscope_dump::run_index::ProcessEntry;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

const MIB: f64 = 1024.0 * 1024.0;

/// Bytes as `12.3 MiB`.
pub fn mib(b: u64) -> String {
    format!("{:.1} MiB", b as f64 / MIB)
}

/// `(MiB leaked, allocations)` summed over the `====== SUMMARY: X Mb(s) leaked in N
/// allocation(s) ======` lines of the process's "Memory pool leaks" section; `None` when the
/// leak analysis did not run.
pub fn pool_leaks(p: &ProcessSummary) -> Option<(f64, u64)> {
    let sec = p
        .report
        .iter()
        .find(|s| s.title.starts_with("Memory pool leaks"))?;
    let mut total = (0.0, 0);
    for l in &sec.lines {
        let Some(rest) = l.strip_prefix("====== SUMMARY: ") else {
            continue;
        };
        let mb = rest
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<f64>().ok());
        let n = rest
            .split_once("leaked in ")
            .and_then(|(_, r)| r.split_whitespace().next())
            .and_then(|v| v.parse::<u64>().ok());
        if let (Some(mb), Some(n)) = (mb, n) {
            total.0 += mb;
            total.1 += n;
        }
    }
    Some(total)
}

/// The peak a process is ranked by: the sum of its framework-pool peaks (PTA,
/// PTA_WORKSPACE, ATB, MINDSPORE) when the run has any, else its HAL peak.
fn ranking_peak(p: &ProcessSummary, framework: bool) -> u64 {
    if framework {
        p.peaks
            .iter()
            .filter(|(k, _)| *k != "HAL")
            .map(|(_, v)| *v)
            .sum()
    } else {
        p.peaks.get("HAL").copied().unwrap_or(0)
    }
}

fn ended_text(e: &ProcessEntry) -> String {
    match (e.ended.how.as_str(), e.ended.code, e.ended.signal) {
        ("exit", Some(c), _) => format!("exit {c}"),
        ("signal", _, Some(s)) => nix::sys::signal::Signal::try_from(s)
            .map(|s| s.as_str().to_owned())
            .unwrap_or_else(|_| format!("signal {s}")),
        _ => "no exit()".to_owned(),
    }
}

/// Rows of the per-rank table on the console (the first and last ranks; the summary file has
/// every process).
pub const MAX_RANK_ROWS: usize = 16;

/// Whether the run gets the per-rank table: more than one listed process (not a helper)
/// recorded events.
pub fn wanted(procs: &[ProcessSummary]) -> bool {
    procs.iter().filter(|p| crate::summary::listed(p)).count() > 1
}

/// Prints the per-rank summary of a run whose job exited with `code` (`entries`: the run
/// index's processes, for rank and how each ended; `left_out`: the processes not listed, by
/// program), after writing the full one under `root`.
pub fn print(
    procs: &[ProcessSummary],
    entries: &[ProcessEntry],
    code: i32,
    root: &Path,
    left_out: &BTreeMap<String, usize>,
) {
    let active: Vec<&ProcessSummary> = procs.iter().filter(|p| crate::summary::listed(p)).collect();
    let head = crate::summary::head(procs, Some(code));
    eprintln!("{head}");
    if let Some(l) = crate::helpers::count_line(left_out) {
        eprintln!("{l}");
    }
    // the one-line figures of each process (rows per kind, drops), then the table
    let firsts: Vec<ProcessSummary> = active
        .iter()
        .take(MAX_RANK_ROWS)
        .map(|p| (*p).clone())
        .collect();
    let _ = crate::summary::write_sections(
        &mut std::io::stderr().lock(),
        &firsts,
        crate::summary::Detail::Line,
    );
    if active.len() > MAX_RANK_ROWS {
        eprintln!(
            "memscope: … {} more process(es) (every one in the full summary)",
            active.len() - MAX_RANK_ROWS
        );
    }
    let by_pid: BTreeMap<u32, &ProcessEntry> = entries.iter().map(|e| (e.pid, e)).collect();
    let pools: BTreeSet<&str> = active
        .iter()
        .flat_map(|p| p.peaks.keys().map(String::as_str))
        .collect();
    let framework = pools.iter().any(|p| *p != "HAL");
    let mut rows: Vec<(Option<u32>, u32, Vec<String>)> = Vec::new();
    for p in &active {
        let e = by_pid.get(&p.pid);
        let rank = e.and_then(|e| e.rank);
        let devices = e
            .map(|e| e.devices.join(","))
            .filter(|d| !d.is_empty())
            .unwrap_or_else(|| "-".into());
        let mut cells = vec![
            rank.map_or("-".into(), |r| r.to_string()),
            p.pid.to_string(),
            devices,
            p.counts.values().sum::<u64>().to_string(),
            p.dropped.to_string(),
        ];
        for pool in &pools {
            cells.push(p.peaks.get(*pool).map_or("-".into(), |b| mib(*b)));
        }
        cells.push(match pool_leaks(p) {
            Some((mb, n)) if n > 0 => format!("{mb:.1} MiB in {n}"),
            Some(_) => "0".into(),
            None => "-".into(),
        });
        cells.push(e.map_or("?".into(), |e| ended_text(e)));
        rows.push((rank, p.pid, cells));
    }
    rows.sort_by_key(|(r, pid, _)| (r.is_none(), *r, *pid));
    let mut header: Vec<String> = ["rank", "pid", "device", "rows", "dropped"]
        .map(String::from)
        .to_vec();
    header.extend(pools.iter().map(|p| format!("peak {p}")));
    header.extend(["pool leaks", "ended"].map(String::from));
    let mut width: Vec<usize> = header.iter().map(String::len).collect();
    for (_, _, c) in &rows {
        for (w, cell) in width.iter_mut().zip(c) {
            *w = (*w).max(cell.len());
        }
    }
    let line = |cells: &[String]| -> String {
        let v: Vec<String> = cells
            .iter()
            .zip(&width)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        format!("  {}", v.join("  ").trim_end())
    };
    match crate::summary::write_full(root, procs, &head) {
        Ok(path) => eprintln!(
            "memscope: per process (the full per-process summary: {}):",
            path.display()
        ),
        Err(e) => eprintln!("memscope: per process (full summary not written: {e}):"),
    }
    eprintln!("{}", line(&header));
    for l in memscope_core::listing::ends(
        &rows,
        MAX_RANK_ROWS,
        |(_, _, c)| line(c),
        |n| format!("  … {n} more process(es)"),
    ) {
        eprintln!("{l}");
    }
    let name = |p: &ProcessSummary| {
        let e = by_pid.get(&p.pid);
        // a process without a rank (the table's `-`) is named by its pid alone
        let rank = e
            .and_then(|e| e.rank)
            .map_or("no rank".to_owned(), |r| format!("rank {r}"));
        let dev = e.map(|e| e.devices.join(",")).unwrap_or_default();
        format!(
            "{rank} (pid {}, device {})",
            p.pid,
            if dev.is_empty() { "-" } else { &dev }
        )
    };
    let ranked: Vec<(&ProcessSummary, u64)> = active
        .iter()
        .map(|p| (*p, ranking_peak(p, framework)))
        .filter(|(p, _)| !p.peaks.is_empty())
        .collect();
    let what = if framework { "framework pools" } else { "HAL" };
    if let (Some(max), Some(min)) = (
        ranked
            .iter()
            .max_by_key(|(p, v)| (*v, std::cmp::Reverse(p.pid))),
        ranked.iter().min_by_key(|(p, v)| (*v, p.pid)),
    ) {
        eprintln!(
            "memscope: largest peak ({what}): {}: {}; smallest: {}: {}; imbalance {}",
            name(max.0),
            mib(max.1),
            name(min.0),
            mib(min.1),
            mib(max.1 - min.1)
        );
    }
}
