//! Each fuzz target runs a few hundred inputs (its seeds, then mutations) without a crash:
//! the targets build, read their seeds, and the driver's bookkeeping works. The real runs are
//! `benches/fuzz/run.sh` (minutes per target, memory capped).

use std::process::Command;

fn smoke(bin: &str, name: &str) {
    let out = tempfile::tempdir().unwrap();
    let o = Command::new(bin)
        .args(["--runs", "300", "--duration", "120", "--out"])
        .arg(out.path())
        .arg("--work")
        .arg(out.path().join("work"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        stdout.starts_with(&format!("fuzz_{name}: 300 executions in "))
            && stdout.contains("0 panics"),
        "{stdout}"
    );
    // a replay of the last input reports its outcome
    let cur = std::fs::read_dir(out.path().join("work"))
        .unwrap()
        .flatten()
        .find(|e| e.file_name().to_string_lossy().starts_with("current."))
        .expect("current input kept in --work")
        .path();
    let o = Command::new(bin)
        .arg("--replay")
        .arg(&cur)
        .args(["--out"])
        .arg(out.path())
        .arg("--work")
        .arg(out.path().join("replay"))
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn the_csv_target_runs_without_a_crash() {
    smoke(env!("CARGO_BIN_EXE_fuzz_csv"), "csv");
}

#[test]
fn the_db_target_runs_without_a_crash() {
    smoke(env!("CARGO_BIN_EXE_fuzz_db"), "db");
}

#[test]
fn the_config_target_runs_without_a_crash() {
    smoke(env!("CARGO_BIN_EXE_fuzz_config"), "config");
}

#[test]
fn the_stream_target_runs_without_a_crash() {
    smoke(env!("CARGO_BIN_EXE_fuzz_stream"), "stream");
}

#[test]
fn the_capture_target_runs_without_a_crash() {
    smoke(env!("CARGO_BIN_EXE_fuzz_capture"), "capture");
}
