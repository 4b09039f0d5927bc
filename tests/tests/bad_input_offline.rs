//! Issue 17, `memscope analyze` and `memscope compare` under hostile and broken input (report
//! `bad-input-2026-12-01.md`): bounded reads under a memory cap (H2), no symlink followed for
//! `compare -o`/`decompose -o` (M1), WAL `.db` in a read-only directory (M7), the annotated
//! `.db` copy (L1), escaped control characters (L3), neutralised CSV formulas (L4), `.db`
//! paths that are not URIs (L9), header-only dumps, END-without-START notes and missing marks
//! (L10), and torn last rows.

use memscope_tests::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const HEADER: &str =
    "ID,Event,Event Type,Name,Timestamp(ns),Process Id,Thread Id,Device Id,Ptr,Attr,Call Stack(Python),Call Stack(C)";

fn memscope_in(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new(memscope_bin())
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap()
}

fn write(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, format!("{HEADER}\n{body}")).unwrap();
    p
}

/// One op with one PTA allocation inside it (a compare-able dump), named `op`.
fn op_dump(dir: &Path, name: &str, op: &str) -> PathBuf {
    let op = op.replace('"', "\"\"");
    write(
        dir,
        name,
        &format!(
            "1,OP_LAUNCH,ATEN_START,\"{op}\",100,7,7,0,N/A,,,\n\
             2,MALLOC,PTA,N/A,150,7,7,0,0x0000000000000010,\"{{addr:0x10,size:512,owner:PTA@w}}\",,\n\
             3,OP_LAUNCH,ATEN_END,\"{op}\",200,7,7,0,N/A,,,\n"
        ),
    )
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn dump_reads_are_bounded_under_a_memory_cap() {
    let d = tempfile::tempdir().unwrap();
    let sparse = d.path().join("z.csv");
    std::fs::File::create(&sparse)
        .unwrap()
        .set_len(1 << 30)
        .unwrap();
    for input in [Path::new("/proc/self/pagemap"), sparse.as_path()] {
        // with 1 GB of address space an unbounded read aborts (134); a bounded one exits 2
        let o = Command::new("sh")
            .args(["-c", "ulimit -v 1000000; exec \"$0\" analyze leaks \"$1\""])
            .arg(memscope_bin())
            .arg(input)
            .output()
            .unwrap();
        assert_eq!(
            o.status.code(),
            Some(2),
            "{}: {}",
            input.display(),
            stderr(&o)
        );
        assert!(
            stderr(&o).contains("the header is longer than 1 MiB"),
            "{}",
            stderr(&o)
        );
    }
}

#[test]
fn compare_and_decompose_outputs_refuse_symlinks() {
    let d = tempfile::tempdir().unwrap();
    let a = op_dump(d.path(), "a.csv", "aten::t");
    let victim = d.path().join("victim");
    std::fs::create_dir(&victim).unwrap();
    let out = d.path().join("c");
    std::fs::create_dir(&out).unwrap();
    std::os::unix::fs::symlink(&victim, out.join("compare")).unwrap();
    let p = |p: &Path| p.to_str().unwrap().to_owned();
    let o = memscope_in(d.path(), &["compare", &p(&a), &p(&a), "-o", &p(&out)]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("is a symbolic link"), "{}", stderr(&o));
    std::os::unix::fs::symlink(&victim, d.path().join("dlink")).unwrap();
    let o = memscope_in(
        d.path(),
        &[
            "analyze",
            "decompose",
            &p(&a),
            "-o",
            &p(&d.path().join("dlink")),
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("is a symbolic link"), "{}", stderr(&o));
    assert_eq!(std::fs::read_dir(&victim).unwrap().count(), 0);
    // decompose -o FILE says so (was "File exists")
    let o = memscope_in(d.path(), &["analyze", "decompose", &p(&a), "-o", &p(&a)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("is not a directory"), "{}", stderr(&o));
}

/// A WAL-mode `.db` with the rows of `body` (CSV lines of the dump's 12 columns).
fn wal_db(path: &Path, rows: &[[&str; 12]]) {
    let c = rusqlite::Connection::open(path).unwrap();
    c.execute_batch(memscope_dump::sink::sqlite::CREATE_TABLE)
        .unwrap();
    c.execute_batch("PRAGMA journal_mode=WAL").unwrap();
    for r in rows {
        c.execute(
            "INSERT INTO memscope_dump VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12)",
            rusqlite::params_from_iter(r.iter()),
        )
        .unwrap();
    }
}

#[test]
fn a_wal_db_in_a_read_only_directory_is_analysed_and_nothing_is_left_next_to_it() {
    let d = tempfile::tempdir().unwrap();
    let ro = d.path().join("ro");
    std::fs::create_dir(&ro).unwrap();
    let db = ro.join("w.db");
    wal_db(
        &db,
        &[
            [
                "1",
                "MALLOC",
                "PTA",
                "N/A",
                "100",
                "7",
                "7",
                "0",
                "0x10",
                r#"{"addr":"0x10","size":"1024","owner":"PTA@w"}"#,
                "",
                "",
            ],
            [
                "2",
                "FREE",
                "PTA",
                "N/A",
                "200",
                "7",
                "7",
                "0",
                "0x10",
                r#"{"addr":"0x10","size":"1024"}"#,
                "",
                "",
            ],
        ],
    );
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o555)).unwrap();
    // root writes anywhere: read as nobody then (setpriv, util-linux)
    let mut cmd = if nix_is_root() {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(memscope_bin());
        c
    } else {
        Command::new(memscope_bin())
    };
    let o = cmd
        .args(["analyze", "decompose"])
        .arg(&db)
        .arg("-o")
        .arg(d.path().join("dec"))
        .current_dir("/")
        .output()
        .unwrap_or_else(|e| panic!("run setpriv (util-linux) to test as nobody: {e}"));
    // nobody cannot write the -o folder, but the read itself must have worked
    assert!(
        stdout(&o).contains("Device 0 PTA: peak 0.000977 MiB"),
        "{}{}",
        stdout(&o),
        stderr(&o)
    );
    let left: Vec<_> = std::fs::read_dir(&ro)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(left, vec![std::ffi::OsString::from("w.db")]);
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn nix_is_root() -> bool {
    // `id -u` rather than geteuid(): this crate forbids unsafe code
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

#[test]
fn the_annotated_db_copy_keeps_a_text_form_attr_and_db_paths_are_not_uris() {
    let d = tempfile::tempdir().unwrap();
    // file:x.db is a file called so (a URI would open x.db, which does not exist)
    let db = d.path().join("file:x.db");
    let m = |id: &str, ev: &str, et: &str, name: &str, ptr: &str, attr: &str| -> [String; 12] {
        [
            id,
            ev,
            et,
            name,
            &format!("{}0", id),
            "9",
            "9",
            "0",
            ptr,
            attr,
            "",
            "",
        ]
        .map(str::to_owned)
    };
    // the block is idle between its uses in ops 3 and 8 (idle threshold 2)
    let mut rows = vec![m("1", "OP_LAUNCH", "ATEN_START", "op1", "N/A", "")];
    rows.push(m(
        "2",
        "MALLOC",
        "PTA",
        "N/A",
        "0x2000",
        "{allocation_id:2,addr:0x2000,size:200,owner:PTA@x}",
    ));
    rows.push(m("3", "OP_LAUNCH", "ATEN_END", "op1", "N/A", ""));
    for (i, op) in (2..9).enumerate() {
        let base = 4 + 3 * i as u64;
        rows.push(m(
            &base.to_string(),
            "OP_LAUNCH",
            "ATEN_START",
            &format!("op{op}"),
            "N/A",
            "",
        ));
        let access = if op == 3 || op == 8 { "ACCESS" } else { "MSTX" };
        let (et, attr) = if access == "ACCESS" {
            ("READ", "{allocation_id:2,addr:0x2000,size:200,type:PTA}")
        } else {
            ("Mark", "")
        };
        rows.push(m(
            &(base + 1).to_string(),
            access,
            et,
            "x",
            if access == "ACCESS" { "0x2000" } else { "N/A" },
            attr,
        ));
        rows.push(m(
            &(base + 2).to_string(),
            "OP_LAUNCH",
            "ATEN_END",
            &format!("op{op}"),
            "N/A",
            "",
        ));
    }
    rows.push(m(
        "40",
        "FREE",
        "PTA",
        "N/A",
        "0x2000",
        "{allocation_id:2,addr:0x2000,size:200}",
    ));
    {
        let c = rusqlite::Connection::open(&db).unwrap();
        c.execute_batch(memscope_dump::sink::sqlite::CREATE_TABLE)
            .unwrap();
        for r in &rows {
            c.execute(
                "INSERT INTO memscope_dump VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12)",
                rusqlite::params_from_iter(r.iter()),
            )
            .unwrap();
        }
    }
    let o = memscope_in(
        d.path(),
        &[
            "analyze",
            "inefficient",
            "file:x.db",
            "--idle-threshold",
            "2",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("1 MALLOC row(s) annotated"),
        "{}",
        stdout(&o)
    );
    let copy = d.path().join("file:x_inefficient.db");
    let attr: String =
        rusqlite::Connection::open_with_flags(&copy, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap()
            .query_row(
                "SELECT \"Attr\" FROM memscope_dump WHERE \"ID\" = 2",
                [],
                |r| r.get(0),
            )
            .unwrap();
    assert!(
        attr.starts_with("{allocation_id:2,addr:0x2000,size:200,owner:PTA@x,inefficient:"),
        "{attr}"
    );
    assert!(attr.contains("temporary_idleness"), "{attr}");
}

#[test]
fn control_characters_from_dump_cells_are_escaped_on_the_terminal() {
    let d = tempfile::tempdir().unwrap();
    let e = write(
        d.path(),
        "e.csv",
        "1,\u{1b}]0;PWNED\u{7},PTA,N/A,1,1,1,0,0x10,\"{size:1}\",,\n",
    );
    let o = memscope_in(d.path(), &["analyze", "leaks", e.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        !o.stderr.contains(&0x1b) && !o.stderr.contains(&7),
        "{:?}",
        stderr(&o)
    );
    assert!(
        stderr(&o).contains("\\u{1b}]0;PWNED\\u{7}"),
        "{}",
        stderr(&o)
    );
    // report lines: an owner with a colour sequence in the decompose table
    let r = write(
        d.path(),
        "r.csv",
        "1,MALLOC,PTA,N/A,1,1,1,0,0x10,\"{addr:0x10,size:1048576,owner:PTA@\u{1b}[31mred}\",,\n",
    );
    let o = memscope_in(
        d.path(),
        &["analyze", "decompose", r.to_str().unwrap(), "-o", "dec"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(!o.stdout.contains(&0x1b), "{:?}", stdout(&o));
    assert!(stdout(&o).contains("PTA@\\u{1b}[31mred"), "{}", stdout(&o));
}

#[test]
fn csv_reports_neutralise_formulas() {
    let d = tempfile::tempdir().unwrap();
    let base = op_dump(d.path(), "base.csv", "aten::t");
    let evil = op_dump(d.path(), "evil.csv", "=HYPERLINK(\"http://x\",\"y\")");
    let o = memscope_in(
        d.path(),
        &[
            "compare",
            base.to_str().unwrap(),
            evil.to_str().unwrap(),
            "-o",
            "out",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let mut text = String::new();
    walk(&d.path().join("out"), &mut |p| {
        text = std::fs::read_to_string(p).unwrap()
    });
    assert!(
        text.contains("\"'=HYPERLINK(\"\"http://x\"\",\"\"y\"\")\""),
        "{text}"
    );
    assert!(
        !text.contains(",=HYPERLINK") && !text.contains(",\"=HYPERLINK"),
        "{text}"
    );
    // numbers stay numbers: the Diff of the compare-only row is negative
    assert!(text.contains(",-512") || text.contains(",512"), "{text}");
    // decompose: an owner from the dump
    let r = write(
        d.path(),
        "o.csv",
        "1,MALLOC,PTA,N/A,1,1,1,0,0x10,\"{addr:0x10,size:8,owner:=cmd|' /C calc'!A0}\",,\n",
    );
    let o = memscope_in(
        d.path(),
        &["analyze", "decompose", r.to_str().unwrap(), "-o", "dec"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let mut text = String::new();
    walk(&d.path().join("dec"), &mut |p| {
        text = std::fs::read_to_string(p).unwrap()
    });
    assert!(text.contains(",'=cmd|"), "{text}");
}

#[test]
fn header_only_dumps_say_no_rows_and_notes_and_missing_marks_are_reported() {
    let d = tempfile::tempdir().unwrap();
    let h = write(d.path(), "h.csv", "");
    for cmd in ["leaks", "gap"] {
        let o = memscope_in(d.path(), &["analyze", cmd, h.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        assert!(
            stdout(&o).contains("h.csv: no rows (the file holds a header only)"),
            "{cmd}: {}",
            stdout(&o)
        );
    }
    // END rows without a START are noted, as STARTs without an END are
    let a = op_dump(d.path(), "a.csv", "aten::t");
    let b = write(
        d.path(),
        "b.csv",
        "1,OP_LAUNCH,ATEN_START,aten::t,100,7,7,0,N/A,,,\n\
         2,OP_LAUNCH,ATEN_END,aten::t,200,7,7,0,N/A,,,\n\
         3,OP_LAUNCH,ATEN_END,aten::orphan,300,7,7,0,N/A,,,\n",
    );
    let o = memscope_in(
        d.path(),
        &[
            "compare",
            a.to_str().unwrap(),
            b.to_str().unwrap(),
            "-o",
            "out",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("compare: 1 op END row(s) without a matching START were left out"),
        "{}",
        stderr(&o)
    );
    // --mstx-info with no such marks: an error, not exit 0
    let o = memscope_in(
        d.path(),
        &[
            "analyze",
            "leaks",
            a.to_str().unwrap(),
            "--mstx-info",
            "nope",
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("no device has the 3 msTX marks named \"nope\""),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_torn_last_row_is_reported_and_the_rows_before_it_analysed() {
    let d = tempfile::tempdir().unwrap();
    let t = write(
        d.path(),
        "t.csv",
        "1,MALLOC,PTA,N/A,100,7,7,0,0x0000000000000010,\"{addr:0x10,size:1048576,owner:PTA@w}\",,\n\
         2,MALLOC,PTA,N/A,200,7,7,0,0x0000000000000020,\"{addr:0x20,size:104",
    );
    let o = memscope_in(
        d.path(),
        &["analyze", "decompose", t.to_str().unwrap(), "-o", "dec"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("t.csv:3: the last row is incomplete (the writer stopped mid-row?); it was left out and the 1 row(s) before it were read"),
        "{}",
        stderr(&o)
    );
    assert!(stdout(&o).contains("peak 1.000000 MiB"), "{}", stdout(&o));
}

#[test]
fn a_closed_stdout_does_not_turn_an_analysis_into_a_panic() {
    let d = tempfile::tempdir().unwrap();
    let a = op_dump(d.path(), "a.csv", "aten::t");
    let mut child = Command::new(memscope_bin())
        .args(["analyze", "decompose", a.to_str().unwrap(), "-o"])
        .arg(d.path().join("dec"))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    assert_eq!(child.wait().unwrap().code(), Some(0));
}

#[test]
fn report_force_never_replaces_a_fifo_and_a_path_with_a_newline_gets_a_one_line_error() {
    let d = tempfile::tempdir().unwrap();
    let a = op_dump(d.path(), "a.csv", "aten::t");
    let fifo = d.path().join("fifo.html");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let p = |p: &Path| p.to_str().unwrap().to_owned();
    let o = memscope_in(d.path(), &["report", &p(&a), "-o", &p(&fifo), "--force"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("a FIFO, socket or device"),
        "{}",
        stderr(&o)
    );
    assert_eq!(stderr(&o).lines().count(), 1, "{}", stderr(&o));
    assert!(!std::fs::symlink_metadata(&fifo).unwrap().is_file());
    for args in [
        &["report", "no\nsuch", "-o", "x.html"][..],
        &["diff", "no\nsuch", "a\nb"][..],
        &["recover", "no\nsuch"][..],
    ] {
        let o = memscope_in(d.path(), args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert_eq!(stderr(&o).lines().count(), 1, "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains("no\\nsuch"), "{args:?}: {}", stderr(&o));
    }
}

#[test]
fn header_only_dumps_export_nothing_and_a_garbage_db_is_named_as_no_database() {
    let d = tempfile::tempdir().unwrap();
    let h = write(d.path(), "h.csv", "");
    let o = memscope_in(d.path(), &["analyze", "fragmentation", "h.csv"]);
    assert!(
        stdout(&o).contains("h.csv: no events (its dumps hold no rows)"),
        "{}{}",
        stdout(&o),
        stderr(&o)
    );
    for to in ["perfetto", "parquet"] {
        let o = memscope_in(d.path(), &["export", "--to", to, "h.csv", "-o", "t.out"]);
        assert_eq!(o.status.code(), Some(2), "{to}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("h.csv: no events") && stderr(&o).contains("no file written"),
            "{to}: {}",
            stderr(&o)
        );
        assert!(!d.path().join("t.out").exists(), "{to}: nothing written");
    }
    let _ = h;
    // the dump formats read captures: a failed export leaves no empty output directory
    for to in ["csv", "db"] {
        let o = memscope_in(
            d.path(),
            &["export", "--to", to, "h.csv", "-o", "dumps.out"],
        );
        assert_eq!(o.status.code(), Some(2), "{to}: {}", stderr(&o));
        assert!(!d.path().join("dumps.out").exists(), "{to}: nothing left");
    }
    std::fs::write(d.path().join("g.db"), b"\x89 not sqlite at all\n1,2,3\n").unwrap();
    let o = memscope_in(d.path(), &["analyze", "leaks", "g.db"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("g.db") && stderr(&o).contains("not a SQLite database"),
        "{}",
        stderr(&o)
    );
    assert_eq!(stderr(&o).lines().count(), 1, "one line: {}", stderr(&o));
}
