//! What the dump targets (CSV and `.db`) run on one input file: the reader in both orders and
//! every offline analysis, with oracles beyond "no panic":
//!
//! * `Order::ById` delivers events in non-decreasing (process, ID) order;
//! * both orders deliver the same number of events, and [`ReadStats::rows`] is that number;
//! * a read that fails in one order fails in the other.

use std::path::Path;

use memscope_core::analysis::compare::{self, Level};
use memscope_core::analysis::decompose::DecomposeLayer;
use memscope_core::analysis::gap::GapLayer;
use memscope_core::analysis::inefficient_layer::InefficientLayer;
use memscope_core::analysis::leak_range::RangeLeakLayer;
use memscope_core::analysis::leaks::LeakLayer;
use memscope_core::analysis::offline::run_layers;
use memscope_core::analysis::IneffConfig;
use memscope_core::bus::Layer;
use memscope_core::reader::{DumpFile, Order, ReadOptions, ReadStats, SortOptions};

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

fn read(file: &DumpFile, order: Order, ctx: &Ctx) -> Result<(u64, ReadStats, u32), String> {
    let mut n = 0u64;
    let mut kinds = 0u32;
    let mut prev: Option<(u64, u64)> = None;
    let stats = file
        .for_each(order, &mut opts(ctx), &mut |e| {
            n += 1;
            kinds |= 1 << (e.kind as u32 % 32);
            if order == Order::ById {
                let key = (e.pid.map_or(u64::MAX, u64::from), e.id);
                assert!(
                    prev.is_none_or(|p| p <= key),
                    "ById order broken: {prev:?} then {key:?}"
                );
                prev = Some(key);
            }
            Ok(())
        })
        .map_err(|e| e.to_string())?;
    assert_eq!(
        stats.rows, n,
        "ReadStats::rows differs from the events delivered"
    );
    Ok((n, stats, kinds))
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
    let by_id = read(&file, Order::ById, ctx);
    let (n, stats, kinds) = match (&by_file, &by_id) {
        (Ok((a, sa, ka)), Ok((b, _, kb))) => {
            assert_eq!(a, b, "File and ById orders deliver different counts");
            assert_eq!(ka, kb, "File and ById orders deliver different events");
            (*a, *sa, *ka)
        }
        (Err(e), Err(_)) => return outcome_of_error(e, path),
        // a sort-only failure: its temporary files (the scratch folder) or a consumer
        (Ok(_), Err(e)) | (Err(e), Ok(_)) => {
            if e.contains("temporary") {
                return outcome_of_error(e, path);
            }
            panic!("one order reads, the other fails: {by_file:?} / {by_id:?}");
        }
    };
    let mut o = opts(ctx);
    let analyses = match run_layers(&file, &mut o, &mut layers) {
        Ok((sections, _)) => format!("sections={}", sections.len()),
        Err(e) => outcome_of_error(&e.to_string(), path),
    };
    for level in [Level::Op, Level::Kernel] {
        if let Ok(seq) = compare::collect(&file, level, &mut opts(ctx)) {
            let res = compare::compare(&seq, &seq, level);
            let _ = compare::compare_csv(&res.rows);
            assert!(
                res.rows.iter().all(|r| r.diff() == 0),
                "a dump compared with itself differs"
            );
        }
    }
    // the kinds of events read make the outcome: inputs that reach new kinds are kept
    format!(
        "ok rows={} kinds={kinds:x} torn={} {analyses}",
        n.min(4),
        stats.torn_last_row.is_some()
    )
}
