//! config.json and flag values before validation: [`RawOptions`] (one per source, overlaid
//! flags-over-file) and its validation into a [`RunConfig`].

use super::*;

/// config.json as a user writes it: every key optional, values in the same syntax as the
/// flags (lists may also be JSON arrays).
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    /// `--events`.
    pub events: Option<StrOrList>,
    /// `--level`.
    pub level: Option<StrOrList>,
    /// `--call-stack`.
    pub call_stack: Option<StrOrList>,
    /// `--analysis`.
    pub analysis: Option<StrOrList>,
    /// `--steps`.
    pub steps: Option<StepsValue>,
    /// `--device`.
    pub device: Option<StrOrList>,
    /// `--output-path`.
    pub output_path: Option<String>,
    /// `--format`.
    pub format: Option<String>,
    /// `--log-level`.
    pub log_level: Option<String>,
    /// `--collect-mode`.
    pub collect_mode: Option<String>,
    /// `--adapters`.
    pub adapters: Option<StrOrList>,
    /// `--adapter-path` (repeatable).
    pub adapter_paths: Option<Vec<String>>,
    /// `--idle-threshold`.
    pub idle_threshold: Option<u64>,
    /// `--inefficient-rule`.
    pub inefficient_rule: Option<String>,
    /// `--host-rows`: write HOST (malloc) rows into the dumps (default false: the capture and
    /// the leak and peak summaries only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_rows: Option<bool>,
    /// `--watch`.
    pub watch: Option<String>,
    /// `--sample`: interval of the memory sampler (`100ms`, `1s`, `250us`; default off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample: Option<String>,
    /// `--aggregate`: per-site totals instead of per-event rows (default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aggregate: Option<bool>,
    /// `--keep`: the flight recorder's bound (`last:5m`, `last:2GiB`, `last:1000000`; default
    /// every row).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep: Option<String>,
}

/// A list given as `"a,b"` or `["a","b"]`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(
    untagged,
    expecting = "expected a string (\"a,b\") or a list of strings ([\"a\", \"b\"])"
)]
#[allow(missing_docs)]
pub enum StrOrList {
    Str(String),
    List(Vec<String>),
}

impl StrOrList {
    /// The list in flag syntax.
    pub fn joined(&self) -> String {
        match self {
            StrOrList::Str(s) => s.clone(),
            StrOrList::List(v) => v.join(","),
        }
    }
}

/// Steps given as `"2,3"` or `[2,3]`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(
    untagged,
    expecting = "expected step numbers as a string (\"2,3\") or a list of numbers ([2, 3])"
)]
#[allow(missing_docs)]
pub enum StepsValue {
    Str(String),
    List(Vec<u64>),
}

impl StepsValue {
    fn joined(&self) -> String {
        match self {
            StepsValue::Str(s) => s.clone(),
            StepsValue::List(v) => v.iter().map(u64::to_string).collect::<Vec<_>>().join(","),
        }
    }
}

/// Largest config.json read (a real one is a few hundred bytes).
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// Raw option values (from flags or the file) before validation.
#[derive(Clone, Debug, Default)]
pub struct RawOptions {
    /// `--events`.
    pub events: Option<String>,
    /// `--level`.
    pub level: Option<String>,
    /// `--call-stack`.
    pub call_stack: Option<String>,
    /// `--analysis`.
    pub analysis: Option<String>,
    /// `--steps`.
    pub steps: Option<String>,
    /// `--device`.
    pub device: Option<String>,
    /// `--output-path`.
    pub output_path: Option<String>,
    /// `--format`.
    pub format: Option<String>,
    /// `--log-level`.
    pub log_level: Option<String>,
    /// `--collect-mode`.
    pub collect_mode: Option<String>,
    /// `--adapters`.
    pub adapters: Option<String>,
    /// `--adapter-path`.
    pub adapter_paths: Vec<String>,
    /// `--idle-threshold`.
    pub idle_threshold: Option<u64>,
    /// `--inefficient-rule`.
    pub inefficient_rule: Option<String>,
    /// `--host-rows`.
    pub host_rows: Option<bool>,
    /// `--watch`.
    pub watch: Option<String>,
    /// `--sample`.
    pub sample: Option<String>,
    /// `--aggregate`.
    pub aggregate: Option<bool>,
    /// `--keep`.
    pub keep: Option<String>,
}

impl RawOptions {
    /// Reads and parses a config.json.
    ///
    /// # Errors
    /// Unreadable file, invalid JSON, unknown key or wrong type — one line naming the file.
    pub fn from_file(path: &std::path::Path) -> Result<RawOptions, ConfigError> {
        let fail = |m: String| ConfigError(format!("--config {}: {m}", path.display()));
        // non-blocking open and a check on the opened descriptor: a FIFO or device is refused
        // without blocking, and the read is capped by what is read (/proc files have size 0)
        let (file, _) =
            memscope_dump::reader::open_regular_io(path).map_err(|e| fail(e.to_string()))?;
        let text = memscope_dump::reader::limits::read_to_string_capped(file, MAX_CONFIG_BYTES)
            .map_err(|e| fail(e.to_string()))?;
        RawOptions::from_json(&text).map_err(|e| fail(e.0))
    }

    /// Parses the text of a config.json (a leading UTF-8 BOM is allowed): memscope's keys, or
    /// msMemScope's own file (recognised by its keys, read by [`super::msmemscope`]).
    ///
    /// # Errors
    /// Invalid JSON, not an object, an unknown key or a wrong type — one line.
    pub fn from_json(text: &str) -> Result<RawOptions, ConfigError> {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        match text.trim_start().as_bytes().first() {
            Some(b'{') => {}
            None => {
                return Err(ConfigError(
                    "empty file: config.json must be a JSON object ({...})".into(),
                ))
            }
            Some(_) => {
                let what = match serde_json::from_str::<serde_json::Value>(text) {
                    Ok(serde_json::Value::Array(_)) => "an array",
                    Ok(serde_json::Value::String(_)) => "a string",
                    Ok(serde_json::Value::Number(_)) => "a number",
                    Ok(serde_json::Value::Bool(_)) => "a boolean",
                    Ok(serde_json::Value::Null) => "null",
                    // too deep for the parser, yet plainly an array
                    Err(_) if text.trim_start().starts_with('[') => "an array",
                    _ => "not JSON",
                };
                return Err(ConfigError(format!(
                    "config.json must be a JSON object ({{...}}), this is {what}"
                )));
            }
        }
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| ConfigError(e.to_string()))?;
        // msMemScope's own config.json (camelCase keys, behaviour spec §4) or memscope's keys.
        if super::msmemscope::is_msmemscope(&value) {
            return super::msmemscope::raw_options(&value);
        }
        // the key path in the message: `call_stack: invalid type: ...`, `adapters[1]: ...`
        let f: ConfigFile = serde_path_to_error::deserialize(value).map_err(|e| {
            let path = e.path().to_string();
            let inner = e.into_inner();
            ConfigError(if path == "." {
                inner.to_string()
            } else {
                format!("key {path:?}: {inner}")
            })
        })?;
        Ok(RawOptions::from_config_file(f))
    }

    /// The options a parsed config.json gives.
    pub fn from_config_file(f: ConfigFile) -> RawOptions {
        RawOptions {
            events: f.events.map(|v| v.joined()),
            level: f.level.map(|v| v.joined()),
            call_stack: f.call_stack.map(|v| v.joined()),
            analysis: f.analysis.map(|v| v.joined()),
            steps: f.steps.map(|v| v.joined()),
            device: f.device.map(|v| v.joined()),
            output_path: f.output_path,
            format: f.format,
            log_level: f.log_level,
            collect_mode: f.collect_mode,
            adapters: f.adapters.map(|v| v.joined()),
            adapter_paths: f.adapter_paths.unwrap_or_default(),
            idle_threshold: f.idle_threshold,
            inefficient_rule: f.inefficient_rule,
            host_rows: f.host_rows,
            watch: f.watch,
            sample: f.sample,
            aggregate: f.aggregate,
            keep: f.keep,
        }
    }

    /// Overlays `flags` on `self` (flags win; adapter paths add up).
    pub fn overlay(mut self, flags: RawOptions) -> RawOptions {
        macro_rules! take {
            ($($f:ident),*) => { $( if flags.$f.is_some() { self.$f = flags.$f; } )* };
        }
        take!(
            events,
            level,
            call_stack,
            analysis,
            steps,
            device,
            output_path,
            format,
            log_level,
            collect_mode,
            adapters,
            idle_threshold,
            inefficient_rule,
            host_rows,
            watch,
            sample,
            aggregate,
            keep
        );
        self.adapter_paths.extend(flags.adapter_paths);
        self
    }

    /// Validates everything into a [`RunConfig`]; `cwd` makes the output path absolute.
    ///
    /// # Errors
    /// The first invalid value.
    pub fn validate(self, cwd: &std::path::Path) -> Result<RunConfig, ConfigError> {
        let mut c = RunConfig::default();
        if let Some(s) = &self.events {
            c.events = EventSet::parse(s)?;
        }
        if let Some(s) = &self.level {
            c.level = LevelSet::parse(s)?;
        }
        if let Some(s) = &self.call_stack {
            c.call_stack = CallStack::parse(s)?;
        }
        if let Some(s) = &self.analysis {
            c.analysis = AnalysisSet::parse(s)?;
        }
        if let Some(s) = &self.steps {
            c.steps = parse_steps(s)?;
        }
        if let Some(s) = &self.device {
            c.device = DeviceSet::parse(s)?;
        }
        if let Some(s) = &self.output_path {
            check_output_path(s)?;
            c.output_path = PathBuf::from(s);
        }
        if !c.output_path.is_absolute() {
            c.output_path = cwd.join(&c.output_path);
        }
        memscope_dump::layout::check_output_len(&c.output_path)
            .map_err(|e| bad("--output-path", e))?;
        if let Some(s) = &self.format {
            c.format = match s.as_str() {
                "csv" => Format::Csv,
                "db" => Format::Db,
                other => {
                    return Err(bad(
                        "--format",
                        format!("unknown format {other:?} (expected csv or db)"),
                    ))
                }
            };
        }
        if let Some(s) = &self.log_level {
            c.log_level = LogLevel::parse(s)?;
        }
        if let Some(s) = &self.collect_mode {
            c.collect_mode = match s.as_str() {
                "immediate" => CollectMode::Immediate,
                "deferred" => CollectMode::Deferred,
                other => {
                    return Err(bad(
                        "--collect-mode",
                        format!("unknown mode {other:?} (expected immediate or deferred)"),
                    ))
                }
            };
        }
        if let Some(s) = &self.adapters {
            c.adapters = parse_adapters(s)?;
        }
        for p in &self.adapter_paths {
            let path = PathBuf::from(p);
            let meta =
                std::fs::metadata(&path).map_err(|e| bad("--adapter-path", format!("{p}: {e}")))?;
            if !meta.is_file() {
                return Err(bad("--adapter-path", format!("{p}: not a regular file")));
            }
            c.adapter_paths.push(if path.is_absolute() {
                path
            } else {
                cwd.join(path)
            });
        }
        if let Some(t) = self.idle_threshold {
            if t == 0 {
                return Err(bad("--idle-threshold", "must be greater than 0"));
            }
            c.idle_threshold = t;
        }
        if let Some(w) = &self.watch {
            c.watch = Some(WatchConfig::parse(w)?);
        }
        if let Some(v) = &self.sample {
            c.sample_ns =
                Some(crate::config::interval::parse_interval(v).map_err(|e| bad("--sample", e))?);
        }
        if let Some(r) = &self.inefficient_rule {
            c.inefficient_rule =
                memscope_analysis::inefficient::IneffRule::parse(r).ok_or_else(|| {
                    bad(
                        "--inefficient-rule",
                        format!("\"{r}\" (expected msmemscope or op-end)"),
                    )
                })?;
        }
        if let Some(h) = self.host_rows {
            c.host_rows = h;
        }
        if let Some(a) = self.aggregate {
            c.aggregate = a;
        }
        if c.aggregate {
            // per-site totals, no dump: options that only shape the dump rows would do nothing
            let needs: Vec<&str> = [
                (c.format == crate::config::Format::Db, "--format db"),
                (c.analysis.inefficient, "--analysis inefficient"),
            ]
            .into_iter()
            .filter_map(|(on, n)| on.then_some(n))
            .collect();
            if !needs.is_empty() {
                return Err(bad(
                    "--aggregate",
                    format!(
                        "writes no dump rows, which {} shape{}: leave one out",
                        needs.join(" and "),
                        if needs.len() == 1 { "s" } else { "" }
                    ),
                ));
            }
        }
        if let Some(k) = &self.keep {
            c.keep = Some(crate::config::keep::KeepBound::parse(k).map_err(|e| bad("--keep", e))?);
            if c.aggregate {
                return Err(bad(
                    "--keep",
                    format!("{k:?}: --aggregate keeps no rows to bound; leave one out"),
                ));
            }
        }
        Ok(c)
    }
}

impl RunConfig {
    /// This configuration as a config.json in the input format (the keys and flag syntax of
    /// [`ConfigFile`]), so the file memscope writes next to a dump can be passed back with
    /// `--config` to repeat the run.
    pub fn to_config_file(&self) -> ConfigFile {
        let list = |v: Vec<String>| Some(StrOrList::List(v));
        let on = |pairs: &[(bool, &str)]| -> Vec<String> {
            pairs
                .iter()
                .filter(|(b, _)| *b)
                .map(|(_, n)| (*n).to_owned())
                .collect()
        };
        let e = self.events;
        let mut events = on(&[
            (e.alloc, "alloc"),
            (e.free, "free"),
            (e.launch, "launch"),
            (e.access, "access"),
            (e.traceback, "traceback"),
        ]);
        if events.is_empty() {
            events.push("none".into());
        }
        let a = self.analysis;
        let mut analysis = on(&[
            (a.leaks, "leaks"),
            (a.decompose, "decompose"),
            (a.inefficient, "inefficient"),
            (a.gap, "gap"),
            (a.races, "races"),
        ]);
        if let Some(k) = a.oom {
            analysis.push(format!("oom:{k}"));
        }
        if analysis.is_empty() {
            analysis.push("none".into());
        }
        let mut stacks = Vec::new();
        if let Some(n) = self.call_stack.c {
            stacks.push(format!("c:{n}"));
        }
        if let Some(n) = self.call_stack.python {
            stacks.push(format!("python:{n}"));
        }
        let mut device = Vec::new();
        if self.device.all_npu {
            device.push("npu".to_owned());
        }
        device.extend(self.device.npus.iter().map(|n| format!("npu:{n}")));
        if self.device.cpu {
            device.push("cpu".to_owned());
        }
        ConfigFile {
            events: list(events),
            level: list(on(&[(self.level.op, "op"), (self.level.kernel, "kernel")])),
            call_stack: list(stacks),
            analysis: list(analysis),
            steps: Some(StepsValue::List(
                self.steps.iter().map(|s| *s as u64).collect(),
            )),
            device: list(device),
            output_path: Some(self.output_path.display().to_string()),
            format: Some(match self.format {
                Format::Csv => "csv".into(),
                Format::Db => "db".into(),
            }),
            log_level: Some(
                match self.log_level {
                    LogLevel::Debug => "debug",
                    LogLevel::Info => "info",
                    LogLevel::Warning => "warning",
                    LogLevel::Error => "error",
                }
                .into(),
            ),
            collect_mode: Some(
                match self.collect_mode {
                    CollectMode::Immediate => "immediate",
                    CollectMode::Deferred => "deferred",
                }
                .into(),
            ),
            adapters: list(self.adapters.clone()),
            adapter_paths: Some(
                self.adapter_paths
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect(),
            ),
            idle_threshold: Some(self.idle_threshold),
            inefficient_rule: Some(self.inefficient_rule.as_str().to_owned()),
            host_rows: Some(self.host_rows),
            watch: self.watch.as_ref().map(WatchConfig::to_text),
            sample: self.sample_ns.map(crate::config::interval::interval_text),
            aggregate: self.aggregate.then_some(true),
            keep: self.keep.map(|k| k.to_text()),
        }
    }
}
