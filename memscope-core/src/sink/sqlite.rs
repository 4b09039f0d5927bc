//! SQLite dump writer: table `memscope_dump` with the 12 CSV columns (behaviour spec §5.3),
//! Attr as a JSON object of strings, rows inserted with a cached prepared statement in batched
//! transactions (msMemScope inserts one row per transaction).

use super::{DeviceRouter, DeviceWriter};
use crate::attr_text::write_attr_json;
use crate::bus::{BusCtx, BusError, Layer, ReportSection};
use crate::event::Event;
use std::path::{Path, PathBuf};

/// Rows per transaction.
pub const BATCH_ROWS: u64 = 100_000;

/// The table definition (msMemScope's, so MindStudio Insight reads our files).
pub const CREATE_TABLE: &str = "CREATE TABLE IF NOT EXISTS memscope_dump (\"ID\" INTEGER, \
    \"Event\" TEXT, \"Event Type\" TEXT, \"Name\" TEXT, \"Timestamp(ns)\" INTEGER, \
    \"Process Id\" INTEGER, \"Thread Id\" INTEGER, \"Device Id\" TEXT, \"Ptr\" TEXT, \
    \"Attr\" TEXT, \"Call Stack(Python)\" TEXT, \"Call Stack(C)\" TEXT)";

const INSERT: &str = "INSERT INTO memscope_dump VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)";

/// One `.db` file.
pub struct DbFile {
    conn: rusqlite::Connection,
    path: PathBuf,
    rows: u64,
    in_tx: u64,
    attr: String,
}

impl DbFile {
    /// Opens (creates) the database at `path`, which the caller has created empty with mode
    /// 0600, and creates the table.
    ///
    /// # Errors
    /// SQLite refused to open or create the table.
    pub fn open(path: PathBuf) -> Result<DbFile, BusError> {
        let err = |e| BusError::Sqlite { path: path.display().to_string(), source: e };
        let conn = rusqlite::Connection::open(&path).map_err(err)?;
        conn.execute_batch("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA cache_size=-65536;")
            .map_err(err)?;
        conn.busy_timeout(std::time::Duration::from_millis(5000)).map_err(err)?;
        conn.execute_batch(CREATE_TABLE).map_err(err)?;
        Ok(DbFile { conn, path, rows: 0, in_tx: 0, attr: String::with_capacity(256) })
    }

    fn err(&self, e: rusqlite::Error) -> BusError {
        BusError::Sqlite { path: self.path.display().to_string(), source: e }
    }
}

impl DeviceWriter for DbFile {
    fn write(&mut self, ev: &Event) -> Result<(), BusError> {
        if self.in_tx == 0 {
            self.conn.execute_batch("BEGIN").map_err(|e| self.err(e))?;
        }
        let mut st = self.conn.prepare_cached(INSERT).map_err(|e| BusError::Sqlite {
            path: self.path.display().to_string(),
            source: e,
        })?;
        let mut hex = [0u8; 18];
        let ptr = ev.ptr.map(|p| super::csv::fmt_ptr(p, &mut hex)).and_then(|b| std::str::from_utf8(b).ok());
        self.attr.clear();
        write_attr_json(ev, &mut self.attr);
        let device = match ev.device {
            crate::event::Device::Npu(n) => itoa::Buffer::new().format(n).to_owned(),
            d => d.to_text(),
        };
        st.execute(rusqlite::params![
            ev.id as i64,
            ev.kind.as_str(),
            ev.event_type.as_str(),
            ev.name.as_deref().unwrap_or("N/A"),
            ev.ts_ns as i64,
            ev.pid,
            ev.tid,
            device,
            ptr.unwrap_or("N/A"),
            self.attr.as_str(),
            ev.py_stack.as_deref().unwrap_or(""),
            ev.c_stack.as_deref().unwrap_or(""),
        ])
        .map_err(|e| BusError::Sqlite { path: self.path.display().to_string(), source: e })?;
        drop(st);
        self.rows += 1;
        self.in_tx += 1;
        if self.in_tx >= BATCH_ROWS {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), BusError> {
        if self.in_tx > 0 {
            self.conn.execute_batch("COMMIT").map_err(|e| self.err(e))?;
            self.in_tx = 0;
        }
        Ok(())
    }

    fn path(&self) -> &Path {
        &self.path
    }

    fn rows(&self) -> u64 {
        self.rows
    }
}

/// The SQLite sink layer of one process.
pub struct DbSink {
    router: DeviceRouter<DbFile>,
}

impl DbSink {
    /// A sink that opens each device's database with `open`.
    pub fn new(open: super::Opener<DbFile>) -> DbSink {
        DbSink { router: DeviceRouter::new(open) }
    }
}

impl Layer for DbSink {
    fn name(&self) -> &'static str {
        "sqlite"
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
        let files = self.router.finish()?;
        report.push(ReportSection {
            title: "Dump files".into(),
            lines: files.iter().map(|(p, n)| format!("{} ({n} rows)", p.display())).collect(),
        });
        Ok(())
    }
}
