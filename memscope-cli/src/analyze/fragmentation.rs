//! `memscope analyze fragmentation INPUT [--request SIZE [--at step:N]] [-o DIR]` (issue 25):
//! per device and pool, reserved, allocated, free inside segments, free extents, the largest
//! one and the fragmentation, at each step's end and at the end, with the moment most bytes were
//! stranded outside the largest extent; a verdict at every OOM, and for `--request`.
//!
//! INPUT is a dump file, a kept capture, a process directory (its capture when it has one: the
//! capture holds each OOM's request size, the dumps only with `--analysis oom`) or a run
//! directory (every process). With `-o DIR` the figures after every change go to
//! `DIR/fragmentation_<ts>.csv` ([`CURVE_HEADER`]).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::{anyhow, Context, Result};
use clap::Args;

use memscope_analysis::fragmentation::FragmentationLayer;
use memscope_analysis::outfile::create_unique;
use memscope_core::bus::{Bus, BusCtx, BusError, Flow, Layer, ReportSection};
use memscope_core::event::Event;
use memscope_dump::reader::ConsumerError;

use super::{print_sections, say};

/// Header of `fragmentation_<ts>.csv`: one row per change of a pool's figures.
pub const CURVE_HEADER: &str = "Process Id,Device Id,Event Type,ID,Timestamp(ns),Reserved(byte),Allocated(byte),Free(byte),Free Extents,Largest Free(byte),Fragmentation";

/// `memscope analyze fragmentation`.
#[derive(Clone, Debug, Args)]
pub struct FragmentationArgs {
    /// A dump file, a capture (.mscap), a process directory or a run directory.
    pub input: PathBuf,
    /// Also judge a request of this size (bytes, or with KiB/MiB/GiB) at the end of the run, or
    /// of the step given by --at.
    #[arg(long, value_name = "SIZE", value_parser = parse_size, allow_hyphen_values = true)]
    pub request: Option<u64>,
    /// When to judge the --request: `step:N` (the end of step N).
    #[arg(long, value_name = "step:N", requires = "request", value_parser = parse_at)]
    pub at: Option<u32>,
    /// Folder for fragmentation_<ts>.csv (the figures after every change); none by default.
    #[arg(short = 'o', long = "output", value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// With an output directory that holds several runs: which one (its number as memscope
    /// lists them) [default: the newest].
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    pub run: Option<usize>,
}

/// Parses a request size as `--fail-on` does (`96MiB`, `1.5GiB`, `4096` bytes, `2GB`:
/// `memscope_analysis::thresholds::parse_size`), at least 1 byte.
///
/// # Errors
/// A malformed size or 0, worded for the user.
pub fn parse_size(s: &str) -> Result<u64, String> {
    match memscope_analysis::thresholds::parse_size(s)? {
        0 => Err(format!("{s:?}: a request of at least 1 byte")),
        b => Ok(b),
    }
}

fn parse_at(s: &str) -> Result<u32, String> {
    s.strip_prefix("step:")
        .and_then(|n| n.parse::<u32>().ok())
        .filter(|n| *n >= 1)
        .ok_or_else(|| format!("{s:?}: expected step:N with N ≥ 1"))
}

type Curve = Arc<Mutex<csv::Writer<std::io::BufWriter<std::fs::File>>>>;

/// The analysis, writing each change of a pool's figures to the curve file when there is one.
struct CurveLayer {
    inner: FragmentationLayer,
    curve: Option<Curve>,
    error: Option<String>,
}

impl Layer for CurveLayer {
    fn name(&self) -> &'static str {
        "fragmentation"
    }

    fn on_event(
        &mut self,
        ev: &mut Event,
        ctx: &BusCtx,
        out: &mut Vec<Event>,
    ) -> Result<Flow, BusError> {
        let (id, ts, pid) = (ev.id, ev.ts_ns, ev.pid);
        let flow = self.inner.on_event(ev, ctx, out)?;
        let Some(c) = &self.curve else {
            return Ok(flow);
        };
        let mut w = c
            .lock()
            .map_err(|_| BusError::Other("fragmentation: poisoned lock".into()))?;
        for ((dev, pool), f) in self.inner.changes() {
            let opt = |v: Option<u64>| v.map_or("N/A".to_owned(), |v| v.to_string());
            let r = w.write_record([
                pid.map_or("N/A".to_owned(), |p| p.to_string()),
                dev.to_text(),
                pool.as_str().to_owned(),
                id.to_string(),
                ts.to_string(),
                f.reserved.to_string(),
                f.allocated.to_string(),
                f.free.to_string(),
                opt(f.extents),
                opt(f.largest),
                f.fragmentation()
                    .map_or("N/A".to_owned(), |x| format!("{x:.6}")),
            ]);
            if let Err(e) = r {
                self.error.get_or_insert(e.to_string());
            }
        }
        Ok(flow)
    }

    fn finish(
        &mut self,
        ctx: &BusCtx,
        out: &mut Vec<Event>,
        report: &mut Vec<ReportSection>,
    ) -> Result<(), BusError> {
        if let Some(e) = self.error.take() {
            return Err(BusError::Other(format!("fragmentation CSV: {e}")));
        }
        self.inner.finish(ctx, out, report)
    }
}

/// Runs `memscope analyze fragmentation`.
///
/// # Errors
/// A bad input (one line naming it) or an output that cannot be written.
pub fn run(a: &FragmentationArgs) -> Result<()> {
    let curve: Option<(PathBuf, Curve)> = match &a.output {
        Some(dir) => {
            let ts = chrono::Local::now().format("%Y%m%d%H%M%S");
            let (path, file) = create_unique(dir, &format!("fragmentation_{ts}"), "csv")
                .map_err(|e| anyhow!("cannot write into {}: {e}", dir.display()))?;
            let mut w = csv::WriterBuilder::new()
                .terminator(csv::Terminator::Any(b'\n'))
                .from_writer(std::io::BufWriter::new(file));
            w.write_record(CURVE_HEADER.split(','))
                .with_context(|| path.display().to_string())?;
            Some((path, Arc::new(Mutex::new(w))))
        }
        None => None,
    };
    let mut make = || -> Vec<Box<dyn Layer>> {
        let mut l = FragmentationLayer::new(true);
        if let Some(r) = a.request {
            l = l.with_request(r, a.at);
        }
        vec![Box::new(CurveLayer {
            inner: l,
            curve: curve.as_ref().map(|c| c.1.clone()),
            error: None,
        })]
    };
    // one run of a directory that holds several (issue 23)
    let inputs =
        crate::run_select::choose(&a.input, a.run)?.unwrap_or_else(|| vec![a.input.clone()]);
    let mut sections = Vec::new();
    for input in &inputs {
        sections.extend(replay(input, &mut make)?);
    }
    print_sections(&sections, false);
    if let Some((path, w)) = curve {
        w.lock()
            .map_err(|_| anyhow!("fragmentation CSV: poisoned lock"))?
            .flush()
            .with_context(|| path.display().to_string())?;
        say(&format!(
            "fragmentation: figures written to {}",
            path.display()
        ));
    }
    Ok(())
}

/// Every process of `input` (a dump, a capture, a process or run directory; a process
/// directory's capture rather than its dumps) through fresh `make()` layers, one bus per
/// process, in input order; the sections of every process.
pub(super) fn replay(
    input: &Path,
    make: &mut dyn FnMut() -> Vec<Box<dyn Layer>>,
) -> Result<Vec<ReportSection>> {
    let run = crate::report_cmd::discover_run(input)?;
    let mut sections = Vec::new();
    for g in &run.groups {
        let mut buses: Vec<(Option<u32>, Bus)> = Vec::new();
        let mut push = |ev: Event| -> Result<(), ConsumerError> {
            if buses.last().is_none_or(|(p, _)| *p != ev.pid) {
                buses.push((ev.pid, Bus::new(ev.pid, make())));
            }
            let (_, bus) = buses.last_mut().expect("pushed");
            bus.push(ev).map_err(|e| Box::new(e) as ConsumerError)
        };
        match &g.capture {
            Some(c) => c.replay(&mut push).map_err(|e| anyhow!("{e}"))?,
            None => {
                let fed = memscope_report::feed::feed_group(g, false, &mut push, &mut || {})
                    .map_err(|e| anyhow!("{e}"))?;
                for w in fed.warnings {
                    eprintln!("memscope: warning: {w}");
                }
            }
        }
        if buses.is_empty() {
            // as a header-only dump says so: an empty (or cut) capture is not a clean run
            let held = if g.capture.is_some() {
                "the capture holds none"
            } else {
                "its dumps hold no rows"
            };
            super::say(&format!("{}: no events ({held})", g.source));
        }
        for (_, mut bus) in buses {
            sections.extend(bus.finish().map_err(|e| anyhow!("{}: {e}", g.source))?);
        }
    }
    Ok(sections)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_take_binary_units_and_refuse_nonsense() {
        assert_eq!(parse_size("96MiB"), Ok(96 << 20));
        assert_eq!(parse_size("1.5GiB"), Ok(3 << 29));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert!(parse_size("12 parsecs").is_err());
        assert!(parse_size("0").is_err());
        assert_eq!(parse_at("step:3"), Ok(3));
        assert!(parse_at("3").is_err());
    }
}
