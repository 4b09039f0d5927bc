//! `memscope compare RUN_A RUN_B` (issue 18): two output directories, their processes paired
//! by rank id (from each run's `memscope_run.json`, else the NPU of each process), one
//! `memory_compare_<ts>_rank<R>.csv` per pair, each pair aligned like two dump files (with the
//! same `--level` and device alignment). Two one-process runs without ranks (the usual step
//! runs) are one pair, written without a rank suffix. Otherwise processes without a rank, or
//! whose rank the other run lacks, are listed and left out.

use std::collections::BTreeMap;

use anyhow::{anyhow, Result};

use memscope_analysis::compare::{self, DeviceMap, Level, SequenceBuilder};
use memscope_dump::reader::{Order, ReadOptions};
use memscope_export::rank::{RunIndex, RunIndexFiles};
use memscope_export::ProcessInput;

use super::compare_args::CompareArgs;
use super::say;

/// The processes of run directory `dir` (its run `run`, or its newest, when it holds several):
/// by rank, those without one, and lines naming the processes left out.
type Sides = (BTreeMap<u32, ProcessInput>, Vec<ProcessInput>, Vec<String>);

fn by_rank(args: &CompareArgs, dir: &std::path::Path, run: Option<usize>) -> Result<Sides> {
    let inputs = match crate::run_select::choose(dir, run)? {
        Some(dirs) => dirs,
        None => vec![dir.to_path_buf()],
    };
    let index = RunIndexFiles::load(&[dir.to_path_buf()]).map_err(|e| anyhow!("{e}"))?;
    let index_ref: Option<&dyn RunIndex> = (!index.is_empty()).then_some(&index as _);
    let (procs, notes) =
        memscope_export::resolve(&inputs, index_ref, &mut memscope_export::progress::Silent)
            .map_err(|e| anyhow!("{e}"))?;
    for n in notes {
        args.note(&format!("{}: {n}", dir.display()));
    }
    let mut m = BTreeMap::new();
    let mut left = Vec::new();
    let mut rankless = Vec::new();
    for p in procs {
        let who = format!(
            "{}: pid {}",
            dir.display(),
            p.pid.map_or("?".into(), |x| x.to_string())
        );
        match p.rank.rank {
            Some(r) if !m.contains_key(&r) => {
                m.insert(r, p);
            }
            Some(r) => left.push(format!("{who} (rank {r} again)")),
            None => {
                left.push(format!("{who} (no rank)"));
                rankless.push(p);
            }
        }
    }
    Ok((m, rankless, left))
}

/// One side of a pair: every dump file of the process, in file order each.
fn side(p: &ProcessInput, level: Level) -> Result<compare::Sequence> {
    let mut b = SequenceBuilder::new(level);
    for f in &p.files {
        f.dump
            .for_each(Order::File, &mut ReadOptions::default(), &mut |ev| {
                b.observe(&ev);
                Ok(())
            })
            .map_err(|e| anyhow!("{e}"))?;
    }
    Ok(b.finish())
}

/// Whether a side holds any entry on any device.
fn has_entries(s: &compare::Sequence) -> bool {
    s.devices.values().any(|v| !v.is_empty())
}

/// Runs the compare of two run directories.
///
/// # Errors
/// A directory without dumps, an unreadable input, no rank both runs have, a device map that
/// does not fit a pair, an output that cannot be written.
pub fn run(args: &CompareArgs, level: Level, map: &DeviceMap) -> Result<()> {
    let runs = match &args.run {
        Some(r) => crate::run_select::parse_runs(r).map_err(|e| anyhow!(e))?,
        None => Vec::new(),
    };
    if runs.len() > 2 {
        return Err(anyhow!("--run: two run numbers at most (base, compare)"));
    }
    let (a, free_a, left_a) = by_rank(args, &args.base, runs.first().copied().flatten())?;
    let (b, free_b, left_b) = by_rank(args, &args.compare, runs.get(1).copied().flatten())?;
    // two one-process runs without ranks: their processes are the pair
    let single = a.is_empty() && b.is_empty() && free_a.len() == 1 && free_b.len() == 1;
    if !single {
        for l in left_a.iter().chain(&left_b) {
            args.note(&format!("{l}: not compared"));
        }
    }
    // (label, file suffix, base, compare)
    let pairs: Vec<(String, String, &ProcessInput, &ProcessInput)> = if single {
        vec![("process".into(), String::new(), &free_a[0], &free_b[0])]
    } else {
        a.iter()
            .filter_map(|(r, p)| Some((format!("rank {r}"), format!("_rank{r}"), p, b.get(r)?)))
            .collect()
    };
    for (r, dir) in a
        .keys()
        .filter(|r| !b.contains_key(r))
        .map(|r| (r, &args.compare))
        .chain(
            b.keys()
                .filter(|r| !a.contains_key(r))
                .map(|r| (r, &args.base)),
        )
    {
        args.note(&format!(
            "rank {r} is not in {}: not compared",
            dir.display()
        ));
    }
    if pairs.is_empty() {
        return Err(anyhow!(
            "{} and {}: no rank in both runs; nothing to compare",
            args.base.display(),
            args.compare.display()
        ));
    }
    let mut written = 0;
    // pairs without rows are said only beside pairs that were compared: alone they are the
    // one-line error below
    let mut empty = Vec::new();
    for (r, suffix, pa, pb) in &pairs {
        let (r, suffix, pa, pb) = (r, suffix, *pa, *pb);
        let base = side(pa, level)?;
        let mut cmp = side(pb, level)?;
        let mapped = compare::map_devices(&base, &mut cmp, map).map_err(|e| anyhow!("{r}: {e}"))?;
        let res = compare::compare(&base, &cmp, level);
        if let Some(n) = mapped {
            args.note(&format!("{r}: {n}"));
        }
        for n in &res.notes {
            args.note(&format!("{r}: {n}"));
        }
        if res.rows.is_empty() {
            empty.push(format!("{r}: no rows to compare at this level"));
            continue;
        }
        let path = compare::write_compare_csv_as(&args.output, suffix, &res.rows, args.step_column)
            .map_err(|e| {
                anyhow!(
                    "cannot write {}: {e}",
                    args.output.join("compare").display()
                )
            })?;
        written += 1;
        let matched = res
            .rows
            .iter()
            .filter(|x| x.base.is_some() && x.compare.is_some())
            .count();
        let diff: i64 = res.rows.iter().map(|x| x.diff()).sum();
        say(&format!(
            "{r}: {} row(s) ({matched} matched, {} base only, {} compare only), diff {diff} bytes, written to {}",
            res.rows.len(),
            res.rows.iter().filter(|x| x.compare.is_none()).count(),
            res.rows.iter().filter(|x| x.base.is_none()).count(),
            path.display()
        ));
    }
    if written == 0 {
        let mut kernels = false;
        if level == Level::Op {
            for (_, _, pa, pb) in &pairs {
                kernels |= has_entries(&side(pa, Level::Kernel)?)
                    && has_entries(&side(pb, Level::Kernel)?);
            }
        }
        return Err(super::compare_cmd::nothing_to_compare(
            &args.base.display().to_string(),
            &args.compare.display().to_string(),
            level,
            "in any rank pair",
            kernels,
        ));
    }
    for l in empty {
        say(&l);
    }
    Ok(())
}
