//! `hal-event-cost`: nanoseconds per HAL event on the recording thread, plain and under the
//! memscope probe (issue 5; target ≤ 150 ns added per event, where msMemScope makes two DCMI
//! driver queries per HAL event).
//!
//! It runs `hal_loop` (built by `build.rs`: `halMemAlloc` + `halMemFree` pairs over a fake
//! driver that does no work) in three ways, alternating, `--repeats` times each:
//! * `plain` — no probe;
//! * `probe, hal off` — under `memscope run --adapters mstx`: the hooks only forward;
//! * `probe, hal on` — under `memscope run --adapters hal`: every call is recorded.
//!
//! and prints the median ns per event of each and the added cost, both in wall time and in
//! the loop thread's CPU time (which leaves out time spent waiting for a core: the collector
//! runs concurrently, and on a 2-core machine it competes with the job). Usage (same profile for
//! the workspace and the benchmark, the dist profile recommended):
//!
//! ```text
//! cargo build --profile dist --workspace
//! cargo run --profile dist -p memscope-bench-hal-event-cost -- [--iterations N] [--repeats R] \
//!     [--baseline OTHER/target/dist/memscope]
//! ```
//!
//! `--baseline` names the `memscope` of another build (an older checkout, same profile): every
//! repeat then also runs `probe, hal on` under it, alternating with this build's, so the two
//! are paired in one run.
#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The measured loop built by `build.rs`.
const HAL_LOOP: &str = env!("HAL_LOOP");

/// `memscope` next to this binary (`target/<profile>/`).
fn memscope() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("current exe: {e}"))?;
    let p = exe
        .parent()
        .map(|d| d.join("memscope"))
        .ok_or("no parent dir")?;
    if p.is_file() {
        Ok(p)
    } else {
        Err(format!(
            "{} not found: build the workspace in the same profile first",
            p.display()
        ))
    }
}

/// Runs `cmd` and parses the `ns_per_event <wall> <thread cpu>` line of its stdout.
fn measure(mut cmd: Command) -> Result<(f64, f64), String> {
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!(
            "{cmd:?} failed: {}\n{}",
            text,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    text.lines()
        .find_map(|l| l.strip_prefix("ns_per_event "))
        .and_then(|v| {
            let mut it = v.split_whitespace().map(|x| x.parse::<f64>().ok());
            Some((it.next()??, it.next()??))
        })
        .ok_or_else(|| format!("no ns_per_event in {text:?}"))
}

fn under_probe(memscope: &Path, adapters: &str, iterations: u64, out: &Path) -> Command {
    let mut c = Command::new(memscope);
    c.args(["run", "-q", "--adapters", adapters, "-o"])
        .arg(out)
        .args(["--", HAL_LOOP, &iterations.to_string()]);
    c
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn arg(args: &[String], name: &str, default: u64) -> Result<u64, String> {
    match args.iter().position(|a| a == name) {
        Some(i) => args
            .get(i + 1)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("{name} needs a number")),
        None => Ok(default),
    }
}

/// The `--baseline` memscope, if given.
fn baseline(args: &[String]) -> Result<Option<PathBuf>, String> {
    let Some(i) = args.iter().position(|a| a == "--baseline") else {
        return Ok(None);
    };
    let p = args
        .get(i + 1)
        .map(PathBuf::from)
        .ok_or("--baseline needs the path of another build's memscope")?;
    if p.is_file() {
        Ok(Some(p))
    } else {
        Err(format!("--baseline {}: not a file", p.display()))
    }
}

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().collect();
    let iterations = arg(&args, "--iterations", 1_000_000)?;
    let repeats = arg(&args, "--repeats", 5)?.max(1);
    let memscope = memscope()?;
    let base = baseline(&args)?;
    let tmp = tempfile::tempdir().map_err(|e| e.to_string())?;
    let mut runs: [Vec<(f64, f64)>; 4] = Default::default();
    for _ in 0..repeats {
        let mut c = Command::new(HAL_LOOP);
        c.arg(iterations.to_string());
        runs[0].push(measure(c)?);
        runs[1].push(measure(under_probe(
            &memscope,
            "mstx",
            iterations,
            tmp.path(),
        ))?);
        runs[2].push(measure(under_probe(
            &memscope,
            "hal",
            iterations,
            tmp.path(),
        ))?);
        if let Some(b) = &base {
            runs[3].push(measure(under_probe(b, "hal", iterations, tmp.path()))?);
        }
    }
    let med = |i: usize| {
        let mut wall: Vec<f64> = runs[i].iter().map(|r| r.0).collect();
        let mut cpu: Vec<f64> = runs[i].iter().map(|r| r.1).collect();
        (median(&mut wall), median(&mut cpu))
    };
    let (p, f, n) = (med(0), med(1), med(2));
    println!("HAL event cost on the recording thread ({iterations} alloc+free pairs, median of {repeats} runs)");
    println!("                        wall ns/event (added)   thread-CPU ns/event (added)");
    println!(
        "  plain                 {:8.1}                {:8.1}",
        p.0, p.1
    );
    println!(
        "  probe, hal off        {:8.1} (+{:6.1})      {:8.1} (+{:6.1})",
        f.0,
        f.0 - p.0,
        f.1,
        f.1 - p.1
    );
    println!(
        "  probe, hal recording  {:8.1} (+{:6.1})      {:8.1} (+{:6.1})   target: +150",
        n.0,
        n.0 - p.0,
        n.1,
        n.1 - p.1
    );
    if let Some(b) = &base {
        let o = med(3);
        println!(
            "  baseline, recording   {:8.1} (+{:6.1})      {:8.1} (+{:6.1})   ({})",
            o.0,
            o.0 - p.0,
            o.1,
            o.1 - p.1,
            b.display()
        );
    }
    Ok(())
}
