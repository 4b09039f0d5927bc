//! `memscope adapters list|schema`: the adapter registry ([`crate::registry`]).

use crate::registry::{self, Entry, Origin};
use anyhow::anyhow;
use std::path::PathBuf;

/// Adapter subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum AdaptersCmd {
    /// Print every adapter: name, summary, hooked symbols, events, config keys — the built-in
    /// ones and the plugins given with --adapter-path.
    List {
        /// A third-party adapter library to describe too (repeatable).
        #[arg(long = "adapter-path")]
        adapter_path: Vec<PathBuf>,
    },
    /// Print the `adapters` part of schemas/config.schema.json, generated from the built-in
    /// descriptors.
    Schema,
}

fn print(e: &Entry) {
    let tag = match &e.origin {
        Origin::BuiltIn { default_on: true } => "built-in, on by default".to_owned(),
        Origin::BuiltIn { default_on: false } => "built-in, opt-in".to_owned(),
        Origin::Shipped { library } => format!("shipped plugin {library}, opt-in"),
        Origin::Plugin { path, .. } => format!("plugin {}", path.display()),
    };
    println!("{:<10} {} ({tag})", e.name, e.summary);
    if !e.symbols.is_empty() {
        println!("{:<10} symbols: {}", "", e.symbols.join(", "));
    }
    if !e.events.is_empty() {
        println!("{:<10} events:  {}", "", e.events.join(", "));
    } else if matches!(e.origin, Origin::Plugin { .. }) {
        println!(
            "{:<10} events:  its own Event Types (MALLOC/FREE, marks, launches, accesses)",
            ""
        );
    }
    for (k, s) in &e.config_keys {
        println!("{:<10} config:  {k} — {s}", "");
    }
}

/// Runs an adapters subcommand.
///
/// # Errors
/// A plugin given with `--adapter-path` that is refused (one line naming it).
pub fn run(cmd: &AdaptersCmd) -> anyhow::Result<()> {
    match cmd {
        AdaptersCmd::List { adapter_path } => {
            let all = registry::all(adapter_path).map_err(|e| anyhow!(e))?;
            for e in &all {
                print(e);
            }
            println!(
                "third-party adapters: shared libraries built against schemas/memscope_plugin.h \
                 (Rust: memscope-adapter-sdk), loaded with --adapter-path or config.json \"adapter_paths\""
            );
            Ok(())
        }
        AdaptersCmd::Schema => {
            println!(
                "{}",
                serde_json::to_string_pretty(&registry::adapters_schema())?
            );
            Ok(())
        }
    }
}
