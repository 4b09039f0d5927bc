//! Memory levels over time: per device and allocator, the bytes allocated (and, for framework
//! pools, reserved) after each MALLOC/FREE row. Shared by the per-step figures
//! ([`super::step_stats`]) and the memory-over-time plots of `memscope report`.
//!
//! * Framework pools (PTA, PTA_WORKSPACE, MindSpore, ATB): allocated is the row's `used` value
//!   (what the pool reports, as the gap analysis reads it) and reserved its `total`; a pool row
//!   without `used` falls back to the running sum of its block sizes.
//! * HAL and HOST: the running sum of block sizes (MALLOC adds, FREE subtracts the size it
//!   carries), as decompose counts them. Pinned host memory (`pinned:true`) is a level of its
//!   own, apart from the libc allocator's HOST blocks.
//! * A synthetic FREE marked `shadow:true` (msMemScope closes live blocks at exit with one) does
//!   not lower a level: it says the block was live at exit.
//! * Rows without a device (`N/A`, 2025 HAL FREEs) count on the device of the last MALLOC of the
//!   same allocator at that address when known, else they are ignored.

use std::collections::{BTreeMap, HashMap};

use memscope_core::event::{Device, Event, EventKind, EventType};

/// Which level: device, allocator (Event Type) and, for HOST, pinned or not.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LevelKey {
    /// Device of the rows.
    pub device: Device,
    /// Allocator.
    pub pool: EventType,
    /// Pinned host memory registered with the runtime (HOST rows with `pinned:true`).
    pub pinned: bool,
}

impl LevelKey {
    /// A short label: `PTA`, `HAL`, `HOST`, `HOST pinned`, or a plugin's type name.
    pub fn label(&self) -> String {
        if self.pinned {
            format!("{} pinned", self.pool.as_str())
        } else {
            self.pool.as_str().to_owned()
        }
    }
}

/// One level after an event, bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Level {
    /// Bytes allocated (handed out by the pool, live in the allocator).
    pub allocated: i64,
    /// Bytes reserved by the pool (`total`), framework pools only.
    pub reserved: Option<i64>,
}

/// Follows every level of one process.
#[derive(Default)]
pub struct MemoryLevels {
    levels: BTreeMap<LevelKey, Level>,
    running: HashMap<LevelKey, i64>,
    device_of: HashMap<(EventType, u64), Device>,
}

impl MemoryLevels {
    /// A fresh tracker.
    pub fn new() -> MemoryLevels {
        MemoryLevels::default()
    }

    /// Updates the levels for `ev`; returns the level it changed (or re-stated), if any.
    pub fn observe(&mut self, ev: &Event) -> Option<(LevelKey, Level)> {
        if !matches!(ev.kind, EventKind::Malloc | EventKind::Free) {
            return None;
        }
        let m = ev.memory()?;
        let addr = ev.ptr.unwrap_or(m.addr);
        let device = match ev.device {
            Device::NotApplicable => *self.device_of.get(&(ev.event_type, addr))?,
            d => d,
        };
        if ev.kind == EventKind::Malloc && !ev.event_type.is_framework_pool() {
            self.device_of.insert((ev.event_type, addr), device);
        }
        let key = LevelKey {
            device,
            pool: ev.event_type,
            pinned: ev.event_type == EventType::Host && m.pinned,
        };
        if ev.kind == EventKind::Free && m.shadow {
            // live at exit: the level stays (its `used` would say otherwise)
            return None;
        }
        let running = self.running.entry(key).or_default();
        match ev.kind {
            EventKind::Malloc => *running += m.size as i64,
            _ => {
                *running -= m.size as i64;
                if !ev.event_type.is_framework_pool() {
                    self.device_of.remove(&(ev.event_type, addr));
                }
            }
        }
        let level = if ev.event_type.is_framework_pool() {
            Level {
                allocated: m.used.unwrap_or(*running),
                reserved: m.total,
            }
        } else {
            Level {
                allocated: *running,
                reserved: None,
            }
        };
        let slot = self.levels.entry(key).or_default();
        slot.allocated = level.allocated;
        if level.reserved.is_some() {
            slot.reserved = level.reserved;
        }
        Some((key, *slot))
    }

    /// Every level seen so far, by key.
    pub fn current(&self) -> &BTreeMap<LevelKey, Level> {
        &self.levels
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memscope_core::event::{Attrs, MemoryAttrs};

    fn mem(kind: EventKind, t: EventType, dev: Device, addr: u64, size: u64) -> Event {
        let mut e = Event::new(t, 1, 1, 1);
        e.kind = kind;
        e.device = dev;
        e.ptr = Some(addr);
        e.attrs = Attrs::Memory(MemoryAttrs {
            addr,
            size,
            ..MemoryAttrs::default()
        });
        e
    }

    #[test]
    fn pools_follow_used_and_total_hal_and_host_follow_block_sizes() {
        let mut l = MemoryLevels::new();
        let mut p = mem(EventKind::Malloc, EventType::Pta, Device::Npu(0), 0x10, 8);
        if let Some(m) = p.memory_mut() {
            m.used = Some(100);
            m.total = Some(1000);
        }
        let (k, v) = l.observe(&p).unwrap();
        assert_eq!(
            (k.label(), v.allocated, v.reserved),
            ("PTA".into(), 100, Some(1000))
        );
        l.observe(&mem(
            EventKind::Malloc,
            EventType::Hal,
            Device::Npu(0),
            0x20,
            64,
        ));
        // a 2025 HAL FREE without a device counts on its MALLOC's device
        let (k, v) = l
            .observe(&mem(
                EventKind::Free,
                EventType::Hal,
                Device::NotApplicable,
                0x20,
                64,
            ))
            .unwrap();
        assert_eq!((k.device, v.allocated), (Device::Npu(0), 0));
        let mut pinned = mem(EventKind::Malloc, EventType::Host, Device::Cpu, 0x30, 4);
        if let Some(m) = pinned.memory_mut() {
            m.pinned = true;
        }
        assert_eq!(l.observe(&pinned).unwrap().0.label(), "HOST pinned");
        let mut shadow = mem(EventKind::Free, EventType::Host, Device::Cpu, 0x30, 4);
        if let Some(m) = shadow.memory_mut() {
            m.pinned = true;
            m.shadow = true;
        }
        assert_eq!(l.observe(&shadow), None);
        assert_eq!(
            l.current()[&LevelKey {
                device: Device::Cpu,
                pool: EventType::Host,
                pinned: true
            }]
                .allocated,
            4
        );
        assert_eq!(l.current().len(), 3);
    }
}
