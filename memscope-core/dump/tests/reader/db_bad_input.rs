//! Issue 17: the `.db` reader never guesses and never writes (report `bad-input-2026-12-01.md`
//! M2, M3, M4, M6, M7, L9): numeric ID order, a schema check naming the missing column, tables
//! only, read-only (immutable) opens that leave no `-wal`/`-shm`, paths that are never URIs.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use memscope_dump::reader::{read_all, Order};
use rusqlite::Connection;

const CREATE: &str = "CREATE TABLE memscope_dump (\"ID\" INTEGER, \"Event\" TEXT, \"Event Type\" TEXT, \"Name\" TEXT, \"Timestamp(ns)\" INTEGER, \"Process Id\" INTEGER, \"Thread Id\" INTEGER, \"Device Id\" TEXT, \"Ptr\" TEXT, \"Attr\" TEXT, \"Call Stack(Python)\" TEXT, \"Call Stack(C)\" TEXT)";

/// A `.db` with marks of IDs `ids` (inserted in that order) via `create`.
fn db_with(path: &Path, create: &str, ids: &[&dyn rusqlite::ToSql]) -> Connection {
    let c = Connection::open(path).unwrap();
    c.execute_batch(create).unwrap();
    for id in ids {
        c.execute(
            "INSERT INTO memscope_dump VALUES (?1,'MSTX','Mark','m',100,7,7,'0','N/A','{}','','')",
            [id],
        )
        .unwrap();
    }
    c
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn text_ids_in_a_db_are_ordered_numerically_as_in_csv() {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("imp.db");
    // what `sqlite3 .import` makes: every column TEXT
    let create = CREATE.replace("INTEGER", "TEXT");
    let ids: [&dyn rusqlite::ToSql; 5] = [&"10", &"9", &"100", &"2", &"11"];
    drop(db_with(&p, &create, &ids));
    let got: Vec<u64> = read_all(&p, Order::ById)
        .unwrap()
        .iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(got, vec![2, 9, 10, 11, 100]);
}

#[test]
fn text_timestamps_in_a_db_replay_in_numeric_time_order_with_order_time() {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("imp.db");
    let create = CREATE.replace("INTEGER", "TEXT");
    let c = db_with(&p, &create, &[]);
    // (ID, timestamp): as text "100" < "20" < "50" < "9"; IDs 4 and 5 share a timestamp
    for (id, ts) in [
        ("1", "50"),
        ("2", "9"),
        ("3", "100"),
        ("5", "20"),
        ("4", "20"),
    ] {
        c.execute(
            "INSERT INTO memscope_dump VALUES (?1,'MSTX','Mark','m',?2,'7','7','0','N/A','{}','','')",
            [id, ts],
        )
        .unwrap();
    }
    drop(c);
    let got: Vec<(u64, u64)> = read_all(&p, Order::ByTime)
        .unwrap()
        .iter()
        .map(|e| (e.ts_ns, e.id))
        .collect();
    assert_eq!(got, vec![(9, 2), (20, 4), (20, 5), (50, 1), (100, 3)]);
    let by_id: Vec<u64> = read_all(&p, Order::ById)
        .unwrap()
        .iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(by_id, vec![1, 2, 3, 4, 5]);
}

#[test]
fn a_db_without_a_dump_column_is_refused_naming_it() {
    let t = tempfile::tempdir().unwrap();
    for missing in ["Attr", "Name", "ID", "Timestamp(ns)"] {
        let p = t.path().join(format!("no-{missing}.db"));
        let create = CREATE
            .replace(&format!(", \"{missing}\" TEXT"), "")
            .replace(&format!("\"{missing}\" INTEGER, "), "");
        assert!(!create.contains(&format!("\"{missing}\"")), "{create}");
        Connection::open(&p)
            .unwrap()
            .execute_batch(&create)
            .unwrap();
        let e = read_all(&p, Order::ById).unwrap_err().to_string();
        assert_eq!(
            e,
            format!(
                "{}: table memscope_dump has no column \"{missing}\" (not a memscope or msMemScope dump)",
                p.display()
            )
        );
    }
    // the call-stack columns are optional, as in CSV
    let p = t.path().join("nostack.db");
    let create = CREATE.replace(", \"Call Stack(Python)\" TEXT, \"Call Stack(C)\" TEXT", "");
    let c = Connection::open(&p).unwrap();
    c.execute_batch(&create).unwrap();
    c.execute(
        "INSERT INTO memscope_dump VALUES (1,'MSTX','Mark','m',100,7,7,'0','N/A','{}')",
        [],
    )
    .unwrap();
    drop(c);
    assert_eq!(read_all(&p, Order::File).unwrap().len(), 1);
}

#[test]
fn a_db_whose_dump_is_a_view_is_refused_at_once() {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("v.db");
    Connection::open(&p)
        .unwrap()
        .execute_batch(
            "CREATE VIEW memscope_dump AS WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT x \"ID\",'MSTX' \"Event\",'Mark' \"Event Type\",'n' \"Name\",x \"Timestamp(ns)\",1 \"Process Id\",1 \"Thread Id\",'N/A' \"Device Id\",'N/A' \"Ptr\",'' \"Attr\",'' \"Call Stack(Python)\",'' \"Call Stack(C)\" FROM c",
        )
        .unwrap();
    let start = Instant::now();
    let e = read_all(&p, Order::ById).unwrap_err().to_string();
    assert!(start.elapsed() < Duration::from_secs(10));
    assert_eq!(
        e,
        format!(
            "{}: memscope_dump is a view, not a table: only tables are read",
            p.display()
        )
    );
}

#[test]
fn a_db_attr_that_is_not_valid_json_is_an_error() {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("j.db");
    let c = db_with(&p, CREATE, &[]);
    c.execute(
        "INSERT INTO memscope_dump VALUES (1,'MALLOC','PTA','N/A',100,7,7,'0','0x10','{\"size\":','','')",
        [],
    )
    .unwrap();
    drop(c);
    let e = read_all(&p, Order::ById).unwrap_err().to_string();
    assert!(
        e.starts_with(&format!("{}: row 1: Attr is not valid JSON", p.display())),
        "{e}"
    );
}

fn wal_db(dir: &Path) -> PathBuf {
    let p = dir.join("w.db");
    let c = db_with(&p, CREATE, &[&1, &2, &3]);
    c.execute_batch("PRAGMA journal_mode=WAL").unwrap();
    c.execute(
        "INSERT INTO memscope_dump VALUES (4,'MSTX','Mark','m',100,7,7,'0','N/A','{}','','')",
        [],
    )
    .unwrap();
    drop(c);
    p
}

#[test]
fn a_wal_mode_db_is_read_without_writing_next_to_it() {
    let t = tempfile::tempdir().unwrap();
    let p = wal_db(t.path());
    assert_eq!(names(t.path()), ["w.db"], "a clean close leaves no WAL");
    assert_eq!(read_all(&p, Order::ById).unwrap().len(), 4);
    assert_eq!(read_all(&p, Order::File).unwrap().len(), 4);
    assert_eq!(
        names(t.path()),
        ["w.db"],
        "nothing created next to the input"
    );
}

#[test]
fn a_db_with_a_hot_wal_is_read_with_the_rows_in_its_wal() {
    let t = tempfile::tempdir().unwrap();
    let live = t.path().join("live");
    std::fs::create_dir(&live).unwrap();
    let p = live.join("w.db");
    let c = db_with(&p, CREATE, &[&1]);
    c.execute_batch("PRAGMA journal_mode=WAL; PRAGMA wal_autocheckpoint=0;")
        .unwrap();
    for id in 2..=5 {
        c.execute(
            "INSERT INTO memscope_dump VALUES (?1,'MSTX','Mark','m',100,7,7,'0','N/A','{}','','')",
            [id],
        )
        .unwrap();
    }
    // a writer killed now leaves the db and its -wal: copy both while it is open
    let crashed = t.path().join("crashed");
    std::fs::create_dir(&crashed).unwrap();
    std::fs::copy(&p, crashed.join("w.db")).unwrap();
    std::fs::copy(live.join("w.db-wal"), crashed.join("w.db-wal")).unwrap();
    drop(c);
    let before = names(&crashed);
    assert_eq!(before, ["w.db", "w.db-wal"]);
    let wal = std::fs::read(crashed.join("w.db-wal")).unwrap();
    let got = read_all(&crashed.join("w.db"), Order::ById).unwrap();
    assert_eq!(got.len(), 5, "the rows in the WAL are read");
    assert_eq!(names(&crashed), before, "no -shm created, nothing removed");
    assert_eq!(std::fs::read(crashed.join("w.db-wal")).unwrap(), wal);
}

#[test]
fn db_paths_are_paths_never_sqlite_uris() {
    let t = tempfile::tempdir().unwrap();
    // `file:good.db` names a file called so, never good.db through a URI
    drop(db_with(&t.path().join("file:good.db"), CREATE, &[&1, &2]));
    drop(db_with(&t.path().join("good.db"), CREATE, &[&1]));
    let p = t.path().join("file:good.db");
    assert_eq!(read_all(&p, Order::ById).unwrap().len(), 2);
    // characters that mean something in a URI
    let odd = t.path().join("a?mode=rwc&b#c%20.db");
    drop(db_with(&odd, CREATE, &[&1, &2, &3]));
    assert_eq!(read_all(&odd, Order::File).unwrap().len(), 3);
    // a relative `file:` path
    let cwd = std::env::current_dir().unwrap();
    std::env::set_current_dir(t.path()).unwrap();
    let r = read_all(Path::new("file:good.db"), Order::File).map(|v| v.len());
    std::env::set_current_dir(cwd).unwrap();
    assert_eq!(r.unwrap(), 2);
}
