//! A fast hasher for the collector's maps keyed by addresses and allocation ids (millions of
//! inserts and removes a second; SipHash's DoS resistance buys nothing for keys the traced
//! process chose). Multiply-shift over the 64-bit key (Fibonacci hashing).
#![forbid(unsafe_code)]

use std::hash::{BuildHasherDefault, Hasher};

/// Hasher of one `u64` key.
#[derive(Default, Clone, Copy)]
pub struct AddrHasher(u64);

impl Hasher for AddrHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, v: u64) {
        let x = (self.0 ^ v).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.0 = x ^ (x >> 29);
    }
    // tuple keys of ids, (image, id), hash field by field
    fn write_u32(&mut self, v: u32) {
        self.write_u64(v as u64);
    }
    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }
}

/// `HashMap` keyed by an address or id with [`AddrHasher`].
pub type AddrMap<V> = std::collections::HashMap<u64, V, BuildHasherDefault<AddrHasher>>;
