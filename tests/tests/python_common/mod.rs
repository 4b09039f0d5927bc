//! Helpers of the Python-package tests: build the wheel once, a fresh venv with it, run the
//! scripts of `tests/python/` plain or under `memscope run`, and read the seed's layout back.
#![allow(dead_code)]

use memscope_tests::{read_csv, repo_root, sim_npu_dir, walk, Row};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub struct Venv {
    pub dir: PathBuf,
    pub wheel: PathBuf,
}

impl Venv {
    pub fn python(&self) -> PathBuf {
        self.dir.join("bin/python")
    }
    pub fn memscope(&self) -> PathBuf {
        self.dir.join("bin/memscope")
    }
}

pub fn check(out: &Output, what: &str) {
    assert!(
        out.status.success(),
        "{what} failed ({:?})\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs `python/build-wheel.sh` (`--release` in a release build) with `extra`; the wheel's path.
pub fn build_wheel(extra: &[&str]) -> PathBuf {
    let mut build = Command::new(repo_root().join("python/build-wheel.sh"));
    if memscope_tests::profile_dir()
        .file_name()
        .is_some_and(|n| n == "release")
    {
        build.arg("--release");
    }
    let out = build
        .args(extra)
        .output()
        .expect("run python/build-wheel.sh");
    check(&out, "python/build-wheel.sh");
    PathBuf::from(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .last()
            .expect("wheel path")
            .trim(),
    )
}

/// Builds the wheel (dev or release profile, as this test binary; the host's glibc), once per
/// test binary; `$MEMSCOPE_TEST_WHEEL` instead when set (one built for another architecture's
/// `$MEMSCOPE_TEST_JOB_PYTHON`, `.ci/aarch64-tests.sh`).
pub fn wheel() -> &'static PathBuf {
    static W: OnceLock<PathBuf> = OnceLock::new();
    W.get_or_init(|| {
        if let Some(w) = std::env::var_os("MEMSCOPE_TEST_WHEEL") {
            return PathBuf::from(w);
        }
        let maturin = Command::new("python3")
            .args(["-m", "maturin", "--version"])
            .output();
        assert!(
            maturin.is_ok_and(|o| o.status.success()),
            "maturin is not installed: `pip install maturin` (.ci/run installs it)"
        );
        build_wheel(&["--host-glibc"])
    })
}

/// A fresh venv `name` under the build directory with the wheel installed (and, with
/// `system_site`, the packages of `python3` visible, e.g. its pytest).
fn make_venv(name: &str, system_site: bool) -> Venv {
    let wheel = wheel();
    let dir = memscope_tests::profile_dir().join(name);
    let _ = std::fs::remove_dir_all(&dir);
    let mut cmd = Command::new(memscope_tests::python3());
    cmd.args(["-m", "venv"]);
    if system_site {
        cmd.arg("--system-site-packages");
    }
    check(
        &cmd.arg(&dir).output().expect("python3 -m venv"),
        "python3 -m venv",
    );
    let v = Venv {
        dir,
        wheel: wheel.clone(),
    };
    check(
        &Command::new(v.python())
            .args(["-m", "pip", "install", "-q", "--no-index", "--no-deps"])
            .arg(wheel)
            .output()
            .expect("pip install"),
        "pip install the wheel",
    );
    v
}

/// The wheel installed into a fresh venv with nothing else, once per test binary.
pub fn venv() -> &'static Venv {
    static V: OnceLock<Venv> = OnceLock::new();
    V.get_or_init(|| make_venv("python-wheel-venv", false))
}

/// The wheel in a fresh venv that also sees `python3`'s own packages, where pytest must be
/// (`.ci/run` installs it: `python3 -m pip install pytest`), once per test binary.
pub fn pytest_venv() -> &'static Venv {
    static V: OnceLock<Venv> = OnceLock::new();
    V.get_or_init(|| {
        let v = make_venv("python-wheel-pytest-venv", true);
        let ok = Command::new(v.python())
            .args(["-c", "import pytest"])
            .output()
            .is_ok_and(|o| o.status.success());
        assert!(
            ok,
            "pytest is not importable by python3: `python3 -m pip install pytest` (.ci/run installs it)"
        );
        v
    })
}

/// A command of the venv's environment only (no PYTHONPATH, no memscope variables).
pub fn clean(cmd: &mut Command, cwd: &Path) {
    cmd.current_dir(cwd)
        .env_remove("PYTHONPATH")
        // Scripts import modules of the source tree (train.py, fake torch): no __pycache__ there.
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("SIM_NPU_DIR", sim_npu_dir())
        .env("TMPDIR", cwd.join("tmp"));
    for k in [
        "MEMSCOPE_SPOOL",
        "MEMSCOPE_ADAPTERS",
        "MEMSCOPE_COLLECT_MODE",
        "MSTX_INJECTION_PATH",
        "MEMSCOPE_PROBE_PATH",
        "MEMSCOPE_CLI",
        "LD_PRELOAD",
    ] {
        cmd.env_remove(k);
    }
    std::fs::create_dir_all(cwd.join("tmp")).expect("tmp dir");
}

pub fn script(name: &str) -> PathBuf {
    repo_root().join("tests/python").join(name)
}

pub fn example_dir() -> PathBuf {
    repo_root().join("examples/sim-npu")
}

/// Runs `python SCRIPT ARGS` plainly in `cwd`, then waits for its collector to finish (its
/// spool under `cwd/tmp` is removed at the end).
pub fn plain(cwd: &Path, script_args: &[&std::ffi::OsStr]) -> Output {
    let v = venv();
    let mut cmd = Command::new(v.python());
    cmd.args(script_args);
    clean(&mut cmd, cwd);
    let out = cmd.output().expect("run python");
    let t = Instant::now();
    loop {
        let busy = std::fs::read_dir(cwd.join("tmp"))
            .map(|rd| {
                rd.flatten().any(|e| {
                    e.file_name()
                        .to_string_lossy()
                        .starts_with("memscope_spool_")
                })
            })
            .unwrap_or(false);
        if !busy {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "the collector of the plain run did not finish"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    out
}

/// Runs `memscope run ARGS -- python SCRIPT ARGS` from the venv in `cwd`.
pub fn launched(cwd: &Path, run_args: &[&str], script_args: &[&std::ffi::OsStr]) -> Output {
    let v = venv();
    let mut cmd = Command::new(v.memscope());
    cmd.arg("run")
        .arg("-q")
        .args(run_args)
        .arg("--")
        .arg(v.python())
        .args(script_args);
    clean(&mut cmd, cwd);
    cmd.output().expect("run memscope run")
}

pub fn files(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut v = Vec::new();
    walk(dir, &mut |p| {
        if p.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with(prefix))
        {
            v.push(p.to_path_buf());
        }
    });
    v.sort();
    v
}

pub fn is_ts(s: &str) -> bool {
    s.len() == 14 && s.bytes().all(|b| b.is_ascii_digit())
}

/// Checks the seed's layout: `<out>/msmemscope_<pid>_<ts>_ascend/device_0/dump/
/// memscope_dump_<ts>.csv` and `config.json` with msMemScope's keys. Returns the rows.
pub fn seed_layout_rows(out: &Path) -> Vec<Row> {
    let dumps = files(out, "memscope_dump_");
    assert_eq!(dumps.len(), 1, "{dumps:?}");
    let d = &dumps[0];
    let rel: Vec<String> = d
        .strip_prefix(out)
        .unwrap()
        .iter()
        .map(|c| c.to_string_lossy().into_owned())
        .collect();
    assert_eq!(rel.len(), 4, "{rel:?}");
    let p: Vec<&str> = rel[0].split('_').collect();
    assert!(
        p.len() == 4
            && p[0] == "msmemscope"
            && p[1].parse::<u32>().is_ok()
            && is_ts(p[2])
            && p[3] == "ascend",
        "{rel:?}"
    );
    assert_eq!((rel[1].as_str(), rel[2].as_str()), ("device_0", "dump"));
    let ts = rel[3]
        .strip_prefix("memscope_dump_")
        .and_then(|s| s.strip_suffix(".csv"))
        .unwrap();
    assert!(is_ts(ts), "{rel:?}");
    let cfg: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.join(&rel[0]).join("config.json")).expect("config.json"),
    )
    .expect("config.json is JSON");
    for k in [
        "SelectedStepList",
        "dumpEventType",
        "eventType",
        "outputDir",
        "watchConfig",
    ] {
        assert!(cfg.get(k).is_some(), "config.json lacks msMemScope's {k}");
    }
    read_csv(d)
}

/// `file(line): func` of the function `func` defined in `tests/python/<file>` (the FuncInfo its
/// python_trace rows must have).
pub fn func_info(file: &str, func: &str) -> String {
    let path = script(file);
    let text = std::fs::read_to_string(&path).expect("read script");
    let line = text
        .lines()
        .position(|l| l.starts_with(&format!("def {func}(")))
        .expect("function defined")
        + 1;
    format!("{}({line}): {func}", path.display())
}
