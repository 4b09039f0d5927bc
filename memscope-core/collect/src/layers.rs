//! Selection layers of `memscope run`, applying msMemScope's collection and dump rules
//! (behaviour spec §2 "Rules that widen what is collected", §8 devices and steps).

use crate::adapter::Volume;
use crate::config::RunConfig;
use memscope_core::bus::{BusCtx, BusError, Flow, Layer};
use memscope_core::event::{Device, Event, EventKind, EventType};

/// Drops what is not *collected*: memory events unless alloc/free (or an analysis needing them)
/// are on, launches unless `launch` and the matching level are on, ACCESS unless `access`
/// (or decompose/inefficient), and events of unselected devices. Runs before the analyses.
pub struct CollectFilter {
    memory: bool,
    op: bool,
    kernel: bool,
    access: bool,
    cfg_devices: crate::config::DeviceSet,
    cpu: bool,
}

impl CollectFilter {
    /// Derives the collected set from `cfg` with msMemScope's widening rules.
    pub fn new(cfg: &RunConfig) -> CollectFilter {
        let (e, a) = (cfg.events, cfg.analysis);
        let memory = e.alloc
            || e.free
            || e.access
            || a.leaks
            || a.decompose
            || a.inefficient
            || a.races
            || a.oom.is_some();
        let launch = e.launch || a.inefficient || a.races;
        CollectFilter {
            memory,
            // the race check needs operators and kernel launches at both levels
            op: (launch && cfg.level.op) || a.races,
            kernel: (launch && cfg.level.kernel) || a.races,
            access: e.access || a.decompose || a.inefficient || a.races,
            cfg_devices: cfg.device.clone(),
            cpu: cfg.device.cpu || cfg.selection().adapters.iter().any(|d| d.host_memory),
        }
    }

    /// Whether memory (MALLOC/FREE) events are collected.
    pub fn keeps_memory(&self) -> bool {
        self.memory
    }

    fn device_selected(&self, d: Device) -> bool {
        match d {
            Device::NotApplicable => true,
            Device::Cpu => self.cpu,
            Device::Npu(n) => self.cfg_devices.all_npu || self.cfg_devices.npus.contains(&n),
        }
    }
}

impl Layer for CollectFilter {
    fn name(&self) -> &'static str {
        "collect-filter"
    }
    fn on_event(
        &mut self,
        ev: &mut Event,
        _: &BusCtx,
        _: &mut Vec<Event>,
    ) -> Result<Flow, BusError> {
        let keep = match ev.kind {
            EventKind::Malloc | EventKind::Free => self.memory,
            EventKind::OpLaunch => self.op,
            EventKind::KernelLaunch => self.kernel,
            EventKind::Access => self.access,
            _ => true,
        };
        if keep && self.device_selected(ev.device) {
            Ok(Flow::Pass)
        } else if keep && ev.event_type == EventType::Step {
            // A step boundary belongs to every dump the run writes (issue 27): on a device
            // `--device` leaves out it goes on device-less, like a mark without a device.
            ev.device = Device::NotApplicable;
            Ok(Flow::Pass)
        } else {
            Ok(Flow::Stop)
        }
    }
}

/// Drops what is collected but not *written* (`dumpEventType`): MALLOC needs `alloc`, FREE
/// needs `free`, launches and the SYSTEM rows of the ACL stream and event calls need `launch`,
/// ACCESS needs `access`; MSTX, other SYSTEM and SNAPSHOT rows are always written. The rows of account-only sources ([`Volume::Account`]: the HOST adapter's,
/// …) need `host_rows` (they stay in the capture). Also applies
/// `--steps`: inside a step that is not selected nothing is written; outside steps everything is
/// (msMemScope's "in range" rule). Runs after the analyses, so they see every collected event.
pub struct WriteFilter {
    alloc: bool,
    free: bool,
    launch: bool,
    access: bool,
    steps: Vec<u32>,
    host_rows: bool,
    /// The account-only sources' row tests (issue 16): rows at malloc volume, written only
    /// with `host_rows` (kept in the capture and summarised).
    account_rows: Vec<fn(&Event) -> bool>,
}

/// Whether `ev` is a row of the HOST adapter (libc allocator blocks): Event Type HOST rows
/// that are neither pinned memory (ACL) nor driver host memory (HAL) — those two always carry
/// `used`, the HOST adapter never does — nor torch CPU tensor storages (issue 13).
pub fn is_host_adapter_row(ev: &Event) -> bool {
    ev.event_type == EventType::Host
        && ev
            .memory()
            .is_some_and(|m| !m.pinned && !m.cpu_tensor && m.used.is_none())
}

impl WriteFilter {
    /// The written set of `cfg`.
    pub fn new(cfg: &RunConfig) -> WriteFilter {
        WriteFilter {
            alloc: cfg.events.alloc,
            free: cfg.events.free,
            launch: cfg.events.launch,
            access: cfg.events.access,
            steps: cfg.steps.clone(),
            host_rows: cfg.host_rows,
            account_rows: crate::registry::installed()
                .descriptors
                .iter()
                .filter_map(|d| match d.volume {
                    Volume::Account { is_row } => Some(is_row),
                    Volume::Rows => None,
                })
                .collect(),
        }
    }
}

impl WriteFilter {
    /// The written set of `cfg` for `--aggregate` (issue 38): `--events` and `--steps` apply
    /// as to rows, and the account-only sources' rows (HOST's) are summed too.
    pub fn for_aggregate(cfg: &RunConfig) -> WriteFilter {
        WriteFilter {
            host_rows: true,
            ..WriteFilter::new(cfg)
        }
    }
}

impl Layer for WriteFilter {
    fn name(&self) -> &'static str {
        "write-filter"
    }
    fn on_event(
        &mut self,
        ev: &mut Event,
        ctx: &BusCtx,
        _: &mut Vec<Event>,
    ) -> Result<Flow, BusError> {
        let keep = match ev.kind {
            EventKind::Malloc => self.alloc,
            EventKind::Free => self.free,
            EventKind::OpLaunch | EventKind::KernelLaunch => self.launch,
            EventKind::Access => self.access,
            // the ACL stream and event calls order the launches: written with them
            EventKind::System if ev.event_type.is_stream_order() => self.launch,
            _ => true,
        };
        let in_steps = match (ctx.steps.current, self.steps.is_empty()) {
            (_, true) | (None, _) => true,
            (Some(s), false) => self.steps.contains(&s),
        };
        if keep
            && in_steps
            && (self.host_rows
                || !(ev.memory().is_some_and(|m| m.account_only)
                    || self.account_rows.iter().any(|is_row| is_row(ev))))
        {
            Ok(Flow::Pass)
        } else {
            Ok(Flow::Stop)
        }
    }
}
