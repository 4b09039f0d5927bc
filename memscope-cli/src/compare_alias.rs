//! msMemScope's offline compare invocation as an alias of `memscope compare`, so scripts
//! written for msMemScope run unchanged (behaviour spec §2, §10.3):
//!
//! ```text
//! memscope --compare --input-path=base.csv,compare.csv [--level=op|kernel] [-o DIR] [--log-level=L]
//!   ≡ memscope compare base.csv compare.csv [--level op|kernel] [-o DIR] [--log-level L]
//! ```
//!
//! The output is msMemScope's `memory_compare_{ts}.csv` with its exact two header lines (what
//! its smoke suite checks); the note naming the equivalent command is left out at
//! `--log-level` warning or error.
//!
//! Accepted as msMemScope's parser accepts them: options in any order, `--opt=value` or
//! `--opt value`; `-i`/`--input` for `--input-path` and `--output`/`--output-path` for `-o`
//! (the old names); the two paths split on `,` or the full-width `，`; `--level` `op`,
//! `kernel` or the deprecated `0`/`1`. Anything else — a third path, another option, `--compare`
//! without input paths or input paths without `--compare` — is a one-line error.

/// What the command line asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum Alias {
    /// Not msMemScope's compare form: parse the arguments as they are.
    None,
    /// The equivalent `memscope compare` arguments (program name first) and the note naming
    /// them (empty at `--log-level` warning or error).
    Compare(Vec<String>, String),
}

fn value<'a>(
    args: &'a [String],
    i: &mut usize,
    inline: Option<&'a str>,
    name: &str,
) -> Result<&'a str, String> {
    if let Some(v) = inline {
        return Ok(v);
    }
    *i += 1;
    args.get(*i)
        .map(String::as_str)
        .ok_or_else(|| format!("{name} needs a value"))
}

/// Recognises msMemScope's compare form in `args` (program name first). Only a command line
/// that starts with an option is considered, so `memscope run -- prog --compare` is untouched.
///
/// # Errors
/// A one-line message for a malformed compare invocation.
pub fn rewrite(args: &[String]) -> Result<Alias, String> {
    let Some(first) = args.get(1) else {
        return Ok(Alias::None);
    };
    if !first.starts_with('-') || first == "-h" || first == "--help" || first == "-V" {
        return Ok(Alias::None);
    }
    let is = |a: &str, names: &[&str]| {
        names
            .iter()
            .any(|n| a == *n || a.starts_with(&format!("{n}=")))
    };
    let compare_seen = args[1..].iter().any(|a| a == "--compare");
    let input_seen = args[1..]
        .iter()
        .any(|a| is(a, &["--input-path", "--input"]) || (a.starts_with("-i") && a != "-"));
    if !compare_seen && !input_seen {
        return Ok(Alias::None);
    }
    if !compare_seen || !input_seen {
        return Err(
            "msMemScope's compare needs both --compare and --input-path=BASE.csv,COMPARE.csv (memscope's spelling: memscope compare BASE.csv COMPARE.csv)"
                .into(),
        );
    }
    let (mut inputs, mut level, mut output) = (None::<String>, None::<&str>, None::<String>);
    let mut log_level = None::<String>;
    let mut i = 1;
    while i < args.len() {
        let a = args[i].as_str();
        let (name, inline) = match a.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n, Some(v)),
            _ => (a, None),
        };
        match name {
            "--compare" if inline.is_none() => {}
            "--input-path" | "--input" | "-i" => {
                inputs = Some(value(args, &mut i, inline, "--input-path")?.to_owned())
            }
            "--level" => {
                level = Some(match value(args, &mut i, inline, "--level")? {
                    "op" | "0" => "op",
                    "kernel" | "1" => "kernel",
                    other => {
                        return Err(format!(
                            "--level {other:?}: compare takes one level, op or kernel"
                        ))
                    }
                })
            }
            "-o" | "--output-path" | "--output" => {
                output = Some(value(args, &mut i, inline, "--output-path")?.to_owned())
            }
            "--log-level" => {
                let v = value(args, &mut i, inline, "--log-level")?;
                memscope_collect::config::LogLevel::parse(v).map_err(|e| e.0)?;
                log_level = Some(v.to_owned());
            }
            _ if a.starts_with("-i") && a.len() > 2 => inputs = Some(a[2..].to_owned()),
            _ => {
                return Err(format!(
                    "--compare: unsupported option {a:?} (accepted: --input-path, --level, --output-path, --log-level)"
                ))
            }
        }
        i += 1;
    }
    let quiet = matches!(log_level.as_deref(), Some("warning" | "warn" | "error"));
    let mut out = vec![args[0].clone()];
    out.extend(compare_command(
        &inputs.unwrap_or_default(),
        level,
        output,
        log_level,
    )?);
    let note = if quiet {
        String::new()
    } else {
        format!(
            "note: msMemScope's --compare runs as `memscope {}`",
            out[1..].join(" ")
        )
    };
    Ok(Alias::Compare(out, note))
}

/// The `memscope compare` arguments (without the program name) of msMemScope's compare
/// options: `inputs` is the `--input-path` value (two paths split on `,` or `，`).
///
/// # Errors
/// Not exactly two paths.
pub fn compare_command(
    inputs: &str,
    level: Option<&str>,
    output: Option<String>,
    log_level: Option<String>,
) -> Result<Vec<String>, String> {
    let paths: Vec<&str> = inputs
        .split([',', '，'])
        .filter(|p| !p.is_empty())
        .collect();
    let [base, cmp] = paths[..] else {
        return Err(format!(
            "--input-path {inputs:?}: give exactly two files, BASE.csv,COMPARE.csv"
        ));
    };
    let mut out = vec!["compare".to_owned(), base.to_owned(), cmp.to_owned()];
    if let Some(l) = level {
        out.extend(["--level".to_owned(), l.to_owned()]);
    }
    if let Some(o) = output {
        out.extend(["-o".to_owned(), o]);
    }
    if let Some(l) = log_level {
        out.extend(["--log-level".to_owned(), l]);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        std::iter::once("memscope")
            .chain(s.split_whitespace())
            .map(str::to_owned)
            .collect()
    }

    fn compare_args(s: &str) -> Vec<String> {
        match rewrite(&args(s)).unwrap() {
            Alias::Compare(v, _) => v[1..].to_vec(),
            Alias::None => panic!("{s}: not recognised"),
        }
    }

    #[test]
    fn msmemscope_compare_spellings_become_memscope_compare() {
        assert_eq!(
            compare_args("--compare --input-path=a.csv,b.csv --level=kernel"),
            ["compare", "a.csv", "b.csv", "--level", "kernel"]
        );
        assert_eq!(
            compare_args("--level 0 -i a.csv，b.csv --compare --output-path=out"),
            ["compare", "a.csv", "b.csv", "--level", "op", "-o", "out"]
        );
        assert_eq!(
            compare_args("--compare --input a.csv,b.csv"),
            ["compare", "a.csv", "b.csv"]
        );
        assert_eq!(compare_args("--compare -ia,b"), ["compare", "a", "b"]);
    }

    #[test]
    fn msmemscope_smoke_suite_command_line_with_log_level_is_accepted() {
        // test/smoke/run_st.py's step_compare_cmd
        assert_eq!(
            compare_args("--input=a.csv,b.csv --compare --log-level=info --level=1"),
            [
                "compare",
                "a.csv",
                "b.csv",
                "--level",
                "kernel",
                "--log-level",
                "info"
            ]
        );
        match rewrite(&args("--compare -i a,b --log-level=error")).unwrap() {
            Alias::Compare(_, note) => assert!(note.is_empty(), "{note}"),
            Alias::None => panic!("not recognised"),
        }
        let e = rewrite(&args("--compare -i a,b --log-level=loud")).unwrap_err();
        assert!(e.contains("--log-level"), "{e}");
    }

    #[test]
    fn other_command_lines_are_left_alone_and_bad_ones_name_the_problem() {
        for s in ["run -- prog --compare", "compare a b", "--help", "-V", ""] {
            assert_eq!(rewrite(&args(s)).unwrap(), Alias::None, "{s}");
        }
        for (s, want) in [
            ("--compare", "needs both"),
            ("--input-path=a,b", "needs both"),
            ("--compare --input-path=a,b,c", "exactly two"),
            ("--compare --input-path=a", "exactly two"),
            ("--compare -i a,b --level=op,kernel", "one level"),
            ("--compare -i a,b --steps=1", "unsupported option"),
            ("--compare --input-path", "needs a value"),
        ] {
            let e = rewrite(&args(s)).unwrap_err();
            assert!(e.contains(want), "{s}: {e}");
        }
    }
}
