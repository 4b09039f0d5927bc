//! Fuzzes the stream reader: `fuzz_stream [SECONDS=600] [SEED]`; prints executions and panics;
//! panicking inputs are saved under `benches/fuzz/crashes/stream/`. Exit code 1 if any panicked.
#![forbid(unsafe_code)]

fn main() {
    let mut args = std::env::args().skip(1);
    let secs: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(600);
    let seed: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(0x5eed);
    let seeds = vec![memscope_fuzz::targets::stream_seed()];
    let (n, p) = memscope_fuzz::fuzz(
        "stream",
        &seeds,
        std::time::Duration::from_secs(secs),
        seed,
        &memscope_fuzz::targets::run_stream,
    );
    println!("fuzz_stream: {n} executions in {secs} s, {p} panics");
    std::process::exit(i32::from(p > 0));
}
