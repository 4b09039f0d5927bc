//! The targets and their seeds.

use memscope_core::capture::{CaptureEnd, CaptureInfo, CaptureReader, CaptureWriter, ImageHeader};
use memscope_core::spool::{ProcessMerge, StreamFile};
use memscope_core::wire::{self, ChunkState, Record};
use std::io::Write;

fn sample_records() -> Vec<Record<Box<[u8]>>> {
    let mut v: Vec<Record<Box<[u8]>>> = vec![Record::Thread { tid: 42 }];
    for i in 0..40u64 {
        v.push(Record::HostMalloc {
            ts: 1_000 + i * 7,
            addr: 0x1000 + i * 32,
            size: 16 + i,
            stack: (i % 3) as u32,
        });
        v.push(Record::Mark {
            ts: 1_001 + i * 7,
            stream: 0,
            msg: format!("mark {i}").into_bytes().into(),
            null: false,
        });
        v.push(Record::TextDef {
            id: i as u32,
            text: b"interned".to_vec().into(),
        });
        v.push(Record::MarkRef {
            ts: 1_002 + i * 7,
            stream: 0,
            text: i as u32,
        });
        v.push(Record::StackDef {
            id: i as u32 + 1,
            count: 2,
            raw: vec![0x80, 0x01, 0x10].into(),
        });
        v.push(Record::HostFree {
            ts: 1_003 + i * 7,
            addr: 0x1000 + i * 32,
        });
    }
    v
}

/// A valid stream file: header plus two chunks of records.
pub fn stream_seed() -> Vec<u8> {
    let mut f = vec![0u8; wire::FILE_HEADER_SIZE + 2 * wire::CHUNK_SIZE];
    f[..8].copy_from_slice(&wire::STREAM_MAGIC);
    f[wire::FH_VERSION..wire::FH_VERSION + 4].copy_from_slice(&wire::STREAM_VERSION.to_le_bytes());
    f[wire::FH_CHUNK_SIZE..wire::FH_CHUNK_SIZE + 4]
        .copy_from_slice(&(wire::CHUNK_SIZE as u32).to_le_bytes());
    f[wire::FH_PID..wire::FH_PID + 4].copy_from_slice(&7u32.to_le_bytes());
    for c in 0..2 {
        let base = wire::FILE_HEADER_SIZE + c * wire::CHUNK_SIZE;
        let mut st = ChunkState::default();
        let mut pos = base + wire::CHUNK_HEADER_SIZE;
        for r in sample_records() {
            let n = r.encode(&mut st, &mut f[pos..]).expect("fits");
            pos += n;
        }
        let committed = (pos - base - wire::CHUNK_HEADER_SIZE) as u32;
        f[base..base + 4].copy_from_slice(&wire::CHUNK_MAGIC.to_le_bytes());
        f[base + wire::CH_COMMITTED..base + wire::CH_COMMITTED + 4]
            .copy_from_slice(&committed.to_le_bytes());
        f[base + wire::CH_SEALED..base + wire::CH_SEALED + 4].copy_from_slice(&1u32.to_le_bytes());
    }
    // Keep the seed small: only the used part of the second chunk.
    let used = wire::FILE_HEADER_SIZE + wire::CHUNK_SIZE + 8192;
    f.truncate(used);
    f
}

/// A valid capture of the sample records over a few blocks.
pub fn capture_seed() -> Vec<u8> {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("c.mscap");
    let mut w = CaptureWriter::new(
        std::fs::File::create(&p).expect("create"),
        p.clone(),
        &CaptureInfo::default(),
    )
    .expect("writer");
    w.set_image(0, ImageHeader::default());
    for (i, r) in sample_records().into_iter().enumerate() {
        if matches!(r, Record::Thread { .. }) {
            continue;
        }
        w.record(0, (i % 2) as u32, &r).expect("record");
        if i % 90 == 0 {
            w.close_block().expect("block");
        }
    }
    w.finish(CaptureEnd::default()).expect("finish");
    std::fs::read(&p).expect("read")
}

/// The stream decoder: `wire::decode` over the bytes, then the bytes as a stream file read
/// through the spool merge to the end (what `memscope recover` does with a left-over spool).
pub fn run_stream(data: &[u8]) {
    let mut st = ChunkState::default();
    let mut pos = 0;
    while pos < data.len() {
        match wire::decode(&data[pos..], &mut st) {
            Ok((_, n)) => pos += n.max(1),
            Err(_) => pos += 1,
        }
    }
    let mut f = tempfile::NamedTempFile::new().expect("tempfile");
    f.write_all(data).expect("write");
    let Ok(s) = StreamFile::open(f.path()) else {
        return;
    };
    let mut m = ProcessMerge::new();
    m.add_image(s);
    m.set_final();
    for _ in 0..4 {
        if m.poll().is_err() {
            return;
        }
        while let Ok(Some(_)) = m.next(u64::MAX) {}
    }
}

/// The capture reader: open and read every record.
pub fn run_capture(data: &[u8]) {
    let mut f = tempfile::NamedTempFile::new().expect("tempfile");
    f.write_all(data).expect("write");
    let Ok(mut r) = CaptureReader::open(f.path()) else {
        return;
    };
    let _ = r.info();
    while let Ok(Some(_)) = r.next_record() {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_are_valid_inputs() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(&capture_seed()).unwrap();
        let mut r = CaptureReader::open(f.path()).unwrap();
        let mut n = 0;
        while r.next_record().unwrap().is_some() {
            n += 1;
        }
        assert_eq!(n, 240);
        run_stream(&stream_seed());
    }

    #[test]
    fn saved_stream_crash_inputs_do_not_panic() {
        crate::replay_crashes("stream", &run_stream);
    }

    #[test]
    fn saved_capture_crash_inputs_do_not_panic() {
        crate::replay_crashes("capture", &run_capture);
    }

    #[test]
    fn a_short_fuzz_run_finds_no_panic() {
        let (n, p) = crate::fuzz(
            "stream-smoke",
            &[stream_seed()],
            std::time::Duration::from_millis(300),
            1,
            &run_stream,
        );
        assert!(n > 0 && p == 0, "{p} panics in {n} runs");
        let (n, p) = crate::fuzz(
            "capture-smoke",
            &[capture_seed()],
            std::time::Duration::from_millis(300),
            1,
            &run_capture,
        );
        assert!(n > 0 && p == 0, "{p} panics in {n} runs");
    }
}
