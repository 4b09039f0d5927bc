//! memscope's and msMemScope's `.db` dumps: table `memscope_dump`, same 12 columns as the CSV,
//! Attr as a JSON object of strings. Read-only; the only SQL is fixed text (no user input).

use std::path::Path;

use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};

use crate::event::Event;

use super::error::{ConsumerError, Location, ReadError};
use super::row::{parse_row, parse_ts, Columns, TimeUnit};
use super::Order;

const SELECT: &str = r#"SELECT "ID","Event","Event Type","Name","Timestamp(ns)","Process Id","Thread Id","Device Id","Ptr","Attr","Call Stack(Python)","Call Stack(C)",rowid FROM memscope_dump"#;

fn cell(v: ValueRef<'_>) -> String {
    match v {
        ValueRef::Null => String::new(),
        ValueRef::Integer(i) => i.to_string(),
        ValueRef::Real(r) => r.to_string(),
        ValueRef::Text(t) | ValueRef::Blob(t) => String::from_utf8_lossy(t).into_owned(),
    }
}

/// Passes every row of the `.db` at `path` to `f` in `order`: rowid (insertion) order, or
/// ordered by process and ID, or by process, timestamp and ID (SQLite sorts, spilling to its
/// own temporary storage).
///
/// # Errors
/// Not a dump database, a malformed row, or `f`'s error.
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
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(sql_err)?;
    let total: i64 = conn
        .query_row("SELECT count(*) FROM memscope_dump", [], |r| r.get(0))
        .map_err(|e| ReadError::parse(file, None, format!("not a memscope dump database: {e}")))?;
    let total = total.max(0) as u64;
    let order = match order {
        Order::ById => r#" ORDER BY "Process Id", "ID", rowid"#,
        Order::ByTime => r#" ORDER BY "Process Id", "Timestamp(ns)", "ID", rowid"#,
        Order::File => " ORDER BY rowid",
    };
    let mut stmt = conn.prepare(&format!("{SELECT}{order}")).map_err(sql_err)?;
    let mut rows = stmt.query([]).map_err(sql_err)?;
    let cols = Columns::standard();
    let mut unit = unit;
    let mut n = 0u64;
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
        f(ev).map_err(ReadError::Consumer)?;
        n += 1;
        if n & 0xffff == 0 {
            progress(n, total);
        }
    }
    progress(total, total);
    Ok(n)
}
