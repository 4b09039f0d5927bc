//! Sinks: the last layers of the bus, writing one dump file per device of a process.
//!
//! [`DeviceRouter`] decides which file(s) an event goes to: its device's file (opened on first
//! use), or — for device-less events (`N/A`: msTX marks without a known device, SYSTEM) — every
//! open file of the process, as msMemScope copies device-less events into each device file.
//! Device-less events seen before any file exists are kept (bounded) and replayed into each file
//! when it opens; a process that never touches a device gets them in `device_cpu`.

pub mod csv;
pub mod sqlite;

use crate::bus::{BusCtx, BusError, Layer, ReportSection};
use crate::event::{Device, Event};
use std::collections::BTreeMap;

/// Device-less events kept for replay into files opened later (beyond this they are written
/// only to the files already open).
pub const BACKLOG_CAP: usize = 65_536;

/// Where the rows of one device go.
pub trait DeviceWriter: Send {
    /// Short name of the format, for messages (`csv`, `sqlite`).
    const KIND: &'static str;
    /// Appends one row.
    ///
    /// # Errors
    /// I/O or SQLite failure, naming the file.
    fn write(&mut self, ev: &Event) -> Result<(), BusError>;
    /// Makes written rows durable in the file (buffer flush / transaction commit).
    ///
    /// # Errors
    /// As [`DeviceWriter::write`].
    fn flush(&mut self) -> Result<(), BusError>;
    /// Path of the file, for the summary.
    fn path(&self) -> &std::path::Path;
    /// Rows written.
    fn rows(&self) -> u64;
    /// Last call on the file, after the final flush (e.g. fold SQLite's WAL back in).
    ///
    /// # Errors
    /// As [`DeviceWriter::write`].
    fn close(&mut self) -> Result<(), BusError> {
        Ok(())
    }
}

/// The sink layer of one process for one format: routes each event to its device's file and,
/// at the end, closes the files and reports them.
pub struct DumpSink<W: DeviceWriter> {
    router: DeviceRouter<W>,
    files: Vec<(std::path::PathBuf, u64)>,
}

impl<W: DeviceWriter> DumpSink<W> {
    /// A sink that opens each device's file with `open` (see [`crate::layout`]).
    pub fn new(open: Opener<W>) -> DumpSink<W> {
        DumpSink {
            router: DeviceRouter::new(open),
            files: Vec::new(),
        }
    }

    /// Files written (path, rows), known after `finish`.
    pub fn files(&self) -> &[(std::path::PathBuf, u64)] {
        &self.files
    }
}

impl<W: DeviceWriter> Layer for DumpSink<W> {
    fn name(&self) -> &'static str {
        W::KIND
    }
    fn on_event(&mut self, ev: Event, _: &BusCtx, _: &mut Vec<Event>) -> Result<(), BusError> {
        self.router.route(&ev)
    }
    fn flush(&mut self) -> Result<(), BusError> {
        self.router.flush()
    }
    fn finish(
        &mut self,
        _: &BusCtx,
        _: &mut Vec<Event>,
        report: &mut Vec<ReportSection>,
    ) -> Result<(), BusError> {
        self.files = self.router.finish()?;
        self.router.for_each(DeviceWriter::close)?;
        report.push(ReportSection {
            title: "Dump files".into(),
            lines: self
                .files
                .iter()
                .map(|(p, n)| format!("{} ({n} rows)", p.display()))
                .collect(),
        });
        Ok(())
    }
}

/// Opens the writer of a device on first use.
pub type Opener<W> = Box<dyn FnMut(Device) -> Result<W, BusError> + Send>;

/// Routes events of one process to per-device writers.
pub struct DeviceRouter<W: DeviceWriter> {
    files: BTreeMap<Device, W>,
    backlog: Vec<Event>,
    open: Opener<W>,
}

impl<W: DeviceWriter> DeviceRouter<W> {
    /// A router that opens files with `open`.
    pub fn new(open: Opener<W>) -> DeviceRouter<W> {
        DeviceRouter {
            files: BTreeMap::new(),
            backlog: Vec::new(),
            open,
        }
    }

    fn ensure(&mut self, d: Device) -> Result<&mut W, BusError> {
        if !self.files.contains_key(&d) {
            let mut w = (self.open)(d)?;
            for e in &self.backlog {
                w.write(e)?;
            }
            self.files.insert(d, w);
        }
        Ok(self.files.get_mut(&d).expect("inserted above"))
    }

    /// Writes `ev` where it belongs.
    ///
    /// # Errors
    /// The writer's error.
    pub fn route(&mut self, ev: &Event) -> Result<(), BusError> {
        match ev.device {
            Device::NotApplicable => {
                for w in self.files.values_mut() {
                    w.write(ev)?;
                }
                if self.backlog.len() < BACKLOG_CAP {
                    self.backlog.push(ev.clone());
                }
                Ok(())
            }
            d => self.ensure(d)?.write(ev),
        }
    }

    /// Flushes every file.
    ///
    /// # Errors
    /// The first writer error.
    pub fn flush(&mut self) -> Result<(), BusError> {
        self.files.values_mut().try_for_each(DeviceWriter::flush)
    }

    /// Calls `f` on every open writer.
    ///
    /// # Errors
    /// The first error of `f`.
    pub fn for_each(
        &mut self,
        f: impl FnMut(&mut W) -> Result<(), BusError>,
    ) -> Result<(), BusError> {
        self.files.values_mut().try_for_each(f)
    }

    /// Flushes and, if no file was ever opened but device-less events were seen, writes them
    /// to `device_cpu`. Returns (path, rows) of every file.
    ///
    /// # Errors
    /// The first writer error.
    pub fn finish(&mut self) -> Result<Vec<(std::path::PathBuf, u64)>, BusError> {
        if self.files.is_empty() && !self.backlog.is_empty() {
            self.ensure(Device::Cpu)?;
        }
        self.flush()?;
        Ok(self
            .files
            .values()
            .map(|w| (w.path().to_path_buf(), w.rows()))
            .collect())
    }
}
