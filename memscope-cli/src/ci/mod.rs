//! Memory as a test (issue 24): the figures of every process of a run or of dumps (peak, live
//! at exit, leaks, drops, counts per device and allocator), the limits that fail a command
//! (`run --fail-on`, `analyze leaks --fail-over`), and the `--summary-json` document
//! (`schemas/memscope_summary.schema.json`).
//!
//! Exit code: [`EXIT_LIMIT`] (23, as LeakSanitizer's) when a limit is crossed, or the code of
//! `--fail-exit-code`; memscope's own errors stay 2; under `memscope run` a job that failed
//! keeps its own code (its failure wins), and the job's code is in the summary either way.

pub mod summary;

use std::path::{Path, PathBuf};

use anyhow::{anyhow, Result};

use memscope_analysis::thresholds::{check, Crossing, Limit, Metric};

pub use summary::{compute, Input, ProcessRow};

/// The exit code of a crossed limit, unless `--fail-exit-code` says otherwise.
pub const EXIT_LIMIT: u8 = 23;

/// Parses `--fail-exit-code`: 1 or 3–125. 2 is memscope's own error code (a crossed limit must
/// be told apart from a bad input), 126 and up are the shell's.
///
/// # Errors
/// Anything else, in one line.
pub fn parse_exit_code(s: &str) -> Result<u8, String> {
    match s.trim().parse::<u8>() {
        Ok(n) if n == 1 || (3..=125).contains(&n) => Ok(n),
        Ok(2) => Err("2 is memscope's own error code; use 1 or 3-125".into()),
        _ => Err(format!("{s:?} is not an exit code (1 or 3-125)")),
    }
}

/// Limits were crossed: the lines are printed; `main` exits with `code`.
#[derive(Debug)]
pub struct LimitsCrossed {
    /// The exit code.
    pub code: u8,
}

impl std::fmt::Display for LimitsCrossed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "memory limits crossed (exit code {})", self.code)
    }
}

impl std::error::Error for LimitsCrossed {}

/// `--summary-json FILE` and the exit code of a crossed limit, shared by `run`, `analyze` and
/// `diff`.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct SummaryArgs {
    /// Write the figures of every process — per device and allocator: peak, live at exit,
    /// leaks, drops, row counts — and the limits checked, as JSON
    /// (schemas/memscope_summary.schema.json).
    #[arg(long = "summary-json", value_name = "FILE")]
    pub summary_json: Option<PathBuf>,
}

/// Checks a `--summary-json` path before anything runs: its folder must exist and the path
/// must not be a directory.
///
/// # Errors
/// One line naming the path.
pub fn check_summary_path(path: &Path) -> Result<(), String> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    // a folder not made yet (the run's own -o folder, say) is made when the file is written;
    // its nearest existing ancestor must be a directory
    let existing = dir
        .ancestors()
        .find(|a| a.exists())
        .unwrap_or(Path::new("."));
    if !existing.is_dir() {
        return Err(format!(
            "--summary-json {}: {} is not a directory",
            path.display(),
            existing.display()
        ));
    }
    if path.is_dir() {
        return Err(format!("--summary-json {}: is a directory", path.display()));
    }
    regular_or_absent(path)
}

/// An existing `path` must be a regular file: the summary is written beside it and renamed
/// over it, which would replace a symbolic link, a FIFO or a device (`/dev/null`) with a file.
/// And it must be empty or an earlier summary: anything else there (an input dump or capture,
/// a run index, a file of the user's) is not replaced.
fn regular_or_absent(path: &Path) -> Result<(), String> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if !m.file_type().is_file() => Err(format!(
            "--summary-json {}: not a regular file (a symbolic link, FIFO or device); give the path of a file",
            path.display()
        )),
        Ok(m) if m.len() > 0 && !is_summary(path) => Err(format!(
            "--summary-json {}: exists and is not a memscope summary (a dump, capture, run index or other file); not replaced — give a new path",
            path.display()
        )),
        _ => Ok(()),
    }
}

/// Whether the file at `path` is a `--summary-json` document (`"format": "memscope-summary"`),
/// read up to 256 MiB.
fn is_summary(path: &Path) -> bool {
    use std::io::Read;
    let Ok(f) = std::fs::File::open(path) else {
        return false;
    };
    let mut text = String::new();
    if f.take(256 << 20).read_to_string(&mut text).is_err() {
        return false;
    }
    serde_json::from_str::<serde_json::Value>(&text)
        .is_ok_and(|v| v["format"] == "memscope-summary")
}

/// Parses `--fail-on` (or `--fail-over`'s `leaks>SIZE`), for a one-line error before anything
/// runs.
///
/// # Errors
/// The limit list does not parse.
pub fn parse_limits(flag: &str, text: &str) -> Result<Vec<Limit>, String> {
    Limit::parse_list(text).map_err(|e| format!("{flag} {text}: {e}"))
}

/// The crossings of `limits` over `procs`, printed one line each on stderr; a limit that looks
/// at nothing recorded in `procs` gets a "not recorded" line (a source not traced, or a typo
/// such as `npu:0.PTa`, would otherwise pass every run as if checked).
pub fn evaluate(limits: &[Limit], procs: &[ProcessRow]) -> Vec<Crossing> {
    let mut v = Vec::new();
    for l in limits {
        if l.metric == Metric::Races && not_recorded(l, procs) {
            eprintln!(
                "memscope: limit {:?}: not recorded — no kernel launch with its stream, operator access or sanitizer-op: mark was recorded (memscope run --analysis races records them); not checked",
                l.text
            );
        } else if not_recorded(l, procs) {
            let mut seen: Vec<String> = procs
                .iter()
                .flat_map(|p| p.figures.allocators.iter())
                .map(|a| format!("{}.{}", a.device_name(), a.allocator))
                .collect();
            seen.sort();
            seen.dedup();
            eprintln!(
                "memscope: limit {:?}: not recorded — nothing it looks at was traced or judged (this run has: {}; leaks are judged for framework pools, and for host memory once a step ended); not checked",
                l.text,
                if seen.is_empty() {
                    "none".to_owned()
                } else {
                    seen.join(", ")
                }
            );
        }
        for p in procs {
            for c in check(l, &p.label(), &p.figures, p.dropped) {
                eprintln!("memscope: {}", c.line(l.metric.is_count()));
                v.push(c);
            }
        }
    }
    v
}

/// Whether `limit` looks at nothing recorded in `procs` (`races`: no process recorded what the
/// race check needs).
pub fn not_recorded(limit: &Limit, procs: &[ProcessRow]) -> bool {
    if limit.metric == Metric::Races {
        return procs.iter().all(|p| p.figures.races.is_none());
    }
    !limit.matches_any(procs.iter().flat_map(|p| p.figures.allocators.iter()))
}

/// `kept: a, b; not recorded: c` — the limits of a run that crossed nothing.
fn kept_line(limits: &[Limit], procs: &[ProcessRow]) -> String {
    let (absent, kept): (Vec<&Limit>, Vec<&Limit>) =
        limits.iter().partition(|l| not_recorded(l, procs));
    let names = |v: &[&Limit]| {
        v.iter()
            .map(|l| l.text.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    match (kept.is_empty(), absent.is_empty()) {
        (false, true) => format!("memscope: limits kept: {}", names(&kept)),
        (true, false) => format!(
            "memscope: limits not recorded (not checked): {}",
            names(&absent)
        ),
        _ => format!(
            "memscope: limits kept: {}; not recorded (not checked): {}",
            names(&kept),
            names(&absent)
        ),
    }
}

/// Writes `doc` to `path` (beside it first, then moved into place).
///
/// # Errors
/// The file cannot be written (one line naming it).
pub fn write_json(path: &Path, doc: &serde_json::Value) -> Result<()> {
    regular_or_absent(path).map_err(|e| anyhow!(e))?;
    let text = serde_json::to_string_pretty(doc).map_err(|e| anyhow!("{e}"))?;
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .ok_or_else(|| anyhow!("--summary-json {}: not a file name", path.display()))?;
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        name.to_string_lossy(),
        std::process::id()
    ));
    std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::write(&tmp, text + "\n"))
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            anyhow!("--summary-json {}: {e}", path.display())
        })
}

/// What `memscope run` hands over after the job: the limits and the summary file.
#[derive(Clone, Debug, Default)]
pub struct RunGate {
    /// `--fail-on`.
    pub limits: Vec<Limit>,
    /// `--summary-json`.
    pub summary_json: Option<PathBuf>,
    /// `--fail-exit-code`.
    pub exit_code: u8,
}

impl RunGate {
    /// With `--aggregate` (no rows, no capture): the options given that need rows (written,
    /// or read after the job), in one line, or `None` (issue 38).
    pub fn aggregate_conflict(&self, report: bool, host_rows: bool) -> Option<String> {
        let needs: Vec<&str> = [
            (!self.limits.is_empty(), "--fail-on"),
            (self.summary_json.is_some(), "--summary-json"),
            (report, "--report"),
            (host_rows, "--host-rows"),
        ]
        .into_iter()
        .filter_map(|(on, name)| on.then_some(name))
        .collect();
        (!needs.is_empty()).then(|| {
            format!(
                "--aggregate writes no rows and no capture, which {} need{}: leave one out",
                needs.join(", "),
                if needs.len() == 1 { "s" } else { "" }
            )
        })
    }

    /// Whether the run needs its figures.
    pub fn active(&self) -> bool {
        !self.limits.is_empty() || self.summary_json.is_some()
    }
}

/// After `memscope run`: the figures of its processes (read back from their captures and
/// dumps), the limits checked, the summary written. Returns the run's exit code: the job's
/// when it failed (or nothing was crossed), else the limit's. A summary or figures that cannot
/// be made are said on one line; with the job successful that is exit code 2.
pub fn after_run(
    gate: &RunGate,
    dirs: &[PathBuf],
    facts: &summary::JobFacts<'_>,
    quiet: bool,
) -> i32 {
    let job = facts.exit_code;
    let procs = match compute(dirs, &[], facts.known) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("memscope: figures of the run: {e:#}");
            return if job != 0 { job } else { 2 };
        }
    };
    let crossed = evaluate(&gate.limits, &procs);
    let code = if job != 0 {
        job
    } else if !crossed.is_empty() {
        i32::from(gate.exit_code)
    } else {
        0
    };
    if !crossed.is_empty() {
        eprintln!(
            "memscope: {} limit crossing(s); exit code {code} (the job exited with {job}{})",
            crossed.len(),
            if job != 0 { ": its failure wins" } else { "" }
        );
    } else if !gate.limits.is_empty() && !quiet {
        eprintln!("{}", kept_line(&gate.limits, &procs));
    }
    if let Some(path) = &gate.summary_json {
        let doc = summary::document(
            "run",
            code,
            Some(facts),
            &gate.limits,
            &crossed,
            &[Input {
                label: "run".into(),
                path: facts.output.to_path_buf(),
                point: None,
                processes: procs,
            }],
            None,
        );
        if let Err(e) = write_json(path, &doc) {
            eprintln!("memscope: {e:#}");
            if code == 0 {
                return 2;
            }
        }
    }
    code
}

/// After an offline command (`analyze`, `diff`): checks `limits` over `inputs` (`extra`: the
/// crossings the command found itself, already printed), writes the summary, and turns
/// crossings into [`LimitsCrossed`].
///
/// # Errors
/// The summary cannot be written; [`LimitsCrossed`] when a limit was crossed.
pub fn finish_offline(
    command: &str,
    limits: &[Limit],
    extra: Vec<Crossing>,
    exit_code: u8,
    summary_json: Option<&Path>,
    inputs: Vec<Input>,
    diff: Option<serde_json::Value>,
) -> Result<()> {
    let procs: Vec<ProcessRow> = inputs.iter().flat_map(|i| i.processes.clone()).collect();
    let mut crossed = extra;
    crossed.extend(evaluate(limits, &procs));
    let code = if crossed.is_empty() { 0 } else { exit_code };
    if !crossed.is_empty() {
        eprintln!(
            "memscope: {} limit crossing(s); exit code {code}",
            crossed.len()
        );
    }
    if let Some(path) = summary_json {
        let doc = summary::document(
            command,
            i32::from(code),
            None,
            limits,
            &crossed,
            &inputs,
            diff,
        );
        write_json(path, &doc)?;
    }
    if crossed.is_empty() {
        Ok(())
    } else {
        Err(LimitsCrossed { code }.into())
    }
}
