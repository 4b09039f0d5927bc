//! `memscope compare BASE COMPARE`: its run over two dump files (two run directories go to
//! `compare_runs`; the arguments are `compare_args`).

use anyhow::{anyhow, Result};

use memscope_analysis::compare::{self, Level};
use memscope_dump::reader::ReadOptions;

use super::compare_args::CompareArgs;
use super::{compare_runs, open, progress, say, LevelArg};

/// Runs `memscope compare`.
///
/// # Errors
/// An unreadable or malformed input, or an output that cannot be written.
pub fn run_compare(args: &CompareArgs) -> Result<()> {
    let level = match args.level {
        LevelArg::Op => Level::Op,
        LevelArg::Kernel => Level::Kernel,
    };
    let map = device_map(args)?;
    match (args.base.is_dir(), args.compare.is_dir()) {
        (true, true) => return compare_runs::run(args, level, &map),
        (false, false) if args.run.is_some() => {
            return Err(anyhow!(
                "--run goes with output directories that hold several runs, not dump files"
            ))
        }
        (false, false) => {}
        _ => {
            return Err(anyhow!(
                "{} and {}: give two dump files or two output directories",
                args.base.display(),
                args.compare.display()
            ))
        }
    }
    let base = open(&args.base)?;
    let cmp = open(&args.compare)?;
    let mut bo = ReadOptions {
        progress: Some(progress::bar(base.name())),
        ..ReadOptions::default()
    };
    let b = compare::collect(&base, level, &mut bo).map_err(|e| anyhow!("{e}"))?;
    let mut co = ReadOptions {
        progress: Some(progress::bar(cmp.name())),
        ..ReadOptions::default()
    };
    let mut c = compare::collect(&cmp, level, &mut co).map_err(|e| anyhow!("{e}"))?;
    let mapped = compare::map_devices(&b, &mut c, &map).map_err(|e| anyhow!("{e}"))?;
    let res = compare::compare(&b, &c, level);
    if let Some(n) = mapped {
        args.note(&n);
    }
    // one side without rows of the level: every row is the other's only (said, not an error)
    for (f, s, other) in [(&base, &b, "compare"), (&cmp, &c, "base")] {
        if s.devices.values().all(Vec::is_empty) && !res.rows.is_empty() {
            args.warn(&format!(
                "{} has no {} rows: every row is {other} only ({})",
                f.name(),
                level_rows(level),
                RECORD_HINT
            ));
        }
    }
    if res.rows.is_empty() {
        let kernels = level == Level::Op && {
            let has = |f| {
                compare::collect(f, Level::Kernel, &mut ReadOptions::default())
                    .is_ok_and(|s| s.devices.values().any(|v| !v.is_empty()))
            };
            has(&base) && has(&cmp)
        };
        return Err(nothing_to_compare(
            base.name(),
            cmp.name(),
            level,
            "on any device",
            kernels,
        ));
    }
    for (f, s) in [(&base, &b), (&cmp, &c)] {
        if let Some(w) = s.stats.torn_warning(f.name()) {
            args.warn(&w);
        }
    }
    for n in &res.notes {
        args.note(n);
    }
    let path = compare::write_compare_csv_as(&args.output, "", &res.rows, args.step_column)
        .map_err(|e| {
            anyhow!(
                "cannot write {}: {e}",
                args.output.join("compare").display()
            )
        })?;
    let matched = res
        .rows
        .iter()
        .filter(|r| r.base.is_some() && r.compare.is_some())
        .count();
    say(&format!(
        "memory compare: {} row(s) ({} matched, {} base only, {} compare only) written to {}",
        res.rows.len(),
        matched,
        res.rows.iter().filter(|r| r.compare.is_none()).count(),
        res.rows.iter().filter(|r| r.base.is_none()).count(),
        path.display()
    ));
    Ok(())
}

/// The device alignment of `--ignore-device` / `--map-device`.
fn device_map(args: &CompareArgs) -> Result<compare::DeviceMap> {
    Ok(match (&args.map_device, args.ignore_device) {
        (Some(m), _) => compare::DeviceMap::Map(
            compare::parse_device_map(m).map_err(|e| anyhow!("--map-device {m}: {e}"))?,
        ),
        (None, true) => compare::DeviceMap::Ignore,
        (None, false) => compare::DeviceMap::Same,
    })
}

/// The error of two inputs with nothing to align at `level`, with why and what records it:
/// msMemScope writes op and kernel launches only with `launch` in `--events`, so its
/// best-practice recipe (`--events=alloc,free`, then `--compare --level=kernel`) leaves it
/// nothing to compare either ("Memory comparison failed!").
pub(crate) fn nothing_to_compare(
    base: &str,
    cmp: &str,
    level: Level,
    scope: &str,
    kernels: bool,
) -> anyhow::Error {
    if kernels {
        // op rows missing where kernel launches were recorded: the level is what to change
        return anyhow!(
            "{base} and {cmp}: no {} rows {scope}, but both hold KERNEL_LAUNCH rows: compare them with --level kernel",
            level_rows(level)
        );
    }
    anyhow!(
        "{base} and {cmp}: no {} rows {scope}; nothing to compare ({RECORD_HINT}; msMemScope's recipe with --events=alloc,free writes none either, and its compare fails the same way)",
        level_rows(level)
    )
}

/// What records the rows a compare aligns.
const RECORD_HINT: &str = "op and kernel launches are written only with `launch` in --events and the level in --level, e.g. --events=alloc,free,launch --level=op,kernel";

/// The rows a compare at `level` aligns.
fn level_rows(level: Level) -> &'static str {
    if level == Level::Op {
        "ATEN/ATB START/END"
    } else {
        "KERNEL_LAUNCH"
    }
}
