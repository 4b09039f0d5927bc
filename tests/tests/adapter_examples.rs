//! Issue 11: third-party adapters outside the workspace's built-in list — one in C
//! (`examples/adapter-c`), one in Rust on the SDK (`examples/adapter-rust`) — load through
//! `--adapter-path` and config.json "adapter_paths" when the process starts (the demo job never
//! calls msTX or the memscope API), and their own Event Types, owners and Attr keys land in the
//! dumps; a wrong-ABI adapter is refused with one line.

use memscope_tests::*;
use std::path::PathBuf;

/// `libdemo_pool.so` and the demo job linked with it.
fn demo_job() -> PathBuf {
    let dir = repo_root().join("examples/demo-pool");
    let lib = compile(&[&dir.join("demo_pool.c")], "libdemo_pool.so", &[], true);
    let libdir = lib.parent().unwrap().display().to_string();
    compile(
        &[&dir.join("demo_job.c")],
        "demo_job",
        &[
            &format!("-I{}", dir.display()),
            &format!("-L{libdir}"),
            &format!("-Wl,-rpath,{libdir}"),
            "-ldemo_pool",
        ],
        false,
    )
}

fn c_adapter() -> PathBuf {
    let src = repo_root().join("examples/adapter-c/demo_pool_adapter.c");
    compile(&[&src], "libdemo_pool_adapter.so", &[], true)
}

/// The same adapter on plugin ABI 1.2 (registered types, compact events).
fn c_compact_adapter() -> PathBuf {
    let src = repo_root().join("examples/adapter-c/demo_pool_compact.c");
    compile(&[&src], "libdemo_pool_compact.so", &[], true)
}

/// Host memory blocks (`Device::Cpu`) are written with `--device ...,cpu`, as msMemScope's.
/// Checks the demo job's rows of `event_type`: 4 blocks (3 weights freed, the kv cache kept),
/// owners from the pool's tags, the adapter's own `pool_tag` key.
fn check_demo_rows(run: &Run, event_type: &str) {
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let rows = run.rows();
    let m = select(&rows, "MALLOC", event_type);
    let f = select(&rows, "FREE", event_type);
    assert_eq!((m.len(), f.len()), (4, 3), "{}", run.stderr());
    let sizes: Vec<String> = m.iter().map(|r| attrs(r)["size"].clone()).collect();
    assert_eq!(sizes, ["1024", "2048", "3072", "4096"]);
    let a = attrs(m[0]);
    assert_eq!(a["owner"], format!("{event_type}@weights"));
    assert_eq!(a["pool_tag"], "weights");
    assert_eq!(m[0]["Device Id"], "cpu");
    let kv = attrs(m[3]);
    assert_eq!(kv["owner"], format!("{event_type}@kv_cache"));
    // a FREE carries its MALLOC's size and allocation id
    let fa = attrs(f[0]);
    assert_eq!(
        (fa["size"].as_str(), &fa["allocation_id"]),
        ("1024", &a["allocation_id"])
    );
}

#[test]
fn the_c_example_adapter_loads_via_adapter_path_at_process_start_and_its_rows_land_in_the_dump() {
    let (job, lib) = (demo_job(), c_adapter());
    let run = memscope_run(
        &[
            "--device",
            "npu,cpu",
            "--adapter-path",
            lib.to_str().unwrap(),
        ],
        &[job.to_str().unwrap(), "3"],
        &[],
    );
    check_demo_rows(&run, "DEMO_POOL");
}

#[test]
fn the_abi_1_2_c_example_adapter_emits_compact_events_that_give_the_same_rows() {
    let (job, lib) = (demo_job(), c_compact_adapter());
    let run = memscope_run(
        &[
            "--device",
            "npu,cpu",
            "--adapter-path",
            lib.to_str().unwrap(),
            "--call-stack",
            "c:8",
        ],
        &[job.to_str().unwrap(), "3"],
        &[],
    );
    check_demo_rows(&run, "DEMO_POOL_COMPACT");
    let rows = run.rows();
    let m = select(&rows, "MALLOC", "DEMO_POOL_COMPACT");
    // the per-event value: log2 of the size; the C stack asked for per event
    assert_eq!(attrs(m[0])["bucket"], "10");
    assert_eq!(attrs(m[3])["bucket"], "12");
    assert!(
        m[0]["Call Stack(C)"].contains("demo_job"),
        "{}",
        m[0]["Call Stack(C)"]
    );
}

#[test]
fn the_rust_sdk_example_adapter_loads_via_config_json_and_its_rows_land_in_the_dump() {
    let job = demo_job();
    let lib = build_adapter_example("adapter-rust", "demo_pool_adapter");
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("config.json");
    std::fs::write(
        &cfg,
        serde_json::json!({ "adapter_paths": [lib.to_str().unwrap()], "device": ["npu", "cpu"] })
            .to_string(),
    )
    .unwrap();
    let run = memscope_run(
        &["--config", cfg.to_str().unwrap()],
        &[job.to_str().unwrap(), "3"],
        &[],
    );
    check_demo_rows(&run, "DEMO_POOL_RS");
    // its init ran at process start and emitted its own mark
    let rows = run.rows();
    let marks: Vec<_> = rows
        .iter()
        .filter(|r| r["Event Type"] == "Mark" && r["Name"] == "demo_pool_rs started")
        .collect();
    assert_eq!(marks.len(), 1, "{}", run.stderr());
}

#[test]
fn a_wrong_abi_adapter_in_config_json_is_refused_with_one_line_before_launch() {
    let bad = compile(
        &[&repo_root().join("tests/plugins/bad_version_plugin.c")],
        "libbad_version_plugin.so",
        &[],
        true,
    );
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("config.json");
    std::fs::write(
        &cfg,
        serde_json::json!({ "adapter_paths": [bad.to_str().unwrap()] }).to_string(),
    )
    .unwrap();
    let touched = dir.path().join("launched");
    let o = std::process::Command::new(memscope_bin())
        .arg("run")
        .arg("--config")
        .arg(&cfg)
        .arg("-o")
        .arg(dir.path().join("out"))
        .arg("--")
        .arg("touch")
        .arg(&touched)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(
        err.contains("refusing adapter plugin") && err.contains("ABI version 2"),
        "{err}"
    );
    assert!(!touched.exists());
}

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

fn demo_case(
    name: &str,
    lib: &std::path::Path,
    event_type: &str,
    own_code: &str,
) -> compliance::Case {
    let job = demo_job().display().to_string();
    let lib = lib.display().to_string();
    compliance::Case {
        name: name.into(),
        on: s(&["--device", "npu,cpu", "--adapter-path", &lib]),
        off: s(&["--device", "npu,cpu"]),
        program: s(&[&job, "3"]),
        event_types: s(&[event_type]),
        own_code: Some(own_code.into()),
        fork_program: Some(s(&[&job, "3", "fork"])),
        flood: Some((s(&[&job, "100000"]), 200_001)),
        ..Default::default()
    }
}

#[test]
fn the_c_example_adapter_is_compliant() {
    let lib = c_adapter();
    compliance::assert_adapter_compliance(&demo_case(
        "demo_pool_c",
        &lib,
        "DEMO_POOL",
        "demo_pool_adapter.c",
    ));
}

#[test]
fn the_abi_1_2_c_example_adapter_is_compliant() {
    let lib = c_compact_adapter();
    compliance::assert_adapter_compliance(&demo_case(
        "demo_pool_compact",
        &lib,
        "DEMO_POOL_COMPACT",
        "demo_pool_compact.c",
    ));
}

#[test]
fn the_rust_sdk_example_adapter_is_compliant() {
    let lib = build_adapter_example("adapter-rust", "demo_pool_adapter");
    compliance::assert_adapter_compliance(&demo_case(
        "demo_pool_rs",
        &lib,
        "DEMO_POOL_RS",
        "adapter-rust/src/lib.rs",
    ));
}

#[test]
fn adapters_list_prints_the_built_ins_and_every_plugin_given_with_adapter_path() {
    let c = c_adapter();
    let rs = build_adapter_example("adapter-rust", "demo_pool_adapter");
    let o = std::process::Command::new(memscope_bin())
        .args(["adapters", "list", "--adapter-path"])
        .arg(&c)
        .arg("--adapter-path")
        .arg(&rs)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    for name in adapter_names() {
        assert!(
            out.lines().any(|l| l.starts_with(&format!("{name} "))),
            "{out}"
        );
    }
    for (name, lib) in [("demo_pool_c", &c), ("demo_pool_rs", &rs)] {
        let line = out
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("{name} missing: {out}"));
        assert!(
            line.contains("ABI 1.2") && line.contains(lib.to_str().unwrap()),
            "{line}"
        );
    }
    assert!(
        out.contains("symbols: demo_pool_alloc, demo_pool_free"),
        "{out}"
    );
    // a refused plugin: one line, exit 2
    let bad = compile(
        &[&repo_root().join("tests/plugins/bad_magic_plugin.c")],
        "libbad_magic_plugin.so",
        &[],
        true,
    );
    let o = std::process::Command::new(memscope_bin())
        .args(["adapters", "list", "--adapter-path"])
        .arg(&bad)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("bad magic"), "{err}");
}

#[test]
fn a_million_compact_events_give_a_million_rows_none_dropped_as_the_summary_counts() {
    let (job, lib) = (demo_job(), c_compact_adapter());
    let run = memscope_run(
        &[
            "--device",
            "npu,cpu",
            "--adapter-path",
            lib.to_str().unwrap(),
        ],
        &[job.to_str().unwrap(), "500000"],
        &[],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let rows = run.rows();
    let own = |e: &str| select(&rows, e, "DEMO_POOL_COMPACT").len();
    // 500 000 weights allocated and freed, and the kept kv cache
    assert_eq!((own("MALLOC"), own("FREE")), (500_001, 500_000));
    assert!(
        run.stderr().contains(&format!(
            "{} rows (MALLOC 500001, FREE 500000), 0 dropped",
            rows.len()
        )),
        "{}",
        run.stderr()
    );
}
