//! Issue 10 item 3: msTX rows get their Device Id from the runtime (`aclrtGetDeviceImpl`, else
//! `rtGetDevice`, mapped through `ASCEND_RT_VISIBLE_DEVICES`) whatever adapters are selected —
//! a query made by the probe when it records the row, not a hook.

use memscope_tests::*;
use std::collections::HashMap;
use std::process::Command;

#[test]
fn the_readme_first_command_writes_marks_with_a_device_id() {
    // The README's first command: `memscope run --adapters pta,mstx -- python3 train.py`.
    let train = repo_root().join("examples/sim-npu/train.py");
    let run = memscope_run(
        &["--adapters", "pta,mstx"],
        &["python3", train.to_str().unwrap()],
        &[("SIM_NPU_DIR", sim_npu_dir().to_str().unwrap())],
    );
    assert_eq!(run.code(), 0, "{}\n{}", run.stdout(), run.stderr());
    let rows = run.rows();
    let mstx: Vec<&Row> = rows.iter().filter(|r| r["Event"] == "MSTX").collect();
    assert_eq!(
        mstx.len(),
        60 + 2 * 10,
        "6 op marks per step and 10 step ranges"
    );
    assert!(
        mstx.iter().all(|r| r["Device Id"] == "0"),
        "every mark on device 0: {:?}",
        mstx.iter()
            .map(|r| r["Device Id"].as_str())
            .collect::<Vec<_>>()
    );
    // msMemScope's check_leaks groups marks by device: the HAL range check now finds its marks.
    let dump = run.dumps(".csv").remove(0);
    let o = Command::new(memscope_bin())
        .args(["analyze", "leaks"])
        .arg(&dump)
        .args(["--mstx-info", "op:embedding", "--start-index", "0"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(!text.contains("fewer than 3"), "{text}");
    assert!(text.contains("device 0"), "{text}");
}

#[test]
fn marks_take_the_runtime_device_of_their_thread_without_the_acl_adapter() {
    let prog = program("mstx_devices");
    let libruntime = sim_npu_dir().join("lib64/libruntime.so");
    let run = memscope_run(
        &["--adapters", "mstx"],
        &[prog.to_str().unwrap(), libruntime.to_str().unwrap()],
        &[("ASCEND_RT_VISIBLE_DEVICES", "4,5,6,7")],
    );
    assert_eq!(run.code(), 0, "{}\n{}", run.stdout(), run.stderr());
    let rows = run.rows();
    let device: HashMap<(String, String), String> = rows
        .iter()
        .filter(|r| r["Event"] == "MSTX")
        .map(|r| {
            (
                (r["Event Type"].clone(), r["Name"].clone()),
                r["Device Id"].clone(),
            )
        })
        .collect();
    let want = [
        ("Mark", "before-runtime", "N/A"),
        ("Mark", "on-2", "6"),
        ("Mark", "thread-on-3", "7"),
        ("Range_start", "thread-range", "7"),
        ("Range_end", "thread-range", "7"),
        ("Mark", "still-on-2", "6"),
        ("Mark", "on-1", "5"),
        ("Mark", "child-on-1", "5"),
    ];
    for (t, name, dev) in want {
        assert_eq!(
            device
                .get(&(t.to_owned(), name.to_owned()))
                .map(String::as_str),
            Some(dev),
            "{t} {name}: {device:?}"
        );
    }
    assert_eq!(device.len(), want.len(), "{device:?}");
}
