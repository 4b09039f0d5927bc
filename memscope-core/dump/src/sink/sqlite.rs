//! SQLite dump writer: table `memscope_dump` with the 12 CSV columns (behaviour spec §5.3),
//! Attr as a JSON object of strings, rows inserted with a cached prepared statement in batched
//! transactions (msMemScope inserts one row per transaction).

use super::DeviceWriter;
use memscope_core::attr_text::write_attr_json_with;
use memscope_core::bus::BusError;
use memscope_core::event::Event;
use std::path::{Path, PathBuf};

/// Rows per transaction.
pub const BATCH_ROWS: u64 = 100_000;

/// Rows per INSERT statement: one statement inserts this many rows (12 × 64 = 768 bound
/// values, under SQLite's default limit of 32 766), which divides the per-statement cost of
/// SQLite's virtual machine by 64.
pub const ROWS_PER_INSERT: usize = 64;

/// The table definition (msMemScope's, so MindStudio Insight reads our files).
pub const CREATE_TABLE: &str = "CREATE TABLE IF NOT EXISTS memscope_dump (\"ID\" INTEGER, \
    \"Event\" TEXT, \"Event Type\" TEXT, \"Name\" TEXT, \"Timestamp(ns)\" INTEGER, \
    \"Process Id\" INTEGER, \"Thread Id\" INTEGER, \"Device Id\" TEXT, \"Ptr\" TEXT, \
    \"Attr\" TEXT, \"Call Stack(Python)\" TEXT, \"Call Stack(C)\" TEXT)";

fn insert_sql(rows: usize) -> String {
    let one = "(?,?,?,?,?,?,?,?,?,?,?,?)";
    format!(
        "INSERT INTO memscope_dump VALUES {}",
        vec![one; rows].join(",")
    )
}

/// One buffered cell: texts are ranges of the file's text buffer, so a row costs no
/// allocation of its own.
#[derive(Clone, Copy)]
enum Cell {
    Null,
    Int(i64),
    /// `texts[start..end]`.
    Text(u32, u32),
}

/// One `.db` file.
pub struct DbFile {
    conn: rusqlite::Connection,
    path: PathBuf,
    rows: u64,
    in_tx: u64,
    /// The value buffer of the Attr cell's JSON.
    attr_val: String,
    pending: Vec<Cell>,
    /// The pending rows' texts, one after another.
    texts: String,
    full_sql: String,
    /// Rows at the last successful flush.
    flushed_rows: u64,
}

impl DbFile {
    /// Opens (creates) the database at `path`, which the caller has created empty with mode
    /// 0600, and creates the table.
    ///
    /// # Errors
    /// SQLite refused to open or create the table.
    pub fn open(path: PathBuf) -> Result<DbFile, BusError> {
        let err = |e: rusqlite::Error| BusError::Sqlite {
            path: path.display().to_string(),
            source: Box::new(e),
        };
        // a path, never a URI; the file was created O_EXCL|O_NOFOLLOW by the caller and SQLite
        // must not follow a symbolic link swapped in for it either
        let conn = rusqlite::Connection::open_with_flags(
            &path,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE
                | rusqlite::OpenFlags::SQLITE_OPEN_CREATE
                | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX
                | rusqlite::OpenFlags::SQLITE_OPEN_NOFOLLOW,
        )
        .map_err(err)?;
        // The bulk load runs without WAL and without a journal file (issue 37: writing each page
        // to the WAL and again at the checkpoint cost 12 % of a HOST-rows run's wall time).
        // The dump is rebuilt from the stream, never the only copy of an event while the run
        // lasts: a collector killed in the middle of a COMMIT can leave the file torn, and
        // `memscope recover` writes it again. The journal in memory keeps ROLLBACK working
        // (`abandon`), and the pages reach the file only at COMMIT, so a reader between commits
        // sees whole batches; synchronous=OFF: no fsync, for the same reason.
        conn.execute_batch(
            "PRAGMA journal_mode=MEMORY; PRAGMA synchronous=OFF; PRAGMA cache_size=-65536;",
        )
        .map_err(err)?;
        conn.busy_timeout(std::time::Duration::from_millis(5000))
            .map_err(err)?;
        conn.execute_batch(CREATE_TABLE).map_err(err)?;
        Ok(DbFile {
            conn,
            path,
            rows: 0,
            in_tx: 0,
            attr_val: String::with_capacity(64),
            pending: Vec::with_capacity(ROWS_PER_INSERT * 12),
            texts: String::with_capacity(ROWS_PER_INSERT * 256),
            full_sql: insert_sql(ROWS_PER_INSERT),
            flushed_rows: 0,
        })
    }

    fn err(&self, e: rusqlite::Error) -> BusError {
        BusError::Sqlite {
            path: self.path.display().to_string(),
            source: Box::new(e),
        }
    }
}

impl DbFile {
    /// Leaves the database as one self-contained file in journal mode DELETE, SQLite's default
    /// (the load ran with the journal in memory), so readers need no `-wal`/`-shm` files and
    /// can open it on a read-only medium.
    ///
    /// # Errors
    /// SQLite refused the checkpoint.
    pub fn close_wal(&mut self) -> Result<(), BusError> {
        self.flush()?;
        self.conn
            .execute_batch("PRAGMA journal_mode=DELETE;")
            .map_err(|e| self.err(e))
    }

    /// Inserts the buffered rows (one statement for a full batch, a shorter one for the rest).
    fn insert_pending(&mut self) -> Result<(), BusError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        if self.in_tx == 0 {
            self.conn.execute_batch("BEGIN").map_err(|e| self.err(e))?;
        }
        let rows = self.pending.len() / 12;
        let short;
        let sql = if rows == ROWS_PER_INSERT {
            &self.full_sql
        } else {
            short = insert_sql(rows);
            &short
        };
        let (pending, texts) = (&self.pending, &self.texts);
        let res = self.conn.prepare_cached(sql).and_then(|mut st| {
            for (i, cell) in pending.iter().enumerate() {
                match *cell {
                    Cell::Null => st.raw_bind_parameter(i + 1, rusqlite::types::Null)?,
                    Cell::Int(v) => st.raw_bind_parameter(i + 1, v)?,
                    Cell::Text(a, b) => {
                        st.raw_bind_parameter(i + 1, &texts[a as usize..b as usize])?
                    }
                }
            }
            st.raw_execute()
        });
        self.pending.clear();
        self.texts.clear();
        res.map_err(|e| self.err(e))?;
        self.in_tx += rows as u64;
        Ok(())
    }

    /// Buffers `s` as a text cell.
    fn text(&mut self, s: &str) {
        let a = self.texts.len() as u32;
        self.texts.push_str(s);
        self.pending.push(Cell::Text(a, self.texts.len() as u32));
    }

    fn commit(&mut self) -> Result<(), BusError> {
        if self.in_tx > 0 {
            self.conn.execute_batch("COMMIT").map_err(|e| self.err(e))?;
            self.in_tx = 0;
        }
        Ok(())
    }
}

impl DeviceWriter for DbFile {
    const KIND: &'static str = "sqlite";

    fn create(file: std::fs::File, path: PathBuf) -> Result<Self, BusError> {
        drop(file);
        DbFile::open(path)
    }

    fn copy_into(&mut self, file: std::fs::File, path: PathBuf) -> Result<Self, BusError> {
        drop(file);
        self.flush()?;
        // VACUUM INTO writes a self-contained copy into the new (empty) file.
        self.conn
            .execute("VACUUM INTO ?1", [path.display().to_string()])
            .map_err(|e| BusError::Sqlite {
                path: path.display().to_string(),
                source: Box::new(e),
            })?;
        let mut db = DbFile::open(path)?;
        db.rows = self.rows;
        db.flushed_rows = self.rows;
        Ok(db)
    }

    fn write(&mut self, ev: &Event) -> Result<(), BusError> {
        let opt = |v: Option<u32>| v.map_or(Cell::Null, |x| Cell::Int(x as i64));
        self.pending.push(Cell::Int(ev.id as i64));
        self.text(ev.kind.as_str());
        self.text(ev.event_type.as_str());
        self.text(ev.name.as_deref().unwrap_or("N/A"));
        self.pending.push(Cell::Int(ev.ts_ns as i64));
        self.pending.push(opt(ev.pid));
        self.pending.push(opt(ev.tid));
        let a = self.texts.len() as u32;
        ev.device.write_text(&mut self.texts);
        self.pending.push(Cell::Text(a, self.texts.len() as u32));
        let mut hex = [0u8; 18];
        match ev.ptr {
            Some(p) => {
                let s = std::str::from_utf8(super::csv::fmt_ptr(p, &mut hex)).unwrap_or("0x?");
                self.text(s);
            }
            None => self.text("N/A"),
        }
        let a = self.texts.len() as u32;
        write_attr_json_with(ev, &mut self.texts, &mut self.attr_val);
        self.pending.push(Cell::Text(a, self.texts.len() as u32));
        self.text(ev.py_stack.as_deref().unwrap_or_default());
        self.text(ev.c_stack.as_deref().unwrap_or_default());
        self.rows += 1;
        if self.pending.len() >= ROWS_PER_INSERT * 12 {
            self.insert_pending()?;
        }
        if self.in_tx >= BATCH_ROWS {
            self.commit()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), BusError> {
        self.insert_pending()?;
        self.commit()?;
        self.flushed_rows = self.rows;
        Ok(())
    }

    fn path(&self) -> &Path {
        &self.path
    }

    fn rows(&self) -> u64 {
        self.rows
    }

    fn close(&mut self) -> Result<(), BusError> {
        self.close_wal()
    }

    fn abandon(&mut self) -> u64 {
        // What the last COMMIT made durable stays; the open transaction goes.
        if self.in_tx > 0 {
            let _ = self.conn.execute_batch("ROLLBACK");
            self.rows -= self.in_tx;
            self.in_tx = 0;
        }
        self.rows -= self.pending.len() as u64 / 12;
        self.pending.clear();
        self.texts.clear();
        let kept = self.rows - self.flushed_rows;
        self.flushed_rows = self.rows;
        kept
    }
}

/// The SQLite sink layer of one process.
pub type DbSink = super::DumpSink<DbFile>;

#[cfg(test)]
mod tests {
    #[test]
    fn bundled_sqlite_is_built_with_the_settings_of_cargo_config() {
        let c = rusqlite::Connection::open_in_memory().unwrap();
        let mut st = c.prepare("PRAGMA compile_options").unwrap();
        let opts: Vec<String> = st
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        for want in ["DEFAULT_MEMSTATUS=0", "DEFAULT_LOOKASIDE=1200,400"] {
            assert!(opts.iter().any(|o| o == want), "{want} not in {opts:?}");
        }
    }
}
