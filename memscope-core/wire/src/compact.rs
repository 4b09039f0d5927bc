//! Codec of the compact event family (plugin ABI 1.2, `schemas/memscope_plugin.h`): tags 100–109.
//!
//! * [`Record::EventTypeDef`]: an event type a plugin registered (`register_type`), written once
//!   per thread and stream before the thread's first event of it (a definition: no time stamp).
//!   Its texts travel here, never with the events.
//! * [`Record::Compact`]: one event of a registered type (`emit_compact`). MALLOC and FREE events
//!   without attribute values take the allocation-volume shape of the address records: the type
//!   id, the address as a delta to the chunk's previous address (divided by 16 when it is a
//!   multiple: the `_A16` tags) and the size, about 6 bytes. Any other event takes the generic
//!   shape (kind, absolute address, size, values).

use super::{tag as shared, zigzag, ChunkState, In, Out, Record, WireError};

pub(super) mod tag {
    pub const COMPACT_MALLOC: u8 = 100;
    pub const COMPACT_MALLOC_A16: u8 = 101;
    pub const COMPACT_FREE: u8 = 102;
    pub const COMPACT_FREE_A16: u8 = 103;
    pub const COMPACT: u8 = 104;
    pub const EVENT_TYPE_DEF: u8 = 105;
    /// Last tag of the range.
    pub const LAST: u8 = 109;
}

/// Plugin ABI kind codes of the allocation-volume shape.
pub(super) const KIND_MALLOC: u8 = 1;
pub(super) const KIND_FREE: u8 = 2;

/// Whether `rec` takes the allocation-volume shape (a MALLOC or FREE without values).
#[inline(always)]
pub(super) fn is_volume<B: AsRef<[u8]>>(kind: u8, values: &B) -> bool {
    matches!(kind, KIND_MALLOC | KIND_FREE) && values.as_ref().is_empty()
}

/// The tag of a volume-shaped event whose address delta is `a16`-divided or not.
#[inline(always)]
pub(super) fn volume_tag(kind: u8, a16: bool) -> u8 {
    match (kind == KIND_MALLOC, a16) {
        (true, false) => tag::COMPACT_MALLOC,
        (true, true) => tag::COMPACT_MALLOC_A16,
        (false, false) => tag::COMPACT_FREE,
        (false, true) => tag::COMPACT_FREE_A16,
    }
}

/// Encodes a record of this file (caller guarantees the variant).
pub(super) fn encode<B: AsRef<[u8]>>(rec: &Record<B>, o: &mut Out<'_>, next: &mut ChunkState) {
    match rec {
        Record::EventTypeDef {
            id,
            device,
            flags,
            event_type,
            name,
            attrs,
            values,
        } => {
            o.u8(tag::EVENT_TYPE_DEF);
            o.var(u64::from(*id));
            o.var(u64::from(*device));
            o.var(u64::from(*flags));
            o.text(event_type.as_ref());
            o.text(name.as_ref());
            o.text(attrs.as_ref());
            o.text(values.as_ref());
        }
        Record::Compact {
            ts,
            ty,
            kind,
            addr,
            size,
            values,
        } => {
            let d = ts.saturating_sub(next.last_ts);
            if is_volume(*kind, values) {
                let delta = addr.wrapping_sub(next.last_addr) as i64;
                let a16 = delta % 16 == 0;
                o.u8(volume_tag(*kind, a16));
                o.var(d);
                next.last_ts = next.last_ts.max(*ts);
                o.var(u64::from(*ty));
                o.var(zigzag(if a16 { delta / 16 } else { delta }));
                o.var(*size);
                next.last_addr = *addr;
            } else {
                o.u8(tag::COMPACT);
                o.var(d);
                next.last_ts = next.last_ts.max(*ts);
                o.var(u64::from(*ty));
                o.u8(*kind);
                o.var(*addr);
                o.var(*size);
                o.text(values.as_ref());
            }
        }
        _ => o.ok = false,
    }
}

/// Decodes the body of a record whose tag `t` is in [`tag`]'s range.
#[inline]
pub(super) fn decode<'a>(
    t: u8,
    i: &mut In<'a>,
    next: &mut ChunkState,
) -> Result<Record<&'a [u8]>, WireError> {
    Ok(match t {
        tag::COMPACT_MALLOC
        | tag::COMPACT_MALLOC_A16
        | tag::COMPACT_FREE
        | tag::COMPACT_FREE_A16 => {
            let ts = i.ts(next)?;
            let ty = i.u32()?;
            let addr = if matches!(t, tag::COMPACT_MALLOC_A16 | tag::COMPACT_FREE_A16) {
                i.addr16(next)?
            } else {
                i.addr(next)?
            };
            let kind = if t <= tag::COMPACT_MALLOC_A16 {
                KIND_MALLOC
            } else {
                KIND_FREE
            };
            Record::Compact {
                ts,
                ty,
                kind,
                addr,
                size: i.var()?,
                values: &[],
            }
        }
        tag::COMPACT => Record::Compact {
            ts: i.ts(next)?,
            ty: i.u32()?,
            kind: i.u8()?,
            addr: i.var()?,
            size: i.var()?,
            values: i.text()?,
        },
        tag::EVENT_TYPE_DEF => Record::EventTypeDef {
            id: i.u32()?,
            device: i.u32()?,
            flags: i.u32()?,
            event_type: i.text()?,
            name: i.text()?,
            attrs: i.text()?,
            values: i.text()?,
        },
        _ => return Err(WireError::BadTag(t)),
    })
}

/// Copies a record of this file (`None` for a variant of another file). A compact event without
/// values allocates nothing (an empty box).
pub(super) fn to_owned<B: AsRef<[u8]>>(rec: &Record<B>) -> Option<Record<Box<[u8]>>> {
    let b = |x: &B| -> Box<[u8]> { x.as_ref().into() };
    Some(match rec {
        Record::EventTypeDef {
            id,
            device,
            flags,
            event_type,
            name,
            attrs,
            values,
        } => Record::EventTypeDef {
            id: *id,
            device: *device,
            flags: *flags,
            event_type: b(event_type),
            name: b(name),
            attrs: b(attrs),
            values: b(values),
        },
        Record::Compact {
            ts,
            ty,
            kind,
            addr,
            size,
            values,
        } => Record::Compact {
            ts: *ts,
            ty: *ty,
            kind: *kind,
            addr: *addr,
            size: *size,
            values: b(values),
        },
        _ => return None,
    })
}

/// Appends the values of a compact event (`values`: one `u64` per name the type registered)
/// as the varints [`Record::Compact`] carries; returns the bytes written into `out`.
pub fn encode_values(values: &[u64], out: &mut [u8]) -> usize {
    let mut o = Out {
        buf: out,
        pos: 0,
        ok: true,
    };
    for &v in values {
        o.var(v);
    }
    if o.ok {
        o.pos
    } else {
        0
    }
}

/// The values of a compact event, in the order of the type's value names.
pub fn decode_values(bytes: &[u8]) -> impl Iterator<Item = u64> + '_ {
    let mut i = In { buf: bytes, pos: 0 };
    core::iter::from_fn(move || i.var().ok())
}

const _: () =
    assert!(shared::SOURCE < tag::COMPACT_MALLOC && super::sample::tag::LAST < tag::COMPACT_MALLOC);
