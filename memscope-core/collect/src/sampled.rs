//! Memory outside the hooks (issue 25, `--sample <interval>`): the probe's sampler thread
//! records the process's resident memory on a timer (`wire::Record::ProcessSample`) and, once the
//! job set a device, the device's used and free memory (`wire::Record::DeviceSample`); the
//! collector turns each sample into a `SAMPLE` event (`HOST_MEMORY`, `DEVICE_MEMORY`) whose
//! `tracked` bytes are what the hooks hold live at that moment (host: HOST, HOST_MMAP and the
//! summed-up blocks of host-memory account sources, e.g. Python objects; device: HAL blocks)
//! and whose `untracked` bytes are the rest: `rss − tracked`, `used − tracked`.
//!
//! Sample events are memscope's own: they stay out of the msMemScope-format dumps (its readers
//! know no `SAMPLE` rows) and live in the capture, from which the report, the exports and the
//! console summary read them, during the run and offline alike.
//!
//! * [`SampledMemory`] — per process: the live tracked bytes, the sample events, the summary.
//! * The `--sample` value is parsed in [`crate::config::interval`]; a sample event's figures,
//!   for the views, are [`memscope_core::sample::SamplePoint`].

use memscope_core::bus::ReportSection;
use memscope_core::event::{Attrs, Device, Event, EventKind, EventType};
use std::collections::BTreeMap;

/// A live block event of an allocator whose bytes count as tracked: (where, size, is a free).
/// Host: HOST and HOST_MMAP rows and those of [`account_types`] (CPU tensor storages are HOST
/// mallocs already); device: HAL rows on an NPU.
fn tracked_block(ev: &Event) -> Option<(Device, i64, bool)> {
    let free = match ev.kind {
        EventKind::Malloc => false,
        EventKind::Free => true,
        _ => return None,
    };
    let m = ev.memory()?;
    let counts = match ev.device {
        Device::Cpu => {
            (matches!(ev.event_type, EventType::Host | EventType::HostMmap)
                || account_types().contains(&ev.event_type.as_str()))
                && !m.cpu_tensor
        }
        Device::Npu(_) => ev.event_type == EventType::Hal,
        Device::NotApplicable => false,
    };
    counts.then_some((ev.device, m.size as i64, free))
}

/// The Event Types of the blocks host-memory adapters sum up ([`crate::adapter::AccountSummary`]
/// of the installed registry's descriptors with `host_memory`: Python objects, not the arenas
/// that hold them).
fn account_types() -> &'static [&'static str] {
    static TYPES: std::sync::OnceLock<Vec<&'static str>> = std::sync::OnceLock::new();
    TYPES.get_or_init(|| {
        crate::registry::installed()
            .descriptors
            .iter()
            .filter(|d| d.host_memory)
            .filter_map(|d| d.account_summary.map(|a| a.event_type))
            .collect()
    })
}

/// The peaks of one device's samples (or the host's).
#[derive(Clone, Copy, Debug, Default)]
struct Peaks {
    points: u64,
    sampled: i64,
    untracked: i64,
    first_untracked: i64,
}

/// Per process: the live tracked bytes seen so far, per device, and the peaks of the samples.
#[derive(Clone, Debug, Default)]
pub struct SampledMemory {
    /// (device, live bytes): a few devices, searched in order (a lookup per memory event).
    live: Vec<(Device, i64)>,
    peaks: BTreeMap<Device, Peaks>,
    /// The process image (exec'd program) the figures are of.
    image: usize,
}

impl SampledMemory {
    /// Nothing seen.
    pub fn new() -> SampledMemory {
        SampledMemory::default()
    }

    /// Records of process image `image` follow (in time order): after an `exec` what was
    /// sampled and tracked belonged to the program the process left (a pyenv shim's bash),
    /// so the figures start again with the new one — "growth since the first sample" is the
    /// program's own.
    pub fn set_image(&mut self, image: usize) {
        if image > self.image {
            *self = SampledMemory {
                image,
                ..SampledMemory::default()
            };
        }
    }

    /// Accounts a typed event (MALLOC/FREE of a tracked allocator; others are ignored).
    pub fn observe(&mut self, ev: &Event) {
        if let Some((device, size, free)) = tracked_block(ev) {
            let d = if free { -size } else { size };
            match self.live.iter_mut().find(|(k, _)| *k == device) {
                Some((_, v)) => *v += d,
                None => self.live.push((device, d)),
            }
        }
    }

    fn event(
        &mut self,
        (ts_ns, pid, tid): (u64, u32, u32),
        (device, event_type): (Device, EventType),
        (sampled, other): ((&str, u64), (&str, u64)),
        extra_tracked: u64,
    ) -> Event {
        let live = self
            .live
            .iter()
            .find(|(k, _)| *k == device)
            .map_or(0, |(_, v)| *v);
        let tracked = live.saturating_add(extra_tracked as i64).max(0);
        let value = sampled.1 as i64;
        let untracked = value - tracked;
        let p = self.peaks.entry(device).or_insert(Peaks {
            first_untracked: untracked,
            untracked,
            ..Peaks::default()
        });
        p.points += 1;
        p.sampled = p.sampled.max(value);
        p.untracked = p.untracked.max(untracked);
        let mut ev = Event::new(event_type, ts_ns, pid, tid);
        ev.device = device;
        ev.attrs = Attrs::Pairs(vec![
            (sampled.0.into(), value.to_string()),
            (other.0.into(), other.1.to_string()),
            ("tracked".into(), tracked.to_string()),
            ("untracked".into(), untracked.to_string()),
        ]);
        ev
    }

    /// The SAMPLE event of a host sample at `ts_ns` (pid, tid of the sampler thread), with
    /// `extra_tracked` live bytes the events did not show (the collector's HOST fast path,
    /// which accounts mallocs without events).
    pub fn host_event(
        &mut self,
        at: (u64, u32, u32),
        rss: u64,
        anon: u64,
        extra_tracked: u64,
    ) -> Event {
        let what = (Device::Cpu, EventType::HostMemory);
        self.event(at, what, (("rss", rss), ("anon", anon)), extra_tracked)
    }

    /// The SAMPLE event of a sample of NPU `device` (physical id): `used` and `free` bytes as
    /// the device runtime reported them; tracked are the HAL blocks live on it.
    pub fn device_event(
        &mut self,
        at: (u64, u32, u32),
        device: u32,
        used: u64,
        free: u64,
    ) -> Event {
        let what = (Device::Npu(device), EventType::DeviceMemory);
        self.event(at, what, (("used", used), ("free", free)), 0)
    }

    /// The console line of the process (`None` when it took no sample): peak untracked bytes
    /// of the host and of each device.
    pub fn report(&self, pid: u32) -> Option<ReportSection> {
        // the host first, then the devices in order
        let host = self.peaks.get_key_value(&Device::Cpu);
        let devices = self.peaks.iter().filter(|(d, _)| **d != Device::Cpu);
        let parts: Vec<String> = host
            .into_iter()
            .chain(devices)
            .map(|(d, p)| {
                let (what, sampled) = match d {
                    Device::Cpu => ("host".to_owned(), "RSS"),
                    d => (format!("device {}", d.to_text()), "used"),
                };
                format!(
                    "{} sample(s): peak untracked {what} {} (growth {} since the first sample), peak {sampled} {}",
                    p.points,
                    mib_text(p.untracked),
                    mib_text(p.untracked - p.first_untracked),
                    mib_text(p.sampled)
                )
            })
            .collect();
        (!parts.is_empty()).then(|| {
            ReportSection::new(
                format!("Sampled memory (pid {pid})"),
                vec![parts.join("; ")],
            )
        })
    }
}

/// `12.3 MiB` (signed: untracked bytes can be negative when the hooks see memory that is
/// allocated but not resident).
pub fn mib_text(bytes: i64) -> String {
    format!("{:.1} MiB", bytes as f64 / 1_048_576.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use memscope_core::event::MemoryAttrs;
    use memscope_core::sample::SamplePoint;

    fn block(kind: EventKind, t: EventType, size: u64) -> Event {
        let mut ev = Event::new(t, 1, 1, 1);
        ev.kind = kind;
        ev.device = Device::Cpu;
        ev.attrs = Attrs::Memory(MemoryAttrs {
            size,
            ..MemoryAttrs::default()
        });
        ev
    }

    #[test]
    fn untracked_is_rss_minus_live_host_mmap_and_account_blocks() {
        let objects = account_types()[0];
        let mut s = SampledMemory::new();
        s.observe(&block(EventKind::Malloc, EventType::Host, 1000));
        s.observe(&block(EventKind::Malloc, EventType::HostMmap, 4096));
        s.observe(&block(EventKind::Malloc, EventType::custom(objects), 24));
        s.observe(&block(EventKind::Free, EventType::Host, 1000));
        s.observe(&block(EventKind::Malloc, EventType::Hal, 1 << 20));
        let ev = s.host_event((5, 1, 2), 10_000, 8_000, 100);
        let p = SamplePoint::of(&ev).unwrap();
        assert_eq!(p.tracked, 4096 + 24 + 100);
        assert_eq!(p.untracked, 10_000 - 4220);
        assert_eq!((p.ts_ns, p.sampled, p.other), (5, 10_000, 8_000));
        assert!(p.is_host());
        assert_eq!(ev.kind.as_str(), "SAMPLE");
        assert_eq!(ev.event_type.as_str(), "HOST_MEMORY");
        s.host_event((6, 1, 2), 20_000, 8_000, 100);
        let line = &s.report(1).unwrap().lines[0];
        assert!(
            line.starts_with("2 sample(s): peak untracked host 0.0 MiB"),
            "{line}"
        );
        assert!(SampledMemory::new().report(1).is_none());
    }

    #[test]
    fn device_untracked_is_used_minus_live_hal_blocks_of_that_device() {
        let mut s = SampledMemory::new();
        for (dev, kind, size) in [
            (0, EventKind::Malloc, 64 << 20),
            (1, EventKind::Malloc, 8 << 20),
            (0, EventKind::Free, 32 << 20),
        ] {
            let mut ev = block(kind, EventType::Hal, size);
            ev.device = Device::Npu(dev);
            s.observe(&ev);
        }
        let ev = s.device_event((7, 1, 2), 0, 232 << 20, 1 << 30);
        let p = SamplePoint::of(&ev).unwrap();
        assert_eq!(
            (p.device, p.sampled, p.other),
            (Device::Npu(0), 232 << 20, 1 << 30)
        );
        assert_eq!((p.tracked, p.untracked), (32 << 20, 200 << 20));
        assert_eq!(ev.event_type.as_str(), "DEVICE_MEMORY");
        s.host_event((8, 1, 2), 10 << 20, 0, 0);
        let line = &s.report(1).unwrap().lines[0];
        assert!(
            line.starts_with("1 sample(s): peak untracked host 10.0 MiB")
                && line.contains("; 1 sample(s): peak untracked device 0 200.0 MiB"),
            "{line}"
        );
    }

    #[test]
    fn after_an_exec_the_figures_are_the_new_programs_own() {
        let mut s = SampledMemory::new();
        // the shim's bash: 4 MiB
        s.set_image(0);
        s.observe(&block(EventKind::Malloc, EventType::Host, 1 << 20));
        s.host_event((1, 1, 2), 4 << 20, 0, 0);
        // exec'd python: 8 MiB at its first sample, 20 MiB at its last
        s.set_image(1);
        s.host_event((2, 1, 2), 8 << 20, 0, 0);
        s.host_event((3, 1, 2), 20 << 20, 0, 0);
        let line = &s.report(1).unwrap().lines[0];
        assert!(line.starts_with("2 sample(s)"), "{line}");
        // the bash's live block is not the python's: untracked = RSS, growth 12 MiB
        assert!(
            line.contains("peak untracked host 20.0 MiB (growth 12.0 MiB"),
            "{line}"
        );
        // an earlier image's records arriving late change nothing
        s.set_image(0);
        assert!(s.report(1).unwrap().lines[0].starts_with("2 sample(s)"));
    }
}
