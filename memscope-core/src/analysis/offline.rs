//! Running bus layers over a dump file: the offline side of `memscope analyze`.
//!
//! Events are read in process / ID order ([`Order::ById`]) and fed, one process at a time, to
//! a [`Bus`] of freshly made layers, exactly as the collector feeds them during `memscope run`.
//! Each process's bus is finished when the next process starts, so only one process's state is
//! held at a time.

use crate::bus::{Bus, Layer, ReportSection};
use crate::reader::{ConsumerError, DumpFile, Order, ReadError, ReadOptions, ReadStats};

/// Feeds `file` through buses of `make()` layers, one bus per process, and returns the report
/// sections of all of them in process order.
///
/// # Errors
/// A [`ReadError`]; a layer's error comes back as [`ReadError::Consumer`].
pub fn run_layers(
    file: &DumpFile,
    opts: &mut ReadOptions,
    make: &mut dyn FnMut() -> Vec<Box<dyn Layer>>,
) -> Result<(Vec<ReportSection>, ReadStats), ReadError> {
    struct Current {
        pid: Option<u32>,
        bus: Bus,
    }
    let mut cur: Option<Current> = None;
    let mut report = Vec::new();
    let finish = |c: Current, report: &mut Vec<ReportSection>| -> Result<(), ConsumerError> {
        let mut bus = c.bus;
        report.extend(bus.finish()?);
        Ok(())
    };
    let stats = file.for_each(Order::ById, opts, &mut |ev| {
        if cur.as_ref().is_some_and(|c| c.pid != ev.pid) {
            if let Some(c) = cur.take() {
                finish(c, &mut report)?;
            }
        }
        let c = cur.get_or_insert_with(|| Current {
            pid: ev.pid,
            bus: Bus::new(ev.pid, make()),
        });
        c.bus.push(ev)?;
        Ok(())
    })?;
    if let Some(c) = cur.take() {
        finish(c, &mut report).map_err(ReadError::Consumer)?;
    }
    Ok((report, stats))
}
