//! The collector's half of `memscope top` (issue 38): a viewer asks by touching
//! `<spool>/top.request` (at least every few seconds); while it does, the collector writes
//! every process's latest frame ([`crate::live`]) to `<spool>/top.json` once a
//! second, replaced whole. Nothing is read from the job for it and nothing is written while
//! nobody watches.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use serde::{Deserialize, Serialize};

use crate::live::{LiveHandle, ProcessFrame};

/// The file a viewer touches to ask for frames.
pub const REQUEST: &str = "top.request";
/// The frames file.
pub const FRAMES: &str = "top.json";
/// `format` of the frames file.
pub const FORMAT: &str = "memscope-top";
/// A request older than this is a viewer gone.
pub const REQUEST_TTL: Duration = Duration::from_secs(5);
/// Ended processes whose last frame is kept.
const ENDED_KEPT: usize = 64;

/// `<spool>/top.json`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct TopFile {
    /// [`FORMAT`].
    pub format: String,
    /// 1.
    pub version: u32,
    /// When it was written (ns since the epoch).
    pub at_ns: u64,
    /// Every process followed, and the last ended ones, by pid.
    pub processes: Vec<ProcessFrame>,
}

/// The frames of a collector's processes and the request that asks for them.
#[derive(Default)]
pub struct LiveViews {
    handles: BTreeMap<u32, LiveHandle>,
    last_check: Option<Instant>,
    last_write: Option<Instant>,
    wanted: bool,
    /// When the current request began (ns since the epoch): frames from before it (an earlier
    /// viewer's) are stale.
    wanted_since_ns: u64,
}

impl LiveViews {
    /// Whether a [`LiveViews::tick`] is due (four times a second at most).
    pub fn due(&mut self) -> bool {
        let now = Instant::now();
        if self
            .last_check
            .is_some_and(|t| now.duration_since(t) < Duration::from_millis(250))
        {
            return false;
        }
        self.last_check = Some(now);
        true
    }

    /// Looks at the request and, while a viewer asks, writes the frames once a second;
    /// `procs`: the processes followed now, with their handles.
    pub fn tick(&mut self, spool: &Path, procs: impl Iterator<Item = (u32, LiveHandle)>) {
        let now = Instant::now();
        let mut running = std::collections::BTreeSet::new();
        for (pid, h) in procs {
            running.insert(pid);
            self.handles.insert(pid, h);
        }
        let wanted = requested(spool);
        if wanted != self.wanted {
            self.wanted = wanted;
            self.wanted_since_ns = now_ns();
            for h in self.handles.values() {
                h.set_wanted(wanted);
            }
        }
        if !wanted
            || self
                .last_write
                .is_some_and(|t| now.duration_since(t) < Duration::from_secs(1))
        {
            return;
        }
        self.last_write = Some(now);
        self.forget_old_ended(&running);
        let processes = self
            .handles
            .iter()
            .map(|(pid, h)| {
                let mut f = h.frame();
                f.alive = f.alive && running.contains(pid);
                // a running process's frame from before this request (or none yet): only who
                // it is, `at_ns` 0, until its next flush builds a fresh one
                if f.alive && f.at_ns < self.wanted_since_ns {
                    f = ProcessFrame {
                        pid: f.pid,
                        exe: f.exe,
                        rank: f.rank,
                        alive: true,
                        ..ProcessFrame::default()
                    };
                }
                // its program now (the first image's may have exec'd: env, a launcher)
                if f.alive {
                    if let Ok(exe) = std::fs::read_link(format!("/proc/{pid}/exe")) {
                        f.exe = exe.display().to_string();
                    }
                }
                f
            })
            // a launcher or shell helper that ended without an event is no process to watch
            .filter(|f| f.alive || f.events > 0)
            .collect();
        let file = TopFile {
            format: FORMAT.to_owned(),
            version: 1,
            at_ns: now_ns(),
            processes,
        };
        write_whole(&spool.join(FRAMES), &file);
    }

    fn forget_old_ended(&mut self, running: &std::collections::BTreeSet<u32>) {
        let ended: Vec<u32> = self
            .handles
            .keys()
            .filter(|p| !running.contains(p))
            .copied()
            .collect();
        for pid in ended.iter().take(ended.len().saturating_sub(ENDED_KEPT)) {
            self.handles.remove(pid);
        }
    }
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Whether a viewer touched the request within [`REQUEST_TTL`].
fn requested(spool: &Path) -> bool {
    std::fs::metadata(spool.join(REQUEST))
        .and_then(|m| m.modified())
        .is_ok_and(|t| t.elapsed().map_or(true, |age| age < REQUEST_TTL))
}

/// Writes `file` beside `path` and renames it over, so a reader never sees part of it.
fn write_whole(path: &Path, file: &TopFile) {
    let Ok(text) = serde_json::to_vec(file) else {
        return;
    };
    let part = path.with_extension("json.part");
    if memscope_dump::layout::create_new_0600(&part)
        .and_then(|(mut f, _)| std::io::Write::write_all(&mut f, &text))
        .is_ok()
    {
        let _ = std::fs::rename(&part, path);
    } else {
        let _ = std::fs::remove_file(&part);
    }
}
