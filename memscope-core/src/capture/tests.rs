use super::*;
use crate::wire::Record;

/// (image, chunk, tid, record)
type Input = (usize, u32, u32, Record<Box<[u8]>>);

fn recs() -> Vec<Input> {
    let mut v = Vec::new();
    for i in 0..50_000u64 {
        let (chunk, tid) = ((i % 3) as u32, 100 + (i % 3) as u32);
        let rec = match i % 5 {
            0 => Record::HostMalloc {
                ts: 1_000 + i * 10,
                addr: 0x5000_0000 + (i % 64) * 16,
                size: i % 700,
                stack: (i % 4) as u32,
            },
            1 => Record::HostFree {
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
            _ => Record::RangeEnd {
                ts: 1_000 + i * 10,
                id: i,
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
    for (n, (image, chunk, tid, rec)) in input.iter().enumerate() {
        w.set_image(
            *image,
            ImageHeader {
                pid: 7,
                exe: format!("/bin/img{image}"),
                ..ImageHeader::default()
            },
        );
        w.record(*image, *chunk, *tid, rec).unwrap();
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

#[test]
fn a_capture_without_trailer_reads_up_to_its_torn_block() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.mscap");
    let mut w = CaptureWriter::new(
        std::fs::File::create(&path).unwrap(),
        path.clone(),
        &CaptureInfo::default(),
    )
    .unwrap();
    let input = recs();
    for (image, chunk, tid, rec) in &input[..30_000] {
        w.record(*image, *chunk, *tid, rec).unwrap();
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
