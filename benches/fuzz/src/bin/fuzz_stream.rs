//! Fuzz target: a probe stream file, as `memscope recover` reads a left-over spool (the raw
//! decoder from every offset, then the spool's k-way merge to the end); see
//! `memscope_fuzz::captures`.

use memscope_fuzz::{captures, run, Target};

fn main() {
    run(
        Target {
            name: "stream",
            ext: "stream",
            seeds: vec![captures::stream_seed()],
            dict: captures::dict(),
            stretch_max: 16 << 20,
        },
        captures::run_stream,
    )
}
