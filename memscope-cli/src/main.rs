//! `memscope`: run a job under the probe and write msMemScope-compatible dumps and analyses;
//! compare and analyse dump files offline; describe the adapters and the config.json schema.
#![forbid(unsafe_code)]

mod adapters_cmd;
mod analyze_cmd;
mod builtin;
mod collector;
mod export_cmd;
mod logfile;
mod plugin_check;
mod run;
mod summary;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// Memory analysis for AI training and inference jobs (msMemScope-compatible).
#[derive(Parser, Debug)]
#[command(name = "memscope", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Run PROGRAM under the probe and write dumps under the output path.
    Run(Box<run::RunArgs>),
    /// List or describe adapters.
    Adapters {
        #[command(subcommand)]
        cmd: adapters_cmd::AdaptersCmd,
    },
    /// config.json utilities.
    Config {
        #[command(subcommand)]
        cmd: ConfigCmd,
    },
    /// Compare the memory change of each op/kernel between two dumps.
    Compare(analyze_cmd::CompareArgs),
    /// Offline analyses of a dump file (CSV of msMemScope or memscope, or a memscope .db).
    Analyze {
        #[command(subcommand)]
        cmd: analyze_cmd::AnalyzeCmd,
    },
    /// Export runs and dumps to other formats (memory-viz, perfetto, parquet).
    Export(export_cmd::ExportArgs),
}

#[derive(Subcommand, Debug)]
enum ConfigCmd {
    /// Print the JSON Schema of config.json.
    Schema,
}

/// clap's error as one line: its first line plus the indented lines that follow it (the names
/// of missing arguments), up to the usage/tip block.
fn one_line(text: &str) -> String {
    let mut lines = text.lines();
    let mut out = lines
        .next()
        .unwrap_or("invalid arguments")
        .trim_start_matches("error: ")
        .to_owned();
    for l in lines {
        if l.trim().is_empty() {
            break;
        }
        out.push(' ');
        out.push_str(l.trim());
    }
    out
}

/// Exit code for bad input (flags, config.json, paths, files), as for clap's own errors.
const EXIT_USAGE: u8 = 2;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                let _ = e.print();
                return ExitCode::SUCCESS;
            }
            if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                let _ = e.print();
                return ExitCode::from(EXIT_USAGE);
            }
            eprintln!("memscope: {}", one_line(&e.to_string()));
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let result = match cli.cmd {
        Cmd::Run(args) => return run::run(*args),
        Cmd::Adapters { cmd } => adapters_cmd::run(&cmd),
        Cmd::Compare(args) => analyze_cmd::run_compare(&args),
        Cmd::Analyze { cmd } => analyze_cmd::run_analyze(&cmd),
        Cmd::Export(args) => export_cmd::run_export(&args),
        Cmd::Config {
            cmd: ConfigCmd::Schema,
        } => {
            print!("{}", include_str!("../../schemas/config.schema.json"));
            Ok(())
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("memscope: {e:#}");
            ExitCode::from(EXIT_USAGE)
        }
    }
}
