//! Tensor dimensions as a record field: zig-zag varints in one byte string, so a record keeps a
//! fixed shape whatever the rank (ATB tensors, and any adapter's).

use super::{unzigzag, zigzag, Out, StackFrames};

/// Longest dimension list a record carries (ATB's `Dims` holds 8).
pub const MAX_DIMS: usize = 8;

/// Encodes tensor dimensions into `out` (zig-zag varints, at most [`MAX_DIMS`] of them).
/// Returns the bytes written, or `None` if `out` is too small (80 bytes always suffice).
pub fn encode_dims(dims: &[i64], out: &mut [u8]) -> Option<usize> {
    let mut o = Out::new(out);
    for d in dims.iter().take(MAX_DIMS) {
        o.var(zigzag(*d));
    }
    o.finish()
}

/// Decodes the dimensions written by [`encode_dims`].
pub fn decode_dims(raw: &[u8]) -> impl Iterator<Item = i64> + '_ {
    StackFrames::new(raw).map(unzigzag)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dims_round_trip_and_stop_at_the_limit() {
        let mut buf = [0u8; 80];
        let n = encode_dims(&[2, -1, 1 << 40, 0, 5, 6, 7, 8, 9], &mut buf).unwrap();
        let back: Vec<i64> = decode_dims(&buf[..n]).collect();
        assert_eq!(back, [2, -1, 1 << 40, 0, 5, 6, 7, 8]);
        assert_eq!(encode_dims(&[1 << 40], &mut [0u8; 2]), None);
    }
}
