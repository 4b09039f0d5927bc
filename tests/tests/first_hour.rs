//! Issue 35: a Python user's own leak, found without knowing flags; "not recorded" where a
//! source was not traced; `--fail-on leaks` as msMemScope's leak rule with HAL memory live at
//! exit apart (`hal_at_exit`), shown with where it was allocated.

use memscope_tests::*;
use std::path::Path;
use std::process::Command;

/// A training loop that keeps a 1 MiB batch per step (the leak is at line 6, called at line 9).
const LEAKY: &str = "\
import memscope
cache = []


def load_batch(step):
    return bytearray(1 << 20)


def train_step(step):
    cache.append(load_batch(step))


for step in range(20):
    train_step(step)
    memscope.step()
";

fn leaky(dir: &Path) -> std::path::PathBuf {
    let p = dir.join("leaky.py");
    std::fs::write(&p, LEAKY).unwrap();
    p
}

/// `memscope run` with `import memscope` working (the package from the checkout).
fn run_in(dir: &Path, flags: &[&str], prog: &[&str]) -> std::process::Output {
    Command::new(memscope_bin())
        .current_dir(dir)
        .arg("run")
        .args(flags)
        .arg("--")
        .args(prog)
        .env("PYTHONPATH", repo_root().join("python"))
        .env("MEMSCOPE_CLI", memscope_bin())
        .output()
        .unwrap()
}

#[test]
fn a_python_leak_run_the_readme_way_names_the_command_that_finds_it_and_that_command_does() {
    let dir = tempfile::tempdir().unwrap();
    leaky(dir.path());
    let py = python3();
    let py = py.to_str().unwrap();
    let o = run_in(dir.path(), &["-o", "plain"], &[py, "leaky.py"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let hint = err
        .lines()
        .find(|l| l.contains("recorded no allocation of it"))
        .unwrap_or_else(|| panic!("no line names the command:\n{err}"));
    let want = format!("to see where it went: memscope run --adapters host,pymem --call-stack python:8 -- {py} leaky.py");
    assert!(hint.ends_with(&want), "{hint}");
    assert!(
        err.contains("Not recorded: no framework-pool block"),
        "the pool leak section says it looked at nothing:\n{err}"
    );
    assert!(!err.contains("No memory pool leaks detected"), "{err}");

    // the report of that run: "not recorded", not a green "Leaks 0"
    let html = dir.path().join("report.html");
    let r = Command::new(memscope_bin())
        .args(["report", "plain", "-o"])
        .arg(&html)
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("\"pool_recorded\":false"), "report data");
    assert!(
        page.contains("card(\"Leaks\", \"not recorded\""),
        "report page"
    );

    // the command it names finds the leak, caller and all
    let o = run_in(
        dir.path(),
        &[
            "-o",
            "host",
            "--adapters",
            "host,pymem",
            "--call-stack",
            "python:8",
        ],
        &[py, "leaky.py"],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let live = err
        .lines()
        .skip_while(|l| !l.contains("PYMEM Python objects live at exit"))
        .nth(1)
        .unwrap_or_else(|| panic!("no PYMEM live-at-exit section:\n{err}"));
    assert!(
        live.contains("leaky.py(6): load_batch ← leaky.py(10): train_step"),
        "{live}"
    );
    let bytes: u64 = live
        .split(" bytes at")
        .next()
        .and_then(|s| s.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap();
    assert!(bytes >= 20 << 20, "{live}");
    assert!(!err.contains("recorded no allocation of it"), "{err}");
}

#[test]
fn a_pyenv_shim_s_shells_get_no_console_line_but_stay_in_the_run_index() {
    let shim = pyenv_shim();
    let dir = tempfile::tempdir().unwrap();
    leaky(dir.path());
    let o = Command::new(memscope_bin())
        .current_dir(dir.path())
        .args(["run", "-o", "out", "--", "python3", "leaky.py"])
        .env("PATH", path_with(shim.path()))
        .env("PYTHONPATH", repo_root().join("python"))
        .env("MEMSCOPE_CLI", memscope_bin())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(!err.contains("not listed"), "{err}");
    let index = std::fs::read_to_string(dir.path().join("out/memscope_run.json")).unwrap();
    assert!(index.contains("\"helper\": true"), "{index}");
}

#[test]
fn hal_memory_live_at_exit_is_its_own_limit_with_where_it_was_allocated_not_a_leak() {
    let train = repo_root().join("examples/sim-npu/train.py");
    let dir = tempfile::tempdir().unwrap();
    let summary = dir.path().join("s.json");
    let run = memscope_run(
        &[
            "--adapters",
            "pta,mstx,hal",
            "--call-stack",
            "python:8",
            "--fail-on",
            "leaks>1GiB,hal_at_exit>1MiB,leaks.cpu>0",
            "--summary-json",
            summary.to_str().unwrap(),
        ],
        &["python3", train.to_str().unwrap(), "--steps", "5"],
        &[("SIM_NPU_DIR", sim_npu_dir().to_str().unwrap())],
    );
    let err = run.stderr();
    assert_eq!(run.code(), 23, "{err}");
    let crossed: Vec<&str> = err.lines().filter(|l| l.contains(" crossed by ")).collect();
    assert_eq!(crossed.len(), 1, "only the HAL limit: {crossed:?}\n{err}");
    assert!(
        crossed[0].contains("limit hal_at_exit>1MiB"),
        "{}",
        crossed[0]
    );
    assert!(
        crossed[0].contains("train.py("),
        "with where: {}",
        crossed[0]
    );
    assert!(
        err.contains("limit \"leaks.cpu>0\": not recorded"),
        "a limit on nothing traced says so:\n{err}"
    );
    // the console's HAL section names where each block was allocated
    let hal = err
        .lines()
        .skip_while(|l| !l.contains("Leak memory in Malloc operator"))
        .nth(1)
        .unwrap_or_else(|| panic!("no HAL section:\n{err}"));
    assert!(hal.trim_start().starts_with("at "), "{hal}");
    assert!(hal.contains("train.py("), "{hal}");
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    let status: Vec<(&str, &str)> = doc["limits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| (l["limit"].as_str().unwrap(), l["status"].as_str().unwrap()))
        .collect();
    assert_eq!(
        status,
        [
            ("leaks>1GiB", "kept"),
            ("hal_at_exit>1MiB", "crossed"),
            ("leaks.cpu>0", "not recorded")
        ]
    );
    let hal = doc["inputs"][0]["processes"][0]["allocators"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["allocator"] == "HAL")
        .unwrap();
    assert!(hal["leaked_bytes"].is_null(), "{hal}");
    assert!(hal["live_at_exit_bytes"].as_u64().unwrap() >= 1 << 20);
}

#[test]
fn fail_on_leaks_judges_python_objects_and_host_blocks_by_the_step_rule_naming_the_line() {
    let dir = tempfile::tempdir().unwrap();
    leaky(dir.path());
    let py = python3();
    let o = run_in(
        dir.path(),
        &[
            "-o",
            "out",
            "--adapters",
            "host,pymem",
            "--call-stack",
            "python:8",
            "--fail-on",
            "leaks.pymem>1MiB,leaks.host>1MiB",
            "--summary-json",
            "s.json",
        ],
        &[py.to_str().unwrap(), "leaky.py"],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(23), "{err}");
    let crossed: Vec<&str> = err.lines().filter(|l| l.contains(" crossed by ")).collect();
    let pymem = crossed
        .iter()
        .find(|l| l.contains("limit leaks.pymem>1MiB"))
        .unwrap_or_else(|| panic!("{err}"));
    // 20 batches of 1 MiB, one per step: those of steps 2..19 (step 1 and the last are not
    // judged, as msMemScope's pool rule)
    assert!(pymem.contains("(cpu PYMEM)"), "{pymem}");
    assert!(
        pymem.contains("at leaky.py(6): load_batch ← leaky.py(10): train_step")
            || pymem.contains("/leaky.py(6): load_batch ← leaky.py(10): train_step"),
        "{pymem}"
    );
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("s.json")).unwrap()).unwrap();
    let alloc = |t: &str| {
        doc["inputs"][0]["processes"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|p| p["allocators"].as_array().unwrap().iter())
            .find(|a| a["allocator"] == t)
            .cloned()
            .unwrap_or_else(|| panic!("{t} in {doc}"))
    };
    let leaked = alloc("PYMEM")["leaked_bytes"].as_u64().unwrap();
    assert!(
        (18 << 20..19 << 20).contains(&leaked),
        "18 batches of 1 MiB: {leaked}"
    );
    // arenas are backing memory, not judged
    let arenas = doc["inputs"][0]["processes"][0]["allocators"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["allocator"].as_str().unwrap().ends_with("_ARENA"))
        .all(|a| a["leaked_bytes"].is_null());
    assert!(arenas, "{doc}");
}

#[test]
fn a_host_only_run_is_gated_on_what_its_capture_holds_and_analyze_says_not_recorded() {
    // no dump rows at all: every HOST event is in the capture
    let py = python3();
    let run = memscope_run(
        &["--adapters", "host", "--fail-on", "peak.host>16MiB"],
        &[
            py.to_str().unwrap(),
            "-c",
            "x = [bytearray(1 << 20) for _ in range(64)]",
        ],
        &[],
    );
    let err = run.stderr();
    assert_eq!(run.code(), 23, "{err}");
    assert!(
        err.contains("limit peak.host>16MiB crossed by pid"),
        "{err}"
    );
    let o = Command::new(memscope_bin())
        .args(["analyze", "leaks"])
        .arg(run.out.path())
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{text}");
    let row = text.lines().last().unwrap_or("");
    assert!(row.ends_with("not recorded"), "{text}");
}
