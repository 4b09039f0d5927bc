//! memscope's and msMemScope's `.db` dumps: table `memscope_dump`, same 12 columns as the CSV,
//! Attr as a JSON object of strings. The only SQL is fixed text (no user input).
//!
//! The reader never guesses and never writes:
//!
//! * the path is a path, never a SQLite URI (`file:x.db` is a file named `file:x.db`): the
//!   URI is built here from the real path, percent-encoded;
//! * the file is opened `immutable=1` (read-only, no locks, no `-wal`/`-shm` created), so a
//!   WAL-mode file (msMemScope writes WAL) reads in a read-only directory and leaves nothing
//!   behind. A file with a hot `-wal` or `-journal` next to it (its writer was killed or is
//!   still running) is copied with it into a private temporary directory and read there, so
//!   the rows in the WAL are read too;
//! * `memscope_dump` must be a table (a view could recurse forever) with the dump's columns
//!   (`PRAGMA table_info`; SQLite would read a missing double-quoted column as its own name);
//!   the two call-stack columns are optional, as in the CSV;
//! * ID order (and timestamp order, [`Order::ByTime`]) is numeric (`CAST`), as for CSV, and
//!   checked while reading;
//! * a row is at most [`super::MAX_RECORD_BYTES`] (`SQLITE_LIMIT_LENGTH`).

use std::path::{Path, PathBuf};

use rusqlite::limits::Limit;
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};

use memscope_core::event::Event;

use super::error::{ConsumerError, Location, ReadError};
use super::limits::MAX_RECORD_BYTES;
use super::row::{parse_row, parse_ts, Columns, TimeUnit};
use super::Order;

/// The dump's columns, in CSV order; the last two are optional.
const COLUMNS: [&str; 12] = [
    "ID",
    "Event",
    "Event Type",
    "Name",
    "Timestamp(ns)",
    "Process Id",
    "Thread Id",
    "Device Id",
    "Ptr",
    "Attr",
    "Call Stack(Python)",
    "Call Stack(C)",
];
const REQUIRED: usize = 10;

fn cell(v: ValueRef<'_>) -> String {
    match v {
        ValueRef::Null => String::new(),
        ValueRef::Integer(i) => i.to_string(),
        ValueRef::Real(r) => r.to_string(),
        ValueRef::Text(t) | ValueRef::Blob(t) => String::from_utf8_lossy(t).into_owned(),
    }
}

/// `file:` URI of an absolute path, every byte outside `[A-Za-z0-9/._~-]` percent-encoded.
fn uri(path: &Path, query: &str) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut s = String::from("file://");
    for &b in path.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"/._~-".contains(&b) {
            s.push(b as char);
        } else {
            s.push_str(&format!("%{b:02X}"));
        }
    }
    s.push('?');
    s.push_str(query);
    s
}

/// An open dump database: the connection, and the private copy it reads when the input had
/// a hot journal (removed when this drops).
pub struct DumpDb {
    /// The read-only connection.
    pub conn: Connection,
    _copy: Option<tempfile::TempDir>,
}

fn hot(side: &Path) -> bool {
    std::fs::symlink_metadata(side).is_ok_and(|m| m.is_file() && m.len() > 0)
}

/// Opens the `.db` at `path` (named `file` in errors) for reading, as described in the
/// module documentation, and checks that `memscope_dump` is a table.
///
/// # Errors
/// Unreadable, not SQLite, or no `memscope_dump` table.
pub fn open_dump_db(path: &Path, file: &str) -> Result<DumpDb, ReadError> {
    let sql_err = |source| ReadError::Sqlite {
        file: file.to_owned(),
        source,
    };
    let real = std::fs::canonicalize(path).map_err(|e| ReadError::io(file, e))?;
    let mut name = real.as_os_str().to_owned();
    name.push("-wal");
    let wal = PathBuf::from(name);
    let mut name = real.as_os_str().to_owned();
    name.push("-journal");
    let journal = PathBuf::from(name);
    let (conn, copy) = if hot(&wal) || hot(&journal) {
        let dir = tempfile::Builder::new()
            .prefix(".memscope-db-")
            .tempdir()
            .map_err(|e| ReadError::io(file, e))?;
        let target = dir.path().join("dump.db");
        let copy = |from: &Path, suffix: &str| -> Result<(), ReadError> {
            let mut to = target.as_os_str().to_owned();
            to.push(suffix);
            std::fs::copy(from, &to).map(drop).map_err(|e| {
                ReadError::parse(
                    file,
                    None,
                    format!(
                        "cannot copy it with its journal into {} to read it: {e}",
                        dir.path().display()
                    ),
                )
            })
        };
        copy(&real, "")?;
        if hot(&wal) {
            copy(&wal, "-wal")?;
        }
        if hot(&journal) {
            copy(&journal, "-journal")?;
        }
        let conn = Connection::open_with_flags(
            uri(&target, "mode=rw"),
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_URI
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(sql_err)?;
        (conn, Some(dir))
    } else {
        let conn = Connection::open_with_flags(
            uri(&real, "mode=ro&immutable=1"),
            OpenFlags::SQLITE_OPEN_READ_ONLY
                | OpenFlags::SQLITE_OPEN_URI
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(sql_err)?;
        (conn, None)
    };
    conn.set_limit(Limit::SQLITE_LIMIT_LENGTH, MAX_RECORD_BYTES as i32);
    conn.execute_batch("PRAGMA trusted_schema=OFF; PRAGMA query_only=ON;")
        .map_err(sql_err)?;
    let kind: Option<(String, String)> = conn
        .query_row(
            "SELECT type, coalesce(sql, '') FROM sqlite_master WHERE name = 'memscope_dump' COLLATE NOCASE",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .map(Some)
        .or_else(|e| match e {
            rusqlite::Error::QueryReturnedNoRows => Ok(None),
            e => Err(e),
        })
        .map_err(|e| ReadError::parse(file, None, format!("not a memscope dump database: {e}")))?;
    match kind {
        None => {
            return Err(ReadError::parse(
                file,
                None,
                "not a memscope dump database: no table memscope_dump",
            ))
        }
        Some((t, sql))
            if t != "table"
                || sql
                    .trim_start()
                    .to_ascii_uppercase()
                    .starts_with("CREATE VIRTUAL") =>
        {
            return Err(ReadError::parse(
                file,
                None,
                format!(
                    "memscope_dump is a {}, not a table: only tables are read",
                    if t == "table" { "virtual table" } else { &t }
                ),
            ))
        }
        Some(_) => {}
    }
    Ok(DumpDb { conn, _copy: copy })
}

/// The SELECT of the dump's columns (NULL for a missing optional one), plus rowid.
///
/// # Errors
/// A required column is missing: the error names it.
fn select(conn: &Connection, file: &str) -> Result<String, ReadError> {
    let sql_err = |source| ReadError::Sqlite {
        file: file.to_owned(),
        source,
    };
    let mut st = conn
        .prepare("SELECT name FROM pragma_table_info('memscope_dump')")
        .map_err(sql_err)?;
    let names: Vec<String> = st
        .query_map([], |r| r.get(0))
        .map_err(sql_err)?
        .collect::<Result<_, _>>()
        .map_err(sql_err)?;
    let mut cols = Vec::new();
    for (i, c) in COLUMNS.iter().enumerate() {
        if names.iter().any(|n| n.eq_ignore_ascii_case(c)) {
            cols.push(format!("\"{c}\""));
        } else if i < REQUIRED {
            return Err(ReadError::parse(
                file,
                None,
                format!(
                    "table memscope_dump has no column \"{c}\" (not a memscope or msMemScope dump)"
                ),
            ));
        } else {
            cols.push("NULL".to_owned());
        }
    }
    Ok(format!(
        "SELECT {},rowid FROM memscope_dump",
        cols.join(",")
    ))
}

/// Passes every row of the `.db` at `path` to `f` in `order`: rowid (insertion) order, or
/// ordered by process (N/A last) and numeric ID, or by process, numeric timestamp and numeric
/// ID (SQLite sorts, spilling to its own temporary storage).
///
/// # Errors
/// Not a dump database, a missing column, a malformed row, or `f`'s error.
pub fn read_db(
    path: &Path,
    file: &str,
    order: Order,
    unit: Option<TimeUnit>,
    progress: &mut dyn FnMut(u64, u64),
    f: &mut dyn FnMut(Event) -> Result<(), ConsumerError>,
) -> Result<u64, ReadError> {
    let sql_err = |source| ReadError::Sqlite {
        file: file.to_owned(),
        source,
    };
    let db = open_dump_db(path, file)?;
    let conn = &db.conn;
    let select = select(conn, file)?;
    let total: i64 = conn
        .query_row("SELECT count(*) FROM memscope_dump", [], |r| r.get(0))
        .map_err(sql_err)?;
    let total = total.max(0) as u64;
    // process (N/A last), then numeric ID or numeric timestamp: a TEXT column sorts as text
    let by_pid = r#"("Process Id" IS NULL OR (typeof("Process Id") = 'text' AND trim("Process Id") IN ('', 'N/A'))), CAST("Process Id" AS INTEGER)"#;
    let order_by = match order {
        Order::ById => format!(r#" ORDER BY {by_pid}, CAST("ID" AS INTEGER), rowid"#),
        Order::ByTime => format!(
            r#" ORDER BY {by_pid}, CAST("Timestamp(ns)" AS INTEGER), CAST("ID" AS INTEGER), rowid"#
        ),
        Order::File => " ORDER BY rowid".to_owned(),
    };
    let mut stmt = conn
        .prepare(&format!("{select}{order_by}"))
        .map_err(sql_err)?;
    let mut rows = stmt.query([]).map_err(sql_err)?;
    let cols = Columns::standard();
    let mut unit = unit;
    let mut n = 0u64;
    let mut prev: Option<(u64, u64, u64)> = None;
    while let Some(row) = rows.next().map_err(sql_err)? {
        let cells: Vec<String> = (0..12)
            .map(|i| row.get_ref(i).map(cell).unwrap_or_default())
            .collect();
        let rowid: i64 = row.get(12).unwrap_or(-1);
        let refs: Vec<&str> = cells.iter().map(String::as_str).collect();
        let at = Some(Location::Row(rowid));
        let u = match unit {
            Some(u) => u,
            None => {
                let ts =
                    parse_ts(cols.ts_cell(&refs)).map_err(|m| ReadError::parse(file, at, m))?;
                if ts != 0 {
                    unit = Some(TimeUnit::detect(ts));
                }
                unit.unwrap_or(TimeUnit::Nanos)
            }
        };
        let ev = parse_row(&cols, &refs, u, true).map_err(|m| ReadError::parse(file, at, m))?;
        let pid = ev.pid.map_or(u64::MAX, u64::from);
        let key = match order {
            Order::ById => Some((pid, ev.id, 0)),
            Order::ByTime => Some((pid, ev.ts_ns, ev.id)),
            Order::File => None,
        };
        if let Some(key) = key {
            if prev.is_some_and(|p| key < p) {
                let what = if order == Order::ById {
                    format!(
                        "ID {} comes after ID {} once sorted: IDs this large cannot be ordered by SQLite (beyond 2^63)",
                        ev.id,
                        prev.map_or(0, |p| p.1)
                    )
                } else {
                    format!(
                        "row ID {} (Timestamp(ns) {}) comes after Timestamp(ns) {} once sorted: IDs or timestamps this large cannot be ordered by SQLite (beyond 2^63)",
                        ev.id,
                        ev.ts_ns,
                        prev.map_or(0, |p| p.1)
                    )
                };
                return Err(ReadError::parse(file, at, what));
            }
            prev = Some(key);
        }
        f(ev).map_err(ReadError::Consumer)?;
        n += 1;
        if n & 0xffff == 0 {
            progress(n, total);
        }
    }
    progress(total, total);
    Ok(n)
}
