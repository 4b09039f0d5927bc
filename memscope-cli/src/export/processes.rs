//! What the viewer formats of `memscope export` share: the traced processes of the inputs
//! (`memscope_export::resolve_with`, kept captures included) and the summary printed at the end.

use memscope_export::{ProcessInput, Summary};

use super::bar::Bar;
use super::ExportArgs;

/// The processes of `a.inputs`, sorted and numbered; notes about their ranks are printed.
/// Kept captures under the inputs are processes replayed from the capture
/// ([`crate::capture_input`]); the dumps of a process directory holding one are not read.
///
/// # Errors
/// A missing or unreadable input, a directory without dumps or captures, a malformed file.
pub fn resolve(a: &ExportArgs, bar: &mut Bar) -> anyhow::Result<Vec<ProcessInput>> {
    let choices = crate::run_select::choices(a.run.as_deref(), a.inputs.len())?;
    let procs = crate::run_select::resolve_paths(&a.inputs, &choices, bar)?;
    if procs.is_empty() {
        // a header-only dump or an empty capture: an empty trace would pass for a clean export
        let names: Vec<String> = a.inputs.iter().map(|p| p.display().to_string()).collect();
        anyhow::bail!(
            "{}: no events (header-only dumps or an empty capture): nothing to export, no file written",
            names.join(", ")
        );
    }
    Ok(procs)
}

/// Clears the bar, prints the export's notes (stderr) and, unless `--quiet`, what was written
/// (stdout).
pub fn finish(a: &ExportArgs, bar: &mut Bar, s: Summary) {
    bar.done();
    for n in &s.notes {
        eprintln!("memscope: note: {n}");
    }
    if a.quiet {
        return;
    }
    println!(
        "exported {} event(s) of {} process(es): {} file(s), {} bytes",
        s.events,
        s.processes,
        s.files.len(),
        s.bytes
    );
    for f in &s.files {
        println!("  {}", f.display());
    }
}
