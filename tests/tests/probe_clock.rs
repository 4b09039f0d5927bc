//! Issue 9 (probe speed): stamps come from the TSC once the probe has calibrated it (where the
//! kernel uses the TSC), and they stay what the collector relies on: ns since the epoch,
//! monotonic per chunk, and ordered across threads — a block freed on one thread and handed to
//! another by the allocator is freed before it is allocated again, in stamp order.

mod host_common;
mod probe_common;

use host_common::*;
use memscope_wire::Record;
use probe_common::*;
use std::collections::HashSet;
use std::time::{SystemTime, UNIX_EPOCH};

fn epoch_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

#[test]
fn stamps_order_a_free_before_the_reuse_of_its_block_on_another_thread() {
    let p = prog("probe_pingpong");
    let spool = tempfile::tempdir().unwrap();
    let t0 = epoch_ns();
    let o = probe_cmd(spool.path(), &host_mask(), &p)
        .arg("300000")
        .env("MALLOC_ARENA_MAX", "1")
        .env("GLIBC_TUNABLES", "glibc.malloc.tcache_count=0")
        .output()
        .unwrap();
    let t1 = epoch_ns();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let streams = read_streams(spool.path());
    let s = stream_of(&streams, "probe_pingpong");
    assert_eq!(s.dropped, 0);

    // (ts, free first, tid, addr, is_malloc) of every 48-byte block event.
    let mut evs = Vec::new();
    let mut blocks = HashSet::new();
    for (tid, r) in &s.records {
        if let Record::Malloc {
            ts, addr, size: 48, ..
        } = r
        {
            blocks.insert(*addr);
            evs.push((*ts, 1u8, *tid, *addr));
        }
    }
    for (tid, r) in &s.records {
        if let Record::Free { ts, addr } = r {
            if blocks.contains(addr) {
                evs.push((*ts, 0u8, *tid, *addr));
            }
        }
    }
    assert_eq!(evs.len(), 2 * 300_000, "every malloc and free recorded");
    for &(ts, ..) in &evs {
        assert!(
            ts > t0 - 1_000_000_000 && ts < t1 + 1_000_000_000,
            "epoch ns: {ts} not in [{t0}, {t1}]"
        );
    }
    evs.sort();
    let mut live = HashSet::new();
    let mut handed_over = 0;
    let mut last_free_tid = std::collections::HashMap::new();
    for &(ts, kind, tid, addr) in &evs {
        if kind == 1 {
            assert!(
                live.insert(addr),
                "malloc of {addr:#x} on {tid} at {ts} while its block is live: a free stamped after the reuse"
            );
            if last_free_tid.get(&addr).is_some_and(|t| *t != tid) {
                handed_over += 1;
            }
        } else {
            assert!(
                live.remove(&addr),
                "free of {addr:#x} at {ts} before its malloc"
            );
            last_free_tid.insert(addr, tid);
        }
    }
    assert!(
        handed_over > 100_000,
        "blocks moved between the threads: {handed_over}"
    );
}
