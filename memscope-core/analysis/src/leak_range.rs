//! Offline HAL leak check over a custom range, as msMemScope's `check_leaks`
//! (behaviour spec §10.5): `memscope analyze leaks FILE --mstx-info MSG [--start-index N]`.
//!
//! Per device, the msTX marks named exactly MSG give A, B and C (marks `N`, `N+1`, `N+2` in ID
//! order). A HAL MALLOC with A ≤ ID ≤ B is recorded; a HAL FREE with A ≤ ID ≤ C removes every
//! recorded allocation at the same Ptr; what remains is reported. Events come in ID order, so
//! this is one pass: the number of marks seen so far tells in which part of the range an event
//! is. A FREE without a device (2025 dumps) applies to the process's recordings on any device.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use memscope_core::bus::{BusCtx, BusError, Flow, Layer, ReportSection};
use memscope_core::event::{Device, Event, EventKind, EventType};

use super::mib;

#[derive(Default)]
struct DeviceRange {
    marks: usize,
    recorded: HashMap<u64, Vec<(u64, u64)>>, // ptr → (ID, size)
}

/// The range check as a bus layer (passes events on unchanged).
pub struct RangeLeakLayer {
    msg: String,
    start: usize,
    devices: BTreeMap<Device, DeviceRange>,
    judged: Arc<AtomicBool>,
}

impl RangeLeakLayer {
    /// Marks named `msg`, range starting at mark `start_index` (0-based).
    pub fn new(msg: &str, start_index: usize) -> RangeLeakLayer {
        RangeLeakLayer {
            msg: msg.to_owned(),
            start: start_index,
            devices: BTreeMap::new(),
            judged: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Set at `finish` when at least one device had the three marks of the range, so the
    /// range was judged somewhere (the caller fails the command otherwise).
    pub fn judged_flag(&self) -> Arc<AtomicBool> {
        self.judged.clone()
    }

    fn observe(&mut self, ev: &Event) {
        let (a, b, c) = (
            self.start.saturating_add(1),
            self.start.saturating_add(2),
            self.start.saturating_add(3),
        ); // marks seen at A, B, C
        if ev.kind == EventKind::Mstx && ev.event_type == EventType::Mark {
            if ev.device != Device::NotApplicable && ev.name.as_deref() == Some(self.msg.as_str()) {
                self.devices.entry(ev.device).or_default().marks += 1;
            }
            return;
        }
        if ev.event_type != EventType::Hal {
            return;
        }
        let Some(ptr) = ev.ptr.or_else(|| ev.memory().map(|m| m.addr)) else {
            return;
        };
        match ev.kind {
            EventKind::Malloc if ev.device != Device::NotApplicable => {
                let d = self.devices.entry(ev.device).or_default();
                if d.marks >= a && d.marks < b {
                    let size = ev.memory().map_or(0, |m| m.size);
                    d.recorded.entry(ptr).or_default().push((ev.id, size));
                }
            }
            EventKind::Free => {
                for (dev, d) in self.devices.iter_mut() {
                    if (ev.device == *dev || ev.device == Device::NotApplicable)
                        && d.marks >= a
                        && d.marks < c
                    {
                        d.recorded.remove(&ptr);
                    }
                }
            }
            _ => {}
        }
    }

    fn report(&self) -> Vec<String> {
        let mut lines = vec!["Leak Analysis Results for the Custom Range:".to_owned()];
        for (dev, d) in &self.devices {
            let dev = dev.to_text();
            if d.marks < 3 {
                lines.push(format!(
                    "ERROR: Device {dev} has fewer than 3 data points: {} mark(s) named \"{}\".",
                    d.marks, self.msg
                ));
                continue;
            }
            if d.marks < self.start.saturating_add(3) {
                lines.push(format!(
                    "INFO: Device {dev}: marks {}..{} are out of bounds ({} mark(s) named \"{}\").",
                    self.start,
                    self.start.saturating_add(2),
                    d.marks,
                    self.msg
                ));
                continue;
            }
            let mut left: Vec<(u64, u64, u64)> = d
                .recorded
                .iter()
                .flat_map(|(p, v)| v.iter().map(move |(id, s)| (*id, *p, *s)))
                .collect();
            left.sort_unstable();
            if left.is_empty() {
                lines.push(format!("No hal memory leaks detected on device {dev}."));
                continue;
            }
            lines.push(format!(
                "====== ERROR: Detected memory leaks on device {dev} ======"
            ));
            for (id, ptr, size) in left {
                lines.push(format!(
                    "Direct Hal memory leak of {:.6} Mb(s) at 0x{ptr:016x} in Index {id}.",
                    mib(size)
                ));
            }
        }
        if self.devices.is_empty() {
            lines.push(format!(
                "ERROR: no device has marks named \"{}\" or HAL memory.",
                self.msg
            ));
        }
        lines
    }
}

impl Layer for RangeLeakLayer {
    fn name(&self) -> &'static str {
        "leaks-range"
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
        let sfx = ctx.pid.map_or(String::new(), |p| format!(" (pid {p})"));
        let start = self.start;
        if self
            .devices
            .values()
            .any(|d| d.marks >= start.saturating_add(3))
        {
            self.judged.store(true, Ordering::Relaxed);
        }
        report.push(ReportSection {
            title: format!("HAL leaks in the range of \"{}\"{sfx}", self.msg),
            lines: self.report(),
            full: None,
        });
        Ok(())
    }
}
