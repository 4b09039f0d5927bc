//! Unit tests of the CANN record codec.

use super::super::{decode, ChunkState, Record};
use super::*;

const T0: u64 = 1_700_000_000_000_000_000;

fn round_trip(recs: &[Record<&[u8]>]) -> usize {
    let mut buf = vec![0u8; 1 << 16];
    let mut st = ChunkState::default();
    let mut pos = 0;
    for r in recs {
        pos += r.encode(&mut st, &mut buf[pos..]).expect("fits");
    }
    let mut st = ChunkState::default();
    let mut at = 0;
    for r in recs {
        let (got, n) = decode(&buf[at..pos], &mut st).expect("decodes");
        assert_eq!(&got, r);
        assert_eq!(got.to_owned(), r.to_owned());
        at += n;
    }
    assert_eq!(at, pos);
    pos
}

#[test]
fn every_cann_record_kind_round_trips_with_unknown_sentinels() {
    let mut dims = [0u8; 80];
    let n = encode_dims(&[2, -1, 1 << 40], &mut dims).unwrap();
    let m = u32::MAX;
    round_trip(&[
        Record::HalAlloc {
            ts: T0,
            addr: 0x1_0000_0040,
            size: 4096,
            flag: 0x2100_0000_0092_4406,
            stack: 0,
        },
        Record::HalCreate {
            ts: T0 + 1,
            handle: 0x55aa,
            size: 1 << 21,
            flag: 0,
            device: 3,
            module: 7,
            page: 1,
            stack: 9,
        },
        Record::HalCreate {
            ts: T0 + 2,
            handle: 0x55ab,
            size: 1,
            flag: 1 << 31,
            device: m,
            module: m,
            page: m,
            stack: 0,
        },
        Record::HalFree {
            ts: T0 + 3,
            addr: 0x1_0000_0040,
            create: false,
            ret: 0,
        },
        Record::HalFree {
            ts: T0 + 4,
            addr: 0x55aa,
            create: true,
            ret: -3,
        },
        Record::HalOom {
            ts: T0 + 5,
            create: false,
            size: 1 << 40,
            flag: 0x400,
            device: 0,
            free: 10,
            total: 1 << 36,
            stack: 4,
        },
        Record::HalOom {
            ts: T0 + 6,
            create: true,
            size: 1,
            flag: 0,
            device: m,
            free: 0,
            total: 0,
            stack: 0,
        },
        Record::PinnedRegister {
            ts: T0 + 7,
            addr: 0x7fff_0000,
            size: 1 << 21,
            rss: 1 << 30,
            stack: 0,
        },
        Record::PinnedUnregister {
            ts: T0 + 8,
            addr: 0x7fff_0000,
            ret: 107000,
        },
        Record::SetDevice {
            ts: T0 + 9,
            device: 5,
        },
        Record::KernelName {
            hash: (7 << 32) | 9,
            name: b"MatMulKernel",
        },
        Record::KernelLaunch {
            ts: T0 + 10,
            hash: (7 << 32) | 9,
            device: 0,
            stream: 3,
            task: 65535,
        },
        Record::KernelLaunch {
            ts: T0 + 11,
            hash: 0,
            device: m,
            stream: m,
            task: m,
        },
        Record::AtbOp {
            ts: T0 + 12,
            end: false,
            device: 1,
            ws_ptr: 0xdead_0000,
            ws_size: 3 << 20,
            name: b"LinearOperation",
            path: b"/tmp/atb/0_1/0_LinearOperation",
        },
        Record::AtbOp {
            ts: T0 + 13,
            end: true,
            device: m,
            ws_ptr: 0,
            ws_size: 0,
            name: b"",
            path: b"",
        },
        Record::AtbKernel {
            ts: T0 + 14,
            end: false,
            device: 0,
            path: b"/x/LinearKernel/before",
        },
        Record::AtbKernel {
            ts: T0 + 15,
            end: true,
            device: 0,
            path: b"/x/LinearKernel/after",
        },
        Record::AtbTensor {
            ts: T0 + 16,
            access: AccessKind::Unknown,
            kernel: false,
            addr: 0x10,
            size: 64,
            dtype: -1,
            format: 29,
            dims: &dims[..n],
        },
        Record::AtbTensor {
            ts: T0 + 17,
            access: AccessKind::Read,
            kernel: true,
            addr: 0x20,
            size: 8,
            dtype: 27,
            format: 2,
            dims: b"",
        },
        Record::AtbTensor {
            ts: T0 + 18,
            access: AccessKind::Write,
            kernel: true,
            addr: 0x30,
            size: 8,
            dtype: 0,
            format: -1,
            dims: b"",
        },
    ]);
    assert_eq!(
        decode_dims(&dims[..n]).collect::<Vec<_>>(),
        [2, -1, 1 << 40]
    );
}

#[test]
fn hal_events_stay_small_and_names_carry_no_time() {
    let recs = [
        Record::Thread { tid: 1 },
        Record::HalAlloc {
            ts: T0,
            addr: 0x1240_0000_0040,
            size: 2 << 20,
            flag: (7 << 56) | (1 << 17) | (1 << 10),
            stack: 0,
        },
        Record::HalFree {
            ts: T0 + 900,
            addr: 0x1240_0000_0040,
            create: false,
            ret: 0,
        },
    ];
    let bytes = round_trip(&recs);
    // 2 (thread) + ~30 (first alloc: absolute time, 64-bit flag) + ~11 (free).
    assert!(
        bytes <= 48,
        "{bytes} bytes for a thread, an alloc and a free"
    );
    assert_eq!(
        Record::<&[u8]>::KernelName {
            hash: 1,
            name: b"k"
        }
        .ts(),
        None
    );
    assert_eq!(
        Record::<&[u8]>::SetDevice { ts: 5, device: 0 }.ts(),
        Some(5)
    );
}

#[test]
fn unknown_tags_in_the_cann_range_and_bad_access_kinds_are_refused() {
    let mut st = ChunkState::default();
    assert_eq!(
        decode(&[tag::LAST], &mut st),
        Err(WireError::BadTag(tag::LAST))
    );
    assert_eq!(
        decode(&[tag::ATB_TENSOR_OP, 0, 9], &mut st),
        Err(WireError::BadTag(9))
    );
    assert_eq!(AccessKind::from_u8(2), Some(AccessKind::Write));
}
