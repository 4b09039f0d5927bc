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
