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
    assert_usage_error(&memscope(&["run", "--no-such-flag", "--", "true"]), "--no-such-flag");
    assert_usage_error(&memscope(&["run", "--", "/no/such/program"]), "/no/such/program");
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
        assert_usage_error(&memscope(&["run", "--config", p.to_str().unwrap(), "--", "true"]), needle);
    }
    assert_usage_error(&memscope(&["run", "--config", "/no/such/config.json", "--", "true"]), "/no/such/config.json");
}

#[test]
fn output_path_that_is_a_file_is_refused_and_the_file_kept() {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("file");
    std::fs::write(&f, "keep me").unwrap();
    assert_usage_error(&memscope(&["run", "-o", f.to_str().unwrap(), "--", "true"]), "--output-path");
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
    assert!(text.contains("mstx") && text.contains("InitInjectionMstx"), "{text}");
}

#[test]
fn config_schema_is_valid_json_listing_every_option() {
    let o = memscope(&["config", "schema"]);
    assert!(o.status.success());
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    for key in ["events", "level", "call_stack", "analysis", "steps", "device", "output_path", "format", "log_level", "collect_mode", "adapters", "adapter_paths"] {
        assert!(v["properties"][key].is_object(), "{key}");
    }
}
