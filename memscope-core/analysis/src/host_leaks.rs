//! msMemScope's leak rule for host memory (issue 35): a HOST, Python-object (PYMEM) or other
//! host block allocated in step *a* ≥ 2 that is still live when a later step ends and at the
//! end of the run is a leak — the framework-pool rule of [`super::leaks`], so `--fail-on
//! leaks` means one thing for pools and for host memory. A process without an ended step is
//! not judged. Backing memory (`*_ARENA`: the arenas Python objects live in) is not judged,
//! as HAL memory under pools is not. Python objects the interpreter frees while it finalises
//! are not recorded by the PYMEM adapter, so they stay live here: a leak the interpreter's
//! shutdown frees is still a leak.
//!
//! Memory: one 16-byte entry per live block (the step and an interned site for blocks of step
//! ≥ 2, as the pool rule keeps stacks only for those).

use std::collections::HashMap;

use memscope_core::event::{Device, Event, EventKind, EventType};

/// Leaked bytes, blocks and per-site bytes and blocks of one host allocator.
pub type HostLeaked = (u64, u64, HashMap<String, (u64, u64)>);

#[derive(Clone, Copy)]
struct Block {
    size: u64,
    step: u32,
    site: u32,
}

/// The live host blocks of one process with the step each was allocated in.
#[derive(Default)]
pub struct HostLeaks {
    live: HashMap<(EventType, u64), Block>,
    sites: Vec<String>,
    site_ids: HashMap<String, u32>,
}

/// Whether the rule judges blocks of `t` on `device`: host memory that is not a framework
/// pool's (those follow the pool rule) nor backing memory.
pub fn judged(device: Device, t: EventType) -> bool {
    device == Device::Cpu
        && !t.is_framework_pool()
        && t != EventType::Hal
        && !t.as_str().ends_with("_ARENA")
}

impl HostLeaks {
    /// Follows one event (`step`: the step it happened in); `site` names where a candidate
    /// block was allocated (called only for blocks of step ≥ 2).
    pub fn observe(&mut self, ev: &Event, step: u32, site: impl FnOnce(&Event) -> String) {
        if !judged(ev.device, ev.event_type) || ev.is_history_malloc() {
            return;
        }
        let Some(m) = ev.memory() else { return };
        let addr = if m.addr != 0 {
            m.addr
        } else {
            ev.ptr.unwrap_or(0)
        };
        match ev.kind {
            EventKind::Malloc => {
                let site = if step >= 2 { self.intern(site(ev)) } else { 0 };
                self.live.insert(
                    (ev.event_type, addr),
                    Block {
                        size: m.size,
                        step,
                        site,
                    },
                );
            }
            EventKind::Free if !m.shadow => {
                self.live.remove(&(ev.event_type, addr));
            }
            _ => {}
        }
    }

    fn intern(&mut self, s: String) -> u32 {
        if let Some(&i) = self.site_ids.get(&s) {
            return i;
        }
        let i = self.sites.len() as u32;
        self.sites.push(s.clone());
        self.site_ids.insert(s, i);
        i
    }

    /// The leaks by Event Type once `steps_ended` steps have ended (none judged without one).
    pub fn leaked(&self, steps_ended: u32) -> Option<HashMap<EventType, HostLeaked>> {
        if steps_ended == 0 {
            return None;
        }
        let mut out: HashMap<EventType, HostLeaked> = HashMap::new();
        for ((t, _), b) in &self.live {
            if b.step < 2 || b.step >= steps_ended {
                continue;
            }
            let e = out.entry(*t).or_default();
            e.0 += b.size;
            e.1 += 1;
            let s = e.2.entry(self.sites[b.site as usize].clone()).or_default();
            s.0 += b.size;
            s.1 += 1;
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memscope_core::event::{Attrs, MemoryAttrs};

    fn host(t: EventType, kind: EventKind, addr: u64, size: u64) -> Event {
        let mut e = Event::new(t, 1, 1, 1);
        e.kind = kind;
        e.device = Device::Cpu;
        e.ptr = Some(addr);
        e.attrs = Attrs::Memory(MemoryAttrs {
            addr,
            size,
            ..MemoryAttrs::default()
        });
        e
    }

    #[test]
    fn host_blocks_of_step_2_on_live_after_a_later_step_and_at_the_end_are_leaks() {
        let mut h = HostLeaks::default();
        let site = |_: &Event| "x.py(6): load ← x.py(9): step".to_owned();
        // step 1: not judged; step 2: kept (leak); step 3: freed; step 4: the last, not judged
        h.observe(
            &host(EventType::Host, EventKind::Malloc, 0x10, 100),
            1,
            site,
        );
        h.observe(
            &host(EventType::Host, EventKind::Malloc, 0x20, 200),
            2,
            site,
        );
        h.observe(
            &host(EventType::Host, EventKind::Malloc, 0x30, 300),
            3,
            site,
        );
        h.observe(&host(EventType::Host, EventKind::Free, 0x30, 300), 3, site);
        h.observe(
            &host(EventType::Host, EventKind::Malloc, 0x40, 400),
            4,
            site,
        );
        assert!(h.leaked(0).is_none(), "no step ended: not judged");
        let l = h.leaked(4).unwrap();
        let host = &l[&EventType::Host];
        assert_eq!((host.0, host.1), (200, 1));
        assert_eq!(host.2["x.py(6): load ← x.py(9): step"], (200, 1));
        // arenas (backing memory) and NPU blocks are not this rule's
        let arena = EventType::custom("PYMEM_ARENA");
        assert!(!judged(Device::Cpu, arena));
        assert!(!judged(Device::Npu(0), EventType::Host));
        assert!(judged(Device::Cpu, EventType::custom("PYMEM")));
    }
}
