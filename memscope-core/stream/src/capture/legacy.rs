//! Capture format 2, read by this format-3 reader: its generic column held the CANN records
//! under their own stream tags (30–46) before those records moved to their adapters' crates
//! as per-source records ([`memscope_wire::Record::Source`]). The adapters kept each record's
//! fields and their encodings, so a format-2 record becomes an envelope by its tag alone: the
//! table below gives the source, the new tag and the field shapes (to find the record's end).

use memscope_wire::source::{class, is_definition_tag, tag_of};
use memscope_wire::{ChunkState, In, Record, SourceId, WireError};

/// The oldest capture format this reader maps.
pub(super) const OLDEST: u32 = 2;

/// ATB's, HAL's and ACL's source ids (`adapters/{atb,hal,acl}`: `SOURCE`).
const ATB: u16 = 3;
const HAL: u16 = 4;
const ACL: u16 = 5;

/// Format-2 tag → (source, per-source tag, fields after the time stamp: `v` a varint, `b` one
/// byte, `t` a length and bytes).
const MAP: [(u8, u16, u8, &str); 17] = [
    (30, HAL, tag_of(class::MALLOC, 0), "vvvv"),
    (31, HAL, tag_of(class::MALLOC, 1), "vvvvvvv"),
    (32, HAL, tag_of(class::FREE, 0), "vv"),
    (33, HAL, tag_of(class::FREE, 1), "vv"),
    (34, HAL, tag_of(class::SNAPSHOT, 0), "vvvvvv"),
    (35, HAL, tag_of(class::SNAPSHOT, 1), "vvvvvv"),
    (36, ACL, tag_of(class::MALLOC, 0), "vvvv"),
    (37, ACL, tag_of(class::FREE, 0), "vv"),
    (38, ACL, tag_of(class::STATE, 0), "v"),
    (39, ACL, tag_of(class::DEFINITION, 0), "vt"),
    (40, ACL, tag_of(class::KERNEL_LAUNCH, 0), "vvvv"),
    (41, ATB, tag_of(class::OP_LAUNCH, 0), "vvvtt"),
    (42, ATB, tag_of(class::OP_LAUNCH, 1), "vvvtt"),
    (43, ATB, tag_of(class::KERNEL_LAUNCH, 0), "vt"),
    (44, ATB, tag_of(class::KERNEL_LAUNCH, 1), "vt"),
    (45, ATB, tag_of(class::ACCESS, 0), "bvvvvt"),
    (46, ATB, tag_of(class::ACCESS, 1), "bvvvvt"),
];

/// Decodes one generic-column record of a format-2 capture (as [`memscope_wire::decode`]).
pub(super) fn decode_v2<'a>(
    buf: &'a [u8],
    st: &mut ChunkState,
) -> Result<(Record<&'a [u8]>, usize), WireError> {
    let t = *buf.first().ok_or(WireError::Truncated)?;
    let Some(&(_, source, tag, shape)) = MAP.iter().find(|m| m.0 == t) else {
        return memscope_wire::decode(buf, st);
    };
    let mut i = In::new(buf);
    i.u8()?;
    let mut next = *st;
    let ts = if is_definition_tag(tag) {
        0
    } else {
        next.last_ts = next.last_ts.wrapping_add(i.var()?);
        next.last_ts
    };
    let start = i.pos();
    for f in shape.bytes() {
        match f {
            b'v' => {
                i.var()?;
            }
            b'b' => {
                i.u8()?;
            }
            _ => {
                i.text()?;
            }
        }
    }
    let body = &buf[start..i.pos()];
    *st = next;
    let rec = Record::Source {
        source: SourceId(source),
        tag,
        ts,
        body,
    };
    Ok((rec, i.pos()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_2_cann_records_become_envelopes_with_the_same_fields() {
        // HAL_ALLOC at ts +5: addr 0x80, size 3, flag 1<<10, stack 0; then KERNEL_NAME (no ts)
        let raw = [30, 5, 0x80, 0x01, 3, 0x80, 0x08, 0, 39, 7, 1, b'k', 13];
        let mut st = ChunkState::default();
        let (rec, n) = decode_v2(&raw, &mut st).unwrap();
        assert_eq!(
            rec,
            Record::Source {
                source: SourceId(HAL),
                tag: 0x10,
                ts: 5,
                body: &raw[2..8],
            }
        );
        let (rec, m) = decode_v2(&raw[n..], &mut st).unwrap();
        assert_eq!(rec.ts(), None);
        assert!(matches!(
            rec,
            Record::Source {
                tag: 0xf0,
                body: &[7, 1, b'k'],
                ..
            }
        ));
        assert_eq!(st.last_ts, 5);
        // a truncated record leaves the state alone
        assert_eq!(decode_v2(&raw[..4], &mut st), Err(WireError::Truncated));
        assert_eq!(n + m, 12);
    }
}
