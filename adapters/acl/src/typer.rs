//! Collector-side half: ACL records → `SYSTEM` (`ACL_INIT`/`ACL_FINI`), pinned `HOST`
//! `MALLOC`/`FREE` and `KERNEL_LAUNCH` rows; `SetDevice` feeds the thread's current device to
//! every adapter (`TypeCtx::set_current_device`). Safe code only.
//!
//! Rules (behaviour spec §5.2, §6; abi.md §3):
//! * `ACL_INIT`/`ACL_FINI`: Device `N/A`, Name `N/A`, empty Attr.
//! * Pinned memory: Event Type `HOST` on device `cpu`, Attr `allocation_id`, `addr`, `size`,
//!   `pinned:true`, `used` (running total of live pinned bytes), and on MALLOC `process_used`
//!   (the VmRSS the probe read). No owner (HOST blocks have none). An unregister of an address
//!   that was not registered as pinned is ignored (registrations without the pinned flag are
//!   legitimate); a failed unregister is warned about.
//! * `KERNEL_LAUNCH`: Name = the kernel name the runtime hashed (`N/A` when unknown), Device =
//!   the task-track device mapped through `ASCEND_RT_VISIBLE_DEVICES`, else the thread's
//!   current device, else `N/A`; Attr `streamId`, `taskId` when the runtime reported them, and
//!   `stream` (the `aclrtStream` handle, `0x0` the default stream) for a hooked launch.
//! * Stream and event calls: `SYSTEM` rows of [`crate::stream_rows`].

use crate::wire::AclRecord;
use memscope_collect::adapter::{TypeCtx, Typer};
use memscope_core::event::{Attrs, Device, Event, EventKind, EventType, LaunchAttrs, MemoryAttrs};
use memscope_wire::{OptU32, Record, SystemCode};
use std::collections::HashMap;

/// `Event/Event Type` pairs this adapter produces.
pub const EVENTS: &[&str] = &[
    "SYSTEM/ACL_INIT",
    "SYSTEM/ACL_FINI",
    "MALLOC/HOST",
    "FREE/HOST",
    "KERNEL_LAUNCH/KERNEL_LAUNCH",
    "SYSTEM/STREAM_CREATE",
    "SYSTEM/STREAM_DESTROY",
    "SYSTEM/EVENT_CREATE",
    "SYSTEM/EVENT_DESTROY",
    "SYSTEM/EVENT_RECORD",
    "SYSTEM/STREAM_WAIT_EVENT",
    "SYSTEM/STREAM_SYNC",
    "SYSTEM/EVENT_SYNC",
    "SYSTEM/DEVICE_SYNC",
];

/// Builds a fresh typer (for the adapter descriptor).
pub fn new_typer() -> Box<dyn Typer> {
    Box::<AclTyper>::default()
}

/// Per-process typer of the ACL records.
#[derive(Debug, Default)]
pub struct AclTyper {
    pinned: HashMap<u64, (u64, u64)>,
    pinned_used: u64,
    names: HashMap<u64, String>,
}

fn as_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

impl AclTyper {
    /// Live pinned bytes.
    pub fn pinned_used(&self) -> u64 {
        self.pinned_used
    }

    /// A pinned `HOST` row of block `(size, allocation_id)` at `addr`.
    fn pinned_row(
        &self,
        ctx: &TypeCtx,
        (tid, ts): (u32, u64),
        kind: EventKind,
        addr: u64,
        (size, id): (u64, u64),
    ) -> Event {
        let mut ev = Event::new(EventType::Host, ts, ctx.pid, tid);
        ev.kind = kind;
        ev.device = Device::Cpu;
        ev.ptr = Some(addr);
        ev.attrs = Attrs::Memory(MemoryAttrs {
            allocation_id: id,
            addr,
            size,
            pinned: true,
            used: Some(as_i64(self.pinned_used)),
            ..MemoryAttrs::default()
        });
        ev
    }

    fn unpin(&mut self, ctx: &TypeCtx, tid: u32, ts: u64, addr: u64) -> Option<Event> {
        let (size, id) = self.pinned.remove(&addr)?;
        self.pinned_used = self.pinned_used.saturating_sub(size);
        Some(self.pinned_row(ctx, (tid, ts), EventKind::Free, addr, (size, id)))
    }

    /// The rows of a `PinnedRegister` record.
    fn register(
        &mut self,
        ctx: &mut TypeCtx,
        (tid, ts): (u32, u64),
        (addr, size, rss): (u64, u64, u64),
        out: &mut Vec<Event>,
    ) {
        if self.pinned.contains_key(&addr) {
            ctx.warn(format!("ACL: 0x{addr:x} registered as pinned twice: the live block is closed with a synthetic FREE"));
            if let Some(mut ev) = self.unpin(ctx, tid, ts, addr) {
                if let Some(m) = ev.memory_mut() {
                    m.shadow = true;
                }
                out.push(ev);
            }
        }
        let id = ctx.next_allocation_id();
        self.pinned.insert(addr, (size, id));
        self.pinned_used = self.pinned_used.saturating_add(size);
        let mut ev = self.pinned_row(ctx, (tid, ts), EventKind::Malloc, addr, (size, id));
        if let (Some(m), true) = (ev.memory_mut(), rss > 0) {
            m.process_used = Some(as_i64(rss));
        }
        out.push(ev);
    }

    /// The `KERNEL_LAUNCH` row of a `KernelLaunch` or `KernelLaunchOn` record.
    fn launch(&self, ctx: &TypeCtx, (tid, ts): (u32, u64), rec: AclRecord) -> Option<Event> {
        let (hash, OptU32(device), OptU32(stream), OptU32(task), handle) = match rec {
            AclRecord::KernelLaunch {
                hash,
                device,
                stream,
                task,
            } => (hash, device, stream, task, None),
            AclRecord::KernelLaunchOn {
                hash,
                device,
                stream,
                task,
                handle,
            } => (hash, device, stream, task, Some(handle)),
            _ => return None,
        };
        let known = |v: u32| (v != u32::MAX).then_some(i64::from(v));
        let mut ev = Event::new(EventType::KernelLaunch, ts, ctx.pid, tid);
        ev.name = self.names.get(&hash).cloned();
        ev.device = if device != u32::MAX {
            Device::Npu(ctx.map_device(device))
        } else {
            ctx.current_device(tid)
                .map_or(Device::NotApplicable, Device::Npu)
        };
        ev.attrs = Attrs::Launch(LaunchAttrs {
            stream_id: known(stream),
            task_id: known(task),
            stream: handle,
            ..LaunchAttrs::default()
        });
        Some(ev)
    }

    /// Types one of this adapter's own records.
    fn type_acl(&mut self, ctx: &mut TypeCtx, at: (u32, u64), r: AclRecord, out: &mut Vec<Event>) {
        let tid = at.0;
        match r {
            AclRecord::SetDevice { device } => {
                let d = ctx.map_device(device);
                ctx.set_current_device(tid, d);
            }
            AclRecord::PinnedRegister {
                addr, size, rss, ..
            } => self.register(ctx, at, (addr, size, rss), out),
            AclRecord::PinnedUnregister { addr, ret } => {
                match (ret, self.pinned.contains_key(&addr)) {
                    (0, _) => out.extend(self.unpin(ctx, at.0, at.1, addr)),
                    (r, known) => ctx.warn(format!(
                        "ACL: aclrtHostUnregister(0x{addr:x}) failed with error {r}{}",
                        if known {
                            "; the pinned block stays live"
                        } else {
                            ""
                        }
                    )),
                }
            }
            AclRecord::KernelName { hash, name } => {
                self.names
                    .insert(hash, String::from_utf8_lossy(name).into_owned());
            }
            AclRecord::KernelLaunch { .. } | AclRecord::KernelLaunchOn { .. } => {
                out.extend(self.launch(ctx, at, r))
            }
            r => out.extend(crate::stream_rows::row(ctx, at, r)),
        }
    }
}

impl Typer for AclTyper {
    fn type_record(
        &mut self,
        ctx: &mut TypeCtx,
        tid: u32,
        rec: &Record<Box<[u8]>>,
        out: &mut Vec<Event>,
    ) -> bool {
        if let Some(r) = AclRecord::of(crate::SOURCE, rec) {
            if let Some((ts, r)) = ctx.decoded("ACL", r) {
                self.type_acl(ctx, (tid, ts), r, out);
            }
            return true;
        }
        match rec {
            Record::System {
                ts,
                code: code @ (SystemCode::AclInit | SystemCode::AclFini),
                ..
            } => {
                let t = if *code == SystemCode::AclInit {
                    EventType::AclInit
                } else {
                    EventType::AclFini
                };
                out.push(Event::new(t, *ts, ctx.pid, tid));
            }
            _ => return false,
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memscope_core::attr_text::format_attr;

    fn feed(recs: Vec<(u32, Record<Box<[u8]>>)>, visible: Vec<u32>) -> (Vec<Event>, TypeCtx) {
        let mut t = AclTyper::default();
        let mut ctx = TypeCtx::new(3, visible);
        let mut out = Vec::new();
        for (tid, r) in recs {
            assert!(t.type_record(&mut ctx, tid, &r, &mut out), "{r:?}");
        }
        (out, ctx)
    }

    #[test]
    fn acl_init_and_fini_are_device_less_system_rows() {
        let (ev, _) = feed(
            vec![
                (
                    1,
                    Record::System {
                        ts: 5,
                        code: SystemCode::AclInit,
                        device: u32::MAX,
                    },
                ),
                (
                    1,
                    Record::System {
                        ts: 6,
                        code: SystemCode::AclFini,
                        device: u32::MAX,
                    },
                ),
            ],
            vec![],
        );
        let got: Vec<_> = ev
            .iter()
            .map(|e| {
                (
                    e.kind,
                    e.event_type,
                    e.device,
                    e.name.clone(),
                    format_attr(e),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (
                    EventKind::System,
                    EventType::AclInit,
                    Device::NotApplicable,
                    None,
                    String::new()
                ),
                (
                    EventKind::System,
                    EventType::AclFini,
                    Device::NotApplicable,
                    None,
                    String::new()
                ),
            ]
        );
        let mut t = AclTyper::default();
        let mut ctx = TypeCtx::new(1, vec![]);
        let step = Record::System {
            ts: 1,
            code: SystemCode::Step,
            device: 0,
        };
        assert!(
            !t.type_record(&mut ctx, 1, &step, &mut Vec::new()),
            "other system codes are not ours"
        );
    }

    #[test]
    fn set_device_sets_the_threads_mapped_current_device() {
        let (ev, ctx) = feed(
            vec![(7, crate::wire::rec(1, AclRecord::SetDevice { device: 1 }))],
            vec![2, 3],
        );
        assert!(ev.is_empty());
        assert_eq!(ctx.current_device(7), Some(3));
        assert_eq!(ctx.current_device(8), None);
    }

    #[test]
    fn pinned_register_and_unregister_are_host_rows_on_cpu_with_pinned_true() {
        let (ev, mut ctx) = feed(
            vec![
                (
                    1,
                    crate::wire::rec(
                        1,
                        AclRecord::PinnedRegister {
                            addr: 0x7000,
                            size: 4096,
                            rss: 1 << 20,
                            stack: 0,
                        },
                    ),
                ),
                (
                    1,
                    crate::wire::rec(
                        2,
                        AclRecord::PinnedRegister {
                            addr: 0x9000,
                            size: 100,
                            rss: 0,
                            stack: 0,
                        },
                    ),
                ),
                (
                    1,
                    crate::wire::rec(
                        3,
                        AclRecord::PinnedUnregister {
                            addr: 0x7000,
                            ret: 0,
                        },
                    ),
                ),
                (
                    1,
                    crate::wire::rec(
                        4,
                        AclRecord::PinnedUnregister {
                            addr: 0x5555,
                            ret: 0,
                        },
                    ),
                ),
                (
                    1,
                    crate::wire::rec(
                        5,
                        AclRecord::PinnedUnregister {
                            addr: 0x7000,
                            ret: 107000,
                        },
                    ),
                ),
            ],
            vec![],
        );
        let got: Vec<_> = ev
            .iter()
            .map(|e| (e.kind, e.event_type, e.device, format_attr(e)))
            .collect();
        assert_eq!(got, [
            (EventKind::Malloc, EventType::Host, Device::Cpu, "{allocation_id:1,addr:0x0000000000007000,size:4096,pinned:true,used:4096,process_used:1048576}".to_owned()),
            (EventKind::Malloc, EventType::Host, Device::Cpu, "{allocation_id:2,addr:0x0000000000009000,size:100,pinned:true,used:4196}".to_owned()),
            (EventKind::Free, EventType::Host, Device::Cpu, "{allocation_id:1,addr:0x0000000000007000,size:4096,pinned:true,used:100}".to_owned()),
        ]);
        let w = ctx.take_warnings();
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("aclrtHostUnregister(0x7000) failed with error 107000"),
            "{w:?}"
        );
    }

    #[test]
    fn kernel_launches_take_names_from_hashes_and_devices_from_track_or_thread() {
        let (ev, _) = feed(
            vec![
                (
                    1,
                    crate::wire::rec(
                        0,
                        AclRecord::KernelName {
                            hash: 42,
                            name: b"MatMulKernel",
                        },
                    ),
                ),
                (1, crate::wire::rec(1, AclRecord::SetDevice { device: 1 })),
                (
                    1,
                    crate::wire::rec(
                        2,
                        AclRecord::KernelLaunch {
                            hash: 42,
                            device: OptU32(0),
                            stream: OptU32(3),
                            task: OptU32(9),
                        },
                    ),
                ),
                (
                    1,
                    crate::wire::rec(
                        3,
                        AclRecord::KernelLaunch {
                            hash: 0,
                            device: OptU32(u32::MAX),
                            stream: OptU32(u32::MAX),
                            task: OptU32(u32::MAX),
                        },
                    ),
                ),
                (
                    2,
                    crate::wire::rec(
                        4,
                        AclRecord::KernelLaunch {
                            hash: 77,
                            device: OptU32(u32::MAX),
                            stream: OptU32(0),
                            task: OptU32(1),
                        },
                    ),
                ),
            ],
            vec![4, 5],
        );
        let got: Vec<_> = ev
            .iter()
            .map(|e| (e.kind, e.name.clone(), e.device, format_attr(e)))
            .collect();
        let k = EventKind::KernelLaunch;
        assert_eq!(
            got,
            [
                (
                    k,
                    Some("MatMulKernel".to_owned()),
                    Device::Npu(4),
                    "{streamId:3,taskId:9}".to_owned()
                ),
                (k, None, Device::Npu(5), String::new()),
                (
                    k,
                    None,
                    Device::NotApplicable,
                    "{streamId:0,taskId:1}".to_owned()
                ),
            ]
        );
        assert!(ev.iter().all(|e| e.event_type == EventType::KernelLaunch));
    }
}
