//! Fuzz target: a capture file (`memscope_capture_<ts>.mscap`), as `memscope export` and the
//! replay API read it (header, trailer and index, every block and record); see
//! `memscope_fuzz::captures`.

use memscope_fuzz::{captures, run, Target};

fn main() {
    run(
        Target {
            name: "capture",
            ext: "mscap",
            seeds: vec![captures::capture_seed()],
            dict: captures::dict(),
            stretch_max: 16 << 20,
        },
        captures::run_capture,
    )
}
