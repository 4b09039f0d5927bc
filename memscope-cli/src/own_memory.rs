//! The job's own memory when no selected adapter saw it (issue 35): a Python script that
//! leaks host memory, run with the default adapters (NPU memory), used to end with "No memory
//! pool leaks detected" and nothing else. The collector samples each traced process's resident
//! memory (`/proc/PID/status`: `VmRSS` when first seen, `VmHWM` after, a few times a second;
//! the job's children's `ru_maxrss` at the end), and when the selected adapters recorded no
//! allocation while the process's memory grew, one line says how much it held and names the
//! command that shows where.
//!
//! Measured rather than assumed (`benches/own_memory/run.sh`): accounting host
//! and Python memory by default, without rows, took a small torch CPU training loop from
//! 1.13–1.22× to 1.61–1.79× its bare wall time (CPU 1.2–1.3× → 2.0–2.3×) and the sim-npu demo
//! from 1.3× to 2.5×,
//! where the sampler costs one small file read per process every 200 ms; so the default stays
//! the NPU adapters and this line points at `--adapters host,pymem`.

use memscope_collect::config::RunConfig;
use memscope_collect::process::ProcessSummary;
use memscope_core::event::EventKind;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// How often each process is sampled.
const EVERY: Duration = Duration::from_millis(200);

/// Growth of resident memory worth a line: CPython's own start-up under the probe grows it by
/// about 12 MiB (`python3 -c pass`).
const GROWTH_KIB: u64 = 16 * 1024;

/// Resident memory worth a line whatever the start (a job that allocates before its first
/// sample): three times CPython's own under the probe.
const PEAK_KIB: u64 = 48 * 1024;

/// Resident memory of one process, KiB.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Resident {
    /// When first seen (the probe had just started).
    pub start_kib: u64,
    /// The highest seen (`VmHWM`).
    pub peak_kib: u64,
}

/// Samples of the traced processes' resident memory.
#[derive(Debug, Default)]
pub struct RssWatch {
    seen: BTreeMap<u32, Resident>,
    /// The job's process and its children's `ru_maxrss` at the end ([`RssWatch::job_peak`]).
    job: Option<(u32, u64)>,
    /// The program each process ran when last sampled: an exec (a pyenv shim's bash becoming
    /// python) starts its figures again, as the kernel does its high-water mark.
    exes: BTreeMap<u32, std::path::PathBuf>,
    last: Option<Instant>,
}

impl RssWatch {
    /// An empty watch.
    pub fn new() -> RssWatch {
        RssWatch::default()
    }

    /// Samples `pids`: one seen for the first time at once, the others every [`EVERY`].
    pub fn sample(&mut self, pids: &[u32]) {
        let due = self.last.is_none_or(|t| t.elapsed() >= EVERY);
        for &pid in pids {
            if !due && self.seen.contains_key(&pid) {
                continue;
            }
            let Some((rss, hwm)) = read_status(pid) else {
                continue;
            };
            let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap_or_default();
            if self.exes.get(&pid) != Some(&exe) {
                self.seen.remove(&pid);
                self.exes.insert(pid, exe);
            }
            let r = self.seen.entry(pid).or_insert(Resident {
                start_kib: rss,
                peak_kib: 0,
            });
            r.peak_kib = r.peak_kib.max(hwm).max(rss);
        }
        if due {
            self.last = Some(Instant::now());
        }
    }

    /// Samples `pids` now (the job waits at exit: its last figures).
    pub fn sample_now(&mut self, pids: &[u32]) {
        self.last = None;
        self.sample(pids);
    }

    /// What was seen of process `pid`.
    pub fn of(&self, pid: u32) -> Option<Resident> {
        self.seen.get(&pid).copied()
    }

    /// The job's process `pid` and its children's `ru_maxrss` (KiB) at the end: it covers the
    /// time after the last sample, but of whichever descendant was largest, so it is credited
    /// only to a job of one process, that one.
    pub fn job_peak(&mut self, pid: u32, kib: u64) {
        self.job = Some((pid, kib));
    }
}

/// `VmRSS` and `VmHWM` of process `pid`, KiB (`None`: gone, or no memory any more).
fn read_status(pid: u32) -> Option<(u64, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

/// The highest resident memory of any of this process's children that ended, KiB
/// (`ru_maxrss`; 0 when unknown).
pub fn children_peak_kib() -> u64 {
    use nix::sys::resource::{getrusage, UsageWho};
    getrusage(UsageWho::RUSAGE_CHILDREN)
        .map(|u| u64::try_from(u.max_rss()).unwrap_or(0))
        .unwrap_or(0)
}

/// How the job was started: the hint names the matching way to record host memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Launch {
    /// `memscope run -- …`.
    Run,
    /// `import memscope` in a plain `python` (the package started `memscope collect`).
    Python,
}

/// Whether the selected adapters record host memory (HOST, or Python objects): the
/// descriptors say so, shipped plugins' included.
fn host_traced(cfg: &RunConfig) -> bool {
    cfg.selection().adapters.iter().any(|d| d.host_memory)
}

/// The one line for a job whose processes held memory that no selected adapter recorded, or
/// `None` (host memory traced, an allocation recorded, or no growth worth a line).
pub fn hint(
    procs: &[ProcessSummary],
    watch: &RssWatch,
    cfg: &RunConfig,
    command: &[String],
    launch: Launch,
) -> Option<String> {
    if host_traced(cfg) {
        return None;
    }
    line(procs, watch, &cfg.adapters, command, launch)
}

fn line(
    procs: &[ProcessSummary],
    watch: &RssWatch,
    adapters: &[String],
    command: &[String],
    launch: Launch,
) -> Option<String> {
    // the job's own programs: not a launcher's shells (nor a pyenv shim's)
    let names = crate::helpers::helper_names();
    let own: Vec<&ProcessSummary> = procs
        .iter()
        .filter(|p| !p.helper && !crate::helpers::helper_program(p, &names, None))
        .collect();
    let allocations: u64 = own
        .iter()
        .map(|p| p.typed.get(&EventKind::Malloc).copied().unwrap_or(0))
        .sum();
    if allocations > 0 {
        return None;
    }
    let seen = |p: &ProcessSummary| {
        let mut r = watch.of(p.pid);
        if let (Some((pid, kib)), [only]) = (watch.job, own.as_slice()) {
            if pid == only.pid && only.pid == p.pid {
                // never sampled (a short job): its start is not known, only its peak
                let e = r.get_or_insert(Resident {
                    start_kib: kib,
                    peak_kib: 0,
                });
                e.peak_kib = e.peak_kib.max(kib);
            }
        }
        r
    };
    // the process that grew most
    let (p, r) = own
        .iter()
        .filter_map(|p| seen(p).map(|r| (*p, r)))
        .max_by_key(|(_, r)| (r.peak_kib.saturating_sub(r.start_kib), r.peak_kib))?;
    let grew = r.peak_kib.saturating_sub(r.start_kib);
    if grew < GROWTH_KIB && r.peak_kib < PEAK_KIB {
        return None;
    }
    let python = p.exe.rsplit('/').next().unwrap_or("").starts_with("python")
        || command
            .first()
            .is_some_and(|c| c.rsplit('/').next().unwrap_or("").starts_with("python"));
    let flags = if python {
        "--adapters host,pymem --call-stack python:8"
    } else {
        "--adapters host --call-stack c:16"
    };
    let run = format!("memscope run {flags} -- {}", shell_words(command));
    let how = match launch {
        Launch::Python if python => format!(
            "memscope.config(adapters=\"pymem\", call_stack=\"python:8\") before memscope.start(), or {run}"
        ),
        _ => run,
    };
    let selected = if adapters.is_empty() {
        "the default".to_owned()
    } else {
        adapters.join(",")
    };
    let more = if grew > 0 {
        format!(" ({} more than at its start)", mib(grew))
    } else {
        String::new()
    };
    Some(format!(
        "memscope: pid {} ({}) held up to {} of host memory{more}, and the selected adapters ({selected}: NPU memory) recorded no allocation of it; to see where it went: {how}",
        p.pid,
        p.exe.rsplit('/').next().unwrap_or("?"),
        mib(r.peak_kib),
    ))
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

/// `argv` as a shell would take it back: words with special characters single-quoted.
fn shell_words(argv: &[String]) -> String {
    argv.iter()
        .map(|w| {
            if !w.is_empty()
                && w.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
            {
                w.clone()
            } else if w.chars().any(char::is_control) {
                // $'…' keeps the suggestion on one line (a newline in an argument)
                let mut q = String::from("$'");
                for c in w.chars() {
                    match c {
                        '\\' | '\'' => q.extend(['\\', c]),
                        c if (c as u32) < 0x80 && c.is_control() => {
                            q.push_str(&format!("\\x{:02x}", c as u32))
                        }
                        c if c.is_control() => q.push_str(&format!("\\u{:04x}", c as u32)),
                        c => q.push(c),
                    }
                }
                q.push('\'');
                q
            } else {
                format!("'{}'", w.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proc(pid: u32, exe: &str, mallocs: u64) -> ProcessSummary {
        let mut p = ProcessSummary {
            pid,
            exe: exe.into(),
            ..ProcessSummary::default()
        };
        if mallocs > 0 {
            p.typed.insert(EventKind::Malloc, mallocs);
        }
        p
    }

    fn watch(pid: u32, start: u64, peak: u64) -> RssWatch {
        let mut w = RssWatch::new();
        w.seen.insert(
            pid,
            Resident {
                start_kib: start,
                peak_kib: peak,
            },
        );
        w
    }

    fn argv(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn a_python_job_that_grew_with_nothing_recorded_gets_the_command_that_shows_where() {
        let l = line(
            &[proc(7, "/usr/bin/python3.11", 0)],
            &watch(7, 9 * 1024, 31 * 1024),
            &argv(&["pta", "mstx"]),
            &argv(&["python3", "leaky.py"]),
            Launch::Run,
        )
        .unwrap();
        assert!(l.contains("held up to 31.0 MiB"), "{l}");
        assert!(l.contains("22.0 MiB more"), "{l}");
        assert!(
            l.ends_with(
                "memscope run --adapters host,pymem --call-stack python:8 -- python3 leaky.py"
            ),
            "{l}"
        );
        let l = line(
            &[proc(7, "/usr/bin/python3.11", 0)],
            &watch(7, 9 * 1024, 31 * 1024),
            &[],
            &argv(&["python3", "my job.py"]),
            Launch::Python,
        )
        .unwrap();
        assert!(l.contains("memscope.config(adapters=\"pymem\""), "{l}");
        assert!(l.ends_with("-- python3 'my job.py'"), "{l}");
    }

    #[test]
    fn no_hint_when_an_allocation_was_recorded_or_little_grew() {
        let w = watch(7, 9 * 1024, 31 * 1024);
        let py = argv(&["python3", "x.py"]);
        assert!(line(&[proc(7, "python3", 5)], &w, &[], &py, Launch::Run).is_none());
        let small = watch(7, 1024, 16 * 1024);
        assert!(line(&[proc(7, "python3", 0)], &small, &[], &py, Launch::Run).is_none());
        // a C program is pointed at HOST with C stacks
        let l = line(
            &[proc(7, "/opt/app", 0)],
            &w,
            &[],
            &argv(&["/opt/app"]),
            Launch::Run,
        )
        .unwrap();
        assert!(
            l.ends_with("--adapters host --call-stack c:16 -- /opt/app"),
            "{l}"
        );
    }

    #[test]
    fn a_short_job_is_judged_by_its_peak_and_a_launcher_shell_is_never_blamed() {
        let py = argv(&["bash", "-c", "python3 x.py\ntrue"]);
        // never sampled: the children's ru_maxrss is the one process's peak
        let mut w = RssWatch::new();
        w.job_peak(7, 80 * 1024);
        let l = line(&[proc(7, "/usr/bin/python3", 0)], &w, &[], &py, Launch::Run).unwrap();
        assert!(l.contains("held up to 80.0 MiB of host memory, and"), "{l}");
        // a newline in an argument keeps the suggestion on one line
        assert!(l.ends_with("-- bash -c $'python3 x.py\\x0atrue'"), "{l}");
        let mut small = RssWatch::new();
        small.job_peak(7, 20 * 1024);
        assert!(line(&[proc(7, "python3", 0)], &small, &[], &py, Launch::Run).is_none());
        // `bash -c 'python3 x.py; true'`: bash is the job's process, python grew
        let mut w = watch(8, 9 * 1024, 40 * 1024);
        w.job_peak(7, 40 * 1024);
        let l = line(
            &[proc(7, "/usr/bin/bash", 0), proc(8, "/usr/bin/python3", 0)],
            &w,
            &[],
            &py,
            Launch::Run,
        )
        .unwrap();
        assert!(l.contains("pid 8 (python3)"), "{l}");
        assert!(l.contains("--adapters host,pymem"), "{l}");
    }

    #[test]
    fn the_watch_reads_this_process_resident_memory() {
        let mut w = RssWatch::new();
        let me = std::process::id();
        w.sample(&[me]);
        let r = w.of(me).unwrap();
        assert!(r.start_kib > 0 && r.peak_kib >= r.start_kib, "{r:?}");
    }
}
