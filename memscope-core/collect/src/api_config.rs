//! `memscope.config()` under `memscope run` (issue 27 item 6). The Python package of a traced
//! process asks its collector for the settings the script gave that the `memscope run` flags
//! did not set explicitly (the package tells explicit flags apart from
//! `MEMSCOPE_RUN_EXPLICIT`; explicit flags win, and it says so in one line):
//!
//! * request: `<spool>/api-config-<pid>-<n>.json` (written aside and renamed into place), the
//!   config.json keys to change, in config.json syntax (`output_path` absolute);
//! * answer: `<spool>/api-config-<pid>-<n>.done`, one line: `applied`, or the reason it was
//!   not (a bad value; rows of the process written already under the launcher's settings).
//!
//! The settings apply to that process's outputs only (its directory, dumps, analyses, log),
//! from its first row on; they must come before anything was written.

use crate::config::{RawOptions, RunConfig};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Name prefix of a request.
pub const PREFIX: &str = "api-config-";

/// Largest request read (a real one is a few hundred bytes).
const MAX_REQUEST: u64 = 1 << 20;

/// One request found in the spool.
pub struct Request {
    path: PathBuf,
    keys: Vec<String>,
    raw: Result<RawOptions, String>,
}

/// The requests handled so far and the configuration each process got.
#[derive(Default)]
pub struct ApiConfigs {
    seen: HashSet<PathBuf>,
    by_pid: HashMap<u32, Arc<RunConfig>>,
}

/// The pid of a request file name `api-config-<pid>-<n>.json`.
fn pid_of(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(PREFIX)?.strip_suffix(".json")?;
    let (pid, n) = rest.split_once('-')?;
    n.parse::<u32>().ok()?;
    pid.parse().ok()
}

fn read(path: &Path) -> Result<(Vec<String>, RawOptions), String> {
    let (f, _) = memscope_dump::reader::open_regular_io(path).map_err(|e| e.to_string())?;
    let text = memscope_dump::reader::limits::read_to_string_capped(f, MAX_REQUEST)
        .map_err(|e| e.to_string())?;
    let keys = match serde_json::from_str::<serde_json::Value>(&text) {
        Ok(serde_json::Value::Object(m)) => m.keys().cloned().collect(),
        _ => return Err("not a JSON object".into()),
    };
    let raw = RawOptions::from_json(&text).map_err(|e| e.0)?;
    Ok((keys, raw))
}

impl ApiConfigs {
    /// The requests among `paths` (a spool listing) not handled yet, oldest first per pid.
    pub fn new_requests(&mut self, paths: &[PathBuf]) -> Vec<(u32, Request)> {
        let mut found: Vec<(u32, String, PathBuf)> = paths
            .iter()
            .filter(|p| !self.seen.contains(*p))
            .filter_map(|p| {
                let name = p.file_name()?.to_str()?.to_owned();
                Some((pid_of(&name)?, name, p.clone()))
            })
            .collect();
        found.sort_by(|a, b| (a.0, a.1.len(), &a.1).cmp(&(b.0, b.1.len(), &b.1)));
        found
            .into_iter()
            .map(|(pid, _, path)| {
                self.seen.insert(path.clone());
                let (keys, raw) = match read(&path) {
                    Ok((k, r)) => (k, Ok(r)),
                    Err(e) => (Vec::new(), Err(e)),
                };
                (pid, Request { path, keys, raw })
            })
            .collect()
    }

    /// The configuration process `pid` asked for, if it did.
    pub fn get(&self, pid: u32) -> Option<&Arc<RunConfig>> {
        self.by_pid.get(&pid)
    }

    /// Records the configuration process `pid` got.
    pub fn set(&mut self, pid: u32, cfg: Arc<RunConfig>) {
        self.by_pid.insert(pid, cfg);
    }
}

/// The run's configuration `run` with the request's settings.
///
/// # Errors
/// The request cannot be read, or a value is invalid: one line.
pub fn config_for(run: &RunConfig, req: &Request) -> Result<RunConfig, String> {
    let over = req.raw.clone()?;
    let cwd = std::env::current_dir().map_err(|e| format!("current directory: {e}"))?;
    let mut cfg = RawOptions::from_config_file(run.to_config_file())
        .overlay(over)
        .validate(&cwd)
        .map_err(|e| e.0)?;
    // what the probe was started with stays the run's
    cfg.adapters.clone_from(&run.adapters);
    cfg.adapter_paths.clone_from(&run.adapter_paths);
    cfg.collect_mode = run.collect_mode;
    Ok(cfg)
}

/// The log line of an applied request.
pub fn applied_line(req: &Request) -> String {
    format!(
        "settings from memscope.config() applied: {}",
        req.keys.join(", ")
    )
}

/// Writes the request's answer next to it (written aside, then renamed into place).
pub fn answer(req: &Request, result: &Result<(), String>) {
    let text = match result {
        Ok(()) => "applied\n".to_owned(),
        Err(e) => format!("{}\n", e.replace('\n', " ")),
    };
    let done = req.path.with_extension("done");
    let tmp = req.path.with_extension("done.tmp");
    let written = std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, &done));
    if let Err(e) = written {
        eprintln!("memscope: cannot answer {}: {e}", req.path.display());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_names_give_the_pid_and_other_files_are_not_requests() {
        assert_eq!(pid_of("api-config-42-1.json"), Some(42));
        assert_eq!(pid_of("api-config-42-1.done"), None);
        assert_eq!(pid_of("api-config-42.json"), None);
        assert_eq!(pid_of("42-7.stream"), None);
    }

    #[test]
    fn a_request_overrides_the_runs_settings_but_not_what_the_probe_started_with() {
        let t = tempfile::tempdir().unwrap();
        let run = RawOptions {
            adapters: Some("pta,mstx".into()),
            output_path: Some(t.path().join("run").display().to_string()),
            ..RawOptions::default()
        }
        .validate(t.path())
        .unwrap();
        let out = t.path().join("api");
        let p = t.path().join("api-config-7-1.json");
        std::fs::write(
            &p,
            format!(
                r#"{{"analysis": ["decompose"], "output_path": "{}", "adapters": "hal"}}"#,
                out.display()
            ),
        )
        .unwrap();
        let mut a = ApiConfigs::default();
        let reqs = a.new_requests(&[p.clone(), t.path().join("7-1.stream")]);
        assert_eq!(reqs.len(), 1);
        let (pid, req) = &reqs[0];
        assert_eq!(*pid, 7);
        let cfg = config_for(&run, req).unwrap();
        assert!(cfg.analysis.decompose && !cfg.analysis.leaks);
        assert_eq!(cfg.output_path, out);
        assert_eq!(cfg.adapters, run.adapters, "the probe's adapters stay");
        answer(req, &Ok(()));
        assert_eq!(
            std::fs::read_to_string(t.path().join("api-config-7-1.done")).unwrap(),
            "applied\n"
        );
        assert!(a.new_requests(&[p]).is_empty(), "handled once");
    }
}
