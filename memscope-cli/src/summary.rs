//! The end-of-run summary: per process, events per kind, drops, output paths and the report
//! sections of the layers (analyses, dump files). Printed to stderr so the job's stdout stays
//! its own.

//!
//! Printing never panics and never passes control characters through (`crate::out`).

use crate::collector::process::ProcessSummary;
use memscope_core::sanitize::escape_controls;

/// Prints the summary of a run whose job exited with `code`.
pub fn print(procs: &[ProcessSummary], code: i32) {
    let (active, idle): (Vec<_>, Vec<_>) = procs.iter().partition(|p| !p.counts.is_empty());
    eprintln!(
        "memscope: job exited with code {code}; {} process(es) recorded events{}",
        active.len(),
        if idle.is_empty() {
            String::new()
        } else {
            format!(", {} recorded none", idle.len())
        }
    );
    for p in active {
        let total: u64 = p.counts.values().sum();
        let kinds: Vec<String> = p
            .counts
            .iter()
            .map(|(k, n)| format!("{} {n}", k.as_str()))
            .collect();
        eprintln!(
            "memscope: pid {} ({}): {total} events{}{}",
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
        );
        eprintln!("  output: {}", p.project_dir.display());
        for sec in &p.report {
            // one line each: text from the job (op names, marks) is escaped whole
            eprintln!("  {}:", escape_controls(&sec.title));
            for l in &sec.lines {
                eprintln!("    {}", escape_controls(l));
            }
        }
    }
}
