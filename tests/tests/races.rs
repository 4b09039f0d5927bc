//! Issue 36 item 3: memscope's race check (`memscope_races`) against an independent
//! oracle, PyTorch's CUDA Sanitizer (`torch.cuda._sanitizer.EventHandler`, pure Python, fed
//! method by method by `tests/python/csan_oracle.py`, no CUDA needed). Named programs and 1 000
//! seeded random sequences (hundreds of launches over 4 streams) must give the same set of
//! conflicts: which launch, which earlier access, which data pointer, read or write on each
//! side. Frees are compared by their effect only: CSAN forgets a freed pointer unchecked, so
//! memscope's own free-while-in-use findings are left out of the comparison and checked here
//! on their own.
//!
//! torch comes from PyPI: `.ci/run` installs it into a venv and sets `MEMSCOPE_TORCH_PYTHON`;
//! without it, `python3` must import torch, else these tests fail saying so.

use std::io::Write;
use std::process::Command;

use memscope_races::{
    check, AccessKind, AccessRole, Free, KernelLaunch, RaceKind, StreamOp, TensorAccess,
};
use memscope_tests::{repo_root, torch_python};
use serde_json::{json, Value};

#[path = "races/gate.rs"]
mod gate;
#[path = "races/recorded.rs"]
mod recorded;

/// One conflict as both sides report it: (current seq, previous seq, pointer, current R/W,
/// previous R/W).
type Verdict = (u64, u64, u64, char, char);

/// Builds a sequence; launches are numbered 1, 2, ... (CSAN's sequence numbers) as their ids.
#[derive(Default)]
struct Prog {
    ops: Vec<StreamOp>,
    launches: u64,
}

impl Prog {
    fn launch(&mut self, stream: u64, acc: &[(u64, AccessKind)]) -> &mut Self {
        self.launches += 1;
        let accesses = acc
            .iter()
            .map(|&(addr, kind)| TensorAccess {
                addr,
                size: 256,
                kind,
                aliases: vec![],
                owner: Some(format!("t{addr:x}")),
            })
            .collect();
        self.ops.push(StreamOp::KernelLaunch(KernelLaunch {
            id: self.launches,
            time_ns: self.launches,
            stream,
            operator: format!("k{}", self.launches),
            accesses,
            python_stack: None,
            c_stack: None,
        }));
        self
    }
    fn op(&mut self, op: StreamOp) -> &mut Self {
        self.ops.push(op);
        self
    }
    fn free(&mut self, addr: u64, stream: Option<u64>) -> &mut Self {
        self.op(StreamOp::Free(Free {
            id: 0,
            time_ns: 0,
            addr,
            size: 256,
            stream,
            python_stack: None,
            c_stack: None,
        }))
    }
}

fn op_json(op: &StreamOp) -> Value {
    match op {
        StreamOp::KernelLaunch(l) => {
            let of = |k: AccessKind| -> Vec<u64> {
                l.accesses
                    .iter()
                    .filter(|a| a.kind == k)
                    .map(|a| a.addr)
                    .collect()
            };
            json!({"op": "launch", "stream": l.stream, "name": l.operator,
                   "ro": of(AccessKind::ReadOnly), "rw": of(AccessKind::ReadWrite),
                   "out": of(AccessKind::Output)})
        }
        StreamOp::StreamCreate { stream } => json!({"op": "stream_create", "stream": stream}),
        StreamOp::EventCreate { event } => json!({"op": "event_create", "event": event}),
        StreamOp::EventDelete { event } => json!({"op": "event_delete", "event": event}),
        StreamOp::EventRecord { event, stream } => {
            json!({"op": "record", "event": event, "stream": stream})
        }
        StreamOp::EventWait { stream, event } => {
            json!({"op": "wait", "event": event, "stream": stream})
        }
        StreamOp::StreamSynchronize { stream } => json!({"op": "stream_sync", "stream": stream}),
        StreamOp::EventSynchronize { event } => json!({"op": "event_sync", "event": event}),
        StreamOp::DeviceSynchronize => json!({"op": "device_sync"}),
        StreamOp::Alloc { addr, .. } => json!({"op": "alloc", "ptr": addr}),
        StreamOp::Free(f) | StreamOp::PoolFree(f) => json!({"op": "free", "ptr": f.addr}),
    }
}

fn rw(role: AccessRole) -> char {
    if role == AccessRole::Read {
        'R'
    } else {
        'W'
    }
}

/// memscope's access conflicts, sorted (free findings left out: CSAN has no such check).
fn memscope_verdicts(ops: &[StreamOp]) -> Vec<Verdict> {
    let mut v: Vec<Verdict> = check(ops.iter().cloned())
        .filter(|f| f.kind != RaceKind::FreeWhileInUse)
        .map(|f| {
            (
                f.current.seq,
                f.previous.seq,
                f.addr,
                rw(f.current.role),
                rw(f.previous.role),
            )
        })
        .collect();
    v.sort_unstable();
    v
}

/// CSAN's verdicts for each sequence, from one Python process.
fn oracle(seqs: &[&[StreamOp]]) -> Vec<Vec<Verdict>> {
    let py = torch_python();
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("seqs.jsonl");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&input).unwrap());
    for s in seqs {
        let ops: Vec<Value> = s.iter().map(op_json).collect();
        writeln!(f, "{}", Value::Array(ops)).unwrap();
    }
    f.into_inner().unwrap().sync_all().unwrap();
    let o = Command::new(py)
        .arg(repo_root().join("tests/python/csan_oracle.py"))
        .arg(&input)
        .output()
        .expect("run the CSAN oracle");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "csan_oracle.py failed:\n{stderr}");
    let out = String::from_utf8(o.stdout).unwrap();
    let parse = |line: &str| -> Vec<Verdict> {
        let rows: Vec<(u64, u64, u64, String, String)> = serde_json::from_str(line).unwrap();
        let ch = |s: &str| s.chars().next().unwrap();
        let mut v: Vec<Verdict> = rows
            .iter()
            .map(|(c, p, a, ck, pk)| (*c, *p, *a, ch(ck), ch(pk)))
            .collect();
        v.sort_unstable();
        v
    };
    let got: Vec<_> = out.lines().map(parse).collect();
    assert_eq!(
        got.len(),
        seqs.len(),
        "oracle answered {} of {}",
        got.len(),
        seqs.len()
    );
    got
}

// Inside race_prog's caching pool (`tests/programs/race_prog.c`), which runs these too.
const A: u64 = 0x10_1000;
const B: u64 = 0x10_2000;
use AccessKind::{Output, ReadOnly as Ro, ReadWrite as Rw};

/// The named programs of issue 36 item 3, each with the verdicts both must give.
fn scenarios() -> Vec<(&'static str, Prog, Vec<Verdict>)> {
    let mut v = Vec::new();
    let mut p = Prog::default();
    p.op(StreamOp::StreamCreate { stream: 1 })
        .launch(0, &[(A, Rw)])
        .launch(1, &[(A, Rw)]);
    v.push((
        "two streams write one buffer, no wait",
        p,
        vec![(2, 1, A, 'W', 'W')],
    ));

    let mut p = Prog::default();
    p.op(StreamOp::StreamCreate { stream: 1 })
        .op(StreamOp::EventCreate { event: 9 })
        .launch(0, &[(A, Rw)])
        .op(StreamOp::EventRecord {
            event: 9,
            stream: 0,
        })
        .op(StreamOp::EventWait {
            stream: 1,
            event: 9,
        })
        .launch(1, &[(A, Rw)]);
    v.push(("two streams write one buffer, record + wait", p, vec![]));

    let mut p = Prog::default();
    p.launch(0, &[(A, Output)])
        .launch(1, &[(A, Ro), (B, Output)]);
    v.push((
        "read after write across streams",
        p,
        vec![(2, 1, A, 'R', 'W')],
    ));

    let mut p = Prog::default();
    // Allocated, written on stream 1, freed back to stream 2's pool and reused there at once.
    p.op(StreamOp::Alloc { addr: A, size: 256 })
        .launch(1, &[(A, Output)])
        .free(A, Some(2))
        .op(StreamOp::Alloc { addr: A, size: 256 })
        .launch(2, &[(A, Output)]);
    v.push(("free on one stream, reuse on another", p, vec![]));

    let mut p = Prog::default();
    p.launch(1, &[(A, Output)])
        .op(StreamOp::StreamSynchronize { stream: 1 })
        .launch(0, &[(A, Ro), (A, Rw)])
        .launch(2, &[(A, Ro)]);
    v.push((
        "in-place custom op reads and writes one address",
        p,
        vec![(3, 2, A, 'R', 'W')],
    ));

    let mut p = Prog::default();
    p.launch(1, &[(A, Output)])
        .launch(2, &[(B, Output)])
        .launch(3, &[(A, Ro)])
        .op(StreamOp::DeviceSynchronize)
        .launch(0, &[(A, Rw), (B, Ro)]);
    v.push((
        "device sync orders everything",
        p,
        vec![(3, 1, A, 'R', 'W')],
    ));
    v
}

#[test]
fn named_programs_agree_with_csan() {
    let sc = scenarios();
    let seqs: Vec<&[StreamOp]> = sc.iter().map(|(_, p, _)| p.ops.as_slice()).collect();
    let csan = oracle(&seqs);
    for ((name, p, want), csan) in sc.iter().zip(&csan) {
        let ours = memscope_verdicts(&p.ops);
        assert_eq!(&ours, csan, "{name}: memscope vs CSAN");
        assert_eq!(&ours, want, "{name}: expected verdicts");
    }
}

#[test]
fn free_then_reuse_on_another_stream_is_memscopes_own_finding() {
    let sc = scenarios();
    let (_, p, _) = sc.iter().find(|s| s.0.starts_with("free on")).unwrap();
    let f: Vec<_> = check(p.ops.iter().cloned()).collect();
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].kind, RaceKind::FreeWhileInUse);
    assert_eq!(
        (f[0].addr, f[0].current.stream, f[0].previous.stream),
        (A, Some(2), Some(1))
    );
    assert_eq!(f[0].current.owner.as_deref(), Some("t101000"));
    // Freed back to the stream that used it, or after a wait for that stream: nothing to report.
    let mut p = Prog::default();
    p.launch(1, &[(A, Output)]).free(A, Some(1));
    assert!(check(p.ops).next().is_none());
    let mut p = Prog::default();
    p.launch(1, &[(A, Output)])
        .op(StreamOp::EventRecord {
            event: 4,
            stream: 1,
        })
        .op(StreamOp::EventWait {
            stream: 2,
            event: 4,
        })
        .free(A, Some(2));
    assert!(check(p.ops).next().is_none());
}

/// splitmix64: a seeded generator with no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A random program: 200-400 launches over streams 0-3 (1-3 created explicitly or on first
/// use), each touching 1-3 buffers of a pool of 8 as read, read-write or output, between event
/// records and waits on 3 events, stream/event/device synchronisations, event creation and
/// deletion, frees and reallocations. One program in three is careless (syncs at random
/// only), one orders every launch after the previous one (an event recorded on the last
/// stream and waited for: no race), one orders 95-100 % of them (a few races), so that the
/// verdicts cover racy, nearly clean and clean programs. Every fourth program is read-heavy
/// (2 % of accesses write), so that long read lists build up and are thinned.
fn random_program(seed: u64) -> Prog {
    let mut g = Rng(seed);
    let mut p = Prog::default();
    // Per mille of launches ordered after the previous launch.
    let careful = [0, 1000, 950 + g.below(51)][usize::try_from(seed % 3).unwrap()];
    let mut last = 0;
    let writes_pm = if seed % 4 == 3 { 20 } else { 500 };
    let pool: Vec<u64> = (0..8).map(|i| 0x10_0000 + i * 0x1000).collect();
    for s in 1..4 {
        if g.below(2) == 0 {
            p.op(StreamOp::StreamCreate { stream: s });
        }
    }
    let launches = 200 + g.below(201);
    while p.launches < launches {
        let stream = g.below(4);
        let event = g.below(3);
        match g.below(100) {
            0..=59 => {
                let n = 1 + g.below(3);
                let acc: Vec<_> = (0..n)
                    .map(|_| {
                        let kind = if g.below(1000) >= writes_pm {
                            Ro
                        } else {
                            [Rw, Output][usize::try_from(g.below(2)).unwrap()]
                        };
                        (pool[usize::try_from(g.below(8)).unwrap()], kind)
                    })
                    .collect();
                if g.below(1000) < careful {
                    p.op(StreamOp::EventRecord {
                        event: 99,
                        stream: last,
                    });
                    p.op(StreamOp::EventWait { stream, event: 99 });
                }
                p.launch(stream, &acc);
                last = stream;
            }
            60..=71 => {
                p.op(StreamOp::EventRecord { event, stream });
            }
            72..=83 => {
                p.op(StreamOp::EventWait { stream, event });
            }
            84..=86 => {
                p.op(StreamOp::StreamSynchronize { stream });
            }
            87..=88 => {
                p.op(StreamOp::EventSynchronize { event });
            }
            89 => {
                p.op(StreamOp::DeviceSynchronize);
            }
            90 => {
                p.op(StreamOp::EventCreate { event });
            }
            91 => {
                p.op(StreamOp::EventDelete { event });
            }
            92..=95 => {
                let addr = pool[usize::try_from(g.below(8)).unwrap()];
                let on = (g.below(2) == 0).then_some(stream);
                p.free(addr, on);
            }
            _ => {
                let addr = pool[usize::try_from(g.below(8)).unwrap()];
                p.op(StreamOp::Alloc { addr, size: 256 });
            }
        }
    }
    p
}

#[test]
fn thousand_random_programs_agree_with_csan_exactly() {
    const N: u64 = 1000;
    let progs: Vec<Prog> = (0..N).map(|i| random_program(0x5EED_0000 + i)).collect();
    let seqs: Vec<&[StreamOp]> = progs.iter().map(|p| p.ops.as_slice()).collect();
    let t = std::time::Instant::now();
    let csan = oracle(&seqs);
    let t_csan = t.elapsed();
    let t = std::time::Instant::now();
    let (mut agree, mut conflicts, mut clean) = (0, 0, 0);
    let mut first_bad = None;
    for (i, (p, csan)) in progs.iter().zip(&csan).enumerate() {
        let ours = memscope_verdicts(&p.ops);
        if &ours == csan {
            agree += 1;
            conflicts += ours.len();
            clean += usize::from(ours.is_empty());
        } else if first_bad.is_none() {
            first_bad = Some((i, ours, csan.clone()));
        }
    }
    if let Some((i, ours, csan)) = first_bad {
        let only_ours: Vec<_> = ours.iter().filter(|v| !csan.contains(v)).collect();
        let only_csan: Vec<_> = csan.iter().filter(|v| !ours.contains(v)).collect();
        panic!(
            "{agree} of {N} agree; first difference in program {i} (seed {:#x}):\n\
             only memscope: {only_ours:?}\nonly CSAN: {only_csan:?}",
            0x5EED_0000 + i
        );
    }
    // Enough on both sides to mean something: conflicts found, and programs ordered enough
    // to have none.
    assert!(
        conflicts > 10 * N as usize,
        "only {conflicts} conflicts in {N} programs"
    );
    assert!(clean > 300, "only {clean} clean programs of {N}");
    eprintln!(
        "{agree} of {N} random programs agree; {conflicts} conflicts, {clean} clean \
         (CSAN {:.1} s, memscope {:.1} s)",
        t_csan.as_secs_f64(),
        t.elapsed().as_secs_f64()
    );
}
