//! Helpers shared by the HOST adapter's integration tests (`host.rs`, `host_safety.rs`).
#![allow(dead_code)]

use memscope_tests::*;

use std::path::PathBuf;
use std::process::Command;

/// Compiles `tests/programs/<name>.c|.cpp` with `flags` into `<name><suffix>` (no extra
/// libraries: these programs only need libc/libstdc++).
pub fn build(name: &str, suffix: &str, flags: &[&str]) -> PathBuf {
    // Once per test binary: a rebuild renames a new file over a program another test may be
    // running, whose stacks are then symbolised from "… (deleted)" (as memscope_tests::compile)
    static BUILT: std::sync::Mutex<Vec<(String, PathBuf)>> = std::sync::Mutex::new(Vec::new());
    let key = format!("{name}|{suffix}|{flags:?}");
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, p)) = built.iter().find(|(k, _)| *k == key) {
        return p.clone();
    }
    let out = build_now(name, suffix, flags);
    built.push((key, out.clone()));
    out
}

fn build_now(name: &str, suffix: &str, flags: &[&str]) -> PathBuf {
    let dir = programs_dir();
    std::fs::create_dir_all(&dir).unwrap();
    let c = repo_root().join("tests/programs").join(format!("{name}.c"));
    let (src, cpp) = if c.is_file() {
        (c, false)
    } else {
        (
            repo_root()
                .join("tests/programs")
                .join(format!("{name}.cpp")),
            true,
        )
    };
    let out = dir.join(format!("{name}{suffix}"));
    let tmp = private_name(&out);
    let o = Command::new(c_compiler(cpp))
        .args(["-g", "-Wall"])
        .args(flags)
        .arg(&src)
        .arg("-o")
        .arg(&tmp)
        .args(["-lpthread", "-ldl"])
        .output()
        .expect("run the C compiler");
    assert!(
        o.status.success(),
        "compiling {name}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    std::fs::rename(&tmp, &out).unwrap();
    out
}

/// A private name next to `out` to compile to and rename from: tests running in parallel may
/// build the same program while another runs it ("Text file busy" on an in-place write).
pub fn private_name(out: &std::path::Path) -> PathBuf {
    static SEQ: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = out.file_name().unwrap().to_string_lossy();
    out.with_file_name(format!(".{name}.{}.{seq}", std::process::id()))
}

/// Compiles `tests/programs/<name>.c` into the shared object `out` (frame pointers, debug
/// information, no DT_SONAME).
pub fn build_lib(name: &str, out: &std::path::Path) -> PathBuf {
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    let src = repo_root().join("tests/programs").join(format!("{name}.c"));
    let tmp = private_name(out);
    let o = Command::new(c_compiler(false))
        .args([
            "-g",
            "-Wall",
            "-O1",
            "-fno-omit-frame-pointer",
            "-shared",
            "-fPIC",
        ])
        .arg(&src)
        .arg("-o")
        .arg(&tmp)
        .output()
        .expect("run the C compiler");
    assert!(
        o.status.success(),
        "compiling {name}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    std::fs::rename(&tmp, out).unwrap();
    out.to_path_buf()
}

pub fn prog(name: &str) -> PathBuf {
    build(name, "", &["-O1", "-fno-omit-frame-pointer"])
}

pub fn host(rows: &[Row]) -> Vec<&Row> {
    rows.iter().filter(|r| r["Event Type"] == "HOST").collect()
}

pub fn size(r: &Row) -> u64 {
    attrs(r)["size"].parse().unwrap()
}

pub fn count(rows: &[&Row], event: &str, sz: u64) -> usize {
    rows.iter()
        .filter(|r| r["Event"] == event && size(r) == sz)
        .count()
}

pub fn run_host(args: &[&str], program: &[&str]) -> Run {
    let mut a = vec!["--adapters", "host", "--host-rows"];
    a.extend_from_slice(args);
    memscope_run(&a, program, &[])
}

/// The real CPython binary (the `python3` on PATH may be a wrapper script).
pub fn python() -> String {
    let o = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("python3");
    String::from_utf8_lossy(&o.stdout).trim().to_owned()
}
