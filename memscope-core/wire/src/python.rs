//! Codec of the Python-API records (issue 12): tags 70–89 of the stream format. Kept apart from
//! the other records so `wire.rs` only delegates to it.
//!
//! * [`Record::PyCodeDef`] interns one traced callable (a code object, a C function, an
//!   `nn.Module` class, a `RecordFunction` name) once per process image; calls and returns then
//!   carry only its id (2–4 bytes a record).
//! * [`Record::PyCall`] / [`Record::PyReturn`]: the C-level profile hook of the probe
//!   (`python_trace` files, spec §5.4), on the clock of every other record.
//! * [`Record::PyTrace`]: tracer start/stop and the frames already on the caller's stack then.
//! * [`Record::Snapshot`]: `take_snapshot()` (SNAPSHOT row); values the framework could not give
//!   are filled by the collector from its pool accounting.
//! * [`Record::OwnerTag`]: `describer(addr, owner=…)` tags the live block at `addr`.

use super::{ChunkState, In, Out, PyCodeKind, PyTraceEvent, Record, WireError};

pub(super) mod tag {
    pub const PY_CODE_DEF: u8 = 70;
    pub const PY_CALL: u8 = 71;
    pub const PY_RETURN: u8 = 72;
    pub const PY_TRACE: u8 = 73;
    pub const SNAPSHOT: u8 = 74;
    pub const OWNER_TAG: u8 = 75;
    /// Last tag of the Python range.
    pub const LAST: u8 = 89;
}

/// Bits of [`Record::Snapshot`]'s `known` mask, one per value (in field order).
pub mod snapshot_known {
    /// `total` is known.
    pub const TOTAL: u8 = 1;
    /// `free` is known.
    pub const FREE: u8 = 2;
    /// `reserved` is known.
    pub const RESERVED: u8 = 4;
    /// `peak_reserved` is known.
    pub const PEAK_RESERVED: u8 = 8;
    /// `allocated` is known.
    pub const ALLOCATED: u8 = 16;
    /// `peak_allocated` is known.
    pub const PEAK_ALLOCATED: u8 = 32;
}

/// Encodes a Python record (caller guarantees the variant).
pub(super) fn encode<B: AsRef<[u8]>>(rec: &Record<B>, o: &mut Out<'_>, next: &mut ChunkState) {
    let ts = |o: &mut Out<'_>, next: &mut ChunkState, t: u64| {
        o.var(t.wrapping_sub(next.last_ts));
        next.last_ts = t;
    };
    match rec {
        Record::PyCodeDef {
            id,
            kind,
            line,
            file,
            name,
        } => {
            o.u8(tag::PY_CODE_DEF);
            o.var(*id as u64);
            o.u8(*kind as u8);
            o.var(*line as u64);
            o.text(file.as_ref());
            o.text(name.as_ref());
        }
        Record::PyCall { ts: t, code } => {
            o.u8(tag::PY_CALL);
            ts(o, next, *t);
            o.var(*code as u64);
        }
        Record::PyReturn { ts: t, code } => {
            o.u8(tag::PY_RETURN);
            ts(o, next, *t);
            o.var(*code as u64);
        }
        Record::PyTrace { ts: t, event, code } => {
            o.u8(tag::PY_TRACE);
            ts(o, next, *t);
            o.u8(*event as u8);
            o.var(*code as u64);
        }
        Record::Snapshot {
            ts: t,
            device,
            known,
            values,
            name,
        } => {
            o.u8(tag::SNAPSHOT);
            ts(o, next, *t);
            o.var(device.wrapping_add(1) as u64);
            o.u8(*known);
            for v in values {
                o.var(*v);
            }
            o.text(name.as_ref());
        }
        Record::OwnerTag { ts: t, addr, label } => {
            o.u8(tag::OWNER_TAG);
            ts(o, next, *t);
            o.var(*addr);
            o.text(label.as_ref());
        }
        _ => o.ok = false,
    }
}

/// Decodes the body of a record whose tag `t` is in 70..=89.
pub(super) fn decode<'a>(
    t: u8,
    i: &mut In<'a>,
    next: &mut ChunkState,
) -> Result<Record<&'a [u8]>, WireError> {
    Ok(match t {
        tag::PY_CODE_DEF => {
            let id = i.u32()?;
            let k = i.u8()?;
            let kind = PyCodeKind::from_u8(k).ok_or(WireError::BadTag(k))?;
            Record::PyCodeDef {
                id,
                kind,
                line: i.u32()?,
                file: i.text()?,
                name: i.text()?,
            }
        }
        tag::PY_CALL => Record::PyCall {
            ts: i.ts(next)?,
            code: i.u32()?,
        },
        tag::PY_RETURN => Record::PyReturn {
            ts: i.ts(next)?,
            code: i.u32()?,
        },
        tag::PY_TRACE => {
            let ts = i.ts(next)?;
            let e = i.u8()?;
            let event = PyTraceEvent::from_u8(e).ok_or(WireError::BadTag(e))?;
            Record::PyTrace {
                ts,
                event,
                code: i.u32()?,
            }
        }
        tag::SNAPSHOT => {
            let ts = i.ts(next)?;
            let device = i.u32()?.wrapping_sub(1);
            let known = i.u8()?;
            let mut values = [0u64; 6];
            for v in &mut values {
                *v = i.var()?;
            }
            Record::Snapshot {
                ts,
                device,
                known,
                values,
                name: i.text()?,
            }
        }
        tag::OWNER_TAG => Record::OwnerTag {
            ts: i.ts(next)?,
            addr: i.var()?,
            label: i.text()?,
        },
        other => return Err(WireError::BadTag(other)),
    })
}

/// The time stamp of a Python record (`None` for [`Record::PyCodeDef`] and other variants).
pub(super) fn ts_of<B>(rec: &Record<B>) -> Option<u64> {
    match rec {
        Record::PyCall { ts, .. }
        | Record::PyReturn { ts, .. }
        | Record::PyTrace { ts, .. }
        | Record::Snapshot { ts, .. }
        | Record::OwnerTag { ts, .. } => Some(*ts),
        _ => None,
    }
}

/// Copies a Python record's borrowed texts (`None` for any other variant).
pub(super) fn to_owned<B: AsRef<[u8]>>(rec: &Record<B>) -> Option<Record<Box<[u8]>>> {
    let b = |x: &B| -> Box<[u8]> { x.as_ref().into() };
    Some(match rec {
        Record::PyCodeDef {
            id,
            kind,
            line,
            file,
            name,
        } => Record::PyCodeDef {
            id: *id,
            kind: *kind,
            line: *line,
            file: b(file),
            name: b(name),
        },
        Record::PyCall { ts, code } => Record::PyCall {
            ts: *ts,
            code: *code,
        },
        Record::PyReturn { ts, code } => Record::PyReturn {
            ts: *ts,
            code: *code,
        },
        Record::PyTrace { ts, event, code } => Record::PyTrace {
            ts: *ts,
            event: *event,
            code: *code,
        },
        Record::Snapshot {
            ts,
            device,
            known,
            values,
            name,
        } => Record::Snapshot {
            ts: *ts,
            device: *device,
            known: *known,
            values: *values,
            name: b(name),
        },
        Record::OwnerTag { ts, addr, label } => Record::OwnerTag {
            ts: *ts,
            addr: *addr,
            label: b(label),
        },
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::super::{decode, ChunkState, Record};
    use super::*;

    #[test]
    fn python_records_round_trip_and_calls_are_small() {
        let recs: [Record<&[u8]>; 7] = [
            Record::OwnerTag {
                ts: 5,
                addr: 0x1000,
                label: b"weights",
            },
            Record::PyCodeDef {
                id: 7,
                kind: PyCodeKind::Function,
                line: 12,
                file: b"/w/train.py",
                name: b"forward",
            },
            Record::PyTrace {
                ts: 1_700_000_000_000_000_000,
                event: PyTraceEvent::Start,
                code: 0,
            },
            Record::PyCall {
                ts: 1_700_000_000_000_000_100,
                code: 7,
            },
            Record::PyReturn {
                ts: 1_700_000_000_000_000_300,
                code: 7,
            },
            Record::Snapshot {
                ts: 1_700_000_000_000_001_000,
                device: u32::MAX,
                known: snapshot_known::TOTAL | snapshot_known::FREE,
                values: [64 << 30, 60 << 30, 0, 0, 0, 0],
                name: b"Memory Snapshot",
            },
            Record::PyTrace {
                ts: 1_700_000_000_000_002_000,
                event: PyTraceEvent::FrameAtStop,
                code: 7,
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
        assert!(sizes[3] <= 4 && sizes[4] <= 4, "{sizes:?}");
        let mut st = ChunkState::default();
        let mut at = 0;
        for r in &recs {
            let (got, n) = decode(&buf[at..pos], &mut st).expect("decodes");
            assert_eq!(&got, r);
            assert_eq!(got.to_owned().ts(), r.ts());
            at += n;
        }
        assert_eq!(PyCodeKind::from_u8(9), None);
        assert!(decode(&[tag::PY_TRACE, 1, 9, 0], &mut ChunkState::default()).is_err());
    }
}
