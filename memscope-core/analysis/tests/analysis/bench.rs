//! Benchmark driver for `benches/analysis/run.sh` (ignored in normal test runs).
//!
//! `MEMSCOPE_BENCH_FILE=dump.csv MEMSCOPE_BENCH_MODE=read|sorted|compare|leaks|inefficient \
//!  analysis-<hash> --ignored --exact bench::bench --nocapture` prints one line:
//! `mode=<m> rows=<n> secs=<s> rows_per_s=<r>`.

use std::path::PathBuf;
use std::time::Instant;

use memscope_analysis::compare::{compare_files, Level};
use memscope_analysis::inefficient::IneffConfig;
use memscope_analysis::inefficient_layer::InefficientLayer;
use memscope_analysis::leaks::LeakLayer;
use memscope_analysis::offline::run_layers;
use memscope_dump::reader::{DumpFile, Order, ReadOptions};

#[test]
#[ignore = "benchmark: run through benches/analysis/run.sh"]
fn bench() {
    let Ok(file) = std::env::var("MEMSCOPE_BENCH_FILE") else {
        eprintln!("SKIP: MEMSCOPE_BENCH_FILE not set");
        return;
    };
    let path = PathBuf::from(file);
    let mode = std::env::var("MEMSCOPE_BENCH_MODE").unwrap_or_else(|_| "read".into());
    let dump = DumpFile::open(&path).unwrap();
    let t = Instant::now();
    let rows = match mode.as_str() {
        "read" | "sorted" => {
            let order = if mode == "read" {
                Order::File
            } else {
                Order::ById
            };
            let mut n = 0u64;
            dump.for_each(order, &mut ReadOptions::default(), &mut |_| {
                n += 1;
                Ok(())
            })
            .unwrap();
            n
        }
        "raw" => {
            let mut src = memscope_dump::reader::CsvSource::new(
                "x",
                std::fs::File::open(&path).unwrap(),
                None,
            )
            .unwrap();
            let mut n = 0u64;
            while src.next_record().unwrap() {
                n += 1;
            }
            n
        }
        "compare" => {
            let r = compare_files(
                &path,
                &path,
                Level::Op,
                &mut ReadOptions::default(),
                &mut ReadOptions::default(),
            )
            .unwrap();
            eprintln!("compare rows: {}", r.rows.len());
            let secs = t.elapsed().as_secs_f64();
            let n = 2 * count(&dump);
            println!(
                "mode=compare rows={n} secs={secs:.2} rows_per_s={:.0}",
                n as f64 / secs
            );
            return;
        }
        "leaks" => {
            let (rep, stats) = run_layers(&dump, &mut ReadOptions::default(), &mut || {
                vec![Box::new(LeakLayer::new())]
            })
            .unwrap();
            eprintln!("leak lines: {}", rep[0].lines.len());
            stats.rows
        }
        "inefficient" => {
            let mut hs = Vec::new();
            let (_, stats) = run_layers(&dump, &mut ReadOptions::default(), &mut || {
                let (l, h) = InefficientLayer::collecting(IneffConfig::default());
                hs.push(h);
                vec![Box::new(l)]
            })
            .unwrap();
            eprintln!(
                "inefficient blocks: {}",
                hs.iter().map(|h| h.lock().unwrap().len()).sum::<usize>()
            );
            stats.rows
        }
        other => panic!("unknown mode {other}"),
    };
    let secs = t.elapsed().as_secs_f64();
    println!(
        "mode={mode} rows={rows} secs={secs:.2} rows_per_s={:.0}",
        rows as f64 / secs
    );
}

fn count(dump: &DumpFile) -> u64 {
    // records of the file (compare reads it twice), counted outside the timed work's memory
    let mut n = 0u64;
    dump.for_each(Order::File, &mut ReadOptions::default(), &mut |_| {
        n += 1;
        Ok(())
    })
    .unwrap();
    n
}
