//! What the dump targets (CSV and `.db`) run on one input file: the reader in its three orders
//! and every offline analysis (in ID and in time order, `--order time`), with oracles beyond
//! "no panic":
//!
//! * `Order::ById` delivers events in non-decreasing (process, ID) order, `Order::ByTime` in
//!   non-decreasing (process, timestamp, ID) order;
//! * every order delivers the same number of events, and [`ReadStats::rows`] is that number;
//! * a read that fails in one order fails in the others.

use std::path::Path;

use memscope_analysis::compare::{self, Level};
use memscope_analysis::decompose::DecomposeLayer;
use memscope_analysis::gap::GapLayer;
use memscope_analysis::inefficient_layer::InefficientLayer;
use memscope_analysis::leak_range::RangeLeakLayer;
use memscope_analysis::leaks::LeakLayer;
use memscope_analysis::offline::run_layers_in;
use memscope_analysis::IneffConfig;
use memscope_core::bus::Layer;
use memscope_dump::reader::{DumpFile, Order, ReadOptions, ReadStats, SortOptions, TimeUnit};

use crate::{outcome_of_error, Ctx};

/// Small sort runs, so the spill-and-merge path runs on small inputs too.
fn opts(ctx: &Ctx) -> ReadOptions {
    ReadOptions {
        sort: SortOptions {
            run_bytes: 4 << 10,
            temp_dir: Some(ctx.scratch.clone()),
        },
        ..ReadOptions::default()
    }
}

/// [`opts`] with timestamps taken as they are written (no unit detection, no µs scaling that
/// could saturate): the sorted reads compare raw timestamps, as the sort does.
fn raw_ts_opts(ctx: &Ctx) -> ReadOptions {
    ReadOptions {
        time_unit: Some(TimeUnit::Nanos),
        ..opts(ctx)
    }
}

/// What one read delivered: the event count, the stats, a bit per event kind seen, and a hash
/// of the (process, ID, timestamp) sequence.
struct Read {
    n: u64,
    stats: ReadStats,
    kinds: u32,
    seq_hash: u64,
}

impl std::fmt::Debug for Read {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} event(s), kinds {:x}", self.n, self.kinds)
    }
}

/// Reads `file` in `order`; the File order detects the time unit, the sorted orders take raw
/// timestamps ([`raw_ts_opts`]).
fn read(file: &DumpFile, order: Order, ctx: &Ctx) -> Result<Read, String> {
    let mut r = Read {
        n: 0,
        stats: ReadStats::default(),
        kinds: 0,
        seq_hash: 0xcbf2_9ce4_8422_2325,
    };
    let mut prev: Option<(u64, u64, u64)> = None;
    let mut o = if order == Order::File {
        opts(ctx)
    } else {
        raw_ts_opts(ctx)
    };
    let stats = file
        .for_each(order, &mut o, &mut |e| {
            r.n += 1;
            r.kinds |= 1 << (e.kind as u32 % 32);
            let pid = e.pid.map_or(u64::MAX, u64::from);
            for x in [pid, e.id, e.ts_ns] {
                r.seq_hash = (r.seq_hash ^ x).wrapping_mul(0x0100_0000_01b3);
            }
            let key = match order {
                Order::ById => Some((pid, e.id, 0)),
                Order::ByTime => Some((pid, e.ts_ns, e.id)),
                Order::File => None,
            };
            if let Some(key) = key {
                assert!(
                    prev.is_none_or(|p| p <= key),
                    "{order:?} order broken: {prev:?} then {key:?}"
                );
                prev = Some(key);
            }
            Ok(())
        })
        .map_err(|e| e.to_string())?;
    assert_eq!(
        stats.rows, r.n,
        "ReadStats::rows differs from the events delivered"
    );
    r.stats = stats;
    Ok(r)
}

/// Errors only a sorted read can have: its temporary files, or values SQLite cannot order
/// (IDs or timestamps of 2^63 or more in a `.db`).
fn sort_only(e: &str) -> bool {
    e.contains("temporary") || e.contains("cannot be ordered by SQLite")
}

/// Every analysis layer `memscope analyze` and `memscope run --analysis` can run.
fn layers() -> Vec<Box<dyn Layer>> {
    let cfg = IneffConfig {
        idle_threshold: 2,
        ..IneffConfig::default()
    };
    vec![
        Box::new(LeakLayer::new()),
        Box::new(GapLayer::new()),
        Box::new(DecomposeLayer::collecting().0),
        Box::new(RangeLeakLayer::new("m", 0)),
        Box::new(InefficientLayer::collecting(cfg).0),
    ]
}

/// Opens `path` as a dump and runs everything on it; returns the outcome text.
pub fn run_dump(path: &Path, ctx: &Ctx) -> String {
    let file = match DumpFile::open(path) {
        Ok(f) => f,
        Err(e) => return outcome_of_error(&e.to_string(), path),
    };
    let by_file = read(&file, Order::File, ctx);
    let mut sorted = Vec::with_capacity(2);
    for order in [Order::ById, Order::ByTime] {
        let r = read(&file, order, ctx);
        match (&by_file, &r) {
            (Ok(a), Ok(b)) => {
                assert_eq!(
                    a.n, b.n,
                    "File and {order:?} orders deliver different counts"
                );
                assert_eq!(
                    a.kinds, b.kinds,
                    "File and {order:?} orders deliver different events"
                );
            }
            (Err(_), Err(_)) => {}
            (Ok(_), Err(e)) | (Err(e), Ok(_)) => {
                if sort_only(e) {
                    return outcome_of_error(e, path);
                }
                panic!("one order reads, the other fails: {by_file:?} / {order:?} {r:?}");
            }
        }
        sorted.push(r);
    }
    let (n, stats, kinds) = match &by_file {
        Ok(r) => (r.n, r.stats, r.kinds),
        Err(e) => return outcome_of_error(e, path),
    };
    // the replay-order warning's count (`time_disorder`) is 0 exactly when the ID order is a
    // time order too, i.e. when `--order time` would replay the same sequence
    let same_sequence = match (&sorted[0], &sorted[1]) {
        (Ok(a), Ok(b)) => Some(a.seq_hash == b.seq_hash),
        _ => None,
    };
    let mut analyses = String::new();
    for order in [Order::ById, Order::ByTime] {
        // the ID-order replay on raw timestamps (what `sorted` saw), the time-order one with
        // the unit detected (what `memscope analyze` does)
        let mut o = if order == Order::ById {
            raw_ts_opts(ctx)
        } else {
            opts(ctx)
        };
        analyses.push_str(&match run_layers_in(&file, order, &mut o, &mut layers) {
            Ok((sections, st)) => {
                assert_eq!(
                    st.rows, n,
                    "the analyses' replay read a different row count"
                );
                if let (Order::ById, Some(same)) = (order, same_sequence) {
                    assert_eq!(
                        st.time_disorder == 0,
                        same,
                        "time_disorder {} but ID and time orders {}",
                        st.time_disorder,
                        if same { "agree" } else { "differ" }
                    );
                }
                format!("sections={} ", sections.len())
            }
            Err(e) => outcome_of_error(&e.to_string(), path),
        });
    }
    for level in [Level::Op, Level::Kernel] {
        if let Ok(seq) = compare::collect(&file, level, &mut opts(ctx)) {
            let res = compare::compare(&seq, &seq, level);
            let _ = compare::compare_csv(&res.rows, true);
            assert!(
                res.rows.iter().all(|r| r.diff() == 0),
                "a dump compared with itself differs"
            );
        }
    }
    // the kinds of events read make the outcome: inputs that reach new kinds are kept
    format!(
        "ok rows={} kinds={kinds:x} torn={} {}",
        n.min(4),
        stats.torn_last_row.is_some(),
        analyses.trim_end()
    )
}
