//! Collector-side half of the ATB operator hooks: `AtbOp`, `AtbKernel` and `AtbTensor`
//! records → `OP_LAUNCH` (`ATB_START`/`ATB_END`), `KERNEL_LAUNCH` (`KERNEL_START`/`KERNEL_END`)
//! and `ACCESS` (`READ`/`WRITE`/`UNKNOWN`) rows, and [`AtbTyper`], the adapter's typer that also
//! runs the pool part ([`crate::pool`]). Safe code only.
//!
//! Rules (behaviour spec §5.2, §6; seed table 2):
//! * `OP_LAUNCH`: Name = the operation name (`N/A` when libatb had no getter), Attr `path`
//!   (the runner's directory), `workspace ptr`, `workspace size`
//!   (`workspaceBufferSize + intermediateBufferSize`).
//! * `KERNEL_LAUNCH`: Name = the path component just before `/before` or `/after`, Attr `path`.
//! * `ACCESS`: Name = the operator (or kernel) the tensor belongs to: the innermost operator
//!   running on the thread, or the thread's last kernel; Ptr = the tensor address; Attr `size`,
//!   `type:ATB`, `dtype`, `format`, `shape` (`[d0,d1,]`, msMemScope's spelling). Operator
//!   inputs are `UNKNOWN` and outputs `WRITE`, before and after the operator runs (msMemScope);
//!   kernel inputs are `READ` and outputs `WRITE` (our choice: the kernel level knows the
//!   direction).
//! * Device: the logical device the hook read from the runtime, mapped through
//!   `ASCEND_RT_VISIBLE_DEVICES`; else the thread's current device; else `N/A`. Tensor rows take
//!   the device of their operator or kernel.

use crate::abi::{dtype_name, format_name, shape_text};
use crate::wire::AtbRecord;
use memscope_collect::adapter::{TypeCtx, Typer};
use memscope_collect::pool::PoolTyper;
use memscope_core::event::{AccessAttrs, Attrs, Device, Event, EventType, LaunchAttrs};
use memscope_wire::{decode_dims, AccessKind, OptU32, Record};
use std::collections::HashMap;

/// `Event/Event Type` pairs of the operator part.
pub const EVENTS: &[&str] = &[
    "OP_LAUNCH/ATB_START",
    "OP_LAUNCH/ATB_END",
    "KERNEL_LAUNCH/KERNEL_START",
    "KERNEL_LAUNCH/KERNEL_END",
    "ACCESS/READ",
    "ACCESS/WRITE",
    "ACCESS/UNKNOWN",
];

/// The kernel name of a `SaveLaunchParam` path: the component before the last `/before` or
/// `/after` marker (`…/0_LinearOperation/LinearKernel/before` → `LinearKernel`).
pub fn kernel_name(path: &str) -> Option<&str> {
    let cut = [path.rfind("/before"), path.rfind("/after")]
        .into_iter()
        .flatten()
        .max()?;
    let head = &path[..cut];
    Some(head.rsplit('/').next().unwrap_or(head)).filter(|n| !n.is_empty())
}

#[derive(Debug, Default)]
struct ThreadState {
    ops: Vec<(Option<String>, Device)>,
    kernel: Option<(Option<String>, Device)>,
}

/// Per-process typer of the ATB operator records.
#[derive(Debug, Default)]
pub struct OpsTyper {
    threads: HashMap<u32, ThreadState>,
}

fn text(b: &[u8]) -> Option<String> {
    (!b.is_empty()).then(|| String::from_utf8_lossy(b).into_owned())
}

fn device(ctx: &TypeCtx, tid: u32, d: u32) -> Device {
    if d != u32::MAX {
        Device::Npu(ctx.map_device(d))
    } else {
        ctx.current_device(tid)
            .map_or(Device::NotApplicable, Device::Npu)
    }
}

impl OpsTyper {
    /// Operators currently running on thread `tid` (nesting depth).
    pub fn depth(&self, tid: u32) -> usize {
        self.threads.get(&tid).map_or(0, |t| t.ops.len())
    }
}

impl Typer for OpsTyper {
    fn type_record(
        &mut self,
        ctx: &mut TypeCtx,
        tid: u32,
        rec: &Record<Box<[u8]>>,
        out: &mut Vec<Event>,
    ) -> bool {
        let Some(r) = AtbRecord::of(crate::SOURCE, rec) else {
            return false;
        };
        let Some((ts, r)) = ctx.decoded("ATB", r) else {
            return true;
        };
        let st = self.threads.entry(tid).or_default();
        match r {
            AtbRecord::OpStart {
                device: OptU32(d),
                ws_ptr,
                ws_size,
                name,
                path,
            }
            | AtbRecord::OpEnd {
                device: OptU32(d),
                ws_ptr,
                ws_size,
                name,
                path,
            } => {
                let end = matches!(r, AtbRecord::OpEnd { .. });
                let name = text(name);
                let dev = if end {
                    st.ops
                        .pop()
                        .map_or_else(|| device(ctx, tid, d), |(_, dev)| dev)
                } else {
                    let dev = device(ctx, tid, d);
                    st.ops.push((name.clone(), dev));
                    dev
                };
                let mut ev = Event::new(
                    if end {
                        EventType::AtbEnd
                    } else {
                        EventType::AtbStart
                    },
                    ts,
                    ctx.pid,
                    tid,
                );
                ev.name = name;
                ev.device = dev;
                ev.attrs = Attrs::Launch(LaunchAttrs {
                    path: text(path),
                    workspace_ptr: Some(ws_ptr),
                    workspace_size: Some(ws_size),
                    ..LaunchAttrs::default()
                });
                out.push(ev);
            }
            AtbRecord::KernelStart {
                device: OptU32(d),
                path,
            }
            | AtbRecord::KernelEnd {
                device: OptU32(d),
                path,
            } => {
                let end = matches!(r, AtbRecord::KernelEnd { .. });
                let path = String::from_utf8_lossy(path).into_owned();
                let name = kernel_name(&path).map(str::to_owned);
                let dev = device(ctx, tid, d);
                st.kernel = Some((name.clone(), dev));
                let mut ev = Event::new(
                    if end {
                        EventType::KernelEnd
                    } else {
                        EventType::KernelStart
                    },
                    ts,
                    ctx.pid,
                    tid,
                );
                ev.name = name;
                ev.device = dev;
                ev.attrs = Attrs::Launch(LaunchAttrs {
                    path: Some(path),
                    ..LaunchAttrs::default()
                });
                out.push(ev);
            }
            AtbRecord::TensorOp {
                access,
                addr,
                size,
                dtype,
                format,
                dims,
            }
            | AtbRecord::TensorKernel {
                access,
                addr,
                size,
                dtype,
                format,
                dims,
            } => {
                let owner = if matches!(r, AtbRecord::TensorKernel { .. }) {
                    st.kernel.clone()
                } else {
                    st.ops.last().cloned()
                };
                let (name, dev) = owner.unwrap_or_else(|| (None, device(ctx, tid, u32::MAX)));
                let t = match access {
                    AccessKind::Read => EventType::Read,
                    AccessKind::Write => EventType::Write,
                    AccessKind::Unknown => EventType::Unknown,
                };
                let mut ev = Event::new(t, ts, ctx.pid, tid);
                ev.name = name;
                ev.device = dev;
                ev.ptr = Some(addr);
                ev.attrs = Attrs::Access(AccessAttrs {
                    size: Some(size),
                    pool: Some("ATB".to_owned()),
                    dtype: Some(dtype_name(dtype)),
                    format: Some(format_name(format)),
                    shape: Some(shape_text(decode_dims(dims))),
                    ..AccessAttrs::default()
                });
                out.push(ev);
            }
        }
        true
    }
}

/// The `atb` adapter's typer: the pool part (msTX domain `atb`) and the operator part.
#[derive(Debug)]
pub struct AtbTyper {
    pool: PoolTyper,
    ops: OpsTyper,
}

impl Default for AtbTyper {
    fn default() -> Self {
        AtbTyper {
            pool: crate::pool::pool_typer(),
            ops: OpsTyper::default(),
        }
    }
}

impl Typer for AtbTyper {
    fn type_record(
        &mut self,
        ctx: &mut TypeCtx,
        tid: u32,
        rec: &Record<Box<[u8]>>,
        out: &mut Vec<Event>,
    ) -> bool {
        self.pool.type_record(ctx, tid, rec, out) || self.ops.type_record(ctx, tid, rec, out)
    }
}

/// A fresh [`AtbTyper`] for one process (for the adapter descriptor).
pub fn new_typer() -> Box<dyn Typer> {
    Box::<AtbTyper>::default()
}

#[cfg(test)]
#[path = "ops_tests.rs"]
mod tests;
