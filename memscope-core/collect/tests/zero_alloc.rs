//! The collector path of an account-only source's events allocates nothing per event (issue
//! 34): PYMEM's compact MALLOC/FREE records, decoded from stream bytes, copied out of the chunk
//! and handed to a process's pipeline — which types and accounts them in its live account and
//! writes them into the capture — with Python stacks on (`--call-stack python:32`) and off.
//! A counting global allocator counts this thread's allocations over a million events, after a
//! warm-up that lets the maps and buffers reach their steady size.

use memscope_collect::adapter::TypeCtx;
use memscope_collect::config::LogLevel;
use memscope_collect::logfile::LogFile;
use memscope_collect::pipeline::{CaptureOut, Pipeline, PipelineSetup};
use memscope_core::bus::Bus;
use memscope_stream::capture::{CaptureInfo, CaptureWriter};
use memscope_wire::{decode, ChunkState, PyCodeKind, Record};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;

thread_local! {
    static COUNT: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator; the counter is a const-initialised thread-local
// `Cell` (no allocation, no destructor).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let _ = COUNT.try_with(|c| c.set(c.get() + 1));
        // SAFETY: the caller's layout, forwarded.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: `p` came from `System.alloc` with `l`.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        let _ = COUNT.try_with(|c| c.set(c.get() + 1));
        // SAFETY: as in `dealloc`.
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static A: Counting = Counting;

fn count() -> u64 {
    COUNT.with(Cell::get)
}

/// PYMEM's type definitions and a Python stack, as the probe writes them.
fn preamble() -> Vec<Record<Vec<u8>>> {
    vec![
        Record::EventTypeDef {
            id: 0,
            device: u32::MAX - 1,
            flags: 1,
            event_type: b"PYMEM".to_vec(),
            name: Vec::new(),
            attrs: b"domain:obj".to_vec(),
            values: Vec::new(),
        },
        Record::EventTypeDef {
            id: 1,
            device: u32::MAX - 1,
            flags: 1,
            event_type: b"PYMEM".to_vec(),
            name: Vec::new(),
            attrs: Vec::new(),
            values: Vec::new(),
        },
        Record::PyCodeDef {
            id: 1,
            kind: PyCodeKind::Function,
            line: 1,
            file: b"train.py".to_vec(),
            name: b"step".to_vec(),
        },
        Record::PyFrameDef {
            id: 1,
            parent: 0,
            code: 1,
            line: 7,
        },
    ]
}

/// Event `i` of a churn over 4096 live objects: a MALLOC, later its FREE.
fn event(i: u64, ts: u64) -> Record<&'static [u8]> {
    let slot = (i / 2) % 4096;
    let addr = 0x7f00_0000_0000 + slot * 64;
    if i.is_multiple_of(2) {
        Record::Compact {
            ts,
            ty: 0,
            kind: 1,
            addr,
            size: 32 + slot % 200,
            values: &[],
        }
    } else {
        Record::Compact {
            ts,
            ty: 1,
            kind: 2,
            addr: 0x7f00_0000_0000 + ((i / 2 + 2048) % 4096) * 64,
            size: 0,
            values: &[],
        }
    }
}

fn pipeline(dir: &std::path::Path, py_depth: Option<u32>, capture: bool) -> Pipeline {
    let info = CaptureInfo {
        pid: 7,
        exe: "python".into(),
        ..CaptureInfo::default()
    };
    let path = dir.join("c.mscap");
    let writer =
        CaptureWriter::new(std::fs::File::create(&path).unwrap(), path.clone(), &info).unwrap();
    let mut p = Pipeline::new(PipelineSetup {
        pid: 7,
        project_dir: dir.join("out"),
        exe: "python".into(),
        typers: memscope_collect::typers::Typers::new(Vec::new()),
        ctx: TypeCtx::new(7, Vec::new()),
        bus: Bus::new(Some(7), Vec::new()),
        sink_stats: Default::default(),
        log: LogFile::new(&dir.join("log"), LogLevel::Error),
        config_json: String::new(),
        capture: capture.then_some(CaptureOut {
            writer: Some(writer),
            final_path: path,
        }),
        host_rows_off: true,
        aggregate: false,
        host_fast: None,
        account_rows: false,
        py_depth,
        live: Default::default(),
    });
    for r in preamble() {
        p.record(0, 1, &r.to_owned());
    }
    p
}

/// Encodes `n` events from `from` into chunk-sized buffers and feeds them, decoded and copied
/// as the spool does, to `p`; returns this thread's allocations meanwhile.
fn feed(p: &mut Pipeline, from: u64, n: u64, with_stack: bool) -> u64 {
    let mut chunk = vec![0u8; 1 << 20];
    let before = count();
    let mut i = from;
    while i < from + n {
        let (mut st, mut used) = (ChunkState::default(), 0);
        while i < from + n && used + 64 < chunk.len() {
            let ts = 1_000_000 + i * 100;
            if with_stack && i.is_multiple_of(2) {
                let s: Record<&[u8]> = Record::PyStack { ts, node: 1 };
                used += s.encode(&mut st, &mut chunk[used..]).unwrap();
            }
            used += event(i, ts).encode(&mut st, &mut chunk[used..]).unwrap();
            i += 1;
        }
        let (mut st, mut at) = (ChunkState::default(), 0);
        while at < used {
            let (rec, len) = decode(&chunk[at..used], &mut st).unwrap();
            p.record(0, 1, &rec.to_owned());
            at += len;
        }
    }
    count() - before
}

#[test]
fn pymem_events_allocate_nothing_on_the_collector_path() {
    for capture in [false, true] {
        for py in [None, Some(32)] {
            let dir = tempfile::tempdir().unwrap();
            let mut p = pipeline(dir.path(), py, capture);
            feed(&mut p, 0, 300_000, py.is_some());
            let n = 1_000_000;
            let allocs = feed(&mut p, 300_000, n, py.is_some());
            eprintln!(
                "capture {capture}, python stacks {py:?}: {allocs} heap allocations for {n} PYMEM events"
            );
            if capture {
                // A closed capture block (every ~2 MiB of columns) allocates a handful of
                // times (its index entry, its image list): never once per event.
                assert!(allocs <= 20, "{allocs} allocations for {n} events");
            } else {
                assert_eq!(allocs, 0, "python stacks {py:?}");
            }
        }
    }
}
