use super::*;
use memscope_wire::Record;

/// (image, chunk, tid, record)
type Input = (usize, u32, u32, Record<Box<[u8]>>);

fn recs() -> Vec<Input> {
    let mut v = Vec::new();
    for i in 0..50_000u64 {
        let (chunk, tid) = ((i % 3) as u32, 100 + (i % 3) as u32);
        let rec = match i % 8 {
            0 => Record::Malloc {
                ts: 1_000 + i * 10,
                addr: 0x5000_0000 + (i % 64) * 16,
                size: i % 700,
                stack: (i % 4) as u32,
            },
            1 => Record::Free {
                ts: 1_000 + i * 10,
                addr: 0x5000_0000 + (i % 64) * 16,
            },
            2 => Record::Mark {
                ts: 1_000 + i * 10,
                stream: 0,
                msg: format!("m{i}").into_bytes().into(),
                null: false,
            },
            3 => Record::TextDef {
                id: i as u32,
                text: b"text".to_vec().into(),
            },
            4 => Record::RangeEnd {
                ts: 1_000 + i * 10,
                id: i,
            },
            // compact events of registered types (format 4): a malloc, its free, one with values
            5 | 6 => Record::Compact {
                ts: 1_000 + i * 10,
                ty: ((i / 8) % 2) as u32,
                kind: (i % 8 - 4) as u8,
                addr: 0x7000_0000 + ((i / 8) % 32) * 48 + (i / 8) % 3,
                size: if i % 8 == 5 { i % 500 } else { (i / 8) % 2 },
                values: Box::default(),
            },
            _ => Record::Compact {
                ts: 1_000 + i * 10,
                ty: 2,
                kind: 1,
                addr: i,
                size: 8,
                values: vec![1, 2].into(),
            },
        };
        v.push(((i / 20_000) as usize, chunk, tid, rec));
    }
    v
}

#[test]
fn capture_round_trips_records_in_emission_order_across_blocks_and_images() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.mscap");
    let info = CaptureInfo {
        pid: 7,
        exe: "/bin/x".into(),
        ..CaptureInfo::default()
    };
    let mut w =
        CaptureWriter::new(std::fs::File::create(&path).unwrap(), path.clone(), &info).unwrap();
    let input = recs();
    for (n, (image, _chunk, tid, rec)) in input.iter().enumerate() {
        w.set_image(
            *image,
            ImageHeader {
                pid: 7,
                exe: format!("/bin/img{image}"),
                ..ImageHeader::default()
            },
        );
        w.record(*image, *tid, rec).unwrap();
        if n % 7_000 == 0 {
            w.close_block().unwrap();
        }
    }
    let stats = w.finish(CaptureEnd::default()).unwrap();
    assert_eq!(stats.records, input.len() as u64);
    let mut r = CaptureReader::open(&path).unwrap();
    assert_eq!(r.info(), &info);
    assert!(r.index().len() > 5);
    let mut got = Vec::new();
    while let Some(c) = r.next_record().unwrap() {
        got.push(c);
    }
    assert_eq!(got.len(), input.len());
    for (g, (image, _, tid, rec)) in got.iter().zip(&input) {
        assert_eq!((g.image, g.tid, &g.rec), (*image, *tid, rec));
    }
    assert_eq!(r.image_header(1).unwrap().exe, "/bin/img1");
    assert!(r.truncated.is_none());
}

/// A writer of `c.mscap` in `dir`, with a default header.
fn writer(dir: &std::path::Path) -> (std::path::PathBuf, CaptureWriter) {
    let path = dir.join("c.mscap");
    let w = CaptureWriter::new(
        std::fs::File::create(&path).unwrap(),
        path.clone(),
        &CaptureInfo::default(),
    )
    .unwrap();
    (path, w)
}

#[test]
fn a_capture_without_trailer_reads_up_to_its_torn_block() {
    let dir = tempfile::tempdir().unwrap();
    let (path, mut w) = writer(dir.path());
    let input = recs();
    for (image, _chunk, tid, rec) in &input[..30_000] {
        w.record(*image, *tid, rec).unwrap();
        if [10_000, 20_000, 30_000].contains(&w.records()) {
            w.close_block().unwrap();
        }
    }
    drop(w);
    let len = std::fs::metadata(&path).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(len - 100).unwrap();
    let mut r = CaptureReader::open(&path).unwrap();
    assert!(r.end().is_none());
    let mut n = 0;
    while r.next_record().unwrap().is_some() {
        n += 1;
    }
    assert_eq!(n, 20_000);
    assert!(r.truncated.is_some());
}

#[test]
fn garbage_is_not_a_capture() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x");
    std::fs::write(&path, b"hello world, this is not a capture file").unwrap();
    let e = CaptureReader::open(&path).err().unwrap().to_string();
    assert!(e.contains("not a memscope capture"), "{e}");
}

#[test]
fn formats_2_to_4_are_read_and_others_refused_naming_the_formats_read() {
    let dir = tempfile::tempdir().unwrap();
    let (path, mut w) = writer(dir.path());
    // records that have the same bytes in formats 2 to 4 (no compact events, which are new in 4)
    let input: Vec<_> = recs()
        .into_iter()
        .filter(|r| !matches!(r.3, Record::Compact { .. }))
        .take(1000)
        .collect();
    for (image, _chunk, tid, rec) in &input {
        w.record(*image, *tid, rec).unwrap();
    }
    w.finish(CaptureEnd::default()).unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    for v in [1u32, 2, 3, 4, 5] {
        bytes[8..12].copy_from_slice(&v.to_le_bytes());
        std::fs::write(&path, &bytes).unwrap();
        match CaptureReader::open(&path) {
            Ok(mut r) => {
                assert!((2..=4).contains(&v));
                let mut n = 0;
                while r.next_record().unwrap().is_some() {
                    n += 1;
                }
                assert_eq!(n, 1000);
            }
            Err(e) => {
                let e = e.to_string();
                assert!(e.contains("(this memscope reads formats 2-4)"), "{e}");
                assert!(!(2..=4).contains(&v));
            }
        }
    }
}

/// Records of 5 threads in an emission order that is mostly, but not always, time-ordered
/// (late records, equal stamps, stamps that go back within a thread), with frees of blocks of
/// this thread, of other threads and of earlier blocks, definitions and other records.
fn shuffled() -> Vec<Input> {
    let mut seed = 0x2545_F491_4F6C_DD1Du64;
    let mut rnd = |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let mut v = Vec::new();
    let mut live: Vec<u64> = Vec::new();
    let mut ts = 1_000_000u64;
    for i in 0..120_000u64 {
        let tid = 10 + rnd(5) as u32;
        ts += rnd(300);
        let t = match rnd(50) {
            0 => ts.saturating_sub(rnd(200_000)), // late
            1 => ts - 1,                          // back by one
            _ => ts,
        };
        let rec = match rnd(12) {
            0..=4 => {
                let addr = 0x7f00_0000_0000 + 16 * rnd(1 << 20) + if rnd(8) == 0 { 8 } else { 0 };
                live.push(addr);
                Record::Malloc {
                    ts: t,
                    addr,
                    size: rnd(100_000),
                    stack: if rnd(3) == 0 { 1 + rnd(40) as u32 } else { 0 },
                }
            }
            5..=8 if !live.is_empty() => {
                let k = rnd(live.len() as u64) as usize;
                Record::Free {
                    ts: t,
                    addr: live.swap_remove(k),
                }
            }
            5..=8 => Record::Free { ts: t, addr: 8 },
            9 => Record::StackDef {
                id: i as u32,
                count: 2,
                raw: vec![1, 2].into(),
            },
            10 => Record::Mark {
                ts: t,
                stream: rnd(3),
                msg: format!("mark {i}").into_bytes().into(),
                null: false,
            },
            _ => Record::Munmap {
                ts: t,
                addr: rnd(1 << 40),
                size: 4096,
            },
        };
        v.push((0, 0, tid, rec));
    }
    v
}

#[test]
fn capture_reproduces_an_emission_order_that_is_not_time_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.mscap");
    let mut w = CaptureWriter::new(
        std::fs::File::create(&path).unwrap(),
        path.clone(),
        &CaptureInfo::default(),
    )
    .unwrap();
    let input = shuffled();
    for (n, (image, _, tid, rec)) in input.iter().enumerate() {
        w.record(*image, *tid, rec).unwrap();
        if n % 33_333 == 0 {
            w.close_block().unwrap();
        }
    }
    w.finish(CaptureEnd::default()).unwrap();
    let mut r = CaptureReader::open(&path).unwrap();
    let mut n = 0;
    while let Some(c) = r.next_record().unwrap() {
        let (_, _, tid, rec) = &input[n];
        assert_eq!((c.tid, &c.rec), (*tid, rec), "record {n}");
        n += 1;
    }
    assert_eq!(n, input.len());
}

#[test]
fn a_damaged_block_gives_records_or_an_error_never_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.mscap");
    let mut w = CaptureWriter::new(
        std::fs::File::create(&path).unwrap(),
        path.clone(),
        &CaptureInfo::default(),
    )
    .unwrap();
    for (_, _, tid, rec) in shuffled().iter().take(600) {
        w.record(0, *tid, rec).unwrap();
    }
    w.finish(CaptureEnd::default()).unwrap();
    // Change bytes of the decompressed block one at a time: every outcome is records or an
    // error, never a panic.
    let file = std::fs::read(&path).unwrap();
    let json_len = u32::from_le_bytes(file[12..16].try_into().unwrap()) as usize;
    let at = 16 + json_len;
    let comp_len = u32::from_le_bytes(file[at + 4..at + 8].try_into().unwrap()) as usize;
    let raw_len = u32::from_le_bytes(file[at + 8..at + 12].try_into().unwrap()) as usize;
    let records = u32::from_le_bytes(file[at + 12..at + 16].try_into().unwrap());
    let comp = &file[at + BLOCK_HEADER..at + BLOCK_HEADER + comp_len];
    let raw = zstd::bulk::decompress(comp, raw_len).unwrap();
    let count = |raw: Vec<u8>| -> Option<u32> {
        let mut b = super::block::Block::parse(raw, records, &mut Vec::new(), super::VERSION)?;
        let mut n = 0;
        while b.next().ok()?.is_some() {
            n += 1;
        }
        Some(n)
    };
    assert_eq!(count(raw.clone()), Some(600));
    let mut broken = 0;
    for i in 0..raw.len() {
        for x in [0x01, 0xff] {
            let mut bad = raw.clone();
            bad[i] ^= x;
            broken += count(bad).is_none() as u32;
        }
    }
    assert!(broken > 0);
}

#[test]
fn a_capture_whose_caller_keeps_the_allocation_references_is_byte_for_byte_the_one_the_writer_makes_with_its_own_map(
) {
    // threads that free each other's blocks, addresses reused before their free was seen,
    // frees of blocks never seen, blocks closed with allocations live (their references go
    // stale: those frees go by address either way), other records in between
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut input = Vec::new();
    for i in 0..60_000u64 {
        let r = next();
        let (tid, addr, ts) = (
            100 + (r % 5) as u32,
            0x9000_0000 + (r >> 8) % 300 * 32,
            i * 7,
        );
        let rec = match r >> 40 & 7 {
            0..=3 => Record::Malloc {
                ts,
                addr,
                size: r >> 20 & 0xfff,
                stack: (r >> 50 & 3) as u32,
            },
            4..=6 => Record::Free { ts, addr },
            _ => Record::RangeEnd { ts, id: i },
        };
        input.push(((r >> 60 & 1) as usize, tid, rec));
    }
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, keep: bool| {
        let path = dir.path().join(name);
        let f = std::fs::File::create(&path).unwrap();
        let mut w = CaptureWriter::new(f, path.clone(), &CaptureInfo::default()).unwrap();
        let mut refs: std::collections::HashMap<u64, AllocRef> = Default::default();
        for (n, (image, tid, rec)) in input.iter().enumerate() {
            w.set_image(*image, ImageHeader::default());
            match (keep, rec) {
                (true, Record::Malloc { addr, .. }) => {
                    match w.record_malloc(*image, *tid, rec).unwrap() {
                        Some(r) => refs.insert(*addr, r),
                        None => refs.remove(addr),
                    };
                }
                (true, Record::Free { addr, .. }) => {
                    w.record_free(*image, *tid, rec, refs.remove(addr)).unwrap()
                }
                _ => w.record(*image, *tid, rec).unwrap(),
            }
            if n % 9_000 == 8_999 {
                w.close_block().unwrap();
            }
        }
        w.finish(CaptureEnd::default()).unwrap();
        path
    };
    let (own, kept) = (write("own.mscap", false), write("kept.mscap", true));
    assert_eq!(std::fs::read(&own).unwrap(), std::fs::read(&kept).unwrap());
    let mut r = CaptureReader::open(&kept).unwrap();
    let mut got = Vec::new();
    while let Some(c) = r.next_record().unwrap() {
        got.push((c.image, c.tid, c.rec));
    }
    assert_eq!(got, input);
}
