//! `memscope.config()` under `memscope run`, the describer, the tracer and record_function
//! outside a window.

use super::*;

/// Runs `api_parity.py MODE` in `cwd`: under `memscope run RUN_ARGS` with `Some`, else plainly;
/// it must succeed.
fn parity(mode: &str, cwd: &Path, run_args: Option<&[&str]>) -> std::process::Output {
    let args: Vec<std::ffi::OsString> = vec![
        script("api_parity.py").into(),
        mode.into(),
        example_dir().into(),
    ];
    let args: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
    let out = match run_args {
        Some(r) => launched(cwd, r, &args),
        None => plain(cwd, &args),
    };
    check(&out, &format!("api_parity.py {mode} {run_args:?}"));
    out
}

/// Issue 27 item 6: msMemScope's documented workflow, `memscope run -- python x.py` with
/// `config()` in the script.
#[test]
fn config_under_memscope_run_applies_what_the_flags_left_and_explicit_flags_win_in_one_line() {
    let a = tempfile::tempdir().unwrap();
    let out = parity("config", a.path(), Some(&[]));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("RuntimeWarning"), "{stderr}");
    assert!(
        files(&a.path().join("memscopeDumpResults"), "memscope_dump_").is_empty(),
        "the dump goes to config()'s output_path"
    );
    let output = a.path().join("output");
    assert_eq!(files(&output, "memscope_dump_").len(), 1, "{stderr}");
    assert_eq!(
        files(&output, "decompose_").len(),
        1,
        "config(analysis=\"decompose\") ran decompose: {stderr}"
    );

    // an explicit flag wins, said in one line; what the flags left still comes from config()
    let b = tempfile::tempdir().unwrap();
    let out = parity("config", b.path(), Some(&["--analysis", "leaks"]));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let said: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("memscope.config()"))
        .collect();
    assert_eq!(said.len(), 1, "{stderr}");
    assert!(
        said[0].contains("analysis")
            && said[0].contains("--analysis=leaks")
            && said[0].contains("win"),
        "{stderr}"
    );
    let output = b.path().join("output");
    assert_eq!(files(&output, "memscope_dump_").len(), 1, "{stderr}");
    assert!(files(&output, "decompose_").is_empty(), "{stderr}");
}

/// Issue 27 item 7: way 2 of msMemScope's user guide.
#[test]
fn describer_exit_on_another_object_ends_the_innermost_level_of_that_owner() {
    let d = tempfile::tempdir().unwrap();
    parity("describe", d.path(), None);
    let rows = seed_layout_rows(&d.path().join("memscopeDumpResults"));
    let owners: Vec<String> = rows
        .iter()
        .filter(|r| r["Event"] == "MALLOC" && r["Event Type"] == "PTA")
        .map(|r| attrs(r).get("owner").cloned().unwrap_or_default())
        .collect();
    assert_eq!(owners.len(), 3, "{owners:?}");
    assert_eq!(owners[0], "PTA@x");
    assert_eq!(
        owners[1], "PTA@inner",
        "x ended, the level opened inside it stays"
    );
    assert!(
        !owners[2].contains("@x") && !owners[2].contains("@inner"),
        "{owners:?}"
    );
}

/// Issue 27 item 8: msMemScope's tracer works on its own.
#[test]
fn tracer_and_record_function_trace_without_a_window_and_warn_when_nothing_can_be_recorded() {
    let d = tempfile::tempdir().unwrap();
    parity("tracer", d.path(), None);
    let rows = trace_rows(&d.path().join("memscopeDumpResults"));
    let names: Vec<&str> = rows.iter().map(|r| r[0].as_str()).collect();
    assert!(
        names.iter().any(|n| n.ends_with(": work")),
        "Python calls traced with no window: {names:?}"
    );
    assert!(names.contains(&"block"), "{names:?}");
    assert!(!names.contains(&"nowhere"), "{names:?}");
}

/// The `WARNING …` lines and the `warnings: N` count `api_adapters.py ADAPTERS` printed.
fn adapters_warnings(out: &std::process::Output) -> (Vec<String>, String) {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let said = stdout
        .lines()
        .filter(|l| l.starts_with("WARNING "))
        .map(str::to_owned)
        .collect();
    (said, stdout)
}

/// `memscope.config(adapters=...)`: adapters are set up when the process starts, so the ones it
/// started with stay on and each one asked for that it did not start is named, with the
/// `memscope run --adapters` to pass, in one RuntimeWarning.
/// The process log under `cwd` sums up the script's 20 000 kept objects (`api_adapters.py`,
/// the list comprehension's line) as PYMEM objects live at exit.
fn assert_kept_objects_summed_up(cwd: &Path) {
    let logs: Vec<String> = files(cwd, "msmemscope_")
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    let log = logs.concat();
    let live = log
        .lines()
        .find(|l| l.contains("PYMEM Python objects live at exit"))
        .unwrap_or_else(|| panic!("no PYMEM summary in the logs: {log}"));
    let n: u64 = live
        .split(": ")
        .nth(1)
        .and_then(|t| t.split(' ').next())
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("{live}"));
    assert!(n >= 20_000, "{live}");
}

#[test]
fn config_adapters_starts_pymem_late_keeps_the_started_adapters_and_names_the_others_in_one_warning(
) {
    let job = script("api_adapters.py");
    let run = |cwd: &Path, run_args: Option<&[&str]>, adapters: &str| {
        let args = [job.as_os_str(), std::ffi::OsStr::new(adapters)];
        let out = match run_args {
            Some(r) => launched(cwd, r, &args),
            None => plain(cwd, &args),
        };
        check(&out, &format!("api_adapters.py {adapters} {run_args:?}"));
        out
    };
    // the launcher's pymem stays on when the script asks for mstx only: no warning, its rows
    let a = tempfile::tempdir().unwrap();
    let out = run(
        a.path(),
        Some(&["--adapters", "pymem,mstx", "--host-rows"]),
        "mstx",
    );
    let (said, stdout) = adapters_warnings(&out);
    assert!(
        said.is_empty() && stdout.contains("warnings: 0"),
        "{stdout}"
    );
    let pymem = files(&a.path().join("memscopeDumpResults"), "memscope_dump_")
        .iter()
        .flat_map(|d| memscope_tests::read_csv(d))
        .filter(|r| r["Event"] == "MALLOC" && r["Event Type"] == "PYMEM")
        .count();
    assert!(pymem >= 20_000, "{pymem} PYMEM MALLOC rows");
    // pymem, which the launcher did not start, is started by config(): no warning, and the
    // objects the script keeps are summed up
    let b = tempfile::tempdir().unwrap();
    let out = run(b.path(), Some(&["--log-level", "info"]), "mstx,pymem");
    let (said, stdout) = adapters_warnings(&out);
    assert!(said.is_empty(), "{stdout}");
    assert_kept_objects_summed_up(b.path());
    // the same without the launcher
    let c = tempfile::tempdir().unwrap();
    let (said, stdout) = adapters_warnings(&run(c.path(), None, "pymem"));
    assert!(said.is_empty(), "{stdout}");
    assert_kept_objects_summed_up(c.path());
    // an adapter that can only start with the process: one warning naming it and the script
    let d = tempfile::tempdir().unwrap();
    let (said, stdout) = adapters_warnings(&run(d.path(), None, "host"));
    assert_eq!(said.len(), 1, "{stdout}");
    assert!(
        said[0].contains("host not loaded")
            && said[0].contains(
                "memscope run --adapters mstx,pta,mindspore,atb,host -- python api_adapters.py"
            ),
        "{stdout}"
    );
}
