//! The HOST leak summary: blocks of the libc allocator still live when the process ended,
//! grouped by allocation stack, largest first — a bus layer whose report section the CLI
//! prints and logs. Mapped memory (`HOST_MMAP`, with `MEMSCOPE_HOST_MMAP=1`) gets a section of
//! its own, so heap and mapped bytes are never added up. It runs for killed processes too (the
//! collector finishes every process whose stream ended, however it ended).
#![forbid(unsafe_code)]

use memscope_core::adapter::AdapterId;
use memscope_core::bus::{BusCtx, BusError, Layer, ReportSection};
use memscope_core::config::RunConfig;
use memscope_core::event::{Device, Event, EventKind, EventType};
use std::collections::HashMap;

/// Stack groups listed in the report.
pub const MAX_GROUPS: usize = 10;
/// Frames shown per group.
pub const MAX_FRAMES: usize = 6;

/// The leak layer when the HOST adapter is selected.
pub fn leak_layer(cfg: &RunConfig) -> Option<Box<dyn Layer>> {
    cfg.has_adapter(AdapterId::Host)
        .then(|| Box::new(HostLeaks::new(c_stacks_requested(cfg))) as Box<dyn Layer>)
}

/// Whether the run asked for C call stacks (`--call-stack c:N`).
pub fn c_stacks_requested(cfg: &RunConfig) -> bool {
    cfg.call_stack.c.is_some_and(|d| d > 0)
}

/// Tracks live HOST blocks and mappings by allocation id, with an interned stack text.
#[derive(Default)]
pub struct HostLeaks {
    live: crate::addr_hash::AddrMap<(u64, u32)>,
    maps: crate::addr_hash::AddrMap<(u64, u32)>,
    saw_maps: bool,
    stack_ids: HashMap<String, u32>,
    stacks: Vec<String>,
    live_bytes: u64,
    peak: Peak,
    /// Index of the empty stack (events without a call stack), once seen.
    no_stack: Option<u32>,
    /// Live heap blocks accounted outside `live` (the HOST fast path, [`crate::fast`]).
    other_blocks: u64,
    /// The run asked for C stacks: a block without one is not a matter of options.
    c_stacks: bool,
}

/// The highest number of live HOST heap bytes the process reached (mappings are not counted).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Peak {
    /// Live bytes at the peak.
    pub bytes: u64,
    /// Live blocks at the peak.
    pub blocks: u64,
    /// ID of the event that reached it.
    pub id: u64,
    /// Its time stamp, ns since the epoch.
    pub ts_ns: u64,
}

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

    /// The peak so far.
    pub fn peak(&self) -> Peak {
        self.peak
    }

    /// The peak report section.
    pub fn peak_report(&self, pid: Option<u32>) -> ReportSection {
        let pid = pid.map(|p| format!(" (pid {p})")).unwrap_or_default();
        let p = self.peak;
        ReportSection {
            title: format!("HOST peak{pid}: {} bytes in {} block(s)", p.bytes, p.blocks),
            lines: if p.bytes == 0 {
                Vec::new()
            } else {
                vec![format!(
                    "reached at event ID {} (timestamp {} ns)",
                    p.id, p.ts_ns
                )]
            },
        }
    }

    /// The group index of stack text `text` (`None`: no call stack).
    pub(crate) fn stack_index(&mut self, text: Option<&str>) -> u32 {
        if text.is_none() {
            if let Some(i) = self.no_stack {
                return i;
            }
        }
        let t = text.unwrap_or("");
        if let Some(&i) = self.stack_ids.get(t) {
            return i;
        }
        let i = self.stacks.len() as u32;
        self.stacks.push(t.to_owned());
        self.stack_ids.insert(t.to_owned(), i);
        if t.is_empty() {
            self.no_stack = Some(i);
        }
        i
    }

    /// A heap block of `size` bytes accounted outside this layer's map became live as event
    /// `id` stamped `ts_ns` (the HOST fast path): moves the live figures and the peak.
    pub(crate) fn other_alloc(&mut self, size: u64, id: u64, ts_ns: u64) {
        self.other_blocks += 1;
        self.grow(size, id, ts_ns);
    }

    /// A heap block accounted outside this layer's map was freed.
    pub(crate) fn other_free(&mut self, size: u64) {
        self.other_blocks -= 1;
        self.live_bytes -= size;
    }

    fn grow(&mut self, size: u64, id: u64, ts_ns: u64) {
        self.live_bytes += size;
        if self.live_bytes > self.peak.bytes {
            self.peak = Peak {
                bytes: self.live_bytes,
                blocks: self.live.len() as u64 + self.other_blocks,
                id,
                ts_ns,
            };
        }
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
        match ev.kind {
            EventKind::Malloc => {
                let s = self.stack_index(ev.c_stack.as_deref());
                if mapped {
                    self.maps.insert(m.allocation_id, (m.size, s));
                } else {
                    if let Some((old, _)) = self.live.insert(m.allocation_id, (m.size, s)) {
                        self.live_bytes -= old;
                    }
                    self.grow(m.size, ev.id, ev.ts_ns);
                }
            }
            EventKind::Free => {
                if mapped {
                    self.maps.remove(&m.allocation_id);
                } else if let Some((size, _)) = self.live.remove(&m.allocation_id) {
                    self.live_bytes -= size;
                }
            }
            _ => {}
        }
    }

    /// The heap report (also used by tests).
    pub fn report(&self, pid: Option<u32>) -> ReportSection {
        self.report_with(pid, std::iter::empty())
    }

    /// The heap report over this layer's blocks and `other` (size, stack group) blocks.
    pub(crate) fn report_with(
        &self,
        pid: Option<u32>,
        other: impl Iterator<Item = (u64, u32)>,
    ) -> ReportSection {
        let all = self.live.values().copied().chain(other);
        self.section(all, "HOST memory live at exit", "block(s)", pid)
    }

    /// The mapped-memory report, when any mapping was seen.
    pub fn maps_report(&self, pid: Option<u32>) -> Option<ReportSection> {
        self.saw_maps.then(|| {
            self.section(
                self.maps.values().copied(),
                "HOST_MMAP memory mapped at exit",
                "mapping(s)",
                pid,
            )
        })
    }

    fn section(
        &self,
        live: impl Iterator<Item = (u64, u32)>,
        what: &str,
        unit: &str,
        pid: Option<u32>,
    ) -> ReportSection {
        let mut groups: HashMap<u32, (u64, u64)> = HashMap::new();
        for (size, s) in live {
            let g = groups.entry(s).or_default();
            g.0 += 1;
            g.1 += size;
        }
        let (blocks, bytes) = groups.values().fold((0, 0), |a, g| (a.0 + g.0, a.1 + g.1));
        let mut v: Vec<(u32, u64, u64)> = groups.into_iter().map(|(s, (n, b))| (s, n, b)).collect();
        v.sort_by(|a, b| b.2.cmp(&a.2).then(b.1.cmp(&a.1)).then(a.0.cmp(&b.0)));
        let pid = pid.map(|p| format!(" (pid {p})")).unwrap_or_default();
        let mut lines = Vec::new();
        for (s, n, b) in v.iter().take(MAX_GROUPS) {
            lines.push(format!("{n} {unit}, {b} bytes, allocated at:"));
            let text = &self.stacks[*s as usize];
            if text.is_empty() {
                lines.push(if self.c_stacks {
                    "    (no call stack was recorded for these blocks)".to_owned()
                } else {
                    "    (no call stack: run with --call-stack c:N)".to_owned()
                });
            }
            let frames: Vec<&str> = text.lines().collect();
            for f in frames.iter().take(MAX_FRAMES) {
                lines.push(format!("    {f}"));
            }
            if frames.len() > MAX_FRAMES {
                lines.push(format!("    … {} more frame(s)", frames.len() - MAX_FRAMES));
            }
        }
        if v.len() > MAX_GROUPS {
            let rest = &v[MAX_GROUPS..];
            let (n, b) = rest.iter().fold((0, 0), |a, g| (a.0 + g.1, a.1 + g.2));
            lines.push(format!(
                "… {} more stack(s): {n} {unit}, {b} bytes",
                rest.len()
            ));
        }
        ReportSection {
            title: format!("{what}{pid}: {blocks} {unit}, {bytes} bytes"),
            lines,
        }
    }
}

impl Layer for HostLeaks {
    fn name(&self) -> &'static str {
        "host-leaks"
    }

    fn on_event(&mut self, ev: Event, _ctx: &BusCtx, out: &mut Vec<Event>) -> Result<(), BusError> {
        self.observe(&ev);
        out.push(ev);
        Ok(())
    }

    fn finish(
        &mut self,
        ctx: &BusCtx,
        _out: &mut Vec<Event>,
        report: &mut Vec<ReportSection>,
    ) -> Result<(), BusError> {
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
            (false, "    (no call stack: run with --call-stack c:N)"),
            (true, "    (no call stack was recorded for these blocks)"),
        ] {
            let mut l = HostLeaks::new(asked);
            let mut out = Vec::new();
            l.on_event(ev(EventKind::Malloc, 1, 64, None), &ctx, &mut out)
                .unwrap();
            let r = l.report(None);
            assert_eq!(r.lines, ["1 block(s), 64 bytes, allocated at:", line]);
        }
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
            l.on_event(ev(k, id, size, st), &ctx, &mut out).unwrap();
        }
        assert_eq!(out.len(), 5, "events pass through");
        let r = l.report(Some(9));
        assert_eq!(
            r.title,
            "HOST memory live at exit (pid 9): 3 block(s), 1200 bytes"
        );
        assert_eq!(r.lines[0], "1 block(s), 1000 bytes, allocated at:");
        assert_eq!(r.lines[1], "    b");
        assert_eq!(r.lines[3], "2 block(s), 200 bytes, allocated at:");
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
    fn mapped_memory_has_its_own_section_and_never_adds_to_the_heap() {
        let mut l = HostLeaks::default();
        let ctx = BusCtx::default();
        let mut out = Vec::new();
        assert!(l.maps_report(None).is_none(), "no mapping seen: no section");
        let mut map = ev(EventKind::Malloc, 2, 4096, None);
        map.event_type = EventType::HostMmap;
        for e in [ev(EventKind::Malloc, 1, 100, Some("a\n")), map] {
            l.on_event(e, &ctx, &mut out).unwrap();
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
