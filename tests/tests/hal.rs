//! Issue 5: the HAL adapter and OOM capture, driven through the real symbol names
//! (`halMemAlloc`, `halMemCreate`, …) of the sim-npu driver stand-in under `memscope run`.

use memscope_tests::*;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

#[path = "hal/fragmentation.rs"]
mod fragmentation;

fn hal_program(name: &str) -> PathBuf {
    let src = repo_root().join("tests/programs").join(format!("{name}.c"));
    compile(&[&src], name, &["-lascend_hal", "-lascendcl"], false)
}

/// `addr <i> <ptr>` lines of a program's stdout: i → address.
fn addrs(stdout: &str) -> HashMap<u32, u64> {
    stdout
        .lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            (it.next()? == "addr").then_some(())?;
            let i = it.next()?.parse().ok()?;
            let p = u64::from_str_radix(it.next()?.trim_start_matches("0x"), 16).ok()?;
            Some((i, p))
        })
        .collect()
}

fn ptr(row: &Row) -> u64 {
    u64::from_str_radix(row["Ptr"].trim_start_matches("0x"), 16).unwrap_or(0)
}

/// The MALLOC and FREE rows of block `addr` (any Event Type).
fn block(rows: &[Row], addr: u64) -> (&Row, &Row) {
    let find = |ev: &str| {
        rows.iter()
            .find(|r| r["Event"] == ev && ptr(r) == addr)
            .unwrap_or_else(|| panic!("no {ev} row at 0x{addr:x}"))
    };
    (find("MALLOC"), find("FREE"))
}

/// Every line of every process log under the run's output directory.
fn log_text(run: &Run) -> String {
    let mut s = String::new();
    walk(run.out.path(), &mut |p| {
        if p.extension().is_some_and(|e| e == "log") {
            s.push_str(&std::fs::read_to_string(p).unwrap_or_default());
        }
    });
    s
}

/// A SNAPSHOT row's Attr has the seed's eight keys, in its order.
fn assert_seed_keys(row: &Row) {
    let keys: Vec<String> = memscope_core::attr_text::parse_attr(&row["Attr"])
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(
        keys,
        memscope_core::snapshot::SEED_KEYS,
        "the seed's keys, in its order"
    );
}

fn run_ok(args: &[&str], prog: &Path, envs: &[(&str, &str)]) -> Run {
    let run = memscope_run(args, &[prog.to_str().unwrap()], envs);
    assert_eq!(
        run.code(),
        0,
        "stdout: {}\nstderr: {}",
        run.stdout(),
        run.stderr()
    );
    run
}

#[test]
fn flag_bits_give_device_memory_type_page_type_and_cann_module_owner() {
    let prog = hal_program("hal_flags");
    let run = run_ok(&["--adapters", "hal", "--device", "npu,cpu"], &prog, &[]);
    let a = addrs(&run.stdout());
    let rows = run.rows();
    // (block, event type, device, size, owner, page_type, used after MALLOC, used after FREE)
    let expect = [
        (1, "HAL", "0", 4096, "CANN@RUNTIME", "normal", 4096, 512),
        (
            2,
            "HAL",
            "1",
            2 << 20,
            "CANN@HCCL",
            "huge",
            2 << 20,
            1 << 20,
        ),
        (3, "HAL", "3", 1 << 20, "CANN@UNKNOWN", "giant", 1 << 20, 0),
        (4, "HOST", "cpu", 8192, "CANN@APP", "normal", 8192, 0),
        (5, "HAL", "0", 512, "CANN@RUNTIME", "giant", 4608, 0),
    ];
    for (i, t, dev, size, owner, page, used_m, used_f) in expect {
        let (m, f) = block(&rows, a[&i]);
        let (ma, fa) = (attrs(m), attrs(f));
        assert_eq!(
            (m["Event Type"].as_str(), m["Device Id"].as_str()),
            (t, dev),
            "block {i}"
        );
        assert_eq!(
            (f["Event Type"].as_str(), f["Device Id"].as_str()),
            (t, dev),
            "block {i}"
        );
        assert_eq!(ma["size"], size.to_string(), "block {i}");
        assert_eq!(ma["owner"], owner, "block {i}");
        assert_eq!(ma["page_type"], page, "block {i}");
        assert_eq!(ma["alloc_type"], "alloc", "block {i}");
        assert_eq!(ma["used"], used_m.to_string(), "block {i}");
        assert_eq!(fa["used"], used_f.to_string(), "block {i}");
        assert_eq!(fa["allocation_id"], ma["allocation_id"], "block {i}");
        assert_eq!(fa["size"], ma["size"], "block {i}");
        assert!(
            !fa.contains_key("owner") && !fa.contains_key("page_type"),
            "FREE carries no owner/page: {fa:?}"
        );
    }
}

#[test]
fn create_and_release_give_alloc_type_create_with_prop_device_module_and_page_type() {
    let prog = hal_program("hal_flags");
    let run = run_ok(&["--adapters", "hal", "--device", "npu,cpu"], &prog, &[]);
    let a = addrs(&run.stdout());
    let rows = run.rows();
    for (i, dev, owner, page, size) in [
        (6, "2", "CANN@HCCL", "huge", 3 << 20),
        (7, "1", "CANN@RUNTIME", "giant", 1 << 20),
    ] {
        let (m, f) = block(&rows, a[&i]);
        let ma = attrs(m);
        assert_eq!(
            (m["Event Type"].as_str(), m["Device Id"].as_str()),
            ("HAL", dev),
            "handle {i}"
        );
        assert_eq!(f["Device Id"], dev);
        assert_eq!(
            (
                ma["alloc_type"].as_str(),
                ma["page_type"].as_str(),
                ma["owner"].as_str()
            ),
            ("create", page, owner)
        );
        assert_eq!(ma["size"], size.to_string());
        assert_eq!(attrs(f)["allocation_id"], ma["allocation_id"]);
    }
    // Device 1 holds block 2 (2 MiB) when handle 7 (1 MiB) is created.
    assert_eq!(
        attrs(block(&rows, a[&7]).0)["used"],
        (3u64 << 20).to_string()
    );
}

#[test]
fn hal_device_ids_are_mapped_through_ascend_rt_visible_devices() {
    let prog = hal_program("hal_flags");
    let run = run_ok(
        &["--adapters", "hal"],
        &prog,
        &[("ASCEND_RT_VISIBLE_DEVICES", "4,5,6,7")],
    );
    let a = addrs(&run.stdout());
    let rows = run.rows();
    for (i, dev) in [(1, "4"), (2, "5"), (3, "7"), (5, "4"), (6, "6"), (7, "5")] {
        assert_eq!(block(&rows, a[&i]).0["Device Id"], dev, "block {i}");
    }
    assert!(
        rows.iter().all(|r| r["Device Id"] != "cpu"),
        "HOST rows need --device cpu"
    );
}

#[test]
fn double_free_and_free_of_an_unknown_pointer_are_warned_and_the_driver_error_returned() {
    let prog = hal_program("hal_bad_free");
    let run = run_ok(&["--adapters", "hal"], &prog, &[]);
    assert!(run.stdout().contains("rc 3 3 3"), "{}", run.stdout());
    let rows = run.rows();
    let kinds: Vec<(&str, &str)> = rows
        .iter()
        .map(|r| (r["Event"].as_str(), r["Event Type"].as_str()))
        .collect();
    assert_eq!(
        kinds,
        [
            ("MALLOC", "HAL"),
            ("MALLOC", "HAL"),
            ("FREE", "HAL"),
            ("FREE", "HAL")
        ]
    );
    let log = log_text(&run);
    assert_eq!(log.matches("[WARN").count(), 3, "{log}");
    assert!(
        log.contains("halMemFree(0x")
            && log
                .contains("failed with driver error 3: double free or free of an unknown pointer"),
        "{log}"
    );
    assert!(log.contains("halMemRelease(0x"), "{log}");
}

#[test]
fn the_driver_is_found_when_it_was_loaded_rtld_local() {
    let prog = hal_program("hal_local");
    let sim = sim_npu_dir();
    let run = run_ok(
        &["--adapters", "hal"],
        &prog,
        &[("SIM_NPU_DIR", sim.to_str().unwrap())],
    );
    assert!(
        run.stdout().contains("rtMalloc 0") && run.stdout().contains("rtFree 0"),
        "{}",
        run.stdout()
    );
    let rows = run.rows();
    let m = select(&rows, "MALLOC", "HAL");
    assert_eq!(m.len(), 1);
    let a = attrs(m[0]);
    assert_eq!(
        (
            a["owner"].as_str(),
            a["page_type"].as_str(),
            a["size"].as_str()
        ),
        ("CANN@HCCL", "huge", "3145728")
    );
    assert_eq!(select(&rows, "FREE", "HAL").len(), 1);
}

fn oom_run(analysis: &str, adapters: &str) -> Run {
    let prog = hal_program("hal_oom");
    let limit = (64u64 << 20).to_string();
    let run = memscope_run(
        &["--adapters", adapters, "--analysis", analysis],
        &[prog.to_str().unwrap()],
        &[("SIM_NPU_HBM_LIMIT", &limit)],
    );
    assert_eq!(
        run.code(),
        0,
        "stdout: {}\nstderr: {}",
        run.stdout(),
        run.stderr()
    );
    assert!(
        run.stdout().contains("oom 6 6"),
        "the driver's error comes back unchanged: {}",
        run.stdout()
    );
    run
}

#[test]
fn out_of_memory_gives_an_oom_snapshot_with_pool_and_device_figures_under_the_seeds_keys() {
    let run = oom_run("leaks", "hal,pta,acl");
    let rows = run.rows();
    let snaps = select(&rows, "SNAPSHOT", "SNAPSHOT");
    assert_eq!(snaps.len(), 2, "one per failed call");
    assert!(snaps
        .iter()
        .all(|r| r["Name"] == "OOM_Snapshot" && r["Device Id"] == "0"));
    assert_seed_keys(snaps[0]);
    let s = attrs(snaps[0]);
    let mib = |n: u64| (n << 20).to_string();
    assert_eq!(s["reserved"], mib(32));
    assert_eq!(s["allocated"], mib(12));
    assert_eq!(s["peak_reserved"], mib(32));
    assert_eq!(s["peak_allocated"], mib(12));
    assert_eq!(s["total_mem"], mib(64));
    assert_eq!(s["free_mem"], mib(27), "64 MiB minus 37 MiB live");
    assert_eq!(s["device_utilization"], "57.812500");
    assert_eq!(s["pt_utilization"], "37.500000");
    assert!(
        rows.iter().all(|r| r["Event"] != "OOM_DETAIL"),
        "detail rows need --analysis oom"
    );
}

#[test]
fn analysis_oom_k_adds_the_trigger_and_the_k_most_recent_and_largest_live_blocks() {
    let run = oom_run("oom:3", "hal,pta,acl");
    let rows = run.rows();
    let detail: Vec<&Row> = rows.iter().filter(|r| r["Event"] == "OOM_DETAIL").collect();
    let kinds: Vec<(&str, &str)> = detail
        .iter()
        .map(|r| (r["Event Type"].as_str(), r["Name"].as_str()))
        .collect();
    let (t, r, p) = (
        ("OOM_TRIGGER", "OOM_Trigger"),
        ("OOM_RECENT_ALLOC", "OOM_RecentAlloc"),
        ("OOM_TOP_ALLOC", "OOM_TopAlloc"),
    );
    assert_eq!(
        kinds,
        [t, r, r, r, p, p, p],
        "the second OOM, < 2 s later, only snapshots"
    );
    let trig = attrs(detail[0]);
    assert_eq!(
        (trig["func"].as_str(), trig["req_size"].as_str()),
        ("halMemAlloc", "1073741824")
    );
    let desc = |row: &Row| {
        let a = attrs(row);
        (a["pool"].clone(), a["size"].parse::<u64>().unwrap() >> 20)
    };
    let recent: Vec<_> = detail[1..4].iter().map(|r| desc(r)).collect();
    assert_eq!(
        recent,
        [("PTA".into(), 3), ("PTA".into(), 1), ("PTA".into(), 8)]
    );
    let top: Vec<_> = detail[4..7].iter().map(|r| desc(r)).collect();
    assert_eq!(
        top,
        [("HAL".into(), 32), ("PTA".into(), 8), ("HAL".into(), 4)]
    );
    // Each record names the block's MALLOC row by address and time.
    for row in &detail[1..] {
        let a = attrs(row);
        let addr = u64::from_str_radix(a["ptr"].trim_start_matches("0x"), 16).unwrap();
        let m = rows
            .iter()
            .find(|m| m["Event"] == "MALLOC" && ptr(m) == addr && m["Event Type"] == a["pool"])
            .expect("its MALLOC row");
        assert_eq!(m["Timestamp(ns)"], a["timestamp"]);
    }
    let ids: Vec<u64> = rows.iter().map(|r| r["ID"].parse().unwrap()).collect();
    let mut sorted = ids.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), ids.len(), "IDs stay unique");
}

#[test]
fn hal_selected_alone_records_only_hal_rows_and_other_adapters_leave_hal_alone() {
    let run = oom_run("oom:2", "hal");
    let rows = run.rows();
    assert!(!rows.is_empty());
    for r in &rows {
        let ok = matches!(
            r["Event Type"].as_str(),
            "HAL" | "SNAPSHOT" | "OOM_TRIGGER" | "OOM_RECENT_ALLOC" | "OOM_TOP_ALLOC"
        );
        assert!(ok, "unexpected row {r:?}");
    }
    let top: Vec<_> = rows
        .iter()
        .filter(|r| r["Event Type"] == "OOM_TOP_ALLOC")
        .map(|r| attrs(r)["pool"].clone())
        .collect();
    assert_eq!(
        top,
        ["HAL", "HAL"],
        "without the pta adapter only HAL blocks are live"
    );

    let prog = hal_program("hal_flags");
    let run = run_ok(&["--adapters", "mstx"], &prog, &[]);
    assert!(
        run.rows().iter().all(|r| r["Event Type"] != "HAL"),
        "hal not selected: no HAL rows"
    );
}

#[test]
fn a_hal_only_oom_snapshot_has_all_eight_keys_and_the_log_names_what_was_not_known() {
    // issue 27 item 2: no ACL runtime in the process, so no device totals
    let prog = compile(
        &[&repo_root().join("tests/programs/hal_only_oom.c")],
        "hal_only_oom",
        &["-lascend_hal"],
        false,
    );
    let limit = (64u64 << 20).to_string();
    let run = run_ok(
        &["--adapters", "hal", "--device", "npu,cpu"],
        &prog,
        &[("SIM_NPU_HBM_LIMIT", &limit)],
    );
    assert!(run.stdout().contains("oom 6"), "{}", run.stdout());
    let rows = run.rows();
    let snaps = select(&rows, "SNAPSHOT", "SNAPSHOT");
    assert_eq!(snaps.len(), 1, "{rows:?}");
    assert_seed_keys(snaps[0]);
    let s = attrs(snaps[0]);
    assert_eq!(s["total_mem"], "0");
    assert_eq!(s["free_mem"], "0");
    assert_eq!(s["device_utilization"], "0.000000");
    let log = log_text(&run);
    assert!(
        log.contains("total and free memory could not be obtained") && log.contains("written as 0"),
        "{log}"
    );
}
