//! The figures of a memory sample (`--sample`, issue 25): a `SAMPLE` event's sampled, tracked
//! and untracked bytes, as the report and the exports read them.

use crate::event::{Attrs, Device, Event, EventKind, EventType};

/// The figures of one sample event (host or device).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SamplePoint {
    /// Time, ns since the epoch.
    pub ts_ns: u64,
    /// `cpu` for the process's host memory, else the NPU.
    pub device: Device,
    /// Host: resident bytes (`rss`); device: bytes in use on the device (`used`).
    pub sampled: i64,
    /// Host: anonymous resident bytes (`anon`); device: free bytes (`free`).
    pub other: i64,
    /// Bytes the hooks held live: host HOST, HOST_MMAP and Python object blocks; device HAL
    /// blocks.
    pub tracked: i64,
    /// `sampled − tracked`.
    pub untracked: i64,
}

impl SamplePoint {
    /// The figures of `ev` when it is a `SAMPLE` event (`HOST_MEMORY` or `DEVICE_MEMORY`).
    pub fn of(ev: &Event) -> Option<SamplePoint> {
        if ev.kind != EventKind::Sample {
            return None;
        }
        let (sampled, other) = match ev.event_type {
            EventType::HostMemory => ("rss", "anon"),
            EventType::DeviceMemory => ("used", "free"),
            _ => return None,
        };
        let Attrs::Pairs(p) = &ev.attrs else {
            return None;
        };
        let get = |k: &str| {
            p.iter()
                .find(|(key, _)| key == k)
                .and_then(|(_, v)| v.parse::<i64>().ok())
        };
        Some(SamplePoint {
            ts_ns: ev.ts_ns,
            device: ev.device,
            sampled: get(sampled)?,
            other: get(other)?,
            tracked: get("tracked")?,
            untracked: get("untracked")?,
        })
    }

    /// Whether this is the process's host memory (else a device's).
    pub fn is_host(&self) -> bool {
        self.device == Device::Cpu
    }
}
