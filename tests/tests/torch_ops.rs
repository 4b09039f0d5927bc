//! Issue 13 on real torch (CPU): Aten op launches (`ATEN_START`/`ATEN_END`) and ACCESS rows of
//! a small model's forward and backward, CPU tensors (HOST rows on `cpu`), and memory watch —
//! the watch checksums change exactly at the operator that overwrites the watched memory
//! (Python API on a tensor, `--watch` from the command line, and an address range of sim-npu
//! device memory dumped through the runtime's `aclrtMemcpy`).
//!
//! torch comes from PyPI: `.ci/run` installs it into a venv and sets `MEMSCOPE_TORCH_PYTHON`;
//! without it, `python3` must import torch, else these tests fail saying so.

use memscope_tests::{
    attrs, memscope_run, repo_root, select, sim_npu_dir, torch_python, walk, Row, Run,
};

fn run(args: &[&str], job: &[&str]) -> Run {
    let py = torch_python();
    let script = repo_root().join("tests/python/torch_job.py");
    let mut prog = vec![py.to_str().unwrap(), script.to_str().unwrap()];
    prog.extend_from_slice(job);
    let mut a = vec!["-q"];
    a.extend_from_slice(args);
    let r = memscope_run(
        &a,
        &prog,
        &[
            ("PYTHONPATH", repo_root().join("python").to_str().unwrap()),
            ("PYTHONDONTWRITEBYTECODE", "1"),
            (
                "MEMSCOPE_CLI",
                memscope_tests::memscope_bin().to_str().unwrap(),
            ),
            ("SIM_NPU_DIR", sim_npu_dir().to_str().unwrap()),
        ],
    );
    assert_eq!(
        r.code(),
        0,
        "stdout:\n{}\nstderr:\n{}",
        r.stdout(),
        r.stderr()
    );
    r
}

fn names(rows: &[Row], et: &str) -> Vec<String> {
    select(rows, "OP_LAUNCH", et)
        .iter()
        .map(|r| r["Name"].clone())
        .collect()
}

#[test]
fn aten_op_launches_and_access_rows_of_a_forward_and_backward_have_right_shapes_and_dtypes() {
    let r = run(
        &[
            "--events",
            "alloc,free,launch,access",
            "--device",
            "npu,cpu",
            "--call-stack",
            "python:8",
        ],
        &["model"],
    );
    let rows = r.rows();
    let starts = names(&rows, "ATEN_START");
    let ends = names(&rows, "ATEN_END");
    let mut s = starts.clone();
    let mut e = ends.clone();
    s.sort();
    e.sort();
    assert_eq!(s, e, "every ATEN_START has its ATEN_END");
    for op in [
        "torch._ops.aten.addmm.default",              // forward Linear
        "torch._ops.aten.relu.default",               // forward ReLU
        "torch._ops.aten.threshold_backward.default", // backward ReLU
        "torch._ops.aten.mm.default",                 // backward Linear (weight grads)
    ] {
        assert!(starts.iter().any(|n| n == op), "{op} in {starts:?}");
    }
    // x (2, 4) float32 is read by the first addmm; its output (2, 3) is written.
    let acc = |et: &str, shape: &str| -> Vec<&Row> {
        select(&rows, "ACCESS", et)
            .into_iter()
            .filter(|r| r["Name"] == "torch._ops.aten.addmm.default")
            .filter(|r| attrs(r).get("shape").map(String::as_str) == Some(shape))
            .collect()
    };
    let x = acc("READ", "torch.Size([2, 4])");
    assert!(!x.is_empty(), "x read by addmm");
    let a = attrs(x[0]);
    assert_eq!(a["dtype"], "torch.float32");
    assert_eq!(a["size"], "32");
    assert_eq!(a["type"], "HOST");
    assert_eq!(x[0]["Device Id"], "cpu");
    assert!(
        a.contains_key("allocation_id"),
        "the access names its CPU tensor block: {a:?}"
    );
    assert!(
        !acc("WRITE", "torch.Size([2, 3])").is_empty(),
        "addmm writes (2, 3)"
    );
    // CPU tensors: HOST MALLOC/FREE on cpu with a running total and the Python stack.
    let m = select(&rows, "MALLOC", "HOST");
    assert!(!m.is_empty());
    assert!(m.iter().all(|r| r["Device Id"] == "cpu"));
    assert!(attrs(m[0]).contains_key("total"));
    assert!(
        m.iter()
            .any(|r| r["Call Stack(Python)"].contains("torch_job.py(")
                && r["Call Stack(Python)"].contains("): model_step")),
        "a CPU tensor row names model_step"
    );
    assert!(!select(&rows, "FREE", "HOST").is_empty());
    // memscope's own hook frames are not in the stacks.
    assert!(rows
        .iter()
        .all(|r| !r["Call Stack(Python)"].contains("memscope_torch_hooks")));
}

#[test]
fn without_level_op_or_access_no_aten_rows_are_written() {
    let r = run(
        &["--events", "alloc,free", "--device", "npu,cpu"],
        &["model"],
    );
    let rows = r.rows();
    assert!(rows
        .iter()
        .all(|r| r["Event"] != "OP_LAUNCH" && r["Event"] != "ACCESS"));
    assert!(
        !select(&rows, "MALLOC", "HOST").is_empty(),
        "CPU tensors still"
    );
    let r = run(&["--events", "alloc,free,launch"], &["model"]);
    let rows = r.rows();
    assert!(!names(&rows, "ATEN_START").is_empty());
    assert!(rows.iter().all(|r| r["Event"] != "ACCESS"));
    assert!(
        select(&rows, "MALLOC", "HOST").is_empty(),
        "no cpu without --device cpu"
    );
}

/// (tensor info, checksum) rows of every watch checksum file under the run.
fn sums(r: &Run) -> Vec<(String, String)> {
    let mut v = Vec::new();
    walk(r.out.path(), &mut |p| {
        let n = p.file_name().unwrap().to_string_lossy().into_owned();
        if n.starts_with("watch_dump_data_check_sum_") {
            let text = std::fs::read_to_string(p).unwrap();
            let mut lines = text.lines();
            assert_eq!(lines.next(), Some("Tensor info,Check data sum"));
            for l in lines {
                let (a, b) = l.rsplit_once(',').unwrap();
                assert!(
                    b.len() == 16 && b.bytes().all(|c| c.is_ascii_hexdigit()),
                    "{l}"
                );
                v.push((a.to_owned(), b.to_owned()));
            }
        }
    });
    v
}

/// The one `<op>_<n>` whose before and after checksums differ.
fn changed(sums: &[(String, String)]) -> Vec<String> {
    let mut out = Vec::new();
    for (info, before) in sums {
        if let Some(op) = info.strip_suffix("_before.bin") {
            let after = format!("{op}_after.bin");
            if let Some((_, a)) = sums.iter().find(|(i, _)| *i == after) {
                if a != before {
                    out.push(op.to_owned());
                }
            }
        }
    }
    out
}

#[test]
fn the_watch_api_finds_the_op_that_overwrites_a_watched_tensor() {
    let r = run(&["--device", "npu,cpu"], &["watch-api"]);
    let s = sums(&r);
    assert!(s.len() >= 8, "{s:?}");
    let c = changed(&s);
    assert_eq!(c.len(), 1, "{s:?}");
    assert!(
        c[0].contains("/torch._ops.aten.fill_.Scalar_0-buf"),
        "{c:?}"
    );
}

#[test]
fn the_watch_option_finds_the_op_that_overwrites_the_start_ops_output() {
    let r = run(
        &[
            "--device",
            "npu,cpu",
            "--watch",
            "aten.add.Tensor,aten.sum.default",
        ],
        &["watch-cli"],
    );
    let s = sums(&r);
    let c = changed(&s);
    assert_eq!(c.len(), 1, "{s:?}");
    assert!(
        c[0].contains("/torch._ops.aten.mul_.Tensor_0-aten.add.Tensor_0"),
        "{c:?}"
    );
    // the watch starts with the add's after dump and stops after the sum's
    assert!(s[0]
        .0
        .ends_with("/torch._ops.aten.add.Tensor_0-aten.add.Tensor_0_after.bin"));
    let end = s
        .iter()
        .position(|(i, _)| i.contains("aten.sum.default_0-aten.add.Tensor_0_after"))
        .expect("the end op's after dump");
    assert!(
        s[end + 1..]
            .iter()
            .all(|(i, _)| i.contains("aten.add.Tensor_1") || i.contains("_local_scalar_dense")),
        "nothing between the end and a new start: {s:?}"
    );
}

#[test]
fn full_content_watch_writes_the_bytes_of_each_dump() {
    let r = run(
        &[
            "--device",
            "npu,cpu",
            "--watch",
            "aten.add.Tensor,aten.sum.default,full-content",
        ],
        &["watch-cli"],
    );
    let mut bins = Vec::new();
    walk(r.out.path(), &mut |p| {
        if p.extension().is_some_and(|e| e == "bin") {
            bins.push(p.to_path_buf());
        }
    });
    let get = |needle: &str| -> Vec<u8> {
        let p = bins
            .iter()
            .find(|p| p.to_string_lossy().contains(needle))
            .unwrap_or_else(|| panic!("{needle} in {bins:?}"));
        assert!(!p.file_name().unwrap().to_string_lossy().contains('/'));
        std::fs::read(p).unwrap()
    };
    let f32s = |b: &[u8]| -> Vec<f32> {
        b.chunks(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect()
    };
    assert_eq!(
        f32s(&get("aten.mul_.Tensor_0-aten.add.Tensor_0_before")),
        vec![2.0; 8]
    );
    assert_eq!(
        f32s(&get("aten.mul_.Tensor_0-aten.add.Tensor_0_after")),
        vec![6.0; 8]
    );
    assert!(sums(&r).is_empty(), "no checksum file with full-content");
}

#[test]
fn watching_device_memory_dumps_it_through_the_runtime_memcpy() {
    let r = run(&[], &["watch-addr", sim_npu_dir().to_str().unwrap()]);
    let s = sums(&r);
    let c = changed(&s);
    assert_eq!(c.len(), 1, "{s:?}");
    assert!(
        c[0].contains("/torch._ops.aten.fill_.Scalar_0-devbuf"),
        "{c:?}"
    );
    let hex = memscope_wire::watch::crc64_hex;
    let crc = memscope_wire::watch::crc64;
    let before = s
        .iter()
        .find(|(i, _)| i.contains("fill_.Scalar_0-devbuf_before"))
        .unwrap();
    let after = s
        .iter()
        .find(|(i, _)| i.contains("fill_.Scalar_0-devbuf_after"))
        .unwrap();
    assert_eq!(
        before.1,
        hex(crc(&[0u8; 4096])),
        "4096 zero bytes copied out"
    );
    assert_eq!(
        after.1,
        hex(crc(&[5u8; 4096])),
        "4096 bytes of 5 after fill_"
    );
    assert!(
        before.0.starts_with("0_"),
        "a device-memory dump is named after device 0: {}",
        before.0
    );
}

#[test]
fn watching_cpu_memory_by_address_without_the_runtime_dumps_it_and_a_stray_address_is_refused() {
    // issue 27 item 8: no ACL runtime in the process, so the range is CPU memory, copied directly
    let r = run(&["--device", "npu,cpu"], &["watch-cpu"]);
    let s = sums(&r);
    let c = changed(&s);
    assert_eq!(c.len(), 1, "{s:?}");
    assert!(
        c[0].contains("/torch._ops.aten.fill_.Scalar_0-cpubuf"),
        "{c:?}"
    );
    assert!(
        c[0].starts_with("cpu_"),
        "a CPU-memory dump is named after cpu: {c:?}"
    );
    let hex = memscope_wire::watch::crc64_hex;
    let crc = memscope_wire::watch::crc64;
    let after = s
        .iter()
        .find(|(i, _)| i.contains("fill_.Scalar_0-cpubuf_after"))
        .unwrap();
    assert_eq!(after.1, hex(crc(&[5u8; 4096])));
    let out = r.stdout();
    let refused = out
        .lines()
        .find(|l| l.starts_with("refused: "))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        refused.contains("watch(0x8, length=4096)")
            && refused.contains("not memory of this process"),
        "{refused}"
    );
}
