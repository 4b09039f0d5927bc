//! The dump sink layer: the last layer of a process's bus, handing each event to its
//! [`DeviceRouter`] — on the bus's thread, or on a writer thread once the process has written
//! many rows ([`super::worker`]).

use super::{worker, DeviceRouter, DeviceWriter, Opener, SharedStats};
use memscope_core::bus::{BusCtx, BusError, Flow, Layer, ReportSection};
use memscope_core::event::{Event, EventKind};
use std::path::PathBuf;

/// Where a sink's router runs.
enum Router<W: DeviceWriter> {
    /// On the bus's thread, counting the rows routed so far.
    Inline(Box<DeviceRouter<W>>, u64),
    /// On a writer thread of its own.
    Thread(worker::Worker<W>),
    /// Between the two (only while moving).
    Moving,
}

/// The sink layer of one process for one format: routes each event to its device's file and,
/// at the end, closes the files and reports them.
pub struct DumpSink<W: DeviceWriter> {
    router: Router<W>,
    stats: SharedStats,
}

impl<W: DeviceWriter> DumpSink<W> {
    /// A sink that creates each file with `open` (see [`crate::layout`]).
    pub fn new(open: Opener) -> DumpSink<W> {
        DumpSink {
            router: Router::Inline(Box::new(DeviceRouter::new(open)), 0),
            stats: SharedStats::default(),
        }
    }

    /// See [`DeviceRouter::set_device_less_fallback`]; before the first event.
    pub fn set_device_less_fallback(&mut self, on: bool) {
        if let Router::Inline(r, _) = &mut self.router {
            r.set_device_less_fallback(on);
        }
    }

    /// The sink's figures (rows per kind, files, warnings), shared.
    pub fn stats(&self) -> SharedStats {
        self.stats.clone()
    }

    /// Files written (path, rows), known after `finish`.
    pub fn files(&self) -> Vec<(PathBuf, u64)> {
        self.stats
            .lock()
            .map(|s| s.files.clone())
            .unwrap_or_default()
    }

    /// The router back on this thread (its writer thread stopped).
    fn inline(&mut self) -> &mut DeviceRouter<W> {
        if let Router::Thread(_) = self.router {
            if let Router::Thread(w) = std::mem::replace(&mut self.router, Router::Moving) {
                self.router = Router::Inline(w.finish(), 0);
            }
        }
        match &mut self.router {
            Router::Inline(r, _) => r,
            _ => unreachable!("the router is inline"),
        }
    }
}

impl<W: DeviceWriter> Layer for DumpSink<W> {
    fn name(&self) -> &'static str {
        W::KIND
    }
    fn on_event(
        &mut self,
        ev: &mut Event,
        _: &BusCtx,
        _: &mut Vec<Event>,
    ) -> Result<Flow, BusError> {
        // memory samples (issue 25) are memscope's own: msMemScope's readers know no SAMPLE
        // rows, so they stay in the capture, the exports and the report
        if ev.kind == EventKind::Sample {
            return Ok(Flow::Stop);
        }
        match &mut self.router {
            Router::Inline(r, routed) => {
                r.route(ev);
                worker::take_warnings(r, &self.stats);
                *routed += 1;
                if *routed == worker::THREAD_AFTER {
                    if let Router::Inline(r, _) =
                        std::mem::replace(&mut self.router, Router::Moving)
                    {
                        self.router = match worker::Worker::start(r, self.stats.clone()) {
                            Ok(w) => Router::Thread(w),
                            // no thread to be had (a limit): go on inline, never asking again
                            Err(r) => Router::Inline(r, worker::THREAD_AFTER + 1),
                        };
                    }
                }
            }
            Router::Thread(w) => w.push(ev),
            Router::Moving => {}
        }
        // the end of the chain: what is written goes no further
        Ok(Flow::Stop)
    }
    fn flush(&mut self) -> Result<(), BusError> {
        match &mut self.router {
            Router::Inline(r, _) => {
                r.flush();
                worker::take_warnings(r, &self.stats);
            }
            Router::Thread(w) => w.flush(false),
            Router::Moving => {}
        }
        Ok(())
    }
    fn flush_for_readers(&mut self) -> Result<(), BusError> {
        match &mut self.router {
            Router::Inline(r, _) => {
                r.publish_backlog();
                r.flush();
                worker::take_warnings(r, &self.stats);
            }
            Router::Thread(w) => w.flush(true),
            Router::Moving => {}
        }
        Ok(())
    }
    fn finish(
        &mut self,
        _: &BusCtx,
        _: &mut Vec<Event>,
        report: &mut Vec<ReportSection>,
    ) -> Result<(), BusError> {
        let stats = self.stats.clone();
        let r = self.inline();
        let (files, rows, less) = r.finish();
        worker::take_warnings(r, &stats);
        let line = |(p, n): &(PathBuf, u64)| format!("{} ({n} rows)", p.display());
        let all: Vec<String> = files.iter().map(line).collect();
        let shown = memscope_core::listing::top_n(
            &files,
            memscope_core::listing::CONSOLE_TOP,
            |f, out| out.push(line(f)),
            |rest| format!("… {} more dump file(s)", rest.len()),
        );
        if !files.is_empty() {
            report.push(ReportSection::bounded("Dump files".into(), shown, all));
        }
        if let Ok(mut s) = self.stats.lock() {
            s.files = files;
            s.rows = rows;
            s.device_less = less;
        }
        Ok(())
    }
}
