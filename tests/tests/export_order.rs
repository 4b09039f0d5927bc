//! Issue 15: exports read rows in ID order whatever the order of the file. A dump written in
//! msMemScope's order (a block's rows when it dies) gives the same memory_viz snapshot, the
//! same Perfetto counters and slices and the same Parquet rows as the same dump in ID order
//! (memscope's order, streamed without sorting): the exporters start over when the reader
//! finds a row out of order.

mod export_common;

use export_common::*;
use memscope_tests::*;
use std::path::{Path, PathBuf};

/// A process with interleaved blocks on two pools, ops and marks; `sorted` picks the order.
fn job(root: &Path, sorted: bool) -> PathBuf {
    let mut p = Proc::new(4321, 1_767_225_600_000_000_000);
    p.row("SYSTEM", "ACL_INIT", "", "N/A", None, "", "", "");
    let seg = p.malloc(
        "HAL",
        "0",
        0x1000_0000,
        64 << 20,
        None,
        "CANN@RUNTIME",
        "",
        "",
    );
    let mut live = Vec::new();
    for k in 0..40u64 {
        p.row("OP_LAUNCH", "ATEN_START", "aten::mm", "0", None, "", "", "");
        let a = 0x1000_0000 + k * 0x10_0000;
        let id = p.malloc(
            "PTA",
            "0",
            a,
            4096 * (k + 1),
            Some(64 << 20),
            "PTA@model",
            "",
            "",
        );
        live.push((id, a, 4096 * (k + 1)));
        p.row(
            "KERNEL_LAUNCH",
            "KERNEL_LAUNCH",
            "mm_kernel",
            "0",
            None,
            "{streamId:1,taskId:1}",
            "",
            "",
        );
        if k % 3 == 0 {
            let (id, a, s) = live.remove(0);
            p.free("PTA", "0", id, a, s, Some(64 << 20), false);
        }
        p.row("OP_LAUNCH", "ATEN_END", "aten::mm", "0", None, "", "", "");
    }
    for (id, a, s) in live {
        p.free("PTA", "0", id, a, s, Some(64 << 20), false);
    }
    p.free("HAL", "0", seg, 0x1000_0000, 64 << 20, None, false);
    let p = if sorted { p } else { p.msmemscope_order() };
    p.write_layout(&root.join(if sorted { "sorted" } else { "msorder" }))
}

#[test]
fn exports_of_a_dump_out_of_id_order_equal_those_of_the_dump_in_id_order() {
    let d = tempfile::tempdir().unwrap();
    let sorted = job(d.path(), true);
    let shuffled = job(d.path(), false);
    let dump = |dir: &Path| dir.join("device_0/dump/memscope_dump_20260101000000.csv");
    assert_ne!(
        std::fs::read(dump(&sorted)).unwrap(),
        std::fs::read(dump(&shuffled)).unwrap(),
        "the two files differ in row order"
    );
    let out = |name: &str| d.path().join(name);

    export("memory-viz", &[&sorted], &out("a.pickle"));
    export("memory-viz", &[&shuffled], &out("b.pickle"));
    assert_eq!(
        std::fs::read(out("a.pickle")).unwrap(),
        std::fs::read(out("b.pickle")).unwrap(),
        "the same snapshot"
    );
    py_check("check_memory_viz.py", &[out("b.pickle").to_str().unwrap()]);

    export("perfetto", &[&sorted], &out("a.pftrace"));
    export("perfetto", &[&shuffled], &out("b.pftrace"));
    let a = py_check("check_perfetto.py", &[out("a.pftrace").to_str().unwrap()]);
    let b = py_check("check_perfetto.py", &[out("b.pftrace").to_str().unwrap()]);
    for k in ["packets", "counters", "slices", "instants", "flows"] {
        assert_eq!(a[k], b[k], "{k}");
    }
    assert_eq!(a["slices"]["1/NPU0 stream 1"], 40, "kernel launches: {a}");
    assert_eq!(a["slices"]["1/ops (tid 4321)"], 40, "ATen operators: {a}");
    assert_eq!(
        a["flows"], 40,
        "one flow from each operator to its kernel: {a}"
    );

    export("parquet", &[&sorted], &out("a"));
    export("parquet", &[&shuffled], &out("b"));
    let docs = repo_root().join("docs/export.md");
    let a = py_check(
        "query_parquet.py",
        &[
            docs.to_str().unwrap(),
            out("a").to_str().unwrap(),
            "--engines=duckdb,datafusion",
        ],
    );
    let b = py_check(
        "query_parquet.py",
        &[
            docs.to_str().unwrap(),
            out("b").to_str().unwrap(),
            "--engines=duckdb,datafusion",
        ],
    );
    assert_eq!(a["rows"], b["rows"]);
    assert_eq!(a["duckdb"], b["duckdb"]);
    let mut tmp = Vec::new();
    walk(&out("b"), &mut |f| {
        if !f.to_string_lossy().ends_with(".parquet") {
            tmp.push(f.to_path_buf());
        }
    });
    assert!(tmp.is_empty(), "only the final parts are left: {tmp:?}");
}

#[test]
fn exports_read_db_dumps_as_they_read_csv_dumps() {
    let script = repo_root().join("examples/sim-npu/train.py");
    let mut runs = Vec::new();
    for format in ["csv", "db"] {
        let run = memscope_run(
            &["--adapters", "pta,hal,mstx,acl", "--format", format],
            &["python3", script.to_str().unwrap(), "--steps", "3"],
            &[],
        );
        assert_eq!(run.code(), 0, "{}", run.stderr());
        assert!(!run.dumps(&format!(".{format}")).is_empty());
        runs.push(run);
    }
    let mut seen = Vec::new();
    for run in &runs {
        let out = run.out.path().join("x.pftrace");
        export("perfetto", &[run.out.path()], &out);
        let v = py_check("check_perfetto.py", &[out.to_str().unwrap()]);
        let snap = run.out.path().join("x.pickle");
        export("memory-viz", &[run.out.path()], &snap);
        let m = py_check("check_memory_viz.py", &[snap.to_str().unwrap()]);
        seen.push((
            v["slices"].clone(),
            v["instants"].clone(),
            m["entries"].clone(),
            m["actions"].clone(),
        ));
        let series = v["counters"]["1/NPU0 PTA allocated"].as_array().unwrap();
        assert!(series.len() > 10, "{v}");
    }
    assert_eq!(
        seen[0], seen[1],
        "the same tracks and entries from CSV and .db"
    );
}
