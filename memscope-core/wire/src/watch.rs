//! Memory watch (issue 13, behaviour spec §9.9, §5.4): the checksum msMemScope writes for a
//! watched tensor before and after an operator, and the names of the dumps. Allocation-free, so
//! the probe computes checksums inside the traced process.

/// msMemScope's checksum: CRC-64, table-driven and **right-shifting**, with the polynomial
/// `0x42F0E1EBA9EA3693` **not reflected** (a non-standard mix, kept for compatibility), initial
/// value `!0`, final XOR `!0`. Written as 16 lowercase hex digits ([`crc64_hex`]).
pub const CRC64_POLY: u64 = 0x42F0_E1EB_A9EA_3693;

const fn table() -> [u64; 256] {
    let mut t = [0u64; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u64;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ CRC64_POLY
            } else {
                c >> 1
            };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
}

static TABLE: [u64; 256] = table();

/// Continues a checksum over `data` (start from [`crc64_start`], end with [`crc64_end`]).
pub fn crc64_update(mut crc: u64, data: &[u8]) -> u64 {
    for &b in data {
        crc = TABLE[((crc ^ b as u64) & 0xff) as usize] ^ (crc >> 8);
    }
    crc
}

/// Initial value.
pub const fn crc64_start() -> u64 {
    !0
}

/// Final XOR.
pub const fn crc64_end(crc: u64) -> u64 {
    !crc
}

/// The checksum of `data`.
pub fn crc64(data: &[u8]) -> u64 {
    crc64_end(crc64_update(crc64_start(), data))
}

/// As written in `watch_dump_data_check_sum_<ts>.csv`: 16 lowercase hex digits.
pub fn crc64_hex(v: u64) -> String {
    format!("{v:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc64_is_msmemscope_right_shifting_unreflected_variant() {
        // Bit-by-bit reference of the same definition.
        let slow = |d: &[u8]| {
            let mut c = !0u64;
            for &b in d {
                c ^= b as u64;
                for _ in 0..8 {
                    c = if c & 1 != 0 {
                        (c >> 1) ^ CRC64_POLY
                    } else {
                        c >> 1
                    };
                }
            }
            !c
        };
        for d in [&b""[..], b"a", b"123456789", &[0u8; 1000], &[0xa5; 33]] {
            assert_eq!(crc64(d), slow(d));
        }
        assert_eq!(crc64(b""), 0);
        assert_ne!(crc64(&[0u8; 16]), crc64(&[1u8; 16]));
        let split = crc64_end(crc64_update(crc64_update(crc64_start(), b"1234"), b"56789"));
        assert_eq!(split, crc64(b"123456789"));
        assert_eq!(crc64_hex(0xab), "00000000000000ab");
    }
}
