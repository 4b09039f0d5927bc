//! Fuzzes the capture reader: `fuzz_capture [SECONDS=600] [SEED]`; prints executions and panics;
//! panicking inputs are saved under `benches/fuzz/crashes/capture/`. Exit code 1 if any panicked.
#![forbid(unsafe_code)]

fn main() {
    let mut args = std::env::args().skip(1);
    let secs: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(600);
    let seed: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(0x5eed);
    let seeds = vec![memscope_fuzz::targets::capture_seed()];
    let (n, p) = memscope_fuzz::fuzz(
        "capture",
        &seeds,
        std::time::Duration::from_secs(secs),
        seed,
        &memscope_fuzz::targets::run_capture,
    );
    println!("fuzz_capture: {n} executions in {secs} s, {p} panics");
    std::process::exit(i32::from(p > 0));
}
