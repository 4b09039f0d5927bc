//! The Done-when of issue 36: the named programs and 1 000 random sequences, executed on the
//! sim-npu stand-ins by `tests/programs/race_prog.c` (real `aclrt*` stream and event calls,
//! `sanitizer-op:` marks on their streams, the caching pool's msTX regions) under
//! `memscope run --analysis races`, then read back by `memscope analyze races --json`: the
//! conflicts per program equal CSAN's `EventHandler` fed the same sequence. The online
//! section counts the same races as the offline check.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::Command;

use memscope_races::{AccessKind, StreamOp};
use memscope_tests::{compile, memscope_bin, memscope_run, repo_root, ACL_LIBS};
use serde_json::Value;

use super::{oracle, random_program, scenarios, Verdict, A};

fn race_prog() -> PathBuf {
    compile(
        &[&repo_root().join("tests/programs/race_prog.c")],
        "race_prog",
        ACL_LIBS,
        false,
    )
}

fn addrs(l: &memscope_races::KernelLaunch, k: AccessKind) -> String {
    let v: Vec<String> = l
        .accesses
        .iter()
        .filter(|a| a.kind == k)
        .map(|a| format!("{:#x}", a.addr))
        .collect();
    if v.is_empty() {
        "-".into()
    } else {
        v.join(",")
    }
}

/// The script of program `i` for `race_prog` (launch `k` of it is named `p<i>.k<k>`).
fn script(i: usize, ops: &[StreamOp], out: &mut String) {
    writeln!(out, "P {i}").unwrap();
    for op in ops {
        let line = match op {
            StreamOp::KernelLaunch(l) => format!(
                "L {} p{i}.k{} {} {} {}",
                l.stream,
                l.id,
                addrs(l, AccessKind::ReadOnly),
                addrs(l, AccessKind::ReadWrite),
                addrs(l, AccessKind::Output)
            ),
            StreamOp::StreamCreate { stream } => format!("S {stream}"),
            StreamOp::EventCreate { event } => format!("E {event}"),
            StreamOp::EventDelete { event } => format!("X {event}"),
            StreamOp::EventRecord { event, stream } => format!("R {event} {stream}"),
            StreamOp::EventWait { stream, event } => format!("W {stream} {event}"),
            StreamOp::StreamSynchronize { stream } => format!("Y {stream}"),
            StreamOp::EventSynchronize { event } => format!("Z {event}"),
            StreamOp::DeviceSynchronize => "D".into(),
            StreamOp::Alloc { addr, .. } => format!("A {addr:#x}"),
            StreamOp::Free(f) | StreamOp::PoolFree(f) => format!("F {:#x}", f.addr),
        };
        out.push_str(&line);
        out.push('\n');
    }
}

/// One finding of `analyze races --json`: (program, kind, verdict).
fn parse_finding(v: &Value) -> (usize, String, Verdict) {
    let name = |side: &str| -> (usize, u64) {
        let n = v[side]["name"].as_str().unwrap();
        let (p, k) = n.split_once(".k").unwrap();
        (p[1..].parse().unwrap(), k.parse().unwrap())
    };
    let rw = |side: &str| match v[side]["role"].as_str().unwrap() {
        "read" => 'R',
        _ => 'W',
    };
    let (p, cur) = name("current");
    let (p2, prev) = name("previous");
    assert_eq!(p, p2, "a finding across programs: {v}");
    let addr =
        u64::from_str_radix(v["addr"].as_str().unwrap().trim_start_matches("0x"), 16).unwrap();
    (
        p,
        v["kind"].as_str().unwrap().to_owned(),
        (cur, prev, addr, rw("current"), rw("previous")),
    )
}

/// Runs the programs under `memscope run --analysis races` and returns, per program, the
/// conflicts memscope found (sorted; free-while-in-use apart), the free findings, and the run's
/// console.
fn recorded(progs: &[&[StreamOp]]) -> (Vec<Vec<Verdict>>, BTreeMap<usize, Vec<Verdict>>, String) {
    let mut text = String::new();
    for (i, p) in progs.iter().enumerate() {
        script(i, p, &mut text);
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("prog.txt");
    std::fs::write(&path, &text).unwrap();
    let run = memscope_run(
        &["--adapters", "acl,mstx,pta", "--analysis", "races"],
        &[race_prog().to_str().unwrap(), path.to_str().unwrap()],
        &[],
    );
    assert_eq!(run.code(), 0, "{}\n{}", run.stdout(), run.stderr());
    let o = Command::new(memscope_bin())
        .args(["analyze", "races", "--json"])
        .arg(run.out.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut per = vec![Vec::new(); progs.len()];
    let mut frees: BTreeMap<usize, Vec<Verdict>> = BTreeMap::new();
    for line in String::from_utf8(o.stdout).unwrap().lines() {
        let (p, kind, v) = parse_finding(&serde_json::from_str(line).unwrap());
        if kind == "free-while-in-use" {
            frees.entry(p).or_default().push(v);
        } else {
            per[p].push(v);
        }
    }
    for v in &mut per {
        v.sort_unstable();
    }
    (per, frees, run.stdout() + &run.stderr())
}

/// `N race(s)` of the run's online section, 0 for a clean one.
fn online_count(console: &str) -> u64 {
    let at = console
        .find("Stream races (pid ")
        .unwrap_or_else(|| panic!("no Stream races section:\n{console}"));
    let first = console[at..].lines().nth(1).unwrap().trim();
    if first.starts_with("No unsynchronized") {
        0
    } else {
        first.split_whitespace().next().unwrap().parse().unwrap()
    }
}

#[test]
fn named_programs_on_sim_npu_under_memscope_run_agree_with_csan() {
    let sc = scenarios();
    let seqs: Vec<&[StreamOp]> = sc.iter().map(|(_, p, _)| p.ops.as_slice()).collect();
    let csan = oracle(&seqs);
    let (ours, frees, console) = recorded(&seqs);
    for (i, ((name, _, want), csan)) in sc.iter().zip(&csan).enumerate() {
        assert_eq!(&ours[i], csan, "{name}: memscope run vs CSAN");
        assert_eq!(&ours[i], want, "{name}: expected verdicts");
    }
    // The free on one stream and reuse on another: memscope's own finding, at the reuse (the
    // pool does not say which stream the block serves).
    let reuse = sc.iter().position(|s| s.0.starts_with("free on")).unwrap();
    assert_eq!(
        frees.keys().copied().collect::<Vec<_>>(),
        [reuse],
        "{frees:?}"
    );
    assert_eq!(frees[&reuse], [(2, 1, A, 'W', 'W')]);
    let total: usize = ours.iter().map(Vec::len).sum::<usize>() + 1;
    assert_eq!(online_count(&console), total as u64, "{console}");
}

#[test]
fn thousand_random_programs_on_sim_npu_under_memscope_run_agree_with_csan_exactly() {
    const N: u64 = 1000;
    let progs: Vec<_> = (0..N).map(|i| random_program(0x5EED_0000 + i)).collect();
    let seqs: Vec<&[StreamOp]> = progs.iter().map(|p| p.ops.as_slice()).collect();
    let csan = oracle(&seqs);
    let (ours, _, console) = recorded(&seqs);
    let agree = ours.iter().zip(&csan).filter(|(a, b)| a == b).count();
    if let Some(i) = (0..ours.len()).find(|&i| ours[i] != csan[i]) {
        let only_ours: Vec<_> = ours[i].iter().filter(|v| !csan[i].contains(v)).collect();
        let only_csan: Vec<_> = csan[i].iter().filter(|v| !ours[i].contains(v)).collect();
        panic!(
            "{agree} of {N} agree; first difference in program {i}:\nonly memscope: {only_ours:?}\nonly CSAN: {only_csan:?}"
        );
    }
    let conflicts: usize = ours.iter().map(Vec::len).sum();
    assert!(conflicts > 10 * N as usize, "only {conflicts} conflicts");
    assert!(online_count(&console) >= conflicts as u64, "{console}");
    eprintln!("{agree} of {N} random programs agree under memscope run; {conflicts} conflicts");
}
