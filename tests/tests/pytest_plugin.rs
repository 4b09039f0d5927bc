//! Issue 24: the pytest plugin shipped in the wheel (`pytest --memscope`, registered through
//! the `pytest11` entry point). The sim-npu project of `tests/python/pytest_sim/` (a test that
//! leaks 4 MiB per call and its fixed twin, `warmup`, the ini file's default limit and the
//! markers that override it, Python objects) runs from the installed wheel; the real-torch
//! project of `tests/python/pytest_torch/` from the source tree with torch's python.
//!
//! pytest comes from PyPI: `.ci/run` installs it into `python3` (seen by the wheel's venv
//! through `--system-site-packages`) and into torch's venv.

mod python_common;

use memscope_tests::repo_root;
use python_common::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn project(name: &str) -> PathBuf {
    repo_root().join("tests/python").join(name)
}

/// `file(line)` of the line of `tests/python/<file>` holding `needle`.
fn line_of(file: &str, needle: &str) -> String {
    let path = repo_root().join("tests/python").join(file);
    let n = memscope_tests::script_line(file, needle);
    format!("{}({n})", path.display())
}

fn out_text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Test name -> PASSED/FAILED, from pytest's `-v` lines.
fn outcomes(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| {
            let (name, rest) = l.split_once("::")?;
            if !name.ends_with(".py") {
                return None;
            }
            let mut parts = rest.split_whitespace();
            let test = parts.next()?.to_owned();
            let outcome = parts.next()?.to_owned();
            matches!(outcome.as_str(), "PASSED" | "FAILED").then_some((test, outcome))
        })
        .collect()
}

/// The failure section of `test` in pytest's report.
fn failure<'a>(text: &'a str, test: &str) -> &'a str {
    let head = format!(" {test} _");
    let start = text
        .find(&head)
        .unwrap_or_else(|| panic!("no failure section of {test}:\n{text}"));
    let rest = &text[start + head.len()..];
    let end = rest
        .find("\n___")
        .or_else(|| rest.find("\n==="))
        .unwrap_or(rest.len());
    &rest[..end]
}

fn sim_pytest(cwd: &Path, extra: &[&str]) -> Output {
    let v = pytest_venv();
    let mut cmd = Command::new(v.python());
    cmd.args(["-m", "pytest", "-v", "-p", "no:cacheprovider"])
        .args(extra)
        .arg(project("pytest_sim"));
    clean(&mut cmd, cwd);
    cmd.output().expect("run pytest")
}

#[test]
fn sim_npu_test_leaking_4_mib_per_call_fails_naming_its_line_and_its_fixed_twin_passes() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("dumps");
    let o = sim_pytest(
        dir.path(),
        &[
            "--memscope",
            "--memscope-pymem",
            "--memscope-output",
            out.to_str().unwrap(),
        ],
    );
    let text = out_text(&o);
    assert_eq!(
        o.status.code(),
        Some(1),
        "tests failed, pytest's code:\n{text}"
    );
    let got = outcomes(&text);
    let want: BTreeMap<String, String> = [
        ("test_leaks_4_mib_per_call", "FAILED"),
        ("test_fixed_twin_frees_its_block", "PASSED"),
        ("test_cache_filled_in_warmup_passes", "PASSED"),
        ("test_cache_filled_in_the_test_fails", "FAILED"),
        ("test_unmarked_over_the_ini_default_fails", "FAILED"),
        ("test_marker_overrides_the_ini_default", "PASSED"),
        ("test_limit_lifted", "PASSED"),
        ("test_small_unmarked_passes", "PASSED"),
        ("test_python_objects_over_the_limit", "FAILED"),
    ]
    .into_iter()
    .map(|(a, b)| (a.to_owned(), b.to_owned()))
    .collect();
    assert_eq!(got, want, "{text}");
    // the leak: by how much, on which allocator, the allocating line and the test's own line
    let f = failure(&text, "test_leaks_4_mib_per_call");
    assert!(
        f.contains("limit_leaks('1 MiB', device='npu:0') crossed"),
        "{f}"
    );
    assert!(
        f.contains("leaked 4.0 MiB on npu:0 PTA, 3.0 MiB over the limit"),
        "{f}"
    );
    assert!(f.contains("train.py("), "the pool's allocating frame: {f}");
    let leak = line_of("pytest_sim/test_sim.py", "# the leak");
    assert!(
        f.contains(&format!("in the test at {leak}: test_leaks_4_mib_per_call")),
        "{f}"
    );
    // the ini default, overridden by a marker, lifted by limit_memory(None)
    let f = failure(&text, "test_unmarked_over_the_ini_default_fails");
    assert!(f.contains("(memscope_limit_memory in the ini)"), "{f}");
    assert!(
        f.contains("peaked at 32.0 MiB on npu:0 PTA, 8.0 MiB over the limit"),
        "{f}"
    );
    assert!(
        f.contains(&line_of("pytest_sim/test_sim.py", "# the peak")),
        "{f}"
    );
    // Python objects (the PYMEM adapter loaded in-process)
    let f = failure(&text, "test_python_objects_over_the_limit");
    assert!(f.contains("on cpu PYMEM"), "{f}");
    assert!(
        f.contains(&line_of("pytest_sim/test_sim.py", "# Python objects")),
        "{f}"
    );
    // the table of every test, and what the in-process API cannot see
    let table = &text[text.find("= memscope =").expect("the memscope section")..];
    for t in want.keys() {
        assert!(table.contains(&format!("test_sim.py::{t}")), "{t}: {table}");
    }
    assert!(
        table.contains("not measured: driver memory (HAL)"),
        "{table}"
    );
    let row = table
        .lines()
        .find(|l| l.contains("::test_leaks_4_mib_per_call") && l.contains("PTA"))
        .unwrap();
    assert!(row.contains("4.0 MiB") && row.ends_with("FAILED"), "{row}");
}

#[test]
fn without_memscope_the_plugin_imports_nothing_and_markers_are_known() {
    let dir = tempfile::tempdir().unwrap();
    let o = sim_pytest(dir.path(), &["--strict-markers"]);
    let text = out_text(&o);
    assert_eq!(o.status.code(), Some(0), "{text}");
    assert!(!text.contains("= memscope ="), "{text}");
    // no probe loaded, no collector started: plain memscope would leave a spool in TMPDIR
    let spools = std::fs::read_dir(dir.path().join("tmp"))
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("memscope_spool_")
        })
        .count();
    assert_eq!(spools, 0);
    // a bad marker value is a usage error naming it
    let bad = dir.path().join("test_bad.py");
    std::fs::write(
        &bad,
        "import pytest\n\n@pytest.mark.limit_memory('lots')\ndef test_x():\n    pass\n",
    )
    .unwrap();
    let v = pytest_venv();
    let mut cmd = Command::new(v.python());
    cmd.args(["-m", "pytest", "-p", "no:cacheprovider", "--memscope"])
        .arg(&bad);
    clean(&mut cmd, dir.path());
    let o = cmd.output().unwrap();
    let text = out_text(&o);
    assert_ne!(o.status.code(), Some(0), "{text}");
    assert!(text.contains("'lots' is not a size"), "{text}");
}

fn torch_python() -> PathBuf {
    let cand = std::env::var_os("MEMSCOPE_TORCH_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(memscope_tests::python3);
    let ok = Command::new(&cand)
        .args(["-c", "import torch, pytest"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "torch and pytest are not importable by {} — this test needs real torch (CPU) and \
         pytest: run .ci/run, which installs them from PyPI, or set MEMSCOPE_TORCH_PYTHON",
        cand.display()
    );
    cand
}

#[test]
fn real_torch_cpu_tests_over_their_limits_fail_naming_their_lines_and_a_small_model_passes() {
    let dir = tempfile::tempdir().unwrap();
    let o = Command::new(torch_python())
        .args([
            "-m",
            "pytest",
            "-v",
            "-p",
            "no:cacheprovider",
            "-p",
            "pytest_memscope",
        ])
        .args(["--memscope", "--memscope-output"])
        .arg(dir.path().join("dumps"))
        .arg(project("pytest_torch"))
        .current_dir(dir.path())
        .env("PYTHONPATH", repo_root().join("python"))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        // the wheel's CLI: the wheel build of the other tests relinks the workspace's binary
        .env("MEMSCOPE_CLI", venv().memscope())
        .env("TMPDIR", dir.path())
        .env_remove("MEMSCOPE_SPOOL")
        .env_remove("LD_PRELOAD")
        .output()
        .expect("run pytest");
    let text = out_text(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    let got = outcomes(&text);
    assert_eq!(got["test_keeps_a_4_mib_tensor"], "FAILED", "{text}");
    assert_eq!(
        got["test_16_mib_temporary_over_the_limit"], "FAILED",
        "{text}"
    );
    assert_eq!(got["test_small_model_within_limits"], "PASSED", "{text}");
    let f = failure(&text, "test_keeps_a_4_mib_tensor");
    assert!(f.contains("leaked 4.0 MiB on cpu HOST"), "{f}");
    assert!(
        f.contains(&line_of("pytest_torch/test_torch_cpu.py", "# kept")),
        "{f}"
    );
    let f = failure(&text, "test_16_mib_temporary_over_the_limit");
    assert!(
        f.contains("peaked at 16.0 MiB on cpu HOST, 12.0 MiB over the limit"),
        "{f}"
    );
    assert!(
        f.contains(&line_of("pytest_torch/test_torch_cpu.py", "# the peak")),
        "{f}"
    );
}

#[test]
fn a_limit_on_python_objects_without_pymem_says_not_recorded_not_ok() {
    // issue 35: the table said "ok" for limits it did not check
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("dumps");
    let o = sim_pytest(
        dir.path(),
        &[
            "--memscope",
            "--memscope-output",
            out.to_str().unwrap(),
            "-k",
            "test_python_objects_over_the_limit",
        ],
    );
    let text = out_text(&o);
    let table = &text[text.find("= memscope =").expect("the memscope section")..];
    let row = table
        .lines()
        .find(|l| l.contains("::test_python_objects_over_the_limit"))
        .unwrap_or_else(|| panic!("{table}"));
    assert!(row.ends_with("not recorded"), "{row}\n{table}");
    assert!(!row.ends_with(" ok"), "{row}");
}
