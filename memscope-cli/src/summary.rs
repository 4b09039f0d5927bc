//! The end-of-run summary: per process, events per kind, drops, output paths and the report
//! sections of the layers (analyses, dump files). Printed to stderr so the job's stdout stays
//! its own.

//!
//! Printing never panics and never passes control characters through (`crate::out`).

use crate::collector::process::ProcessSummary;
use memscope_core::event::EventKind;
use memscope_core::sanitize::escape_controls;

/// Prints the summary of a run whose job exited with `code`.
pub fn print(procs: &[ProcessSummary], code: i32) {
    let (active, idle): (Vec<_>, Vec<_>) = procs
        .iter()
        .partition(|p| !p.counts.is_empty() || !p.typed.is_empty());
    eprintln!(
        "memscope: job exited with code {code}; {} process(es) recorded events{}",
        active.len(),
        if idle.is_empty() {
            String::new()
        } else {
            format!(", {} recorded none", idle.len())
        }
    );
    print_processes(&active.into_iter().cloned().collect::<Vec<_>>());
}

/// Prints the per-process part of the summary (processes that recorded nothing are skipped).
pub fn print_processes(procs: &[ProcessSummary]) {
    let mut err = std::io::stderr().lock();
    let _ = write_processes(&mut err, procs);
}

/// Writes the per-process part of the summary to `w` (the console, or the full summary file
/// of a multi-process run).
///
/// # Errors
/// Writing to `w` failed.
pub fn write_processes(
    w: &mut dyn std::io::Write,
    procs: &[ProcessSummary],
) -> std::io::Result<()> {
    write_sections(w, procs, true)
}

/// Writes each process's line `memscope: pid P (exe): N rows (per kind), D dropped`, and with
/// `full` the sections after it (output, capture, analyses, dump files).
///
/// # Errors
/// Writing to `w` failed.
pub fn write_sections(
    w: &mut dyn std::io::Write,
    procs: &[ProcessSummary],
    full: bool,
) -> std::io::Result<()> {
    for p in procs
        .iter()
        .filter(|p| !p.counts.is_empty() || !p.typed.is_empty())
    {
        let total: u64 = p.counts.values().sum();
        let kinds: Vec<String> = p
            .counts
            .iter()
            .map(|(k, n)| format!("{} {n}", k.as_str()))
            .collect();
        writeln!(
            w,
            "memscope: pid {} ({}): {total} rows{}{}",
            p.pid,
            if p.exe.is_empty() { "?" } else { &p.exe },
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
        if !full {
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
        for sec in &p.report {
            // one line each: text from the job (op names, marks) is escaped whole
            writeln!(w, "  {}:", escape_controls(&sec.title))?;
            for l in &sec.lines {
                writeln!(w, "    {}", escape_controls(l))?;
            }
        }
    }
    Ok(())
}
