//! The Python side of a job, for `memscope run`, `memscope collect` and `memscope recover`:
//!
//! * [`python_env`]: the environment `memscope run` adds for Python jobs — the run's
//!   configuration (`MEMSCOPE_RUN_CONFIG`, so `memscope.config()` can tell what differs), and
//!   for `--events traceback` a bootstrap `sitecustomize` that starts the tracer in every Python
//!   process of the job (chaining to the job's own `sitecustomize`).
//! * [`finish_python`]: after the run, the Python trace files into the `.db` dumps.

use memscope_collect::config::RunConfig;
use std::path::Path;
use std::process::Command;

/// The bootstrap `sitecustomize.py` of `--events traceback` and `--call-stack python`: starts
/// the probe's tracer (`MEMSCOPE_PY_TRACE=1`) and Python stacks (`MEMSCOPE_PY_STACK=1`), and
/// its hook for threads started later, after running the job's own `sitecustomize`, if any.
const SITECUSTOMIZE: &str = r#"# Written by `memscope run`: starts memscope's Python tracer and/or Python stacks.
import os as _os, sys as _sys
_here = _os.path.dirname(_os.path.abspath(__file__))
_sys.path[:] = [p for p in _sys.path if _os.path.abspath(p or ".") != _here]
_me = _sys.modules.pop("sitecustomize", None)
try:
    import sitecustomize  # noqa: F401 - the job's own, if it has one
except ImportError:
    pass
if _me is not None:
    _sys.modules["sitecustomize"] = _me
def _memscope_start():
    import ctypes, threading
    try:
        lib = ctypes.PyDLL(None)
        thread = lib.memscope_py_trace_thread
        starts = []
        if _os.environ.get("MEMSCOPE_PY_TRACE") == "1":
            starts.append(lib.memscope_py_trace_start)
        if _os.environ.get("MEMSCOPE_PY_STACK") == "1":
            how = 1 if _os.environ.get("MEMSCOPE_PY_STACK_HOOK") == "profile" else 0
            starts.append(lambda: lib.memscope_py_stacks_start_with(how))
    except (OSError, AttributeError):
        return
    if not [s for s in starts if s() >= 0]:
        return
    def _hook(*_):
        thread()  # replaces this Python hook by the probe's C-level one
    threading.setprofile(_hook)
_memscope_start()
del _memscope_start
def _memscope_hooks(env, name, what):
    # the torch hooks (MEMSCOPE_PY_TORCH) and the framework hooks of --analysis decompose
    # (MEMSCOPE_PY_DECOMPOSE), from this folder, enabled as the run's config.json says
    if _os.environ.get(env) != "1":
        return
    try:
        import ctypes, json, importlib.util
        spec = importlib.util.spec_from_file_location(name, _os.path.join(_here, name + ".py"))
        mod = importlib.util.module_from_spec(spec)
        _sys.modules[name] = mod
        spec.loader.exec_module(mod)
        mod.enable(ctypes.PyDLL(None), json.loads(_os.environ.get("MEMSCOPE_RUN_CONFIG", "{}")))
    except Exception as e:  # noqa: BLE001 - never break the job's start
        _sys.stderr.write("memscope: %s hooks not installed: %s\n" % (what, e))
_memscope_hooks("MEMSCOPE_PY_TORCH", "memscope_torch_hooks", "torch")
_memscope_hooks("MEMSCOPE_PY_DECOMPOSE", "memscope_framework_hooks", "framework")
del _memscope_hooks
"#;

/// The torch hooks (`python/memscope/_aten.py`), written into the bootstrap directory as
/// `memscope_torch_hooks.py` so jobs without the `memscope` package get them too.
const TORCH_HOOKS: &str = include_str!("../../python/memscope/_aten.py");

/// The framework hooks of the decompose analysis (`python/memscope/framework_hooks.py`,
/// issue 25), written into the bootstrap directory as `memscope_framework_hooks.py`.
const FRAMEWORK_HOOKS: &str = include_str!("../../python/memscope/framework_hooks.py");

/// Adds the Python-related environment of `memscope run` to the job's command.
///
/// # Errors
/// The bootstrap directory cannot be written (one line naming it).
pub fn python_env(cmd: &mut Command, cfg: &RunConfig, spool: &Path) -> Result<(), String> {
    if let Ok(j) = serde_json::to_string(&cfg.to_config_file()) {
        cmd.env("MEMSCOPE_RUN_CONFIG", j);
    }
    let stacks = cfg.call_stack.python.is_some_and(|n| n > 0);
    let torch = torch_hooks_wanted(cfg);
    if !cfg.events.traceback && !stacks && !torch {
        return Ok(());
    }
    let boot = spool.join("pyboot");
    memscope_dump::layout::create_dir_0750(&boot)
        .and_then(|()| std::fs::write(boot.join("sitecustomize.py"), SITECUSTOMIZE))
        .and_then(|()| std::fs::write(boot.join("memscope_torch_hooks.py"), TORCH_HOOKS))
        .and_then(|()| std::fs::write(boot.join("memscope_framework_hooks.py"), FRAMEWORK_HOOKS))
        .map_err(|e| format!("cannot write the Python bootstrap {}: {e}", boot.display()))?;
    let mut path = boot.display().to_string();
    if let Some(old) = std::env::var_os("PYTHONPATH") {
        if !old.is_empty() {
            path.push(':');
            path.push_str(&old.to_string_lossy());
        }
    }
    cmd.env("PYTHONPATH", path);
    if cfg.events.traceback {
        cmd.env("MEMSCOPE_PY_TRACE", "1");
    }
    if stacks {
        cmd.env("MEMSCOPE_PY_STACK", "1");
    }
    if torch {
        cmd.env("MEMSCOPE_PY_TORCH", "1");
    }
    if cfg.analysis.decompose {
        cmd.env("MEMSCOPE_PY_DECOMPOSE", "1");
    }
    Ok(())
}

/// Whether the job's torch (if it imports one) gets memscope's dispatch-mode hooks: Aten op
/// launches (`--level op` with `launch`, or the inefficient or races analysis), ACCESS rows
/// (`--events access`, or decompose/inefficient/races), CPU tensors (`--device cpu`), `--watch`
/// (the conditions of `memscope/_aten.py`'s `wanted`).
fn torch_hooks_wanted(cfg: &RunConfig) -> bool {
    let a = cfg.analysis;
    let ops = ((cfg.events.launch || a.inefficient) && cfg.level.op) || a.races;
    let access = cfg.events.access || a.decompose || a.inefficient || a.races;
    ops || access || cfg.device.cpu || cfg.watch.is_some()
}

/// After a run (`memscope run` or `memscope collect`): for a process whose dumps are `.db`
/// (`--format db`, or its own `memscope.config(format="db")`), moves every
/// `python_trace_*.csv` into table `python_trace_<pid>` of the `.db` dump in the same folder
/// (behaviour spec §5.3: `FuncInfo TEXT, StartTime(ns) TEXT, EndTime(ns) TEXT, Thread Id
/// INTEGER, Process Id INTEGER`; `N/A` times kept as text), keeping the CSV when there is no
/// `.db` beside it; then one-line warnings about Python options that could not take effect:
/// `--events traceback` with no Python process traced (the job is not Python, or runs it with
/// `-S`/`-I`, which skip the bootstrap).
pub fn finish_python(cfg: &RunConfig, summaries: &[memscope_collect::process::ProcessSummary]) {
    let mut traces = Vec::new();
    for s in summaries {
        // the process's own format: `memscope.config(format="db")` may differ from the run's
        let db = s
            .files
            .iter()
            .any(|(f, _)| f.extension().is_some_and(|e| e == "db"));
        visit(&s.project_dir, &mut |p| {
            if p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("python_trace_") && n.ends_with(".csv"))
            {
                traces.push((s.pid, p.to_path_buf(), db));
            }
        });
    }
    for (pid, csv, db) in &traces {
        if *db {
            if let Err(e) = trace_into_db(*pid, csv) {
                eprintln!("memscope: {}: {e}; the CSV is kept", csv.display());
            }
        }
    }
    if cfg.events.traceback && traces.is_empty() {
        eprintln!(
            "memscope: --events traceback: no Python process of the job was traced (not Python, or started with -S/-I, which skip the tracer's bootstrap)"
        );
    }
}

fn trace_into_db(pid: u32, csv_path: &Path) -> anyhow::Result<()> {
    let dir = csv_path.parent().unwrap_or(Path::new("."));
    let db = std::fs::read_dir(dir)?
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("memscope_dump_") && n.ends_with(".db"))
        })
        .ok_or_else(|| anyhow::anyhow!("no .db dump in this folder for the python_trace rows"))?;
    let mut conn = rusqlite::Connection::open(&db)?;
    let tx = conn.transaction()?;
    tx.execute_batch(&format!(
        "CREATE TABLE IF NOT EXISTS python_trace_{pid} (\"FuncInfo\" TEXT, \"StartTime(ns)\" TEXT, \
         \"EndTime(ns)\" TEXT, \"Thread Id\" INTEGER, \"Process Id\" INTEGER)"
    ))?;
    {
        let mut st = tx.prepare(&format!(
            "INSERT INTO python_trace_{pid} VALUES (?1, ?2, ?3, ?4, ?5)"
        ))?;
        let mut r = csv::Reader::from_path(csv_path)?;
        for rec in r.records() {
            let rec = rec?;
            let int = |i: usize| rec.get(i).and_then(|v| v.parse::<i64>().ok());
            st.execute(rusqlite::params![
                rec.get(0).unwrap_or(""),
                rec.get(1).unwrap_or(""),
                rec.get(2).unwrap_or(""),
                int(3),
                int(4)
            ])?;
        }
    }
    tx.commit()?;
    drop(conn);
    std::fs::remove_file(csv_path)?;
    Ok(())
}
fn visit(dir: &Path, f: &mut dyn FnMut(&Path)) {
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                visit(&p, f);
            } else {
                f(&p);
            }
        }
    }
}
