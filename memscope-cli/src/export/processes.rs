//! What the viewer formats of `memscope export` share: the traced processes of the inputs
//! (`memscope_export::resolve_with`, kept captures included) and the summary printed at the end.

use anyhow::anyhow;

use memscope_export::{Captured, ProcessInput, Summary};

use super::bar::Bar;
use crate::export_cmd::ExportArgs;

/// The processes of `a.inputs`, sorted and numbered; notes about their ranks are printed.
/// Kept captures under the inputs are processes replayed from the capture
/// ([`crate::capture_input`]); the dumps of a process directory holding one are not read.
///
/// # Errors
/// A missing or unreadable input, a directory without dumps or captures, a malformed file.
pub fn resolve(a: &ExportArgs, bar: &mut Bar) -> anyhow::Result<Vec<ProcessInput>> {
    let choices = crate::run_select::choices(a.run.as_deref(), a.inputs.len())?;
    resolve_paths(&a.inputs, &choices, bar)
}

/// The processes of `inputs` (run directories, process directories, dumps, captures), as
/// [`resolve`] finds them, one run of an output directory that holds several (`choices[i]`
/// for input `i`, else the newest: [`crate::run_select::narrow`]); shared with `memscope diff`
/// and the summaries of issue 24.
///
/// # Errors
/// As [`resolve`].
pub fn resolve_paths(
    inputs: &[std::path::PathBuf],
    choices: &[Option<usize>],
    progress: &mut dyn memscope_export::Progress,
) -> anyhow::Result<Vec<ProcessInput>> {
    // ranks from the run index of `memscope run` when the inputs have one (issue 18)
    let index = memscope_export::rank::RunIndexFiles::load(inputs).map_err(|e| anyhow!("{e}"))?;
    let index_ref: Option<&dyn memscope_export::rank::RunIndex> =
        (!index.is_empty()).then_some(&index as _);
    let mut captures = Vec::new();
    let mut dumps = Vec::new();
    // a run directory and one of its process directories both given: its capture once
    let mut seen_captures = std::collections::HashSet::new();
    for input in &crate::run_select::narrow(inputs, choices)? {
        for f in crate::capture_input::find(input).map_err(|e| anyhow!("{e}"))? {
            if let Some(d) = &f.dir {
                if !seen_captures.insert(std::fs::canonicalize(d).unwrap_or_else(|_| d.clone())) {
                    continue;
                }
            }
            captures.push(Captured {
                dir: f.dir,
                events: f.events,
            });
        }
        if !crate::capture_input::is_capture_file(input) {
            dumps.push(input.clone());
        }
    }
    let (procs, notes) = memscope_export::resolve_with(&dumps, &captures, index_ref, progress)
        .map_err(|e| anyhow!("{e}"))?;
    for n in notes {
        eprintln!("memscope: note: {n}");
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
