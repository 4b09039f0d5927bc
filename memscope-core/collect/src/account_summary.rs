//! Leak and peak summaries of an account-only source's blocks by Python stack (issue 16; the
//! source's descriptor gives its [`AccountSummary`]: the Event Type summed up and what its
//! blocks are, e.g. Python objects): the blocks summed up by where they were allocated (the
//! first frame of the user's code, `memscope_analysis::sites`, issue 23) — what was still
//! live when the process ended, and what was live at the peak of live bytes ("where did my
//! memory go"). Other Event Types of the source (arenas that hold the objects) are never added
//! in.
//!
//! "At exit" is when the source stops (an interpreter's adapter stops when it starts
//! finalising, before the modules are torn down), as memray reports what its tracker saw live
//! when it stopped.
//!
//! The peak groups are those of the last local maximum that raised the peak by 1 % or more
//! (a copy of the per-stack totals is taken then), so they are within 1 % of the exact peak;
//! the peak's byte and object counts are exact.

use crate::adapter::{AccountSummary, AdapterDescriptor};
use memscope_analysis::sites::{site_lines, StackGroup};
use memscope_core::bus::{BusCtx, BusError, Layer, ReportSection};
use memscope_core::event::{Event, EventKind, EventType};
use std::collections::HashMap;

/// The summary layer of a selected adapter that has one.
pub fn layer(d: &AdapterDescriptor) -> Option<Box<dyn Layer>> {
    d.account_summary
        .map(|a| Box::new(AccountObjects::new(a)) as Box<dyn Layer>)
}

/// An account-only source's live blocks by Python stack, and the peak.
pub struct AccountObjects {
    what: AccountSummary,
    ty: EventType,
    /// Interned stack texts (index 0: no Python stack).
    stacks: Vec<String>,
    index: HashMap<String, u32>,
    /// allocation_id → (size, stack).
    live: HashMap<u64, (u64, u32)>,
    /// Per stack: (objects, bytes) live now.
    by_stack: HashMap<u32, (u64, u64)>,
    live_bytes: u64,
    frees: u64,
    peak_bytes: u64,
    peak_objects: u64,
    /// Per-stack totals at the last recorded local maximum, and its live bytes.
    at_peak: HashMap<u32, (u64, u64)>,
    at_peak_bytes: u64,
    /// The peak rose since `at_peak` was taken.
    rising: bool,
}

impl AccountObjects {
    /// An empty summary of the blocks `what` describes.
    pub fn new(what: AccountSummary) -> AccountObjects {
        AccountObjects {
            what,
            ty: EventType::custom(what.event_type),
            stacks: vec![String::new()],
            index: HashMap::new(),
            live: HashMap::new(),
            by_stack: HashMap::new(),
            live_bytes: 0,
            frees: 0,
            peak_bytes: 0,
            peak_objects: 0,
            at_peak: HashMap::new(),
            at_peak_bytes: 0,
            rising: false,
        }
    }

    fn stack_index(&mut self, text: Option<&str>) -> u32 {
        let Some(t) = text.filter(|t| !t.is_empty() && *t != "NA") else {
            return 0;
        };
        if let Some(&i) = self.index.get(t) {
            return i;
        }
        let i = self.stacks.len() as u32;
        self.stacks.push(t.to_owned());
        self.index.insert(t.to_owned(), i);
        i
    }

    /// Takes the per-stack totals as the peak's when the peak rose by 1 % since the last copy.
    fn note_local_max(&mut self) {
        if self.rising && self.live_bytes >= self.at_peak_bytes + self.at_peak_bytes / 100 {
            self.at_peak.clone_from(&self.by_stack);
            self.at_peak_bytes = self.live_bytes;
        }
        self.rising = false;
    }

    fn section(&self, groups: &HashMap<u32, (u64, u64)>, title: String) -> ReportSection {
        let list: Vec<StackGroup> = groups
            .iter()
            .filter(|(_, g)| g.0 > 0)
            .map(|(&s, &(count, bytes))| StackGroup {
                py: Some(self.stacks[s as usize].as_str()).filter(|t| !t.is_empty()),
                c: None,
                count,
                bytes,
            })
            .collect();
        let (shown, all) = site_lines(&list, "object(s)", "run with --call-stack python:N");
        ReportSection::bounded(title, shown, all)
    }

    /// The two sections: peak, then live at exit.
    pub fn report(&mut self, pid: Option<u32>) -> Vec<ReportSection> {
        self.note_local_max();
        let pid = pid.map(|p| format!(" (pid {p})")).unwrap_or_default();
        let peak = self.section(
            &self.at_peak,
            format!(
                "{} peak{pid}: {} bytes in {} {}, by where they were allocated at the peak",
                self.what.event_type, self.peak_bytes, self.peak_objects, self.what.counted
            ),
        );
        let (n, b) = self
            .by_stack
            .values()
            .fold((0, 0), |a, g| (a.0 + g.0, a.1 + g.1));
        let live = self.section(
            &self.by_stack,
            format!(
                "{} {} live at exit{pid}: {n} object(s), {b} bytes ({} freed before)",
                self.what.event_type, self.what.objects, self.frees
            ),
        );
        vec![peak, live]
    }
}

impl Layer for AccountObjects {
    fn name(&self) -> &'static str {
        "account-objects"
    }

    fn on_event(&mut self, ev: Event, _ctx: &BusCtx, out: &mut Vec<Event>) -> Result<(), BusError> {
        // blocks from before a collection window are written, not summarised (msMemScope)
        if ev.event_type == self.ty && !ev.is_history_malloc() {
            if let Some(m) = ev.memory() {
                match ev.kind {
                    EventKind::Malloc => {
                        let s = self.stack_index(ev.py_stack.as_deref());
                        if let Some((old, os)) = self.live.insert(m.allocation_id, (m.size, s)) {
                            self.live_bytes -= old;
                            let g = self.by_stack.entry(os).or_default();
                            g.0 -= 1;
                            g.1 -= old;
                        }
                        let g = self.by_stack.entry(s).or_default();
                        g.0 += 1;
                        g.1 += m.size;
                        self.live_bytes += m.size;
                        if self.live_bytes > self.peak_bytes {
                            self.peak_bytes = self.live_bytes;
                            self.peak_objects = self.live.len() as u64;
                            self.rising = true;
                        }
                    }
                    EventKind::Free => {
                        if let Some((size, s)) = self.live.remove(&m.allocation_id) {
                            self.note_local_max();
                            self.frees += 1;
                            self.live_bytes -= size;
                            if let Some(g) = self.by_stack.get_mut(&s) {
                                g.0 -= 1;
                                g.1 -= size;
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
        out.push(ev);
        Ok(())
    }

    fn finish(
        &mut self,
        ctx: &BusCtx,
        _out: &mut Vec<Event>,
        report: &mut Vec<ReportSection>,
    ) -> Result<(), BusError> {
        report.extend(self.report(ctx.pid));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memscope_core::event::{Attrs, Device, MemoryAttrs};

    /// A summary as an adapter's descriptor declares it (the CLI's test checks the real ones).
    const OBJECTS: AccountSummary = AccountSummary {
        event_type: "OBJ",
        object: "object",
        objects: "objects",
        counted: "object(s)",
    };

    fn ev(kind: EventKind, id: u64, size: u64, stack: Option<&str>) -> Event {
        let mut e = Event::new(EventType::custom(OBJECTS.event_type), 1, 1, 1);
        e.kind = kind;
        e.device = Device::Cpu;
        e.attrs = Attrs::Memory(MemoryAttrs {
            allocation_id: id,
            size,
            ..MemoryAttrs::default()
        });
        e.py_stack = stack.map(str::to_owned);
        e
    }

    #[test]
    fn python_objects_are_grouped_by_python_stack_live_at_exit_and_at_the_peak() {
        let mut l = AccountObjects::new(OBJECTS);
        let ctx = BusCtx::default();
        let mut out = Vec::new();
        for (k, id, size, st) in [
            (EventKind::Malloc, 1, 100, Some("a.py(3): keep\n")),
            (EventKind::Malloc, 2, 100, Some("a.py(3): keep\n")),
            (EventKind::Malloc, 3, 1000, Some("a.py(9): temp\n")),
            (EventKind::Free, 3, 0, None),
            (EventKind::Malloc, 4, 10, Some("a.py(3): keep\n")),
        ] {
            l.on_event(ev(k, id, size, st), &ctx, &mut out).unwrap();
        }
        assert_eq!(out.len(), 5, "events pass through");
        let r = l.report(Some(7));
        assert_eq!(
            r[0].title,
            "OBJ peak (pid 7): 1200 bytes in 3 object(s), by where they were allocated at the peak"
        );
        assert_eq!(
            r[0].lines[0],
            "1 object(s), 1000 bytes at a.py(9): temp [first frame in your code, Python stack]"
        );
        assert_eq!(
            r[1].title,
            "OBJ objects live at exit (pid 7): 3 object(s), 210 bytes (1 freed before)"
        );
        assert_eq!(
            r[1].lines[0],
            "3 object(s), 210 bytes at a.py(3): keep [first frame in your code, Python stack]"
        );
    }
}
