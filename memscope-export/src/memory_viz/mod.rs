//! PyTorch memory snapshots (`torch.cuda.memory._snapshot()` / `_dump_snapshot()` pickles), as
//! read by `pytorch.org/memory_viz` (`torch/utils/viz/MemoryViz.js`), `torch.cuda._memory_viz`
//! and MindStudio Insight.
//!
//! One snapshot per process (the viewer shows one allocator's devices): a top-level dict with
//! * `device_traces`: one list per NPU ordinal `0..=max` (empty for devices the process did
//!   not use), each the device's events as trace entries `{action, addr, size, stream,
//!   time_us, frames, category[, device_free]}` ([`device`] has the rules);
//! * `segments`: the final state, each device's segments with their blocks tiling them
//!   (`active_allocated` live blocks, `inactive` gaps);
//! * `allocator_settings`: how each device's segments were made (`reservations` or
//!   `synthetic`).
//!
//! Frames come from the rows' call stacks (C frames, then Python frames, innermost first);
//! `category` is the block's owner chain, `"unknown"` without one. The file is written in one
//! pass per device over the device's rows (a second one when the reservations turn out not to
//! hold the pool's blocks), streaming: memory holds the live blocks and the memo of repeated
//! values, never the trace.

mod device;
mod doc;
pub mod pickle;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use memscope_core::event::Device;

pub use device::{Counts, Mode};
pub use doc::Doc;
pub use pickle::{Pickler, Sink};

use crate::error::ExportError;
use crate::input::ProcessInput;
use crate::out_file::OutFile;
use crate::progress::Progress;
use crate::replay::{replay, Flow, Item};
use crate::Summary;
use device::{DeviceTrace, Step};

/// Highest NPU ordinal a snapshot holds (`device_traces` has one list per ordinal up to it).
pub const MAX_DEVICE: u32 = 4095;

/// How one device of a snapshot was written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceReport {
    /// NPU ordinal.
    pub device: u32,
    /// Where its segments came from.
    pub mode: Mode,
    /// Rows adapted or left out.
    pub counts: Counts,
    /// Final segments written.
    pub segments: usize,
}

/// Writes the snapshot of process `p` into `sink`: one replay per NPU device of `p` (two when
/// its reservations do not hold its blocks). Returns the sink, the devices' reports and the
/// events read.
///
/// # Errors
/// Reading an input or writing `sink` failed; `out` names the output in messages.
pub fn write_snapshot<W: Sink>(
    p: &ProcessInput,
    sink: W,
    out: &Path,
    progress: &mut dyn Progress,
) -> Result<(W, Vec<DeviceReport>, u64), ExportError> {
    let io = |e: std::io::Error| ExportError::write(out, e);
    let npus = p.npus();
    let max = npus.iter().copied().max();
    if let Some(m) = max.filter(|m| *m > MAX_DEVICE) {
        return Err(ExportError::Other(format!(
            "{} ({}): device {m} is beyond the {MAX_DEVICE} NPU ordinals a snapshot's device_traces list can index",
            p.label(),
            p.origin()
        )));
    }
    let mut doc = Doc::new(sink);
    doc.p.empty_dict().map_err(io)?;
    doc.p.mark().map_err(io)?;
    doc.key("device_traces").map_err(io)?;
    doc.p.empty_list().map_err(io)?;
    let mut traces: Vec<DeviceTrace> = Vec::new();
    let mut events = 0u64;
    for d in 0..max.map_or(0, |m| m + 1) {
        if !npus.contains(&d) {
            doc.p.empty_list().map_err(io)?;
            doc.p.append().map_err(io)?;
            continue;
        }
        let start = doc.p.checkpoint();
        let mut mode = Mode::Reservations;
        loop {
            progress.stage(&format!("memory-viz: {} NPU {d}", p.label()));
            let mut trace = DeviceTrace::new(d, mode);
            trace.open(&mut doc).map_err(io)?;
            let mut violation = false;
            let stats = replay(p, Some(Device::Npu(d)), progress, &mut |item| match item {
                Item::Restart => {
                    doc.p.rewind(start).map_err(io)?;
                    trace = DeviceTrace::new(d, mode);
                    trace.open(&mut doc).map_err(io)?;
                    Ok(Flow::Continue)
                }
                Item::Event(ev) => match trace.on_event(&mut doc, &ev).map_err(io)? {
                    Step::Ok => Ok(Flow::Continue),
                    Step::Violation => {
                        violation = true;
                        Ok(Flow::Stop)
                    }
                },
            })?;
            events += stats.events;
            if violation {
                doc.p.rewind(start).map_err(io)?;
                mode = Mode::Synthetic;
                progress.plan(p.bytes_for(Some(Device::Npu(d))));
                continue;
            }
            trace.close(&mut doc).map_err(io)?;
            traces.push(trace);
            break;
        }
    }
    doc.key("segments").map_err(io)?;
    doc.p.empty_list().map_err(io)?;
    doc.p.mark().map_err(io)?;
    let mut reports = Vec::new();
    for t in &traces {
        let segments = t.write_segments(&mut doc).map_err(io)?;
        reports.push(DeviceReport {
            device: t.device(),
            mode: t.mode(),
            counts: t.counts,
            segments,
        });
    }
    doc.p.appends().map_err(io)?;
    doc.key("allocator_settings").map_err(io)?;
    doc.p.empty_dict().map_err(io)?;
    doc.p.mark().map_err(io)?;
    doc.key("exporter").map_err(io)?;
    doc.p.str("memscope").map_err(io)?;
    for r in &reports {
        doc.key(&format!("segments_device_{}", r.device))
            .map_err(io)?;
        doc.p
            .str(match r.mode {
                Mode::Reservations => "reservations",
                Mode::Synthetic => "synthetic",
            })
            .map_err(io)?;
    }
    doc.p.setitems().map_err(io)?;
    doc.p.setitems().map_err(io)?;
    let sink = doc.p.finish().map_err(io)?;
    Ok((sink, reports, events))
}

fn report_notes(p: &ProcessInput, reports: &[DeviceReport], notes: &mut Vec<String>) {
    for r in reports {
        let c = r.counts;
        let mut parts = Vec::new();
        if r.mode == Mode::Synthetic {
            parts.push("no device reservations hold its pool blocks: one synthetic segment per device (PyTorch's fallback)".to_owned());
        }
        if c.replaced > 0 {
            parts.push(format!(
                "{} block(s) re-allocated without a FREE replaced",
                c.replaced
            ));
        }
        if c.overlapping > 0 {
            parts.push(format!(
                "{} block(s) inside another pool's live block left out",
                c.overlapping
            ));
        }
        if c.unknown_frees > 0 {
            parts.push(format!(
                "{} FREE row(s) of blocks allocated before the trace left out",
                c.unknown_frees
            ));
        }
        if c.zero_size > 0 {
            parts.push(format!("{} zero-byte allocation(s) left out", c.zero_size));
        }
        if !parts.is_empty() {
            notes.push(format!(
                "{} NPU {}: {}",
                p.label(),
                r.device,
                parts.join("; ")
            ));
        }
    }
}

/// Output file of each process: `out` itself for one process, else
/// `out/rank<R>_pid<P>.pickle` (`pid<P>` when the rank is unknown; `_<n>` added when two
/// processes would share a name).
pub fn output_paths(procs: &[&ProcessInput], out: &Path) -> Vec<PathBuf> {
    if procs.len() == 1 {
        return vec![out.to_owned()];
    }
    let mut used: BTreeMap<String, u32> = BTreeMap::new();
    procs
        .iter()
        .map(|p| {
            let mut name = match (p.rank.rank, p.pid) {
                (Some(r), Some(pid)) => format!("rank{r}_pid{pid}"),
                (Some(r), None) => format!("rank{r}"),
                (None, Some(pid)) => format!("pid{pid}"),
                (None, None) => "process".to_owned(),
            };
            let n = used.entry(name.clone()).or_insert(0);
            *n += 1;
            if *n > 1 {
                name = format!("{name}_{}", p.synthetic_pid);
            }
            out.join(format!("{name}.pickle"))
        })
        .collect()
}

/// `memscope export --to memory-viz`: one snapshot per process with NPU events.
///
/// # Errors
/// An unreadable input, an existing or unwritable output.
pub fn export(
    procs: &[ProcessInput],
    out: &Path,
    progress: &mut dyn Progress,
) -> Result<Summary, ExportError> {
    let mut summary = Summary::default();
    let with_npu: Vec<&ProcessInput> = procs.iter().filter(|p| !p.npus().is_empty()).collect();
    for p in procs.iter().filter(|p| p.npus().is_empty()) {
        summary.notes.push(format!(
            "{} ({}): no NPU rows, no snapshot written",
            p.label(),
            p.origin()
        ));
    }
    if with_npu.is_empty() {
        return Err(ExportError::Other(
            "no process of the input has NPU memory rows: nothing for memory_viz".into(),
        ));
    }
    let paths = output_paths(&with_npu, out);
    if with_npu.len() > 1 {
        match std::fs::symlink_metadata(out) {
            Ok(md) if !md.is_dir() => {
                return Err(ExportError::Output {
                    path: out.display().to_string(),
                    msg: "is a file; the input has several processes, so the output is a directory of snapshots".into(),
                })
            }
            Ok(_) => {}
            Err(_) => crate::out_file::create_dirs(out)?,
        }
        for path in &paths {
            crate::out_file::refuse_existing(path)?;
        }
    }
    for p in &with_npu {
        progress.plan(
            p.npus()
                .iter()
                .map(|d| p.bytes_for(Some(Device::Npu(*d))))
                .sum(),
        );
    }
    for (p, path) in with_npu.iter().zip(&paths) {
        let file = OutFile::create(path)?;
        let (file, reports, events) = write_snapshot(p, file, path, progress)?;
        summary.bytes += file.commit()?;
        summary.events += events;
        summary.files.push(path.clone());
        summary.processes += 1;
        report_notes(p, &reports, &mut summary.notes);
    }
    Ok(summary)
}
