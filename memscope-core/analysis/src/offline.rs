//! Running bus layers over a dump file: the offline side of `memscope analyze`.
//!
//! Events are read in process / ID order ([`memscope_dump::reader::Order::ById`]) and fed, one process at a
//! time, to a [`Bus`] of freshly made layers, exactly as the collector feeds them during `memscope
//! run`. The buses are finished at the end, in process order. Layers must publish results only in
//! `finish`: when the read restarts (a file found out of order midway), the layers made so far
//! are dropped unfinished and `make` is called again.

use memscope_core::bus::{Bus, Layer, ReportSection};
use memscope_dump::reader::{DumpFile, Order, ReadError, ReadOptions, ReadStats};

/// Feeds `file` through buses of `make()` layers, one bus per process, in ID order, and returns
/// the report sections of all of them in process order; `ReadStats::time_disorder` counts the
/// rows whose timestamp is earlier than that of a row of the same process with a smaller ID.
///
/// # Errors
/// A [`ReadError`]; a layer's error comes back as [`ReadError::Consumer`].
pub fn run_layers(
    file: &DumpFile,
    opts: &mut ReadOptions,
    make: &mut dyn FnMut() -> Vec<Box<dyn Layer>>,
) -> Result<(Vec<ReportSection>, ReadStats), ReadError> {
    run_layers_in(file, Order::ById, opts, make)
}

/// [`run_layers`] replaying in `order` ([`Order::ById`], or [`Order::ByTime`] for files whose
/// IDs and timestamps disagree).
///
/// # Errors
/// As [`run_layers`].
pub fn run_layers_in(
    file: &DumpFile,
    order: Order,
    opts: &mut ReadOptions,
    make: &mut dyn FnMut() -> Vec<Box<dyn Layer>>,
) -> Result<(Vec<ReportSection>, ReadStats), ReadError> {
    // one bus per process, all finished at the end in process order: a read that restarts
    // (see [`DumpFile::for_each_by_id_restartable`]) drops them unfinished, so nothing was
    // published
    let buses: std::cell::RefCell<Vec<(Option<u32>, Bus)>> = std::cell::RefCell::new(Vec::new());
    // latest timestamp of the current process, rows stamped before it
    let disorder = std::cell::Cell::new((None::<u64>, 0u64));
    let stats = file.for_each_ordered_restartable(
        order,
        opts,
        &mut |ev| {
            let mut b = buses.borrow_mut();
            let new_pid = match b.last() {
                Some((pid, _)) => *pid != ev.pid,
                None => true,
            };
            let (latest, n) = disorder.get();
            let latest = if new_pid { None } else { latest };
            let late = latest.is_some_and(|t| ev.ts_ns < t);
            disorder.set((
                Some(latest.map_or(ev.ts_ns, |t| t.max(ev.ts_ns))),
                n + u64::from(late),
            ));
            if new_pid {
                b.push((ev.pid, Bus::new(ev.pid, make())));
            }
            if let Some((_, bus)) = b.last_mut() {
                bus.push(ev)?;
            }
            Ok(())
        },
        &mut || {
            buses.borrow_mut().clear();
            disorder.set((None, 0));
        },
    )?;
    let stats = ReadStats {
        time_disorder: if order == Order::ById {
            disorder.get().1
        } else {
            0
        },
        ..stats
    };
    let mut report = Vec::new();
    for (_, mut bus) in buses.into_inner() {
        report.extend(bus.finish().map_err(|e| ReadError::Consumer(Box::new(e)))?);
    }
    Ok((report, stats))
}
