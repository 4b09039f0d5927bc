//! Issue 3, "done when": the simulated torch_npu job `examples/sim-npu/train.py` under
//! `memscope run --adapters pta,mstx` writes a CSV (and with `--format db` a DB) whose PTA rows
//! show the 4 MiB block leaked in every step from step 3 on: a MALLOC inside that step with no
//! FREE (still live at exit), while every other block is freed.

#[path = "pools/check.rs"]
mod check;

use check::*;
use memscope_tests::{read_db, repo_root, Row, Run};
use std::collections::BTreeMap;

/// Per-step leak of train.py (`LEAK_BYTES`).
const LEAK: i64 = 4 * MIB;

fn train(extra_memscope: &[&str], extra_train: &[&str]) -> Run {
    let script = repo_root().join("examples/sim-npu/train.py");
    let mut args = vec!["--adapters", "pta,mstx"];
    args.extend_from_slice(extra_memscope);
    let mut prog = vec!["python3", script.to_str().unwrap()];
    prog.extend_from_slice(extra_train);
    let run = memscope_tests::memscope_run(&args, &prog, &[]);
    assert_eq!(
        run.code(),
        0,
        "stdout:\n{}\nstderr:\n{}",
        run.stdout(),
        run.stderr()
    );
    run
}

/// Checks one device file of the demo; returns step → size of each block still live at exit.
fn leaks_by_step(rows: &[Row]) -> BTreeMap<u32, i64> {
    let types: Vec<&str> = rows
        .iter()
        .filter(|r| is_pool(r))
        .map(|r| r["Event Type"].as_str())
        .collect();
    assert!(
        types.contains(&"PTA") && types.contains(&"PTA_WORKSPACE"),
        "{types:?}"
    );
    assert!(
        types.iter().all(|t| *t == "PTA" || *t == "PTA_WORKSPACE"),
        "only the PTA adapter is selected"
    );
    let live = replay(rows);
    let steps = steps_of(rows);
    let step_of_id: BTreeMap<i64, Option<u32>> = rows
        .iter()
        .zip(&steps)
        .filter(|(r, _)| is_pool(r) && r["Event"] == "MALLOC")
        .map(|(r, s)| (num(r, "allocation_id"), *s))
        .collect();
    let mut out = BTreeMap::new();
    for (id, m) in &live {
        assert_eq!(m["Event Type"], "PTA", "only caching blocks leak: {m:?}");
        let step =
            step_of_id[id].unwrap_or_else(|| panic!("leak allocated outside any step: {m:?}"));
        assert!(
            out.insert(step, num(m, "size")).is_none(),
            "one leak per step"
        );
    }
    let last = rows
        .iter()
        .rfind(|r| is_pool(r) && r["Event Type"] == "PTA")
        .expect("PTA rows");
    assert_eq!(
        num(last, "used"),
        LEAK * out.len() as i64,
        "used at exit = the leaked bytes"
    );
    assert_eq!(
        num(last, "total"),
        1024 * MIB,
        "one 1 GiB caching segment per device"
    );
    out
}

fn expect_leaks(got: BTreeMap<u32, i64>, steps: impl IntoIterator<Item = u32>) {
    let want: BTreeMap<u32, i64> = steps.into_iter().map(|s| (s, LEAK)).collect();
    assert_eq!(got, want);
}

#[test]
fn demo_csv_shows_one_live_4_mib_pta_block_per_step_from_step_3() {
    let run = train(&[], &[]);
    let files = csv_files(&run);
    let dirs: Vec<&str> = files.iter().map(|(d, _)| d.as_str()).collect();
    assert_eq!(dirs, ["device_0"]);
    expect_leaks(leaks_by_step(&files[0].1), 3..=10);
}

#[test]
fn demo_db_shows_the_same_leaks_as_the_csv() {
    let run = train(&["--format", "db"], &[]);
    let dbs = run.dumps(".db");
    assert_eq!(dbs.len(), 1, "{dbs:?}");
    assert_eq!(device_dir(&dbs[0]), "device_0");
    expect_leaks(leaks_by_step(&sorted(read_db(&dbs[0]))), 3..=10);
}

#[test]
fn demo_on_two_devices_leaks_on_the_device_of_each_step() {
    let run = train(&[], &["--devices", "2"]);
    let files = csv_files(&run);
    let dirs: Vec<&str> = files.iter().map(|(d, _)| d.as_str()).collect();
    assert_eq!(dirs, ["device_0", "device_1"]);
    // Step s runs on device (s - 1) % 2, and its msTX range carries that device (issue 10), so
    // each file holds the 5 step ranges of its own device: device 0 has steps 1, 3, 5, 7, 9 as
    // its 1st to 5th, device 1 steps 2, 4, 6, 8, 10. Leaks from step 3 on: from each file's 2nd.
    for (_, rows) in &files {
        let ranges = rows
            .iter()
            .filter(|r| r["Event Type"] == "Range_start" && r["Name"] == "step start")
            .count();
        assert_eq!(ranges, 5);
    }
    expect_leaks(leaks_by_step(&files[0].1), 2..=5);
    expect_leaks(leaks_by_step(&files[1].1), 2..=5);
}

#[test]
fn demo_without_leak_frees_every_block() {
    let run = train(&[], &["--no-leak", "--steps", "4"]);
    for (dir, rows) in csv_files(&run) {
        assert!(replay(&rows).is_empty(), "{dir}: every block freed");
        assert_eq!(
            steps_of(&rows).iter().flatten().max(),
            Some(&4),
            "{dir}: 4 steps"
        );
    }
}
