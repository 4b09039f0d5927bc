//! Codec of the sampled-memory records of issue 25 (`--sample`): tags 90–99, written by the
//! probe's sampler thread on a timer, apart from every hook (`memscope-runtime/src/sampler.rs`).
//!
//! * [`Record::ProcessSample`]: the process's resident and anonymous resident bytes
//!   (`/proc/self/statm`).
//! * [`Record::DeviceSample`]: a device's used and free bytes as its runtime reports them
//!   (`aclrtGetMemInfo`).
//!
//! Kept in its own file and tag range so the sampled-memory source can move as one piece.

use super::{ChunkState, In, Out, Record, WireError};

pub(super) mod tag {
    pub const HOST_SAMPLE: u8 = 90;
    pub const DEVICE_SAMPLE: u8 = 91;
    /// Last tag of the range.
    pub const LAST: u8 = 99;
}

/// Encodes a record of this file (caller guarantees the variant).
pub(super) fn encode<B: AsRef<[u8]>>(rec: &Record<B>, o: &mut Out<'_>, next: &mut ChunkState) {
    match rec {
        Record::ProcessSample { ts, rss, anon } => {
            o.u8(tag::HOST_SAMPLE);
            o.var(ts.wrapping_sub(next.last_ts));
            next.last_ts = *ts;
            o.var(*rss);
            o.var(*anon);
        }
        Record::DeviceSample {
            ts,
            device,
            used,
            free,
        } => {
            o.u8(tag::DEVICE_SAMPLE);
            o.var(ts.wrapping_sub(next.last_ts));
            next.last_ts = *ts;
            o.var(u64::from(*device));
            o.var(*used);
            o.var(*free);
        }
        _ => o.ok = false,
    }
}

/// Decodes the body of a record whose tag `t` is in [`tag`]'s range.
pub(super) fn decode<'a>(
    t: u8,
    i: &mut In<'a>,
    next: &mut ChunkState,
) -> Result<Record<&'a [u8]>, WireError> {
    Ok(match t {
        tag::HOST_SAMPLE => Record::ProcessSample {
            ts: i.ts(next)?,
            rss: i.var()?,
            anon: i.var()?,
        },
        tag::DEVICE_SAMPLE => Record::DeviceSample {
            ts: i.ts(next)?,
            device: i.u32()?,
            used: i.var()?,
            free: i.var()?,
        },
        _ => return Err(WireError::BadTag(t)),
    })
}

/// Copies a record of this file (`None` for a variant of another file).
pub(super) fn to_owned<B>(rec: &Record<B>) -> Option<Record<Box<[u8]>>> {
    match *rec {
        Record::ProcessSample { ts, rss, anon } => Some(Record::ProcessSample { ts, rss, anon }),
        Record::DeviceSample {
            ts,
            device,
            used,
            free,
        } => Some(Record::DeviceSample {
            ts,
            device,
            used,
            free,
        }),
        _ => None,
    }
}
