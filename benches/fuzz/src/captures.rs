//! What the stream and capture targets run on one input file, and their seeds.
//!
//! * `fuzz_stream`: a probe stream file (`<pid>-<ns>.stream`, what `memscope recover` reads from
//!   a left-over spool): `wire::decode` over the raw bytes from every offset, then the file
//!   through the spool's k-way merge (`ProcessMerge`, final pass) to the end.
//! * `fuzz_capture`: a capture (`memscope_capture_<ts>.mscap`, what `memscope export` and the
//!   replay API read): `CaptureReader::open`, the header and trailer, every record.
//!
//! Oracles beyond "no panic": both reads are deterministic — the same file read a second time
//! gives the same records (count and a hash of their kinds, images and time stamps), the same
//! error; the merge drains: it emits each decoded record once and then nothing more.

use std::hash::{Hash, Hasher};
use std::io::Write;
use std::path::Path;

use memscope_stream::capture::{
    CaptureEnd, CaptureInfo, CaptureReader, CaptureWriter, ImageHeader,
};
use memscope_stream::spool::{ProcessMerge, StreamFile};
use memscope_wire::{self as wire, ChunkState, Record};

use crate::{outcome_of_error, Ctx};

fn sample_records() -> Vec<Record<Box<[u8]>>> {
    let mut v: Vec<Record<Box<[u8]>>> = vec![Record::Thread { tid: 42 }];
    for i in 0..40u64 {
        v.push(Record::Malloc {
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
        v.push(Record::Free {
            ts: 1_003 + i * 7,
            addr: 0x1000 + i * 32,
        });
        v.push(Record::ThreadDevice {
            ts: 1_004 + i * 7,
            device: (i % 2) as u32,
        });
        v.push(Record::Mremap {
            ts: 1_005 + i * 7,
            old_addr: 0x10_0000,
            old_size: 4096,
            new_addr: 0x20_0000,
            new_size: 8192,
            keep_old: i % 2 == 0,
        });
    }
    v
}

/// A valid stream file: header plus two chunks of records (the second one cut short).
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
    // keep the seed small: only the used part of the second chunk
    f.truncate(wire::FILE_HEADER_SIZE + wire::CHUNK_SIZE + 8192);
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

/// Tokens of both formats: magics, tags, varints near the bounds.
pub fn dict() -> Vec<Vec<u8>> {
    let mut d: Vec<Vec<u8>> = vec![
        wire::STREAM_MAGIC.to_vec(),
        wire::CHUNK_MAGIC.to_le_bytes().to_vec(),
        memscope_stream::capture::MAGIC.to_vec(),
        memscope_stream::capture::BLOCK_MAGIC.to_vec(),
        memscope_stream::capture::TRAILER_MAGIC.to_vec(),
        memscope_stream::capture::FOOTER_MAGIC.to_vec(),
        vec![0xff, 0xff, 0xff, 0xff, 0x0f],
        vec![0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01],
        vec![0xff; 10],
        b"{\"records\":".to_vec(),
        b"\"blocks\":[".to_vec(),
        b"\"images\":[".to_vec(),
    ];
    for x in [
        0u32,
        1,
        0x7f,
        0x80,
        0xff,
        0xffff,
        0x7fff_ffff,
        0x8000_0000,
        0xffff_ffff,
        wire::CHUNK_SIZE as u32,
        wire::CHUNK_PAYLOAD as u32,
        memscope_stream::capture::MAX_BLOCK as u32,
        memscope_stream::capture::MAX_JSON as u32 + 1,
    ] {
        d.push(x.to_le_bytes().to_vec());
    }
    d
}

/// What one read delivered: records, a hash of (kind, image, time stamp) per record, the error.
#[derive(PartialEq, Eq, Debug)]
struct Read {
    n: u64,
    hash: u64,
    err: Option<String>,
}

fn note(h: &mut impl Hasher, image: usize, rec: &Record<Box<[u8]>>) {
    std::mem::discriminant(rec).hash(h);
    image.hash(h);
    rec.ts().hash(h);
}

fn merge_once(path: &Path) -> Read {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    let mut n = 0;
    let s = match StreamFile::open(path) {
        Ok(s) => s,
        Err(e) => {
            return Read {
                n,
                hash: 0,
                err: Some(e.to_string()),
            }
        }
    };
    let mut m = ProcessMerge::new();
    m.add_image(s);
    m.set_final();
    let mut err = None;
    'polls: for _ in 0..4 {
        if let Err(e) = m.poll() {
            err = Some(e.to_string());
            break;
        }
        loop {
            match m.next(u64::MAX) {
                Ok(Some(r)) => {
                    note(&mut h, r.image, &r.src.rec);
                    n += 1;
                }
                Ok(None) => break,
                Err(e) => {
                    err = Some(e.to_string());
                    break 'polls;
                }
            }
        }
    }
    if err.is_none() {
        assert_eq!(
            m.pending(),
            0,
            "the merge kept records after its final pass"
        );
    }
    Read {
        n,
        hash: h.finish(),
        err,
    }
}

/// The stream target on one input (the same bytes are at `ctx.path`).
pub fn run_stream(input: &[u8], ctx: &mut Ctx) -> String {
    let mut st = ChunkState::default();
    let (mut pos, mut decoded) = (0, 0u64);
    while pos < input.len() {
        match wire::decode(&input[pos..], &mut st) {
            Ok((_, n)) => {
                decoded += 1;
                pos += n.max(1);
            }
            Err(_) => pos += 1,
        }
    }
    let first = merge_once(&ctx.path);
    let again = merge_once(&ctx.path);
    assert_eq!(first, again, "two reads of the same stream file differ");
    match &first.err {
        Some(e) => outcome_of_error(e, &ctx.path),
        None => format!(
            "ok merged={} decoded={}",
            first.n.min(64),
            decoded.min(8) // the raw decode count only roughly: it varies with every byte
        ),
    }
}

fn read_capture(path: &Path) -> Read {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    let mut n = 0;
    let mut r = match CaptureReader::open(path) {
        Ok(r) => r,
        Err(e) => {
            return Read {
                n,
                hash: 0,
                err: Some(e.to_string()),
            }
        }
    };
    let _ = r.info();
    let _ = r.end();
    let _ = r.index();
    let _ = r.image_header(0);
    let err = loop {
        match r.next_record() {
            Ok(Some(c)) => {
                note(&mut h, c.image, &c.rec);
                n += 1;
            }
            Ok(None) => break None,
            Err(e) => break Some(e.to_string()),
        }
    };
    Read {
        n,
        hash: h.finish(),
        err,
    }
}

/// The capture target on one input (the same bytes are at `ctx.path`).
pub fn run_capture(_input: &[u8], ctx: &mut Ctx) -> String {
    let first = read_capture(&ctx.path);
    let again = read_capture(&ctx.path);
    assert_eq!(first, again, "two reads of the same capture differ");
    match &first.err {
        Some(e) => format!(
            "{} after {}",
            outcome_of_error(e, &ctx.path),
            first.n.min(64)
        ),
        None => format!("ok records={}", first.n.min(64)),
    }
}

/// Writes `data` to a fresh temporary file (for tests that run a target without the driver).
pub fn temp_input(data: &[u8], ext: &str) -> tempfile::NamedTempFile {
    let mut f = tempfile::Builder::new()
        .suffix(&format!(".{ext}"))
        .tempfile()
        .expect("tempfile");
    f.write_all(data).expect("write");
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(path: &Path) -> Ctx {
        Ctx {
            path: path.to_path_buf(),
            scratch: std::env::temp_dir(),
            rng: crate::Rng::new(1),
        }
    }

    #[test]
    fn the_seeds_are_valid_inputs() {
        let f = temp_input(&capture_seed(), "mscap");
        assert_eq!(
            run_capture(&capture_seed(), &mut ctx(f.path())),
            "ok records=64"
        );
        let r = read_capture(f.path());
        assert_eq!((r.n, r.err), (sample_records().len() as u64 - 1, None));
        let s = stream_seed();
        let f = temp_input(&s, "stream");
        let out = run_stream(&s, &mut ctx(f.path()));
        assert!(out.starts_with("ok merged=64"), "{out}");
    }
}
