//! The one registry of adapters the CLI knows: the built-in descriptors
//! (`crate::builtin`, the CLI's registration list) and the third-party plugins given with
//! `--adapter-path` (their headers read from the file). `memscope adapters list` prints it;
//! the `adapters` part of `schemas/config.schema.json` is generated from it ([`adapters_schema`],
//! checked against the file by a test).

use crate::builtin::REGISTRY;
use crate::plugin_check::{self, PluginInfo};
use std::path::{Path, PathBuf};

/// Where an adapter comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// Built into the probe; selected with `--adapters`.
    BuiltIn {
        /// On when `--adapters` is not given.
        default_on: bool,
    },
    /// Shipped with memscope as a plugin library (built on the adapter SDK), selected by name
    /// with `--adapters` (never on by default).
    Shipped {
        /// The library's file name, next to the probe.
        library: String,
    },
    /// A plugin library (`--adapter-path`, config.json `adapter_paths`).
    Plugin {
        /// The library.
        path: PathBuf,
        /// ABI `(major, minor)` it was built against.
        abi: (u32, u32),
    },
}

/// One adapter's description.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Its name (`--adapters` value, or the plugin header's name).
    pub name: String,
    /// One line.
    pub summary: String,
    /// C symbols it hooks or exports.
    pub symbols: Vec<String>,
    /// `Event/Event Type` pairs it produces (plugins choose theirs at run time: empty).
    pub events: Vec<String>,
    /// config.json keys it reads besides `adapters`: (name, summary).
    pub config_keys: Vec<(String, String)>,
    /// Built in or plugin.
    pub origin: Origin,
}

/// The built-in adapters, in source id order.
pub fn builtin() -> Vec<Entry> {
    listed(true)
}

/// The adapters shipped as plugins (descriptors with a library).
pub fn shipped() -> Vec<Entry> {
    listed(false)
}

/// The entries of the built-in descriptors, or of the shipped plugins'.
fn listed(built_in: bool) -> Vec<Entry> {
    REGISTRY
        .descriptors
        .iter()
        .filter(|d| d.built_in() == built_in)
        .map(|d| Entry {
            name: d.name.to_owned(),
            summary: d.summary.to_owned(),
            symbols: d.symbols.iter().map(|s| s.to_string()).collect(),
            events: d.events.iter().map(|s| s.to_string()).collect(),
            config_keys: d
                .config_keys
                .iter()
                .map(|k| (k.name.to_owned(), k.summary.to_owned()))
                .collect(),
            origin: match d.library {
                None => Origin::BuiltIn {
                    default_on: d.default_on,
                },
                Some(library) => Origin::Shipped {
                    library: library.to_owned(),
                },
            },
        })
        .collect()
}

/// `run --adapters`' help: every adapter's name, and those off by default.
pub fn adapters_help() -> String {
    let names: Vec<&str> = REGISTRY.names().collect();
    let off: Vec<&str> = REGISTRY
        .descriptors
        .iter()
        .filter(|d| !d.default_on)
        .map(|d| d.name)
        .collect();
    format!(
        "Adapters: {} [default: all but {}]",
        names.join(","),
        off.join(" and ")
    )
}

/// The Event Types of the blocks the account-only adapters sum up by Python stack (Python
/// objects), in list order.
fn account_types() -> impl Iterator<Item = memscope_collect::adapter::AccountSummary> {
    REGISTRY
        .descriptors
        .iter()
        .filter_map(|d| d.account_summary)
}

/// `run --sample`'s help: the blocks whose bytes count as tracked.
pub fn sample_help() -> String {
    let tracked: String = account_types()
        .map(|a| format!("/{}", a.event_type))
        .collect();
    format!(
        "Sample the process's resident memory on a timer (100ms, 1s, 250us) and show what the \
         hooks do not see: untracked = RSS − live HOST/HOST_MMAP{tracked} blocks [default: off]"
    )
}

/// `run --host-rows`' help: the account-only rows it writes.
pub fn host_rows_help() -> String {
    let (mut rows, mut summaries) = ("HOST (malloc)".to_owned(), "HOST".to_owned());
    for a in account_types() {
        rows.push_str(&format!(" and {} ({})", a.event_type, a.object));
        summaries.push_str(&format!(" and {}", a.event_type));
    }
    format!(
        "Write {rows} rows into the dumps too [default: off: the capture plus the {summaries} \
         leak and peak summaries; `memscope export --to csv|db` writes the rows later]"
    )
}

/// `diff --type`'s help: Event Types to name.
pub fn event_type_help() -> String {
    let types: String = account_types()
        .map(|a| format!(", {}", a.event_type))
        .collect();
    format!("Only this allocator (Event Type: PTA, HAL, HOST{types}, …)")
}

/// The entry of plugin `path`.
///
/// # Errors
/// The plugin check's one line (not a plugin, wrong ABI, unreadable).
pub fn plugin(path: &Path) -> Result<Entry, String> {
    let PluginInfo { name, abi, symbols } = plugin_check::describe(path)?;
    let file = path
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    Ok(Entry {
        name: if name.is_empty() { file } else { name },
        summary: format!("third-party adapter plugin, ABI {}.{}", abi.0, abi.1),
        symbols,
        events: Vec::new(),
        config_keys: Vec::new(),
        origin: Origin::Plugin {
            path: path.to_path_buf(),
            abi,
        },
    })
}

/// Every adapter: the built-ins, then the plugins of `paths`.
///
/// # Errors
/// The first plugin that is refused.
pub fn all(paths: &[PathBuf]) -> Result<Vec<Entry>, String> {
    let mut v = builtin();
    v.extend(shipped());
    for p in paths {
        v.push(plugin(p)?);
    }
    Ok(v)
}

/// The `adapters` property of `schemas/config.schema.json`, generated from the built-in
/// descriptors: a comma list or an array of their names, with the default set.
pub fn adapters_schema() -> serde_json::Value {
    let mut b = builtin();
    b.extend(shipped());
    let names: Vec<&str> = b.iter().map(|e| e.name.as_str()).collect();
    let defaults: Vec<&str> = b
        .iter()
        .filter(|e| matches!(e.origin, Origin::BuiltIn { default_on: true }))
        .map(|e| e.name.as_str())
        .collect();
    let alt = names.join("|");
    serde_json::json!({
        "description": format!(
            "Adapters to enable, built in or shipped as plugins (`memscope adapters list` describes them): {}. Default: {}.",
            names.join(", "),
            defaults.join(", ")
        ),
        "oneOf": [
            // `split_list`: `,` or `，`, empty items skipped, no trimming
            { "type": "string", "pattern": format!("^[,，]*({alt})([,，]+({alt}))*[,，]*$") },
            { "type": "array", "items": { "enum": names }, "minItems": 1 }
        ]
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checked_in_config_schema_has_the_adapters_part_generated_from_the_descriptors() {
        let file: serde_json::Value =
            serde_json::from_str(include_str!("../../schemas/config.schema.json")).unwrap();
        let want = adapters_schema();
        assert_eq!(
            file["properties"]["adapters"], want,
            "regenerate schemas/config.schema.json's \"adapters\" from the descriptors \
             (`memscope adapters schema` prints it):\n{want}"
        );
    }

    #[test]
    fn the_registry_lists_every_descriptor_once_with_its_origin_and_default_selection() {
        let listed: Vec<Entry> = builtin().into_iter().chain(shipped()).collect();
        assert_eq!(listed.len(), REGISTRY.descriptors.len());
        for (e, d) in listed.iter().zip(REGISTRY.descriptors) {
            assert_eq!(e.name, d.name);
            match &e.origin {
                Origin::BuiltIn { default_on } => {
                    assert!(d.built_in() && *default_on == d.default_on, "{}", d.name)
                }
                Origin::Shipped { library } => {
                    assert_eq!(Some(library.as_str()), d.library);
                    assert!(!d.default_on, "{}: shipped plugins are opt-in", d.name);
                }
                Origin::Plugin { .. } => panic!("{}: not a plugin", d.name),
            }
        }
    }
}
