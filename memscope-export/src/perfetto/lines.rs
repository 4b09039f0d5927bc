//! Account-only blocks (PYMEM's Python objects, a plugin's `MEMSCOPE_TYPE_ACCOUNT` types) by
//! the Python line that allocated them: one counter track per line, `host PYMEM @
//! train.py(12): step`, in live bytes — the line is the first frame of the user's code in the
//! row's Python stack (`memscope_analysis::attribution`, as the report's sites). The first
//! [`MAX_LINES`] lines of the user's code in a process get their own track; later ones, and
//! blocks of library or interpreter code only (imports, the interpreter's start), share
//! `… @ other lines`; blocks without a Python stack (made before the stack service started,
//! or a run without `--call-stack python:N`) go to `… @ no Python stack`, so the tracks add up
//! to the allocator's counter.

use super::process::ProcessTrace;
use super::Writer;
use memscope_analysis::attribution::FrameClass;
use memscope_core::event::{Event, EventKind, EventType};
use std::collections::HashMap;
use std::io::{self, Write};

/// Line tracks per process and Event Type.
pub const MAX_LINES: usize = 32;
/// The label of the shared track.
const OTHER: &str = "other lines";
/// The label of blocks without a Python stack.
const NO_STACK: &str = "no Python stack";

struct Line {
    uuid: u64,
    live: i64,
}

/// The line tracks of one process.
#[derive(Default)]
pub struct ByLine {
    /// (Event Type, line label) → track index in `lines`.
    index: HashMap<(EventType, String), usize>,
    /// Per Event Type: tracks made so far (the overflow one included).
    made: HashMap<EventType, usize>,
    lines: Vec<Line>,
    /// Live blocks: (Event Type, address) → (track, bytes).
    live: HashMap<(EventType, u64), (usize, u64)>,
}

impl ByLine {
    /// The track of `label` for `ty`, made on first use (past [`MAX_LINES`]: the shared one).
    fn track<W: Write>(
        &mut self,
        p: &mut ProcessTrace,
        w: &mut Writer<W>,
        ty: EventType,
        label: &str,
    ) -> io::Result<usize> {
        if let Some(&i) = self.index.get(&(ty, label.to_owned())) {
            return Ok(i);
        }
        let made = self.made.entry(ty).or_default();
        let label = if *made >= MAX_LINES { OTHER } else { label };
        if let Some(&i) = self.index.get(&(ty, label.to_owned())) {
            return Ok(i);
        }
        *made += 1;
        let name = format!("host {} @ {label}", ty.as_str());
        let uuid = p.line_track(w, &name)?;
        self.lines.push(Line { uuid, live: 0 });
        self.index
            .insert((ty, label.to_owned()), self.lines.len() - 1);
        Ok(self.lines.len() - 1)
    }

    /// Accounts `ev` if it is an account-only MALLOC or FREE, writing its line's counter.
    pub fn on_event<W: Write>(
        &mut self,
        p: &mut ProcessTrace,
        w: &mut Writer<W>,
        ev: &Event,
    ) -> io::Result<()> {
        let Some(m) = ev.memory().filter(|m| m.account_only) else {
            return Ok(());
        };
        let key = (ev.event_type, ev.ptr.unwrap_or(m.addr));
        let (i, delta) = match ev.kind {
            EventKind::Malloc => {
                let site = memscope_analysis::attribution::site_of(ev.py_stack.as_deref(), None);
                let label = match &site {
                    Some(s) if s.rule.class == FrameClass::Own => s.frame.as_str(),
                    Some(_) => OTHER,
                    // made before the Python stack service started (the interpreter's start)
                    None => NO_STACK,
                };
                let i = self.track(p, w, ev.event_type, label)?;
                if let Some((j, s)) = self.live.insert(key, (i, m.size)) {
                    self.lines[j].live -= s as i64;
                }
                (i, m.size as i64)
            }
            EventKind::Free => match self.live.remove(&key) {
                Some((i, s)) => (i, -(s as i64)),
                None => return Ok(()),
            },
            _ => return Ok(()),
        };
        let line = &mut self.lines[i];
        line.live += delta;
        let (uuid, v) = (line.uuid, line.live);
        p.line_value(w, ev.ts_ns, uuid, v)
    }
}
