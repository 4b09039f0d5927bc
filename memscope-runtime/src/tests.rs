//! In-process tests of the runtime: one test function, because the runtime is a process-wide
//! singleton initialised once from `environ`.

use crate::{enabled, now_ns, record, start, step, stop, tid};
use memscope_wire::SourceId;

/// The msTX and HOST adapters' source ids (`adapters/mstx`, `adapters/host`: the runtime
/// depends on no adapter).
const MSTX: SourceId = SourceId(0);
const HOST: SourceId = SourceId(6);
use memscope_wire::{
    decode, ChunkState, Record, SystemCode, CHUNK_HEADER_SIZE, CHUNK_MAGIC, CHUNK_SIZE,
    CH_COMMITTED, CH_MAGIC, CH_SEALED, FH_DROPPED, FH_PID, FILE_HEADER_SIZE, STREAM_MAGIC,
};
use std::collections::HashMap;

/// A source of the test's own (no built-in one uses it).
const OWN: SourceId = SourceId(30);

memscope_wire::records! {
    /// The test source's records.
    enum Own<'a> {
        /// Short.
        Sized = (MALLOC, 0) { size: u64 },
        /// Two long texts.
        Named = (MSTX, 3) { name: &'a [u8], more: &'a [u8] },
    }
}

fn u32at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(b[o..o + 4].try_into().unwrap())
}

/// (tid, record) of every committed record, chunk by chunk, plus (chunks, sealed chunks).
fn read_stream(path: &std::path::Path) -> (Vec<(u32, Record)>, usize, usize, u64) {
    let b = std::fs::read(path).unwrap();
    assert_eq!(&b[..8], &STREAM_MAGIC);
    assert_eq!(u32at(&b, FH_PID), std::process::id());
    let dropped = u64::from_le_bytes(b[FH_DROPPED..FH_DROPPED + 8].try_into().unwrap());
    let mut out = Vec::new();
    let (mut chunks, mut sealed) = (0, 0);
    let mut off = FILE_HEADER_SIZE;
    while off + CHUNK_SIZE <= b.len() {
        let c = &b[off..off + CHUNK_SIZE];
        off += CHUNK_SIZE;
        if u32at(c, CH_MAGIC) != CHUNK_MAGIC {
            continue;
        }
        chunks += 1;
        sealed += (u32at(c, CH_SEALED) == 1) as usize;
        let n = u32at(c, CH_COMMITTED) as usize;
        let payload = &c[CHUNK_HEADER_SIZE..CHUNK_HEADER_SIZE + n];
        let mut st = ChunkState::default();
        let mut pos = 0;
        let mut tid = None;
        while pos < n {
            let (r, len) = decode(&payload[pos..], &mut st).expect("decodes");
            pos += len;
            if let Record::Thread { tid: t } = r {
                tid = Some(t);
            }
            out.push((
                tid.expect("chunk starts with a Thread record"),
                r.to_owned(),
            ));
        }
    }
    (out, chunks, sealed, dropped)
}

impl Own<'_> {
    /// The record as text, to compare decoded records with the originals.
    fn to_owned_debug(self) -> String {
        format!("{self:?}")
    }
}

#[test]
fn stream_end_to_end() {
    let dir = tempfile::tempdir().unwrap();
    // The runtime reads `environ` on first use; nothing else in this test binary touches it.
    std::env::set_var("MEMSCOPE_SPOOL", dir.path());
    std::env::set_var("MEMSCOPE_ADAPTERS", MSTX.bit().to_string());
    std::env::set_var("MEMSCOPE_COLLECT_MODE", "deferred");

    // Deferred: nothing enabled until start().
    assert!(!enabled(MSTX));
    assert!(crate::ensure_init());
    assert!(!enabled(MSTX));
    assert!(!step());
    // Outside a window the memory hooks of selected adapters still record (issue 26): their
    // allocations and frees get a Shadow record first; other records do not.
    assert!(crate::tracking(MSTX) && crate::shadowing());
    assert!(!crate::tracking(HOST), "not selected");
    let shadow_ts = now_ns();
    assert!(record(&Record::RegionRegister {
        ts: shadow_ts,
        pool: 1,
        device: 0,
        ptr: 0x1000,
        size: 64,
    }));
    assert!(record(&Record::OwnerPush {
        ts: now_ns(),
        label: b"outside"
    }));
    assert!(start());
    assert!(enabled(MSTX));
    assert!(!enabled(HOST));
    assert!(crate::tracking(MSTX) && !crate::shadowing());
    let window_ts = now_ns();
    assert!(record(&Record::RegionUnregister {
        ts: window_ts,
        pool: 1,
        ptr: 0x1000,
    }));

    let main_tid = tid();
    let t0 = now_ns();
    assert!(t0 > 1_600_000_000_000_000_000, "epoch ns");
    for i in 0..10u32 {
        let msg = format!("main-{i}");
        assert!(record(&Record::Mark {
            ts: now_ns(),
            stream: 0,
            msg: msg.as_bytes(),
            null: false
        }));
    }
    // an adapter's own records: a short one, and one whose text needs the large buffer
    let long = [b'n'; 900];
    let own = [
        Own::Sized { size: 77 },
        Own::Named {
            name: &long,
            more: &long,
        },
    ];
    {
        let mut g = crate::enter().expect("not inside the runtime");
        assert!(crate::record_source(&mut g, OWN, now_ns(), &own[0], true));
    }
    assert!(crate::record_source_bare(OWN, now_ns(), &own[1]));
    assert!(step());

    // 8 threads, enough data to fill several chunks each (~100 B per record).
    let big = [b'x'; 100];
    let handles: Vec<_> = (0..8)
        .map(|_| {
            std::thread::spawn(move || {
                let t = tid();
                for i in 0..6000u64 {
                    let r = Record::RangeStart {
                        ts: now_ns(),
                        id: i,
                        stream: t as u64,
                        msg: &big[..],
                        null: false,
                    };
                    assert!(record(&r));
                }
                t
            })
        })
        .collect();
    let tids: Vec<u32> = handles.into_iter().map(|h| h.join().unwrap()).collect();

    // 300 short threads, one record each: they recycle parked chunks instead of taking new ones.
    for _ in 0..30 {
        let hs: Vec<_> = (0..10)
            .map(|_| std::thread::spawn(|| record(&Record::OwnerPop { ts: now_ns() })))
            .collect();
        for h in hs {
            assert!(h.join().unwrap());
        }
    }
    // The TSC clock (where the kernel uses the TSC): once calibrated, stamps stay monotonic
    // on a thread and within a millisecond of CLOCK_MONOTONIC.
    let before = now_ns();
    let tsc = crate::clock::force_calibration();
    eprintln!("stamps from the TSC: {tsc}");
    if tsc {
        let mut last = before;
        for _ in 0..100_000 {
            let t = now_ns();
            let b = crate::clock::now_ns_before();
            assert!(t >= last, "monotonic: {t} after {last}");
            assert!(b >= t.saturating_sub(1_000), "before-stamps agree");
            last = t.max(b);
        }
        let r = crate::clock::reference_ns();
        assert!(now_ns().abs_diff(r) < 1_000_000, "{} vs {r}", now_ns());
    }
    assert!(stop());
    crate::writer::release_thread_chunk();

    let files: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let (recs, chunks, sealed, dropped) = read_stream(&files[0]);
    assert_eq!(dropped, 0);

    // the Shadow record comes right before the allocation made outside the window, and only
    // there
    let shadows: Vec<usize> = (0..recs.len())
        .filter(|&i| matches!(recs[i].1, Record::Shadow { .. }))
        .collect();
    assert_eq!(shadows.len(), 1, "{:?}", &recs[..8]);
    assert_eq!(recs[shadows[0]].1, Record::Shadow { ts: shadow_ts });
    assert!(matches!(
        recs[shadows[0] + 1],
        (t, Record::RegionRegister { ts, .. }) if t == main_tid && ts == shadow_ts
    ));
    assert!(recs
        .iter()
        .any(|(_, r)| matches!(r, Record::RegionUnregister { ts, .. } if *ts == window_ts)));

    let mine: Vec<_> = recs
        .iter()
        .filter_map(|(_, r)| match r {
            Record::Source {
                source, tag, body, ..
            } if *source == OWN => Some(Own::decode(*tag, body).unwrap().to_owned_debug()),
            _ => None,
        })
        .collect();
    assert_eq!(mine, own.map(|r| r.to_owned_debug()));

    let mut per_tid: HashMap<u32, Vec<(u64, u64)>> = HashMap::new();
    let mut pops = 0;
    let mut systems = Vec::new();
    for (t, r) in &recs {
        match r {
            Record::RangeStart { ts, id, stream, .. } => {
                assert_eq!(*stream as u32, *t, "record attributed to its writer");
                per_tid.entry(*t).or_default().push((*ts, *id));
            }
            Record::OwnerPop { .. } => pops += 1,
            Record::System { code, .. } => systems.push(*code),
            Record::Mark { .. } => assert_eq!(*t, main_tid),
            _ => {}
        }
    }
    for t in &tids {
        // A thread's chunks are not in file order (it may continue a parked chunk of a lower
        // index), so order by time stamp.
        let mut v = per_tid[t].clone();
        v.sort_by_key(|&(ts, _)| ts);
        let ids: Vec<u64> = v.into_iter().map(|(_, id)| id).collect();
        assert_eq!(ids.len(), 6000);
        let bad: Vec<_> = ids
            .windows(2)
            .filter(|w| w[0] + 1 != w[1])
            .take(5)
            .collect();
        assert!(
            bad.is_empty(),
            "in order, no holes: {bad:?} len {}",
            ids.len()
        );
    }
    assert_eq!(pops, 300);
    assert_eq!(
        systems,
        [
            SystemCode::StartTrace,
            SystemCode::Step,
            SystemCode::StopTrace
        ]
    );
    // 8 × 6000 × ~115 B ≈ 5.5 MB → ~22 full chunks; the 300 short threads add none.
    assert!(sealed >= 16, "sealed {sealed}");
    assert!(
        chunks <= sealed + 12,
        "chunks {chunks}, sealed {sealed}: short threads recycled"
    );
}
