//! Run configuration: msMemScope's command-line options (behaviour spec §2) plus memscope's own
//! (`adapters`, `adapter_paths`, `idle_threshold`), from flags and/or a config.json with the same
//! keys (JSON Schema: `schemas/config.schema.json`). Flags win over the file.
//!
//! Parsing follows msMemScope: lists split on `,` and the full-width `，`, items are not trimmed,
//! empty items are skipped. Every error is one line naming the option and the bad value.

use crate::adapter::{AdapterDescriptor, SourceId};
use crate::registry::{installed, Selection};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// A configuration error, worded for the user (`--events: unknown event type "allocs"`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

fn bad(opt: &str, msg: impl std::fmt::Display) -> ConfigError {
    ConfigError(format!("{opt}: {msg}"))
}

/// Splits a list as msMemScope does.
pub fn split_list(s: &str) -> impl Iterator<Item = &str> {
    s.split([',', '，']).filter(|i| !i.is_empty())
}

/// Output format.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// `memscope_dump_<ts>.csv`.
    #[default]
    Csv,
    /// `memscope_dump_<ts>.db`.
    Db,
}

/// Collection mode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CollectMode {
    /// Record from the start of the job.
    #[default]
    Immediate,
    /// Record only between `memscope_start()` and `memscope_stop()` calls.
    Deferred,
}

/// Log level of the log file and console.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[allow(missing_docs)]
pub enum LogLevel {
    Debug,
    #[default]
    Info,
    Warning,
    Error,
}

impl LogLevel {
    /// Parses `debug|info|warning|error` (`warn` accepted as msMemScope's alias).
    ///
    /// # Errors
    /// Anything else.
    pub fn parse(s: &str) -> Result<LogLevel, ConfigError> {
        match s {
            "debug" => Ok(LogLevel::Debug),
            "info" => Ok(LogLevel::Info),
            "warning" | "warn" => Ok(LogLevel::Warning),
            "error" => Ok(LogLevel::Error),
            other => Err(bad(
                "--log-level",
                format!("unknown level {other:?} (expected debug, info, warning or error)"),
            )),
        }
    }
}

/// The complete, validated configuration of a `memscope run`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunConfig {
    /// `--events`.
    pub events: EventSet,
    /// `--level`.
    pub level: LevelSet,
    /// `--call-stack`.
    pub call_stack: CallStack,
    /// `--analysis`.
    pub analysis: AnalysisSet,
    /// `--steps`: at most 5 step numbers ≥ 1; empty = all.
    pub steps: Vec<u32>,
    /// `--device`.
    pub device: DeviceSet,
    /// `-o/--output-path`, absolute.
    pub output_path: PathBuf,
    /// `--format`.
    pub format: Format,
    /// `--log-level` (`-q`, `-v`).
    pub log_level: LogLevel,
    /// `--collect-mode`.
    pub collect_mode: CollectMode,
    /// `--adapters`: built-in adapters selected.
    pub adapters: Vec<String>,
    /// `--adapter-path`: third-party adapter libraries.
    pub adapter_paths: Vec<PathBuf>,
    /// `--idle-threshold`: ops of idleness for `temporary_idleness` (default 3000).
    pub idle_threshold: u64,
    /// `--inefficient-rule`: msMemScope's classification (default) or memscope's stricter
    /// `op-end` variant.
    pub inefficient_rule: memscope_analysis::inefficient::IneffRule,
    /// `--host-rows` / `"host_rows"`: write HOST adapter (malloc) rows into the dumps. Off by
    /// default: at malloc rates the capture plus the leak and peak summaries answer the usual
    /// questions, and `memscope export --to csv|db` writes the rows from the capture later.
    pub host_rows: bool,
    /// `--watch`: memory watch between two operators (`None`: off).
    #[serde(default)]
    pub watch: Option<WatchConfig>,
    /// `--sample`: interval of the probe's memory sampler, ns (`None`: off; issue 25).
    #[serde(default)]
    pub sample_ns: Option<u64>,
    /// `--aggregate` / `"aggregate"`: per allocator, site and owner totals
    /// (`memscope_aggregate_<ts>.csv`) instead of per-event rows: no dump rows and no capture
    /// (issue 38); the online analyses run as usual.
    #[serde(default)]
    pub aggregate: bool,
    /// `--keep last:…` / `"keep"`: the flight recorder (issue 38) — only the last stretch of
    /// rows is kept on disk, written as the run's dumps at exit (and as a window run at an
    /// OOM or on SIGUSR2); `None`: every row.
    #[serde(skip)]
    pub keep: Option<keep::KeepBound>,
    /// The `--fail-on` limits on live bytes (`peak`, `live`) the flight recorder watches while
    /// the job runs: the first crossing of each writes a window (`memscope run` sets them).
    #[serde(skip)]
    pub keep_limits: Vec<memscope_analysis::thresholds::Limit>,
}

/// `--watch [start[:outid]],end[,full-content]` (behaviour spec §2, §9.9): from the end of
/// operator `start` (its outputs, or only output `outid`, become the watched set) to the end of
/// operator `end`, the watched memory is dumped before and after each operator — its checksum,
/// or its bytes with `full-content`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WatchConfig {
    /// Operator whose outputs start the watch (empty: none).
    pub start: String,
    /// Only this output of `start` (`None`: all).
    pub out_id: Option<u32>,
    /// Operator whose end stops the watch.
    pub end: String,
    /// Dump the bytes rather than checksums.
    pub full_content: bool,
}

impl WatchConfig {
    /// Longest operator name kept (msMemScope truncates longer ones).
    pub const MAX_NAME: usize = 254;

    /// Parses `[start[:outid]],end[,full-content]`.
    ///
    /// # Errors
    /// No comma, a `start:` without an id or with a leading zero, an empty `end`, or anything
    /// but `full-content` after `end`.
    pub fn parse(s: &str) -> Result<WatchConfig, ConfigError> {
        let parts: Vec<&str> = s.split([',', '\u{ff0c}']).collect();
        if parts.len() < 2 {
            return Err(bad(
                "--watch",
                format!("{s:?}: expected [start[:outid]],end[,full-content]"),
            ));
        }
        if parts.len() > 3 || (parts.len() == 3 && !matches!(parts[2], "full-content" | "")) {
            return Err(bad(
                "--watch",
                format!("{s:?}: only full-content may follow the end operator"),
            ));
        }
        let cut = |n: &str| n.chars().take(Self::MAX_NAME).collect::<String>();
        let (start, out_id) = match parts[0].split_once(':') {
            None => (cut(parts[0]), None),
            Some((name, id)) => {
                let ok = !name.is_empty()
                    && !id.is_empty()
                    && id.bytes().all(|b| b.is_ascii_digit())
                    && (id == "0" || !id.starts_with('0'));
                match (ok, id.parse::<u32>()) {
                    (true, Ok(n)) => (cut(name), Some(n)),
                    _ => {
                        return Err(bad(
                            "--watch",
                            format!(
                                "{:?}: expected start:outid with a number without leading zeros",
                                parts[0]
                            ),
                        ))
                    }
                }
            }
        };
        if parts[1].is_empty() {
            return Err(bad("--watch", format!("{s:?}: the end operator is empty")));
        }
        Ok(WatchConfig {
            start,
            out_id,
            end: cut(parts[1]),
            full_content: parts.get(2) == Some(&"full-content"),
        })
    }

    /// The flag syntax back.
    pub fn to_text(&self) -> String {
        let mut s = self.start.clone();
        if let Some(id) = self.out_id {
            s.push_str(&format!(":{id}"));
        }
        s.push(',');
        s.push_str(&self.end);
        if self.full_content {
            s.push_str(",full-content");
        }
        s
    }
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            events: EventSet::default(),
            level: LevelSet::default(),
            call_stack: CallStack::default(),
            analysis: AnalysisSet::default(),
            steps: Vec::new(),
            device: DeviceSet::default(),
            output_path: PathBuf::from(memscope_dump::layout::DEFAULT_OUTPUT),
            format: Format::Csv,
            log_level: LogLevel::Info,
            collect_mode: CollectMode::Immediate,
            // every adapter whose descriptor says so: the built-in ones but HOST, which is
            // opt-in (issue 4) so Ascend users pay nothing for it
            adapters: installed()
                .descriptors
                .iter()
                .filter(|d| d.default_on)
                .map(|d| d.name.to_owned())
                .collect(),
            adapter_paths: Vec::new(),
            idle_threshold: 3000,
            inefficient_rule: memscope_analysis::inefficient::IneffRule::MsMemScope,
            host_rows: false,
            watch: None,
            sample_ns: None,
            aggregate: false,
            keep: None,
            keep_limits: Vec::new(),
        }
    }
}

/// Parses `--steps`: up to 5 integers ≥ 1 that fit `u32`.
///
/// # Errors
/// A 6th id, a non-integer, zero or an overflow.
pub fn parse_steps(s: &str) -> Result<Vec<u32>, ConfigError> {
    let mut v = Vec::new();
    for t in split_list(s) {
        match t.parse::<u32>() {
            Ok(n) if n >= 1 && t.bytes().all(|b| b.is_ascii_digit()) => v.push(n),
            _ => {
                return Err(bad(
                    "--steps",
                    format!("bad step {t:?} (an integer from 1 to 4294967295)"),
                ))
            }
        }
    }
    if v.len() > 5 {
        return Err(bad(
            "--steps",
            format!("{} steps given, at most 5 allowed", v.len()),
        ));
    }
    Ok(v)
}

/// Parses `--adapters`: names of the adapters of the installed registry
/// ([`crate::registry::install`]: built-in adapters and shipped plugins).
///
/// # Errors
/// An unknown name, or an empty list.
pub fn parse_adapters(s: &str) -> Result<Vec<String>, ConfigError> {
    let mut v: Vec<String> = Vec::new();
    for t in split_list(s) {
        let registry = installed();
        if registry.by_name(t).is_none() {
            let known: Vec<_> = registry.names().collect();
            return Err(bad(
                "--adapters",
                format!("unknown adapter {t:?} (built-in: {})", known.join(", ")),
            ));
        }
        if !v.iter().any(|x| x == t) {
            v.push(t.to_owned());
        }
    }
    if v.is_empty() {
        return Err(bad("--adapters", "no adapter named"));
    }
    Ok(v)
}

/// Checks an output path with msMemScope's rules (behaviour spec §2, `-o`): not empty, no
/// forbidden leading character, allowed characters only, components ≤ 255, ≤ 4096 in all.
///
/// # Errors
/// The first rule broken.
pub fn check_output_path(p: &str) -> Result<(), ConfigError> {
    if p.trim().is_empty() {
        return Err(bad("--output-path", "empty path"));
    }
    if p.len() > 4096 {
        return Err(bad("--output-path", "longer than 4096 bytes"));
    }
    if p.starts_with(['=', '+', '-', '@']) {
        return Err(bad(
            "--output-path",
            format!("{p:?} starts with a forbidden character (= + - @)"),
        ));
    }
    if let Some(c) = p.chars().find(|c| {
        !(c.is_ascii_alphanumeric()
            || "./_-~ ".contains(*c)
            || ('\u{4e00}'..='\u{9fa5}').contains(c))
    }) {
        return Err(bad(
            "--output-path",
            format!(
                "{p:?} contains the character {c:?} (allowed: letters, digits, . / _ - ~, spaces)"
            ),
        ));
    }
    if p.split('/').any(|c| c.len() > 255) {
        return Err(bad(
            "--output-path",
            "a path component is longer than 255 bytes",
        ));
    }
    Ok(())
}

impl RunConfig {
    /// The selected adapters, resolved against the installed registry.
    pub fn selection(&self) -> Selection {
        installed().resolve(&self.adapters)
    }

    /// Selection mask of the built-in adapters ([`SourceId::bit`]).
    pub fn adapter_mask(&self) -> u32 {
        self.selection().mask
    }

    /// The shipped plugins selected (`--adapters` names of descriptors with a library), in
    /// selection order.
    pub fn shipped_plugins(&self) -> Vec<&'static AdapterDescriptor> {
        self.selection().plugins
    }

    /// Whether the built-in adapter of source `source` is selected.
    pub fn has_source(&self, source: SourceId) -> bool {
        self.selection().has(source)
    }
}

mod file;
pub mod interval;
pub use memscope_longjobs::keep;
pub mod msmemscope;
mod msmemscope_types;
mod options;
pub use file::{ConfigFile, RawOptions, StepsValue, StrOrList};
pub use options::{AnalysisSet, CallStack, DeviceSet, EventSet, LevelSet, DEFAULT_STACK_DEPTH};

#[cfg(test)]
mod tests;
