//! Step compare of two dumps: `memscope compare BASE COMPARE [--level op|kernel]` (issue 6 §2,
//! behaviour spec §10.3 where the issue does not differ).
//!
//! Per device, the op (or kernel) names of both files are aligned with Myers' diff; each row
//! shows the memory change inside the entry on each side (`N/A` for a side without a match)
//! and Diff = Compare − Base (a missing side counts as 0). Devices come out in ascending order.
//! The value is the memory change across the call (see [`collect()`]), not msMemScope's size of
//! the next pool event after the op.

pub mod collect;
pub mod myers;

use std::collections::{BTreeSet, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};

pub use collect::{collect, collect_events, Entry, Sequence, SequenceBuilder};
use myers::{diff, Edit};

use super::outfile::{create_dir_private, create_unique};
use memscope_dump::reader::{DumpFile, ReadError, ReadOptions};

/// First header line of `memory_compare_{ts}.csv`.
pub const COMPARE_HEADER_1: &str = ",,,Base,Compare";
/// Second header line of `memory_compare_{ts}.csv`: msMemScope's six columns, exactly as its
/// smoke suite checks them.
pub const COMPARE_HEADER_2: &str =
    "Event,Name,Device Id,Allocated Memory(byte),Allocated Memory(byte),Diff Memory(byte)";
/// Second header line with memscope's `Step` column (`memscope compare --step-column`: the
/// step each entry started in, issue 18); only written when asked for (issue 27).
pub const COMPARE_HEADER_2_STEP: &str =
    "Event,Name,Device Id,Allocated Memory(byte),Allocated Memory(byte),Diff Memory(byte),Step";
/// Most differences traced per device before falling back to positional pairing.
pub const MAX_DIFFERENCES: usize = 4000;

/// What is compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Level {
    /// ATEN/ATB START…END pairs.
    #[default]
    Op,
    /// KERNEL_LAUNCH rows.
    Kernel,
}

impl Level {
    /// The Event column of the output rows.
    pub fn event(self) -> &'static str {
        match self {
            Level::Op => "OP_LAUNCH",
            Level::Kernel => "KERNEL_LAUNCH",
        }
    }
}

/// One output row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompareRow {
    /// `OP_LAUNCH` or `KERNEL_LAUNCH`.
    pub event: &'static str,
    /// Op or kernel name.
    pub name: String,
    /// Device.
    pub device: u32,
    /// Memory change on the base side, `None` when it has no match.
    pub base: Option<i64>,
    /// Memory change on the compare side, `None` when it has no match.
    pub compare: Option<i64>,
    /// The step the entry started in (the base side's when both have it); `None` before the
    /// first step or in a file without steps.
    pub step: Option<u32>,
}

impl CompareRow {
    /// Compare − Base, a missing side counting as 0.
    pub fn diff(&self) -> i64 {
        self.compare
            .unwrap_or(0)
            .saturating_sub(self.base.unwrap_or(0))
    }
}

/// Result of a compare.
#[derive(Clone, Debug, Default)]
pub struct CompareResult {
    /// Rows, devices ascending, sequence order within a device.
    pub rows: Vec<CompareRow>,
    /// Notes for the user (HAL fallback, unmatched STARTs, positional fallback).
    pub notes: Vec<String>,
}

/// Aligns two sides.
pub fn compare(base: &Sequence, cmp: &Sequence, level: Level) -> CompareResult {
    let mut res = CompareResult::default();
    let mut ids: HashMap<&str, u32> = HashMap::new();
    fn global<'a>(ids: &mut HashMap<&'a str, u32>, names: &'a [String]) -> Vec<u32> {
        names
            .iter()
            .map(|n| {
                let next = ids.len() as u32;
                *ids.entry(n.as_str()).or_insert(next)
            })
            .collect()
    }
    let gb = global(&mut ids, &base.names);
    let gc = global(&mut ids, &cmp.names);
    let devices: BTreeSet<u32> = base
        .devices
        .keys()
        .chain(cmp.devices.keys())
        .copied()
        .collect();
    let empty = Vec::new();
    for d in devices {
        let a = base.devices.get(&d).unwrap_or(&empty);
        let b = cmp.devices.get(&d).unwrap_or(&empty);
        let an: Vec<u32> = a.iter().map(|e| gb[e.name as usize]).collect();
        let bn: Vec<u32> = b.iter().map(|e| gc[e.name as usize]).collect();
        let (edits, fell_back) = diff(&an, &bn, MAX_DIFFERENCES);
        if fell_back {
            res.notes.push(format!(
                "device {d}: more than {MAX_DIFFERENCES} differences; the differing middle part is paired by position"
            ));
        }
        for e in edits {
            let (name, bv, cv, step) = match e {
                Edit::Match(i, j) => (
                    &base.names[a[i].name as usize],
                    Some(a[i].delta),
                    Some(b[j].delta),
                    a[i].step,
                ),
                Edit::Delete(i) => (
                    &base.names[a[i].name as usize],
                    Some(a[i].delta),
                    None,
                    a[i].step,
                ),
                Edit::Insert(j) => (
                    &cmp.names[b[j].name as usize],
                    None,
                    Some(b[j].delta),
                    b[j].step,
                ),
            };
            res.rows.push(CompareRow {
                event: level.event(),
                name: name.clone(),
                device: d,
                base: bv,
                compare: cv,
                step: (step > 0).then_some(step),
            });
        }
    }
    for (side, s) in [("base", base), ("compare", cmp)] {
        if s.used_hal {
            res.notes.push(format!(
                "{side}: no framework pool events; HAL memory is compared"
            ));
        }
        if s.unmatched > 0 {
            res.notes.push(format!(
                "{side}: {} op START row(s) without a matching END were left out",
                s.unmatched
            ));
        }
        if s.unmatched_ends > 0 {
            res.notes.push(format!(
                "{side}: {} op END row(s) without a matching START were left out",
                s.unmatched_ends
            ));
        }
    }
    res
}

/// How the devices of the compare side are aligned with the base side's.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum DeviceMap {
    /// Device N with device N (msMemScope's).
    #[default]
    Same,
    /// Each side's only device with the other's (`--ignore-device`; rows carry the base's id).
    Ignore,
    /// Compare-side device → base-side device (`--map-device 5=0`); unlisted devices keep
    /// their id.
    Map(Vec<(u32, u32)>),
}

/// Parses `--map-device` (`C=B[,C=B...]`: compare-side device C is aligned with base-side
/// device B).
///
/// # Errors
/// A one-line message naming the bad entry.
pub fn parse_device_map(s: &str) -> Result<Vec<(u32, u32)>, String> {
    let mut v = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (c, b) = part
            .split_once('=')
            .ok_or_else(|| format!("{part:?}: expected COMPARE_DEVICE=BASE_DEVICE, e.g. 5=0"))?;
        let num = |x: &str| {
            x.trim()
                .parse::<u32>()
                .map_err(|_| format!("{part:?}: {x:?} is not a device number"))
        };
        let c = num(c)?;
        if v.iter().any(|(k, _)| *k == c) {
            return Err(format!("{part:?}: device {c} is mapped twice"));
        }
        v.push((c, num(b)?));
    }
    if v.is_empty() {
        return Err("no device pair given (e.g. 5=0)".into());
    }
    Ok(v)
}

/// Renumbers the devices of the compare side `cmp` as `map` says, given the base side's
/// devices; returns a note for the user.
///
/// # Errors
/// `Ignore` with a side that holds several devices (one line: use a map), or a map that sends
/// two devices onto one.
pub fn map_devices(
    base: &Sequence,
    cmp: &mut Sequence,
    map: &DeviceMap,
) -> Result<Option<String>, String> {
    let pairs: Vec<(u32, u32)> = match map {
        DeviceMap::Same => return Ok(None),
        DeviceMap::Ignore => {
            let b: Vec<u32> = base.devices.keys().copied().collect();
            let c: Vec<u32> = cmp.devices.keys().copied().collect();
            match (&b[..], &c[..]) {
                ([b], [c]) => vec![(*c, *b)],
                ([], _) | (_, []) => return Ok(None),
                _ => {
                    return Err(format!(
                        "--ignore-device needs one device per side (base has {b:?}, compare {c:?}); pair them with --map-device C=B,..."
                    ))
                }
            }
        }
        DeviceMap::Map(p) => p.clone(),
    };
    let mut out = std::collections::BTreeMap::new();
    for (d, entries) in std::mem::take(&mut cmp.devices) {
        let to = pairs.iter().find(|(c, _)| *c == d).map_or(d, |(_, b)| *b);
        if out.insert(to, entries).is_some() {
            return Err(format!(
                "the device map sends two compare-side devices onto device {to}"
            ));
        }
    }
    cmp.devices = out;
    let text: Vec<String> = pairs.iter().map(|(c, b)| format!("{c}→{b}")).collect();
    Ok(Some(format!(
        "compare-side devices aligned with base devices {} (Device Id is the base's)",
        text.join(", ")
    )))
}

/// Reads both files and aligns them.
///
/// # Errors
/// A [`ReadError`] naming the file at fault.
pub fn compare_files(
    base: &Path,
    cmp: &Path,
    level: Level,
    base_opts: &mut ReadOptions,
    cmp_opts: &mut ReadOptions,
) -> Result<CompareResult, ReadError> {
    let b = collect(&DumpFile::open(base)?, level, base_opts)?;
    let c = collect(&DumpFile::open(cmp)?, level, cmp_opts)?;
    Ok(compare(&b, &c, level))
}

/// The CSV text of `rows`: the two header lines, then one line per row (RFC 4180 quoting;
/// names neutralised against formula injection, [`memscope_core::sanitize::csv_report_cell`]).
/// `step_column` adds memscope's `Step` column after msMemScope's six.
pub fn compare_csv(rows: &[CompareRow], step_column: bool) -> Vec<u8> {
    let header_2 = if step_column {
        COMPARE_HEADER_2_STEP
    } else {
        COMPARE_HEADER_2
    };
    let mut out = format!("{COMPARE_HEADER_1}\n{header_2}\n").into_bytes();
    let mut w = csv::WriterBuilder::new()
        .terminator(csv::Terminator::Any(b'\n'))
        .from_writer(Vec::new());
    let na = |v: Option<i64>| v.map_or("N/A".to_owned(), |x| x.to_string());
    for r in rows {
        let mut fields = vec![
            r.event.to_owned(),
            memscope_core::sanitize::csv_report_cell(&r.name).into_owned(),
            r.device.to_string(),
            na(r.base),
            na(r.compare),
            r.diff().to_string(),
        ];
        if step_column {
            fields.push(r.step.map_or_else(String::new, |s| s.to_string()));
        }
        // writing into a Vec cannot fail
        let _ = w.write_record(&fields);
    }
    out.extend(w.into_inner().unwrap_or_default());
    out
}

/// Writes `<output>/compare/memory_compare_{ts}.csv` (folders 0750, file 0600, never over an
/// existing file) and returns its path.
///
/// # Errors
/// The folder or file cannot be created or written.
pub fn write_compare_csv(output: &Path, rows: &[CompareRow]) -> std::io::Result<PathBuf> {
    write_compare_csv_as(output, "", rows, false)
}

/// As [`write_compare_csv`], the name ending in `suffix` (`memory_compare_{ts}{suffix}.csv`,
/// e.g. `_rank3` for one rank pair of two runs), with the `Step` column when `step_column`.
///
/// # Errors
/// As [`write_compare_csv`].
pub fn write_compare_csv_as(
    output: &Path,
    suffix: &str,
    rows: &[CompareRow],
    step_column: bool,
) -> std::io::Result<PathBuf> {
    let dir = output.join("compare");
    create_dir_private(&dir)?;
    let ts = chrono::Local::now().format("%Y%m%d%H%M%S");
    let (path, mut f) = create_unique(&dir, &format!("memory_compare_{ts}{suffix}"), "csv")?;
    f.write_all(&compare_csv(rows, step_column))?;
    f.sync_all()?;
    Ok(path)
}
