//! HAL's records and their codec (the per-source envelope of `memscope_wire`, source
//! [`crate::SOURCE`]). Field order and encodings are those of the records' former tags 30–35 of
//! capture format 2, so old captures map onto these (`memscope-stream`'s capture `legacy`).

use memscope_wire::{OptU32, Record};

memscope_wire::records! {
    /// A HAL record.
    pub enum HalRecord {
        /// `halMemAlloc` succeeded (abi.md §2.1): `size` bytes at `addr`, allocated with `flag`
        /// (device, memory type, page type and module id packed as abi.md §2.3).
        Alloc = (MALLOC, 0) {
            /// Address handed out.
            addr: u64,
            /// Bytes requested.
            size: u64,
            /// The caller's flag word.
            flag: u64,
            /// Interned C stack id (0: none).
            stack: u32,
        },
        /// `halMemCreate` succeeded: physical handle `handle` of `size` bytes (abi.md §2.1–§2.2).
        Create = (MALLOC, 1) {
            /// The handle value (`*handle`), recorded as the block address like msMemScope does.
            handle: u64,
            /// Bytes requested.
            size: u64,
            /// The caller's flag word.
            flag: u64,
            /// `drv_mem_prop.devid` (unknown: `prop` was NULL).
            device: OptU32,
            /// `drv_mem_prop.module_id` (unknown: `prop` was NULL).
            module: OptU32,
            /// `drv_mem_prop.pg_type`: 0 normal, 1 huge, 2 giant (unknown: `prop` was NULL).
            page: OptU32,
            /// Interned C stack id (0: none).
            stack: u32,
        },
        /// `halMemFree(addr)` returned `ret`. Failed calls are recorded too, so the collector can
        /// warn about double frees.
        Free = (FREE, 0) {
            /// Address passed.
            addr: u64,
            /// The driver's return code (0: success).
            ret: i32,
        },
        /// `halMemRelease(handle)` returned `ret`.
        Release = (FREE, 1) {
            /// Handle passed.
            addr: u64,
            /// The driver's return code (0: success).
            ret: i32,
        },
        /// `halMemAlloc` returned `DRV_ERROR_OUT_OF_MEMORY` (abi.md §2.5).
        OomAlloc = (SNAPSHOT, 0) {
            /// Bytes requested.
            size: u64,
            /// The caller's flag word.
            flag: u64,
            /// Device asked for: flag bits 0–9 (logical id).
            device: OptU32,
            /// Free device bytes reported by `aclrtGetMemInfo` at the failure (0: unknown).
            free: u64,
            /// Total device bytes reported by `aclrtGetMemInfo` (0: unknown).
            total: u64,
            /// Interned C stack id (0: none).
            stack: u32,
        },
        /// `halMemCreate` returned `DRV_ERROR_OUT_OF_MEMORY`.
        OomCreate = (SNAPSHOT, 1) {
            /// Bytes requested.
            size: u64,
            /// The caller's flag word.
            flag: u64,
            /// Device asked for: `drv_mem_prop.devid`, else flag bits 0–9 (logical id).
            device: OptU32,
            /// Free device bytes reported by `aclrtGetMemInfo` at the failure (0: unknown).
            free: u64,
            /// Total device bytes reported by `aclrtGetMemInfo` (0: unknown).
            total: u64,
            /// Interned C stack id (0: none).
            stack: u32,
        },
    }
}

/// `rec` at time `ts` as an owned stream record of this source (collector side and tests).
pub fn rec(ts: u64, rec: HalRecord) -> Record<Box<[u8]>> {
    memscope_wire::owned_envelope(&rec, crate::SOURCE, ts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hal_records_keep_the_field_bytes_of_capture_format_2() {
        // tag 30 of format 2: ts, addr, size, flag, stack as varints
        let Record::Source { body, tag, .. } = rec(
            5,
            HalRecord::Alloc {
                addr: 0x80,
                size: 3,
                flag: 1 << 10,
                stack: 0,
            },
        ) else {
            unreachable!()
        };
        assert_eq!(&*body, &[0x80, 0x01, 3, 0x80, 0x08, 0]);
        assert_eq!(tag, 0x10);
        let Record::Source { body, .. } = rec(5, HalRecord::Release { addr: 1, ret: -1 }) else {
            unreachable!()
        };
        assert_eq!(&*body, &[1, 1]);
    }

    #[test]
    fn hal_events_stay_small_in_the_stream() {
        let t0 = 1_700_000_000_000_000_000;
        let mut chunk = [0u8; 128];
        let mut st = memscope_wire::ChunkState::default();
        let mut n = Record::<&[u8]>::Thread { tid: 1 }
            .encode(&mut st, &mut chunk)
            .unwrap();
        let recs = [
            (
                t0,
                HalRecord::Alloc {
                    addr: 0x1240_0000_0040,
                    size: 2 << 20,
                    flag: (7 << 56) | (1 << 17) | (1 << 10),
                    stack: 0,
                },
            ),
            (
                t0 + 900,
                HalRecord::Free {
                    addr: 0x1240_0000_0040,
                    ret: 0,
                },
            ),
        ];
        for (ts, r) in recs {
            let mut body = [0u8; 64];
            let env = memscope_wire::envelope(&r, crate::SOURCE, ts, &mut body).unwrap();
            n += env.encode(&mut st, &mut chunk[n..]).unwrap();
        }
        // 2 (thread) + ~33 (first alloc: absolute time, 64-bit flag) + ~14 (free); the
        // envelope costs 3 bytes a record over the former HAL tags
        assert!(n <= 54, "{n} bytes for a thread, an alloc and a free");
    }
}
