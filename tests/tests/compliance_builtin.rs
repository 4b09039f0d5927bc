//! Issue 11: every built-in adapter passes the adapter specification's compliance checks
//! (`docs/adapter-spec.md`, `memscope_tests::compliance`) on its own test program: selected ⇒
//! rows and a summary that equals them; selection off ⇒ none and the same job output; fork ⇒
//! rows per process that pair up; a 1 MiB stream limit ⇒ the job runs on and the rest is
//! counted as dropped.

use memscope_tests::compliance::{assert_adapter_compliance, Case};
use memscope_tests::*;

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

fn prog(name: &str, libs: &[&str]) -> String {
    let src = repo_root().join("tests/programs").join(name);
    let out = name.split('.').next().unwrap();
    compile(&[&src], out, libs, false).display().to_string()
}

#[test]
fn the_hal_adapter_is_compliant() {
    let p = prog("pool_pta.c", &["-lascend_hal"]);
    assert_adapter_compliance(&Case {
        name: "hal".into(),
        on: s(&["--adapters", "hal,pta"]),
        off: s(&["--adapters", "pta"]),
        program: s(&[&p]),
        event_types: s(&["HAL"]),
        framework: Some("CANN".into()),
        ..Default::default()
    });
}

#[test]
fn the_pta_adapter_is_compliant() {
    let p = prog("pool_pta.c", &["-lascend_hal"]);
    assert_adapter_compliance(&Case {
        name: "pta".into(),
        on: s(&["--adapters", "hal,pta"]),
        off: s(&["--adapters", "hal"]),
        program: s(&[&p]),
        event_types: s(&["PTA", "PTA_WORKSPACE"]),
        ..Default::default()
    });
}

#[test]
fn the_mstx_adapter_is_compliant() {
    let basic = prog("mstx_basic.c", &[]);
    let fork = prog("mstx_fork.c", &[]);
    let many = prog("mstx_many.c", &[]);
    assert_adapter_compliance(&Case {
        name: "mstx".into(),
        on: s(&["--adapters", "mstx"]),
        off: s(&["--adapters", "hal"]),
        program: s(&[&basic, "1"]),
        event_types: s(&["Mark", "Range_start", "Range_end"]),
        fork_program: Some(s(&[&fork])),
        flood: Some((s(&[&many, "200000"]), 200_000)),
        ..Default::default()
    });
}

#[test]
fn the_host_adapter_is_compliant() {
    let mix = prog("host_mix.c", &["-lpthread"]);
    let fork = prog("host_fork.c", &[]);
    assert_adapter_compliance(&Case {
        name: "host".into(),
        on: s(&["--adapters", "host", "--host-rows", "--device", "npu,cpu"]),
        off: s(&["--adapters", "mstx", "--device", "npu,cpu"]),
        program: s(&[&mix, "1000"]),
        event_types: s(&["HOST"]),
        fork_program: Some(s(&[&fork])),
        // 2 threads × 100000 malloc/free pairs
        flood: Some((s(&[&mix, "100000"]), 400_000)),
        ..Default::default()
    });
}

#[test]
fn the_acl_adapter_is_compliant() {
    let p = prog("acl_launch.c", ACL_LIBS);
    assert_adapter_compliance(&Case {
        name: "acl".into(),
        on: s(&["--adapters", "acl,hal", "--level", "kernel"]),
        off: s(&["--adapters", "hal", "--level", "kernel"]),
        program: s(&[&p]),
        event_types: s(&["KERNEL_LAUNCH"]),
        ..Default::default()
    });
}

#[test]
fn the_acl_adapter_is_compliant_on_stream_and_event_calls() {
    let p = prog("acl_streams.c", ACL_LIBS);
    assert_adapter_compliance(&Case {
        name: "acl".into(),
        on: s(&["--adapters", "acl,hal", "--level", "kernel"]),
        off: s(&["--adapters", "hal", "--level", "kernel"]),
        program: s(&[&p]),
        event_types: s(&[
            "KERNEL_LAUNCH",
            "STREAM_CREATE",
            "STREAM_DESTROY",
            "EVENT_CREATE",
            "EVENT_DESTROY",
            "EVENT_RECORD",
            "STREAM_WAIT_EVENT",
            "STREAM_SYNC",
            "EVENT_SYNC",
            "DEVICE_SYNC",
        ]),
        ..Default::default()
    });
}

#[test]
fn the_atb_adapter_is_compliant() {
    let p = prog("pool_atb_ms.c", &["-lascend_hal"]);
    assert_adapter_compliance(&Case {
        name: "atb".into(),
        on: s(&["--adapters", "atb,mindspore,mstx"]),
        off: s(&["--adapters", "mindspore,mstx"]),
        program: s(&[&p]),
        event_types: s(&["ATB"]),
        ..Default::default()
    });
}

#[test]
fn the_mindspore_adapter_is_compliant() {
    let p = prog("pool_atb_ms.c", &["-lascend_hal"]);
    assert_adapter_compliance(&Case {
        name: "mindspore".into(),
        on: s(&["--adapters", "atb,mindspore,mstx"]),
        off: s(&["--adapters", "atb,mstx"]),
        program: s(&[&p]),
        event_types: s(&["MindSpore"]),
        ..Default::default()
    });
}
