//! Launcher and wrapper helpers of a job (issue 23): a pyenv `python3` shim is a bash script
//! that runs a dozen `bash`, `readlink` and `basename` processes before it execs the real
//! python; `bash user.sh` and `import memscope` (which runs the `memscope` CLI) add more. Every
//! one of them is traced (the probe follows every process of the job), but they are not what the
//! user asked about: when the job has at least one other process that recorded events, a
//! process all of whose images ran a helper program gets no output directory and no console
//! line of its own — one count line says how many there were, and the run index lists them
//! (`"helper": true`).
//!
//! Helper programs: shells, the small tools shell scripts call (see [`DEFAULT_HELPERS`]) and
//! memscope's own CLI. `MEMSCOPE_HELPERS=name,…` adds program names; `MEMSCOPE_HELPERS=none`
//! lists every process as before.

use memscope_collect::process::ProcessSummary;
use std::collections::BTreeMap;
use std::path::Path;

/// Programs whose processes are a job's helpers, by executable file name.
pub const DEFAULT_HELPERS: &[&str] = &[
    // shells
    "sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "busybox",
    // what shell scripts and version-manager shims (pyenv, conda, nvm) call
    "env", "readlink", "realpath", "basename", "dirname", "uname", "cat", "head", "tail", "cut",
    "tr", "sed", "awk", "gawk", "mawk", "grep", "which", "id", "whoami", "hostname", "mkdir", "rm",
    "ls", "date", "expr", "tty", "stty", "tput", "locale", "getconf", "ldconfig", "sleep",
    "mktemp", "stat", "wc", "tee", "xargs", "true", "false", "printf", "echo", "touch", "chmod",
    "ln", "cp", "mv", "nproc", "uniq", "sort", "find", "test", "[",
];

/// The helper-program list: the defaults plus `MEMSCOPE_HELPERS`; empty with
/// `MEMSCOPE_HELPERS=none`.
pub fn helper_names() -> Vec<String> {
    let env = std::env::var("MEMSCOPE_HELPERS").unwrap_or_default();
    if env.trim() == "none" {
        return Vec::new();
    }
    let mut v: Vec<String> = DEFAULT_HELPERS.iter().map(|s| (*s).to_owned()).collect();
    v.extend(
        env.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned),
    );
    v
}

fn file_name(exe: &str) -> &str {
    exe.rsplit('/').next().unwrap_or(exe)
}

/// Whether `exe` runs a helper program of `names`, or memscope's own CLI (`self_exe`).
fn is_helper_exe(exe: &str, names: &[String], self_exe: Option<&Path>) -> bool {
    if names.is_empty() {
        return false;
    }
    let name = file_name(exe);
    name == "memscope"
        || self_exe.is_some_and(|s| Path::new(exe) == s)
        || names.iter().any(|n| n == name)
}

/// Whether the process recorded any event.
pub fn recorded(p: &ProcessSummary) -> bool {
    // outputs that could not be written (no directory could be made) were still recorded
    !p.counts.is_empty() || !p.typed.is_empty() || p.write_failures > 0
}

/// The pids of `procs` that are helpers (every image a helper program), when some other
/// process recorded events; none otherwise (the job is made of helpers only, e.g. a traced
/// shell command: nothing is hidden).
pub fn helpers(procs: &[ProcessSummary], names: &[String], self_exe: Option<&Path>) -> Vec<u32> {
    let is_helper = |p: &ProcessSummary| helper_program(p, names, self_exe);
    let job_recorded = procs.iter().any(|p| recorded(p) && !is_helper(p));
    if !job_recorded {
        return Vec::new();
    }
    procs
        .iter()
        .filter(|p| is_helper(p))
        .map(|p| p.pid)
        .collect()
}

/// Whether every image of `p` ran a helper program of `names` (or memscope's own CLI).
pub(crate) fn helper_program(
    p: &ProcessSummary,
    names: &[String],
    self_exe: Option<&Path>,
) -> bool {
    let exes: Vec<&str> = if p.image_exes.is_empty() {
        vec![p.exe.as_str()]
    } else {
        p.image_exes.iter().map(String::as_str).collect()
    };
    exes.iter().all(|e| is_helper_exe(e, names, self_exe))
}

/// Marks the helpers of `procs` and removes their output directories (they were created
/// while it was not known yet that they are helpers); returns how many processes the console
/// leaves out and counts, by program: those that recorded nothing, helper programs (a pyenv
/// shim's dozen shells, issue 35) only in the run index.
pub fn set_aside(procs: &mut [ProcessSummary]) -> BTreeMap<String, usize> {
    let self_exe = std::env::current_exe().ok();
    let names = helper_names();
    let pids = helpers(procs, &names, self_exe.as_deref());
    let mut left_out: BTreeMap<String, usize> = BTreeMap::new();
    for p in procs.iter_mut() {
        p.helper = pids.contains(&p.pid);
        if p.helper && p.project_dir.is_dir() {
            // only memscope's own files are in it; a failure leaves it, said once
            if let Err(e) = std::fs::remove_dir_all(&p.project_dir) {
                eprintln!(
                    "memscope: cannot remove the helper's directory {}: {e}",
                    p.project_dir.display()
                );
            }
        }
        if !recorded(p) && !helper_program(p, &names, self_exe.as_deref()) {
            *left_out.entry(file_name(&p.exe).to_owned()).or_default() += 1;
        }
    }
    left_out
}

/// The one console line about the processes left out: `1 other process(es) not listed:
/// processes that recorded nothing (python3.11 1); …`.
pub fn count_line(left_out: &BTreeMap<String, usize>) -> Option<String> {
    let n: usize = left_out.values().sum();
    if n == 0 {
        return None;
    }
    let mut by: Vec<(&String, &usize)> = left_out.iter().collect();
    by.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let mut names: Vec<String> = by
        .iter()
        .take(5)
        .map(|(k, v)| format!("{} {v}", if k.is_empty() { "?" } else { k }))
        .collect();
    if by.len() > 5 {
        names.push(format!("{} more program(s)", by.len() - 5));
    }
    Some(format!(
        "memscope: {n} other process(es) not listed: processes that recorded nothing ({}); memscope_run.json lists them with the job's helper programs",
        names.join(", ")
    ))
}

/// The output directories of the processes that recorded events (rows, or only capture
/// records: HOST and Python objects without --host-rows), helpers left out.
pub(crate) fn recorded_dirs(
    summaries: &[memscope_collect::process::ProcessSummary],
) -> Vec<std::path::PathBuf> {
    summaries
        .iter()
        .filter(|p| recorded(p) && !p.helper && p.project_dir.is_dir())
        .map(|p| p.project_dir.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use memscope_core::event::EventKind;

    fn proc(pid: u32, exes: &[&str], events: u64) -> ProcessSummary {
        let mut p = ProcessSummary {
            pid,
            exe: exes.last().unwrap().to_string(),
            image_exes: exes.iter().map(|e| e.to_string()).collect(),
            ..ProcessSummary::default()
        };
        if events > 0 {
            p.typed.insert(EventKind::Malloc, events);
        }
        p
    }

    #[test]
    fn shims_and_shell_helpers_are_helpers_when_the_job_recorded_events() {
        let names = helper_names();
        let procs = [
            // the pyenv shim's own process: bash, then exec of the real python
            proc(
                10,
                &[
                    "/usr/bin/bash",
                    "/root/.pyenv/versions/3.11.7/bin/python3.11",
                ],
                5,
            ),
            proc(11, &["/usr/bin/bash"], 3),
            proc(12, &["/usr/bin/readlink"], 1),
            proc(13, &["/venv/bin/memscope"], 2),
            proc(14, &["/usr/bin/python3.11"], 0),
        ];
        assert_eq!(helpers(&procs, &names, None), vec![11, 12, 13]);
        // a job of helpers only (a traced shell command) hides nothing
        assert!(helpers(&procs[1..3], &names, None).is_empty());
        // MEMSCOPE_HELPERS=none: an empty list hides nothing
        assert!(helpers(&procs, &[], None).is_empty());
    }

    #[test]
    fn one_line_counts_the_processes_left_out_by_program() {
        let mut m = BTreeMap::new();
        m.insert("python3.11".to_owned(), 1);
        m.insert("app".to_owned(), 2);
        assert_eq!(
            count_line(&m).unwrap(),
            "memscope: 3 other process(es) not listed: processes that recorded nothing (app 2, python3.11 1); memscope_run.json lists them with the job's helper programs"
        );
        assert!(count_line(&BTreeMap::new()).is_none());
    }
}
