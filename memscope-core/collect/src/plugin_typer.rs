//! Types the events of third-party adapters (plugin ABI `schemas/memscope_plugin.h`):
//! `Record::Plugin` (ABI 1.0 `emit`, texts in every record) and `Record::Compact` of a type
//! that is not account-only (ABI 1.2 `emit_compact`, its texts resolved once in the typing
//! context's [`crate::compact::TypeTable`]). Kind codes map to Event columns, the event type
//! text becomes a custom Event Type, `k:v` attrs become Attr pairs (`owner` feeds the owner
//! chain), a compact event's values become `name:value` pairs.

use crate::adapter::{TypeCtx, Typer};
use memscope_core::attr_text::parse_attr;
use memscope_core::event::{Attrs, Device, Event, EventKind, EventType, LaunchAttrs, MemoryAttrs};
use memscope_core::owner::OwnerChain;
use memscope_wire::Record;
use std::collections::HashMap;

/// Plugin ABI kind codes (`MEMSCOPE_KIND_*`).
mod kind {
    pub const MALLOC: u8 = 1;
    pub const FREE: u8 = 2;
    pub const MARK: u8 = 3;
    pub const OP_START: u8 = 4;
    pub const OP_END: u8 = 5;
    pub const KERNEL_START: u8 = 6;
    pub const KERNEL_END: u8 = 7;
    pub const ACCESS: u8 = 8;
    pub const DIAGNOSTIC: u8 = 255;
}

/// `MEMSCOPE_DEVICE_NONE` and `MEMSCOPE_DEVICE_CPU`.
const DEVICE_NONE: u32 = u32::MAX;
const DEVICE_CPU: u32 = u32::MAX - 1;

/// Typer of plugin records; keeps live plugin blocks (type, address) → (id, size) so a FREE
/// carries its MALLOC's size and allocation_id.
#[derive(Default)]
pub struct PluginTyper {
    live: HashMap<(EventType, u64), (u64, u64)>,
    used: HashMap<(EventType, Device), i64>,
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// One plugin event, its texts resolved (from a `Plugin` record's texts, or a `Compact`
/// record's registered type).
struct Parts {
    kind: u8,
    ts: u64,
    device: u32,
    ptr: u64,
    size: u64,
    ty: EventType,
    name: Option<String>,
    pairs: Vec<(String, String)>,
    /// Owner chain of a MALLOC.
    owner: OwnerChain,
}

impl Typer for PluginTyper {
    fn type_record(
        &mut self,
        ctx: &mut TypeCtx,
        tid: u32,
        rec: &Record<Box<[u8]>>,
        out: &mut Vec<Event>,
    ) -> bool {
        let parts = match rec {
            Record::Plugin {
                ts,
                kind: k,
                device,
                ptr,
                size,
                event_type,
                name,
                attrs,
            } => {
                if *k == kind::DIAGNOSTIC {
                    ctx.warn(format!("adapter plugin {}: {}", text(name), text(attrs)));
                    return true;
                }
                let ty = EventType::custom(&text(event_type));
                let name_text = text(name);
                let mut pairs = parse_attr(&text(attrs));
                let chain = crate::compact::take_owner(ty, &mut pairs);
                Parts {
                    kind: *k,
                    ts: *ts,
                    device: *device,
                    ptr: *ptr,
                    size: *size,
                    ty,
                    name: (!name_text.is_empty()).then_some(name_text),
                    pairs,
                    owner: chain,
                }
            }
            Record::Compact {
                ts,
                ty,
                kind,
                addr,
                size,
                values,
            } => {
                let Some(t) = ctx.types.get(ctx.image(), *ty) else {
                    ctx.warn(format!(
                        "adapter plugin event of undefined type {ty} ignored"
                    ));
                    return true;
                };
                Parts {
                    kind: *kind,
                    ts: *ts,
                    device: t.device,
                    ptr: *addr,
                    size: *size,
                    ty: t.event_type,
                    name: t.name.clone(),
                    pairs: t.pairs_with(values),
                    owner: t.owner.clone(),
                }
            }
            _ => return false,
        };
        if let Some(ev) = self.event(ctx, tid, parts) {
            out.push(ev);
        }
        true
    }
}

impl PluginTyper {
    /// The event of `p` (`None`: nothing to write, after a warning).
    fn event(&mut self, ctx: &mut TypeCtx, tid: u32, p: Parts) -> Option<Event> {
        let Parts {
            kind: k,
            ts,
            device,
            ptr,
            size,
            ty,
            name,
            mut pairs,
            owner,
        } = p;
        let dev = match device {
            DEVICE_NONE => Device::NotApplicable,
            DEVICE_CPU => Device::Cpu,
            d => Device::Npu(ctx.map_device(d)),
        };
        let mut ev = Event::new(ty, ts, ctx.pid, tid);
        ev.device = dev;
        ev.name = name;
        match k {
            kind::MALLOC | kind::FREE => {
                ev.ptr = Some(ptr);
                ev.name = None;
                let malloc = k == kind::MALLOC;
                ev.kind = if malloc {
                    EventKind::Malloc
                } else {
                    EventKind::Free
                };
                let (id, sz) = if malloc {
                    let id = ctx.next_allocation_id();
                    if self.live.insert((ty, ptr), (id, size)).is_some() {
                        ctx.warn(format!(
                            "{}: allocation at live address 0x{ptr:x}",
                            ty.as_str()
                        ));
                    }
                    (id, size)
                } else {
                    match self.live.remove(&(ty, ptr)) {
                        Some(v) => v,
                        None => {
                            ctx.warn(format!(
                                "{}: free of unknown address 0x{ptr:x}",
                                ty.as_str()
                            ));
                            return None;
                        }
                    }
                };
                let used = self.used.entry((ty, dev)).or_default();
                *used += if malloc { sz as i64 } else { -(sz as i64) };
                ev.attrs = Attrs::Memory(MemoryAttrs {
                    allocation_id: id,
                    addr: ptr,
                    size: sz,
                    used: Some(*used),
                    owner: malloc.then_some(owner),
                    extra: pairs,
                    ..MemoryAttrs::default()
                });
            }
            kind::MARK => {
                ev.kind = EventKind::Mstx;
                ev.event_type = EventType::Mark;
                ev.attrs = if pairs.is_empty() {
                    Attrs::None
                } else {
                    Attrs::Pairs(pairs)
                };
            }
            kind::OP_START | kind::OP_END | kind::KERNEL_START | kind::KERNEL_END => {
                ev.kind = if matches!(k, kind::OP_START | kind::OP_END) {
                    EventKind::OpLaunch
                } else {
                    EventKind::KernelLaunch
                };
                let phase = if matches!(k, kind::OP_START | kind::KERNEL_START) {
                    "start"
                } else {
                    "end"
                };
                pairs.insert(0, ("phase".into(), phase.into()));
                ev.attrs = Attrs::Launch(LaunchAttrs {
                    extra: pairs,
                    ..LaunchAttrs::default()
                });
            }
            kind::ACCESS => {
                ev.kind = EventKind::Access;
                ev.ptr = Some(ptr);
                pairs.insert(0, ("size".into(), size.to_string()));
                ev.attrs = Attrs::Pairs(pairs);
            }
            other => {
                ctx.warn(format!(
                    "adapter plugin event of unknown kind {other} ignored"
                ));
                return None;
            }
        }
        Some(ev)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(k: u8, ptr: u64, size: u64, attrs: &str) -> Record<Box<[u8]>> {
        Record::Plugin {
            ts: 5,
            kind: k,
            device: 0,
            ptr,
            size,
            event_type: b"MYPOOL".to_vec().into(),
            name: b"".to_vec().into(),
            attrs: attrs.as_bytes().to_vec().into(),
        }
    }

    #[test]
    fn plugin_malloc_and_free_share_an_allocation_id_and_size() {
        let mut t = PluginTyper::default();
        let mut ctx = TypeCtx::new(7, vec![3]);
        let mut out = Vec::new();
        assert!(t.type_record(
            &mut ctx,
            8,
            &rec(kind::MALLOC, 0x1000, 4096, "owner:kv_cache"),
            &mut out
        ));
        assert!(t.type_record(&mut ctx, 8, &rec(kind::FREE, 0x1000, 0, ""), &mut out));
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].event_type.as_str(), "MYPOOL");
        assert_eq!(out[0].device, Device::Npu(3));
        let (a, b) = (out[0].memory().unwrap(), out[1].memory().unwrap());
        assert_eq!(
            (a.allocation_id, a.size, b.allocation_id, b.size),
            (1, 4096, 1, 4096)
        );
        assert_eq!(a.owner.as_ref().unwrap().to_string(), "MYPOOL@kv_cache");
        assert_eq!(b.used, Some(0));
    }
}
