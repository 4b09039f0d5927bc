//! A small mutation fuzzer on stable Rust for memscope's input readers.
//!
//! Each target (`src/bin/fuzz_<target>.rs`) gives seed inputs, a dictionary of tokens and a
//! function that feeds one input to the code under test and returns an *outcome* (a short
//! text such as `ok rows=3` or the error message with numbers removed). The driver
//! ([`run`]):
//!
//! * mutates inputs from the corpus with a fixed-seed RNG (bit flips, byte edits, block
//!   copies and deletes, dictionary tokens, splices of two inputs, interesting numbers, and now
//!   and then a stretch to many megabytes, for the bounded-read classes);
//! * writes each input to `<work>/current.<ext>` before running it (targets read it from
//!   there, as the real readers read files), so an abort (OOM under `ulimit -v`) leaves the
//!   input that caused it (`<work>`: `--work DIR`, else a folder in `/dev/shm`, else `<out>`);
//! * runs the target under `catch_unwind`; a panic is a crash, saved as
//!   `<out>/crash-<hash>.<ext>` once per distinct panic message;
//! * keeps an input in the corpus when its outcome was never seen (a cheap stand-in for
//!   coverage feedback: it steers towards inputs that get further into the reader);
//! * stops a run that takes longer than the hang limit, saving `<out>/hang-<hash>.<ext>`;
//! * prints progress every 10 s and a final line `<target>: <n> executions in <s> s (<r>/s),
//!   <k> panics, <h> hangs, corpus <c>, peak RSS <m> MiB`; exit code 1 when it found a crash.
//!
//! Command line of every target: `--duration SECS` (600), `--runs N` (no limit), `--seed N`,
//! `--corpus DIR` (more seeds, repeatable), `--out DIR` (`target/fuzz/<target>`),
//! `--work DIR` (where `current.<ext>` and scratch files go), `--max-len BYTES` (64 KiB for
//! mutated inputs; stretches go further), `--hang-secs S` (20),
//! `--replay FILE` (run one input and report its outcome or panic).

pub mod captures;
pub mod dumps;
mod mutate;

use mutate::{mutate_once, stretch};
pub use mutate::{Rng, INTERESTING};

use std::collections::HashSet;
use std::io::Write;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What a target tells the driver.
pub struct Target {
    /// Name (`csv`, `db`, `config`, …), used for the output folder and messages.
    pub name: &'static str,
    /// Extension of `<out>/current.<ext>` (what the readers expect to see).
    pub ext: &'static str,
    /// Seed inputs.
    pub seeds: Vec<Vec<u8>>,
    /// Tokens the mutator inserts (field separators, keywords, numbers near the bounds).
    pub dict: Vec<Vec<u8>>,
    /// Largest input a stretch makes (past the reader's bounds, to check them; 1 in 20 000
    /// inputs is stretched).
    pub stretch_max: usize,
}

/// Per-run context handed to the target function.
pub struct Ctx {
    /// The input, as written to disk (`<work>/current.<ext>`).
    pub path: PathBuf,
    /// A scratch folder the target may use (temporary sort files, copies); emptied by nobody,
    /// so targets keep what they put there small.
    pub scratch: PathBuf,
    /// The run's RNG, for targets that make choices of their own.
    pub rng: Rng,
}

/// Most inputs kept in the corpus (memory stays bounded on long runs).
pub const MAX_CORPUS: usize = 5000;

struct Options {
    duration: Duration,
    runs: Option<u64>,
    seed: u64,
    corpus: Vec<PathBuf>,
    out: PathBuf,
    work: Option<PathBuf>,
    max_len: usize,
    hang: Duration,
    replay: Option<PathBuf>,
}

fn options(name: &str) -> Options {
    let mut o = Options {
        duration: Duration::from_secs(600),
        runs: None,
        seed: 0x6d65_6d73_636f_7065,
        corpus: Vec::new(),
        out: PathBuf::from(format!("target/fuzz/{name}")),
        work: None,
        max_len: 64 << 10,
        hang: Duration::from_secs(20),
        replay: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || {
            args.next().unwrap_or_else(|| {
                eprintln!("fuzz_{name}: {a} needs a value");
                std::process::exit(2)
            })
        };
        let num = |s: String| -> u64 {
            s.parse().unwrap_or_else(|_| {
                eprintln!("fuzz_{name}: bad number {s:?}");
                std::process::exit(2)
            })
        };
        match a.as_str() {
            "--duration" => o.duration = Duration::from_secs(num(val())),
            "--runs" => o.runs = Some(num(val())),
            "--seed" => o.seed = num(val()),
            "--corpus" => o.corpus.push(PathBuf::from(val())),
            "--out" => o.out = PathBuf::from(val()),
            "--work" => o.work = Some(PathBuf::from(val())),
            "--max-len" => o.max_len = num(val()) as usize,
            "--hang-secs" => o.hang = Duration::from_secs(num(val())),
            "--replay" => o.replay = Some(PathBuf::from(val())),
            other => {
                eprintln!("fuzz_{name}: unknown argument {other:?} (see benches/fuzz/README.md)");
                std::process::exit(2)
            }
        }
    }
    o
}

/// Peak resident set size of this process in MiB (`VmHWM`), 0 when unknown.
pub fn peak_rss_mib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
        })
        .map_or(0, |kib| kib / 1024)
}

fn hash(b: &[u8]) -> u64 {
    // FNV-1a: names crash files, not security
    b.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &x| {
        (h ^ u64::from(x)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn load_dir(dir: &Path, into: &mut Vec<Vec<u8>>) {
    if let Ok(rd) = std::fs::read_dir(dir) {
        let mut paths: Vec<PathBuf> = rd.flatten().map(|e| e.path()).collect();
        paths.sort();
        for p in paths {
            let readme = p
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("README"));
            if p.is_file() && !readme {
                if let Ok(b) = std::fs::read(&p) {
                    if b.len() <= 16 << 20 {
                        into.push(b);
                    }
                }
            }
        }
    }
}

fn panic_text(e: &(dyn std::any::Any + Send)) -> String {
    e.downcast_ref::<String>()
        .cloned()
        .or_else(|| e.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_else(|| "panic".to_owned())
}

/// Runs target `t` with `f` as the code under test; see the crate documentation. Never
/// returns: exits 0 (no crash), 1 (crashes found) or 3 (a hang).
pub fn run(t: Target, mut f: impl FnMut(&[u8], &mut Ctx) -> String) -> ! {
    let o = options(t.name);
    let fail = |m: String| -> ! {
        eprintln!("fuzz_{}: {m}", t.name);
        std::process::exit(2)
    };
    std::fs::create_dir_all(&o.out).unwrap_or_else(|e| fail(format!("{}: {e}", o.out.display())));
    // the input of each run is written before it runs: on tmpfs that costs microseconds, on a
    // disk file system with online discard milliseconds
    let work = o.work.clone().unwrap_or_else(|| {
        if Path::new("/dev/shm").is_dir() {
            PathBuf::from(format!(
                "/dev/shm/memscope-fuzz-{}-{}",
                t.name,
                std::process::id()
            ))
        } else {
            o.out.clone()
        }
    });
    let scratch = work.join("scratch");
    std::fs::create_dir_all(&scratch)
        .unwrap_or_else(|e| fail(format!("{}: {e}", scratch.display())));
    let current = work.join(format!("current.{}", t.ext));
    let mut ctx = Ctx {
        path: current.clone(),
        scratch,
        rng: Rng::new(o.seed ^ 0x5555),
    };
    let write_current = |b: &[u8]| {
        std::fs::write(&current, b).unwrap_or_else(|e| fail(format!("{}: {e}", current.display())))
    };
    // panics are counted, not printed by the default hook for each one
    let last_panic: Arc<Mutex<String>> = Arc::new(Mutex::new(String::new()));
    {
        let lp = last_panic.clone();
        std::panic::set_hook(Box::new(move |info| {
            let loc = info
                .location()
                .map_or(String::new(), |l| format!(" at {}:{}", l.file(), l.line()));
            if let Ok(mut g) = lp.lock() {
                *g = format!("{}{loc}", panic_text(info.payload()));
            }
        }));
    }
    if let Some(p) = &o.replay {
        let input = std::fs::read(p).unwrap_or_else(|e| fail(format!("{}: {e}", p.display())));
        write_current(&input);
        match std::panic::catch_unwind(AssertUnwindSafe(|| f(&input, &mut ctx))) {
            Ok(out) => {
                println!("fuzz_{}: {}: {out}", t.name, p.display());
                std::process::exit(0)
            }
            Err(_) => {
                let m = last_panic.lock().map(|g| g.clone()).unwrap_or_default();
                println!("fuzz_{}: {}: PANIC {m}", t.name, p.display());
                std::process::exit(1)
            }
        }
    }
    let mut corpus = t.seeds.clone();
    for d in &o.corpus {
        load_dir(d, &mut corpus);
    }
    if corpus.is_empty() {
        corpus.push(Vec::new());
    }
    // hang watchdog: the main thread stamps the start of each run
    let started = Arc::new(AtomicU64::new(0));
    let running = Arc::new(AtomicBool::new(false));
    let epoch = Instant::now();
    {
        let (started, running) = (started.clone(), running.clone());
        let (hang, out, cur, name, ext) = (o.hang, o.out.clone(), current.clone(), t.name, t.ext);
        std::thread::spawn(move || loop {
            std::thread::sleep(Duration::from_millis(500));
            let at = Duration::from_millis(started.load(Ordering::Relaxed));
            if running.load(Ordering::Relaxed) && epoch.elapsed().saturating_sub(at) > hang {
                let input = std::fs::read(&cur).unwrap_or_default();
                let p = out.join(format!("hang-{:016x}.{ext}", hash(&input)));
                let _ = std::fs::write(&p, &input);
                eprintln!(
                    "fuzz_{name}: HANG: one run took more than {} s; input saved as {}",
                    hang.as_secs(),
                    p.display()
                );
                std::process::exit(3);
            }
        });
    }
    let mut rng = Rng::new(o.seed);
    // FUZZ_SHOW_NEW=1: print each new outcome (to see what the novelty check keeps)
    let show_new = std::env::var_os("FUZZ_SHOW_NEW").is_some();
    let mut seen: HashSet<String> = HashSet::new();
    let mut crashes: HashSet<String> = HashSet::new();
    let (mut execs, mut panics) = (0u64, 0u64);
    let start = Instant::now();
    let mut last_report = Instant::now();
    // the seeds run as they are first
    let mut queue: Vec<Vec<u8>> = corpus.clone();
    loop {
        if start.elapsed() >= o.duration || o.runs.is_some_and(|r| execs >= r) {
            break;
        }
        let input = match queue.pop() {
            Some(i) => i,
            None => {
                let mut d = rng.pick(&corpus).clone();
                if rng.one_in(20_000) {
                    d = stretch(&mut rng, &d, t.stretch_max);
                } else {
                    let other = rng.pick(&corpus).clone();
                    for _ in 0..1 + rng.below(8) {
                        mutate_once(&mut rng, &mut d, &t.dict, &other, o.max_len);
                    }
                    d.truncate(o.max_len);
                }
                d
            }
        };
        write_current(&input);
        ctx.rng = Rng::new(rng.next_u64());
        started.store(epoch.elapsed().as_millis() as u64, Ordering::Relaxed);
        running.store(true, Ordering::Relaxed);
        let res = std::panic::catch_unwind(AssertUnwindSafe(|| f(&input, &mut ctx)));
        running.store(false, Ordering::Relaxed);
        execs += 1;
        match res {
            Ok(outcome) => {
                if show_new && !seen.contains(&outcome) {
                    eprintln!("fuzz_{}: new outcome: {outcome}", t.name);
                }
                if seen.len() < 100_000 && seen.insert(outcome) && input.len() <= o.max_len {
                    if corpus.len() < MAX_CORPUS {
                        corpus.push(input);
                    } else {
                        // full: replace a kept input, never a seed
                        let i = t.seeds.len() + rng.below(corpus.len() - t.seeds.len());
                        corpus[i] = input;
                    }
                }
            }
            Err(_) => {
                panics += 1;
                let m = last_panic.lock().map(|g| g.clone()).unwrap_or_default();
                if crashes.insert(m.clone()) {
                    let p = o.out.join(format!("crash-{:016x}.{}", hash(&input), t.ext));
                    let _ = std::fs::write(&p, &input);
                    eprintln!(
                        "fuzz_{}: CRASH: {m}; input saved as {}",
                        t.name,
                        p.display()
                    );
                }
            }
        }
        if last_report.elapsed() > Duration::from_secs(10) {
            last_report = Instant::now();
            let s = start.elapsed().as_secs_f64();
            eprintln!(
                "fuzz_{}: {:.0} s, {execs} executions ({:.0}/s), {panics} panics, corpus {}, peak RSS {} MiB",
                t.name,
                s,
                execs as f64 / s,
                corpus.len(),
                peak_rss_mib()
            );
        }
    }
    let s = start.elapsed().as_secs_f64();
    let line = format!(
        "fuzz_{}: {execs} executions in {:.0} s ({:.0}/s), {panics} panics ({} distinct), 0 hangs, corpus {}, peak RSS {} MiB",
        t.name,
        s,
        execs as f64 / s.max(1e-9),
        crashes.len(),
        corpus.len(),
        peak_rss_mib()
    );
    println!("{line}");
    let _ = std::io::stdout().flush();
    if o.work.is_none() && work != o.out {
        let _ = std::fs::remove_dir_all(&work);
    }
    std::process::exit(if panics > 0 { 1 } else { 0 })
}

/// An outcome text for the driver's novelty check: `err: <message>` up to its first quoted
/// value (`"`, `` ` `` or `'`: values from the input), with the input's path removed and
/// digits collapsed, so errors that differ only in a value, a number or a line count once
/// (the corpus grows with kinds of errors, not with inputs).
pub fn outcome_of_error(msg: &str, path: &Path) -> String {
    let m = msg.replace(&path.display().to_string(), "F");
    let mut out = String::from("err: ");
    for c in m.chars() {
        if matches!(c, '"' | '`' | '\'') || out.len() >= 140 {
            break;
        }
        if c.is_ascii_digit() {
            if !out.ends_with('#') {
                out.push('#');
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rng_is_deterministic_and_mutations_stay_in_bounds() {
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        assert_eq!(a.next_u64(), b.next_u64());
        let mut d = b"1,MSTX,Mark,m,1,1,1,0,N/A,,,\n".to_vec();
        for _ in 0..10_000 {
            mutate_once(&mut a, &mut d, &[b"size:".to_vec()], b"x,y", 4096);
            d.truncate(4096);
        }
        assert!(d.len() <= 4096);
        let s = stretch(&mut a, b"abc", 4 << 20);
        assert!(s.len() >= 1 << 20 && s.len() <= (4 << 20) + 1);
    }

    #[test]
    fn error_outcomes_ignore_numbers_and_the_path() {
        let p = Path::new("/x/current.csv");
        assert_eq!(
            outcome_of_error("/x/current.csv:17: bad ID \"123\"", p),
            outcome_of_error("/x/current.csv:4: bad ID \"9\\\"x\"", p)
        );
        assert_eq!(
            outcome_of_error("/x/current.csv:4: bad ID \"9\"", p),
            "err: F:#: bad ID "
        );
    }
}
