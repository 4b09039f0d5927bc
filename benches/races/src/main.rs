//! The race check's cost (issue 36): `memscope_races::check` over N generated
//! launches of a training-like program, streamed (the operations are generated as the check
//! consumes them, as a capture would be read), one mode per process so that the peak
//! resident memory is the mode's own.
//!
//! Usage: `races-bench LAUNCHES MODE` with MODE one of
//! * `gen`: generate the operations only (the baseline subtracted from the others);
//! * `synced`: check a program whose streams are all ordered by events (no findings);
//! * `racy`: the same with 1 % of the event waits left out (findings on many launches);
//! * `frozen`: the worst case for the check's memory: frozen weights (no optimiser) and no
//!   host synchronisation, so every read of a weight stays a possible conflict for a stream
//!   created later (CSAN's model) and is kept, with its launch.
//!
//! Prints one line: `mode launches ops findings seconds peak_rss_kib live_pointers records`.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use memscope_races::{check, AccessKind, Free, KernelLaunch, StreamOp, TensorAccess};

/// Layers of the model: a forward and a backward launch each, and one optimiser launch.
const LAYERS: u64 = 100;
/// Every this many layers the forward hands its activation to stream 1 (a collective).
const COMM_EVERY: u64 = 10;

/// splitmix64.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// Generates a training loop step by step: forward on stream 0 (a fresh activation per layer,
/// a collective on stream 1 every `COMM_EVERY` layers), backward on stream 0 freeing the
/// activations, the optimiser on stream 2 after an event from stream 0, stream 0 waiting for
/// it, and a device synchronisation at the end of every step (the loss read on the host).
struct Gen {
    rng: Rng,
    /// Permille of event waits left out.
    skip_pm: u64,
    /// No optimiser and no device synchronisation.
    frozen: bool,
    launches: u64,
    limit: u64,
    ops: u64,
    queue: VecDeque<StreamOp>,
    stacks: Vec<Arc<str>>,
}

const WEIGHT: u64 = 0x1_0000_0000;
const GRAD: u64 = 0x2_0000_0000;
const ACT: u64 = 0x3_0000_0000;

impl Gen {
    fn new(limit: u64, skip_pm: u64, frozen: bool) -> Self {
        // Interned stacks, as the recorder keeps them: one per layer and phase.
        let stacks = (0..3 * LAYERS)
            .map(|i| Arc::from(format!("train.py:{i} forward\nmodel.py:{} layer\n", i % 97)))
            .collect();
        Self {
            rng: Rng(42),
            skip_pm,
            frozen,
            launches: 0,
            limit,
            ops: 0,
            queue: VecDeque::new(),
            stacks,
        }
    }

    fn launch(&mut self, stream: u64, name: &str, stack: u64, acc: &[(u64, AccessKind)]) {
        self.launches += 1;
        let accesses = acc
            .iter()
            .map(|&(addr, kind)| TensorAccess {
                addr,
                size: 1 << 20,
                kind,
                aliases: Vec::new(),
                owner: None,
            })
            .collect();
        let s = usize::try_from(stack).unwrap_or(0) % self.stacks.len();
        self.queue.push_back(StreamOp::KernelLaunch(KernelLaunch {
            id: self.launches,
            time_ns: self.launches * 1000,
            stream,
            operator: name.to_owned(),
            accesses,
            python_stack: Some(Arc::clone(&self.stacks[s])),
            c_stack: None,
        }));
    }

    /// `to` waits for what `from` has enqueued so far (unless this wait is left out).
    fn order(&mut self, from: u64, to: u64, event: u64) {
        self.queue.push_back(StreamOp::EventRecord {
            event,
            stream: from,
        });
        if self.rng.next() % 1000 >= self.skip_pm {
            self.queue
                .push_back(StreamOp::EventWait { stream: to, event });
        }
    }

    fn step(&mut self) {
        use AccessKind::{Output, ReadOnly as Ro, ReadWrite as Rw};
        for l in 0..LAYERS {
            let (a_in, a_out) = (ACT + l * 0x10_0000, ACT + (l + 1) * 0x10_0000);
            self.queue.push_back(StreamOp::Alloc {
                addr: a_out,
                size: 1 << 20,
            });
            let w = WEIGHT + l * 0x10_0000;
            self.launch(
                0,
                "aten::linear",
                l,
                &[(w, Ro), (a_in, Ro), (a_out, Output)],
            );
            if l % COMM_EVERY == COMM_EVERY - 1 {
                self.order(0, 1, 1);
                self.launch(1, "hcom_allReduce", l, &[(a_out, Rw)]);
                self.order(1, 0, 2);
            }
        }
        for l in (0..LAYERS).rev() {
            let (a_in, a_out) = (ACT + l * 0x10_0000, ACT + (l + 1) * 0x10_0000);
            let (w, g) = (WEIGHT + l * 0x10_0000, GRAD + l * 0x10_0000);
            let acc = [(w, Ro), (a_in, Ro), (a_out, Ro), (g, Output)];
            self.launch(0, "aten::linear_backward", LAYERS + l, &acc);
            self.queue.push_back(StreamOp::Free(Free {
                id: self.launches,
                time_ns: self.launches * 1000,
                addr: a_out,
                size: 1 << 20,
                stream: Some(0),
                python_stack: None,
                c_stack: None,
            }));
        }
        if self.frozen {
            return;
        }
        self.order(0, 2, 3);
        for l in 0..LAYERS {
            let (w, g) = (WEIGHT + l * 0x10_0000, GRAD + l * 0x10_0000);
            self.launch(
                2,
                "aten::_foreach_add_",
                2 * LAYERS + l,
                &[(g, Ro), (w, Rw)],
            );
        }
        self.order(2, 0, 4);
        self.queue.push_back(StreamOp::DeviceSynchronize);
    }
}

impl Iterator for Gen {
    type Item = StreamOp;

    fn next(&mut self) -> Option<StreamOp> {
        if self.queue.is_empty() {
            if self.launches >= self.limit {
                return None;
            }
            self.step();
        }
        self.ops += 1;
        self.queue.pop_front()
    }
}

/// Peak resident set of this process, KiB (`VmHWM`).
fn peak_rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(n), Some(mode)) = (args.get(1).and_then(|a| a.parse().ok()), args.get(2)) else {
        eprintln!("usage: races-bench LAUNCHES gen|synced|racy|frozen");
        std::process::exit(2);
    };
    let skip_pm = if mode == "racy" { 10 } else { 0 };
    let t = Instant::now();
    let mut g = Gen::new(n, skip_pm, mode == "frozen");
    let (findings, ops, launches, live, records) = if mode == "gen" {
        let ops = g.by_ref().count();
        (0, ops, g.launches, 0, 0)
    } else {
        let mut it = check(&mut g);
        let findings = it.by_ref().count();
        let (live, records) = (it.state().live_pointers(), it.state().held_records());
        drop(it);
        (
            findings,
            usize::try_from(g.ops).unwrap_or(0),
            g.launches,
            live,
            records,
        )
    };
    let secs = t.elapsed().as_secs_f64();
    println!(
        "{mode} {launches} {ops} {findings} {secs:.3} {} {live} {records}",
        peak_rss_kib()
    );
}
