//! Issue 5: the ATB operator hooks on both libstdc++ ABIs — `Runner::Execute`,
//! `StoreUtil::SaveLaunchParam`, the `Probe` predicates — driven through the fake libatb of
//! sim-npu under `memscope run`.

use memscope_tests::*;
use std::path::PathBuf;

fn atb_program() -> PathBuf {
    let src = repo_root().join("tests/programs/atb_ops.cpp");
    compile(&[&src], "atb_ops", &["-lascend_hal"], false)
}

fn atb_home(abi: u8) -> String {
    sim_npu_dir()
        .join(format!("atb/cxx_abi_{abi}"))
        .to_str()
        .unwrap()
        .to_owned()
}

fn run_atb(args: &[&str], abi: u8, mode: &str) -> Run {
    let prog = atb_program();
    let home = atb_home(abi);
    let run = memscope_run(
        args,
        &[prog.to_str().unwrap(), mode],
        &[("ATB_HOME_PATH", &home)],
    );
    assert_eq!(
        run.code(),
        0,
        "the operators ran and wrote their outputs\nstdout: {}\nstderr: {}",
        run.stdout(),
        run.stderr()
    );
    assert!(run.stdout().contains("ran 2"), "{}", run.stdout());
    run
}

fn printed(stdout: &str, name: &str) -> String {
    let v = stdout
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .unwrap_or_else(|| panic!("{name}: {stdout}"));
    format!(
        "0x{:016x}",
        u64::from_str_radix(v.trim_start_matches("0x"), 16).unwrap()
    )
}

/// (Event, Event Type, Name, Ptr) of the ATB rows in file order.
fn shape(rows: &[Row]) -> Vec<(String, String, String, String)> {
    rows.iter()
        .filter(|r| {
            matches!(r["Event"].as_str(), "OP_LAUNCH" | "ACCESS")
                || r["Event Type"].starts_with("KERNEL_")
        })
        .filter(|r| r["Event Type"] != "KERNEL_LAUNCH")
        .map(|r| {
            (
                r["Event"].clone(),
                r["Event Type"].clone(),
                r["Name"].clone(),
                r["Ptr"].clone(),
            )
        })
        .collect()
}

fn check_operators(run: &Run) {
    let out = run.stdout();
    let (x, w, y, z, ws) = (
        printed(&out, "x"),
        printed(&out, "w"),
        printed(&out, "y"),
        printed(&out, "z"),
        printed(&out, "ws"),
    );
    let rows = run.rows();
    let row = |e: &str, t: &str, n: &str, p: &str| {
        (e.to_owned(), t.to_owned(), n.to_owned(), p.to_owned())
    };
    let (lin, linc, add, addc) = (
        "LinearOperation",
        "LinearOperationKernel",
        "AddOperation",
        "AddOperationKernel",
    );
    let na = "N/A";
    let expected = vec![
        row("OP_LAUNCH", "ATB_START", lin, na),
        row("ACCESS", "UNKNOWN", lin, &x),
        row("ACCESS", "UNKNOWN", lin, &w),
        row("ACCESS", "WRITE", lin, &y),
        row("KERNEL_LAUNCH", "KERNEL_START", linc, na),
        row("ACCESS", "READ", linc, &x),
        row("ACCESS", "READ", linc, &w),
        row("ACCESS", "WRITE", linc, &y),
        row("KERNEL_LAUNCH", "KERNEL_END", linc, na),
        row("ACCESS", "READ", linc, &x),
        row("ACCESS", "READ", linc, &w),
        row("ACCESS", "WRITE", linc, &y),
        row("ACCESS", "UNKNOWN", lin, &x),
        row("ACCESS", "UNKNOWN", lin, &w),
        row("ACCESS", "WRITE", lin, &y),
        row("OP_LAUNCH", "ATB_END", lin, na),
        row("OP_LAUNCH", "ATB_START", add, na),
        row("ACCESS", "UNKNOWN", add, &y),
        row("ACCESS", "UNKNOWN", add, &x),
        row("ACCESS", "WRITE", add, &z),
        row("KERNEL_LAUNCH", "KERNEL_START", addc, na),
        row("ACCESS", "READ", addc, &y),
        row("ACCESS", "READ", addc, &x),
        row("ACCESS", "WRITE", addc, &z),
        row("KERNEL_LAUNCH", "KERNEL_END", addc, na),
        row("ACCESS", "READ", addc, &y),
        row("ACCESS", "READ", addc, &x),
        row("ACCESS", "WRITE", addc, &z),
        row("ACCESS", "UNKNOWN", add, &y),
        row("ACCESS", "UNKNOWN", add, &x),
        row("ACCESS", "WRITE", add, &z),
        row("OP_LAUNCH", "ATB_END", add, na),
    ];
    assert_eq!(
        shape(&rows),
        expected,
        "the NULL input is dropped (address 0)"
    );

    let start = attrs(select(&rows, "OP_LAUNCH", "ATB_START")[0]);
    assert!(
        start["path"].ends_with("/0_LinearOperation")
            && start["path"].contains(&format!("_{}", rows[0]["Process Id"])),
        "{start:?}"
    );
    assert_eq!(
        u64::from_str_radix(start["workspace ptr"].trim_start_matches("0x"), 16).unwrap(),
        u64::from_str_radix(ws.trim_start_matches("0x"), 16).unwrap()
    );
    assert_eq!(start["workspace size"], (4u64 << 20).to_string());
    let add_start = attrs(select(&rows, "OP_LAUNCH", "ATB_START")[1]);
    assert_eq!(
        (
            add_start["workspace ptr"].as_str(),
            add_start["workspace size"].as_str()
        ),
        ("0x0", "0")
    );

    let acc = rows
        .iter()
        .find(|r| r["Event"] == "ACCESS" && r["Ptr"] == x)
        .map(attrs)
        .unwrap();
    assert_eq!(
        (
            acc["dtype"].as_str(),
            acc["format"].as_str(),
            acc["shape"].as_str(),
            acc["size"].as_str(),
            acc["type"].as_str()
        ),
        ("FLOAT16", "ND", "[524288,]", "1048576", "ATB")
    );
    let kstart = attrs(select(&rows, "KERNEL_LAUNCH", "KERNEL_START")[0]);
    assert!(
        kstart["path"].ends_with("/LinearOperationKernel/before"),
        "{kstart:?}"
    );
    assert!(
        rows.iter()
            .filter(|r| r["Event"] != "SYSTEM")
            .all(|r| r["Device Id"] == "0"),
        "device of the calling thread"
    );
}

#[test]
fn operators_kernels_and_tensor_accesses_are_recorded_with_the_cxx11_abi() {
    let run = run_atb(
        &[
            "--adapters",
            "atb",
            "--level",
            "op,kernel",
            "--events",
            "alloc,free,launch,access",
        ],
        1,
        "global",
    );
    check_operators(&run);
}

#[test]
fn operators_kernels_and_tensor_accesses_are_recorded_with_the_old_abi() {
    let run = run_atb(
        &[
            "--adapters",
            "atb",
            "--level",
            "op,kernel",
            "--events",
            "alloc,free,launch,access",
        ],
        0,
        "global",
    );
    check_operators(&run);
}

#[test]
fn originals_are_found_when_libatb_was_loaded_rtld_local() {
    for abi in [0, 1] {
        let run = run_atb(
            &[
                "--adapters",
                "atb",
                "--level",
                "op,kernel",
                "--events",
                "launch,access",
            ],
            abi,
            "local",
        );
        check_operators(&run);
    }
}

#[test]
fn the_operator_always_runs_and_nothing_is_recorded_when_atb_is_not_selected() {
    for abi in [0, 1] {
        let run = run_atb(
            &[
                "--adapters",
                "acl,hal",
                "--level",
                "op,kernel",
                "--events",
                "alloc,free,launch,access",
            ],
            abi,
            "global",
        );
        let rows = run.rows();
        assert!(shape(&rows).is_empty(), "{:?}", shape(&rows));
        let k: Vec<&str> = select(&rows, "KERNEL_LAUNCH", "KERNEL_LAUNCH")
            .iter()
            .map(|r| r["Name"].as_str())
            .collect();
        assert_eq!(
            k,
            ["LinearOperationKernel", "AddOperationKernel"],
            "the real kernels were launched"
        );
    }
}

#[test]
fn atb_selected_alone_writes_only_atb_rows_and_level_op_drops_kernel_rows() {
    let run = run_atb(
        &[
            "--adapters",
            "atb",
            "--level",
            "op",
            "--events",
            "launch,access",
        ],
        1,
        "global",
    );
    let rows = run.rows();
    assert!(!rows.is_empty());
    for r in &rows {
        assert!(
            matches!(r["Event"].as_str(), "OP_LAUNCH" | "ACCESS"),
            "{r:?}"
        );
    }
    assert_eq!(select(&rows, "OP_LAUNCH", "ATB_START").len(), 2);
}
