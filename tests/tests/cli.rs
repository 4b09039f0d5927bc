//! Issue 2: bad flags, bad config.json and bad paths give one-line errors, exit code 2, and
//! launch nothing; `memscope adapters list` and `memscope config schema`.

use memscope_tests::*;
use std::process::Command;

fn memscope(args: &[&str]) -> std::process::Output {
    Command::new(memscope_bin()).args(args).output().unwrap()
}

fn assert_usage_error(o: &std::process::Output, needle: &str) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "stderr: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err:?}");
    assert!(err.contains(needle), "{needle:?} not in {err:?}");
}

#[test]
fn bad_flag_values_are_one_line_errors_with_exit_code_2_and_nothing_launched() {
    let marker = tempfile::tempdir().unwrap();
    let touched = marker.path().join("launched");
    let job = ["--", "touch", touched.to_str().unwrap()];
    for (flag, value, needle) in [
        ("--events", "allocs", "allocs"),
        ("--level", "ops", "ops"),
        ("--call-stack", "c:00", "00"),
        ("--analysis", "leaks, decompose", " decompose"),
        ("--steps", "1,2,3,4,5,6", "--steps"),
        ("--device", "npu:99", "npu:99"),
        ("--format", "xml", "xml"),
        ("--log-level", "loud", "loud"),
        ("--collect-mode", "later", "later"),
        ("--adapters", "cuda", "cuda"),
        ("--output-path", "=evil", "=evil"),
    ] {
        let mut args = vec!["run", flag, value];
        args.extend(job);
        assert_usage_error(&memscope(&args), needle);
    }
    assert_usage_error(
        &memscope(&["run", "--no-such-flag", "--", "true"]),
        "--no-such-flag",
    );
    assert_usage_error(
        &memscope(&["run", "--", "/no/such/program"]),
        "/no/such/program",
    );
    assert_usage_error(&memscope(&["run"]), "no program");
    assert!(!touched.exists(), "nothing was launched");
}

#[test]
fn bad_config_json_is_refused_naming_the_file() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("config.json");
    for (text, needle) in [
        ("{not json", "config.json"),
        (r#"{"adapterz": "mstx"}"#, "adapterz"),
        (r#"{"steps": "x"}"#, "--steps"),
        (r#"{"format": 3}"#, "config.json"),
    ] {
        std::fs::write(&p, text).unwrap();
        assert_usage_error(
            &memscope(&["run", "--config", p.to_str().unwrap(), "--", "true"]),
            needle,
        );
    }
    assert_usage_error(
        &memscope(&["run", "--config", "/no/such/config.json", "--", "true"]),
        "/no/such/config.json",
    );
}

#[test]
fn output_path_that_is_a_file_is_refused_and_the_file_kept() {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("file");
    std::fs::write(&f, "keep me").unwrap();
    assert_usage_error(
        &memscope(&["run", "-o", f.to_str().unwrap(), "--", "true"]),
        "--output-path",
    );
    assert_eq!(std::fs::read_to_string(&f).unwrap(), "keep me");
}

#[test]
fn the_job_exit_code_is_passed_through() {
    let run = memscope_run(&["--adapters", "mstx"], &["sh", "-c", "exit 7"], &[]);
    assert_eq!(run.code(), 7, "{}", run.stderr());
    let run = memscope_run(&["--adapters", "mstx"], &["sh", "-c", "kill -TERM $$"], &[]);
    assert_eq!(run.code(), 128 + 15, "{}", run.stderr());
}

#[test]
fn adapters_list_describes_the_builtin_adapters() {
    let o = memscope(&["adapters", "list"]);
    assert!(o.status.success());
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("mstx") && text.contains("InitInjectionMstx"),
        "{text}"
    );
}

#[test]
fn config_schema_is_valid_json_listing_every_option() {
    let o = memscope(&["config", "schema"]);
    assert!(o.status.success());
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    for key in [
        "events",
        "level",
        "call_stack",
        "analysis",
        "steps",
        "device",
        "output_path",
        "format",
        "log_level",
        "collect_mode",
        "adapters",
        "adapter_paths",
        "watch",
    ] {
        assert!(v["properties"][key].is_object(), "{key}");
    }
}

#[test]
fn a_job_whose_stream_cannot_be_created_runs_untraced_instead_of_hanging() {
    // The spool disappears while the job runs: later processes cannot create their streams.
    // bash calls setlocale() at start-up, where a hook that reported the error through
    // strerror() used to deadlock on glibc's locale lock.
    let out = tempfile::tempdir().unwrap();
    // a handshake, not a sleep: the job says it runs, waits until the spool is gone, then
    // starts the child
    let marks = tempfile::tempdir().unwrap();
    let (ready, go) = (marks.path().join("ready"), marks.path().join("go"));
    let script = format!(
        "touch '{}'; while [ ! -e '{}' ]; do sleep 0.05; done; bash -c 'echo child-ran'; echo parent-done",
        ready.display(),
        go.display()
    );
    let mut ms = Command::new(memscope_bin())
        .args(["run", "--adapters", "mstx,host", "-o"])
        .arg(out.path())
        .args(["--", "bash", "-c", &script])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while !ready.exists() {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(30),
            "the job never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    for e in std::fs::read_dir(out.path()).unwrap().flatten() {
        if e.file_name()
            .to_string_lossy()
            .starts_with(".memscope_spool")
        {
            // a process starting meanwhile may add a file: try again until it is gone
            let mut tries = 0;
            while let Err(err) = std::fs::remove_dir_all(e.path()) {
                tries += 1;
                assert!(tries < 50, "cannot remove the spool: {err}");
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
    }
    std::fs::write(&go, b"").unwrap();
    let start = std::time::Instant::now();
    let o = loop {
        if ms.try_wait().unwrap().is_some() {
            break ms.wait_with_output().unwrap();
        }
        if start.elapsed() > std::time::Duration::from_secs(30) {
            let _ = ms.kill();
            panic!("memscope run hung");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("child-ran") && stdout.contains("parent-done"),
        "{stdout}"
    );
    // the removed spool is said, and the run exits 2: what was in it is lost
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("was removed, emptied or moved away while the run went on"),
        "{err}"
    );
}

#[test]
fn a_wrong_probe_path_is_refused() {
    let o = Command::new(memscope_bin())
        .args(["run", "--", "true"])
        .env("MEMSCOPE_PROBE_PATH", "/bin/sh")
        .output()
        .unwrap();
    assert_usage_error(&o, "MEMSCOPE_PROBE_PATH=/bin/sh");
}

#[test]
fn missing_arguments_are_named_on_the_one_line() {
    let o = memscope(&["compare", "only-one.csv"]);
    assert_usage_error(&o, "<COMPARE>");
}

#[test]
fn help_and_the_schema_give_the_defaults_config_check_prints_and_every_adapter() {
    // issue 23: `--help` and the schema said `leaks` while the default is `leaks,gap`
    let o = memscope(&["config", "check"]);
    assert!(o.status.success());
    let cfg: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let list = |k: &str| -> Vec<String> {
        cfg[k]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_owned())
            .collect()
    };
    let help = String::from_utf8_lossy(&memscope(&["run", "--help"]).stdout).into_owned();
    let option = |flag: &str| -> String {
        let at = help
            .find(flag)
            .unwrap_or_else(|| panic!("{flag} in --help"));
        help[at..].lines().take(3).collect::<Vec<_>>().join(" ")
    };
    let analysis = list("analysis").join(",");
    assert!(
        option("--analysis").contains(&format!("[default: {analysis}]")),
        "{}",
        option("--analysis")
    );
    let adapters = String::from_utf8_lossy(&memscope(&["adapters", "list"]).stdout).into_owned();
    for a in [
        "mstx",
        "pta",
        "mindspore",
        "atb",
        "hal",
        "acl",
        "host",
        "pymem",
    ] {
        assert!(adapters.contains(a), "{a} in adapters list");
        assert!(
            option("--adapters").contains(a),
            "{a} in --help: {}",
            option("--adapters")
        );
    }
    let schema: serde_json::Value =
        serde_json::from_slice(&memscope(&["config", "schema"]).stdout).unwrap();
    let desc = schema["properties"]["analysis"]["description"]
        .as_str()
        .unwrap();
    assert!(
        desc.contains(&format!("Default {}.", list("analysis").join(", "))),
        "{desc}"
    );
}

#[test]
fn the_readme_names_nothing_outside_the_repository_and_says_where_memscope_is() {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    assert!(
        !readme.contains("../shared"),
        "a folder that is not in the repository"
    );
    assert!(
        readme.contains("export PATH=\"$PWD/target/release:$PATH\""),
        "the bare `memscope` of the examples is explained"
    );
}

#[test]
fn building_an_example_adapter_leaves_no_untracked_target_folder() {
    // issue 23: `cargo build --manifest-path examples/adapter-jemalloc/Cargo.toml` writes
    // examples/adapter-jemalloc/target/, which .gitignore must cover
    let root = repo_root();
    let o = Command::new("git")
        .arg("-C")
        .arg(&root)
        .args(["check-ignore", "-q", "--no-index"])
        .arg("examples/adapter-jemalloc/target/release/libmemscope_jemalloc_adapter.so")
        .output();
    match o {
        Ok(o) if o.status.code() == Some(128) => {
            eprintln!("SKIP: {} is not a git checkout", root.display())
        }
        Ok(o) => assert!(o.status.success(), "not ignored: {o:?}"),
        Err(e) => eprintln!("SKIP: git not available: {e}"),
    }
}
