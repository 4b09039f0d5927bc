//! Helpers of the probe's own tests: run a program with the probe preloaded and a spool but no
//! collector (what the probe alone commits, drops and stops is visible exactly), and decode the
//! stream files it leaves with `memscope_wire`.
#![allow(dead_code)]

use memscope_core::event::EventKind;
use memscope_tests::*;
use memscope_wire::{
    decode, drop_slot_of, ChunkState, Record, CHUNK_HEADER_SIZE, CHUNK_MAGIC, CHUNK_SIZE,
    CH_COMMITTED, CH_MAGIC, DROP_KINDS, FH_DROPPED, FH_DROPPED_KINDS, FH_EXE, FH_EXE_LEN, FH_PID,
    FH_STOP_REASON, FILE_HEADER_SIZE, STREAM_MAGIC,
};
use std::path::{Path, PathBuf};
use std::process::Command;

/// `MEMSCOPE_ADAPTERS` value selecting HOST.
pub fn host_mask() -> String {
    // the HOST adapter's `SOURCE` (`adapters/host`, SourceId(6)), a probe environment number
    memscope_wire::SourceId(6).bit().to_string()
}

/// A command running `program` with the probe preloaded, writing to `spool`, with the
/// adapters of `mask` selected.
pub fn probe_cmd(spool: &Path, mask: &str, program: &Path) -> Command {
    let mut c = Command::new(program);
    c.env("LD_PRELOAD", probe_lib())
        .env("MEMSCOPE_SPOOL", spool)
        .env("MEMSCOPE_ADAPTERS", mask);
    c
}

/// One stream file, decoded.
pub struct Stream {
    /// Its path.
    pub path: PathBuf,
    /// File length in bytes.
    pub len: u64,
    /// Process id from the header.
    pub pid: u32,
    /// Executable path from the header.
    pub exe: String,
    /// `FH_DROPPED`.
    pub dropped: u64,
    /// `FH_DROPPED_KINDS`.
    pub dropped_kinds: Vec<u64>,
    /// `FH_STOP_REASON`.
    pub stop_reason: u32,
    /// Every committed record with the tid of its writer, chunk by chunk.
    pub records: Vec<(u32, Record)>,
    /// Chunks with a valid magic, and the writer tid each one starts with.
    pub chunk_tids: Vec<u32>,
    /// For each record, the index (in `chunk_tids`) of the chunk holding it.
    pub chunk_of: Vec<usize>,
}

impl Stream {
    /// Drops counted for events of kind `k`.
    pub fn drops(&self, k: EventKind) -> u64 {
        self.dropped_kinds[drop_slot_of(k)]
    }

    /// `Malloc` records of `size` bytes.
    pub fn mallocs(&self, size: u64) -> usize {
        self.records
            .iter()
            .filter(|(_, r)| matches!(r, Record::Malloc { size: s, .. } if *s == size))
            .count()
    }

    /// `Free` records of blocks a `Malloc` of one of `sizes` returned (by address; each
    /// free counted once even when its address served blocks of several of the sizes).
    pub fn frees_of(&self, sizes: &[u64]) -> usize {
        let addrs: std::collections::HashSet<u64> = self
            .records
            .iter()
            .filter_map(|(_, r)| match r {
                Record::Malloc { size, addr, .. } if sizes.contains(size) => Some(*addr),
                _ => None,
            })
            .collect();
        self.records
            .iter()
            .filter(|(_, r)| matches!(r, Record::Free { addr, .. } if addrs.contains(addr)))
            .count()
    }
}

fn u32at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(b[o..o + 4].try_into().unwrap())
}

fn u64at(b: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(b[o..o + 8].try_into().unwrap())
}

/// Decodes one stream file (every record must decode).
pub fn read_stream(path: &Path) -> Stream {
    let b = std::fs::read(path).unwrap();
    assert!(b.len() >= FILE_HEADER_SIZE, "{}: no header", path.display());
    assert_eq!(&b[..8], &STREAM_MAGIC, "{}", path.display());
    let exe = &b[FH_EXE..FH_EXE + FH_EXE_LEN];
    let exe =
        String::from_utf8_lossy(&exe[..exe.iter().position(|&c| c == 0).unwrap_or(0)]).into_owned();
    let mut s = Stream {
        path: path.to_path_buf(),
        len: b.len() as u64,
        pid: u32at(&b, FH_PID),
        exe,
        dropped: u64at(&b, FH_DROPPED),
        dropped_kinds: (0..DROP_KINDS)
            .map(|i| u64at(&b, FH_DROPPED_KINDS + 8 * i))
            .collect(),
        stop_reason: u32at(&b, FH_STOP_REASON),
        records: Vec::new(),
        chunk_tids: Vec::new(),
        chunk_of: Vec::new(),
    };
    let mut off = FILE_HEADER_SIZE;
    while off + CHUNK_SIZE <= b.len() {
        let c = &b[off..off + CHUNK_SIZE];
        off += CHUNK_SIZE;
        if u32at(c, CH_MAGIC) != CHUNK_MAGIC {
            continue;
        }
        let n = u32at(c, CH_COMMITTED) as usize;
        let payload = &c[CHUNK_HEADER_SIZE..CHUNK_HEADER_SIZE + n];
        let mut st = ChunkState::default();
        let mut pos = 0;
        let mut tid = None;
        while pos < n {
            let (r, len) = decode(&payload[pos..], &mut st)
                .unwrap_or_else(|e| panic!("{}: {e} at {pos}", path.display()));
            pos += len;
            if let Record::Thread { tid: t } = r {
                if tid.is_none() {
                    s.chunk_tids.push(t);
                }
                tid = Some(t);
            }
            s.chunk_of.push(s.chunk_tids.len().saturating_sub(1));
            s.records.push((
                tid.expect("chunk starts with a Thread record"),
                r.to_owned(),
            ));
        }
    }
    assert_eq!(
        s.dropped,
        s.dropped_kinds.iter().sum::<u64>(),
        "the per-kind drops add up to FH_DROPPED"
    );
    s
}

/// Every stream file in `spool`, decoded.
pub fn read_streams(spool: &Path) -> Vec<Stream> {
    let mut v: Vec<_> = std::fs::read_dir(spool)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "stream"))
        .collect();
    v.sort();
    v.iter().map(|p| read_stream(p)).collect()
}

/// The one stream whose executable's file name is `name` (also when the file was replaced
/// while it ran — tests running in parallel rebuild the same programs — and the kernel reports
/// it as `… (deleted)`).
pub fn stream_of<'a>(streams: &'a [Stream], name: &str) -> &'a Stream {
    let v: Vec<_> = streams
        .iter()
        .filter(|s| {
            let exe = s.exe.strip_suffix(" (deleted)").unwrap_or(&s.exe);
            Path::new(exe).file_name().is_some_and(|n| n == name)
        })
        .collect();
    assert_eq!(
        v.len(),
        1,
        "one stream of {name}: {:?}",
        streams.iter().map(|s| &s.exe).collect::<Vec<_>>()
    );
    v[0]
}

/// `key=value` counts printed by a test program (`ticks=3 mallocs=10 …`).
pub fn counts(stdout: &str) -> std::collections::HashMap<String, u64> {
    stdout
        .split_whitespace()
        .filter_map(|w| w.split_once('='))
        .filter_map(|(k, v)| Some((k.to_owned(), v.parse().ok()?)))
        .collect()
}

/// The drop count of the summary lines of `memscope run` (sum over processes).
pub fn summary_drops(stderr: &str) -> u64 {
    stderr
        .lines()
        .filter(|l| l.starts_with("memscope: pid "))
        .map(|l| {
            if let Some(i) = l.find(" DROPPED") {
                let head = &l[..i];
                head[head.rfind(' ').map_or(0, |j| j + 1)..]
                    .parse()
                    .unwrap()
            } else {
                assert!(l.contains(", 0 dropped"), "summary line: {l}");
                0
            }
        })
        .sum()
}
