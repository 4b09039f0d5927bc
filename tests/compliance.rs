//! `assert_adapter_compliance`: the observable half of the adapter specification
//! (`docs/adapter-spec.md` §5), run by every adapter's integration test against its own test
//! program under `memscope run`.

use crate::{attrs, memscope_run, Row, Run};
use std::collections::{HashMap, HashSet};

/// One adapter's compliance case. Arguments and programs are `memscope run` arguments and the
/// job's command line.
#[derive(Clone, Debug, Default)]
pub struct Case {
    /// Adapter name (for messages).
    pub name: String,
    /// `memscope run` arguments that select the adapter (`--adapters hal`, `--adapter-path x`).
    pub on: Vec<String>,
    /// The same run with the adapter left out.
    pub off: Vec<String>,
    /// A job that makes the adapter record (no fork).
    pub program: Vec<String>,
    /// Extra environment of every job.
    pub envs: Vec<(String, String)>,
    /// The adapter's Event Types (its rows).
    pub event_types: Vec<String>,
    /// First owner level of its MALLOC rows when not the Event Type (HAL's is `CANN`).
    pub framework: Option<String>,
    /// A text that only frames of the adapter's own code show in `Call Stack(C)` (its source
    /// file): no HOST allocation may be made there, i.e. have it as its innermost frame
    /// (checked with `--adapters host`, C stacks on).
    pub own_code: Option<String>,
    /// A job that forks, the child using the adapter too.
    pub fork_program: Option<Vec<String>>,
    /// A job that makes far more events than a 1 MiB stream holds, and how many events of the
    /// adapter it makes.
    pub flood: Option<(Vec<String>, u64)>,
    /// Account-only Event Types (plugin ABI 1.2 `MEMSCOPE_TYPE_ACCOUNT`) and `memscope run`
    /// arguments that select the adapter without `--host-rows`: then none of their rows are
    /// written, yet the report sums them up (`<TYPE> peak …`), and the run summary still equals
    /// the rows written.
    pub account: Option<(Vec<String>, Vec<String>)>,
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

fn run(case: &Case, args: &[String], program: &[String]) -> Run {
    let envs: Vec<(&str, &str)> = case
        .envs
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    memscope_run(&strs(args), &strs(program), &envs)
}

fn own_rows<'a>(case: &Case, rows: &'a [Row]) -> Vec<&'a Row> {
    rows.iter()
        .filter(|r| case.event_types.iter().any(|t| *t == r["Event Type"]))
        .collect()
}

/// Rows and drops the run summary reports (`…: N rows (…), M dropped` per process, `DROPPED`
/// when not 0), summed.
fn summary_counts(stderr: &str) -> (u64, u64) {
    let (mut rows, mut dropped) = (0, 0);
    for l in stderr.lines() {
        if let Some((_, tail)) = l.split_once("): ") {
            let mut w = tail.split_whitespace();
            if let (Some(n), Some("rows" | "row")) = (w.next(), w.next()) {
                rows += n.parse::<u64>().unwrap_or(0);
            }
            if let Some(d) = tail
                .to_ascii_lowercase()
                .rsplit_once(" dropped")
                .and_then(|(a, _)| a.rsplit(' ').next())
            {
                dropped += d.parse::<u64>().unwrap_or(0);
            }
        }
    }
    (rows, dropped)
}

/// Checks `case` against the adapter specification; panics naming the rule broken.
pub fn assert_adapter_compliance(case: &Case) {
    let name = &case.name;
    // selected: rows are written; the summary's count is the rows in the dumps
    let on = run(case, &case.on, &case.program);
    assert_eq!(on.code(), 0, "{name}: job under memscope: {}", on.stderr());
    let rows = on.rows();
    assert!(
        !own_rows(case, &rows).is_empty(),
        "{name}: selected, but none of its rows ({:?}) were written: {}",
        case.event_types,
        on.stderr()
    );
    let (summary_rows, _) = summary_counts(&on.stderr());
    assert_eq!(
        summary_rows,
        rows.len() as u64,
        "{name}: the run summary equals the rows written: {}",
        on.stderr()
    );
    // MALLOC rows carry the adapter's framework as the first owner level
    for r in own_rows(case, &rows) {
        if r["Event"] == "MALLOC" {
            if let Some(o) = attrs(r).get("owner") {
                let fw = case
                    .framework
                    .as_deref()
                    .unwrap_or(r["Event Type"].as_str());
                assert!(
                    o.starts_with(&format!("{fw}@")) || o == fw,
                    "{name}: owner {o} does not start at its framework"
                );
            }
        }
    }
    // selection off: nothing recorded, the job's output unchanged (every call forwarded)
    let off = run(case, &case.off, &case.program);
    assert_eq!(off.code(), 0, "{name}: off: {}", off.stderr());
    let off_rows = off.rows();
    assert!(
        own_rows(case, &off_rows).is_empty(),
        "{name}: not selected, yet rows of it were written"
    );
    let strip = |s: String| -> String {
        // addresses differ from run to run
        s.split_whitespace()
            .filter(|w| !w.starts_with("0x"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(
        strip(on.stdout()),
        strip(off.stdout()),
        "{name}: the job behaves the same with the adapter on and off"
    );
    if let Some(own) = &case.own_code {
        let mut args = case.on.clone();
        args.extend(
            ["--adapters", "host", "--host-rows", "--call-stack", "c:32"].map(String::from),
        );
        if !args.iter().any(|a| a == "--device") {
            args.extend(["--device", "npu,cpu"].map(String::from));
        }
        let r = run(case, &args, &case.program);
        assert_eq!(r.code(), 0, "{name}: with HOST: {}", r.stderr());
        let rows = r.rows();
        assert!(
            rows.iter().any(|r| r["Event Type"] == "HOST"),
            "{name}: the HOST check saw no HOST rows"
        );
        for h in rows.iter().filter(|r| r["Event Type"] == "HOST") {
            // the innermost frame is the code that called malloc (the adapter's frames further
            // out are fine: it forwarded to the library, which allocates)
            let innermost = h["Call Stack(C)"].lines().next().unwrap_or("");
            assert!(
                !innermost.contains(own.as_str()),
                "{name}: allocates through the hooked allocator in its own code:\n{}",
                h["Call Stack(C)"]
            );
        }
    }
    if let Some(fork) = &case.fork_program {
        let r = run(case, &case.on, fork);
        assert_eq!(r.code(), 0, "{name}: fork: {}", r.stderr());
        let rows = r.rows();
        let mut by_pid: HashMap<&str, (HashSet<String>, Vec<String>)> = HashMap::new();
        for row in own_rows(case, &rows) {
            let e = by_pid.entry(row["Process Id"].as_str()).or_default();
            let id = attrs(row).get("allocation_id").cloned().unwrap_or_default();
            match row["Event"].as_str() {
                "MALLOC" => {
                    e.0.insert(id);
                }
                "FREE" => e.1.push(id),
                _ => {}
            }
        }
        assert!(
            by_pid.len() >= 2,
            "{name}: fork: rows of parent and child in their own processes, got {:?}",
            by_pid.keys()
        );
        for (pid, (mallocs, frees)) in &by_pid {
            for f in frees {
                assert!(
                    mallocs.contains(f),
                    "{name}: fork: pid {pid} has a FREE of allocation {f} it never allocated"
                );
            }
        }
    }
    if let Some((types, args)) = &case.account {
        let r = run(case, args, &case.program);
        assert_eq!(r.code(), 0, "{name}: account: {}", r.stderr());
        let rows = r.rows();
        for t in types {
            assert!(
                !rows.iter().any(|x| &x["Event Type"] == t),
                "{name}: account-only {t} rows written without --host-rows"
            );
            assert!(
                r.stderr().contains(&format!("{t} peak")),
                "{name}: account-only {t} is not summed up in the report: {}",
                r.stderr()
            );
        }
        let (summary_rows, _) = summary_counts(&r.stderr());
        assert_eq!(
            summary_rows,
            rows.len() as u64,
            "{name}: account: {}",
            r.stderr()
        );
    }
    if let Some((flood, events)) = &case.flood {
        let script = format!("ulimit -f 1024; exec {}", flood.join(" "));
        let program = ["bash".to_string(), "-c".into(), script];
        let r = run(case, &case.on, &program);
        assert_eq!(
            r.code(),
            0,
            "{name}: drops: the job's own exit code: {}",
            r.stderr()
        );
        let rows = r.rows();
        let written = own_rows(case, &rows).len() as u64;
        let (_, dropped) = summary_counts(&r.stderr());
        assert!(
            dropped > 0,
            "{name}: drops: 1 MiB held everything: {}",
            r.stderr()
        );
        assert!(
            written + dropped >= *events,
            "{name}: drops: {written} rows + {dropped} dropped < {events} events: {}",
            r.stderr()
        );
    }
}
