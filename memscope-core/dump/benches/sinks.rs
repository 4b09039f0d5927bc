//! Collector throughput: rows/s written by the CSV and SQLite sinks, and records/s decoded from
//! the stream format, on a synthetic mix of pool MALLOC/FREE and msTX rows.
//! Run: `cargo bench -p memscope-core --bench sinks [-- ROWS]` (default 2 000 000 rows).
//! Targets (issue 2): ≥ 1.5 M CSV rows/s and ≥ 1 M SQLite rows/s per core.

use memscope_core::bus::{Bus, Layer};
use memscope_core::event::{Attrs, Device, Event, EventKind, EventType, MemoryAttrs};
use memscope_core::owner::OwnerChain;
use memscope_dump::sink::csv::CsvSink;
use memscope_dump::sink::sqlite::DbSink;
use memscope_wire::{decode, ChunkState, Record};
use std::time::Instant;

fn events(n: u64) -> Vec<Event> {
    let base = 1_764_000_000_000_000_000u64;
    (0..n)
        .map(|i| {
            let ts = base + i * 250;
            match i % 5 {
                0 => {
                    let mut e = Event::new(EventType::Mark, ts, 4242, 4243);
                    e.name = Some(format!("op:{}", i % 97));
                    e.device = Device::Npu(0);
                    e
                }
                k => {
                    let mut e = Event::new(EventType::Pta, ts, 4242, 4243);
                    if k % 2 == 0 {
                        e.kind = EventKind::Free;
                    }
                    e.device = Device::Npu(0);
                    let addr = 0x12c0_0000_0000 + (i % 4096) * 512;
                    e.ptr = Some(addr);
                    e.attrs = Attrs::Memory(MemoryAttrs {
                        allocation_id: i / 2 + 1,
                        addr,
                        size: 512,
                        used: Some((i % 1000) as i64 * 512),
                        total: Some(1 << 30),
                        owner: (k % 2 == 1).then(|| OwnerChain::parse("PTA@gradient")),
                        ..MemoryAttrs::default()
                    });
                    e
                }
            }
        })
        .collect()
}

/// CPU seconds (user + system) of this process so far, from /proc/self/stat (fields 14, 15).
fn cpu_s() -> f64 {
    let s = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let rest = s.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<f64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0.0))
        .collect();
    (f.get(11).copied().unwrap_or(0.0) + f.get(12).copied().unwrap_or(0.0)) / 100.0
}

fn run_sink(name: &str, layer: Box<dyn Layer>, evs: &[Event]) {
    let mut bus = Bus::new(Some(4242), vec![layer]);
    let c0 = cpu_s();
    let t = Instant::now();
    for (i, e) in evs.iter().enumerate() {
        let mut e = e.clone();
        e.id = i as u64;
        bus.push(e).expect("push");
    }
    bus.finish().expect("finish");
    let s = t.elapsed().as_secs_f64();
    let c = (cpu_s() - c0).max(0.01);
    println!(
        "{name:<8} {:>10} rows  wall {:>7.3} s {:>6.2} M rows/s   cpu {:>7.3} s {:>6.2} M rows/cpu-s",
        evs.len(),
        s,
        evs.len() as f64 / s / 1e6,
        c,
        evs.len() as f64 / c / 1e6
    );
}

fn main() {
    let n: u64 = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(2_000_000);
    let evs = events(n);
    let dir = tempfile::tempdir().expect("tempdir");

    // Baseline in the same run: cloning the events alone (the bus clones each one above).
    let t = Instant::now();
    let mut sink = 0u64;
    for e in &evs {
        sink = sink.wrapping_add(e.clone().ts_ns);
    }
    println!(
        "baseline clone-only  {:>8.3} s  (checksum {sink})",
        t.elapsed().as_secs_f64()
    );

    let d = dir.path().to_path_buf();
    run_sink(
        "csv",
        Box::new(CsvSink::new(Box::new(move |place| {
            let p = d.join(format!("bench-{place:?}.csv"));
            Ok((std::fs::File::create(&p).expect("create"), p))
        }))),
        &evs,
    );
    let d = dir.path().to_path_buf();
    run_sink(
        "sqlite",
        Box::new(DbSink::new(Box::new(move |place| {
            let p = d.join(format!("bench-{place:?}.db"));
            Ok((std::fs::File::create(&p).expect("create"), p))
        }))),
        &evs,
    );

    // Stream codec: encode the pool records of the same mix and decode them back.
    let mut buf = vec![0u8; (n as usize) * 24 + 64];
    let mut st = ChunkState::default();
    let mut pos = 0;
    for (i, e) in evs.iter().enumerate() {
        let rec: Record<&[u8]> = match e.kind {
            EventKind::Mstx => Record::Mark {
                ts: e.ts_ns,
                stream: 0,
                msg: b"op:12",
                null: false,
            },
            EventKind::Malloc => Record::RegionRegister {
                ts: e.ts_ns,
                pool: 1,
                device: 0,
                ptr: e.ptr.unwrap_or(0),
                size: 512,
            },
            _ => Record::RegionUnregister {
                ts: e.ts_ns,
                pool: 1,
                ptr: e.ptr.unwrap_or(i as u64),
            },
        };
        pos += rec.encode(&mut st, &mut buf[pos..]).expect("room");
    }
    let t = Instant::now();
    let mut st = ChunkState::default();
    let (mut at, mut count) = (0, 0u64);
    while at < pos {
        let (_, used) = decode(&buf[at..pos], &mut st).expect("decode");
        at += used;
        count += 1;
    }
    let s = t.elapsed().as_secs_f64();
    println!(
        "decode   {count:>10} recs  {s:>8.3} s  {:>6.2} M recs/s  {:.2} bytes/record",
        count as f64 / s / 1e6,
        pos as f64 / count as f64
    );
}
