//! Issue 3: framework pool adapters (PTA, PTA_WORKSPACE, MindSpore, ATB) end to end — small C
//! producers call the msTX memory API of the stand-in front end under `memscope run`; the dumps
//! must show one MALLOC/FREE row per region with hand-computed `used`/`total`, the right Event
//! Types, devices, owners, adapter selection and `--steps` filtering.
//!
//! `--steps` keeps the rows of the selected steps *and every row outside any step* (msMemScope's
//! "in range" rule, behaviour spec §8): a block registered before the first step or after the
//! last one is always written.

#[path = "pools/check.rs"]
mod check;

use check::*;
use memscope_tests::{attrs, memscope_run, select, Row, Run};
use std::collections::BTreeSet;

fn run_ok(args: &[&str], prog: &[&str], envs: &[(&str, &str)]) -> Run {
    let run = memscope_run(args, prog, envs);
    assert_eq!(
        run.code(),
        0,
        "memscope failed\nstdout:\n{}\nstderr:\n{}",
        run.stdout(),
        run.stderr()
    );
    run
}

/// All pool rows of a run (each file in ID order, files concatenated), after checking the pool
/// invariants of every file; panics if a block is still live at exit.
fn pool_rows_all_freed(run: &Run) -> Vec<Row> {
    let files = csv_files(run);
    assert!(!files.is_empty(), "no dump written\n{}", run.stderr());
    let mut out = Vec::new();
    for (dir, rows) in files {
        let live = replay(&rows);
        assert!(live.is_empty(), "{dir}: blocks never freed: {live:?}");
        out.extend(rows.into_iter().filter(is_pool));
    }
    out
}

fn expect(rows: &[Row], want: &[Expected]) {
    let got: Vec<_> = rows.iter().map(figures).collect();
    let want: Vec<_> = want
        .iter()
        .map(|(e, t, s, u, tot)| (e.to_string(), t.to_string(), *s, *u, *tot))
        .collect();
    assert_eq!(got, want);
}

fn owners(rows: &[Row]) -> Vec<Option<String>> {
    rows.iter()
        .map(|r| attrs(r).get("owner").cloned())
        .collect()
}

#[test]
fn pta_caching_and_workspace_blocks_get_running_used_and_heap_total() {
    let prog = pool_program("pool_pta", true);
    let run = run_ok(&["--adapters", "pta,mstx"], &[prog.to_str().unwrap()], &[]);
    let rows = pool_rows_all_freed(&run);
    let (g, m) = (1024 * MIB, MIB);
    #[rustfmt::skip]
    expect(&rows, &[
        ("MALLOC", "PTA", m, m, g),
        ("MALLOC", "PTA", 2 * m, 3 * m, g),
        ("MALLOC", "PTA", 4 * m, 7 * m, g),
        ("MALLOC", "PTA", 8 * m, 15 * m, g),
        ("MALLOC", "PTA", 16 * m, 31 * m, g),
        ("MALLOC", "PTA_WORKSPACE", 32 * m, 32 * m, 64 * m),
        ("FREE", "PTA_WORKSPACE", 32 * m, 0, 64 * m),
        ("FREE", "PTA", 2 * m, 29 * m, g),
        ("FREE", "PTA", 8 * m, 21 * m, g),
        ("FREE", "PTA", m, 20 * m, g),
        ("FREE", "PTA", 4 * m, 16 * m, g),
        ("FREE", "PTA", 16 * m, 0, g),
    ]);
    let o = owners(&rows);
    assert_eq!(
        o[..6].iter().flatten().collect::<Vec<_>>(),
        ["PTA", "PTA", "PTA", "PTA", "PTA", "PTA_WORKSPACE"]
    );
    assert!(
        o[6..].iter().all(Option::is_none),
        "FREE rows carry no owner"
    );
    assert!(rows.iter().all(|r| r["Device Id"] == "0"));
    let ids: BTreeSet<i64> = rows.iter().map(|r| num(r, "allocation_id")).collect();
    assert_eq!(
        ids.len(),
        6,
        "one allocation_id per block, shared by MALLOC and FREE"
    );
}

#[test]
fn atb_and_mindspore_blocks_land_in_their_own_event_types() {
    let prog = pool_program("pool_atb_ms", true);
    let run = run_ok(
        &["--adapters", "atb,mindspore,mstx"],
        &[prog.to_str().unwrap()],
        &[],
    );
    let rows = pool_rows_all_freed(&run);
    let m = MIB;
    #[rustfmt::skip]
    expect(&rows, &[
        ("MALLOC", "ATB", m, m, 256 * m),
        ("MALLOC", "ATB", 3 * m, 4 * m, 256 * m),
        ("MALLOC", "ATB", 4 * m, 8 * m, 256 * m),
        ("FREE", "ATB", m, 7 * m, 256 * m),
        ("FREE", "ATB", 4 * m, 3 * m, 256 * m),
        ("FREE", "ATB", 3 * m, 0, 256 * m),
        ("MALLOC", "MindSpore", 2 * m, 2 * m, 128 * m),
        ("MALLOC", "MindSpore", 6 * m, 8 * m, 128 * m),
        ("FREE", "MindSpore", 6 * m, 2 * m, 128 * m),
        ("FREE", "MindSpore", 2 * m, 0, 128 * m),
    ]);
    let o: Vec<_> = owners(&rows).into_iter().flatten().collect();
    assert_eq!(o, ["ATB", "ATB", "ATB", "MindSpore", "MindSpore"]);
}

#[test]
fn each_pool_adapter_is_selected_on_its_own() {
    let pta = pool_program("pool_pta", true);
    let atb_ms = pool_program("pool_atb_ms", true);
    let script = format!("{} && {}", pta.display(), atb_ms.display());
    for (sel, want) in [
        ("pta", &["PTA", "PTA_WORKSPACE"][..]),
        ("mindspore", &["MindSpore"][..]),
        ("atb", &["ATB"][..]),
        ("pta,mindspore,atb", &POOL_TYPES[..]),
    ] {
        let run = run_ok(&["--adapters", sel], &["sh", "-c", &script], &[]);
        let rows = pool_rows_all_freed(&run);
        let types: BTreeSet<&str> = rows.iter().map(|r| r["Event Type"].as_str()).collect();
        assert_eq!(types, want.iter().copied().collect(), "--adapters {sel}");
    }
}

#[test]
fn steps_option_keeps_the_selected_steps_and_rows_outside_steps() {
    let prog = pool_program("pool_steps", false);
    let p = prog.to_str().unwrap();
    let sizes = |run: &Run, event: &str| -> Vec<i64> {
        let rows = pool_rows_all_freed(run);
        rows.iter()
            .filter(|r| r["Event"] == event)
            .map(|r| num(r, "size"))
            .collect()
    };
    let k = 1024;
    let all = run_ok(&["--adapters", "pta,mstx"], &[p], &[]);
    let every = vec![512 * k, MIB, 2 * MIB, 3 * MIB, 4 * MIB, 5 * MIB, 256 * k];
    assert_eq!(sizes(&all, "MALLOC"), every);

    let run = run_ok(&["--adapters", "pta,mstx", "--steps", "2,3"], &[p], &[]);
    assert_eq!(sizes(&run, "MALLOC"), [512 * k, 2 * MIB, 3 * MIB, 256 * k]);
    assert_eq!(sizes(&run, "FREE"), [2 * MIB, 3 * MIB, 512 * k, 256 * k]);
    let rows = run.rows();
    assert_eq!(
        select(&rows, "MSTX", "Mark").len(),
        2,
        "one mark per kept step"
    );
    let starts = select(&rows, "MSTX", "Range_start");
    assert_eq!(starts.len(), 2);
    assert!(starts.iter().all(|r| r["Name"] == "step start"));
}

#[test]
fn two_devices_give_two_device_files_with_figures_of_their_own() {
    let prog = pool_program("pool_devices", false);
    let run = run_ok(&["--adapters", "pta,mstx"], &[prog.to_str().unwrap()], &[]);
    check_two_devices(&run, ["device_0", "device_1"], ["0", "1"]);
}

#[test]
fn visible_devices_4_5_map_logical_device_0_to_4() {
    let prog = pool_program("pool_devices", false);
    let envs = [("ASCEND_RT_VISIBLE_DEVICES", "4,5")];
    let run = run_ok(
        &["--adapters", "pta,mstx"],
        &[prog.to_str().unwrap()],
        &envs,
    );
    check_two_devices(&run, ["device_4", "device_5"], ["4", "5"]);
}

/// pool_devices.c figures (see its header), per device file.
fn check_two_devices(run: &Run, dirs: [&str; 2], ids: [&str; 2]) {
    let files = csv_files(run);
    let names: Vec<&str> = files.iter().map(|(d, _)| d.as_str()).collect();
    assert_eq!(names, dirs, "one dump file per device");
    let m = MIB;
    #[rustfmt::skip]
    let want: [&[Expected]; 2] = [
        &[
            ("MALLOC", "PTA", m, m, 64 * m),
            ("MALLOC", "PTA", 4 * m, 5 * m, 64 * m),
            ("FREE", "PTA", m, 4 * m, 64 * m),
            ("MALLOC", "PTA", m, 5 * m, 80 * m),
            ("FREE", "PTA", 4 * m, m, 80 * m),
            ("FREE", "PTA", m, 0, 80 * m),
        ],
        &[
            ("MALLOC", "PTA", 2 * m, 2 * m, 32 * m),
            ("MALLOC", "PTA", 8 * m, 10 * m, 32 * m),
            ("FREE", "PTA", 8 * m, 2 * m, 32 * m),
            ("FREE", "PTA", 2 * m, 0, 0),
        ],
    ];
    for (i, (dir, rows)) in files.iter().enumerate() {
        assert!(replay(rows).is_empty(), "{dir}: every block freed");
        let pool: Vec<Row> = rows.iter().filter(|r| is_pool(r)).cloned().collect();
        assert!(
            pool.iter().all(|r| r["Device Id"] == ids[i]),
            "{dir} holds device {} rows only",
            ids[i]
        );
        expect(&pool, want[i]);
    }
}

#[test]
fn owner_chains_follow_each_threads_label_stack() {
    let prog = pool_program("pool_owner", false);
    let run = run_ok(&["--adapters", "pta,mstx"], &[prog.to_str().unwrap()], &[]);
    assert!(
        run.stdout().contains("owner_api=1"),
        "memscope_owner_push/pop exported by the probe\n{}",
        run.stdout()
    );
    let rows = pool_rows_all_freed(&run);
    let mut by_size: Vec<(i64, String, String)> = rows
        .iter()
        .filter(|r| r["Event"] == "MALLOC")
        .map(|r| {
            (
                num(r, "size") / 1024,
                attrs(r)["owner"].clone(),
                r["Thread Id"].clone(),
            )
        })
        .collect();
    by_size.sort();
    let got: Vec<(i64, &str)> = by_size.iter().map(|(s, o, _)| (*s, o.as_str())).collect();
    assert_eq!(
        got,
        [
            (1, "PTA"),
            (2, "PTA@model"),
            (3, "PTA@model@layer1"),
            (4, "PTA@model"),
            (5, "PTA@worker"),
            (6, "PTA")
        ]
    );
    assert_ne!(
        by_size[4].2, by_size[0].2,
        "the worker block is recorded on the worker thread"
    );
}
