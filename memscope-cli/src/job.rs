//! The job's process tree as `memscope run` sees it (issue 18, B2): every process descended
//! from `memscope` (it is the job's child subreaper, so ranks whose launcher died stay in the
//! tree) plus every traced process (a stream in the spool), for forwarding SIGINT/SIGTERM/SIGHUP
//! to the whole job and for reaping orphans that were reparented to `memscope`.

use memscope_collect::Collector;
use nix::sys::signal::{kill, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag};
use nix::unistd::Pid;
use signal_hook::low_level::siginfo::{Cause, Origin};
use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

/// How long the job gets to end after a forwarded signal before `memscope run` sends SIGKILL
/// to what is left (seconds; `MEMSCOPE_KILL_GRACE_S` overrides).
pub const DEFAULT_GRACE_S: u64 = 10;

/// The grace period of a forwarded signal: `MEMSCOPE_KILL_GRACE_S` (whole seconds), else
/// [`DEFAULT_GRACE_S`].
///
/// # Errors
/// `MEMSCOPE_KILL_GRACE_S` is set but not a whole number of seconds (one line naming it).
pub fn grace() -> Result<Duration, String> {
    match std::env::var("MEMSCOPE_KILL_GRACE_S") {
        Ok(v) => v
            .trim()
            .parse::<u64>()
            .map(Duration::from_secs)
            .map_err(|_| format!("MEMSCOPE_KILL_GRACE_S={v:?}: not a whole number of seconds")),
        Err(_) => Ok(Duration::from_secs(DEFAULT_GRACE_S)),
    }
}

/// Makes `memscope` the child subreaper of its job (Linux `PR_SET_CHILD_SUBREAPER`): a rank
/// whose launcher ends is reparented to `memscope` instead of init, so it stays part of the
/// job (signals reach it; it is reaped here). Failure only loses that.
pub fn become_subreaper() {
    let _ = nix::sys::prctl::set_child_subreaper(true);
}

/// `(pid, ppid, process group, state)` of every process in `/proc`.
fn processes() -> Vec<(u32, u32, u32, char)> {
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            // `pid (comm) state ppid pgrp ...`; comm may hold spaces and parentheses
            let rest = s.rsplit_once(')')?.1;
            let mut f = rest.split_whitespace();
            let state = f.next()?.chars().next()?;
            let ppid = f.next()?.parse().ok()?;
            let pgrp = f.next()?.parse().ok()?;
            Some((pid, ppid, pgrp, state))
        })
        .collect()
}

/// Live (not zombie) descendants of `root`, `root` excluded.
pub fn descendants(root: u32) -> BTreeSet<u32> {
    let procs = processes();
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    let mut live = BTreeSet::new();
    for &(pid, ppid, _, state) in &procs {
        children.entry(ppid).or_default().push(pid);
        if !matches!(state, 'Z' | 'X') {
            live.insert(pid);
        }
    }
    let mut out = BTreeSet::new();
    let mut todo = vec![root];
    while let Some(p) = todo.pop() {
        for &c in children.get(&p).map(Vec::as_slice).unwrap_or(&[]) {
            if out.insert(c) {
                todo.push(c);
            }
        }
    }
    out.retain(|p| live.contains(p));
    out
}

/// Sends `sig` to every process of `pids` (each one once). With `skip_own_group`, processes in
/// `memscope`'s own process group are left out: a terminal's Ctrl-C already reached them.
/// Returns how many were signalled.
pub fn signal_all(pids: &BTreeSet<u32>, sig: Signal, skip_own_group: bool) -> usize {
    let own = nix::unistd::getpgrp().as_raw() as u32;
    let groups: HashMap<u32, u32> = if skip_own_group {
        processes().into_iter().map(|(p, _, g, _)| (p, g)).collect()
    } else {
        HashMap::new()
    };
    let me = std::process::id();
    pids.iter()
        .filter(|&&p| p != me && p > 1)
        .filter(|p| !skip_own_group || groups.get(p) != Some(&own))
        .filter(|&&p| kill(Pid::from_raw(p as i32), sig).is_ok())
        .count()
}

pub use memscope_collect::Ended;

/// Reaps the zombies among `memscope`'s children other than `direct` (the job's own process,
/// which `std::process::Child` waits for): ranks reparented here by [`become_subreaper`].
/// Returns how each reaped one ended.
pub fn reap_orphans(direct: u32) -> Vec<(u32, Ended)> {
    use nix::sys::wait::WaitStatus;
    let me = std::process::id();
    let mut out = Vec::new();
    for (pid, ppid, _, state) in processes() {
        if ppid == me && pid != direct && state == 'Z' {
            match waitpid(Pid::from_raw(pid as i32), Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::Exited(_, c)) => out.push((pid, Ended::Exited(c))),
                Ok(WaitStatus::Signaled(_, s, _)) => out.push((pid, Ended::Signaled(s as i32))),
                _ => {}
            }
        }
    }
    out
}

/// The forwarding of a signal sent to `memscope run` to its job, and its escalation: SIGKILL
/// after the grace period, or at once on a second signal.
pub struct Teardown {
    direct: u32,
    /// `MEMSCOPE_SPOOL=<spool>`: what a traced process outside `memscope`'s tree must have in
    /// its environment to be signalled (a pid reused by another program never is).
    spool_env: Vec<u8>,
    grace: Duration,
    signalled: Option<(Instant, Signal)>,
    killed: bool,
}

impl Teardown {
    /// For a job whose own process is `direct`, traced into `spool`, with grace period
    /// `grace`.
    pub fn new(direct: u32, spool: &std::path::Path, grace: Duration) -> Teardown {
        use std::os::unix::ffi::OsStrExt;
        let mut spool_env = format!("{}=", memscope_wire::probe_env::ENV_SPOOL).into_bytes();
        spool_env.extend_from_slice(spool.as_os_str().as_bytes());
        Teardown {
            direct,
            spool_env,
            grace,
            signalled: None,
            killed: false,
        }
    }

    /// Every process of the job: `memscope`'s descendants, the direct child, and every traced
    /// process still alive whose environment names this run's spool.
    fn targets(&self, collector: &Collector) -> BTreeSet<u32> {
        let mut t = descendants(std::process::id());
        t.insert(self.direct);
        let outside: Vec<u32> = collector
            .traced_pids()
            .into_iter()
            .filter(|p| !t.contains(p) && memscope_collect::pid_alive(*p))
            .collect();
        t.extend(outside.into_iter().filter(|p| self.is_ours(*p)));
        t
    }

    /// Whether process `pid` has this run's `MEMSCOPE_SPOOL` in its environment.
    fn is_ours(&self, pid: u32) -> bool {
        std::fs::read(format!("/proc/{pid}/environ"))
            .map(|env| {
                env.split(|&b| b == 0)
                    .any(|e| e == self.spool_env.as_slice())
            })
            .unwrap_or(false)
    }

    /// `memscope` received `origin`: forwards it to the whole job (the processes a terminal's
    /// Ctrl-C already reached are left out); a second signal kills the job.
    pub fn on_signal(&mut self, origin: &Origin, collector: &Collector) {
        let Ok(sig) = Signal::try_from(origin.signal) else {
            return;
        };
        let targets = self.targets(collector);
        if let Some((_, first)) = self.signalled {
            if !self.killed {
                let n = signal_all(&targets, Signal::SIGKILL, false);
                eprintln!(
                    "memscope: {sig} after {first}: sent SIGKILL to {n} process(es) of the job"
                );
                self.killed = true;
            }
            return;
        }
        let from_terminal = matches!(origin.cause, Cause::Kernel);
        let n = signal_all(&targets, sig, from_terminal);
        eprintln!(
            "memscope: {sig}: forwarded to {n} process(es) of the job{}; they get {} s to end before SIGKILL",
            if from_terminal {
                " (the terminal reached the others)"
            } else {
                ""
            },
            self.grace.as_secs()
        );
        self.signalled = Some((Instant::now(), sig));
    }

    /// Sends SIGKILL to what is left of the job once the grace period of a forwarded signal
    /// has passed.
    pub fn check(&mut self, collector: &Collector) {
        let Some((at, sig)) = self.signalled else {
            return;
        };
        if self.killed || at.elapsed() < self.grace {
            return;
        }
        self.killed = true;
        let n = signal_all(&self.targets(collector), Signal::SIGKILL, false);
        if n > 0 {
            eprintln!(
                "memscope: {n} process(es) of the job still running {} s after {sig}: sent SIGKILL",
                self.grace.as_secs()
            );
        }
    }

    /// How long, after the job's own process exited, `memscope run` keeps following processes
    /// that are still running: the grace period plus 2 s after a forwarded signal, else 5 s.
    pub fn wait_after_exit(&self) -> Duration {
        match self.signalled {
            Some(_) => self.grace + Duration::from_secs(2),
            None => Duration::from_secs(5),
        }
    }

    /// The signal that was forwarded, if any.
    pub fn signal(&self) -> Option<Signal> {
        self.signalled.map(|(_, s)| s)
    }
}
