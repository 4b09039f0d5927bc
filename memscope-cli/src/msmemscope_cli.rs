//! `msmemscope ARGS…`: msMemScope's own command line, for people switching (issue 26, item 4).
//!
//! msMemScope parses its arguments with GNU `getopt_long` in its default permuting mode, so
//! options are taken anywhere on the line — `msmemscope python train.py --analysis=leaks` gives
//! `--analysis` to msmemscope, not to the job — until `--`; a long option may be abbreviated to
//! any unambiguous prefix, and takes its value as `--opt=value` or `--opt value` (short ones
//! as `-oDIR` or `-o DIR`, and cluster: `-vq`). An option msmemscope does not know, even after
//! the program name (`--lr`), is an error: the job's own options go after `--`. With
//! `POSIXLY_CORRECT` set, option parsing stops at the program, as getopt does then.
//!
//! What the line becomes: `memscope run [flags] -- PROGRAM ARGS…`, or with `--compare`
//! `memscope compare BASE COMPARE [--level L] [-o DIR]`. `-h` prints help, `-V` the version,
//! and `-v` alone (no program) the version too, as msMemScope's English guide has it (with a
//! program it is `--verbose`, as its code has it). Deprecated spellings (`--input`,
//! `--output`, `--data-format`, `--level=0|1`, `--log-level=warn`) work with a one-line note.
//! memscope's own `run` options are accepted under their full names (`--adapters`,
//! `--adapter-path`, `--config`, `--report`, `--host-rows`, `--idle-threshold`,
//! `--inefficient-rule`). Values are checked by `memscope run` itself. Unlike msMemScope (exit
//! code 0 and the help text for every parse error), a bad line gets one line naming what is
//! wrong and exit code 2.

/// msMemScope's option table (`client_parser.cpp`), in its order: long name, takes a value,
/// short letter.
const OPTIONS: &[(&str, bool, Option<char>)] = &[
    ("help", false, Some('h')),
    ("version", false, Some('V')),
    ("verbose", false, Some('v')),
    ("quiet", false, Some('q')),
    ("debug", false, None),
    ("steps", true, None),
    ("call-stack", true, None),
    ("analysis", true, None),
    ("compare", false, None),
    ("watch", true, None),
    ("input-path", true, Some('i')),
    ("input", true, None),
    ("output-path", true, Some('o')),
    ("output", true, None),
    ("format", true, None),
    ("data-format", true, None),
    ("level", true, None),
    ("events", true, None),
    ("log-level", true, None),
    ("collect-mode", true, None),
    ("device", true, None),
];

/// memscope's own `run` options, taken by their full names only (so msMemScope's
/// abbreviations keep meaning what they mean there).
const MEMSCOPE_OPTIONS: &[(&str, bool)] = &[
    ("adapters", true),
    ("adapter-path", true),
    ("config", true),
    ("idle-threshold", true),
    ("inefficient-rule", true),
    ("host-rows", false),
    ("report", false),
];

use std::ffi::OsString;

/// Old spellings and their names now.
const RENAMED: &[(&str, &str)] = &[
    ("input", "input-path"),
    ("output", "output-path"),
    ("data-format", "format"),
];

/// What a command line asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum Action {
    /// Print [`help`].
    Help,
    /// Print the version.
    Version,
    /// Run memscope with these arguments (program name first; the job's own arguments exactly
    /// as the OS gave them).
    Memscope(Vec<OsString>),
}

/// The parsed line: what to do and the deprecation notes to print first.
#[derive(Debug, PartialEq, Eq)]
pub struct Parsed {
    /// What to do.
    pub action: Action,
    /// One line each.
    pub notes: Vec<String>,
}

/// Whether `args` (program name first) is an msmemscope invocation: the executable is named
/// `msmemscope`, or the first argument is `msmemscope` (what the `msmemscope` script runs).
/// Returns the arguments after the invocation.
pub fn invocation(args: &[OsString]) -> Option<&[OsString]> {
    let name = args.first().and_then(|a| {
        std::path::Path::new(a)
            .file_name()
            .map(|n| n == "msmemscope")
    });
    if name == Some(true) {
        return Some(&args[1..]);
    }
    (args.get(1).is_some_and(|a| a == "msmemscope")).then(|| &args[2..])
}

/// Resolves a long option name as `getopt_long` does: an exact name, else (msMemScope's table
/// only) the one option it is a prefix of.
fn long_option(name: &str) -> Result<(&'static str, bool), String> {
    if let Some(&(n, arg, _)) = OPTIONS.iter().find(|o| o.0 == name) {
        return Ok((n, arg));
    }
    if let Some(&(n, arg)) = MEMSCOPE_OPTIONS.iter().find(|o| o.0 == name) {
        return Ok((n, arg));
    }
    let hits: Vec<&(&str, bool, Option<char>)> =
        OPTIONS.iter().filter(|o| o.0.starts_with(name)).collect();
    match hits[..] {
        [&(n, arg, _)] if !name.is_empty() => Ok((n, arg)),
        [] | [_] => Err(format!("unrecognized option '--{name}'")),
        _ => Err(format!(
            "option '--{name}' is ambiguous; possibilities: {}",
            hits.iter()
                .map(|o| format!("'--{}'", o.0))
                .collect::<Vec<_>>()
                .join(" ")
        )),
    }
}

/// Splits `args` (after the invocation) into options, in order, and operands (the program and
/// its arguments), as permuting `getopt_long` does.
fn getopt(args: &[OsString], posixly_correct: bool) -> Result<GetOpt, String> {
    let mut out = GetOpt::default();
    let text = |a: &OsString| a.to_string_lossy().into_owned();
    let mut i = 0;
    while i < args.len() {
        let lossy = text(&args[i]);
        let a = lossy.as_str();
        if a == "--" {
            out.operands.extend(args[i + 1..].iter().cloned());
            break;
        }
        if let Some(body) = a.strip_prefix("--") {
            let (name, inline) = match body.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (body, None),
            };
            let (name, takes) = long_option(name)?;
            let value = match (takes, inline) {
                (false, Some(_)) => {
                    return Err(format!("option '--{name}' doesn't allow an argument"))
                }
                (false, None) => None,
                (true, Some(v)) => Some(v.to_owned()),
                (true, None) => {
                    i += 1;
                    Some(
                        args.get(i)
                            .map(text)
                            .ok_or_else(|| format!("option '--{name}' requires an argument"))?,
                    )
                }
            };
            out.options.push((name, value));
        } else if a.len() > 1 && a.starts_with('-') {
            for (at, c) in a.char_indices().skip(1) {
                let Some(&(name, takes, _)) = OPTIONS.iter().find(|o| o.2 == Some(c)) else {
                    return Err(format!("invalid option -- '{c}'"));
                };
                if name == "verbose" {
                    out.short_v = true;
                }
                if !takes {
                    out.options.push((name, None));
                    continue;
                }
                let rest = &a[at + c.len_utf8()..];
                let value = if rest.is_empty() {
                    i += 1;
                    args.get(i)
                        .map(text)
                        .ok_or_else(|| format!("option requires an argument -- '{c}'"))?
                } else {
                    rest.to_owned()
                };
                out.options.push((name, Some(value)));
                break;
            }
        } else if posixly_correct {
            out.operands.extend(args[i..].iter().cloned());
            break;
        } else {
            out.operands.push(args[i].clone());
        }
        i += 1;
    }
    Ok(out)
}

#[derive(Default)]
struct GetOpt {
    options: Vec<(&'static str, Option<String>)>,
    operands: Vec<OsString>,
    /// `-v` was given as a short option.
    short_v: bool,
}

/// Parses an msmemscope command line (`args`: what follows the invocation).
///
/// # Errors
/// One line naming the option or what is missing.
pub fn parse(args: &[OsString], posixly_correct: bool) -> Result<Parsed, String> {
    if let Some(a) = args
        .iter()
        .filter_map(|a| a.to_str())
        .take_while(|a| *a != "--")
        .find(|a| *a == "--load-api-env" || *a == "--unload-api-env")
    {
        return Err(format!(
            "{a} changes the calling shell's environment: run it as `source msmemscope {a}`"
        ));
    }
    let g = getopt(args, posixly_correct).map_err(|e| {
        if e.starts_with("unrecognized") || e.starts_with("invalid") {
            format!("{e} (options anywhere on the line are msmemscope's, as in msMemScope: the program's own go after `--`, msmemscope [OPTIONS] -- PROGRAM ARGS...)")
        } else {
            e
        }
    })?;
    let mut notes = Vec::new();
    // the last value of each option wins (msMemScope overwrites), --adapter-path repeats
    let mut values: Vec<(&'static str, String)> = Vec::new();
    let (mut compare, mut verbose, mut quiet) = (false, false, false);
    for (name, value) in g.options {
        match name {
            "help" => {
                return Ok(Parsed {
                    action: Action::Help,
                    notes,
                })
            }
            "version" => {
                return Ok(Parsed {
                    action: Action::Version,
                    notes,
                })
            }
            "verbose" | "debug" => verbose = true,
            "quiet" => quiet = true,
            "compare" => compare = true,
            "host-rows" | "report" => values.push((name, String::new())),
            _ => {
                let mut name = name;
                if let Some(&(old, new)) = RENAMED.iter().find(|r| r.0 == name) {
                    notes.push(format!("'--{old}' is deprecated, use '--{new}' instead"));
                    name = new;
                }
                let value = value.unwrap_or_default();
                notes.extend(deprecated_value(name, &value));
                if name != "adapter-path" {
                    values.retain(|(n, _)| *n != name);
                }
                values.push((name, value));
            }
        }
    }
    let has = |values: &[(&str, String)], n: &str| values.iter().any(|(k, _)| *k == n);
    let comparing = compare || has(&values, "input-path");
    if g.short_v && g.operands.is_empty() && !comparing {
        return Ok(Parsed {
            action: Action::Version,
            notes,
        });
    }
    if !has(&values, "log-level") {
        if verbose {
            values.push(("log-level", "debug".into()));
        } else if quiet {
            values.push(("log-level", "error".into()));
        }
    }
    let mut argv: Vec<OsString> = vec!["memscope".into()];
    if comparing {
        argv.extend(
            compare_args(compare, &values, &g.operands)?
                .into_iter()
                .map(Into::into),
        );
    } else {
        if g.operands.is_empty() {
            return Err(
                "no program to run (msmemscope [OPTIONS] [--] PROGRAM [ARGS...]; -h for help)"
                    .into(),
            );
        }
        argv.push("run".into());
        for (name, value) in values {
            argv.push(if matches!(name, "host-rows" | "report") {
                format!("--{name}").into()
            } else {
                format!("--{name}={value}").into()
            });
        }
        argv.push("--".into());
        argv.extend(g.operands);
    }
    Ok(Parsed {
        action: Action::Memscope(argv),
        notes,
    })
}

/// The note for a deprecated value of option `name`, if `value` is one. (`--log-level=warn` is
/// not one here: msMemScope's code calls it an alias of `warning`, but its user guide
/// documents it as the default, so users type it; issue 35.)
fn deprecated_value(name: &str, value: &str) -> Option<String> {
    let now = match (name, value) {
        ("level", v) if v.split([',', '，']).any(|t| t == "0" || t == "1") => v
            .split([',', '，'])
            .map(|t| match t {
                "0" => "op",
                "1" => "kernel",
                t => t,
            })
            .collect::<Vec<_>>()
            .join(","),
        _ => return None,
    };
    Some(format!(
        "'--{name}={value}' is deprecated, use '--{name}={now}' instead"
    ))
}

/// `compare BASE COMPARE [--level L] [-o DIR]` from msMemScope's compare options.
fn compare_args(
    compare: bool,
    values: &[(&str, String)],
    operands: &[OsString],
) -> Result<Vec<String>, String> {
    let get = |n: &str| values.iter().find(|(k, _)| *k == n).map(|(_, v)| v.clone());
    let Some(inputs) = get("input-path").filter(|_| compare) else {
        return Err(
            "msMemScope's compare needs both --compare and --input-path=BASE.csv,COMPARE.csv"
                .into(),
        );
    };
    if !operands.is_empty() {
        let left: Vec<String> = operands
            .iter()
            .map(|o| o.to_string_lossy().into_owned())
            .collect();
        return Err(format!(
            "--compare runs no program; {:?} is left over",
            left.join(" ")
        ));
    }
    if let Some((n, _)) = values
        .iter()
        .find(|(n, _)| !matches!(*n, "input-path" | "level" | "output-path" | "log-level"))
    {
        return Err(format!(
            "--compare: --{n} does not apply (accepted: --input-path, --level, --output-path)"
        ));
    }
    let level = get("level")
        .map(|l| match l.as_str() {
            "op" | "0" => Ok("op"),
            "kernel" | "1" => Ok("kernel"),
            other => Err(format!(
                "--level {other:?}: compare takes one level, op or kernel"
            )),
        })
        .transpose()?;
    crate::compare_alias::compare_command(&inputs, level, get("output-path"), get("log-level"))
}

/// The help text of `msmemscope -h`.
pub fn help() -> String {
    format!(
        "msmemscope (memscope {v}): msMemScope's command line on memscope

Usage:
  msmemscope [OPTIONS] [--] PROGRAM [ARGS...]     trace a job (= memscope run ... -- PROGRAM ARGS...)
  msmemscope --compare --input-path=BASE.csv,COMPARE.csv [--level=op|kernel] [-o DIR]
  source msmemscope --load-api-env                 preload the probe for `import msmemscope`
  source msmemscope --unload-api-env               take its LD_PRELOAD/LD_LIBRARY_PATH entries out again

Options are taken anywhere on the line, before or after the program (msMemScope's getopt):
give the program's own options after `--`. Long options may be abbreviated.

  -h, --help                 this text
  -V, --version              the version (-v alone, with no program, too)
  -v, --verbose, --debug     log level debug
  -q, --quiet                log level error
      --log-level LEVEL      debug|info|warning|error (default info)
      --level LIST           op,kernel (default op)
      --events LIST          alloc,free,launch,access,traceback,none (default alloc,free,launch)
      --call-stack LIST      c[:N],python[:N] (N <= 1000, default 50)
      --analysis LIST        leaks,gap,decompose,inefficient,races,oom[:K],none (default leaks,gap)
      --steps LIST           up to 5 step numbers
      --device LIST          npu,npu:N,cpu (default npu)
      --collect-mode MODE    immediate|deferred (default immediate)
      --watch SPEC           [start[:outid]],end[,full-content]
  -o, --output-path DIR      output directory (default ./memscopeDumpResults)
      --format FORMAT        csv|db (default csv)
      --compare              compare two dumps (with -i/--input-path A,B)
  -i, --input-path A,B       the dumps to compare
memscope's own (full names only): --adapters, --adapter-path, --config, --report, --host-rows,
--idle-threshold, --inefficient-rule (see memscope run --help).
Old spellings --input, --output, --data-format and --level=0|1 still work; --log-level=warn is
the same as warning.
",
        v = env!("CARGO_PKG_VERSION")
    )
}

/// The line of `msmemscope -V`.
pub fn version() -> String {
    format!(
        "msmemscope version {} (memscope, msMemScope-compatible)",
        env!("CARGO_PKG_VERSION")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(s: &str) -> Vec<OsString> {
        s.split_whitespace().map(OsString::from).collect()
    }

    fn run_args(s: &str) -> Vec<OsString> {
        match parse(&line(s), false).unwrap().action {
            Action::Memscope(v) => v[1..].to_vec(),
            other => panic!("{s}: {other:?}"),
        }
    }

    fn err(s: &str) -> String {
        parse(&line(s), false).unwrap_err()
    }

    #[test]
    fn options_after_the_program_belong_to_msmemscope_as_getopt_permutes_them() {
        assert_eq!(
            run_args("python train.py --analysis=inefficient"),
            line("run --analysis=inefficient -- python train.py")
        );
        assert_eq!(
            run_args("--level kernel python x.py --steps 1,2 -o out"),
            line("run --level=kernel --steps=1,2 --output-path=out -- python x.py")
        );
        // `--` ends the options: the program's own go after it
        assert_eq!(
            run_args("--events=alloc -- python x.py --lr 0.1 -v"),
            line("run --events=alloc -- python x.py --lr 0.1 -v")
        );
        // with POSIXLY_CORRECT getopt stops at the first operand
        match parse(&line("python x.py --lr 0.1"), true).unwrap().action {
            Action::Memscope(v) => assert_eq!(v[1..], line("run -- python x.py --lr 0.1")),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn unknown_options_anywhere_are_errors_naming_them() {
        assert!(err("python x.py --lr 0.1").starts_with("unrecognized option '--lr' ("));
        assert!(err("python x.py --lr 0.1").contains("msmemscope [OPTIONS] -- PROGRAM ARGS"));
        assert!(err("python -c pass").starts_with("invalid option -- 'c'"));
        assert_eq!(
            err("python x.py --steps"),
            "option '--steps' requires an argument"
        );
        assert_eq!(err("-o"), "option requires an argument -- 'o'");
        assert_eq!(err("--help=1"), "option '--help' doesn't allow an argument");
        assert!(err("--co x").contains("ambiguous"), "compare, collect-mode");
        assert!(
            err("--ad x").contains("unrecognized"),
            "memscope's own need full names"
        );
        assert!(err("").starts_with("no program to run"));
        assert!(err("--load-api-env").contains("source msmemscope --load-api-env"));
    }

    #[test]
    fn abbreviations_clusters_and_attached_values_parse_as_getopt_long_does() {
        assert_eq!(
            run_args("--ana=leaks --call python:4 -qoout ./job"),
            line("run --analysis=leaks --call-stack=python:4 --output-path=out --log-level=error -- ./job")
        );
        // the last value wins; --adapter-path repeats; memscope's own options by full name
        assert_eq!(
            run_args("--steps=1 --steps=2 --adapter-path a.so --adapter-path=b.so --report ./job"),
            line("run --steps=2 --adapter-path=a.so --adapter-path=b.so --report -- ./job")
        );
    }

    #[test]
    fn log_level_switches_resolve_as_msmemscope_does() {
        assert_eq!(run_args("-v -q ./j"), line("run --log-level=debug -- ./j"));
        assert_eq!(
            run_args("--debug ./j"),
            line("run --log-level=debug -- ./j")
        );
        assert_eq!(
            run_args("-v ./j --log-level=info"),
            line("run --log-level=info -- ./j")
        );
    }

    #[test]
    fn help_version_and_v_alone() {
        for s in ["-h", "--help", "--he", "python x.py -h"] {
            assert_eq!(parse(&line(s), false).unwrap().action, Action::Help, "{s}");
        }
        for s in ["-V", "--version", "-v", "--vers"] {
            assert_eq!(
                parse(&line(s), false).unwrap().action,
                Action::Version,
                "{s}"
            );
        }
        // with a program, -v is --verbose
        assert_eq!(run_args("-v ./j"), line("run --log-level=debug -- ./j"));
        assert!(version().starts_with("msmemscope version "));
        assert!(help().contains("source msmemscope --load-api-env"));
    }

    #[test]
    fn deprecated_spellings_work_with_a_note_each() {
        let p = parse(
            &line("--output=o --data-format db --level=0,1 --log-level=warn ./j"),
            false,
        )
        .unwrap();
        assert_eq!(
            p.action,
            Action::Memscope(line(
                "memscope run --output-path=o --format=db --level=0,1 --log-level=warn -- ./j"
            ))
        );
        assert_eq!(
            p.notes,
            vec![
                "'--output' is deprecated, use '--output-path' instead",
                "'--data-format' is deprecated, use '--format' instead",
                "'--level=0,1' is deprecated, use '--level=op,kernel' instead",
            ]
        );
    }

    #[test]
    fn compare_lines_become_memscope_compare() {
        assert_eq!(
            run_args("--compare --input-path=a.csv,b.csv --level=kernel"),
            line("compare a.csv b.csv --level kernel")
        );
        assert_eq!(
            run_args("-i a.csv，b.csv --compare -o out"),
            line("compare a.csv b.csv -o out")
        );
        let p = parse(&line("--compare --input a.csv,b.csv"), false).unwrap();
        assert_eq!(
            p.notes,
            vec!["'--input' is deprecated, use '--input-path' instead"]
        );
        assert!(err("--compare").contains("needs both"));
        assert!(err("-i a,b").contains("needs both"));
        assert!(err("--compare -i a,b,c").contains("exactly two"));
        assert!(err("--compare -i a,b ./job").contains("runs no program"));
        assert!(err("--compare -i a,b --steps=1").contains("--steps does not apply"));
    }

    #[test]
    fn the_invocation_is_the_executable_name_or_the_first_argument() {
        let v = |s: &str| line(s);
        assert_eq!(
            invocation(&v("/opt/x/msmemscope python t.py")),
            Some(&v("python t.py")[..])
        );
        assert_eq!(invocation(&v("memscope msmemscope -h")), Some(&v("-h")[..]));
        assert_eq!(invocation(&v("memscope run -- msmemscope")), None);
    }

    #[test]
    fn the_jobs_arguments_pass_through_byte_for_byte() {
        use std::os::unix::ffi::OsStringExt;
        let odd = OsString::from_vec(vec![b'x', 0xff, b'y']);
        let args = vec![OsString::from("./job"), odd.clone()];
        match parse(&args, false).unwrap().action {
            Action::Memscope(v) => assert_eq!(v.last(), Some(&odd)),
            other => panic!("{other:?}"),
        }
    }
}
