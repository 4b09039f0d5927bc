//! The end-of-run summary: per process, events per kind, drops, output paths and the report
//! sections of the layers (analyses, dump files). Printed to stderr so the job's stdout stays
//! its own.
//!
//! Bounded (issue 23): helpers and processes that recorded nothing get one count line
//! (`crate::helpers`); each list shows its top items (`memscope_core::listing`) and the whole
//! of every list goes to `memscope_summary_<ts>_<pid>.txt` at the output root, which the
//! console names; the leak sections come last, so their `SUMMARY` line ends the output.
//!
//! Printing never panics and never passes control characters through (`crate::out`).

use memscope_collect::process::ProcessSummary;
use memscope_core::event::EventKind;
use memscope_core::sanitize::escape_controls;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// How much of each process [`write_sections`] writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Detail {
    /// Only the process's line (rows per kind, drops).
    Line,
    /// Its line and its sections as the console shows them (bounded lists).
    Console,
    /// Its line and every line of its sections (the summary file).
    Full,
}

/// Whether the console lists the process: it recorded events and is not a helper.
pub fn listed(p: &ProcessSummary) -> bool {
    crate::helpers::recorded(p) && !p.helper
}

/// The head line: `memscope: job exited with code C; N process(es) recorded events` (`None`:
/// the job's exit status is not known: it was killed or left through `_exit`).
pub fn head(procs: &[ProcessSummary], code: Option<i32>) -> String {
    let n = procs.iter().filter(|p| listed(p)).count();
    match code {
        Some(c) => format!("memscope: job exited with code {c}; {n} process(es) recorded events"),
        None => format!(
            "memscope: job ended without an exit status (killed, or _exit); {n} process(es) recorded events"
        ),
    }
}

/// Prints the summary of a run whose job exited with `code` (`None`: not known), with outputs
/// under `root`;
/// `left_out` counts the processes not listed, by program ([`crate::helpers::set_aside`]).
pub fn print(
    procs: &[ProcessSummary],
    code: Option<i32>,
    left_out: &BTreeMap<String, usize>,
    root: &Path,
) {
    let head = head(procs, code);
    eprintln!("{head}");
    if let Some(l) = crate::helpers::count_line(left_out) {
        eprintln!("{l}");
    }
    full_if_cut(root, procs, &head);
    let shown: Vec<ProcessSummary> = procs.iter().filter(|p| listed(p)).cloned().collect();
    print_processes(&shown);
}

/// Where the console cuts a list of a listed process, writes the whole summary
/// ([`write_full`], headed `head`) and names it on stderr.
pub fn full_if_cut(root: &Path, procs: &[ProcessSummary], head: &str) {
    let cut = procs
        .iter()
        .filter(|p| listed(p))
        .flat_map(|p| &p.report)
        .any(|s| s.full.is_some());
    if cut {
        match write_full(root, procs, head) {
            Ok(path) => eprintln!("memscope: every list in full: {}", path.display()),
            Err(e) => eprintln!("memscope: full summary not written: {e}"),
        }
    }
}

/// Prints the per-process part of the summary (processes that recorded nothing are skipped).
pub fn print_processes(procs: &[ProcessSummary]) {
    let mut err = std::io::stderr().lock();
    let _ = write_sections(&mut err, procs, Detail::Console);
}

/// Writes the full per-process summary (every line of every list, helpers left out) to a new
/// file `memscope_summary_<ts>_<memscope pid>.txt` at `root`; returns its path.
///
/// # Errors
/// The file cannot be created or written (one line naming it).
pub fn write_full(root: &Path, procs: &[ProcessSummary], head: &str) -> Result<PathBuf, String> {
    let ts = memscope_dump::layout::timestamp_name(crate::run_index::now_ns());
    let path = root.join(format!("memscope_summary_{ts}_{}.txt", std::process::id()));
    let (f, _) = memscope_dump::layout::create_new_0600(&path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    // written at the end in one go: buffered (a leak list may have tens of thousands of lines)
    let mut f = std::io::BufWriter::new(f);
    let listed: Vec<ProcessSummary> = procs.iter().filter(|p| listed(p)).cloned().collect();
    std::io::Write::write_all(&mut f, format!("{head}\n").as_bytes())
        .and_then(|()| write_sections(&mut f, &listed, Detail::Full))
        .and_then(|()| std::io::Write::flush(&mut f))
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(path)
}

/// Writes each process's line `memscope: pid P (exe): N rows (per kind), D dropped`, and with
/// [`Detail::Console`] or [`Detail::Full`] the sections after it (output, capture, analyses,
/// dump files; leak sections last).
///
/// # Errors
/// Writing to `w` failed.
pub fn write_sections(
    w: &mut dyn std::io::Write,
    procs: &[ProcessSummary],
    detail: Detail,
) -> std::io::Result<()> {
    for p in procs.iter().filter(|p| crate::helpers::recorded(p)) {
        // aggregate mode (issue 38) writes no row: say what was summed instead
        let aggregate = p.aggregate;
        let shown = if aggregate { &p.typed } else { &p.counts };
        let total: u64 = shown.values().sum();
        let kinds: Vec<String> = shown
            .iter()
            .map(|(k, n)| format!("{} {n}", k.as_str()))
            .collect();
        writeln!(
            w,
            "memscope: pid {} ({}): {total} {}{}{}",
            p.pid,
            if p.exe.is_empty() { "?" } else { &p.exe },
            if aggregate {
                "events, no rows (--aggregate)"
            } else {
                "rows"
            },
            if kinds.is_empty() {
                String::new()
            } else {
                format!(" ({})", kinds.join(", "))
            },
            if p.dropped > 0 {
                format!(", {} DROPPED", p.dropped)
            } else {
                ", 0 dropped".into()
            },
        )?;
        if detail == Detail::Line {
            continue;
        }
        writeln!(w, "  output: {}", p.project_dir.display())?;
        let files = p.files.len() as u64;
        if p.device_less > 0 && files > 1 {
            writeln!(
                w,
                "  device-less rows (N/A device: marks, SYSTEM) are counted once above; each is copied into all {files} dump files ({} rows in all)",
                p.files.iter().map(|f| f.1).sum::<u64>()
            )?;
        }
        if let Some((path, st)) = &p.capture {
            writeln!(
                w,
                "  capture: {} ({} records, {} bytes)",
                path.display(),
                st.records,
                st.bytes
            )?;
        }
        if p.host_rows_off {
            let host: Vec<String> = p
                .typed
                .iter()
                .filter(|(k, _)| matches!(k, EventKind::Malloc | EventKind::Free))
                .map(|(k, n)| {
                    let written = p.counts.get(k).copied().unwrap_or(0);
                    format!("{} {}", k.as_str(), n.saturating_sub(written))
                })
                .filter(|t| !t.ends_with(" 0"))
                .collect();
            if !host.is_empty() {
                writeln!(
                    w,
                    "  HOST events kept in the capture, not written as rows: {} (use --host-rows, or memscope export --to csv|db)",
                    host.join(", ")
                )?;
            }
        }
        // the leak reports last: their SUMMARY line ends the process's part
        let leaks = |t: &str| t.starts_with("Memory pool leaks");
        let ordered = p
            .report
            .iter()
            .filter(|s| !leaks(&s.title))
            .chain(p.report.iter().filter(|s| leaks(&s.title)));
        for sec in ordered {
            // one line each: text from the job (op names, marks) is escaped whole
            writeln!(w, "  {}:", escape_controls(&sec.title))?;
            let lines = match detail {
                Detail::Full => sec.all_lines(),
                _ => &sec.lines,
            };
            for l in lines {
                writeln!(w, "    {}", escape_controls(l))?;
            }
        }
    }
    Ok(())
}
