//! A small mutation fuzzer on stable Rust: starts from seed inputs, mutates them (bit flips,
//! byte stores, interesting 32-bit values, truncation, splices, insertions), runs a target on
//! each and records every input that panics under `crashes/<target>/`. Inputs found earlier
//! (files in `crashes/<target>/`) are replayed as regression tests by `cargo test`.
#![forbid(unsafe_code)]

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// xorshift64* generator (deterministic per seed).
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `s` (0 is replaced).
    pub fn new(s: u64) -> Rng {
        Rng(s.max(1))
    }
    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// A number below `n` (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }
}

const INTERESTING: [u32; 10] = [
    0,
    1,
    0x7f,
    0x80,
    0xff,
    0xffff,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_ffff,
    0x0004_0000,
];

/// One mutation of `input` (a copy), mixing in `other` for splices.
pub fn mutate(rng: &mut Rng, input: &[u8], other: &[u8]) -> Vec<u8> {
    let mut v = input.to_vec();
    let rounds = 1 + rng.below(8);
    for _ in 0..rounds {
        if v.is_empty() {
            v.push(rng.next_u64() as u8);
            continue;
        }
        match rng.below(8) {
            0 => {
                let i = rng.below(v.len());
                v[i] ^= 1 << rng.below(8);
            }
            1 => {
                let i = rng.below(v.len());
                v[i] = rng.next_u64() as u8;
            }
            2 if v.len() >= 4 => {
                let i = rng.below(v.len() - 3);
                let x = INTERESTING[rng.below(INTERESTING.len())];
                v[i..i + 4].copy_from_slice(&x.to_le_bytes());
            }
            3 => {
                let n = rng.below(v.len() + 1);
                v.truncate(n);
            }
            4 if !other.is_empty() => {
                let i = rng.below(v.len());
                let j = rng.below(other.len());
                let n = rng.below((other.len() - j).min(4096) + 1);
                v.splice(i..i, other[j..j + n].iter().copied());
            }
            5 => {
                let i = rng.below(v.len());
                let n = 1 + rng.below(64);
                let bytes: Vec<u8> = (0..n).map(|_| rng.next_u64() as u8).collect();
                v.splice(i..i, bytes);
            }
            6 => {
                let i = rng.below(v.len());
                let n = rng.below((v.len() - i).min(256) + 1);
                v.drain(i..i + n);
            }
            _ => {
                let i = rng.below(v.len());
                let n = rng.below((v.len() - i).min(64) + 1);
                let b = rng.next_u64() as u8;
                v[i..i + n].fill(b);
            }
        }
    }
    v
}

/// Directory of the crashing inputs of `target`.
pub fn crash_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("crashes")
        .join(target)
}

/// Runs `run` on mutations of `seeds` for `dur`; saves panicking inputs under
/// [`crash_dir`]. Returns (executions, panics).
pub fn fuzz(
    target: &str,
    seeds: &[Vec<u8>],
    dur: Duration,
    seed: u64,
    run: &dyn Fn(&[u8]),
) -> (u64, u64) {
    std::panic::set_hook(Box::new(|_| {}));
    let mut rng = Rng::new(seed);
    let mut corpus: Vec<Vec<u8>> = seeds.to_vec();
    let t0 = Instant::now();
    let (mut execs, mut panics) = (0u64, 0u64);
    while t0.elapsed() < dur {
        let a = &corpus[rng.below(corpus.len())];
        let b = &corpus[rng.below(corpus.len())];
        let input = mutate(&mut rng, a, b);
        execs += 1;
        if catch_unwind(AssertUnwindSafe(|| run(&input))).is_err() {
            panics += 1;
            let dir = crash_dir(target);
            let _ = std::fs::create_dir_all(&dir);
            let _ = std::fs::write(dir.join(format!("crash-{execs}-{seed}")), &input);
        } else if corpus.len() < 256 && rng.below(64) == 0 {
            // Keep some mutants as parents: deeper mutations of valid structure.
            corpus.push(input);
        }
    }
    let _ = std::panic::take_hook();
    (execs, panics)
}

/// Replays every saved input of `target` through `run` (regression test).
pub fn replay_crashes(target: &str, run: &dyn Fn(&[u8])) -> usize {
    let mut n = 0;
    if let Ok(rd) = std::fs::read_dir(crash_dir(target)) {
        for e in rd.flatten() {
            let data = std::fs::read(e.path()).expect("read crash input");
            run(&data);
            n += 1;
        }
    }
    n
}

pub mod targets;
