//! Fuzz target: the `.db` dump reader (schema check, tables only, numeric ID order, immutable
//! opens, hot WAL copies, bounded rows) and every offline analysis over what it reads.
//!
//! An input is one of two kinds, by its first byte:
//! * even: a SQLite file as is (seeds: valid dumps made at start-up; mutations corrupt pages,
//!   headers, the schema);
//! * odd: a recipe the target turns into a database with SQLite itself — which columns (some
//!   missing, renamed, or typed TEXT, as `sqlite3 .import` makes them), table or view, WAL
//!   mode with a hot `-wal` left next to the file, then rows whose cells come from the recipe
//!   (integers, reals, text near the bounds, JSON and text-form Attrs, blobs, NULL).

use std::path::Path;

use memscope_fuzz::{dumps, run, Ctx, Target, INTERESTING};
use rusqlite::Connection;

const COLS: [&str; 12] = [
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
const TYPES: [&str; 12] = [
    "INTEGER", "TEXT", "TEXT", "TEXT", "INTEGER", "INTEGER", "INTEGER", "TEXT", "TEXT", "TEXT",
    "TEXT", "TEXT",
];

/// Reads the recipe byte by byte (zeros once it is used up).
struct Recipe<'a>(&'a [u8], usize);

impl Recipe<'_> {
    fn byte(&mut self) -> u8 {
        let b = self.0.get(self.1).copied().unwrap_or(0);
        self.1 += 1;
        b
    }
    fn more(&self) -> bool {
        self.1 < self.0.len()
    }
    fn text(&mut self, max: usize) -> String {
        let n = usize::from(self.byte()) % (max + 1);
        let start = self.1.min(self.0.len());
        let end = (start + n).min(self.0.len());
        self.1 += n;
        String::from_utf8_lossy(&self.0[start..end]).into_owned()
    }
}

const WORDS: &[&str] = &[
    "MALLOC",
    "FREE",
    "ACCESS",
    "OP_LAUNCH",
    "KERNEL_LAUNCH",
    "MSTX",
    "SYSTEM",
    "PTA",
    "HAL",
    "ATB",
    "READ",
    "MINDSPORE",
    "HOST_MMAP",
    "SNAPSHOT",
    "{\"type\":\"MINDSPORE\",\"size\":\"8\"}",
    "{\"size\":\"16\",\"addr\":\"0x10\",\"owner\":\"MINDSPORE@a\"}",
    "ATEN_START",
    "ATEN_END",
    "Mark",
    "N/A",
    "cpu",
    "0",
    "1",
    "0x10",
    "{}",
    "{\"size\":\"16\",\"addr\":\"0x10\",\"owner\":\"PTA@a\"}",
    "{size:16,addr:0x10}",
    "{\"size\":",
    "{\"size\":{\"a\":1}}",
    "{\"allocation_id\":\"1\",\"size\":\"-5\"}",
    "step start",
    "\"m\"",
    "  7",
    "",
    "N/A ",
];

fn cell(r: &mut Recipe<'_>) -> rusqlite::types::Value {
    use rusqlite::types::Value;
    match r.byte() % 8 {
        0 => Value::Null,
        1 => Value::Integer(i64::from(r.byte()) - 8),
        2 => Value::Integer(i64::from_le_bytes([
            r.byte(),
            r.byte(),
            r.byte(),
            r.byte(),
            r.byte(),
            r.byte(),
            r.byte(),
            r.byte(),
        ])),
        3 => Value::Real(f64::from(r.byte()) / 3.0),
        4 => Value::Text(INTERESTING[usize::from(r.byte()) % INTERESTING.len()].to_owned()),
        5 => Value::Blob(r.text(16).into_bytes()),
        6 => Value::Text(r.text(40)),
        _ => Value::Text(WORDS[usize::from(r.byte()) % WORDS.len()].to_owned()),
    }
}

fn build(recipe: &[u8], path: &Path, ctx: &Ctx) -> rusqlite::Result<()> {
    let mut r = Recipe(recipe, 1);
    let flags = r.byte();
    let mut cols = Vec::new();
    for (i, c) in COLS.iter().enumerate() {
        match r.byte() % 16 {
            0 => continue,                                                    // missing
            1 => cols.push(format!("\"{}\" {}", c.to_lowercase(), TYPES[i])), // case
            2 | 3 => cols.push(format!("\"{c}\" TEXT")),                      // .import
            4 => cols.push(format!("\"{c}\"")),                               // no type
            _ => cols.push(format!("\"{c}\" {}", TYPES[i])),
        }
    }
    if cols.is_empty() {
        cols.push("\"ID\" INTEGER".to_owned());
    }
    let conn = Connection::open(path)?;
    conn.execute_batch("PRAGMA synchronous=OFF")?;
    let table = if flags & 1 == 1 {
        "memscope_rows"
    } else {
        "memscope_dump"
    };
    conn.execute_batch(&format!("CREATE TABLE {table} ({})", cols.join(",")))?;
    if flags & 1 == 1 {
        // a view over a table (finite: the recursive kind is refused before any query)
        conn.execute_batch("CREATE VIEW memscope_dump AS SELECT * FROM memscope_rows")?;
    }
    let wal = flags & 2 == 2;
    if wal {
        conn.execute_batch("PRAGMA journal_mode=WAL; PRAGMA wal_autocheckpoint=0;")?;
    }
    let ncols = cols.len();
    let marks = vec!["?"; ncols].join(",");
    conn.execute_batch("BEGIN")?;
    let mut st = conn.prepare(&format!("INSERT INTO {table} VALUES ({marks})"))?;
    let mut rows = 0;
    while r.more() && rows < 200 {
        let vals: Vec<rusqlite::types::Value> = (0..ncols).map(|_| cell(&mut r)).collect();
        st.execute(rusqlite::params_from_iter(vals))?;
        rows += 1;
    }
    drop(st);
    conn.execute_batch("COMMIT")?;
    if wal && flags & 4 == 4 {
        // a writer killed now: the db and its -wal, copied while it is open
        let hot = ctx.scratch.join("hot.db");
        let _ = std::fs::remove_file(ctx.scratch.join("hot.db-wal"));
        std::fs::copy(path, &hot).ok();
        let mut w = path.as_os_str().to_owned();
        w.push("-wal");
        std::fs::copy(&w, ctx.scratch.join("hot.db-wal")).ok();
        drop(conn);
        std::fs::rename(&hot, path).ok();
        let mut to = path.as_os_str().to_owned();
        to.push("-wal");
        std::fs::rename(ctx.scratch.join("hot.db-wal"), to).ok();
    }
    Ok(())
}

fn seed_db(ctx_dir: &Path, name: &str, setup: &str) -> Vec<u8> {
    let p = ctx_dir.join(name);
    let _ = std::fs::remove_file(&p);
    let c = Connection::open(&p).expect("seed db");
    c.execute_batch(memscope_dump::sink::sqlite::CREATE_TABLE)
        .expect("seed table");
    c.execute_batch(setup).expect("seed rows");
    drop(c);
    let b = std::fs::read(&p).expect("seed read");
    let _ = std::fs::remove_file(&p);
    let mut v = vec![0u8]; // kind: raw file
    v.extend(b);
    v
}

fn seeds() -> Vec<Vec<u8>> {
    let dir = std::env::temp_dir();
    let rows = "INSERT INTO memscope_dump VALUES \
        (1,'MALLOC','PTA','N/A',100,7,7,'0','0x0000000000001000','{\"allocation_id\":\"1\",\"addr\":\"0x1000\",\"size\":\"512\",\"owner\":\"PTA@w\"}','',''),\
        (3,'OP_LAUNCH','ATEN_START','aten::add',110,7,7,'0','N/A','{}','',''),\
        (2,'ACCESS','READ','aten::add',120,7,7,'0','0x0000000000001000','{\"allocation_id\":\"1\",\"size\":\"8\",\"type\":\"PTA\"}','',''),\
        (4,'OP_LAUNCH','ATEN_END','aten::add',130,7,7,'0','N/A','{}','',''),\
        (5,'MSTX','Mark','\"m\"',140,7,7,'0','N/A','{}','',''),\
        (6,'FREE','PTA','N/A',150,7,7,'0','0x0000000000001000','{addr:0x1000,size:512}','',''),\
        (7,'MALLOC','MINDSPORE','N/A',105,7,8,'0','0x0000000000002000','{\"allocation_id\":\"2\",\"size\":\"64\",\"owner\":\"MINDSPORE@l\"}','',''),\
        (8,'SNAPSHOT','SNAPSHOT','OOM_Snapshot',160,7,7,'0','N/A','{\"reserved\":\"1\",\"max_reserved\":\"2\"}','','');";
    let mut v = vec![
        seed_db(&dir, ".memscope-fuzz-seed-a.db", rows),
        seed_db(
            &dir,
            ".memscope-fuzz-seed-b.db",
            &format!("{rows} PRAGMA journal_mode=WAL;"),
        ),
    ];
    // recipes: every column typed as msMemScope does, TEXT columns, a view, a hot WAL
    for flags in [0u8, 2, 6, 1] {
        let mut r = vec![1u8, flags];
        r.extend([5u8; 12]);
        for i in 0..60u8 {
            r.extend([7, i % 30, 1, i, 7, 3, 7, 7, 1, 5, 0, 7, 0, 7, 18, 7, 20]);
        }
        v.push(r);
    }
    v
}

fn main() {
    run(
        Target {
            name: "db",
            ext: "db",
            seeds: seeds(),
            dict: Vec::new(),
            stretch_max: 16 << 20,
        },
        |input, ctx| {
            let path = ctx.scratch.join("input.db");
            for suffix in ["", "-wal", "-shm", "-journal"] {
                let mut p = path.as_os_str().to_owned();
                p.push(suffix);
                let _ = std::fs::remove_file(&p);
            }
            match input.first() {
                Some(k) if k % 2 == 1 => {
                    if let Err(e) = build(input, &path, ctx) {
                        return format!("build: {e}");
                    }
                }
                _ => {
                    if std::fs::write(&path, input.get(1..).unwrap_or(&[])).is_err() {
                        return "write failed".to_owned();
                    }
                }
            }
            // the reader writes nothing next to its input (immutable opens, copies elsewhere)
            let side = |s: &str| {
                let mut p = path.as_os_str().to_owned();
                p.push(s);
                std::fs::metadata(&p).ok().map(|m| m.len())
            };
            let before = (side("-shm"), side("-wal"), side("-journal"));
            let out = dumps::run_dump(&path, ctx);
            assert_eq!(
                (side("-shm"), side("-wal"), side("-journal")),
                before,
                "the reader changed the files next to its input"
            );
            out
        },
    )
}
