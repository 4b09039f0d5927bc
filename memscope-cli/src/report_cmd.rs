//! `memscope report RUN [RUN2] [-o FILE] [--force]` and the report of `memscope run --report`:
//! one self-contained HTML file (memscope-report) about a run, or two runs compared.
//!
//! Every error is one line naming the input or output; `main` prints it and exits 2. The file
//! appears only once complete (written beside it, then moved), and an existing file is never
//! replaced without `--force`.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, Result};
use clap::Args;

use memscope_report::input::{with_captures, CaptureInput, RunInput};
use memscope_report::{build_report, html, Budget};

/// `memscope report`.
#[derive(Clone, Debug, Args)]
pub struct ReportArgs {
    /// A run output directory (every process under it), a process directory, a dump file
    /// (.csv or .db) or a kept capture (.mscap); give two to compare them (base first). A
    /// process directory holding a capture is read from the capture (HOST rows included, as
    /// `memscope run` keeps them there without --host-rows), not from its dumps.
    #[arg(required = true, num_args = 1..=2, value_name = "RUN")]
    pub inputs: Vec<PathBuf>,
    /// The HTML file to write [default: ./memscope_report_<YYYYmmddHHMMSS>.html].
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Replace FILE if it exists.
    #[arg(long)]
    pub force: bool,
    /// Which run of an output directory that holds several (`N`, or `N,M` for two inputs: the
    /// runs' numbers as memscope lists them) [default: the newest].
    #[arg(long, value_name = "N[,M]", allow_hyphen_values = true)]
    pub run: Option<String>,
}

/// A free name `dir/memscope_report_<ts>.html` (or `_1`, `_2`, … when taken).
fn default_output(dir: &Path) -> PathBuf {
    let ts = chrono::Local::now().format("%Y%m%d%H%M%S");
    (0..10_000)
        .map(|n| {
            dir.join(if n == 0 {
                format!("memscope_report_{ts}.html")
            } else {
                format!("memscope_report_{ts}_{n}.html")
            })
        })
        .find(|p| std::fs::symlink_metadata(p).is_err())
        .unwrap_or_else(|| dir.join(format!("memscope_report_{ts}.html")))
}

/// A FIFO, socket or device.
fn is_special(m: &std::fs::Metadata) -> bool {
    let t = m.file_type();
    !t.is_file() && !t.is_dir() && !t.is_symlink()
}

fn check_output(out: &Path, force: bool) -> Result<()> {
    if !force && std::fs::symlink_metadata(out).is_ok() {
        return Err(anyhow!(
            "-o {}: exists; not replaced (give another -o, or --force)",
            out.display()
        ));
    }
    if out.is_dir() {
        return Err(anyhow!("-o {}: is a directory", out.display()));
    }
    // --force renames the new page over what is there: a FIFO or device (`/dev/null`) would
    // become a regular file (a symbolic link is replaced itself, its target left alone)
    if std::fs::symlink_metadata(out).is_ok_and(|m| is_special(&m)) {
        return Err(anyhow!(
            "-o {}: a FIFO, socket or device, not a file; not replaced (give the path of a file)",
            out.display()
        ));
    }
    match out.parent().filter(|p| !p.as_os_str().is_empty()) {
        Some(d) if !d.is_dir() => Err(anyhow!(
            "-o {}: no such directory {}",
            out.display(),
            d.display()
        )),
        _ => Ok(()),
    }
}

fn write(inputs: &[RunInput], out: &Path, force: bool) -> Result<(PathBuf, usize)> {
    let budget = Budget::default();
    let mut data = build_report(inputs, &budget).map_err(|e| anyhow!("{e}"))?;
    for w in data.runs.iter().flat_map(|r| &r.warnings) {
        eprintln!("memscope: warning: {w}");
    }
    let page = html::render(&mut data, &budget).map_err(|e| anyhow!("{e}"))?;
    let path = html::write_new(out, &page, force).map_err(|e| anyhow!("{e}"))?;
    Ok((path, page.len()))
}

/// The run `path`: its dumps and its kept captures (a process directory with a capture is
/// read from the capture).
pub(crate) fn discover_run(path: &Path) -> Result<RunInput> {
    let captures: Vec<CaptureInput> = crate::capture_input::find(path)
        .map_err(|e| anyhow!("{e}"))?
        .into_iter()
        .map(|f| (f.dir, f.events as _))
        .collect();
    with_captures(path, captures).map_err(|e| anyhow!("{e}"))
}

/// Runs `memscope report`.
///
/// # Errors
/// A bad input (no dump, an empty run, a malformed file) or an output that cannot be written.
pub fn run(a: &ReportArgs) -> Result<()> {
    let out = a
        .output
        .clone()
        .unwrap_or_else(|| default_output(Path::new(".")));
    check_output(&out, a.force)?;
    let choices = crate::run_select::choices(a.run.as_deref(), a.inputs.len())?;
    let inputs = a
        .inputs
        .iter()
        .enumerate()
        .map(
            |(i, p)| match crate::run_select::choose(p, choices.get(i).copied().flatten())? {
                // one run of a directory that holds several: its process directories only
                Some(dirs) => run_of(p, &dirs),
                None => discover_run(p),
            },
        )
        .collect::<Result<Vec<_>>>()?;
    // a flight-recorder window says so in the report's title (issue 38)
    let mut inputs = inputs;
    for (run, p) in inputs.iter_mut().zip(&a.inputs) {
        if let Some(note) = crate::window_note::label_suffix(p) {
            run.label.push_str(&note);
        }
    }
    let (path, size) = write(&inputs, &out, a.force)?;
    let files: usize = inputs.iter().map(|i| i.files().count()).sum();
    let captures: usize = inputs.iter().map(|i| i.captures().count()).sum();
    println!(
        "report: {} ({:.1} MiB, {} dump file(s){}{})",
        path.display(),
        size as f64 / 1_048_576.0,
        files,
        if captures > 0 {
            format!(", {captures} capture(s)")
        } else {
            String::new()
        },
        if inputs.len() == 2 { ", compare" } else { "" }
    );
    Ok(())
}

/// The run made of process directories `dirs` (one run of output directory `root`).
fn run_of(root: &Path, dirs: &[PathBuf]) -> Result<RunInput> {
    let mut run = RunInput {
        label: root.display().to_string(),
        groups: Vec::new(),
    };
    for d in dirs {
        // processes that recorded nothing have no dump folder
        if let Ok(r) = discover_run(d) {
            run.groups.extend(r.groups);
        }
    }
    if run.groups.is_empty() {
        return Err(anyhow!(
            "{}: the run holds no dump files or captures",
            root.display()
        ));
    }
    Ok(run)
}

/// The report at the end of `memscope run --report`: every process directory of the run, into
/// `<output>/memscope_report_<ts>.html`. Returns the file written.
///
/// # Errors
/// No process recorded a dump, or the file cannot be written.
pub fn run_report(output: &Path, process_dirs: &[PathBuf]) -> Result<PathBuf> {
    let run = run_of(output, process_dirs).map_err(|_| {
        anyhow!(
            "{}: the run wrote no dump files; no report",
            output.display()
        )
    })?;
    let mut run = run;
    if let Some(note) = crate::window_note::label_suffix(output) {
        run.label.push_str(&note);
    }
    let (path, _) = write(&[run], &default_output(output), false)?;
    Ok(path)
}
