//! Issue 11: C stack capture is a runtime service every adapter uses, so `--call-stack c:16`
//! puts a symbolised `Call Stack(C)` on HAL, pinned, kernel-launch, ATB and pool rows (and OOM
//! rows), not only on HOST's; frames of the probe itself never appear. Frees carry none (as
//! HOST's).

use memscope_tests::*;

fn demo(extra: &[&str]) -> Run {
    let sim = sim_npu_dir();
    let atb = sim.join("atb/cxx_abi_1");
    let train = repo_root().join("examples/sim-npu/train.py");
    let mut args = vec![
        "--level",
        "op,kernel",
        "--events",
        "alloc,free,launch,access",
        "--device",
        "npu,cpu",
    ];
    args.extend_from_slice(extra);
    let run = memscope_run(
        &args,
        &["python3", train.to_str().unwrap(), "--steps", "2"],
        &[
            ("ATB_HOME_PATH", atb.to_str().unwrap()),
            ("SIM_NPU_DIR", sim.to_str().unwrap()),
        ],
    );
    assert_eq!(run.code(), 0, "{}\n{}", run.stdout(), run.stderr());
    run
}

fn stack(r: &Row) -> &str {
    r["Call Stack(C)"].as_str()
}

#[test]
fn call_stack_c_fills_hal_pinned_kernel_launch_atb_and_pool_rows_of_the_sim_npu_demo() {
    let run = demo(&["--call-stack", "c:16"]);
    let rows = run.rows();
    // (event, event type, a function one of the stacks must show: the sim-npu code that made
    // the call; every row has a stack)
    for (e, t, func) in [
        ("MALLOC", "HAL", "aclrtMalloc"),
        ("MALLOC", "HOST", "ffi_call"), // pinned (aclrtHostRegisterV2 through ctypes)
        ("KERNEL_LAUNCH", "KERNEL_LAUNCH", "ffi_call"),
        ("KERNEL_LAUNCH", "KERNEL_START", "atb::Runner::Execute"),
        ("OP_LAUNCH", "ATB_START", "stub_atb_run"),
        ("MALLOC", "PTA", "mstxMemRegionsRegister"),
    ] {
        let sel = select(&rows, e, t);
        assert!(!sel.is_empty(), "{e}/{t} rows");
        for r in &sel {
            let s = stack(r);
            assert!(
                s.contains("ffi_call"),
                "{e}/{t}: the ctypes call is not in\n{s}"
            );
            let frames = s.lines().filter(|l| !l.ends_with("(inlined)")).count();
            assert!(frames <= 16, "{e}/{t}: deeper than 16 frames:\n{s}");
            assert!(
                !s.contains("memscope_"),
                "{e}/{t}: a frame of the probe:\n{s}"
            );
        }
        assert!(
            sel.iter().any(|r| stack(r).contains(func)),
            "{e}/{t}: no stack shows {func}"
        );
    }
    for t in ["HAL", "PTA"] {
        assert!(select(&rows, "FREE", t).iter().all(|r| stack(r).is_empty()));
    }
}

#[test]
fn without_call_stack_c_no_adapter_row_has_a_c_stack() {
    let run = demo(&[]);
    assert!(run.rows().iter().all(|r| stack(r).is_empty()));
}

#[test]
fn call_stack_c_fills_the_oom_snapshot_and_detail_rows() {
    let src = repo_root().join("tests/programs/hal_oom.c");
    let prog = compile(&[&src], "hal_oom", &["-lascend_hal", "-lascendcl"], false);
    let limit = (64u64 << 20).to_string();
    let run = memscope_run(
        &[
            "--adapters",
            "hal,pta,acl",
            "--analysis",
            "oom:2",
            "--call-stack",
            "c:16",
        ],
        &[prog.to_str().unwrap()],
        &[("SIM_NPU_HBM_LIMIT", &limit)],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let rows = run.rows();
    let snaps = select(&rows, "SNAPSHOT", "SNAPSHOT");
    assert_eq!(snaps.len(), 2, "{}", run.stderr());
    for r in snaps
        .iter()
        .chain(select(&rows, "OOM_DETAIL", "OOM_TRIGGER").iter())
    {
        assert!(stack(r).contains("main"), "{}", stack(r));
    }
}
