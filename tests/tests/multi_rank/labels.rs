//! Issue 39: one rank rule for every view (`memscope_export::rank`). With a run index, ranks
//! are what it says — a run that gives its process no rank shows none (`-`, no "rank N" in a
//! message, `null` in `--summary-json`, `rank=-1` partitions); without an index (msMemScope's
//! own layout), the NPU device gives it. `analyze`, `diff`, the `--fail-on` lines,
//! `--summary-json` and the Parquet partitions agree in each case.

use super::*;

type Labels = Vec<(u32, Option<u32>)>;

fn sorted(mut v: Labels) -> Labels {
    v.sort();
    v
}

fn rank_of(s: &str) -> Option<u32> {
    (s != "-").then(|| s.parse().expect("a rank"))
}

fn memscope(args: &[&str], dir: &Path) -> (String, String) {
    let o = Command::new(memscope_bin())
        .args(args)
        .arg(dir)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "memscope {args:?}: {err}");
    (String::from_utf8_lossy(&o.stdout).into_owned(), err)
}

/// `memscope analyze leaks DIR`'s table: `rank  pid  device ...` rows.
fn analyze_labels(dir: &Path) -> Labels {
    let (out, _) = memscope(&["analyze", "leaks"], dir);
    let lines: Vec<&str> = out.lines().collect();
    let head = lines
        .iter()
        .position(|l| l.starts_with("rank  pid"))
        .unwrap_or_else(|| panic!("no per-process table: {out}"));
    sorted(
        lines[head + 1..]
            .iter()
            .map_while(|l| {
                let c: Vec<&str> = l.split_whitespace().collect();
                Some((c.get(1)?.parse().ok()?, rank_of(c[0])))
            })
            .collect(),
    )
}

/// `memscope diff DIR DIR`'s pair lines: `[rank R ]pid P -> ...`.
fn diff_labels(dir: &Path) -> Labels {
    let o = Command::new(memscope_bin())
        .arg("diff")
        .args([dir, dir])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "diff: {o:?}");
    sorted(
        out.lines()
            .filter_map(|l| l.split_once(" -> ").map(|(a, _)| a))
            .map(|a| match a.strip_prefix("rank ") {
                Some(rest) => {
                    let (r, pid) = rest.split_once(" pid ").expect("rank R pid P");
                    (pid.parse().unwrap(), Some(r.parse().unwrap()))
                }
                None => (a.strip_prefix("pid ").unwrap().parse().unwrap(), None),
            })
            .collect(),
    )
}

/// The `events/rank=R/pid=P` partitions of `memscope export DIR --to parquet`.
fn parquet_labels(dir: &Path) -> Labels {
    let pq = tempfile::tempdir().unwrap();
    let o = Command::new(memscope_bin())
        .arg("export")
        .arg(dir)
        .args(["--to", "parquet", "-o"])
        .arg(pq.path().join("pq"))
        .output()
        .unwrap();
    assert!(o.status.success(), "export: {o:?}");
    let mut v = Vec::new();
    for r in std::fs::read_dir(pq.path().join("pq/events")).unwrap() {
        let r = r.unwrap();
        let rank: i64 = r.file_name().to_str().unwrap()["rank=".len()..]
            .parse()
            .unwrap();
        for p in std::fs::read_dir(r.path()).unwrap() {
            let pid = p.unwrap().file_name().to_str().unwrap()["pid=".len()..]
                .parse()
                .unwrap();
            v.push((pid, u32::try_from(rank).ok()));
        }
    }
    sorted(v)
}

/// The run's own `--fail-on` lines (`crossed by pid P[ (rank R)]`) and `--summary-json`.
fn run_labels(run: &Run, summary: &Path) -> (Labels, Labels) {
    let lines = run
        .stderr()
        .lines()
        .filter_map(|l| l.split_once("crossed by pid ").map(|(_, r)| r.to_owned()))
        .map(|r| {
            let (pid, rest) = r.split_once([':', ' ']).unwrap();
            let rank = rest
                .strip_prefix("(rank ")
                .map(|x| x.split_once(')').unwrap().0.parse().unwrap());
            (pid.parse().unwrap(), rank)
        })
        .collect();
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(summary).unwrap()).unwrap();
    let json = s["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|i| i["processes"].as_array().unwrap())
        .map(|p| {
            (
                p["pid"].as_u64().unwrap() as u32,
                p["rank"].as_u64().map(|r| r as u32),
            )
        })
        .collect();
    (sorted(lines), sorted(json))
}

fn check_views(run: &Run, summary: &Path, want: &Labels, what: &str) {
    let dir = run.out.path();
    let (fail_on, json) = run_labels(run, summary);
    assert_eq!(&fail_on, want, "{what}: --fail-on lines\n{}", run.stderr());
    assert_eq!(&json, want, "{what}: --summary-json");
    assert_eq!(&analyze_labels(dir), want, "{what}: analyze");
    assert_eq!(&diff_labels(dir), want, "{what}: diff");
    assert_eq!(&parquet_labels(dir), want, "{what}: parquet partitions");
}

#[test]
fn rank_labels_agree_across_analyze_diff_fail_on_summary_json_and_parquet() {
    let limits = ["--adapters", "acl,hal,mstx", "-q", "--fail-on", "peak>1B"];
    // one process the index gives no rank (no RANK in its environment) on NPU 0
    let js = tempfile::tempdir().unwrap();
    let summary = js.path().join("one.json");
    let mut args = limits.to_vec();
    args.extend(["--summary-json", summary.to_str().unwrap()]);
    let w = worker();
    let one = memscope_run(&args, &[w.to_str().unwrap(), "1", "0"], &[]);
    assert_eq!(one.code(), 23, "{}", one.stderr());
    let pids: Vec<u32> = dumps_by_pid(one.out.path()).into_keys().collect();
    assert_eq!(pids.len(), 1);
    check_views(&one, &summary, &vec![(pids[0], None)], "no rank");

    // two ranks: each view says the index's rank
    let summary2 = js.path().join("two.json");
    let mut args = limits.to_vec();
    args.extend(["--summary-json", summary2.to_str().unwrap()]);
    let l = launcher();
    let two = memscope_run(
        &args,
        &[l.to_str().unwrap(), "2", w.to_str().unwrap(), "1", "0"],
        &[],
    );
    assert_eq!(two.code(), 23, "{}", two.stderr());
    let by_pid = dumps_by_pid(two.out.path());
    let want: Labels = by_pid
        .iter()
        .map(|(pid, files)| {
            // rank r's device is r (`device_<r>`)
            let dev = files[0].0.parent().unwrap().parent().unwrap();
            let r = dev.file_name().unwrap().to_str().unwrap()["device_".len()..]
                .parse()
                .unwrap();
            (*pid, Some(r))
        })
        .collect();
    assert_eq!(want.len(), 2);
    check_views(&two, &summary2, &want, "two ranks");

    // msMemScope's layout without an index: the device is the rank, in every offline view
    std::fs::remove_file(one.out.path().join("memscope_run.json")).unwrap();
    let dir = one.out.path();
    let want = vec![(pids[0], Some(0))];
    assert_eq!(analyze_labels(dir), want, "no index: analyze");
    assert_eq!(diff_labels(dir), want, "no index: diff");
    assert_eq!(parquet_labels(dir), want, "no index: parquet partitions");
}
