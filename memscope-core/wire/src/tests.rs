//! Round-trip and size tests of the stream codec.

use super::*;

/// A deterministic pseudo-random sequence (xorshift64) from `x`.
fn xorshift(mut x: u64) -> impl FnMut() -> u64 {
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}

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
        at += n;
    }
    assert_eq!(at, pos);
    pos
}

#[test]
fn every_record_kind_round_trips() {
    round_trip(&[
        Record::Thread { tid: 77 },
        Record::Mark {
            ts: 1_700_000_000_000_000_000,
            stream: 0,
            msg: b"a,b",
            null: false,
        },
        Record::Mark {
            ts: 1_700_000_000_000_000_100,
            stream: 5,
            msg: b"",
            null: true,
        },
        Record::RangeStart {
            ts: 1_700_000_000_000_000_200,
            id: 9,
            stream: 0,
            msg: b"step start",
            null: false,
        },
        Record::RangeEnd {
            ts: 1_700_000_000_000_000_300,
            id: 9,
        },
        Record::HeapRegister {
            ts: 1_700_000_000_000_000_400,
            pool: 1,
            device: 1,
            ptr: 0x1000,
            size: 1 << 30,
        },
        Record::RegionRegister {
            ts: 1_700_000_000_000_000_500,
            pool: 4,
            device: 0,
            ptr: 0x2000,
            size: 512,
        },
        Record::RegionUnregister {
            ts: 1_700_000_000_000_000_600,
            pool: 4,
            ptr: 0x2000,
        },
        Record::HeapUnregister {
            ts: 1_700_000_000_000_000_700,
            pool: 1,
            ptr: 0x1000,
        },
        Record::OwnerPush {
            ts: 1_700_000_000_000_000_800,
            label: b"gradient",
        },
        Record::OwnerPop {
            ts: 1_700_000_000_000_000_900,
        },
        Record::CallStack {
            ts: 1_700_000_000_000_000_950,
            stack: 77,
        },
        Record::Shadow {
            ts: 1_700_000_000_000_000_960,
        },
        Record::System {
            ts: 1_700_000_000_000_001_000,
            code: SystemCode::AclInit,
            device: u32::MAX,
        },
        Record::Malloc {
            ts: 1_700_000_000_000_001_100,
            addr: 0x5555_0000_1000,
            size: 64,
            stack: 0,
        },
        Record::Malloc {
            ts: 1_700_000_000_000_001_150,
            addr: 0x5555_0000_0f00,
            size: 64,
            stack: 3,
        },
        Record::Free {
            ts: 1_700_000_000_000_001_200,
            addr: 0x5555_0000_1000,
        },
        Record::Malloc {
            ts: 1_700_000_000_000_001_201,
            addr: 0x5555_0000_1008,
            size: 8,
            stack: 0,
        },
        Record::Malloc {
            ts: 1_700_000_000_000_001_202,
            addr: 0x0000_0000_0010,
            size: 8,
            stack: 2,
        },
        Record::Malloc {
            ts: 1_700_000_000_000_001_203,
            addr: u64::MAX - 15,
            size: 8,
            stack: 0,
        },
        Record::Free {
            ts: 1_700_000_000_000_001_204,
            addr: 0x5555_0000_1008,
        },
        Record::Free {
            ts: 1_700_000_000_000_001_205,
            addr: 0x10,
        },
        Record::StackDef {
            id: 3,
            count: 2,
            raw: &[0x81, 0x01, 0x05],
        },
        Record::Module {
            ts: 1_700_000_000_000_001_210,
            base: 0x7f00_0000_0000,
            start: 0x7f00_0000_1000,
            size: 0x20_0000,
            build_id: &[0xab, 0xcd],
            path: b"/lib/libx.so",
        },
        Record::Mmap {
            ts: 1_700_000_000_000_001_220,
            addr: 0x7f11_0000_0000,
            size: 1 << 20,
            stack: 0,
        },
        Record::Mmap {
            ts: 1_700_000_000_000_001_230,
            addr: 0x7f12_0000_0000,
            size: 4096,
            stack: 9,
        },
        Record::Munmap {
            ts: 1_700_000_000_000_001_240,
            addr: 0x7f11_0000_0000,
            size: 1 << 20,
        },
        Record::Mremap {
            ts: 1_700_000_000_000_001_250,
            old_addr: 0x7f12_0000_0000,
            old_size: 4096,
            new_addr: 0x7f13_0000_0000,
            new_size: 3 * 4096,
            keep_old: false,
        },
        Record::Mremap {
            ts: 1_700_000_000_000_001_260,
            old_addr: 0x7f13_0000_0000,
            old_size: 0,
            new_addr: 0x7f14_0000_0000,
            new_size: 4096,
            keep_old: true,
        },
        Record::Plugin {
            ts: 1_700_000_000_000_001_300,
            kind: 1,
            device: 2,
            ptr: 7,
            size: 8,
            event_type: b"MYPOOL",
            name: b"n",
            attrs: b"owner:x",
        },
        Record::TextDef {
            id: 4,
            text: b"step start",
        },
        Record::EventTypeDef {
            id: 3,
            device: u32::MAX - 1,
            flags: 1,
            event_type: b"PYMEM",
            name: b"",
            attrs: b"domain:obj",
            values: b"arena,bin",
        },
        Record::Compact {
            ts: 1_700_000_000_000_001_400,
            ty: 3,
            kind: 1,
            addr: 0x7f00_0000_0010,
            size: 48,
            values: b"",
        },
        Record::Compact {
            ts: 1_700_000_000_000_001_410,
            ty: 3,
            kind: 2,
            addr: 0x7f00_0000_0013,
            size: 0,
            values: b"",
        },
        Record::Compact {
            ts: 1_700_000_000_000_001_420,
            ty: 3,
            kind: 1,
            addr: 0x7f00_0000_0040,
            size: 64,
            values: &[7, 0x81, 1],
        },
        Record::Compact {
            ts: 1_700_000_000_000_001_430,
            ty: 9,
            kind: 3,
            addr: 0,
            size: 0,
            values: b"",
        },
        Record::ThreadDevice {
            ts: 1_700_000_000_009_000_000,
            device: 3,
        },
        Record::ThreadDevice {
            ts: 1_700_000_000_009_000_000,
            device: u32::MAX,
        },
        Record::MarkRef {
            ts: 1_700_000_000_009_000_000,
            stream: 0,
            text: 4,
        },
        Record::RangeStartRef {
            ts: 1_700_000_000_009_000_010,
            id: 2,
            stream: 0,
            text: 4,
        },
        Record::ProcessSample {
            ts: 1_700_000_000_109_000_010,
            rss: 300 << 20,
            anon: 260 << 20,
        },
        Record::DeviceSample {
            ts: 1_700_000_000_109_000_020,
            device: 3,
            used: 1 << 30,
            free: 63 << 30,
        },
    ]);
}

#[test]
fn host_records_stay_small() {
    let base = 1_700_000_000_000_000_000u64;
    let mut recs = vec![Record::Thread { tid: 1 }];
    for i in 0..1000u64 {
        recs.push(Record::Malloc {
            ts: base + i * 120,
            addr: 0x5555_0000_0000 + (i % 7) * 64,
            size: 32 + i % 100,
            stack: 0,
        });
        recs.push(Record::Free {
            ts: base + i * 120 + 60,
            addr: 0x5555_0000_0000 + (i % 7) * 64,
        });
    }
    let bytes = round_trip(&recs) as f64 / 2000.0;
    assert!(bytes <= 6.0, "{bytes} bytes per event");
}

#[test]
fn encode_refuses_when_out_of_room_and_keeps_state() {
    let mut st = ChunkState::default();
    let mut small = [0u8; 4];
    let r = Record::Mark {
        ts: 123_456_789,
        stream: 0,
        msg: b"hello",
        null: false,
    };
    assert_eq!(r.encode(&mut st, &mut small), None);
    assert_eq!(st, ChunkState::default());
}

#[test]
fn decode_reports_truncation_and_unknown_tags() {
    let mut st = ChunkState::default();
    assert_eq!(
        decode(&[tag::MARK, 0x80], &mut st),
        Err(WireError::Truncated)
    );
    assert_eq!(decode(&[200], &mut st), Err(WireError::BadTag(200)));
    // an unknown tag of the sampled-memory range (issue 25)
    assert_eq!(decode(&[99, 0, 0, 0], &mut st), Err(WireError::BadTag(99)));
}

#[test]
fn frames_round_trip() {
    let frames = [0x7f00_0000_1234u64, 0x5555_1111_0000, 1];
    let mut buf = [0u8; 64];
    let n = encode_frames(&frames, &mut buf).unwrap();
    assert_eq!(StackFrames::new(&buf[..n]).collect::<Vec<_>>(), frames);
}

#[test]
fn fast_host_encoders_write_the_generic_bytes() {
    // Deterministic pseudo-random addresses, sizes, stamps and stacks, also near the ends of
    // the value ranges, through both encoders from the same state.
    let mut next = xorshift(0x9E37_79B9_7F4A_7C15);
    let mut st_fast = ChunkState::default();
    let mut st_gen = ChunkState::default();
    let mut ts = 1_700_000_000_000_000_000u64;
    for i in 0..100_000u64 {
        let r = next();
        let addr = match i % 4 {
            0 => r & !15,
            1 => r,
            2 => 0x5555_0000_0000 + (r & 0xffff) * 16,
            _ => u64::MAX - (r & 0xff),
        };
        ts = match i % 5 {
            0 => ts.wrapping_sub(r & 0xfff),
            _ => ts.wrapping_add(r & 0xffff),
        };
        let rec: Record<&[u8]> = if i % 3 == 0 {
            Record::Free { ts, addr }
        } else {
            Record::Malloc {
                ts,
                addr,
                size: if i % 7 == 0 { u64::MAX } else { r >> (i % 60) },
                stack: if i % 2 == 0 { 0 } else { (r >> 40) as u32 },
            }
        };
        let mut a = [0u8; 128];
        let mut b = [0u8; 128];
        let n = fast::encode(&rec, &mut st_fast, &mut a).expect("fast path taken");
        let m = rec.encode_generic(&mut st_gen, &mut b).expect("fits");
        assert_eq!(&a[..n], &b[..m], "{rec:?}");
        assert_eq!(st_fast, st_gen);
    }
    // Too little room: the fast path declines, the generic one still encodes.
    let rec: Record<&[u8]> = Record::Free { ts: 5, addr: 64 };
    let mut small = [0u8; 16];
    assert!(fast::encode(&rec, &mut ChunkState::default(), &mut small).is_none());
    assert!(rec.encode(&mut ChunkState::default(), &mut small).is_some());
}

#[test]
fn drop_counters_have_a_slot_per_event_kind_and_fit_the_header() {
    use crate::EventKind;
    const { assert!(FH_DROPPED_KINDS + 8 * DROP_KINDS <= FH_EXE) };
    const { assert!(FH_STOP_ERRNO + 4 <= FH_DROPPED_KINDS) };
    assert!(EventKind::ALL.len() < DROP_KIND_PYTHON_TRACE);
    for (i, k) in EventKind::ALL.iter().enumerate() {
        assert_eq!(drop_slot_of(*k), i);
    }
    let rec: Record<&[u8]> = Record::Free { ts: 1, addr: 2 };
    assert_eq!(rec.event_kind(), Some(EventKind::Free));
    let def: Record<&[u8]> = Record::TextDef { id: 1, text: b"x" };
    assert_eq!(def.drop_slot(), None, "definitions are not events");
    let call: Record<&[u8]> = Record::PyCall { ts: 1, code: 2 };
    assert_eq!(call.event_kind(), None, "python_trace rows are not events");
    assert_eq!(
        call.drop_slot(),
        Some(DROP_KIND_PYTHON_TRACE),
        "but their drops are counted"
    );
    let snap: Record<&[u8]> = Record::Snapshot {
        ts: 1,
        device: 0,
        known: 0,
        values: [0; 6],
        name: b"s",
    };
    assert_eq!(snap.event_kind(), Some(EventKind::Snapshot));
    let mut h = vec![0u8; FILE_HEADER_SIZE];
    h[FH_DROPPED..FH_DROPPED + 8].copy_from_slice(&7u64.to_le_bytes());
    let at = FH_DROPPED_KINDS + 8 * drop_slot_of(EventKind::Malloc);
    h[at..at + 8].copy_from_slice(&7u64.to_le_bytes());
    let (total, kinds) = header_drops(&h).unwrap();
    assert_eq!(total, 7);
    assert_eq!(kinds[drop_slot_of(EventKind::Malloc)], 7);
    assert!(header_drops(&h[..100]).is_none());
}

#[test]
fn rank_env_field_keeps_only_rank_names_in_order() {
    let mut field = vec![0u8; crate::FH_RANK_ENV_LEN];
    let text = b"RANK=3\0LOCAL_RANK=1\0PATH=/bin\0ASCEND_RT_VISIBLE_DEVICES=4,5\0";
    field[..text.len()].copy_from_slice(text);
    let env = crate::parse_rank_env(&field);
    let want: Vec<(String, String)> = [
        ("RANK", "3"),
        ("LOCAL_RANK", "1"),
        ("ASCEND_RT_VISIBLE_DEVICES", "4,5"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    assert_eq!(env, want);
    assert!(crate::is_rank_env(b"WORLD_SIZE=8"));
    assert!(!crate::is_rank_env(b"RANKX=1"));
    assert!(!crate::is_rank_env(b"RANK"));
}

#[test]
fn compact_events_of_a_registered_type_take_the_allocation_volume_shape() {
    let base = 1_700_000_000_000_000_000u64;
    let mut recs: Vec<Record<&[u8]>> = vec![Record::Thread { tid: 1 }];
    for i in 0..1000u64 {
        let addr = 0x7f55_0000_0000 + (i % 50) * 48;
        for (kind, dt, size) in [(1u8, 0, 32 + i % 200), (2, 90, 0)] {
            recs.push(Record::Compact {
                ts: base + i * 180 + dt,
                ty: 2,
                kind,
                addr,
                size,
                values: b"",
            });
        }
    }
    let bytes = round_trip(&recs) as f64 / 2000.0;
    assert!(bytes <= 7.0, "{bytes} bytes per event");
    // The fast encoder writes the generic bytes.
    let (mut sf, mut sg) = (ChunkState::default(), ChunkState::default());
    for r in &recs[1..] {
        let (mut a, mut b) = ([0u8; 128], [0u8; 128]);
        let n = fast::encode(r, &mut sf, &mut a).expect("fast path taken");
        let m = r.encode_generic(&mut sg, &mut b).expect("fits");
        assert_eq!(&a[..n], &b[..m], "{r:?}");
        assert_eq!(sf, sg);
    }
}

#[test]
fn compact_values_round_trip_as_varints() {
    let mut buf = [0u8; 64];
    let n = encode_values(&[0, 300, u64::MAX], &mut buf);
    assert_eq!(
        decode_values(&buf[..n]).collect::<Vec<_>>(),
        [0, 300, u64::MAX]
    );
    assert_eq!(
        encode_values(&[u64::MAX; 8], &mut buf[..4]),
        0,
        "no room: nothing"
    );
}

#[test]
fn host_decoder_reads_what_the_generic_decoder_reads() {
    // Every HOST tag, addresses on and off 16, values near the ends of their ranges, then
    // each record cut short: the same record, length and state as `decode`, or `None`.
    let mut next = xorshift(0x2545_F491_4F6C_DD1D);
    let mut st = ChunkState::default();
    let mut ts = 1_700_000_000_000_000_000u64;
    for i in 0..50_000u64 {
        let r = next();
        let addr = if i % 2 == 0 { r & !15 } else { r };
        ts = ts.wrapping_add(r & 0xffff);
        let rec: Record<&[u8]> = if i % 3 == 0 {
            Record::Free { ts, addr }
        } else {
            Record::Malloc {
                ts,
                addr,
                size: if i % 7 == 0 { u64::MAX } else { r >> (i % 60) },
                stack: if i % 4 < 2 { 0 } else { (r >> 32) as u32 },
            }
        };
        let mut buf = [0u8; 128];
        let before = st;
        let n = rec.encode(&mut st, &mut buf).expect("fits");
        let mut st_gen = before;
        let mut st_host = before;
        let (want, m) = decode(&buf[..n], &mut st_gen).expect("decodes");
        let (got, k) = decode_host(&buf[..n], &mut st_host).expect("a HOST record");
        assert_eq!((got.record(), k), (want.to_owned(), m));
        assert_eq!(HostRecord::of(&want), Some(got));
        assert_eq!(st_host, st_gen);
        let mut st_cut = before;
        assert_eq!(decode_host(&buf[..n - 1], &mut st_cut), None);
        assert_eq!(st_cut, before, "a record cut short leaves the state");
    }
    let mark: Record<&[u8]> = Record::RangeEnd { ts: 9, id: 1 };
    let mut buf = [0u8; 64];
    let n = mark
        .encode(&mut ChunkState::default(), &mut buf)
        .expect("fits");
    assert_eq!(decode_host(&buf[..n], &mut ChunkState::default()), None);
    assert_eq!(HostRecord::of(&mark), None);
}
