//! Issue 5 "done when": the sim-npu demo job shows SYSTEM, HAL, HOST (pinned), KERNEL_LAUNCH,
//! OP_LAUNCH (ATB), ACCESS, PTA and MSTX rows in one dump on one time line, and
//! `memscope adapters list` describes all seven built-in adapters.
//!
//! `ATB_HOME_PATH` is set by the environment, as CANN's `set_env.sh` does on a real install:
//! `train.py` only runs its ATB operator when it is set, and the probe needs nothing from it
//! (it finds libatb's originals through `RTLD_NEXT`). HOST rows are on device `cpu`, which
//! msMemScope's rule only collects with `--device ...,cpu`.

use memscope_tests::*;
use std::collections::BTreeSet;
use std::process::Command;

#[test]
fn the_training_demo_shows_every_cann_source_pools_and_mstx_in_one_run() {
    let sim = sim_npu_dir();
    let atb = sim.join("atb/cxx_abi_1");
    let train = repo_root().join("examples/sim-npu/train.py");
    let run = memscope_run(
        &[
            "--level",
            "op,kernel",
            "--events",
            "alloc,free,launch,access",
            "--device",
            "npu,cpu",
        ],
        &["python3", train.to_str().unwrap(), "--steps", "3"],
        &[
            ("ATB_HOME_PATH", atb.to_str().unwrap()),
            ("SIM_NPU_DIR", sim.to_str().unwrap()),
        ],
    );
    assert_eq!(
        run.code(),
        0,
        "stdout: {}\nstderr: {}",
        run.stdout(),
        run.stderr()
    );
    assert!(run.stdout().contains("atb=on"), "{}", run.stdout());
    let rows = run.rows();
    let pid = rows
        .iter()
        .find(|r| r["Event Type"] == "ATB_START")
        .expect("an ATB operator")["Process Id"]
        .clone();
    let rows: Vec<Row> = rows
        .into_iter()
        .filter(|r| r["Process Id"] == pid)
        .collect();
    let seen: BTreeSet<(String, String)> = rows
        .iter()
        .map(|r| (r["Event"].clone(), r["Event Type"].clone()))
        .collect();
    for (e, t) in [
        ("SYSTEM", "ACL_INIT"),
        ("SYSTEM", "ACL_FINI"),
        ("MALLOC", "HAL"),
        ("FREE", "HAL"),
        ("MALLOC", "HOST"),
        ("FREE", "HOST"),
        ("KERNEL_LAUNCH", "KERNEL_LAUNCH"),
        ("KERNEL_LAUNCH", "KERNEL_START"),
        ("KERNEL_LAUNCH", "KERNEL_END"),
        ("OP_LAUNCH", "ATB_START"),
        ("OP_LAUNCH", "ATB_END"),
        ("ACCESS", "UNKNOWN"),
        ("ACCESS", "WRITE"),
        ("MALLOC", "PTA"),
        ("FREE", "PTA"),
        ("MSTX", "Mark"),
        ("MSTX", "Range_start"),
    ] {
        assert!(
            seen.contains(&(e.to_owned(), t.to_owned())),
            "{e}/{t} missing; seen {seen:?}"
        );
    }
    let pinned: Vec<&Row> = rows.iter().filter(|r| r["Event Type"] == "HOST").collect();
    assert!(pinned
        .iter()
        .all(|r| attrs(r)["pinned"] == "true" && r["Device Id"] == "cpu"));
    // Per step: 3 rt launches, 3 aclrt launches, 1 ATB kernel launched through the runtime.
    let kernels: Vec<&str> = select(&rows, "KERNEL_LAUNCH", "KERNEL_LAUNCH")
        .iter()
        .map(|r| r["Name"].as_str())
        .collect();
    assert_eq!(kernels.len(), 3 * 7, "{kernels:?}");
    assert!(
        kernels.iter().all(|k| k.ends_with("Kernel")),
        "every launch named: {kernels:?}"
    );
    // One time line: device 0 rows are in time order and their IDs increase with time.
    let dev0: Vec<&Row> = rows.iter().filter(|r| r["Device Id"] == "0").collect();
    let ts: Vec<u64> = dev0
        .iter()
        .map(|r| r["Timestamp(ns)"].parse().unwrap())
        .collect();
    assert!(ts.windows(2).all(|w| w[0] <= w[1]), "time order");
    let hal = select(&rows, "MALLOC", "HAL");
    let owners: BTreeSet<String> = hal.iter().map(|r| attrs(r)["owner"].clone()).collect();
    assert_eq!(
        owners,
        BTreeSet::from(["CANN@APP".to_owned(), "CANN@RUNTIME".to_owned()])
    );
}

#[test]
fn adapters_list_describes_every_adapter() {
    let o = Command::new(memscope_bin())
        .args(["adapters", "list"])
        .output()
        .unwrap();
    assert!(o.status.success());
    let text = String::from_utf8_lossy(&o.stdout);
    for name in adapter_names() {
        let name = name.as_str();
        let line = text
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name));
        assert!(
            line.is_some_and(|l| l.len() > name.len() + 10),
            "{name} has a summary line:\n{text}"
        );
    }
    for sym in [
        "halMemAlloc",
        "halMemCreate",
        "aclInit",
        "aclrtHostRegisterV2",
        "rtKernelLaunch",
        "aclrtLaunchKernelWithHostArgs",
        "_ZN3atb6Runner7ExecuteERNS_17RunnerVariantPackE",
    ] {
        assert!(text.contains(sym), "{sym} listed:\n{text}");
    }
    for ev in [
        "MALLOC/HAL",
        "SNAPSHOT/SNAPSHOT",
        "KERNEL_LAUNCH/KERNEL_LAUNCH",
        "SYSTEM/ACL_INIT",
        "OP_LAUNCH/ATB_START",
        "ACCESS/UNKNOWN",
    ] {
        assert!(text.contains(ev), "{ev} listed:\n{text}");
    }
}

/// Issue 10 "done when": on the full demo (the README's second command, plus the inefficient
/// analysis), every ACCESS row whose address lies in a live block carries that block's
/// `allocation_id`, and `memscope analyze inefficient` on the dump (its annotations removed)
/// writes exactly the rows the online analysis wrote.
#[test]
fn the_full_demo_gives_accesses_their_block_and_offline_inefficient_agrees_with_online_row_for_row()
{
    let sim = sim_npu_dir();
    let atb = sim.join("atb/cxx_abi_1");
    let train = repo_root().join("examples/sim-npu/train.py");
    let run = memscope_run(
        &[
            "--level",
            "op,kernel",
            "--events",
            "alloc,free,launch,access",
            "--device",
            "npu,cpu",
            "--analysis",
            "leaks,inefficient",
        ],
        &["python3", train.to_str().unwrap()],
        &[
            ("ATB_HOME_PATH", atb.to_str().unwrap()),
            ("SIM_NPU_DIR", sim.to_str().unwrap()),
        ],
    );
    assert_eq!(run.code(), 0, "{}\n{}", run.stdout(), run.stderr());
    let dump = run
        .dumps(".csv")
        .into_iter()
        .find(|p| p.to_string_lossy().contains("/device_0/"))
        .expect("a device_0 dump");
    let online = read_csv(&dump);

    // Every ACCESS inside a live block (checked independently of memscope's layer) has an id,
    // and it is the id of a block holding the address.
    let mut live: std::collections::HashMap<String, (u64, u64, String)> = Default::default();
    let (mut accesses, mut matched) = (0, 0);
    for r in &online {
        let a = attrs(r);
        let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
        match r["Event"].as_str() {
            "MALLOC" => {
                let start = hex(&r["Ptr"]);
                let size: u64 = a["size"].parse().unwrap();
                live.insert(
                    a["allocation_id"].clone(),
                    (start, start + size.max(1), r["Event Type"].clone()),
                );
            }
            "FREE" => {
                live.remove(&a["allocation_id"]);
            }
            "ACCESS" => {
                accesses += 1;
                let p = hex(&r["Ptr"]);
                let holders: Vec<&String> = live
                    .iter()
                    .filter(|(_, (s, e, _))| *s <= p && p < *e)
                    .map(|(id, _)| id)
                    .collect();
                match a.get("allocation_id") {
                    Some(id) => {
                        matched += 1;
                        assert!(holders.contains(&id), "ID {}: {id} holds {p:#x}", r["ID"]);
                        assert_ne!(live[id].2, "HAL", "the pool block, not its segment");
                    }
                    None => assert!(holders.is_empty(), "ID {} has no allocation_id", r["ID"]),
                }
            }
            _ => {}
        }
    }
    assert!(
        accesses > 0 && matched == accesses,
        "{matched} of {accesses} matched"
    );
    let found = online
        .iter()
        .filter(|r| r["Event"] == "MALLOC" && attrs(r).contains_key("inefficient"))
        .count();
    assert!(found > 0, "the online analysis annotated MALLOC rows");

    // The same dump without the annotations, analysed offline.
    let dir = tempfile::tempdir().unwrap();
    let bare = dir.path().join("memscope_dump_bare.csv");
    {
        let mut w = csv::WriterBuilder::new()
            .terminator(csv::Terminator::Any(b'\n'))
            .from_path(&bare)
            .unwrap();
        let mut r = csv::Reader::from_path(&dump).unwrap();
        w.write_record(r.headers().unwrap()).unwrap();
        for rec in r.records() {
            let rec = rec.unwrap();
            let cells: Vec<String> = rec
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    if i != 9 || !c.contains("inefficient") {
                        return c.to_owned();
                    }
                    let kept: Vec<String> = memscope_core::attr_text::parse_attr(c)
                        .into_iter()
                        .filter(|(k, _)| k != "inefficient")
                        .map(|(k, v)| format!("{k}:{v}"))
                        .collect();
                    format!("{{{}}}", kept.join(","))
                })
                .collect();
            w.write_record(&cells).unwrap();
        }
        w.flush().unwrap();
    }
    let o = Command::new(memscope_bin())
        .args(["analyze", "inefficient"])
        .arg(&bare)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let copy = dir.path().join("memscope_dump_bare_inefficient.csv");
    let offline = read_csv(&copy);
    assert_eq!(offline.len(), online.len());
    for (a, b) in online.iter().zip(&offline) {
        assert_eq!(a, b, "row ID {}", a["ID"]);
    }
}

#[test]
fn the_demo_leak_report_names_the_leaking_line_of_train_py() {
    let train = repo_root().join("examples/sim-npu/train.py");
    let text = std::fs::read_to_string(&train).unwrap();
    let line = text
        .lines()
        .position(|l| l.contains("leaked.extend(caching.alloc(dev, [LEAK_BYTES]))"))
        .expect("the leaking line")
        + 1;
    let py = python3();
    let run = memscope_run(
        &["--adapters", "pta,mstx", "--call-stack", "python:8"],
        &[
            py.to_str().unwrap(),
            train.to_str().unwrap(),
            "--steps",
            "4",
        ],
        &[("SIM_NPU_DIR", sim_npu_dir().to_str().unwrap())],
    );
    assert_eq!(run.code(), 0, "stderr: {}", run.stderr());
    let err = run.stderr();
    let report: Vec<&str> = err
        .lines()
        .skip_while(|l| !l.contains("Memory pool leaks"))
        .take_while(|l| !l.contains("SUMMARY"))
        .collect();
    let leak = report
        .iter()
        .position(|l| l.contains("Direct Pytorch Caching memory pool leak of 4.000000 Mb(s)"))
        .unwrap_or_else(|| panic!("a 4 MiB leak in the report:\n{err}"));
    assert!(
        report[leak].contains("train.py(") && !report[leak].contains(" in N/A "),
        "the leak names its Python frame, not N/A: {}",
        report[leak]
    );
    let want = format!("train.py({line}): main");
    assert!(
        report[leak..].iter().any(|l| l.contains(&want)),
        "the report names {want}:\n{}",
        report.join("\n")
    );
}

/// The README's first command, `python3` being a pyenv shim (issue 23).
fn demo_under_a_shim(args: &[&str], steps: &str) -> (Run, tempfile::TempDir) {
    let shim = pyenv_shim();
    let train = repo_root().join("examples/sim-npu/train.py");
    let run = memscope_run(
        args,
        &["python3", train.to_str().unwrap(), "--steps", steps],
        &[
            ("PATH", &path_with(shim.path())),
            ("SIM_NPU_DIR", sim_npu_dir().to_str().unwrap()),
        ],
    );
    assert_eq!(run.code(), 0, "stderr: {}", run.stderr());
    (run, shim)
}

/// The `memscope: pid P (exe): …` lines of a run's console.
fn pid_lines(err: &str) -> Vec<&str> {
    err.lines()
        .filter(|l| l.starts_with("memscope: pid "))
        .collect()
}

#[test]
fn a_pyenv_shim_s_helper_processes_get_no_directory_and_no_console_line() {
    let (run, _shim) =
        demo_under_a_shim(&["--adapters", "pta,mstx", "--call-stack", "python:8"], "4");
    let err = run.stderr();
    let lines = pid_lines(&err);
    assert_eq!(lines.len(), 1, "one process line, the job's:\n{err}");
    assert!(lines[0].contains("python"), "{err}");
    // the shim's shells are not worth a console line (issue 35): the run index lists them
    assert!(!err.contains("not listed"), "{err}");
    assert!(
        !err.contains("/usr/bin/bash"),
        "no line names a helper:\n{err}"
    );
    // one process directory: the job's
    let dirs: Vec<String> = std::fs::read_dir(run.out.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("msmemscope_"))
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    // the run index lists the helpers, marked, without directories
    let idx: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(run.out.path().join("memscope_run.json")).unwrap(),
    )
    .unwrap();
    let procs = idx["runs"][0]["processes"].as_array().unwrap().clone();
    assert!(
        procs.len() > 1,
        "the shim's processes are traced: {procs:?}"
    );
    for p in &procs {
        let helper = p.get("helper").and_then(|h| h.as_bool()).unwrap_or(false);
        assert_eq!(helper, p["dir"].is_null(), "{p}");
    }
    assert!(procs.iter().any(|p| p["helper"] == true));
    // the answer stays on the console, its SUMMARY line last
    assert!(
        err.trim_end()
            .lines()
            .last()
            .unwrap()
            .contains("====== SUMMARY: "),
        "{err}"
    );
}

#[test]
fn the_readme_host_command_under_a_shim_keeps_the_host_summary_on_the_console() {
    let shim = pyenv_shim();
    let run = memscope_run(
        &["--adapters", "host", "--call-stack", "c:16"],
        &[
            "python3",
            "-c",
            "import json; print(len(json.dumps(list(range(10**5)))))",
        ],
        &[("PATH", &path_with(shim.path()))],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let err = run.stderr();
    assert_eq!(pid_lines(&err).len(), 1, "{err}");
    for sec in ["HOST peak", "HOST memory live at exit"] {
        assert!(err.contains(sec), "{sec} on the console:\n{err}");
    }
    assert!(
        err.lines().count() < 60,
        "{} lines:\n{err}",
        err.lines().count()
    );
}

#[test]
fn a_20000_step_run_prints_under_100_lines_with_the_summary_last_and_every_leak_in_the_file() {
    let (run, _shim) = demo_under_a_shim(
        &["--adapters", "pta,mstx", "--call-stack", "python:8"],
        "20000",
    );
    let err = run.stderr();
    let n = err.lines().count();
    assert!(n < 100, "{n} console lines:\n{err}");
    let last = err.trim_end().lines().last().unwrap();
    assert!(
        last.contains("====== SUMMARY: ") && last.contains("leaked in 19997 allocation(s)"),
        "{last}"
    );
    assert!(err.contains("… 19987 more leak(s)"), "{err}");
    assert!(err.contains("… 19989 more step(s)"), "{err}");
    // the file the console names has every leak and every step
    let full = err
        .lines()
        .find_map(|l| l.strip_prefix("memscope: every list in full: "))
        .unwrap_or_else(|| panic!("the full summary is named:\n{err}"));
    let text = std::fs::read_to_string(full).unwrap();
    assert_eq!(
        text.lines()
            .filter(|l| l.contains("Direct Pytorch Caching"))
            .count(),
        19997
    );
    assert!(text.contains("\n    19999   "), "every gap row");
}

#[test]
fn the_leak_report_names_the_first_frame_of_the_users_code_and_its_caller() {
    let train = repo_root().join("examples/sim-npu/train.py");
    let text = std::fs::read_to_string(&train).unwrap();
    let line_of = |needle: &str| {
        text.lines()
            .position(|l| l.contains(needle))
            .expect("line in train.py")
            + 1
    };
    let alloc = line_of("def alloc(self, dev, sizes):");
    let leak = line_of("leaked.extend(caching.alloc(dev, [LEAK_BYTES]))");
    let (run, _shim) =
        demo_under_a_shim(&["--adapters", "pta,mstx", "--call-stack", "python:8"], "4");
    let err = run.stderr();
    let leaks: Vec<&str> = err
        .lines()
        .skip_while(|l| !l.contains("Memory pool leaks"))
        .collect();
    let first = leaks
        .iter()
        .position(|l| l.contains("Direct Pytorch Caching memory pool leak"))
        .unwrap_or_else(|| panic!("{err}"));
    // the helper's own line (the allocation inside alloc()) …
    let in_alloc =
        (alloc..alloc + 30).any(|l| leaks[first].contains(&format!("train.py({l}): alloc")));
    assert!(in_alloc, "{}", leaks[first]);
    // … and the caller that leaks, with the rule that chose them
    assert!(
        leaks[first + 1].contains("called from ")
            && leaks[first + 1].contains(&format!("train.py({leak}): main"))
            && leaks[first + 1].contains("first frame in your code, Python stack"),
        "{}",
        leaks[first + 1]
    );
    // HAL is not traced: no claim about HAL memory
    assert!(!err.contains("hal leak"), "{err}");
    assert!(!err.contains("HAL memory live at exit"), "{err}");
}
