//! Fast encoders of the host-allocator records, the probe's hottest path (one per `malloc` and
//! `free`): the same bytes as the generic encoder, written into a fixed 64-byte window of the
//! output with masked indexes, so there are no bounds checks, no error flag and no panic path.
//! Used whenever at least [`FAST_ROOM`] bytes are left; near the end of a chunk the generic
//! encoder takes over.

use super::{tag, zigzag, ChunkState, Record};

/// Output bytes the fast encoders need (the longest host record is 36 bytes; each varint may
/// store 8 bytes at once, of which only its own count).
pub(crate) const FAST_ROOM: usize = 80;

type Window = [u8; FAST_ROOM];

/// The 56 low bits of `v` spread into 8 groups of 7 bits, one per byte (LEB128 without the
/// continuation bits), in three halving steps (28|28, 14|14, 7|7).
#[inline(always)]
fn spread(v: u64) -> u64 {
    let x = v & ((1 << 56) - 1);
    let x = ((x & 0x00FF_FFFF_F000_0000) << 4) | (x & 0x0FFF_FFFF);
    let x = ((x & 0x0FFF_C000_0FFF_C000) << 2) | (x & 0x0000_3FFF_0000_3FFF);
    ((x & 0x3F80_3F80_3F80_3F80) << 1) | (x & 0x007F_007F_007F_007F)
}

/// Appends `v` as LEB128 at `pos`; returns the new position. Values below 2^56 (all but the
/// first time stamp of a chunk) take no data-dependent branch: the bytes are computed at once
/// and stored as one 8-byte word, of which only the varint's length counts. The index is
/// masked, so every store stays inside the window.
#[inline(always)]
fn var(w: &mut Window, pos: usize, mut v: u64) -> usize {
    let p = pos & 63;
    if v < 1 << 56 {
        let n = ((70 - (v | 1).leading_zeros()) / 7) as usize;
        let cont = 0x8080_8080_8080_8080u64 & ((1u64 << (8 * (n - 1))) - 1);
        w[p..p + 8].copy_from_slice(&(spread(v) | cont).to_le_bytes());
        return pos + n;
    }
    let mut pos = pos;
    while v >= 0x80 {
        w[pos & 63] = (v as u8) | 0x80;
        v >>= 7;
        pos += 1;
    }
    w[pos & 63] = v as u8;
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

/// Encodes `rec` if it is a `HostMalloc` or `HostFree` and `out` has [`FAST_ROOM`] bytes;
/// `None` otherwise (the caller uses the generic encoder). Updates `st` like it.
#[inline(always)]
pub(crate) fn encode<B>(rec: &Record<B>, st: &mut ChunkState, out: &mut [u8]) -> Option<usize> {
    match *rec {
        Record::HostMalloc {
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
        Record::HostFree { ts, addr } => {
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
        _ => None,
    }
}
