//! Readers of dump files: msMemScope CSV in both of its formats, memscope's CSV, and the `.db`
//! (SQLite) dumps. Output: [`Event`]s.
//!
//! * [`DumpFile::open`] checks the input (regular file, ≤ 8 GiB, CSV or SQLite by content).
//!   Reads are bounded by what is read, not by `st_size` ([`limits`]); a torn last CSV row
//!   is left out and reported in [`ReadStats::torn_last_row`].
//! * [`DumpFile::for_each`] pushes events to a callback, in one of two [`Order`]s:
//!   * [`Order::File`]: as stored, streaming, constant memory (used by `compare`, whose
//!     algorithm does not depend on row order);
//!   * [`Order::ById`]: grouped by process, then by ID — the order the events happened in.
//!     msMemScope writes a block's rows when the block dies, so a row may come arbitrarily
//!     late and only a sort restores ID order: CSV goes through a bounded-memory external
//!     merge sort ([`sort`]), a `.db` through SQLite's `ORDER BY`. A CSV already in ID order
//!     (memscope writes its dumps so) is recognised by a scan of the ID column that stops at
//!     the first row out of order, and is then streamed without sorting.
//! * Errors name the file and the line (CSV) or row (`.db`): `baseline.csv:17: bad
//!   Timestamp(ns) "abc"`.
//! * A progress callback receives `(done, total)` in bytes (CSV) or rows (`.db`).

mod csv_source;
pub mod db;
mod error;
pub mod limits;
mod row;
pub mod sort;
pub mod source;

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

pub use csv_source::{CsvEvents, CsvSource};
pub use error::{ConsumerError, Location, ReadError};
pub use memscope_core::attr_text::values::{access_attrs_fast, for_each_pair, memory_attrs_fast};
pub use row::{parse_row, Columns, TimeUnit};
pub use sort::SortOptions;
pub use source::ProcessEvents;

use memscope_core::event::Event;

pub use limits::{MAX_HEADER_BYTES, MAX_INPUT_BYTES, MAX_RECORD_BYTES};

/// Storage format of a dump.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DumpFormat {
    /// `memscope_dump_*.csv`.
    Csv,
    /// `memscope_dump_*.db` (SQLite, table `memscope_dump`).
    Db,
}

/// Order in which [`DumpFile::for_each`] delivers events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// As stored in the file.
    File,
    /// By process id (`N/A` last), then ID, then file position.
    ById,
    /// By process id (`N/A` last), then timestamp, then ID, then file position (for files whose
    /// IDs and timestamps disagree, `memscope analyze --order time`).
    ByTime,
}

/// Reading options.
#[derive(Default)]
pub struct ReadOptions {
    /// Force the time unit instead of detecting it ([`TimeUnit::detect`]).
    pub time_unit: Option<TimeUnit>,
    /// External-sort settings for [`Order::ById`].
    pub sort: SortOptions,
    /// Called with `(done, total)` now and then (bytes for CSV, rows for `.db`).
    pub progress: Option<Box<dyn FnMut(u64, u64)>>,
}

/// What a read went through.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadStats {
    /// Records (rows) read.
    pub rows: u64,
    /// Size of the input in bytes.
    pub bytes: u64,
    /// Rows delivered in ID order whose timestamp is earlier than that of a row of the same
    /// process with a smaller ID (the file's IDs and timestamps disagree); counted by
    /// `memscope_analysis::offline::run_layers`, 0 elsewhere.
    pub time_disorder: u64,
    /// Line of a torn last CSV record (cut short with no line end: a writer killed mid-row),
    /// which was left out; the rows before it were read. The caller warns.
    pub torn_last_row: Option<u64>,
}

impl ReadStats {
    /// The warning to print for a torn last row of `file`, if there was one.
    pub fn torn_warning(&self, file: &str) -> Option<String> {
        self.torn_last_row.map(|l| {
            format!(
                "{file}:{l}: the last row is incomplete (the writer stopped mid-row?); it was left out and the {} row(s) before it were read",
                self.rows
            )
        })
    }
}

/// Opens `path` for reading without blocking on a FIFO or a device (`O_NONBLOCK`, which
/// regular files ignore) and checks, on the opened descriptor, that it is a regular file.
/// Returns the file and its size.
///
/// # Errors
/// Missing, unreadable, or not a regular file (`InvalidInput`, "not a regular file").
pub fn open_regular_io(path: &Path) -> std::io::Result<(File, u64)> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags((rustix::fs::OFlags::NONBLOCK | rustix::fs::OFlags::NOCTTY).bits() as i32)
        .open(path)?;
    let md = f.metadata()?;
    if !md.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    Ok((f, md.len()))
}

/// [`open_regular_io`] with the error as a [`ReadError`] naming the file `name`.
///
/// # Errors
/// As [`open_regular_io`].
pub fn open_regular(path: &Path, name: &str) -> Result<(File, u64), ReadError> {
    open_regular_io(path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::InvalidInput {
            ReadError::parse(name, None, e.to_string())
        } else {
            ReadError::io(name, e)
        }
    })
}

/// An input dump, checked and typed.
#[derive(Clone, Debug)]
pub struct DumpFile {
    path: PathBuf,
    name: String,
    format: DumpFormat,
    size: u64,
}

impl DumpFile {
    /// Checks `path`: a readable regular file of at most 8 GiB; SQLite when it starts with
    /// SQLite's magic, CSV otherwise.
    ///
    /// # Errors
    /// Missing, not a regular file, too large, unreadable.
    pub fn open(path: &Path) -> Result<DumpFile, ReadError> {
        let name =
            memscope_core::sanitize::escape_controls(&path.display().to_string()).into_owned();
        let (mut f, len) = open_regular(path, &name)?;
        if len > MAX_INPUT_BYTES {
            return Err(ReadError::parse(
                &name,
                None,
                format!("{len} bytes is over the 8 GiB input limit"),
            ));
        }
        let mut magic = [0u8; 16];
        let n = read_full(&mut f, &mut magic).map_err(|e| ReadError::io(&name, e))?;
        let format = if n == 16 && &magic == b"SQLite format 3\0" {
            DumpFormat::Db
        } else if n > 0
            && path
                .extension()
                .is_some_and(|e| e.eq_ignore_ascii_case("db") || e.eq_ignore_ascii_case("sqlite"))
        {
            // named as a database: a CSV parse error about its "header" would mislead
            return Err(ReadError::parse(
                &name,
                None,
                "not a SQLite database (no SQLite header) and named as one, so not read as CSV"
                    .to_owned(),
            ));
        } else {
            DumpFormat::Csv
        };
        Ok(DumpFile {
            path: path.to_owned(),
            name,
            format,
            size: len,
        })
    }

    /// The path as given.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The path as shown in messages.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// CSV or SQLite.
    pub fn format(&self) -> DumpFormat {
        self.format
    }

    /// Size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Passes every event to `f` in `order`.
    ///
    /// # Errors
    /// A [`ReadError`] naming the file and line, or `f`'s error as [`ReadError::Consumer`].
    pub fn for_each(
        &self,
        order: Order,
        opts: &mut ReadOptions,
        f: &mut dyn FnMut(Event) -> Result<(), ConsumerError>,
    ) -> Result<ReadStats, ReadError> {
        let mut noop = |_: u64, _: u64| {};
        let progress: &mut dyn FnMut(u64, u64) = match opts.progress.as_mut() {
            Some(p) => p.as_mut(),
            None => &mut noop,
        };
        let mut torn = None;
        let rows = match self.format {
            DumpFormat::Db => {
                db::read_db(&self.path, &self.name, order, opts.time_unit, progress, f)?
            }
            DumpFormat::Csv => {
                let open = || -> Result<CsvSource<File>, ReadError> {
                    let (file, _) = open_regular(&self.path, &self.name)?;
                    CsvSource::new(&self.name, file, opts.time_unit)
                };
                let mut src = open()?;
                let total = self.size;
                // ID order wanted: a file already in that order (memscope's own) is streamed as
                // is; the check stops at the first row out of order (msMemScope's dumps).
                let by_time = order == Order::ByTime;
                let (stream, base) = match order {
                    Order::File => (true, 0),
                    Order::ById | Order::ByTime => {
                        let sorted = sort::csv_in_order(&mut src, by_time, &mut |pos| {
                            progress(pos / 4, total)
                        })?;
                        src = open()?;
                        (sorted, total / 4)
                    }
                };
                let n = if stream {
                    let mut n = 0u64;
                    while src.next_record()? {
                        f(src.event()?).map_err(ReadError::Consumer)?;
                        n += 1;
                        if n & 0xffff == 0 {
                            let share = u128::from(src.byte_pos().min(total))
                                * u128::from(total - base)
                                / u128::from(total.max(1));
                            progress(base + share as u64, total);
                        }
                    }
                    progress(total, total);
                    n
                } else {
                    sort::sort_csv(
                        &mut src, &self.name, total, &opts.sort, by_time, progress, f,
                    )?
                };
                torn = src.torn_line();
                n
            }
        };
        Ok(ReadStats {
            rows,
            bytes: self.size,
            time_disorder: 0,
            torn_last_row: torn,
        })
    }
}

impl DumpFile {
    /// Passes every event to `f` in [`Order::ById`], optimistically: a CSV is streamed as
    /// stored while its rows are in (pid, ID) order; at the first row out of order `restart()`
    /// is called (the consumer must drop what it built) and every event is delivered again,
    /// this time through the sort. For memscope's own dumps (in ID order) this saves the
    /// sortedness scan of [`DumpFile::for_each`]; for msMemScope's dumps the first disorder
    /// comes within the first blocks, so little is read twice.
    ///
    /// # Errors
    /// As [`DumpFile::for_each`].
    pub fn for_each_by_id_restartable(
        &self,
        opts: &mut ReadOptions,
        f: &mut dyn FnMut(Event) -> Result<(), ConsumerError>,
        restart: &mut dyn FnMut(),
    ) -> Result<ReadStats, ReadError> {
        self.for_each_ordered_restartable(Order::ById, opts, f, restart)
    }

    /// [`DumpFile::for_each_by_id_restartable`] for [`Order::ById`] or [`Order::ByTime`]
    /// ([`Order::File`] is delivered as stored, never restarted).
    ///
    /// # Errors
    /// As [`DumpFile::for_each`].
    pub fn for_each_ordered_restartable(
        &self,
        order: Order,
        opts: &mut ReadOptions,
        f: &mut dyn FnMut(Event) -> Result<(), ConsumerError>,
        restart: &mut dyn FnMut(),
    ) -> Result<ReadStats, ReadError> {
        if self.format == DumpFormat::Db || order == Order::File {
            return self.for_each(order, opts, f);
        }
        let by_time = order == Order::ByTime;
        let mut noop = |_: u64, _: u64| {};
        let progress: &mut dyn FnMut(u64, u64) = match opts.progress.as_mut() {
            Some(p) => p.as_mut(),
            None => &mut noop,
        };
        let open = || -> Result<CsvSource<File>, ReadError> {
            let (file, _) = open_regular(&self.path, &self.name)?;
            CsvSource::new(&self.name, file, opts.time_unit)
        };
        let mut src = open()?;
        let mut prev: Option<(u64, u64, u64)> = None;
        let mut n = 0u64;
        while src.next_record()? {
            let ev = src.event()?;
            let pid = ev.pid.map_or(u64::MAX, u64::from);
            let key = if by_time {
                (pid, ev.ts_ns, ev.id)
            } else {
                (pid, ev.id, 0)
            };
            if prev.is_some_and(|p| key < p) {
                restart();
                let mut src = open()?;
                let rows = sort::sort_csv(
                    &mut src, &self.name, self.size, &opts.sort, by_time, progress, f,
                )?;
                return Ok(ReadStats {
                    rows,
                    bytes: self.size,
                    time_disorder: 0,
                    torn_last_row: src.torn_line(),
                });
            }
            prev = Some(key);
            f(ev).map_err(ReadError::Consumer)?;
            n += 1;
            if n & 0xffff == 0 {
                progress(src.byte_pos().min(self.size), self.size);
            }
        }
        progress(self.size, self.size);
        Ok(ReadStats {
            rows: n,
            bytes: self.size,
            time_disorder: 0,
            torn_last_row: src.torn_line(),
        })
    }
}

/// Reads until `buf` is full or the input ends; returns the bytes read.
fn read_full(f: &mut File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Reads a whole dump into memory (tests and small files).
///
/// # Errors
/// As [`DumpFile::for_each`].
pub fn read_all(path: &Path, order: Order) -> Result<Vec<Event>, ReadError> {
    let mut out = Vec::new();
    DumpFile::open(path)?.for_each(order, &mut ReadOptions::default(), &mut |e| {
        out.push(e);
        Ok(())
    })?;
    Ok(out)
}

/// Parses CSV text (tests, pipes); `name` appears in errors.
///
/// # Errors
/// As [`DumpFile::for_each`].
pub fn read_csv_str(name: &str, text: &str) -> Result<Vec<Event>, ReadError> {
    CsvEvents::new(name, text.as_bytes(), None)?.collect()
}
