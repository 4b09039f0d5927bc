//! Codec of the records of issue 13 — Python stacks on every event, Aten operators and their
//! tensors, CPU tensors, memory-watch dumps: tags 76–89 of the Python range (`python.rs`
//! delegates them here).
//!
//! * [`Record::PyFrameDef`] interns one node of the Python stack trie (parent node, code id,
//!   line) once per process image and writing thread; [`Record::PyStack`] names the writing
//!   thread's current node, written before a row only when it changed — so a row pays
//!   nothing while its thread's Python stack stays the same, and 2–4 bytes when it moved.
//! * [`Record::AtenOp`] / [`Record::AtenTensor`]: the Python package's `TorchDispatchMode`.
//! * [`Record::CpuTensor`]: CPU tensor storages created and released.
//! * [`Record::WatchDump`]: memory-watch checksums or bytes.

use super::{AccessKind, ChunkState, In, Out, Record, WireError};

pub(super) mod tag {
    pub const PY_FRAME_DEF: u8 = 76;
    pub const PY_STACK: u8 = 77;
    pub const ATEN_OP_START: u8 = 78;
    pub const ATEN_OP_END: u8 = 79;
    pub const ATEN_TENSOR: u8 = 80;
    pub const CPU_TENSOR_ALLOC: u8 = 81;
    pub const CPU_TENSOR_FREE: u8 = 82;
    pub const WATCH_SUM: u8 = 83;
    pub const WATCH_DATA: u8 = 84;
}

/// Encodes a record of this file (caller guarantees the variant).
pub(super) fn encode<B: AsRef<[u8]>>(rec: &Record<B>, o: &mut Out<'_>, next: &mut ChunkState) {
    let ts = |o: &mut Out<'_>, next: &mut ChunkState, t: u64| {
        o.var(t.wrapping_sub(next.last_ts));
        next.last_ts = t;
    };
    let dev = |o: &mut Out<'_>, d: u32| o.var(d.wrapping_add(1) as u64);
    match rec {
        Record::PyFrameDef {
            id,
            parent,
            code,
            line,
        } => {
            o.u8(tag::PY_FRAME_DEF);
            o.var(*id as u64);
            o.var(*parent as u64);
            o.var(*code as u64);
            o.var(*line as u64);
        }
        Record::PyStack { ts: t, node } => {
            o.u8(tag::PY_STACK);
            ts(o, next, *t);
            o.var(*node as u64);
        }
        Record::AtenOp {
            ts: t,
            end,
            device,
            name,
        } => {
            o.u8(if *end {
                tag::ATEN_OP_END
            } else {
                tag::ATEN_OP_START
            });
            ts(o, next, *t);
            dev(o, *device);
            o.text(name.as_ref());
        }
        Record::AtenTensor {
            ts: t,
            access,
            device,
            addr,
            size,
            meta,
        } => {
            o.u8(tag::ATEN_TENSOR);
            ts(o, next, *t);
            o.u8(*access as u8);
            dev(o, *device);
            o.var(*addr);
            o.var(*size);
            o.text(meta.as_ref());
        }
        Record::CpuTensor {
            ts: t,
            free,
            addr,
            size,
        } => {
            o.u8(if *free {
                tag::CPU_TENSOR_FREE
            } else {
                tag::CPU_TENSOR_ALLOC
            });
            ts(o, next, *t);
            o.var(*addr);
            o.var(*size);
        }
        Record::WatchDump {
            ts: t,
            device,
            value,
            full,
            name,
            data,
        } => {
            o.u8(if *full {
                tag::WATCH_DATA
            } else {
                tag::WATCH_SUM
            });
            ts(o, next, *t);
            dev(o, *device);
            o.var(*value);
            o.text(name.as_ref());
            o.text(data.as_ref());
        }
        _ => o.ok = false,
    }
}

/// Decodes the body of a record whose tag `t` is one of [`tag`].
pub(super) fn decode<'a>(
    t: u8,
    i: &mut In<'a>,
    next: &mut ChunkState,
) -> Result<Record<&'a [u8]>, WireError> {
    let dev = |i: &mut In<'a>| -> Result<u32, WireError> { Ok(i.u32()?.wrapping_sub(1)) };
    Ok(match t {
        tag::PY_FRAME_DEF => Record::PyFrameDef {
            id: i.u32()?,
            parent: i.u32()?,
            code: i.u32()?,
            line: i.u32()?,
        },
        tag::PY_STACK => Record::PyStack {
            ts: i.ts(next)?,
            node: i.u32()?,
        },
        tag::ATEN_OP_START | tag::ATEN_OP_END => Record::AtenOp {
            ts: i.ts(next)?,
            end: t == tag::ATEN_OP_END,
            device: dev(i)?,
            name: i.text()?,
        },
        tag::ATEN_TENSOR => {
            let ts = i.ts(next)?;
            let a = i.u8()?;
            Record::AtenTensor {
                ts,
                access: AccessKind::from_u8(a).ok_or(WireError::BadTag(a))?,
                device: dev(i)?,
                addr: i.var()?,
                size: i.var()?,
                meta: i.text()?,
            }
        }
        tag::CPU_TENSOR_ALLOC | tag::CPU_TENSOR_FREE => Record::CpuTensor {
            ts: i.ts(next)?,
            free: t == tag::CPU_TENSOR_FREE,
            addr: i.var()?,
            size: i.var()?,
        },
        tag::WATCH_SUM | tag::WATCH_DATA => Record::WatchDump {
            ts: i.ts(next)?,
            device: dev(i)?,
            value: i.var()?,
            full: t == tag::WATCH_DATA,
            name: i.text()?,
            data: i.text()?,
        },
        other => return Err(WireError::BadTag(other)),
    })
}

/// The time stamp of a record of this file (`None` for [`Record::PyFrameDef`]).
pub(super) fn ts_of<B>(rec: &Record<B>) -> Option<u64> {
    match rec {
        Record::PyStack { ts, .. }
        | Record::AtenOp { ts, .. }
        | Record::AtenTensor { ts, .. }
        | Record::CpuTensor { ts, .. }
        | Record::WatchDump { ts, .. } => Some(*ts),
        _ => None,
    }
}

/// Copies a record's borrowed texts (`None` for a variant of another file).
pub(super) fn to_owned<B: AsRef<[u8]>>(rec: &Record<B>) -> Option<Record<Box<[u8]>>> {
    let b = |x: &B| -> Box<[u8]> { x.as_ref().into() };
    Some(match rec {
        Record::PyFrameDef {
            id,
            parent,
            code,
            line,
        } => Record::PyFrameDef {
            id: *id,
            parent: *parent,
            code: *code,
            line: *line,
        },
        Record::PyStack { ts, node } => Record::PyStack {
            ts: *ts,
            node: *node,
        },
        Record::AtenOp {
            ts,
            end,
            device,
            name,
        } => Record::AtenOp {
            ts: *ts,
            end: *end,
            device: *device,
            name: b(name),
        },
        Record::AtenTensor {
            ts,
            access,
            device,
            addr,
            size,
            meta,
        } => Record::AtenTensor {
            ts: *ts,
            access: *access,
            device: *device,
            addr: *addr,
            size: *size,
            meta: b(meta),
        },
        Record::CpuTensor {
            ts,
            free,
            addr,
            size,
        } => Record::CpuTensor {
            ts: *ts,
            free: *free,
            addr: *addr,
            size: *size,
        },
        Record::WatchDump {
            ts,
            device,
            value,
            full,
            name,
            data,
        } => Record::WatchDump {
            ts: *ts,
            device: *device,
            value: *value,
            full: *full,
            name: b(name),
            data: b(data),
        },
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::super::{decode, ChunkState, Record};
    use super::*;

    #[test]
    fn stack_aten_cpu_tensor_and_watch_records_round_trip_and_stack_switches_are_small() {
        let recs: [Record<&[u8]>; 10] = [
            Record::PyFrameDef {
                id: 3,
                parent: 2,
                code: 7,
                line: 120,
            },
            Record::PyStack {
                ts: 1_700_000_000_000_000_000,
                node: 3,
            },
            Record::AtenOp {
                ts: 1_700_000_000_000_000_010,
                end: false,
                device: u32::MAX - 1,
                name: b"torch._ops.aten.add.Tensor",
            },
            Record::AtenTensor {
                ts: 1_700_000_000_000_000_020,
                access: AccessKind::Read,
                device: 0,
                addr: 0x7f00_0000_1000,
                size: 24,
                meta: b"torch.float32\ntorch.Size([2, 3])",
            },
            Record::AtenOp {
                ts: 1_700_000_000_000_000_030,
                end: true,
                device: u32::MAX,
                name: b"torch._ops.aten.add.Tensor",
            },
            Record::CpuTensor {
                ts: 1_700_000_000_000_000_040,
                free: false,
                addr: 0x5000,
                size: 4096,
            },
            Record::CpuTensor {
                ts: 1_700_000_000_000_000_050,
                free: true,
                addr: 0x5000,
                size: 4096,
            },
            Record::WatchDump {
                ts: 1_700_000_000_000_000_060,
                device: 0,
                value: 0xdead_beef,
                full: false,
                name: b"0_1/add_0-w_0_after",
                data: b"",
            },
            Record::WatchDump {
                ts: 1_700_000_000_000_000_070,
                device: 0,
                value: 512,
                full: true,
                name: b"",
                data: &[1, 2, 3],
            },
            Record::PyStack {
                ts: 1_700_000_000_000_000_075,
                node: 300,
            },
        ];
        let mut buf = vec![0u8; 4096];
        let mut st = ChunkState::default();
        let mut pos = 0;
        let mut sizes = Vec::new();
        for r in &recs {
            let n = r.encode(&mut st, &mut buf[pos..]).expect("fits");
            sizes.push(n);
            pos += n;
        }
        assert!(sizes[9] <= 4, "a stack switch after another row: {sizes:?}");
        let mut st = ChunkState::default();
        let mut at = 0;
        for r in &recs {
            let (got, n) = decode(&buf[at..pos], &mut st).expect("decodes");
            assert_eq!(&got, r);
            assert_eq!(got.to_owned().ts(), r.ts());
            at += n;
        }
    }
}
