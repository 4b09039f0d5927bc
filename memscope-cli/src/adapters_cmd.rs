//! `memscope adapters list`: the registry of built-in adapters.

use memscope_core::adapter::descriptors;

/// Adapter subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum AdaptersCmd {
    /// Print every built-in adapter: name, summary, hooked symbols, events, config keys.
    List,
}

/// Runs an adapters subcommand.
///
/// # Errors
/// None today; kept for symmetry with the other commands.
pub fn run(cmd: &AdaptersCmd) -> anyhow::Result<()> {
    match cmd {
        AdaptersCmd::List => {
            for d in descriptors() {
                println!("{:<10} {}", d.id.name(), d.summary);
                println!("{:<10} symbols: {}", "", d.symbols.join(", "));
                println!("{:<10} events:  {}", "", d.events.join(", "));
                for k in d.config_keys {
                    println!("{:<10} config:  {} — {}", "", k.name, k.summary);
                }
            }
            println!(
                "third-party adapters: shared libraries built against schemas/memscope_plugin.h, \
                 loaded with --adapter-path or config.json \"adapter_paths\""
            );
            Ok(())
        }
    }
}
