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
    if res.rows.is_empty() {
        return Err(anyhow!(
            "{} and {}: no {} rows on any device; nothing to compare",
            base.name(),
            cmp.name(),
            if level == Level::Op {
                "ATEN/ATB START/END"
            } else {
                "KERNEL_LAUNCH"
            }
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
