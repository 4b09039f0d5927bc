//! Issue 15: `memscope export --to memory-viz` — PyTorch memory snapshots that Python's
//! `pickle` loads, that use only the opcodes of the viewer's JavaScript unpickler, and that keep
//! the viewer's rules (`tests/export/check_memory_viz.py`).

mod export_common;

use export_common::*;
use memscope_tests::*;
use std::path::{Path, PathBuf};

const C_ALLOC: &str = "npu_alloc at /pta/alloc.cpp:20\nmain in /usr/bin/python3";
const PY_FWD: &str = "train.py(10): forward\ntrain.py(30): main";

/// A small run of one process on two NPUs: device 0 with HAL reservations holding PTA blocks,
/// an OOM and msMemScope's closing shadow FREEs; device 1 with PTA blocks only (no
/// reservations), a FREE of a block allocated before the trace and repeated call stacks.
fn small_run(root: &Path) -> PathBuf {
    let mut p = Proc::new(777, 1_767_225_600_000_000_000);
    let seg = 0x1000_0000;
    p.row("SYSTEM", "ACL_INIT", "", "N/A", None, "", "", "");
    let hal = p.malloc(
        "HAL",
        "0",
        seg,
        1 << 20,
        None,
        "CANN@RUNTIME",
        "",
        "halMemAlloc at /drv/hal.c:10",
    );
    p.row(
        "MSTX",
        "Range_start",
        "step start",
        "0",
        None,
        "{range_id:1}",
        "",
        "",
    );
    let a = p.malloc(
        "PTA",
        "0",
        seg,
        4096,
        Some(1 << 20),
        "PTA@model",
        PY_FWD,
        C_ALLOC,
    );
    let b = p.malloc(
        "PTA",
        "0",
        seg + 4096,
        8192,
        Some(1 << 20),
        "PTA@model",
        PY_FWD,
        C_ALLOC,
    );
    p.free("PTA", "0", a, seg, 4096, Some(1 << 20), false);
    p.row(
        "SNAPSHOT",
        "SNAPSHOT",
        "OOM_Snapshot",
        "0",
        None,
        "{reserved:1048576,max_reserved:1048576,allocated:8192,max_allocated:12288,total:67108864,free:1024,device_rate:99.998474,reserved_rate:0.781250}",
        "",
        "",
    );
    p.row(
        "OOM_DETAIL",
        "OOM_TRIGGER",
        "OOM_Trigger",
        "0",
        None,
        "{func:halMemAlloc,req_size:1073741824,flag:0}",
        "",
        "",
    );
    let dev1 = 0x2000_0000;
    let c = p.malloc(
        "PTA",
        "1",
        dev1,
        65536,
        Some(2 << 20),
        "PTA",
        PY_FWD,
        C_ALLOC,
    );
    p.free("PTA", "1", 99, dev1 + 0x10_0000, 512, Some(2 << 20), false);
    let d = p.malloc("PTA", "1", dev1 + 65536, 1024, Some(2 << 20), "", "", "");
    p.free("PTA", "1", c, dev1, 65536, Some(2 << 20), false);
    p.row(
        "MSTX",
        "Range_end",
        "step start",
        "0",
        None,
        "{range_id:1}",
        "",
        "",
    );
    p.free("PTA", "0", b, seg + 4096, 8192, Some(1 << 20), true);
    p.free("PTA", "1", d, dev1 + 65536, 1024, Some(2 << 20), true);
    p.free("HAL", "0", hal, seg, 1 << 20, None, true);
    p.row("SYSTEM", "ACL_FINI", "", "N/A", None, "", "", "");
    p.write_layout(root)
}

#[test]
fn memory_viz_golden_file_of_a_small_synthetic_run() {
    let d = tempfile::tempdir().unwrap();
    let run = small_run(d.path());
    let out = d.path().join("snap.pickle");
    export("memory-viz", &[&run], &out);
    let got = std::fs::read(&out).unwrap();
    let golden = repo_root().join("tests/golden/memory_viz_small.pickle");
    let want = std::fs::read(&golden).unwrap_or_default();
    if got != want {
        let keep =
            std::env::temp_dir().join(format!("memory_viz_small.{}.pickle", std::process::id()));
        std::fs::write(&keep, &got).unwrap();
        panic!(
            "the snapshot differs from {}; if the change is intended: cp {} {}",
            golden.display(),
            keep.display(),
            golden.display()
        );
    }
}

#[test]
fn memory_viz_snapshot_loads_with_pickle_uses_only_the_viewers_opcodes_and_keeps_its_rules() {
    let d = tempfile::tempdir().unwrap();
    let run = small_run(d.path());
    let out = d.path().join("snap.pickle");
    let stdout = export("memory-viz", &[&run], &out);
    assert!(stdout.contains("1 process(es)"), "{stdout}");
    let v = py_check("check_memory_viz.py", &[out.to_str().unwrap()]);
    // device 0: segment_alloc, alloc, alloc, free_requested, free_completed, oom, snapshot
    // device 1: alloc, free_completed (allocated before the trace), alloc, free pair, snapshot
    assert_eq!(v["entries"], serde_json::json!([7, 6]), "{v}");
    let actions: Vec<&str> = v["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    for a in [
        "segment_alloc",
        "alloc",
        "free_requested",
        "free_completed",
        "oom",
        "snapshot",
    ] {
        assert!(actions.contains(&a), "{a} in {actions:?}");
    }
    let cats: Vec<&str> = v["categories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert!(
        cats.contains(&"unknown") && cats.contains(&"PTA@model"),
        "{cats:?}"
    );
    assert_eq!(
        v["allocator_settings"]["segments_device_0"], "reservations",
        "device 0's HAL blocks hold its pool blocks: {v}"
    );
    assert_eq!(
        v["allocator_settings"]["segments_device_1"], "synthetic",
        "device 1 has no reservations: PyTorch's fallback segment: {v}"
    );
    // the HAL segment and the synthetic one, both still live (shadow FREEs end nothing)
    assert_eq!(v["segments"], 2, "{v}");
    assert!(
        v["memo_gets"].as_u64().unwrap() > 20,
        "repeated values memoized: {v}"
    );
}

#[test]
fn memory_viz_memoizes_repeated_frame_lists() {
    let d = tempfile::tempdir().unwrap();
    let run = small_run(d.path());
    let out = d.path().join("snap.pickle");
    export("memory-viz", &[&run], &out);
    let bytes = std::fs::read(&out).unwrap();
    let count = |needle: &[u8]| bytes.windows(needle.len()).filter(|w| *w == needle).count();
    // the same stack on three allocations (and their frees): each frame written once
    assert_eq!(count(b"/pta/alloc.cpp"), 1);
    assert_eq!(count(b"forward"), 1);
    let v = py_check("check_memory_viz.py", &[out.to_str().unwrap()]);
    assert!(
        v["frames"].as_u64().unwrap() >= 12,
        "frames on every entry of those blocks: {v}"
    );
}

fn demo_run(adapters: &str) -> Run {
    let run = memscope_run(
        &["--adapters", adapters, "--call-stack", "c:8"],
        &[
            "python3",
            repo_root()
                .join("examples/sim-npu/train.py")
                .to_str()
                .unwrap(),
            "--steps",
            "4",
        ],
        &[("SIM_NPU_DIR", sim_npu_dir().to_str().unwrap())],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    run
}

#[test]
fn memory_viz_of_the_demo_run_uses_its_hal_reservations_as_segments() {
    let run = demo_run("pta,hal,mstx,acl");
    let out = run.out.path().join("demo.pickle");
    export("memory-viz", &[run.out.path()], &out);
    let v = py_check("check_memory_viz.py", &[out.to_str().unwrap()]);
    assert_eq!(
        v["allocator_settings"]["segments_device_0"], "reservations",
        "{v}"
    );
    assert!(v["entries"][0].as_u64().unwrap() > 50, "{v}");
    assert!(v["segments"].as_u64().unwrap() >= 1, "{v}");
}

#[test]
fn memory_viz_falls_back_to_a_synthetic_segment_without_reservations() {
    let run = demo_run("pta,mstx");
    let out = run.out.path().join("demo.pickle");
    let stdout = export("memory-viz", &[run.out.path()], &out);
    assert!(stdout.contains("demo.pickle"), "{stdout}");
    let v = py_check("check_memory_viz.py", &[out.to_str().unwrap()]);
    assert_eq!(
        v["allocator_settings"]["segments_device_0"], "synthetic",
        "{v}"
    );
    assert_eq!(v["segments"], 1, "{v}");
}

#[test]
fn memory_viz_writes_one_snapshot_per_process_of_a_multi_rank_tree() {
    let d = tempfile::tempdir().unwrap();
    for r in 0..3u32 {
        let mut p = Proc::new(500 + r, 1_767_225_600_000_000_000);
        let dev = r.to_string();
        let base = 0x4000_0000 + u64::from(r) * 0x100_0000;
        let id = p.malloc(
            "PTA",
            &dev,
            base,
            1024 * (u64::from(r) + 1),
            Some(1 << 20),
            "PTA",
            "",
            "",
        );
        p.free(
            "PTA",
            &dev,
            id,
            base,
            1024 * (u64::from(r) + 1),
            Some(1 << 20),
            false,
        );
        p.write_layout(&d.path().join("run"));
    }
    let out = d.path().join("snaps");
    let stdout = export("memory-viz", &[&d.path().join("run")], &out);
    assert!(stdout.contains("3 process(es)"), "{stdout}");
    for r in 0..3u32 {
        let f = out.join(format!("rank{r}_pid{}.pickle", 500 + r));
        let v = py_check("check_memory_viz.py", &[f.to_str().unwrap()]);
        let entries = v["entries"].as_array().unwrap();
        assert_eq!(
            entries.len() as u32,
            r + 1,
            "device_traces up to the rank's NPU: {v}"
        );
        assert_eq!(entries[r as usize], 4, "alloc, free pair, snapshot: {v}");
    }
}

#[test]
fn export_refuses_an_existing_output_and_bad_inputs_with_one_line() {
    let d = tempfile::tempdir().unwrap();
    let run = small_run(d.path());
    let out = d.path().join("snap.pickle");
    std::fs::write(&out, b"keep me").unwrap();
    let err = fails(&memscope(&[
        "export",
        "--to",
        "memory-viz",
        run.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]));
    assert!(
        err.contains("snap.pickle") && err.contains("exists"),
        "{err}"
    );
    assert_eq!(
        std::fs::read(&out).unwrap(),
        b"keep me",
        "nothing overwritten"
    );

    let missing = d.path().join("nope");
    let err = fails(&memscope(&[
        "export",
        "--to",
        "perfetto",
        missing.to_str().unwrap(),
        "-o",
        "x",
    ]));
    assert!(err.contains("nope"), "{err}");

    let empty = d.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let err = fails(&memscope(&[
        "export",
        "--to",
        "perfetto",
        empty.to_str().unwrap(),
        "-o",
        "x",
    ]));
    assert!(
        err.contains("empty") && err.contains("no dump files"),
        "{err}"
    );

    let bad = d.path().join("bad.csv");
    std::fs::write(
        &bad,
        format!("{HEADER}\n1,MALLOC,PTA,N/A,notatime,1,1,0,0x1,,,\n"),
    )
    .unwrap();
    let o = d.path().join("bad.pftrace");
    let err = fails(&memscope(&[
        "export",
        "--to",
        "perfetto",
        bad.to_str().unwrap(),
        "-o",
        o.to_str().unwrap(),
    ]));
    assert!(err.contains("bad.csv:2"), "file and line named: {err}");
    assert!(!o.exists(), "no output from a failed export");
    let leftovers: Vec<_> = std::fs::read_dir(d.path())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains(".tmp"))
        .collect();
    assert!(
        leftovers.is_empty(),
        "no temporary files left: {leftovers:?}"
    );

    let err = fails(&memscope(&[
        "export",
        "--to",
        "svg",
        run.to_str().unwrap(),
        "-o",
        "x",
    ]));
    assert!(err.contains("svg"), "{err}");
}

#[test]
fn memory_viz_leaves_out_rows_it_cannot_draw_and_says_so() {
    let d = tempfile::tempdir().unwrap();
    let mut p = Proc::new(88, 1_767_225_600_000_000_000);
    let pta = p.malloc(
        "PTA",
        "0",
        0x1000_0000,
        1 << 20,
        Some(2 << 20),
        "PTA",
        "",
        "",
    );
    // an ATB block carved out of the live PTA block: cannot be drawn next to it
    let atb = p.malloc("ATB", "0", 0x1000_1000, 4096, Some(1 << 20), "ATB", "", "");
    p.free("ATB", "0", atb, 0x1000_1000, 4096, Some(1 << 20), false);
    // the PTA block allocated again without a FREE: the stale one is replaced
    p.malloc(
        "PTA",
        "0",
        0x1000_0000,
        1 << 20,
        Some(2 << 20),
        "PTA",
        "",
        "",
    );
    p.malloc(
        "PTA",
        "0",
        0x1000_0000 + (1 << 20),
        0,
        Some(2 << 20),
        "PTA",
        "",
        "",
    );
    let _ = pta;
    let run = p.write_layout(d.path());
    let out = d.path().join("s.pickle");
    let o = memscope(&[
        "export",
        "--to",
        "memory-viz",
        run.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let err = String::from_utf8_lossy(&o.stderr);
    for want in [
        "synthetic segment",
        "1 block(s) re-allocated without a FREE replaced",
        "1 block(s) inside another pool's live block left out",
        "1 zero-byte allocation(s) left out",
    ] {
        assert!(err.contains(want), "{want:?} in {err}");
    }
    let v = py_check("check_memory_viz.py", &[out.to_str().unwrap()]);
    // alloc, (free_requested, free_completed, alloc) for the replaced block, snapshot
    assert_eq!(v["entries"], serde_json::json!([5]), "{v}");
}

#[test]
fn msmemscope_fixture_dumps_export_to_snapshots_the_viewer_accepts() {
    let fixtures = repo_root().join("../shared/fixtures/msmemscope");
    if !fixtures.is_dir() {
        eprintln!("skipped: {} is absent", fixtures.display());
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("snaps");
    let stdout = export("memory-viz", &[&fixtures], &out);
    assert!(
        stdout.contains("4 process(es)"),
        "two dumps of two processes each: {stdout}"
    );
    let mut n = 0;
    walk(&out, &mut |f| {
        let v = py_check("check_memory_viz.py", &[f.to_str().unwrap()]);
        assert!(
            v["entries"]
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e.as_u64().unwrap() > 10),
            "{v}"
        );
        n += 1;
    });
    assert_eq!(n, 4);
}

#[test]
fn a_block_s_frames_start_with_the_first_frame_of_the_users_code() {
    // issue 23: Python over C when both were recorded, so the viewer names the user's line
    let d = tempfile::tempdir().unwrap();
    let mut p = Proc::new(778, 1_767_225_600_000_000_000);
    let cpython =
        "_PyObject_Malloc at Objects/obmalloc.c:1998\ntype_call at Objects/typeobject.c:1134\n";
    let native = "grow_arena at /srv/app/arena.c:40\nmain at /srv/app/main.c:9\n";
    p.malloc("PTA", "0", 0x1000, 4096, Some(4096), "PTA", PY_FWD, cpython);
    p.malloc("PTA", "0", 0x3000, 4096, Some(8192), "PTA", "", native);
    let run = p.write_layout(d.path());
    let out = d.path().join("snap.pickle");
    export("memory-viz", &[&run], &out);
    let o = std::process::Command::new(python())
        .args([
            "-c",
            "import pickle, sys\n\
             s = pickle.load(open(sys.argv[1], 'rb'))\n\
             for t in s['device_traces'][0]:\n\
             \x20   if t['action'] == 'alloc': print(t['frames'][0]['name'])",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    let names: Vec<String> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(names, ["forward", "grow_arena"]);
}
