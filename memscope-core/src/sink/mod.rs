//! Sinks: the last layers of the bus, writing one dump file per device of a process.
//!
//! [`DeviceRouter`] decides which file(s) an event goes to: its device's file (opened on first
//! use), or — for device-less events (`N/A`: msTX marks without a known device, SYSTEM) — every
//! open file of the process, as msMemScope copies device-less events into each device file.
//! Device-less events are also written to a *backlog* file on disk (any number of them, no
//! memory held): a device file opened later starts as a copy of it, and a process that never
//! touches a device gets it as its `device_cpu` file.
//!
//! A file that cannot be written (file-size limit, full disk, I/O error) is closed with one
//! warning line naming the file and the limit; the other files of the process go on.

pub mod csv;
pub mod sqlite;

use crate::bus::{BusCtx, BusError, Layer, ReportSection};
use crate::event::{Device, Event, EventKind};
use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Where the rows of one device go.
pub trait DeviceWriter: Send + Sized {
    /// Short name of the format, for messages (`csv`, `sqlite`).
    const KIND: &'static str;
    /// Starts a file at `path`, created empty (mode 0600) as `file`.
    ///
    /// # Errors
    /// Writing the header / creating the table failed.
    fn create(file: File, path: PathBuf) -> Result<Self, BusError>;
    /// Starts a file at `path` (created empty as `file`) holding a copy of this file's rows.
    ///
    /// # Errors
    /// Reading this file or writing the new one failed.
    fn copy_into(&mut self, file: File, path: PathBuf) -> Result<Self, BusError>;
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
    fn path(&self) -> &Path;
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

/// What a dump sink wrote, shared with the collector for the run summary.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SinkStats {
    /// Events written, per kind: each event once, however many files it was copied into.
    pub rows: BTreeMap<EventKind, u64>,
    /// Device-less events written (each copied into every device file).
    pub device_less: u64,
    /// Files written (path, rows), known after `finish`.
    pub files: Vec<(PathBuf, u64)>,
    /// One line per file that stopped early (limit, full disk, I/O error), not yet taken.
    pub warnings: Vec<String>,
}

/// Shared handle on a sink's [`SinkStats`].
pub type SharedStats = Arc<Mutex<SinkStats>>;

/// Where the opener puts a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// The dump file of a device.
    Device(Device),
    /// The backlog of device-less events (a hidden file of the process's directory).
    Backlog,
}

/// Creates the (empty, mode 0600) file of a place; returns it and its path.
pub type Opener = Box<dyn FnMut(Place) -> Result<(File, PathBuf), BusError> + Send>;

/// One line for a file that cannot be written: names the file and, for the usual causes, the
/// limit that was hit.
pub fn write_failure_line(path: &Path, e: &BusError) -> String {
    let why = match e {
        BusError::Io { source, .. } => limit_name(source),
        BusError::Sqlite { source, .. } => {
            let t = source.to_string();
            if t.contains("full") {
                " (disk full)".to_owned()
            } else {
                String::new()
            }
        }
        BusError::Other(_) => String::new(),
    };
    format!(
        "cannot write {}: {}{why}; this file stops here, the other outputs go on",
        path.display(),
        match e {
            BusError::Io { source, .. } => source.to_string(),
            BusError::Sqlite { source, .. } => source.to_string(),
            BusError::Other(m) => m.clone(),
        }
    )
}

/// ` (file-size limit, ulimit -f)` / ` (disk full)` for EFBIG / ENOSPC, else empty.
pub fn limit_name(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(27) => " (the file-size limit, ulimit -f)".to_owned(),
        Some(28) => " (disk full)".to_owned(),
        Some(122) => " (disk quota)".to_owned(),
        _ => String::new(),
    }
}

/// The sink layer of one process for one format: routes each event to its device's file and,
/// at the end, closes the files and reports them.
pub struct DumpSink<W: DeviceWriter> {
    router: DeviceRouter<W>,
    stats: SharedStats,
}

impl<W: DeviceWriter> DumpSink<W> {
    /// A sink that creates each file with `open` (see [`crate::layout`]).
    pub fn new(open: Opener) -> DumpSink<W> {
        DumpSink {
            router: DeviceRouter::new(open),
            stats: SharedStats::default(),
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

    fn take_router_warnings(&mut self) {
        if self.router.warnings.is_empty() {
            return;
        }
        if let Ok(mut s) = self.stats.lock() {
            s.warnings.append(&mut self.router.warnings);
        }
    }
}

impl<W: DeviceWriter> Layer for DumpSink<W> {
    fn name(&self) -> &'static str {
        W::KIND
    }
    fn on_event(&mut self, ev: Event, _: &BusCtx, _: &mut Vec<Event>) -> Result<(), BusError> {
        if self.router.route(&ev) {
            if let Ok(mut s) = self.stats.lock() {
                *s.rows.entry(ev.kind).or_default() += 1;
                if ev.device == Device::NotApplicable {
                    s.device_less += 1;
                }
            }
        }
        self.take_router_warnings();
        Ok(())
    }
    fn flush(&mut self) -> Result<(), BusError> {
        self.router.flush();
        self.take_router_warnings();
        Ok(())
    }
    fn finish(
        &mut self,
        _: &BusCtx,
        _: &mut Vec<Event>,
        report: &mut Vec<ReportSection>,
    ) -> Result<(), BusError> {
        let files = self.router.finish();
        self.take_router_warnings();
        report.push(ReportSection {
            title: "Dump files".into(),
            lines: files
                .iter()
                .map(|(p, n)| format!("{} ({n} rows)", p.display()))
                .collect(),
        });
        if let Ok(mut s) = self.stats.lock() {
            s.files = files;
        }
        Ok(())
    }
}

/// Routes events of one process to per-device writers.
pub struct DeviceRouter<W: DeviceWriter> {
    files: BTreeMap<Device, W>,
    /// Devices whose file failed (not reopened).
    failed: BTreeSet<Device>,
    backlog: Option<W>,
    backlog_failed: bool,
    open: Opener,
    /// Files closed early (path, rows).
    closed: Vec<(PathBuf, u64)>,
    /// Lines for files that stopped early, for the owner to take.
    pub warnings: Vec<String>,
}

impl<W: DeviceWriter> DeviceRouter<W> {
    /// A router that creates files with `open`.
    pub fn new(open: Opener) -> DeviceRouter<W> {
        DeviceRouter {
            files: BTreeMap::new(),
            failed: BTreeSet::new(),
            backlog: None,
            backlog_failed: false,
            open,
            closed: Vec::new(),
            warnings: Vec::new(),
        }
    }

    fn fail(&mut self, path: &Path, e: &BusError) {
        self.warnings.push(write_failure_line(path, e));
    }

    fn ensure(&mut self, d: Device) -> Option<&mut W> {
        if !self.files.contains_key(&d) {
            if self.failed.contains(&d) {
                return None;
            }
            let made = (self.open)(Place::Device(d)).and_then(|(f, p)| match &mut self.backlog {
                Some(b) => b.copy_into(f, p),
                None => W::create(f, p),
            });
            match made {
                Ok(w) => {
                    self.files.insert(d, w);
                }
                Err(e) => {
                    self.failed.insert(d);
                    let path = match &e {
                        BusError::Io { path, .. } | BusError::Sqlite { path, .. } => {
                            PathBuf::from(path)
                        }
                        BusError::Other(_) => PathBuf::from(d.to_text()),
                    };
                    self.fail(&path, &e);
                    return None;
                }
            }
        }
        self.files.get_mut(&d)
    }

    fn write_backlog(&mut self, ev: &Event) -> bool {
        if self.backlog_failed {
            return false;
        }
        if self.backlog.is_none() {
            match (self.open)(Place::Backlog).and_then(|(f, p)| W::create(f, p)) {
                Ok(w) => self.backlog = Some(w),
                Err(e) => {
                    self.backlog_failed = true;
                    self.fail(Path::new("(device-less backlog)"), &e);
                    return false;
                }
            }
        }
        let b = self.backlog.as_mut().expect("created above");
        match b.write(ev) {
            Ok(()) => true,
            Err(e) => {
                let p = b.path().to_path_buf();
                self.backlog_failed = true;
                self.fail(&p, &e);
                false
            }
        }
    }

    /// Writes `ev` where it belongs. Returns whether any file took it.
    pub fn route(&mut self, ev: &Event) -> bool {
        match ev.device {
            Device::NotApplicable => {
                let mut bad = Vec::new();
                let mut any = false;
                for (d, w) in self.files.iter_mut() {
                    match w.write(ev) {
                        Ok(()) => any = true,
                        Err(e) => bad.push((*d, w.path().to_path_buf(), e)),
                    }
                }
                for (d, p, e) in bad {
                    self.drop_file(d, &p, &e);
                }
                self.write_backlog(ev) || any
            }
            d => {
                let res = match self.ensure(d) {
                    Some(w) => w.write(ev).map_err(|e| (w.path().to_path_buf(), e)),
                    None => return false,
                };
                match res {
                    Ok(()) => true,
                    Err((p, e)) => {
                        self.drop_file(d, &p, &e);
                        false
                    }
                }
            }
        }
    }

    fn drop_file(&mut self, d: Device, path: &Path, e: &BusError) {
        if let Some(mut w) = self.files.remove(&d) {
            let _ = w.flush();
            let _ = w.close();
            self.failed.insert(d);
            self.fail(path, e);
            // Keep it listed with the rows it holds.
            self.closed.push((w.path().to_path_buf(), w.rows()));
        }
    }

    /// Flushes every file (a file that fails is closed with a warning).
    pub fn flush(&mut self) {
        let mut bad = Vec::new();
        for (d, w) in self.files.iter_mut() {
            if let Err(e) = w.flush() {
                bad.push((*d, w.path().to_path_buf(), e));
            }
        }
        for (d, p, e) in bad {
            self.drop_file(d, &p, &e);
        }
        if let Some(b) = &mut self.backlog {
            if let Err(e) = b.flush() {
                let p = b.path().to_path_buf();
                self.backlog_failed = true;
                self.backlog = None;
                self.fail(&p, &e);
            }
        }
    }

    /// Flushes and closes every file; if no device file was ever opened but device-less events
    /// were seen, the backlog becomes `device_cpu`'s file. Removes the backlog. Returns (path,
    /// rows) of every file.
    pub fn finish(&mut self) -> Vec<(PathBuf, u64)> {
        if self.files.is_empty() && self.closed.is_empty() && self.backlog.is_some() {
            self.ensure(Device::Cpu);
        }
        self.flush();
        let mut bad = Vec::new();
        for (d, w) in self.files.iter_mut() {
            if let Err(e) = w.close() {
                bad.push((*d, w.path().to_path_buf(), e));
            }
        }
        for (d, p, e) in bad {
            self.drop_file(d, &p, &e);
        }
        if let Some(b) = self.backlog.take() {
            let p = b.path().to_path_buf();
            drop(b);
            let _ = std::fs::remove_file(&p);
            for ext in ["-wal", "-shm", "-journal"] {
                let mut q = p.clone().into_os_string();
                q.push(ext);
                let _ = std::fs::remove_file(q);
            }
        }
        let mut out: Vec<(PathBuf, u64)> = self
            .files
            .values()
            .map(|w| (w.path().to_path_buf(), w.rows()))
            .collect();
        out.append(&mut self.closed);
        out.sort();
        out
    }
}
