//! Issue 15: `memscope export --to perfetto` — a protobuf TrackEvent trace decoded with Python
//! `protobuf` and the `perfetto` wheel's schema (`tests/export/check_perfetto.py`): counters
//! equal to the dump's `used`, slices, instants, flows, synthetic pids, and a trace cut off
//! mid-file that still decodes up to the cut.

mod export_common;

use export_common::*;
use memscope_tests::*;

fn full_demo() -> Run {
    let script = repo_root().join("examples/sim-npu/train.py");
    let atb = sim_npu_dir().join("atb/cxx_abi_1");
    let run = memscope_run(
        &[
            "--level",
            "op,kernel",
            "--events",
            "alloc,free,launch,access",
            "--device",
            "npu,cpu",
        ],
        &["python3", script.to_str().unwrap(), "--steps", "4"],
        &[("ATB_HOME_PATH", atb.to_str().unwrap())],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    run
}

/// The value of a counter series at `t`: its last sample at or before `t`.
fn at(series: &[serde_json::Value], t: u64) -> Option<i64> {
    series
        .iter()
        .take_while(|s| s[0].as_u64().unwrap() <= t)
        .last()
        .map(|s| s[1].as_i64().unwrap())
}

#[test]
fn perfetto_counters_equal_the_dumps_used_at_several_timestamps() {
    let run = full_demo();
    let out = run.out.path().join("demo.pftrace");
    export("perfetto", &[run.out.path()], &out);
    let v = py_check("check_perfetto.py", &[out.to_str().unwrap()]);
    let counters = v["counters"].as_object().unwrap();
    let rows = run.rows();
    let mut checked = 0;
    for (pool, track) in [
        ("PTA", "1/NPU0 PTA allocated"),
        ("HAL", "1/NPU0 HAL allocated"),
    ] {
        let series = counters
            .get(track)
            .unwrap_or_else(|| panic!("no {track} in {:?}", counters.keys()))
            .as_array()
            .unwrap();
        let dump: Vec<(u64, i64)> = rows
            .iter()
            .filter(|r| r["Event Type"] == pool && r["Device Id"] == "0")
            .map(|r| {
                (
                    r["Timestamp(ns)"].parse().unwrap(),
                    attrs(r)["used"].parse().unwrap(),
                )
            })
            .collect();
        assert!(dump.len() >= 5, "{pool}: {} rows", dump.len());
        let picks = [
            0,
            dump.len() / 4,
            dump.len() / 2,
            3 * dump.len() / 4,
            dump.len() - 1,
        ];
        for i in picks {
            let t = dump[i].0;
            let want = dump.iter().take_while(|(ts, _)| *ts <= t).last().unwrap().1;
            assert_eq!(at(series, t), Some(want), "{track} at {t} (row {i})");
            checked += 1;
        }
        let peak = dump.iter().map(|(_, u)| *u).max().unwrap();
        let top = series.iter().map(|s| s[1].as_i64().unwrap()).max().unwrap();
        assert_eq!(
            top, peak,
            "{track}: the counter's maximum is the dump's peak"
        );
    }
    assert_eq!(checked, 10);
    assert!(
        counters.contains_key("1/NPU0 PTA reserved"),
        "{:?}",
        counters.keys()
    );
    let slices = v["slices"].as_object().unwrap();
    assert!(
        slices.keys().any(|k| k.starts_with("1/ops")),
        "ATB operators as slices: {slices:?}"
    );
    assert!(
        slices.contains_key("1/NPU0 stream 1"),
        "kernel launches: {slices:?}"
    );
    assert!(slices.contains_key("1/msTX ranges"), "steps: {slices:?}");
    assert!(
        v["flows"].as_u64().unwrap() > 0,
        "operator → kernel flows: {v}"
    );
    let marks = v["instants"]["1/msTX marks"].as_array().unwrap();
    assert!(marks.iter().any(|m| m == "op:embedding"), "{marks:?}");
}

#[test]
fn perfetto_trace_cut_off_mid_file_still_decodes_up_to_the_cut() {
    let run = full_demo();
    let out = run.out.path().join("demo.pftrace");
    export("perfetto", &[run.out.path()], &out);
    let len = std::fs::metadata(&out).unwrap().len();
    let whole = py_check("check_perfetto.py", &[out.to_str().unwrap()]);
    let total = whole["packets"].as_u64().unwrap();
    let mut last = 0;
    for cut in [len / 3 + 1, len / 2 + 7, len - 3] {
        let c = cut.to_string();
        let v = py_check("check_perfetto.py", &[out.to_str().unwrap(), "--cut", &c]);
        let n = v["packets"].as_u64().unwrap();
        assert!(
            n > last && n < total,
            "cut at {cut}: {n} of {total} packets"
        );
        assert!(v["complete_bytes"].as_u64().unwrap() <= cut);
        last = n;
    }
}

#[test]
fn perfetto_gives_each_process_its_own_synthetic_pid_across_nodes() {
    let d = tempfile::tempdir().unwrap();
    // the same pid and device on two nodes
    for node in ["node0", "node1"] {
        let mut p = Proc::new(4242, 1_767_225_600_000_000_000);
        let id = p.malloc("PTA", "0", 0x1000, 4096, Some(1 << 20), "PTA", "", "");
        p.row("MSTX", "Mark", "hello", "0", None, "", "", "");
        p.free("PTA", "0", id, 0x1000, 4096, Some(1 << 20), false);
        p.write_layout(&d.path().join(node));
    }
    let out = d.path().join("t.pftrace");
    let o = memscope(&[
        "export",
        "--to",
        "perfetto",
        d.path().to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("repeat across"),
        "ranks from devices repeat across nodes: {err}"
    );
    let v = py_check("check_perfetto.py", &[out.to_str().unwrap()]);
    let procs = v["processes"].as_object().unwrap();
    assert_eq!(procs.len(), 2, "{procs:?}");
    let names: Vec<&str> = procs.values().map(|n| n.as_str().unwrap()).collect();
    assert!(
        names.iter().any(|n| n.contains("node0")) && names.iter().any(|n| n.contains("node1")),
        "{names:?}"
    );
    for pid in ["1", "2"] {
        let series = v["counters"][format!("{pid}/NPU0 PTA allocated")]
            .as_array()
            .unwrap();
        let values: Vec<i64> = series.iter().map(|s| s[1].as_i64().unwrap()).collect();
        assert_eq!(values, [4096, 0], "process {pid}");
    }
}

#[test]
fn msmemscope_fixture_dumps_export_to_a_trace_that_decodes() {
    let fixtures = repo_root().join("../shared/fixtures/msmemscope");
    if !fixtures.is_dir() {
        eprintln!("skipped: {} is absent", fixtures.display());
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("t.pftrace");
    export("perfetto", &[&fixtures], &out);
    let v = py_check("check_perfetto.py", &[out.to_str().unwrap()]);
    // the directory holds two dumps (named memscope_dump_*) of two processes each; baseline.csv
    // is not named as a dump and is not picked up
    assert_eq!(v["processes"].as_object().unwrap().len(), 4, "{v}");
    let names = v["counters"].as_object().unwrap();
    assert!(
        names.keys().all(|k| !k.contains("N/A")),
        "no counter without a device: {names:?}"
    );
    // The 2025 format's HAL rows carry no `used` and their FREE rows no device: the counter
    // is the live bytes, the FREE counted on its block's device. Replay pid 2523738's rows
    // (synthetic pid 1: its first file) independently.
    let rows = read_csv(&fixtures.join("memscope_dump_20250428113810.csv"));
    let mut live: std::collections::HashMap<String, i64> = Default::default();
    let mut series = Vec::new();
    for r in rows
        .iter()
        .filter(|r| r["Process Id"] == "2523738" && r["Event Type"] == "HAL")
    {
        let a = attrs(r);
        match (r["Event"].as_str(), r["Device Id"].as_str()) {
            ("MALLOC", "0") => {
                live.insert(a["addr"].clone(), a["size"].parse().unwrap());
            }
            ("FREE", _) => {
                if live.remove(&a["addr"]).is_none() {
                    continue;
                }
            }
            _ => continue,
        }
        series.push(live.values().sum::<i64>());
    }
    series.dedup();
    let got: Vec<i64> = v["counters"]["1/NPU0 HAL allocated"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s[1].as_i64().unwrap())
        .collect();
    assert_eq!(got, series);
}

#[test]
fn perfetto_marks_oom_and_system_rows_as_instants() {
    let d = tempfile::tempdir().unwrap();
    let mut p = Proc::new(99, 1_767_225_600_000_000_000);
    p.row("SYSTEM", "ACL_INIT", "", "N/A", None, "", "", "");
    p.row("MSTX", "Mark", "checkpoint saved", "0", None, "", "", "");
    p.row(
        "SNAPSHOT",
        "SNAPSHOT",
        "OOM_Snapshot",
        "0",
        None,
        "{reserved:1048576,allocated:8192,total:67108864,free:1024}",
        "",
        "",
    );
    p.row("SYSTEM", "ACL_FINI", "", "N/A", None, "", "", "");
    let run = p.write_layout(d.path());
    let out = d.path().join("t.pftrace");
    export("perfetto", &[&run], &out);
    let v = py_check("check_perfetto.py", &[out.to_str().unwrap()]);
    assert_eq!(
        v["instants"]["1/msTX marks"],
        serde_json::json!(["ACL_INIT", "checkpoint saved", "OOM on NPU0", "ACL_FINI"]),
        "{v}"
    );
}

#[test]
fn export_shows_a_progress_bar_on_a_terminal_and_nothing_on_a_pipe() {
    let d = tempfile::tempdir().unwrap();
    let mut p = Proc::new(5, 1_767_225_600_000_000_000);
    for k in 0..20_000u64 {
        let id = p.malloc(
            "PTA",
            "0",
            0x1000 + k * 8192,
            4096,
            Some(1 << 30),
            "PTA",
            "",
            "",
        );
        p.free(
            "PTA",
            "0",
            id,
            0x1000 + k * 8192,
            4096,
            Some(1 << 30),
            false,
        );
    }
    let dump = d.path().join("big.csv");
    p.write_file(&dump);
    // `script` gives the command a terminal (util-linux, in every Debian system)
    let out = d.path().join("a.pftrace");
    let cmd = format!(
        "{} export --to perfetto {} -o {}",
        memscope_bin().display(),
        dump.display(),
        out.display()
    );
    let o = std::process::Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .env("MEMSCOPE_PROGRESS_DELAY_MS", "0")
        .output()
        .expect("run script(1)");
    let tty = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{tty}");
    assert!(
        tty.contains("perfetto: rank 0 pid 5") && tty.contains('%'),
        "a bar on the terminal: {tty:?}"
    );
    let out2 = d.path().join("b.pftrace");
    let o = std::process::Command::new(memscope_bin())
        .args([
            "export",
            "--to",
            "perfetto",
            dump.to_str().unwrap(),
            "-o",
            out2.to_str().unwrap(),
        ])
        .env("MEMSCOPE_PROGRESS_DELAY_MS", "0")
        .output()
        .unwrap();
    assert!(o.status.success());
    assert!(
        o.stderr.is_empty(),
        "no bar on a pipe: {:?}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn export_never_writes_through_a_symbolic_link() {
    // issue 17 M1 for issue 15's writers: a link as a folder of -o, for a file output (the
    // trace) and a directory output (the Parquet dataset), is refused and nothing is written
    // where it points
    let d = tempfile::tempdir().unwrap();
    let mut p = Proc::new(5, 1_767_225_600_000_000_000);
    let id = p.malloc("PTA", "0", 0x1000, 4096, Some(1 << 20), "PTA", "", "");
    p.free("PTA", "0", id, 0x1000, 4096, Some(1 << 20), false);
    let dump = d.path().join("one.csv");
    p.write_file(&dump);
    let real = d.path().join("real");
    std::fs::create_dir(&real).unwrap();
    let link = d.path().join("link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    for (to, out) in [
        ("perfetto", link.join("t.pftrace")),
        ("parquet", link.join("dataset")),
    ] {
        let o = memscope(&[
            "export",
            "--to",
            to,
            dump.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ]);
        let err = fails(&o);
        assert!(err.contains("symbolic link"), "{to}: {err}");
    }
    assert_eq!(
        std::fs::read_dir(&real).unwrap().count(),
        0,
        "nothing written"
    );
}

/// A PTA weight tagged after its MALLOC (a MEMORY_OWNER row) and an activation of a module.
fn tagged_process() -> Proc {
    let mut p = Proc::new(7, 1_000_000);
    p.malloc("PTA", "0", 0x10, 100, Some(1000), "", "", "");
    let act = p.malloc(
        "PTA",
        "0",
        0x200,
        50,
        Some(1000),
        "PTA@activation@m.fc1",
        "",
        "",
    );
    p.row(
        "SYSTEM",
        "MEMORY_OWNER",
        "",
        "0",
        Some(0x10),
        "{allocation_id:1,addr:0x0000000000000010,size:100,pool:PTA,owner:PTA@weight}",
        "",
        "",
    );
    p.free("PTA", "0", act, 0x200, 50, Some(1000), false);
    p
}

#[test]
fn perfetto_has_a_counter_per_role_and_a_memory_owner_row_moves_its_block() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("run");
    tagged_process().write_layout(&root);
    let out = dir.path().join("roles.pftrace");
    export("perfetto", &[&root], &out);
    let v = py_check("check_perfetto.py", &[out.to_str().unwrap()]);
    let c = &v["counters"];
    let values = |track: &str| -> Vec<i64> {
        c[track]
            .as_array()
            .unwrap_or_else(|| panic!("no {track} in {c}"))
            .iter()
            .map(|s| s[1].as_i64().unwrap())
            .collect()
    };
    assert_eq!(values("1/NPU0 PTA activation"), [50, 0]);
    assert_eq!(
        values("1/NPU0 PTA weight"),
        [100],
        "moved from temp by MEMORY_OWNER"
    );
    assert!(
        c.get("1/NPU0 PTA temp").is_none(),
        "temp is the rest of allocated"
    );
}

#[test]
fn perfetto_sums_python_objects_by_the_line_that_allocated_them() {
    let script = repo_root().join("tests/python/pymem_kept_lines.py");
    let run = memscope_run(
        &["--adapters", "pymem", "--call-stack", "python:8"],
        &[
            memscope_tests::python3().to_str().unwrap(),
            script.to_str().unwrap(),
        ],
        &[("PYTHONDONTWRITEBYTECODE", "1")],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let out = run.out.path().join("lines.pftrace");
    export("perfetto", &[run.out.path()], &out);
    let v = py_check("check_perfetto.py", &[out.to_str().unwrap()]);
    let counters = v["counters"].as_object().unwrap();
    let (name, series) = counters
        .iter()
        .find(|(k, _)| k.ends_with("pymem_kept_lines.py(6): fill"))
        .unwrap_or_else(|| panic!("no line track in {:?}", counters.keys()));
    assert!(name.contains("host PYMEM @ "), "{name}");
    let last = series.as_array().unwrap().last().unwrap()[1]
        .as_i64()
        .unwrap();
    assert!(last >= 5000 * 140, "{name}: {last} bytes live at the end");
}
