//! The HOST leak summary: blocks of the libc allocator still live when the process ended,
//! summed up by where they were allocated (the first frame of the user's code in their Python
//! or C stack, `memscope_analysis::sites`), largest first — a bus layer whose report section the
//! CLI prints and logs. Mapped memory (`HOST_MMAP`, with `MEMSCOPE_HOST_MMAP=1`) gets a section of
//! its own, so heap and mapped bytes are never added up. It runs for killed processes too (the
//! collector finishes every process whose stream ended, however it ended).
#![forbid(unsafe_code)]

use memscope_analysis::sites::{site_lines, StackGroup};
use memscope_collect::config::RunConfig;
pub use memscope_collect::live_account::Peak;
use memscope_collect::live_account::{Block, LiveAccount};
use memscope_core::bus::{BusCtx, BusError, Flow, Layer, ReportSection};
use memscope_core::event::{Device, Event, EventKind, EventType};
use std::collections::HashMap;

/// What the report says of blocks recorded without any call stack.
const NO_STACK: &str = "run with --call-stack c:N or python:N";
/// Why a block has no stack when the run asked for stacks (not a matter of options, issue 35).
const NO_STACK_RECORDED: &str =
    "none was recorded for these blocks: made before the stack service started, or with no Python frame running";

/// The leak layer when the HOST adapter is selected.
pub fn leak_layer(cfg: &RunConfig) -> Option<Box<dyn Layer>> {
    cfg.has_source(crate::SOURCE)
        .then(|| Box::new(HostLeaks::new(stacks_requested(cfg))) as Box<dyn Layer>)
}

/// Whether the run asked for call stacks (`--call-stack c:N` or `python:N`): a block without
/// one is then not a matter of options.
pub fn stacks_requested(cfg: &RunConfig) -> bool {
    cfg.call_stack.c.is_some_and(|d| d > 0) || cfg.call_stack.python.is_some_and(|d| d > 0)
}

/// Tracks live HOST heap blocks in its live account ([`LiveAccount`]: the one map of each
/// block, peak and per-group totals; the fast path, [`crate::fast`], keeps its blocks there by
/// address, events by allocation id, see [`EVENT_KEY`]) and mappings by allocation id, with an
/// interned pair of stack texts (Python, C) per group.
#[derive(Default)]
pub struct HostLeaks {
    /// Heap blocks, tagged with the capture's reference to their allocation (fast path).
    heap: LiveAccount<u64>,
    maps: crate::addr_hash::AddrMap<(u64, u32)>,
    saw_maps: bool,
    /// Group by C stack text, then Python stack text (looked up without copying either).
    stack_ids: HashMap<String, HashMap<String, u32>>,
    stacks: Vec<(String, String)>,
    /// Index of the empty stack (events without a call stack), once seen.
    no_stack: Option<u32>,
    /// The run asked for C stacks: a block without one is not a matter of options.
    c_stacks: bool,
    /// Over a dump (`memscope analyze leaks`): whether stacks were asked for is read from the
    /// rows (any block with one), and a dump without HOST blocks gets no section.
    offline: bool,
    /// A HOST block or mapping was seen.
    seen: bool,
}

/// Key bit of blocks accounted from events (by allocation id); blocks of the fast path are
/// keyed by address (user-space addresses never have it).
pub(crate) const EVENT_KEY: u64 = 1 << 63;

/// The table a row belongs to: heap blocks (`false`) or mappings (`true`).
fn host_table(ev: &Event) -> Option<bool> {
    if ev.device != Device::Cpu {
        return None;
    }
    match ev.event_type {
        EventType::Host if ev.memory().is_some_and(|m| !m.pinned) => Some(false),
        EventType::HostMmap => Some(true),
        _ => None,
    }
}

/// Whether the leak summary tracks `ev` (a host-memory block that is not pinned, or a
/// `HOST_MMAP` mapping).
pub fn is_host_block(ev: &Event) -> bool {
    host_table(ev).is_some()
}

impl HostLeaks {
    /// An empty summary; `c_stacks`: the run asked for C call stacks (`--call-stack c:N`),
    /// which decides what a group without a stack says.
    pub fn new(c_stacks: bool) -> HostLeaks {
        HostLeaks {
            c_stacks,
            ..HostLeaks::default()
        }
    }

    /// An empty summary for `memscope analyze leaks` over a dump: whether the run asked for
    /// stacks is read from the rows, and it reports nothing when no HOST block was seen.
    pub fn offline() -> HostLeaks {
        HostLeaks {
            offline: true,
            ..HostLeaks::default()
        }
    }

    /// The peak so far (mappings are not counted).
    pub fn peak(&self) -> Peak {
        self.heap.peak()
    }

    /// The heap's live account (the fast path keeps its blocks there by address).
    pub(crate) fn heap(&mut self) -> &mut LiveAccount<u64> {
        &mut self.heap
    }

    /// The peak report section: the peak, and what was live at it by where it was
    /// allocated.
    pub fn peak_report(&self, pid: Option<u32>) -> ReportSection {
        let pid = pid.map(|p| format!(" (pid {p})")).unwrap_or_default();
        let p = self.heap.peak();
        let title = format!("HOST peak{pid}: {} bytes in {} block(s)", p.bytes, p.blocks);
        if p.bytes == 0 {
            return ReportSection::new(title, Vec::new());
        }
        let first = format!(
            "reached at event ID {} (timestamp {} ns); live at the peak:",
            p.id, p.ts_ns
        );
        let groups = self.heap.groups_at_peak();
        let (mut shown, mut all) = self.site_lines(
            groups.iter().enumerate().map(|(s, g)| (s as u32, *g)),
            "block(s)",
        );
        shown.insert(0, first.clone());
        all.insert(0, first);
        ReportSection::bounded(title, shown, all)
    }

    /// The group index of the stacks `py` and `c` (`None`: not recorded).
    pub(crate) fn stack_index(&mut self, py: Option<&str>, c: Option<&str>) -> u32 {
        let py = py.filter(|t| *t != "NA");
        if py.is_none() && c.is_none() {
            if let Some(i) = self.no_stack {
                return i;
            }
        }
        let (py, c) = (py.unwrap_or(""), c.unwrap_or(""));
        if let Some(&i) = self.stack_ids.get(c).and_then(|m| m.get(py)) {
            return i;
        }
        let i = self.stacks.len() as u32;
        if py.is_empty() && c.is_empty() {
            self.no_stack = Some(i);
        }
        self.stacks.push((py.to_owned(), c.to_owned()));
        self.stack_ids
            .entry(c.to_owned())
            .or_default()
            .insert(py.to_owned(), i);
        self.heap.ensure_group(i);
        i
    }

    /// Accounts one event (a host block's or mapping's MALLOC or FREE; others are ignored).
    pub fn observe(&mut self, ev: &Event) {
        let (Some(mapped), Some(m)) = (host_table(ev), ev.memory()) else {
            return;
        };
        if ev.is_history_malloc() {
            // a block from before the collection window: not summarised (msMemScope)
            return;
        }
        self.saw_maps |= mapped;
        self.seen = true;
        match ev.kind {
            EventKind::Malloc => {
                let s = self.stack_index(ev.py_stack.as_deref(), ev.c_stack.as_deref());
                if mapped {
                    self.maps.insert(m.allocation_id, (m.size, s));
                } else {
                    let b = Block {
                        size: m.size,
                        group: s,
                        id: m.allocation_id,
                    };
                    self.heap
                        .alloc(EVENT_KEY | m.allocation_id, b, ev.id, ev.ts_ns);
                }
            }
            EventKind::Free => {
                if mapped {
                    self.maps.remove(&m.allocation_id);
                } else {
                    self.heap.free(EVENT_KEY | m.allocation_id);
                }
            }
            _ => {}
        }
    }

    /// The heap report: what is live in the account, by site.
    pub fn report(&self, pid: Option<u32>) -> ReportSection {
        let groups = self.heap.groups_now().iter().copied().enumerate();
        self.section(
            groups.map(|(g, t)| (g as u32, t)),
            "HOST memory live at exit",
            "block(s)",
            pid,
        )
    }

    /// The mapped-memory report, when any mapping was seen.
    pub fn maps_report(&self, pid: Option<u32>) -> Option<ReportSection> {
        self.saw_maps.then(|| {
            let mut groups: HashMap<u32, (u64, u64)> = HashMap::new();
            for &(size, s) in self.maps.values() {
                let g = groups.entry(s).or_default();
                g.0 += 1;
                g.1 += size;
            }
            self.section(
                groups.into_iter(),
                "HOST_MMAP memory mapped at exit",
                "mapping(s)",
                pid,
            )
        })
    }

    /// A section over (stack group, (blocks, bytes)) totals.
    fn section(
        &self,
        groups: impl Iterator<Item = (u32, (u64, u64))>,
        what: &str,
        unit: &str,
        pid: Option<u32>,
    ) -> ReportSection {
        let groups: Vec<_> = groups.collect();
        let (blocks, bytes) = groups
            .iter()
            .fold((0, 0), |a, (_, g)| (a.0 + g.0, a.1 + g.1));
        let (shown, all) = self.site_lines(groups.into_iter(), unit);
        let pid = pid.map(|p| format!(" (pid {p})")).unwrap_or_default();
        ReportSection::bounded(
            format!("{what}{pid}: {blocks} {unit}, {bytes} bytes"),
            shown,
            all,
        )
    }

    /// Console and full lines of (stack group, (blocks, bytes)) summed up by site.
    fn site_lines(
        &self,
        groups: impl Iterator<Item = (u32, (u64, u64))>,
        unit: &str,
    ) -> (Vec<String>, Vec<String>) {
        let list: Vec<StackGroup> = groups
            .filter(|(_, (n, _))| *n > 0)
            .map(|(s, (n, b))| {
                let (py, c) = &self.stacks[s as usize];
                StackGroup {
                    py: non_empty(py),
                    c: non_empty(c),
                    count: n,
                    bytes: b,
                }
            })
            .collect();
        let asked = self.c_stacks
            || (self.offline
                && self
                    .stacks
                    .iter()
                    .any(|(py, c)| !py.is_empty() || !c.is_empty()));
        let no_stack = if asked { NO_STACK_RECORDED } else { NO_STACK };
        site_lines(&list, unit, no_stack)
    }
}

fn non_empty(s: &str) -> Option<&str> {
    (!s.is_empty()).then_some(s)
}

impl Layer for HostLeaks {
    fn name(&self) -> &'static str {
        "host-leaks"
    }

    fn on_event(
        &mut self,
        ev: &mut Event,
        _ctx: &BusCtx,
        _: &mut Vec<Event>,
    ) -> Result<Flow, BusError> {
        self.observe(ev);
        Ok(Flow::Pass)
    }

    fn finish(
        &mut self,
        ctx: &BusCtx,
        _out: &mut Vec<Event>,
        report: &mut Vec<ReportSection>,
    ) -> Result<(), BusError> {
        if self.offline && !self.seen {
            return Ok(());
        }
        report.push(self.peak_report(ctx.pid));
        report.push(self.report(ctx.pid));
        report.extend(self.maps_report(ctx.pid));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memscope_core::event::{Attrs, MemoryAttrs};

    fn ev(kind: EventKind, id: u64, size: u64, stack: Option<&str>) -> Event {
        let mut e = Event::new(EventType::Host, 1, 1, 1);
        e.kind = kind;
        e.device = Device::Cpu;
        e.attrs = Attrs::Memory(MemoryAttrs {
            allocation_id: id,
            size,
            ..MemoryAttrs::default()
        });
        e.c_stack = stack.map(str::to_owned);
        e
    }

    #[test]
    fn a_block_without_a_stack_suggests_the_option_only_when_it_was_not_given() {
        let ctx = BusCtx::default();
        for (asked, line) in [
            (
                false,
                "1 block(s), 64 bytes with no call stack (run with --call-stack c:N or python:N)",
            ),
            (
                true,
                "1 block(s), 64 bytes with no call stack (none was recorded for these blocks: made before the stack service started, or with no Python frame running)",
            ),
        ] {
            let mut l = HostLeaks::new(asked);
            let mut out = Vec::new();
            l.feed(ev(EventKind::Malloc, 1, 64, None), &ctx, &mut out)
                .unwrap();
            let r = l.report(None);
            assert_eq!(r.lines, [line]);
        }
    }

    #[test]
    fn over_a_dump_the_summary_reads_from_the_rows_whether_stacks_were_asked_for() {
        let ctx = BusCtx::default();
        let finish = |l: &mut HostLeaks| {
            let mut report = Vec::new();
            l.finish(&ctx, &mut Vec::new(), &mut report).unwrap();
            report
        };
        // no HOST block in the dump: no section
        assert!(finish(&mut HostLeaks::offline()).is_empty());
        let mut out = Vec::new();
        let mut none = HostLeaks::offline();
        none.feed(ev(EventKind::Malloc, 1, 64, None), &ctx, &mut out)
            .unwrap();
        let r = finish(&mut none);
        assert_eq!(r.len(), 2, "peak and live at exit");
        assert!(r[1].lines[0].ends_with("(run with --call-stack c:N or python:N)"));
        let mut some = HostLeaks::offline();
        some.feed(ev(EventKind::Malloc, 1, 64, None), &ctx, &mut out)
            .unwrap();
        some.feed(
            ev(EventKind::Malloc, 2, 8, Some("a\nmain\n")),
            &ctx,
            &mut out,
        )
        .unwrap();
        let r = finish(&mut some);
        assert!(
            r[1].lines
                .iter()
                .any(|l| l.contains("none was recorded for these blocks")),
            "{:?}",
            r[1].lines
        );
    }

    #[test]
    fn groups_live_blocks_by_stack_largest_first() {
        let mut l = HostLeaks::default();
        let ctx = BusCtx::default();
        let mut out = Vec::new();
        for (k, id, size, st) in [
            (EventKind::Malloc, 1, 100, Some("a\nmain\n")),
            (EventKind::Malloc, 2, 100, Some("a\nmain\n")),
            (EventKind::Malloc, 3, 1000, Some("b\nmain\n")),
            (EventKind::Malloc, 4, 5, Some("c\n")),
            (EventKind::Free, 4, 5, None),
        ] {
            l.feed(ev(k, id, size, st), &ctx, &mut out).unwrap();
        }
        assert_eq!(out.len(), 5, "events pass through");
        let r = l.report(Some(9));
        assert_eq!(
            r.title,
            "HOST memory live at exit (pid 9): 3 block(s), 1200 bytes"
        );
        assert_eq!(
            r.lines,
            [
                "1 block(s), 1000 bytes at b ← main [first frame in your code, C stack]",
                "2 block(s), 200 bytes at a ← main [first frame in your code, C stack]"
            ]
        );
        assert_eq!(
            l.peak(),
            Peak {
                bytes: 1205,
                blocks: 4,
                id: 0,
                ts_ns: 1
            }
        );
        assert_eq!(
            l.peak_report(Some(9)).title,
            "HOST peak (pid 9): 1205 bytes in 4 block(s)"
        );
    }

    #[test]
    fn live_blocks_are_named_by_the_python_line_over_interpreter_c_frames() {
        let mut l = HostLeaks::default();
        let ctx = BusCtx::default();
        let mut out = Vec::new();
        let c = "_PyObject_Malloc at Objects/obmalloc.c:1998\nbytearray___init__ at Objects/bytearrayobject.c:821\n";
        for id in 1..=3 {
            let mut e = ev(EventKind::Malloc, id, 1 << 20, Some(c));
            e.py_stack = Some("/job/keep.py(4): grow\n/job/keep.py(8): <module>\n".into());
            l.feed(e, &ctx, &mut out).unwrap();
        }
        l.feed(ev(EventKind::Malloc, 9, 7, None), &ctx, &mut out)
            .unwrap();
        let r = l.report(None);
        assert_eq!(
            r.lines[0],
            "3 block(s), 3145728 bytes at /job/keep.py(4): grow ← keep.py(8): <module> [first frame in your code, Python stack]"
        );
        assert_eq!(
            r.lines[1],
            "1 block(s), 7 bytes with no call stack (run with --call-stack c:N or python:N)"
        );
        // the log gets the full stacks
        assert!(r.all_lines().iter().any(|l| l.contains("_PyObject_Malloc")));
    }

    #[test]
    fn mapped_memory_has_its_own_section_and_never_adds_to_the_heap() {
        let mut l = HostLeaks::default();
        let ctx = BusCtx::default();
        let mut out = Vec::new();
        assert!(l.maps_report(None).is_none(), "no mapping seen: no section");
        let mut map = ev(EventKind::Malloc, 2, 4096, None);
        map.event_type = EventType::HostMmap;
        for e in [ev(EventKind::Malloc, 1, 100, Some("a\n")), map] {
            l.feed(e, &ctx, &mut out).unwrap();
        }
        assert_eq!(
            l.report(Some(9)).title,
            "HOST memory live at exit (pid 9): 1 block(s), 100 bytes"
        );
        assert_eq!(
            l.maps_report(Some(9)).unwrap().title,
            "HOST_MMAP memory mapped at exit (pid 9): 1 mapping(s), 4096 bytes"
        );
    }
}
