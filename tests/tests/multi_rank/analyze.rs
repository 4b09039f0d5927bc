//! `memscope analyze` over a multi-rank run directory: one line per rank, sorted by peak,
//! with the imbalance; a directory of two runs is not two ranks.

use super::*;

#[test]
fn analyze_over_a_run_dir_prints_one_line_per_rank_sorted_by_peak_with_the_imbalance() {
    let run = run_ranks(&["--adapters", "acl,hal,mstx"], &[], "");
    let dir = run.out.path().to_str().unwrap().to_owned();
    let dec = run.out.path().join("decompose-out");
    for (what, extra) in [
        ("leaks", vec![]),
        ("gap", vec![]),
        (
            "decompose",
            vec!["-o".to_owned(), dec.display().to_string()],
        ),
    ] {
        let o = Command::new(memscope_bin())
            .args(["analyze", what, &dir])
            .args(&extra)
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "analyze {what}: {err}");
        let lines: Vec<&str> = out.lines().collect();
        let head = lines
            .iter()
            .position(|l| l.starts_with("rank  pid"))
            .unwrap_or_else(|| panic!("analyze {what}: no table: {out}"));
        assert!(
            lines[head - 1].contains(&format!("{RANKS} process(es), sorted by peak (HAL)")),
            "{out}"
        );
        // ranks 7..0: rank r's HAL peak is (1 + r) MiB
        let ranks: Vec<&str> = lines[head + 1..head + 1 + RANKS]
            .iter()
            .map(|l| l.split_whitespace().next().unwrap())
            .collect();
        let want: Vec<String> = (0..RANKS).rev().map(|r| r.to_string()).collect();
        assert_eq!(ranks, want, "analyze {what}: {out}");
        for l in &lines[head + 1..head + 1 + RANKS] {
            let c: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(c[2], c[0], "device of rank: {l}");
            assert_eq!(
                format!("{} {}", c[4], c[5]),
                format!("{}.0 MiB", c[0].parse::<u32>().unwrap() + 1),
                "{l}"
            );
        }
        let imb = lines[head + 1 + RANKS];
        assert!(
            imb.starts_with("imbalance: largest peak rank 7 (pid ")
                && imb.contains(") 8.0 MiB, smallest rank 0 (pid ")
                && imb.ends_with(") 1.0 MiB: 7.0 MiB more (8.00x)"),
            "{imb}"
        );
        match what {
            // HAL-only ranks: no pool block was recorded, so no leak was looked for
            "leaks" => assert!(lines[head + 1].ends_with("  not recorded"), "{out}"),
            "decompose" => {
                let csvs = std::fs::read_dir(&dec).unwrap().count();
                assert_eq!(csvs, RANKS, "one decompose CSV per rank");
            }
            _ => {}
        }
    }
    // --full goes with a directory only
    let one = dumps_by_pid(run.out.path()).into_values().next().unwrap()[0]
        .0
        .clone();
    // --run goes with a directory only; --full on a dump prints every line
    let o = Command::new(memscope_bin())
        .args(["analyze", "leaks", "--run", "1"])
        .arg(&one)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let o = Command::new(memscope_bin())
        .args(["analyze", "leaks", "--full"])
        .arg(&one)
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
}

#[test]
fn analyze_over_a_directory_of_two_runs_uses_the_newest_and_does_not_call_them_ranks() {
    let out = tempfile::tempdir().unwrap();
    for step in ["1", "2"] {
        let o = Command::new(memscope_bin())
            .args(["run", "-q", "--adapters", "acl,hal,mstx", "-o"])
            .arg(out.path())
            .arg("--")
            .arg(worker())
            .args(["1", step])
            .output()
            .unwrap();
        assert!(o.status.success(), "{o:?}");
    }
    let o = Command::new(memscope_bin())
        .args(["analyze", "leaks"])
        .arg(out.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("holds 2 runs") && err.contains("using run 2, the newest"),
        "{err}"
    );
    assert!(!err.contains("map to rank"), "{err}");
    assert!(
        stdout.contains("==== per process: 1 process(es)"),
        "{stdout}"
    );
    assert!(!stdout.contains("imbalance"), "one process: {stdout}");
    // the first run, asked for
    let o = Command::new(memscope_bin())
        .args(["analyze", "leaks", "--run", "1"])
        .arg(out.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("using run 1"));
    let o = Command::new(memscope_bin())
        .args(["analyze", "leaks", "--run", "3"])
        .arg(out.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{o:?}");
}
