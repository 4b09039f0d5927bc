//! `memscope`: run a job under the probe and write msMemScope-compatible dumps and analyses;
//! compare and analyse dump files offline; write HTML reports; describe the adapters and the
//! config.json schema.
#![forbid(unsafe_code)]

// memscope's prints never panic (a closed pipe or a full device as stdout/stderr must not turn
// the job's exit code into 101 or leave the spool behind: issue 17, H1) and never pass terminal
// escapes through (L3). These shadow std's macros in every module of this crate; see `out`.
macro_rules! print {
    ($($t:tt)*) => { $crate::out::write($crate::out::Stream::Out, format_args!($($t)*), false) };
}
macro_rules! println {
    () => { $crate::out::write($crate::out::Stream::Out, format_args!(""), true) };
    ($($t:tt)*) => { $crate::out::write($crate::out::Stream::Out, format_args!($($t)*), true) };
}
#[allow(unused_macros)] // for completeness: no module prints partial lines to stderr yet
macro_rules! eprint {
    ($($t:tt)*) => { $crate::out::write($crate::out::Stream::Err, format_args!($($t)*), false) };
}
macro_rules! eprintln {
    () => { $crate::out::write($crate::out::Stream::Err, format_args!(""), true) };
    ($($t:tt)*) => { $crate::out::write($crate::out::Stream::Err, format_args!($($t)*), true) };
}

mod out;

mod adapters_cmd;
mod analyze_cmd;
mod builtin;
mod capture_input;
mod ci;
mod collect;
mod compare_alias;
mod diff_cmd;
mod export;
mod export_cmd;
mod helpers;
mod job;
mod locate;
mod msmemscope_cli;
mod own_memory;
mod plugin_check;
mod pymem_arenas;
mod python_job;
mod rank_table;
mod recover_cmd;
mod recover_index;
mod registry;
mod report_cmd;
mod run;
mod run_args;
mod run_index;
mod run_select;
mod session;
mod spool_guard;
mod summary;
mod top;
mod window_note;

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
    /// Collector of a Python process that started itself with `memscope.start()`.
    #[command(hide = true)]
    Collect(collect::CollectArgs),
    /// Print the path of the probe library.
    #[command(hide = true)]
    ProbePath,
    /// Live memory of two runs, dumps or captures (or two points of one) by site, owner, op
    /// or role, sorted by growth.
    Diff(Box<diff_cmd::DiffArgs>),
    /// Write a self-contained HTML report of a run (or compare two runs).
    Report(report_cmd::ReportArgs),
    /// Export runs: --to csv|db (the dumps `run` writes, HOST rows too, from captures),
    /// memory-viz, perfetto, parquet.
    Export(export::ExportArgs),
    /// Turn the spool a killed `memscope run` left behind into the run's outputs.
    Recover(recover_cmd::RecoverArgs),
    /// Live memory of a running `memscope run`: per device and pool, the owners and sites
    /// holding most and their growth, steps per second, per-rank peaks (refreshed every
    /// second; q quits).
    Top(top::TopArgs),
}

#[derive(Subcommand, Debug)]
enum ConfigCmd {
    /// Print the JSON Schema of config.json.
    Schema,
    /// Validate option values as `memscope run` does and print them as config.json.
    Check(Box<collect::CheckArgs>),
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
    // adapter names in configurations are checked against the registration list
    builtin::install();
    let os_args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if let Some(rest) = msmemscope_cli::invocation(&os_args) {
        return msmemscope(rest);
    }
    let args: Vec<String> = os_args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let parsed = match compare_alias::rewrite(&args) {
        // the arguments as the OS gave them (a job's arguments need not be UTF-8)
        Ok(compare_alias::Alias::None) => Cli::try_parse(),
        Ok(compare_alias::Alias::Compare(v, note)) => {
            if !note.is_empty() {
                eprintln!("memscope: {note}");
            }
            Cli::try_parse_from(v)
        }
        Err(e) => {
            eprintln!("memscope: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    dispatch(parsed, &args)
}

/// `msmemscope ARGS…` (`rest`: the arguments after the invocation): msMemScope's command line
/// run as the memscope command it stands for.
fn msmemscope(rest: &[std::ffi::OsString]) -> ExitCode {
    let posixly_correct = std::env::var_os("POSIXLY_CORRECT").is_some();
    let parsed = match msmemscope_cli::parse(rest, posixly_correct) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("msmemscope: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    for n in &parsed.notes {
        eprintln!("msmemscope: {n}");
    }
    match parsed.action {
        msmemscope_cli::Action::Help => {
            print!("{}", msmemscope_cli::help());
            ExitCode::SUCCESS
        }
        msmemscope_cli::Action::Version => {
            println!("{}", msmemscope_cli::version());
            ExitCode::SUCCESS
        }
        msmemscope_cli::Action::Memscope(argv) => dispatch(Cli::try_parse_from(argv), &[]),
    }
}

/// `memscope PROGRAM …` (no `run`): the one line that says what was meant, if `first` is a
/// program that can be run.
fn not_a_command(args: &[String]) -> Option<String> {
    let first = args.get(1)?;
    if first.starts_with('-') || !run::resolve_program(first).is_some_and(|p| p.is_file()) {
        return None;
    }
    let rest = args[1..].join(" ");
    Some(format!(
        "{first:?} is not a memscope command; did you mean `memscope run -- {rest}`? (msMemScope's way, `msmemscope {rest}`, works too)"
    ))
}

/// Runs the parsed command line (`args`: the line as given, for the error messages).
fn dispatch(parsed: Result<Cli, clap::Error>, args: &[String]) -> ExitCode {
    let cli = match parsed {
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
            if e.kind() == ErrorKind::InvalidSubcommand {
                if let Some(line) = not_a_command(args) {
                    eprintln!("memscope: {line}");
                    return ExitCode::from(EXIT_USAGE);
                }
            }
            eprintln!("memscope: {}", one_line(&e.to_string()));
            return ExitCode::from(EXIT_USAGE);
        }
    };
    // A file-size limit (ulimit -f) must end a write with EFBIG, not the collector: with a
    // handler installed the kernel does not kill us; the job gets the default disposition back
    // at exec.
    let _ = signal_hook::flag::register(
        signal_hook::consts::SIGXFSZ,
        std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false)),
    );
    let result = match cli.cmd {
        Cmd::Run(args) => return run::run(*args),
        Cmd::Collect(args) => return collect::collect(&args),
        Cmd::ProbePath => run::find_probe()
            .map(|p| println!("{}", p.display()))
            .map_err(|e| anyhow::anyhow!(e)),
        Cmd::Config {
            cmd: ConfigCmd::Check(args),
        } => collect::check(&args),
        Cmd::Recover(args) => return recover_cmd::run(&args),
        Cmd::Export(args) => export_cmd::run(&args),
        Cmd::Adapters { cmd } => adapters_cmd::run(&cmd),
        Cmd::Compare(args) => analyze_cmd::run_compare(&args),
        Cmd::Analyze { cmd } => analyze_cmd::run_analyze(&cmd),
        Cmd::Report(args) => report_cmd::run(&args),
        Cmd::Diff(args) => diff_cmd::run(&args),
        Cmd::Top(args) => top::run(&args),
        Cmd::Config {
            cmd: ConfigCmd::Schema,
        } => {
            print!("{}", include_str!("../../schemas/config.schema.json"));
            Ok(())
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // the crossed limits are printed already (issue 24)
        Err(e) if e.downcast_ref::<ci::LimitsCrossed>().is_some() => ExitCode::from(
            e.downcast_ref::<ci::LimitsCrossed>()
                .map_or(ci::EXIT_LIMIT, |l| l.code),
        ),
        Err(e) => {
            // one line, whatever a path in it holds (a newline in a file name)
            let text = format!("{e:#}");
            eprintln!(
                "memscope: {}",
                memscope_core::sanitize::escape_controls(&text)
            );
            ExitCode::from(EXIT_USAGE)
        }
    }
}
