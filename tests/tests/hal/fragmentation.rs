//! Issue 25 on the HAL path: the caching allocator's OOMs judged fragmentation, true shortage
//! and other processes, online and offline; the fragmentation curve; one run of a shared folder.

use super::*;

/// Issue 25: `train.py --oom KIND` under `memscope run --analysis leaks,gap,oom`; exits with the
/// job's 1 (it dies of the OOM).
fn oom_scenario(kind: &str) -> Run {
    let train = repo_root().join("examples/sim-npu/train.py");
    let py = python3();
    let run = memscope_run(
        &["--analysis", "leaks,gap,oom"],
        &[py.to_str().unwrap(), train.to_str().unwrap(), "--oom", kind],
        &[("SIM_NPU_DIR", sim_npu_dir().to_str().unwrap())],
    );
    assert_eq!(
        run.code(),
        1,
        "the job dies of its OOM\nstdout: {}\nstderr: {}",
        run.stdout(),
        run.stderr()
    );
    run
}

/// `tests/python/frag_check.py` over a dump: the figures at its OOM, computed without memscope.
fn independent_figures(dump: &Path) -> serde_json::Value {
    let out = std::process::Command::new(python3())
        .arg(repo_root().join("tests/python/frag_check.py"))
        .arg(dump)
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("json")
}

fn analyze_fragmentation(args: &[&std::ffi::OsStr]) -> String {
    let out = std::process::Command::new(memscope_bin())
        .args(["analyze", "fragmentation"])
        .args(args)
        .output()
        .expect("memscope analyze fragmentation");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_caching_allocators_ooms_are_judged_fragmentation_true_shortage_and_other_processes_alike_online_and_offline(
) {
    let mib = |v: u64| v as f64 / 1_048_576.0;
    for (kind, verdict) in [
        ("fragmentation", "fragmentation"),
        ("shortage", "true shortage"),
        ("other-process", "held by other processes"),
    ] {
        let run = oom_scenario(kind);
        let dump = run.dumps(".csv").into_iter().next().expect("a dump");
        let f = independent_figures(&dump);
        let n = |k: &str| f[k].as_u64().unwrap_or_else(|| panic!("{k} in {f}"));
        let (r, free, ext, largest) = (n("request"), n("free"), n("extents"), n("largest"));
        let headline = format!(
            "asked {r} B ({:.2} MiB), free {free} B ({:.2} MiB) in {ext} extents, largest {largest} B ({:.2} MiB): {verdict}",
            mib(r),
            mib(free),
            mib(largest)
        );
        let others = n("total_mem") - n("free_mem") - n("process_hal");
        let device = format!("other processes {:.2} MiB", mib(others));
        assert_eq!(others > 0, kind == "other-process");
        // online, at the end of the run; offline from the dump (the request on its
        // OOM_TRIGGER row) and from the process directory (its capture)
        let proc_dir = dump.ancestors().nth(3).expect("process dir").to_path_buf();
        for (what, text) in [
            ("online", run.stdout() + &run.stderr()),
            ("dump", analyze_fragmentation(&[dump.as_os_str()])),
            ("capture", analyze_fragmentation(&[proc_dir.as_os_str()])),
        ] {
            assert!(
                text.contains(&headline) && text.contains(&device),
                "{kind}, {what}: expected {headline:?} and {device:?} in:\n{text}"
            );
        }
        match kind {
            "fragmentation" => assert_eq!((ext, largest, free), (6, 64 << 20, 384 << 20)),
            _ => assert_eq!((ext, largest), (1, 65 << 20)),
        }
    }
}

#[test]
fn the_fragmentation_curve_ends_on_the_figures_an_independent_computation_gives() {
    let run = oom_scenario("fragmentation");
    let dump = run.dumps(".csv").into_iter().next().expect("a dump");
    let f = independent_figures(&dump);
    let out = tempfile::tempdir().unwrap();
    let text = analyze_fragmentation(&[dump.as_os_str(), "-o".as_ref(), out.path().as_os_str()]);
    assert!(text.contains("fragmentation 0.8333"), "{text}");
    let mut curve = None;
    walk(out.path(), &mut |p| curve = Some(p.to_path_buf()));
    let rows = read_rows(&curve.expect("fragmentation_<ts>.csv"));
    let last = rows.last().expect("rows");
    for (col, key) in [
        ("Reserved(byte)", "reserved"),
        ("Allocated(byte)", "allocated"),
        ("Free(byte)", "free"),
        ("Free Extents", "extents"),
        ("Largest Free(byte)", "largest"),
    ] {
        assert_eq!(last[col], f[key].to_string(), "{col}");
    }
    assert_eq!(last["Fragmentation"], format!("{:.6}", 1.0 - 64.0 / 384.0));
    // reserved never falls while the segment lives; free grows as the 64 MiB blocks go
    assert!(rows
        .iter()
        .all(|r| r["Reserved(byte)"] == last["Reserved(byte)"]));
}

/// The rows of any CSV file, by header.
fn read_rows(path: &Path) -> Vec<Row> {
    let mut r = csv::Reader::from_path(path).expect("csv");
    let h = r.headers().expect("header").clone();
    r.records()
        .map(|rec| {
            let rec = rec.expect("row");
            h.iter()
                .zip(rec.iter())
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect()
        })
        .collect()
}

/// `memscope analyze fragmentation ARGS` run to its end: (exit code, stdout, stderr).
fn fragmentation_cmd(args: &[&std::ffi::OsStr]) -> (i32, String, String) {
    let o = std::process::Command::new(memscope_bin())
        .args(["analyze", "fragmentation"])
        .args(args)
        .output()
        .expect("memscope analyze fragmentation");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn fragmentation_takes_one_run_of_a_shared_folder_says_a_step_never_reached_and_warns_of_a_torn_capture(
) {
    let train = repo_root().join("examples/sim-npu/train.py");
    let out = tempfile::tempdir().unwrap();
    for _ in 0..2 {
        let o = std::process::Command::new(memscope_bin())
            .args(["run", "-q", "--adapters", "pta,mstx", "-o"])
            .arg(out.path())
            .arg("--")
            .args([
                python3().to_str().unwrap(),
                train.to_str().unwrap(),
                "--steps",
                "3",
            ])
            .env("SIM_NPU_DIR", sim_npu_dir())
            .output()
            .unwrap();
        assert!(o.status.success(), "{o:?}");
    }
    let pids = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|l| l.starts_with("==== Pool fragmentation (pid "))
            .map(str::to_owned)
            .collect()
    };
    // the newest run by default, the other on request; not both on one view (issue 23)
    let (code, newest, err) = fragmentation_cmd(&[out.path().as_os_str()]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("holds 2 runs") && err.contains("using run 2"),
        "{err}"
    );
    let (code, first, err) =
        fragmentation_cmd(&[out.path().as_os_str(), "--run".as_ref(), "1".as_ref()]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        (pids(&newest).len(), pids(&first).len()),
        (1, 1),
        "{newest}\n{first}"
    );
    assert_ne!(pids(&newest), pids(&first));
    // a request at a step the run never reached is answered, not left out
    let (code, text, err) = fragmentation_cmd(&[
        out.path().as_os_str(),
        "--request".as_ref(),
        "1MiB".as_ref(),
        "--at".as_ref(),
        "step:999".as_ref(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        text.contains("no verdict for the request of 1048576 B at step:999: step 999 never ended in this process (the last step was 3)"),
        "{text}"
    );
    // a capture cut short is read up to its last whole block, with a warning
    let mut caps = Vec::new();
    walk(out.path(), &mut |p| {
        if p.extension().is_some_and(|e| e == "mscap") {
            caps.push(p.to_path_buf())
        }
    });
    let cap = caps.first().expect("a capture");
    let bytes = std::fs::read(cap).unwrap();
    let torn = out.path().join("torn.mscap");
    std::fs::write(&torn, &bytes[..bytes.len() / 2]).unwrap();
    let (_, _, err) = fragmentation_cmd(&[torn.as_os_str()]);
    assert!(err.contains("torn.mscap: incomplete capture"), "{err}");
}
