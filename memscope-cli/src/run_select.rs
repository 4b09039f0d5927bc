//! One run per view (issue 23): two `memscope run`s into the same output directory (the
//! default `memscopeDumpResults/` of the README's two demo commands, or a host run with its
//! wrapper processes) leave the process directories of both side by side, as msMemScope's
//! layout wants them (`msmemscope_<pid>_<ts>_ascend/` right under the output path, which its
//! own tools and users' scripts read). The run index `memscope_run.json` keeps the runs apart;
//! `memscope report`, `analyze`, `compare`, `diff` and `export` given such a directory list its
//! runs, use the newest, and take `--run N` (the run's number in that list) for another,
//! instead of putting the runs on one time axis or treating them as ranks of one job.

use anyhow::{anyhow, Result};
use memscope_core::sanitize::escape_controls;
use memscope_dump::run_index::{self, RunEntry};
use std::path::{Path, PathBuf};

/// Runs listed on the console (the newest ones).
const LISTED: usize = 10;

/// Parses `--run N[,M]`: one run number (1 = the oldest run of the directory's index) per
/// input; an empty place (`--run ,2`) leaves its input as it is (a process directory, a dump,
/// a capture, or the newest run of a folder).
///
/// # Errors
/// A value that is not a list of numbers ≥ 1, or that names no run at all.
pub fn parse_runs(s: &str) -> Result<Vec<Option<usize>>, String> {
    let bad = || {
        format!("--run {s:?}: expected run numbers ≥ 1 (as memscope lists them), comma-separated")
    };
    let v: Vec<Option<usize>> = s
        .split(',')
        .map(|x| match x.trim() {
            "" => Ok(None),
            t => match t.parse::<usize>() {
                Ok(n) if n >= 1 => Ok(Some(n)),
                _ => Err(bad()),
            },
        })
        .collect::<Result<_, _>>()?;
    if v.iter().all(Option::is_none) {
        return Err(bad());
    }
    Ok(v)
}

/// Parses `--run` for `n` inputs: at most one run number per input.
///
/// # Errors
/// As [`parse_runs`]; more numbers than inputs.
pub fn choices(run: Option<&str>, n: usize) -> Result<Vec<Option<usize>>> {
    let Some(r) = run else {
        return Ok(Vec::new());
    };
    let v = parse_runs(r).map_err(|e| anyhow!(e))?;
    if v.len() > n {
        return Err(anyhow!("--run {r}: one run number per input ({n} given)"));
    }
    Ok(v)
}

/// The paths to read for `inputs`: an output directory that holds several runs gives the
/// process directories of one (`choices[i]` for input `i`, else the newest), any other
/// input itself; a path given twice (`run run --run 1,1`) once, so no process is read as
/// another.
///
/// # Errors
/// As [`choose`].
pub fn narrow(inputs: &[PathBuf], choices: &[Option<usize>]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (i, p) in inputs.iter().enumerate() {
        let paths = match choose(p, choices.get(i).copied().flatten())? {
            Some(dirs) => dirs,
            None => vec![p.clone()],
        };
        for p in paths {
            if seen.insert(std::fs::canonicalize(&p).unwrap_or_else(|_| p.clone())) {
                out.push(p);
            }
        }
    }
    Ok(out)
}

/// The runs of output directory `root` whose process directories are (some of them) still
/// there, oldest first, with their number in the index (1-based) and those directories.
fn runs(root: &Path) -> Result<Vec<(usize, RunEntry, Vec<PathBuf>)>> {
    let Some(file) = run_index::read(root).map_err(|e| anyhow!("{e}"))? else {
        return Ok(Vec::new());
    };
    Ok(file
        .runs
        .into_iter()
        .enumerate()
        .map(|(i, r)| {
            let dirs: Vec<PathBuf> = r
                .processes
                .iter()
                .filter_map(|p| p.dir.as_ref())
                .map(|d| root.join(d))
                .filter(|d| d.is_dir())
                .collect();
            (i + 1, r, dirs)
        })
        .filter(|(_, _, dirs)| !dirs.is_empty())
        .collect())
}

fn describe(n: usize, r: &RunEntry, dirs: usize) -> String {
    let when = chrono::DateTime::from_timestamp_nanos(r.start_ns as i64)
        .with_timezone(&chrono::Local)
        .format("%Y-%m-%d %H:%M:%S");
    let mut cmd = escape_controls(&r.command.join(" ")).into_owned();
    if cmd.chars().count() > 60 {
        cmd = format!("{}…", cmd.chars().take(59).collect::<String>());
    }
    format!(
        "  {n:>3}  {when}  exit {:<4} {dirs} process dir(s)  {cmd}",
        r.exit_code
    )
}

/// The process directories of one run of `root` when its run index lists several runs with
/// directories there: run `choice`, else the newest; the runs and the choice are said on
/// stderr. `None` when `root` holds one run or has no index (read it whole).
///
/// # Errors
/// A run index that cannot be read; `choice` names no run of `root`, or `root` has no index.
pub fn choose(root: &Path, choice: Option<usize>) -> Result<Option<Vec<PathBuf>>> {
    // a flight-recorder window says so in every view (issue 38)
    crate::window_note::say(root);
    if !root.is_dir() {
        return match choice {
            Some(_) => Err(anyhow!(
                "--run: {} is not an output directory",
                root.display()
            )),
            None => Ok(None),
        };
    }
    let runs = runs(root)?;
    if runs.is_empty() && choice.is_some() {
        return Err(anyhow!(
            "--run: {} has no run index ({}) to number its runs",
            root.display(),
            run_index::FILE_NAME
        ));
    }
    if runs.len() <= 1 && choice.is_none_or(|c| runs.first().is_some_and(|r| r.0 == c)) {
        return Ok(None);
    }
    let pick = match choice {
        Some(c) => runs.iter().find(|r| r.0 == c).ok_or_else(|| {
            let have: Vec<String> = runs.iter().map(|r| r.0.to_string()).collect();
            anyhow!(
                "--run {c}: {} has no run {c} with outputs (its runs: {})",
                root.display(),
                have.join(", ")
            )
        })?,
        None => runs.last().expect("two runs or more"),
    };
    eprintln!(
        "memscope: {} holds {} runs ({}); using run {}{}:",
        root.display(),
        runs.len(),
        run_index::FILE_NAME,
        pick.0,
        if choice.is_none() {
            ", the newest (--run N picks another)"
        } else {
            ""
        }
    );
    let from = runs.len().saturating_sub(LISTED);
    if from > 0 {
        eprintln!("  … {from} older run(s)");
    }
    for (n, r, dirs) in &runs[from..] {
        let mark = if *n == pick.0 { " <-" } else { "" };
        eprintln!("{}{mark}", describe(*n, r, dirs.len()));
    }
    Ok(Some(pick.2.clone()))
}

/// The processes of `inputs` (run directories, process directories, dumps, captures), as
/// `memscope export` finds them (`crate::export::processes::resolve`), one run of an output directory that holds several (`choices[i]`
/// for input `i`, else the newest: [`crate::run_select::narrow`]); shared with `memscope diff`
/// and the summaries of issue 24.
///
/// # Errors
/// As [`resolve`].
pub fn resolve_paths(
    inputs: &[std::path::PathBuf],
    choices: &[Option<usize>],
    progress: &mut dyn memscope_export::Progress,
) -> anyhow::Result<Vec<memscope_export::ProcessInput>> {
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
            captures.push(memscope_export::Captured {
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

#[cfg(test)]
mod tests {
    use super::*;
    use memscope_dump::run_index::{append, ProcessEntry};

    fn add_run(root: &Path, pid: u32, start: u64) {
        let dir = format!("msmemscope_{pid}_20261201000000_ascend");
        std::fs::create_dir(root.join(&dir)).unwrap();
        append(
            root,
            RunEntry {
                start_ns: start,
                command: vec!["python3".into(), "train.py".into()],
                processes: vec![ProcessEntry {
                    pid,
                    dir: Some(dir),
                    ..ProcessEntry::default()
                }],
                ..RunEntry::default()
            },
        )
        .unwrap();
    }

    #[test]
    fn a_directory_with_two_runs_gives_the_newest_or_the_one_asked_for() {
        let d = tempfile::tempdir().unwrap();
        add_run(d.path(), 11, 1);
        assert_eq!(choose(d.path(), None).unwrap(), None, "one run: read whole");
        add_run(d.path(), 22, 2);
        let newest = choose(d.path(), None).unwrap().unwrap();
        assert_eq!(
            newest,
            vec![d.path().join("msmemscope_22_20261201000000_ascend")]
        );
        let first = choose(d.path(), Some(1)).unwrap().unwrap();
        assert_eq!(
            first,
            vec![d.path().join("msmemscope_11_20261201000000_ascend")]
        );
        assert!(choose(d.path(), Some(3)).is_err());
        assert_eq!(parse_runs("1,2").unwrap(), vec![Some(1), Some(2)]);
        assert_eq!(parse_runs(",2").unwrap(), vec![None, Some(2)]);
        assert!(parse_runs("0").is_err());
        assert!(parse_runs(",").is_err());
        assert!(parse_runs("").is_err());
    }
}
