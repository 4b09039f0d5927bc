//! Issue 5: the ACL adapter — lifecycle, current device, pinned host memory and kernel
//! launches — driven through the sim-npu ACL and runtime stand-ins under `memscope run`.

use memscope_tests::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn acl_program(name: &str) -> PathBuf {
    let src = repo_root().join("tests/programs").join(format!("{name}.c"));
    compile(&[&src], name, ACL_LIBS, false)
}

fn run_ok(args: &[&str], prog: &Path) -> Run {
    let run = memscope_run(args, &[prog.to_str().unwrap()], &[]);
    assert_eq!(
        run.code(),
        0,
        "stdout: {}\nstderr: {}",
        run.stdout(),
        run.stderr()
    );
    run
}

fn hex(s: &str) -> u64 {
    u64::from_str_radix(s.trim().trim_start_matches("0x"), 16).unwrap_or(0)
}

/// `<name> <ptr>` from the program's stdout.
fn printed(stdout: &str, name: &str) -> u64 {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")).map(hex))
        .unwrap_or_else(|| panic!("{name} not printed: {stdout}"))
}

#[test]
fn acl_init_and_finalize_are_device_less_system_rows() {
    let run = run_ok(
        &["--adapters", "acl", "--device", "npu,cpu"],
        &acl_program("acl_lifecycle"),
    );
    let rows = run.rows();
    for t in ["ACL_INIT", "ACL_FINI"] {
        let s = select(&rows, "SYSTEM", t);
        assert!(!s.is_empty(), "{t}");
        assert!(
            s.iter()
                .all(|r| r["Device Id"] == "N/A" && r["Name"] == "N/A" && r["Attr"].is_empty()),
            "{s:?}"
        );
    }
    let init: u64 = select(&rows, "SYSTEM", "ACL_INIT")[0]["Timestamp(ns)"]
        .parse()
        .unwrap();
    let fini: u64 = select(&rows, "SYSTEM", "ACL_FINI")[0]["Timestamp(ns)"]
        .parse()
        .unwrap();
    assert!(init < fini);
}

#[test]
fn pinned_register_and_unregister_are_host_rows_on_cpu_with_pinned_true() {
    let run = run_ok(
        &["--adapters", "acl", "--device", "npu,cpu"],
        &acl_program("acl_lifecycle"),
    );
    let (a, c) = (printed(&run.stdout(), "a"), printed(&run.stdout(), "c"));
    let rows = run.rows();
    let host: Vec<&Row> = rows.iter().filter(|r| r["Event Type"] == "HOST").collect();
    let got: Vec<(String, u64, String, String)> = host
        .iter()
        .map(|r| {
            let at = attrs(r);
            (
                r["Event"].clone(),
                hex(&r["Ptr"]),
                at["size"].clone(),
                at["used"].clone(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("MALLOC".into(), a, "1048576".into(), "1048576".into()),
            ("MALLOC".into(), c, "65536".into(), "1114112".into()),
            ("FREE".into(), a, "1048576".into(), "65536".into()),
            ("FREE".into(), c, "65536".into(), "0".into()),
        ],
        "the unpinned registration gives no row"
    );
    for r in &host {
        let at = attrs(r);
        assert_eq!(r["Device Id"], "cpu");
        assert_eq!(at["pinned"], "true");
        assert!(!at.contains_key("owner"), "HOST blocks have no owner");
    }
    let m = attrs(host[0]);
    assert!(
        m["process_used"].parse::<u64>().unwrap() > 1 << 20,
        "VmRSS: {m:?}"
    );
    assert_eq!(attrs(host[2])["allocation_id"], m["allocation_id"]);
    let mut log = String::new();
    walk(run.out.path(), &mut |p| {
        if p.extension().is_some_and(|e| e == "log") {
            log.push_str(&std::fs::read_to_string(p).unwrap());
        }
    });
    assert!(
        log.contains(&format!(
            "aclrtHostUnregister(0x{a:x}) failed with error 100000"
        )),
        "{log}"
    );
}

#[test]
fn set_device_gives_later_rows_of_the_thread_their_device_with_or_without_the_acl_adapter() {
    let run = run_ok(&["--adapters", "acl,mstx"], &acl_program("acl_lifecycle"));
    let rows = run.rows();
    let m = select(&rows, "MSTX", "Mark");
    assert_eq!(m.len(), 1);
    assert_eq!(m[0]["Device Id"], "2", "the mark follows aclrtSetDevice(2)");
    let run = run_ok(&["--adapters", "mstx"], &acl_program("acl_lifecycle"));
    assert_eq!(
        select(&run.rows(), "MSTX", "Mark")[0]["Device Id"],
        "2",
        "without acl the probe asks the runtime (issue 10)"
    );
}

fn launches(rows: &[Row]) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for r in select(rows, "KERNEL_LAUNCH", "KERNEL_LAUNCH") {
        *m.entry(r["Name"].clone()).or_default() += 1;
    }
    m
}

#[test]
fn every_launch_entry_point_gives_one_named_kernel_launch_even_when_aclrt_calls_rt() {
    let run = run_ok(
        &["--adapters", "acl", "--level", "kernel"],
        &acl_program("acl_launch"),
    );
    assert!(run.stdout().contains("launched 10"), "{}", run.stdout());
    let rows = run.rows();
    let names = launches(&rows);
    let expected = [
        "K_acl_config",
        "K_acl_host_args",
        "K_acl_impl",
        "K_acl_v2",
        "K_rt_aicpu",
        "K_rt_flag_v2",
        "K_rt_func",
        "K_rt_func_v2",
        "K_rt_handle_v2",
        "K_rt_stub",
    ];
    assert_eq!(
        names.keys().map(String::as_str).collect::<Vec<_>>(),
        expected
    );
    assert!(
        names.values().all(|n| *n == 1),
        "each launch once: {names:?}"
    );
    let mut tasks = std::collections::BTreeSet::new();
    for r in select(&rows, "KERNEL_LAUNCH", "KERNEL_LAUNCH") {
        let a = attrs(r);
        assert_eq!(r["Device Id"], "0");
        assert_ne!(a["streamId"], "0", "a created stream, not the default one");
        tasks.insert(a["taskId"].clone());
    }
    assert_eq!(tasks.len(), 10, "distinct task ids");
}

#[test]
fn kernel_launches_are_collected_only_with_level_kernel_and_launch_events() {
    let prog = acl_program("acl_launch");
    for args in [
        &["--adapters", "acl"][..],
        &[
            "--adapters",
            "acl",
            "--level",
            "kernel",
            "--events",
            "alloc,free",
        ][..],
    ] {
        let run = run_ok(args, &prog);
        assert!(launches(&run.rows()).is_empty(), "{args:?}");
    }
    let run = run_ok(
        &[
            "--adapters",
            "acl",
            "--level",
            "op,kernel",
            "--events",
            "launch",
        ],
        &prog,
    );
    assert_eq!(launches(&run.rows()).len(), 10);
}

#[test]
fn acl_selected_alone_records_only_acl_rows_and_unselected_it_records_nothing() {
    let prog = acl_program("acl_lifecycle");
    let run = run_ok(
        &[
            "--adapters",
            "acl",
            "--device",
            "npu,cpu",
            "--level",
            "kernel",
        ],
        &prog,
    );
    for r in run.rows() {
        assert!(
            matches!(
                r["Event Type"].as_str(),
                "ACL_INIT" | "ACL_FINI" | "HOST" | "KERNEL_LAUNCH"
            ),
            "{r:?}"
        );
    }
    let run = run_ok(
        &[
            "--adapters",
            "hal",
            "--device",
            "npu,cpu",
            "--level",
            "kernel",
        ],
        &acl_program("acl_launch"),
    );
    assert!(run
        .rows()
        .iter()
        .all(|r| r["Event"] != "KERNEL_LAUNCH" && r["Event"] != "SYSTEM"));
}
