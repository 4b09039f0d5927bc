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
//!
//! A process that writes many rows gets a writer thread for them ([`worker`]).

pub mod csv;
mod layer;
pub mod sqlite;
pub mod worker;

pub use layer::DumpSink;

use memscope_core::bus::BusError;
use memscope_core::event::{Device, Event, EventKind};
use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Where the rows of one device go.
pub trait DeviceWriter: Send + Sized + 'static {
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
    /// The file failed: cut it back to its last whole row (at least what the last successful
    /// [`DeviceWriter::flush`] made durable) and write nothing more. Returns the rows kept
    /// beyond that flush.
    fn abandon(&mut self) -> u64 {
        0
    }
}

/// Rows of one file per kind, split into device-less and device rows; `durable` is the state
/// at the last successful flush.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct KindRows {
    dev: [u64; EventKind::ALL.len()],
    less: [u64; EventKind::ALL.len()],
}

impl KindRows {
    fn add(&mut self, ev: &Event) {
        let i = EventKind::ALL
            .iter()
            .position(|k| *k == ev.kind)
            .unwrap_or(0);
        if ev.device == Device::NotApplicable {
            self.less[i] += 1;
        } else {
            self.dev[i] += 1;
        }
    }
    fn less_total(&self) -> u64 {
        self.less.iter().sum()
    }
}

/// Rows a file takes between flushes (bounds what a failed file can lose from its count).
const FLUSH_ROWS: usize = 65_536;

/// A writer with its per-kind row counts.
struct Slot<W> {
    w: W,
    now: KindRows,
    durable: KindRows,
    /// Kind index (+ 16 for device-less) of each row since the last flush.
    since: Vec<u8>,
}

impl<W: DeviceWriter> Slot<W> {
    fn new(w: W, rows: KindRows) -> Slot<W> {
        Slot {
            w,
            now: rows,
            durable: rows,
            since: Vec::new(),
        }
    }
    fn write(&mut self, ev: &Event) -> Result<(), BusError> {
        self.w.write(ev)?;
        self.now.add(ev);
        let i = EventKind::ALL
            .iter()
            .position(|k| *k == ev.kind)
            .unwrap_or(0) as u8;
        self.since.push(
            i + if ev.device == Device::NotApplicable {
                16
            } else {
                0
            },
        );
        if self.since.len() >= FLUSH_ROWS {
            self.flush()?;
        }
        Ok(())
    }
    fn flush(&mut self) -> Result<(), BusError> {
        self.w.flush()?;
        self.durable = self.now;
        self.since.clear();
        Ok(())
    }
    /// The file failed: keeps the rows that are whole in it and counts them.
    fn abandon(&mut self) {
        let kept = self.w.abandon() as usize;
        for &k in self.since.iter().take(kept) {
            let (less, i) = (k >= 16, (k % 16) as usize);
            if less {
                self.durable.less[i] += 1;
            } else {
                self.durable.dev[i] += 1;
            }
        }
        self.since.clear();
        self.now = self.durable;
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
            } else if let Some(limit) = soft_file_size_limit().filter(|_| t.contains("I/O error")) {
                // SQLite reports a write past `ulimit -f` (EFBIG) as a bare I/O error (and
                // rolls the file back, so its size tells nothing)
                format!(" (a file-size limit of {limit} bytes is set: ulimit -f)")
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

/// This process's soft file-size limit in bytes (`ulimit -f`, the "Max file size" line of
/// `/proc/self/limits`), if one is set.
fn soft_file_size_limit() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    limits
        .lines()
        .find_map(|l| l.strip_prefix("Max file size"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
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

/// Routes events of one process to per-device writers.
pub struct DeviceRouter<W: DeviceWriter> {
    files: BTreeMap<Device, Slot<W>>,
    /// Devices whose file failed (not reopened).
    failed: BTreeSet<Device>,
    backlog: Option<Slot<W>>,
    backlog_failed: bool,
    open: Opener,
    /// Files closed early (path, rows, per-kind rows).
    closed: Vec<(PathBuf, u64, KindRows)>,
    /// Lines for files that stopped early, for the owner to take.
    pub warnings: Vec<String>,
    /// Device-less events of a process that opened no device file go to `device_cpu`'s file
    /// (off when the device selection names NPUs and leaves `cpu` out: issue 18, B8).
    device_less_fallback: bool,
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
            device_less_fallback: true,
        }
    }

    /// Whether a process with device-less events only gets a `device_cpu` file for them
    /// (default yes). Off for `--device npu:<n>` without `cpu`: a rank that never touched a
    /// selected device writes no file at all (issue 18, B8).
    pub fn set_device_less_fallback(&mut self, on: bool) {
        self.device_less_fallback = on;
    }

    fn fail(&mut self, path: &Path, e: &BusError) {
        self.warnings.push(write_failure_line(path, e));
    }

    fn ensure(&mut self, d: Device) -> Option<&mut Slot<W>> {
        if !self.files.contains_key(&d) {
            if self.failed.contains(&d) {
                return None;
            }
            let made = (self.open)(Place::Device(d)).and_then(|(f, p)| match &mut self.backlog {
                Some(b) => {
                    b.flush()?;
                    Ok(Slot::new(b.w.copy_into(f, p)?, b.durable))
                }
                None => Ok(Slot::new(W::create(f, p)?, KindRows::default())),
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
                Ok(w) => self.backlog = Some(Slot::new(w, KindRows::default())),
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
                self.backlog_broke(e);
                false
            }
        }
    }

    /// The backlog cannot be written: it is cut back to its last flush and kept as it is (a
    /// device file opened later, or `device_cpu`, still starts from it).
    fn backlog_broke(&mut self, e: BusError) {
        if let Some(b) = &mut self.backlog {
            b.abandon();
            let p = b.w.path().to_path_buf();
            self.fail(&p, &e);
        }
        self.backlog_failed = true;
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
                        Err(e) => bad.push((*d, w.w.path().to_path_buf(), e)),
                    }
                }
                for (d, p, e) in bad {
                    self.drop_file(d, &p, &e);
                }
                self.write_backlog(ev) || any
            }
            d => {
                let res = match self.ensure(d) {
                    Some(w) => w.write(ev).map_err(|e| (w.w.path().to_path_buf(), e)),
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
        if let Some(mut s) = self.files.remove(&d) {
            s.abandon();
            let _ = s.w.close();
            self.failed.insert(d);
            self.fail(path, e);
            // Keep it listed with the rows it holds.
            let rows = s.durable.dev.iter().sum::<u64>() + s.durable.less_total();
            self.closed
                .push((s.w.path().to_path_buf(), rows, s.durable));
        }
    }

    /// A process with device-less rows only (SYSTEM, marks) keeps them in the hidden backlog
    /// until its end: a reader asking now (a job's `stop()`, issue 39) gets the `device_cpu`
    /// file it would get at the end, opened now as a copy of the backlog. Later device-less rows
    /// go on into it; a device file opened later still starts from the backlog.
    pub fn publish_backlog(&mut self) {
        if self.device_less_fallback
            && self.files.is_empty()
            && self.closed.is_empty()
            && self.backlog.is_some()
        {
            self.ensure(Device::Cpu);
        }
    }

    /// Flushes every file (a file that fails is closed with a warning).
    pub fn flush(&mut self) {
        let mut bad = Vec::new();
        for (d, w) in self.files.iter_mut() {
            if let Err(e) = w.flush() {
                bad.push((*d, w.w.path().to_path_buf(), e));
            }
        }
        for (d, p, e) in bad {
            self.drop_file(d, &p, &e);
        }
        if !self.backlog_failed {
            if let Some(b) = &mut self.backlog {
                if let Err(e) = b.flush() {
                    self.backlog_broke(e);
                }
            }
        }
    }

    /// Flushes and closes every file; if no device file was ever opened but device-less events
    /// were seen, the backlog becomes `device_cpu`'s file. Removes the backlog. Returns (path,
    /// rows) of every file and the distinct events they hold per kind (a device-less event
    /// copied into several files counts once).
    pub fn finish(&mut self) -> (Vec<(PathBuf, u64)>, BTreeMap<EventKind, u64>, u64) {
        self.publish_backlog();
        self.flush();
        let mut bad = Vec::new();
        for (d, w) in self.files.iter_mut() {
            if let Err(e) = w.w.close() {
                bad.push((*d, w.w.path().to_path_buf(), e));
            }
        }
        for (d, p, e) in bad {
            self.drop_file(d, &p, &e);
        }
        if let Some(b) = self.backlog.take() {
            let p = b.w.path().to_path_buf();
            drop(b);
            let _ = std::fs::remove_file(&p);
            for ext in ["-wal", "-shm", "-journal"] {
                let mut q = p.clone().into_os_string();
                q.push(ext);
                let _ = std::fs::remove_file(q);
            }
        }
        let mut all: Vec<(PathBuf, u64, KindRows)> = self
            .files
            .values()
            .map(|s| (s.w.path().to_path_buf(), s.w.rows(), s.durable))
            .collect();
        all.append(&mut self.closed);
        all.sort_by(|a, b| a.0.cmp(&b.0));
        let mut per_kind = BTreeMap::new();
        let most_less = all
            .iter()
            .max_by_key(|f| f.2.less_total())
            .map(|f| f.2.less)
            .unwrap_or_default();
        for (i, k) in EventKind::ALL.iter().enumerate() {
            let n = all.iter().map(|f| f.2.dev[i]).sum::<u64>() + most_less[i];
            if n > 0 {
                per_kind.insert(*k, n);
            }
        }
        let less = most_less.iter().sum();
        let out = all.into_iter().map(|(p, n, _)| (p, n)).collect();
        (out, per_kind, less)
    }
}
