//! Shared helpers of the integration tests: locate the built `memscope` binary, the probe and
//! the sim-npu stand-ins, compile small C programs, run jobs under `memscope run`, and read the
//! dumps back with independent readers (the `csv` crate, SQLite).
//!
//! The binaries come from `cargo build --workspace` (the README's test command runs it first).
//!
//! Jobs of another architecture (`.ci/aarch64-tests.sh`: aarch64 jobs under qemu, traced by
//! this build's collector or by an aarch64 one) take, from the environment:
//! `MEMSCOPE_TEST_JOB_DIR` — the `target/<triple>/<profile>` directory whose probe and sim-npu
//! stand-ins the jobs use (their test programs are built there too),
//! `MEMSCOPE_TEST_CC`/`MEMSCOPE_TEST_CXX` — the compilers of the test programs, and
//! `MEMSCOPE_TEST_MEMSCOPE` — the collector to run (default: this build's),
//! `MEMSCOPE_TEST_JOB_PYTHON` — the CPython of the Python jobs and of their venvs (default:
//! `python3`'s), and `MEMSCOPE_TEST_WHEEL` — a wheel built for it, installed instead of one
//! built here.
#![forbid(unsafe_code)]

pub mod compliance;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// `target/<profile>` of the running test binary (`target/<profile>/deps/<test>`).
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    exe.parent()
        .and_then(Path::parent)
        .expect("target/<profile>")
        .to_path_buf()
}

fn built(name: &str) -> PathBuf {
    let p = profile_dir().join(name);
    assert!(
        p.is_file(),
        "{} is missing: build the workspace first (`cargo build --workspace`), as the README's test command does",
        p.display()
    );
    p
}

/// Where the jobs' own binaries are (probe, sim-npu, test programs): `MEMSCOPE_TEST_JOB_DIR`
/// for jobs of another architecture, else this build's [`profile_dir`].
pub fn job_dir() -> PathBuf {
    match std::env::var_os("MEMSCOPE_TEST_JOB_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => profile_dir(),
    }
}

/// The C (`cpp`: C++) compiler of the test programs: `MEMSCOPE_TEST_CC` / `MEMSCOPE_TEST_CXX`
/// (a cross compiler for jobs of another architecture), else `cc` / `c++`.
pub fn c_compiler(cpp: bool) -> String {
    let (var, default) = if cpp {
        ("MEMSCOPE_TEST_CXX", "c++")
    } else {
        ("MEMSCOPE_TEST_CC", "cc")
    };
    std::env::var(var)
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| default.to_owned())
}

/// The directory the test programs are compiled into (one per job architecture).
pub fn programs_dir() -> PathBuf {
    job_dir().join("test-programs")
}

/// The `memscope` executable: `MEMSCOPE_TEST_MEMSCOPE`, else this build's.
pub fn memscope_bin() -> PathBuf {
    match std::env::var_os("MEMSCOPE_TEST_MEMSCOPE") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => built("memscope"),
    }
}

/// The preload library (of the jobs' architecture).
pub fn probe_lib() -> PathBuf {
    let p = job_dir().join("libmemscope_probe.so");
    assert!(
        p.is_file(),
        "{} is missing: build the workspace first",
        p.display()
    );
    p
}

/// The sim-npu stand-in directory (`lib64/`, `atb/cxx_abi_*/lib/`).
pub fn sim_npu_dir() -> PathBuf {
    let d = job_dir().join("sim-npu");
    assert!(
        d.join("lib64").is_dir(),
        "{} is missing: build the workspace first",
        d.display()
    );
    d
}

/// The sim-npu libraries a program calling the ACL runtime links (`compile`'s `extra`).
pub const ACL_LIBS: &[&str] = &["-lascendcl", "-lascendcl_impl", "-lruntime", "-lascend_hal"];

/// Compiles C (or C++, by extension) sources into an executable or shared object under a
/// per-test-binary cache directory, linking the msTX front end. `shared` builds a `.so`.
/// Returns the output path. Panics with the compiler's output on failure.
pub fn compile(sources: &[&Path], out_name: &str, extra: &[&str], shared: bool) -> PathBuf {
    // Once per test binary and set of arguments: a rebuild renames a new file over a program
    // another test may be running (its /proc/PID/exe then reads "… (deleted)").
    static BUILT: std::sync::Mutex<Vec<(String, PathBuf)>> = std::sync::Mutex::new(Vec::new());
    let key = format!("{out_name}|{sources:?}|{extra:?}|{shared}");
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, p)) = built.iter().find(|(k, _)| *k == key) {
        return p.clone();
    }
    let out = compile_now(sources, out_name, extra, shared);
    built.push((key, out.clone()));
    out
}

fn compile_now(sources: &[&Path], out_name: &str, extra: &[&str], shared: bool) -> PathBuf {
    let out_dir = programs_dir();
    std::fs::create_dir_all(&out_dir).expect("create test-programs dir");
    let out = out_dir.join(out_name);
    // Compile to a private name and rename: tests in parallel (threads and test binaries) may
    // build the same program while another runs it ("Text file busy" on an in-place write).
    static SEQ: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = out_dir.join(format!(".{out_name}.{}.{seq}", std::process::id()));
    let lib64 = sim_npu_dir().join("lib64");
    let cpp = sources
        .iter()
        .any(|s| s.extension().is_some_and(|e| e == "cpp" || e == "cc"));
    let mut cmd = Command::new(c_compiler(cpp));
    cmd.args(["-O1", "-g", "-fno-omit-frame-pointer", "-Wall"])
        .arg("-I")
        .arg(repo_root().join("examples/sim-npu/csrc"))
        .arg("-I")
        .arg(repo_root().join("schemas"));
    if shared {
        cmd.args(["-shared", "-fPIC"]);
    }
    cmd.args(sources).arg("-o").arg(&tmp);
    cmd.arg(format!("-L{}", lib64.display()))
        .arg(format!("-Wl,-rpath,{}", lib64.display()))
        .args(extra)
        .args(["-lms_tools_ext", "-lpthread", "-ldl"]);
    let o = cmd.output().expect("run the C compiler");
    assert!(
        o.status.success(),
        "compiling {out_name} failed:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    std::fs::rename(&tmp, &out).expect("move the compiled program in place");
    out
}

/// Compiles `tests/programs/<name>.c` into an executable named `<name>`.
pub fn program(name: &str) -> PathBuf {
    let src = repo_root().join("tests/programs").join(format!("{name}.c"));
    compile(&[&src], name, &[], false)
}

/// The result of one `memscope run`.
pub struct Run {
    /// Exit status, stdout and stderr of `memscope`.
    pub output: Output,
    /// The output directory (kept until the value drops).
    pub out: tempfile::TempDir,
}

impl Run {
    /// `memscope`'s exit code.
    pub fn code(&self) -> i32 {
        self.output.status.code().unwrap_or(-1)
    }
    /// stdout as text.
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.output.stdout).into_owned()
    }
    /// stderr as text.
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }
    /// Every dump file (`memscope_dump_*.{csv,db}`) under the output directory, sorted.
    pub fn dumps(&self, ext: &str) -> Vec<PathBuf> {
        let mut v = Vec::new();
        walk(self.out.path(), &mut |p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if name.starts_with("memscope_dump_") && name.ends_with(ext) {
                v.push(p.to_path_buf());
            }
        });
        v.sort();
        v
    }
    /// Every row of every CSV dump.
    pub fn rows(&self) -> Vec<Row> {
        self.dumps(".csv")
            .iter()
            .flat_map(|p| read_csv(p))
            .collect()
    }
}

/// Asserts that a command succeeded, showing its status and output otherwise; returns its
/// stdout and stderr, concatenated.
pub fn assert_ok(o: &Output, what: &str) -> String {
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "{what}: {:?}\n{text}", o.status);
    text
}

/// The entries of `dir` (not recursive) whose names start with `prefix`, sorted.
pub fn entries(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with(prefix))
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// The names of every adapter shipped in this repository: one crate each under `adapters/`
/// (`adapters/<name>`, package `memscope-adapter-<name>`), sorted. Each has one descriptor in
/// the CLI's registration list (`memscope-cli/src/builtin.rs`, checked by its unit test), so
/// a test that takes its names from here cannot leave a new adapter out.
pub fn adapter_names() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(repo_root().join("adapters"))
        .expect("adapters/")
        .flatten()
        .filter(|e| e.path().join("Cargo.toml").is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    assert!(v.len() >= 8, "found the adapters: {v:?}");
    v
}

/// Calls `f` for every file under `dir`, recursively.
pub fn walk(dir: &Path, f: &mut dyn FnMut(&Path)) {
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, f);
            } else {
                f(&p);
            }
        }
    }
}

/// Runs `memscope run <args> -- <program...>` with `-o <tempdir>` and extra environment.
pub fn memscope_run(args: &[&str], program: &[&str], envs: &[(&str, &str)]) -> Run {
    let out = tempfile::tempdir().expect("tempdir");
    let mut cmd = Command::new(memscope_bin());
    cmd.arg("run")
        .arg("-o")
        .arg(out.path())
        .args(args)
        .arg("--")
        .args(program);
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let output = cmd.output().expect("run memscope");
    Run { output, out }
}

/// One dump row, by header name.
pub type Row = HashMap<String, String>;

/// Reads a CSV dump with the `csv` crate (RFC 4180), checking the header.
pub fn read_csv(path: &Path) -> Vec<Row> {
    let mut r = csv::Reader::from_path(path).expect("open csv");
    let header: Vec<String> = r
        .headers()
        .expect("header")
        .iter()
        .map(str::to_owned)
        .collect();
    assert_eq!(
        header.join(","),
        "ID,Event,Event Type,Name,Timestamp(ns),Process Id,Thread Id,Device Id,Ptr,Attr,Call Stack(Python),Call Stack(C)"
    );
    r.records()
        .map(|rec| {
            let rec = rec.expect("csv record");
            header
                .iter()
                .cloned()
                .zip(rec.iter().map(str::to_owned))
                .collect()
        })
        .collect()
}

/// Reads a `.db` dump (table `memscope_dump`) into rows keyed like the CSV header; Attr is
/// converted from JSON to the CSV `{k:v,...}` text so rows compare equal.
pub fn read_db(path: &Path) -> Vec<Row> {
    let conn = rusqlite::Connection::open(path).expect("open db");
    let mut st = conn
        .prepare("SELECT * FROM memscope_dump ORDER BY ID")
        .expect("select");
    let names: Vec<String> = st.column_names().into_iter().map(str::to_owned).collect();
    let rows = st
        .query_map([], |r| {
            let mut m = Row::new();
            for (i, n) in names.iter().enumerate() {
                let v: rusqlite::types::Value = r.get(i)?;
                let s = match v {
                    rusqlite::types::Value::Null => String::new(),
                    rusqlite::types::Value::Integer(i) => i.to_string(),
                    rusqlite::types::Value::Real(f) => f.to_string(),
                    rusqlite::types::Value::Text(t) => t,
                    rusqlite::types::Value::Blob(_) => "<blob>".into(),
                };
                m.insert(n.clone(), s);
            }
            Ok(m)
        })
        .expect("query");
    rows.map(|r| {
        let mut r = r.expect("row");
        let attr = r.get("Attr").cloned().unwrap_or_default();
        let pairs = memscope_core::attr_text::parse_attr(&attr);
        let text = if pairs.is_empty() {
            String::new()
        } else {
            format!(
                "{{{}}}",
                pairs
                    .iter()
                    .map(|(k, v)| format!("{k}:{v}"))
                    .collect::<Vec<_>>()
                    .join(",")
            )
        };
        r.insert("Attr".into(), text);
        r
    })
    .collect()
}

/// The Attr pairs of a row.
pub fn attrs(row: &Row) -> HashMap<String, String> {
    memscope_core::attr_text::parse_attr(&row["Attr"])
        .into_iter()
        .collect()
}

/// Rows whose `Event` and `Event Type` match.
pub fn select<'a>(rows: &'a [Row], event: &str, event_type: &str) -> Vec<&'a Row> {
    rows.iter()
        .filter(|r| r["Event"] == event && r["Event Type"] == event_type)
        .collect()
}

/// Builds the standalone Cargo project `examples/<dir>` (an example third-party adapter, outside
/// the workspace) with the cargo running the tests, offline and `--locked` (its `Cargo.lock` is
/// checked in, so nothing is written into the source tree), into
/// `target/<profile>/adapter-examples`. Returns the path of the cdylib `lib<lib_name>.so`. Panics
/// with cargo's output on failure.
pub fn build_adapter_example(dir: &str, lib_name: &str) -> PathBuf {
    let target = profile_dir().join("adapter-examples");
    let manifest = repo_root().join("examples").join(dir).join("Cargo.toml");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let o = Command::new(cargo)
        .args([
            "build",
            "--offline",
            "--locked",
            "--quiet",
            "--manifest-path",
        ])
        .arg(&manifest)
        .arg("--target-dir")
        .arg(&target)
        .output()
        .expect("run cargo");
    assert!(
        o.status.success(),
        "building {} failed:\n{}",
        manifest.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    let lib = target.join("debug").join(format!("lib{lib_name}.so"));
    assert!(lib.is_file(), "{} is missing", lib.display());
    lib
}

/// The real CPython interpreter behind `python3` (`sys.executable`; a version-manager shim
/// would run, and be traced as, extra processes), or `$MEMSCOPE_TEST_JOB_PYTHON`'s.
pub fn python3() -> PathBuf {
    static EXE: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    EXE.get_or_init(|| {
        let py = std::env::var_os("MEMSCOPE_TEST_JOB_PYTHON").unwrap_or_else(|| "python3".into());
        let o = Command::new(py)
            .args(["-c", "import sys; print(sys.executable)"])
            .output()
            .expect("python3 must be installed for the Python tests");
        PathBuf::from(String::from_utf8_lossy(&o.stdout).trim())
    })
    .clone()
}

/// A Python with real torch (CPU): `$MEMSCOPE_TORCH_PYTHON` (`.ci/run` installs torch from
/// PyPI into a venv and sets it), else `python3`; panics saying so when it has no torch.
pub fn torch_python() -> PathBuf {
    let cand = std::env::var_os("MEMSCOPE_TORCH_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(python3);
    let ok = Command::new(&cand)
        .args(["-c", "import torch"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "torch is not importable by {} — these tests need real torch (CPU): run .ci/run, which \
         installs it from PyPI, or set MEMSCOPE_TORCH_PYTHON to a python that has it",
        cand.display()
    );
    cand
}

/// The 1-based line of `script` (under `tests/python/`) that contains `needle`.
pub fn script_line(script: &str, needle: &str) -> usize {
    let p = repo_root().join("tests/python").join(script);
    let text = std::fs::read_to_string(&p).expect("read script");
    text.lines()
        .position(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("{needle:?} not in {}", p.display()))
        + 1
}

/// Every CPython 3.`minors` interpreter found (pyenv's versions, then `python3.X` on PATH), one
/// per minor version.
pub fn pythons(minors: std::ops::RangeInclusive<u32>) -> Vec<PathBuf> {
    let pyenv = std::env::var_os("HOME")
        .map(|h| PathBuf::from(h).join(".pyenv/versions"))
        .unwrap_or_default();
    let mut v = Vec::new();
    for minor in minors {
        let name = format!("python3.{minor}");
        let mut found = std::fs::read_dir(&pyenv)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path().join("bin").join(&name))
            .find(|p| p.is_file());
        if found.is_none() {
            found = std::env::var_os("PATH").and_then(|p| {
                std::env::split_paths(&p)
                    .map(|d| d.join(&name))
                    .find(|c| c.is_file())
            });
        }
        v.extend(found);
    }
    v
}

/// A folder holding a pyenv-style `python3` shim, to put first on `PATH`: a bash script (run
/// through `/usr/bin/env bash`, as pyenv's are) that starts helper processes (`readlink`,
/// `dirname`, `basename`, subshells) before it execs the real python, as pyenv's shims do.
pub fn pyenv_shim() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::tempdir().expect("tempdir");
    let script = format!(
        r#"#!/usr/bin/env bash
set -e
program="$(basename "$0")"
root="$(dirname "$(readlink -f "$0")")"
version="$(echo "3" | cat)"
PYENV_COMMAND_PATH="{}"
[ -x "$PYENV_COMMAND_PATH" ] && [ -n "$program" ] && [ -n "$root" ] && [ -n "$version" ]
exec "$PYENV_COMMAND_PATH" "$@"
"#,
        python3().display()
    );
    let p = d.path().join("python3");
    std::fs::write(&p, script).expect("write the shim");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    d
}

/// `PATH` with `dir` first.
pub fn path_with(dir: &Path) -> String {
    format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// The process of run `run` in the run index `<out>/memscope_run.json` that wrote outputs (the
/// job): pids wrap, so the first in pid order may be a helper that wrote nothing.
pub fn job_process(out: &Path, run: usize) -> serde_json::Value {
    let index: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("memscope_run.json")).unwrap())
            .unwrap();
    index["runs"][run]["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["dir"].is_string())
        .cloned()
        .expect("a process that wrote outputs")
}
