//! Issue 10 item 9: msMemScope's offline compare invocation (`--compare --input-path=a,b
//! [--level=...]`) runs as `memscope compare`, with a one-line note of memscope's spelling, and
//! writes what `memscope compare` writes (msMemScope's own smoke pair: 12 kernel rows); so
//! does the `msmemscope` command (issue 26).

use memscope_tests::*;
use std::path::{Path, PathBuf};
use std::process::Command;

fn fixture(name: &str) -> Option<PathBuf> {
    let p = repo_root().join("../shared/fixtures/msmemscope").join(name);
    if p.is_file() {
        Some(p)
    } else {
        eprintln!(
            "SKIP: fixture {} not found (shared/fixtures/msmemscope is absent)",
            p.display()
        );
        None
    }
}

fn result(dir: &Path) -> Vec<String> {
    let compare = dir.join("compare");
    let files: Vec<PathBuf> = std::fs::read_dir(&compare)
        .unwrap_or_else(|e| panic!("{}: {e}", compare.display()))
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    std::fs::read_to_string(&files[0])
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn msmemscope_compare_invocation_runs_as_memscope_compare_with_a_note() {
    let (Some(a), Some(b)) = (
        fixture("memscope_dump_20250428113810.csv"),
        fixture("memscope_dump_20250428113811.csv"),
    ) else {
        return;
    };
    let alias_cwd = tempfile::tempdir().unwrap();
    let o = Command::new(memscope_bin())
        .current_dir(alias_cwd.path())
        .arg("--compare")
        .arg(format!("--input-path={},{}", a.display(), b.display()))
        .arg("--level=kernel")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let notes: Vec<&str> = err.lines().filter(|l| l.contains("note:")).collect();
    assert_eq!(notes.len(), 1, "{err}");
    assert!(notes[0].contains("memscope compare "), "{err}");
    let alias = result(&alias_cwd.path().join("memscopeDumpResults"));

    let native = tempfile::tempdir().unwrap();
    let o = Command::new(memscope_bin())
        .arg("compare")
        .args([&a, &b])
        .args(["--level", "kernel", "-o"])
        .arg(native.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(alias, result(native.path()));
    assert_eq!(alias[0], ",,,Base,Compare");
    assert_eq!(
        alias.len(),
        2 + 12,
        "msMemScope's smoke test expects 12 rows"
    );

    // the old option names and an -o of msMemScope's spelling
    let out = tempfile::tempdir().unwrap();
    let o = Command::new(memscope_bin())
        .args(["--level", "kernel", "--compare", "-i"])
        .arg(format!("{}，{}", a.display(), b.display()))
        .arg(format!("--output-path={}", out.path().display()))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(result(out.path()), alias);
}

#[test]
fn msmemscope_command_runs_the_english_guides_compare_line() {
    // issue 26: `msmemscope --compare --input=path1,path2 --level=kernel`, as msMemScope's
    // English user guide writes it (the old `--input` gets its one-line note)
    let (Some(a), Some(b)) = (
        fixture("memscope_dump_20250428113810.csv"),
        fixture("memscope_dump_20250428113811.csv"),
    ) else {
        return;
    };
    let cwd = tempfile::tempdir().unwrap();
    let o = Command::new(profile_dir().join("msmemscope"))
        .current_dir(cwd.path())
        .arg("--compare")
        .arg(format!("--input={},{}", a.display(), b.display()))
        .arg("--level=kernel")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert_eq!(
        err.trim(),
        "msmemscope: '--input' is deprecated, use '--input-path' instead"
    );
    let rows = result(&cwd.path().join("memscopeDumpResults"));
    assert_eq!(
        rows.len(),
        2 + 12,
        "msMemScope's smoke test expects 12 rows"
    );
}

#[test]
fn a_malformed_compare_invocation_is_one_line_and_exit_code_2() {
    for args in [
        vec!["--compare"],
        vec!["--input-path=a.csv,b.csv"],
        vec!["--compare", "--input-path=a.csv"],
        vec!["--compare", "--input-path=a.csv,b.csv", "--steps=3"],
    ] {
        let o = Command::new(memscope_bin()).args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("memscope: "), "{err}");
    }
}

/// msMemScope's smoke suite (`test/smoke/src/test_suit/step_compare_test.py`) compares these
/// two lines, newline included, and counts the rows after them.
const SMOKE_LINE_1: &str = ",,,Base,Compare\n";
const SMOKE_LINE_2: &str =
    "Event,Name,Device Id,Allocated Memory(byte),Allocated Memory(byte),Diff Memory(byte)\n";

/// The one `memory_compare_<digits>.csv` under `dir` (searched as the smoke suite does: every
/// sub-folder), whole.
fn smoke_result(dir: &Path) -> String {
    let mut found = Vec::new();
    walk(dir, &mut |p| {
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("memory_compare") && name.ends_with(".csv") {
            found.push(p.to_path_buf());
        }
    });
    assert_eq!(found.len(), 1, "{found:?}");
    let name = found[0].file_name().unwrap().to_string_lossy().into_owned();
    let digits = name
        .trim_start_matches("memory_compare_")
        .trim_end_matches(".csv");
    assert!(
        !digits.is_empty() && digits.len() <= 20 && digits.bytes().all(|b| b.is_ascii_digit()),
        "{name} does not match memory_compare_\\d{{1,20}}\\.csv"
    );
    std::fs::read_to_string(&found[0]).unwrap()
}

/// msMemScope's smoke pair (`None`, with a SKIP line, without the fixtures).
fn smoke_pair() -> Option<(PathBuf, PathBuf)> {
    Some((
        fixture("memscope_dump_20250428113810.csv")?,
        fixture("memscope_dump_20250428113811.csv")?,
    ))
}

/// Runs `memscope ARGS` in `cwd`; it must succeed. Returns its stderr.
fn memscope_in(cwd: &Path, args: &[std::ffi::OsString]) -> String {
    let o = Command::new(memscope_bin())
        .current_dir(cwd)
        .args(args)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{args:?}: {err}");
    err
}

/// `memscope compare A B --level kernel [EXTRA] -o OUT`.
fn native_compare(a: &Path, b: &Path, extra: &[&str], out: &Path) -> Vec<std::ffi::OsString> {
    let mut v: Vec<std::ffi::OsString> = vec!["compare".into(), a.into(), b.into()];
    v.extend(["--level", "kernel"].iter().chain(extra).map(Into::into));
    v.extend(["-o".into(), out.into()]);
    v
}

/// run_st.py's step_compare_cmd, word for word, with `--log-level=LEVEL`.
fn smoke_command(a: &Path, b: &Path, level: &str) -> Vec<std::ffi::OsString> {
    vec![
        format!("--input={},{}", a.display(), b.display()).into(),
        "--compare".into(),
        format!("--log-level={level}").into(),
        "--level=1".into(),
    ]
}

#[test]
fn msmemscope_smoke_suite_header_check_passes_on_the_compare_of_dump_files() {
    let Some((a, b)) = smoke_pair() else {
        return;
    };
    let smoke = tempfile::tempdir().unwrap();
    memscope_in(smoke.path(), &smoke_command(&a, &b, "info"));
    let native = tempfile::tempdir().unwrap();
    memscope_in(native.path(), &native_compare(&a, &b, &[], native.path()));
    for dir in [
        smoke.path().join("memscopeDumpResults"),
        native.path().into(),
    ] {
        let text = smoke_result(&dir);
        let mut lines = text.split_inclusive('\n');
        assert_eq!(lines.next(), Some(SMOKE_LINE_1), "{}", dir.display());
        assert_eq!(lines.next(), Some(SMOKE_LINE_2), "{}", dir.display());
        assert_eq!(lines.count(), 12, "the smoke suite's LINE_COUNT");
    }
}

#[test]
fn step_column_adds_memscopes_step_only_when_asked_for() {
    let Some((a, b)) = smoke_pair() else {
        return;
    };
    let out = tempfile::tempdir().unwrap();
    memscope_in(
        out.path(),
        &native_compare(&a, &b, &["--step-column"], out.path()),
    );
    let lines = result(out.path());
    assert_eq!(lines[0], ",,,Base,Compare");
    assert_eq!(lines[1], format!("{},Step", SMOKE_LINE_2.trim_end()));
    assert!(
        lines[2..].iter().all(|l| l.split(',').count() == 7),
        "{lines:?}"
    );
}

#[test]
fn log_level_error_leaves_out_the_notes_of_the_compare() {
    let Some((a, b)) = smoke_pair() else {
        return;
    };
    let cwd = tempfile::tempdir().unwrap();
    let err = memscope_in(cwd.path(), &smoke_command(&a, &b, "error"));
    assert!(!err.contains("note:"), "{err}");
    let err = memscope_in(cwd.path(), &smoke_command(&a, &b, "info"));
    assert!(err.contains("note:"), "{err}");
}

#[test]
fn compare_of_kernel_launches_only_names_the_kernel_level_in_one_line() {
    let d = tempfile::tempdir().unwrap();
    let rows = "1,KERNEL_LAUNCH,KERNEL_LAUNCH,MatMul,100,7,7,0,N/A,\"{streamId:1,taskId:0,stream:0x10}\",,\n\
                2,MALLOC,PTA,N/A,150,7,7,0,0x0000000000000010,\"{addr:0x10,size:512,owner:PTA@w}\",,\n";
    let header = "ID,Event,Event Type,Name,Timestamp(ns),Process Id,Thread Id,Device Id,Ptr,Attr,Call Stack(Python),Call Stack(C)";
    for k in ["k1.csv", "k2.csv"] {
        std::fs::write(d.path().join(k), format!("{header}\n{rows}")).unwrap();
    }
    let memscope_in = |args: &[&str]| {
        Command::new(memscope_bin())
            .current_dir(d.path())
            .args(args)
            .output()
            .unwrap()
    };
    let stderr = |o: &std::process::Output| String::from_utf8_lossy(&o.stderr).into_owned();
    let o = memscope_in(&["compare", "k1.csv", "k2.csv", "-o", "cmp"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(stderr(&o).trim_end().lines().count(), 1, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("but both hold KERNEL_LAUNCH rows: compare them with --level kernel"),
        "{}",
        stderr(&o)
    );
    let o = memscope_in(&[
        "compare", "k1.csv", "k2.csv", "--level", "kernel", "-o", "cmp",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}
