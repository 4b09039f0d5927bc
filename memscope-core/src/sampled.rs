//! Memory outside the hooks (issue 25, `--sample <interval>`): the probe's sampler thread
//! records the process's resident memory on a timer (`wire::Record::HostSample`); the collector
//! turns each sample into a `SAMPLE`/`HOST_MEMORY` event whose `tracked` bytes are what the
//! hooks hold live at that moment (HOST, HOST_MMAP and PYMEM blocks) and whose `untracked`
//! bytes are the rest: `rss − tracked`.
//!
//! Sample events are memscope's own: they stay out of the msMemScope-format dumps (its readers
//! know no `SAMPLE` rows) and live in the capture, from which the report, the exports and the
//! console summary read them, during the run and offline alike.
//!
//! * [`parse_interval`] / [`interval_text`] — the `--sample` value (`100ms`, `1s`, `250us`).
//! * [`SampledMemory`] — per process: the live tracked bytes, the sample events, the summary.
//! * [`HostPoint::of`] — a sample event's figures, for the views.

use crate::bus::ReportSection;
use crate::event::{Attrs, Device, Event, EventKind, EventType};

/// Shortest interval accepted (100 µs): a finer timer would cost the job CPU for nothing.
pub const MIN_INTERVAL_NS: u64 = 100_000;
/// Longest interval accepted (one hour).
pub const MAX_INTERVAL_NS: u64 = 3_600_000_000_000;

/// Parses a `--sample` value: a whole number and a unit, `us`, `ms` or `s` (`250us`, `100ms`,
/// `1s`), between [`MIN_INTERVAL_NS`] and [`MAX_INTERVAL_NS`]. Returns nanoseconds.
///
/// # Errors
/// Anything else, as a message naming the value.
pub fn parse_interval(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let digits = t.bytes().take_while(u8::is_ascii_digit).count();
    let (num, unit) = t.split_at(digits);
    let scale = match unit {
        "us" | "µs" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        _ => 0,
    };
    let ns = num
        .parse::<u64>()
        .ok()
        .filter(|_| scale > 0)
        .and_then(|n| n.checked_mul(scale));
    match ns {
        Some(ns) if (MIN_INTERVAL_NS..=MAX_INTERVAL_NS).contains(&ns) => Ok(ns),
        Some(_) => Err(format!(
            "{s:?}: the interval must be between 100us and 3600s"
        )),
        None => Err(format!(
            "{s:?}: expected a duration such as 100ms, 1s or 250us"
        )),
    }
}

/// The `--sample` spelling of `ns` (the largest unit that divides it).
pub fn interval_text(ns: u64) -> String {
    if ns.is_multiple_of(1_000_000_000) {
        format!("{}s", ns / 1_000_000_000)
    } else if ns.is_multiple_of(1_000_000) {
        format!("{}ms", ns / 1_000_000)
    } else {
        format!("{}us", ns / 1_000)
    }
}

/// The figures of one host sample event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostPoint {
    /// Time, ns since the epoch.
    pub ts_ns: u64,
    /// Resident bytes.
    pub rss: i64,
    /// Anonymous resident bytes.
    pub anon: i64,
    /// Bytes the hooks held live (HOST, HOST_MMAP, PYMEM).
    pub tracked: i64,
    /// `rss − tracked`.
    pub untracked: i64,
}

impl HostPoint {
    /// The figures of `ev` when it is a `SAMPLE`/`HOST_MEMORY` event.
    pub fn of(ev: &Event) -> Option<HostPoint> {
        if ev.kind != EventKind::Sample || ev.event_type != EventType::HostMemory {
            return None;
        }
        let Attrs::Pairs(p) = &ev.attrs else {
            return None;
        };
        let get = |k: &str| {
            p.iter()
                .find(|(key, _)| key == k)
                .and_then(|(_, v)| v.parse::<i64>().ok())
        };
        Some(HostPoint {
            ts_ns: ev.ts_ns,
            rss: get("rss")?,
            anon: get("anon")?,
            tracked: get("tracked")?,
            untracked: get("untracked")?,
        })
    }
}

/// Whether `ev` is a block event of an allocator whose live bytes count as tracked host
/// memory: HOST and HOST_MMAP rows, and the PYMEM adapter's (CPU tensor storages are HOST
/// mallocs already).
fn tracked_host(ev: &Event) -> Option<(i64, bool)> {
    let free = match ev.kind {
        EventKind::Malloc => false,
        EventKind::Free => true,
        _ => return None,
    };
    if ev.device != Device::Cpu {
        return None;
    }
    let m = ev.memory()?;
    let host = matches!(ev.event_type, EventType::Host | EventType::HostMmap)
        || ev.event_type.as_str() == "PYMEM";
    (host && !m.cpu_tensor).then_some((m.size as i64, free))
}

/// Per process: the live tracked host bytes seen so far, and the peaks of the samples.
#[derive(Clone, Debug, Default)]
pub struct SampledMemory {
    live: i64,
    points: u64,
    peak_rss: i64,
    peak_untracked: Option<i64>,
    first_untracked: Option<i64>,
}

impl SampledMemory {
    /// Nothing seen.
    pub fn new() -> SampledMemory {
        SampledMemory::default()
    }

    /// Accounts a typed event (MALLOC/FREE of a tracked host allocator; others are ignored).
    pub fn observe(&mut self, ev: &Event) {
        if let Some((size, free)) = tracked_host(ev) {
            self.live += if free { -size } else { size };
        }
    }

    /// The SAMPLE event of a host sample at `ts_ns` (pid, tid of the sampler thread), with
    /// `extra_tracked` live bytes the events did not show (the collector's HOST fast path,
    /// which accounts mallocs without events).
    pub fn host_event(
        &mut self,
        (ts_ns, pid, tid): (u64, u32, u32),
        rss: u64,
        anon: u64,
        extra_tracked: u64,
    ) -> Event {
        let rss = rss as i64;
        let tracked = self.live.saturating_add(extra_tracked as i64).max(0);
        let untracked = rss - tracked;
        self.points += 1;
        self.peak_rss = self.peak_rss.max(rss);
        self.peak_untracked = Some(self.peak_untracked.map_or(untracked, |p| p.max(untracked)));
        self.first_untracked.get_or_insert(untracked);
        let mut ev = Event::new(EventType::HostMemory, ts_ns, pid, tid);
        ev.device = Device::Cpu;
        ev.attrs = Attrs::Pairs(vec![
            ("rss".into(), rss.to_string()),
            ("anon".into(), anon.to_string()),
            ("tracked".into(), tracked.to_string()),
            ("untracked".into(), untracked.to_string()),
        ]);
        ev
    }

    /// The console line of the process (`None` when it took no sample).
    pub fn report(&self, pid: u32) -> Option<ReportSection> {
        let peak = self.peak_untracked?;
        let growth = peak - self.first_untracked.unwrap_or(peak);
        Some(ReportSection::new(
            format!("Sampled memory (pid {pid})"),
            vec![format!(
                "{} samples: peak untracked host {} (growth {} since the first sample), peak RSS {}",
                self.points,
                mib_text(peak),
                mib_text(growth),
                mib_text(self.peak_rss)
            )],
        ))
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
    use crate::event::MemoryAttrs;

    #[test]
    fn sample_interval_takes_whole_numbers_with_a_unit_in_range() {
        assert_eq!(parse_interval("100ms"), Ok(100_000_000));
        assert_eq!(parse_interval("1s"), Ok(1_000_000_000));
        assert_eq!(parse_interval("250us"), Ok(250_000));
        for bad in ["", "100", "ms", "1.5s", "-1s", "10us", "2h", "3601s", "1 s"] {
            let e = parse_interval(bad).unwrap_err();
            assert!(e.contains(&format!("{bad:?}")), "{e}");
        }
        for ns in [250_000, 100_000_000, 2_000_000_000, 1_500_000] {
            assert_eq!(parse_interval(&interval_text(ns)), Ok(ns));
        }
    }

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
    fn untracked_is_rss_minus_live_host_mmap_and_pymem_blocks() {
        let mut s = SampledMemory::new();
        s.observe(&block(EventKind::Malloc, EventType::Host, 1000));
        s.observe(&block(EventKind::Malloc, EventType::HostMmap, 4096));
        s.observe(&block(EventKind::Malloc, EventType::custom("PYMEM"), 24));
        s.observe(&block(EventKind::Free, EventType::Host, 1000));
        s.observe(&block(EventKind::Malloc, EventType::Hal, 1 << 20));
        let ev = s.host_event((5, 1, 2), 10_000, 8_000, 100);
        let p = HostPoint::of(&ev).unwrap();
        assert_eq!(p.tracked, 4096 + 24 + 100);
        assert_eq!(p.untracked, 10_000 - 4220);
        assert_eq!((p.ts_ns, p.rss, p.anon), (5, 10_000, 8_000));
        assert_eq!(ev.kind.as_str(), "SAMPLE");
        assert_eq!(ev.event_type.as_str(), "HOST_MEMORY");
        s.host_event((6, 1, 2), 20_000, 8_000, 100);
        let line = &s.report(1).unwrap().lines[0];
        assert!(
            line.starts_with("2 samples: peak untracked host 0.0 MiB"),
            "{line}"
        );
        assert!(SampledMemory::new().report(1).is_none());
    }
}
