//! Fast encoders of the address records (`Malloc`, `Free`: the shared allocation-volume shape
//! HOST writes, and the compact MALLOC/FREE events of registered plugin types), the probe's hottest path (one per `malloc` and `free`): the same bytes as the
//! generic encoder, written into a fixed 64-byte window of the
//! output with masked indexes, so there are no bounds checks, no error flag and no panic path.
//! Used whenever at least [`FAST_ROOM`] bytes are left; near the end of a chunk the generic
//! encoder takes over.

use super::{tag, zigzag, ChunkState, Record};

/// Output bytes the fast encoders need (the longest host record is 36 bytes).
pub(crate) const FAST_ROOM: usize = 64;

type Window = [u8; FAST_ROOM];

/// Appends `v` as LEB128 at `pos`; returns the new position. Indexes are masked, so they stay
/// inside the window even for a (never occurring) position past it. (A branch-free variant
/// that spreads the 7-bit groups with shifts and stores 8 bytes at once measured slower on
/// our machines than this loop: most values here take 1–3 bytes.)
#[inline(always)]
fn var(w: &mut Window, mut pos: usize, mut v: u64) -> usize {
    while v >= 0x80 {
        w[pos & (FAST_ROOM - 1)] = (v as u8) | 0x80;
        v >>= 7;
        pos += 1;
    }
    w[pos & (FAST_ROOM - 1)] = v as u8;
    pos + 1
}

/// The zig-zag address delta of a host record and whether it was stored divided by 16.
#[inline(always)]
fn addr_delta(st: &ChunkState, addr: u64) -> (u64, bool) {
    let d = addr.wrapping_sub(st.last_addr) as i64;
    if d % 16 == 0 {
        (zigzag(d / 16), true)
    } else {
        (zigzag(d), false)
    }
}

#[inline(always)]
fn ts_delta(st: &mut ChunkState, t: u64) -> u64 {
    let d = t.saturating_sub(st.last_ts);
    st.last_ts = st.last_ts.max(t);
    d
}

/// Encodes `rec` if it is a `Malloc` or `Free` and `out` has [`FAST_ROOM`] bytes;
/// `None` otherwise (the caller uses the generic encoder). Updates `st` like it.
#[inline(always)]
pub(crate) fn encode<B: AsRef<[u8]>>(
    rec: &Record<B>,
    st: &mut ChunkState,
    out: &mut [u8],
) -> Option<usize> {
    match *rec {
        Record::Malloc {
            ts,
            addr,
            size,
            stack,
        } => {
            let w: &mut Window = out.get_mut(..FAST_ROOM)?.try_into().ok()?;
            let (a, a16) = addr_delta(st, addr);
            w[0] = match (stack == 0, a16) {
                (true, false) => tag::HOST_MALLOC,
                (false, false) => tag::HOST_MALLOC_STACK,
                (true, true) => tag::HOST_MALLOC_A16,
                (false, true) => tag::HOST_MALLOC_STACK_A16,
            };
            let mut pos = var(w, 1, ts_delta(st, ts));
            pos = var(w, pos, a);
            pos = var(w, pos, size);
            if stack != 0 {
                pos = var(w, pos, stack as u64);
            }
            st.last_addr = addr;
            Some(pos)
        }
        Record::Free { ts, addr } => {
            let w: &mut Window = out.get_mut(..FAST_ROOM)?.try_into().ok()?;
            let (a, a16) = addr_delta(st, addr);
            w[0] = if a16 {
                tag::HOST_FREE_A16
            } else {
                tag::HOST_FREE
            };
            let mut pos = var(w, 1, ts_delta(st, ts));
            pos = var(w, pos, a);
            st.last_addr = addr;
            Some(pos)
        }
        Record::Compact {
            ts,
            ty,
            kind,
            addr,
            size,
            ref values,
        } if super::compact::is_volume(kind, values) => {
            let w: &mut Window = out.get_mut(..FAST_ROOM)?.try_into().ok()?;
            let (a, a16) = addr_delta(st, addr);
            w[0] = super::compact::volume_tag(kind, a16);
            let mut pos = var(w, 1, ts_delta(st, ts));
            pos = var(w, pos, ty as u64);
            pos = var(w, pos, a);
            pos = var(w, pos, size);
            st.last_addr = addr;
            Some(pos)
        }
        _ => None,
    }
}
