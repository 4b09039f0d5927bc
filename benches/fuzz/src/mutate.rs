//! The mutator: a seeded RNG, numbers on the readers' bounds, byte- and block-level
//! mutations, dictionary tokens, splices, and stretches to many megabytes.

/// A fixed-seed pseudo-random generator (SplitMix64): the same seed gives the same run.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator started at `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }

    /// True once in `n` calls on average.
    pub fn one_in(&mut self, n: usize) -> bool {
        self.below(n) == 0
    }

    /// One element of `v` (non-empty).
    pub fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len())]
    }
}

/// Numbers that sit on the edges of the readers' types and bounds.
pub const INTERESTING: &[&str] = &[
    "0",
    "-1",
    "1",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "18446744073709551615",
    "18446744073709551616",
    "99999999999999999999999",
    "4294967295",
    "4294967296",
    "0x",
    "0xffffffffffffffff",
    "0x8000000000000000",
    "1.5e4",
    "NaN",
    "+5",
    " 7 ",
    "\u{0}",
    "100000000000000",
    "100000000000000000",
];

/// Applies one random mutation to `data`.
pub(crate) fn mutate_once(
    rng: &mut Rng,
    data: &mut Vec<u8>,
    dict: &[Vec<u8>],
    other: &[u8],
    max: usize,
) {
    let len = data.len();
    match rng.below(12) {
        0 if len > 0 => {
            let i = rng.below(len);
            data[i] ^= 1 << rng.below(8);
        }
        1 if len > 0 => {
            let i = rng.below(len);
            data[i] = rng.next_u64() as u8;
        }
        2 => {
            let i = rng.below(len + 1);
            data.insert(i, *rng.pick(b",\"\n\r{}:0x\\\0 \t-+.e"));
        }
        3 if len > 0 => {
            let i = rng.below(len);
            let n = 1 + rng.below((len - i).min(64));
            data.drain(i..i + n);
        }
        4 if len > 0 => {
            // copy a block elsewhere (duplicates rows, cells, nesting)
            let i = rng.below(len);
            let n = 1 + rng.below((len - i).min(256));
            let block = data[i..i + n].to_vec();
            let at = rng.below(len + 1);
            data.splice(at..at, block);
        }
        5 | 6 if !dict.is_empty() => {
            let tok = rng.pick(dict).clone();
            let at = rng.below(len + 1);
            if rng.one_in(2) && len > 0 {
                let end = (at + tok.len()).min(len);
                data.splice(at..end, tok);
            } else {
                data.splice(at..at, tok);
            }
        }
        7 => {
            let n = rng.pick(INTERESTING).as_bytes().to_vec();
            let at = rng.below(len + 1);
            data.splice(at..at, n);
        }
        8 if !other.is_empty() => {
            // splice: our head, the other's tail
            let a = rng.below(len + 1);
            let b = rng.below(other.len());
            data.truncate(a);
            data.extend_from_slice(&other[b..]);
        }
        9 if len > 0 => {
            // truncate (torn writes)
            data.truncate(rng.below(len));
        }
        10 if len > 0 => {
            // repeat one line / region many times
            let i = rng.below(len);
            let n = 1 + rng.below((len - i).min(200));
            let block = data[i..i + n].to_vec();
            let times = 1 + rng.below(64);
            for _ in 0..times {
                if data.len() + block.len() > max {
                    break;
                }
                data.extend_from_slice(&block);
            }
        }
        _ => {
            let i = rng.below(len + 1);
            let b = rng.next_u64().to_le_bytes();
            data.splice(i..i, b[..1 + rng.below(8)].iter().copied());
        }
    }
}

/// Makes an input far larger than the mutation limit: a prefix of `data`, then megabytes of
/// one byte or one repeated slice (no newline, endless cells, deep nesting).
pub(crate) fn stretch(rng: &mut Rng, data: &[u8], max: usize) -> Vec<u8> {
    let mut v = data[..rng.below(data.len() + 1)].to_vec();
    // 1 MiB, 2 MiB, … up to `max`, the large ones as likely as the small
    let steps = (max.max(1 << 20) >> 20).ilog2() as usize + 1;
    let target = ((1usize << 20) << rng.below(steps)).min(max.max(1 << 20));
    let unit: Vec<u8> = match rng.below(4) {
        0 => vec![0],
        1 => b"[".to_vec(),
        2 => b"a".to_vec(),
        _ if !data.is_empty() => {
            let i = rng.below(data.len());
            data[i..(i + 1 + rng.below(64)).min(data.len())].to_vec()
        }
        _ => b",".to_vec(),
    };
    while v.len() < target {
        v.extend_from_slice(&unit);
    }
    if rng.one_in(4) {
        v.extend_from_slice(b"\n");
    }
    v
}
