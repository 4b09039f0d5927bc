//! A HOST row: the live block (heap block or mapping) and the `MALLOC`/`FREE` event of it, shared
//! by the heap typer and the mapping tracker.
#![forbid(unsafe_code)]

use memscope_collect::adapter::TypeCtx;
use memscope_core::event::{Attrs, Device, Event, EventKind, EventType, MemoryAttrs};

/// A live heap block or mapping: its `allocation_id` and size in bytes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Block {
    pub(crate) id: u64,
    pub(crate) size: u64,
}

/// A `MALLOC`/`FREE` row of type `t` (HOST or HOST_MMAP) on device `cpu`; `total` is the live
/// bytes of that type after the row, left out of rows the typer makes up (`shadow:true`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn host_row(
    ctx: &TypeCtx,
    t: EventType,
    kind: EventKind,
    ts: u64,
    tid: u32,
    addr: u64,
    b: Block,
    total: i64,
    shadow: bool,
) -> Event {
    let mut e = Event::new(t, ts, ctx.pid, tid);
    e.kind = kind;
    e.device = Device::Cpu;
    e.ptr = Some(addr);
    e.attrs = Attrs::Memory(MemoryAttrs {
        allocation_id: b.id,
        addr,
        size: b.size,
        total: (!shadow).then_some(total),
        shadow,
        ..MemoryAttrs::default()
    });
    e
}
