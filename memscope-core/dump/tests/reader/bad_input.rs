//! Issue 17: hostile and broken dump input (report `bad-input-2026-12-01.md`): numbers that do
//! not parse and sizes ≥ 2^63 are `file:line` errors (M6, L2); reads are bounded by what is
//! read (H2); a torn last row is left out with its line reported; control characters are
//! escaped in messages (L3).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use memscope_dump::reader::{read_all, DumpFile, Order, ReadOptions, SortOptions};

const HEADER: &str =
    "ID,Event,Event Type,Name,Timestamp(ns),Process Id,Thread Id,Device Id,Ptr,Attr,Call Stack(Python),Call Stack(C)";

fn write(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, format!("{HEADER}\n{body}")).unwrap();
    p
}

/// A two-row dump (MALLOC then FREE) whose MALLOC Attr is `attr` (a CSV cell, quoted here).
fn with_malloc_attr(dir: &Path, attr: &str) -> PathBuf {
    let cell = attr.replace('"', "\"\"");
    write(
        dir,
        "a.csv",
        &format!(
            "1,MALLOC,PTA,N/A,100,7,7,0,0x0000000000001000,\"{cell}\",,\n\
             2,FREE,PTA,N/A,200,7,7,0,0x0000000000001000,\"{{addr:0x1000,size:16384}}\",,\n"
        ),
    )
}

#[test]
fn attr_numbers_that_do_not_parse_are_file_line_errors() {
    let t = tempfile::tempdir().unwrap();
    let deep = format!(
        "{{\"size\":{}1{}}}",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    for (attr, needle) in [
        ("{addr:0x1000,size:abc}", "bad Attr size \"abc\""),
        ("{addr:0x1000,size:1.5e4}", "bad Attr size \"1.5e4\""),
        (
            "{addr:0x1000,size:99999999999999999999999}",
            "bad Attr size \"99999999999999999999999\"",
        ),
        (
            "{addr:0x1000,size:\"16384\"}",
            "bad Attr size \"\\\"16384\\\"\"",
        ),
        ("{addr:0x1000,size:{16384}}", "bad Attr size \"{16384}\""),
        (
            "{addr:0x1000,size:16\u{0}384}",
            "bad Attr size \"16\\0384\"",
        ),
        ("{addr:0xZZ,size:1}", "bad Attr addr \"0xZZ\""),
        ("{addr:0x1000,size:1,used:x}", "bad Attr used \"x\""),
        (
            "{allocation_id:-1,addr:0x1000,size:1}",
            "bad Attr allocation_id",
        ),
        ("{addr:0x1000,size:1,MID:-2}", "bad Attr MID"),
        (
            deep.as_str(),
            "Attr is not valid JSON (recursion limit exceeded",
        ),
        ("{\"size\":", "Attr is not valid JSON"),
    ] {
        let p = with_malloc_attr(t.path(), attr);
        for order in [Order::File, Order::ById] {
            let e = read_all(&p, order).unwrap_err().to_string();
            assert!(
                e.starts_with(&format!("{}:2: ", p.display())),
                "{attr:.40}: {e}"
            );
            assert!(e.contains(needle), "{attr:.40}: {needle} not in {e}");
        }
    }
    // what msMemScope writes still reads: 2025 negative FREE sizes, MID:-1, hex, spaces
    let p = with_malloc_attr(t.path(), "{addr:20615843020800,size: 16384 ,owner:,MID:-1}");
    let evs = read_all(&p, Order::File).unwrap();
    assert_eq!(evs[0].memory().unwrap().size, 16384);
    assert_eq!(evs[0].memory().unwrap().module_id, None);
}

#[test]
fn sizes_of_2_to_the_63_or_more_are_errors() {
    let t = tempfile::tempdir().unwrap();
    for size in [
        "18446744073709551615",
        "-9223372036854775808",
        "9223372036854775808",
        "0x8000000000000000",
    ] {
        let p = with_malloc_attr(t.path(), &format!("{{addr:0x1000,size:{size}}}"));
        let e = read_all(&p, Order::ById).unwrap_err().to_string();
        assert!(e.contains("2^63 or more"), "{size}: {e}");
        assert!(e.starts_with(&format!("{}:2: ", p.display())), "{e}");
    }
    let p = with_malloc_attr(t.path(), "{addr:0x1000,size:9223372036854775807}");
    assert_eq!(
        read_all(&p, Order::File).unwrap()[0].memory().unwrap().size,
        i64::MAX as u64
    );
}

#[test]
fn reads_of_size_0_files_with_endless_content_are_bounded() {
    // /proc/self/pagemap: st_size 0, content as large as the address space
    let start = Instant::now();
    let e = read_all(Path::new("/proc/self/pagemap"), Order::ById)
        .unwrap_err()
        .to_string();
    assert!(e.contains("the header is longer than 1 MiB"), "{e}");
    assert!(start.elapsed() < Duration::from_secs(20));
}

#[test]
fn a_sparse_gigabyte_without_newlines_fails_at_the_header_bound() {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("z.csv");
    std::fs::File::create(&p).unwrap().set_len(1 << 30).unwrap();
    let start = Instant::now();
    let e = read_all(&p, Order::ById).unwrap_err().to_string();
    assert_eq!(
        e,
        format!(
            "{}:1: the header is longer than 1 MiB (not a dump, or a quoted cell that never ends)",
            p.display()
        )
    );
    assert!(start.elapsed() < Duration::from_secs(20));
    // a header, then a gigabyte of NULs: the record bound trips after 64 MiB
    let p = t.path().join("h.csv");
    std::fs::write(&p, format!("{HEADER}\n")).unwrap();
    let f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
    f.set_len(1 << 30).unwrap();
    let e = read_all(&p, Order::File).unwrap_err().to_string();
    assert!(
        e.starts_with(&format!(
            "{}:2: a record is longer than 64 MiB",
            p.display()
        )),
        "{e}"
    );
}

#[test]
fn a_torn_last_row_is_left_out_and_the_rows_before_it_are_read() {
    let t = tempfile::tempdir().unwrap();
    let rows = "1,MSTX,Mark,a,100,7,7,0,N/A,,,\n\
                3,MSTX,Mark,c,300,7,7,0,N/A,,,\n\
                2,MSTX,Mark,b,200,7,7,0,N/A,,,\n";
    for (tear, what) in [
        ("4,MALLOC,PTA,N/A,17460", "too few cells"),
        (
            "4,MALLOC,PTA,N/A,400,7,7,0,0x10,\"{addr:0x10,siz",
            "inside a quoted Attr",
        ),
        ("4,MALLOC,PTA,N/A,400,7,7,0,0x1", "in the Ptr"),
        (
            "4,MALLOC,PTA,N/A,400,7,7,0,0x10,\"{addr:0x10,size:1}\",,\"a.py(1)",
            "in the last cell",
        ),
        ("4,MALLOC,PTA,N/A,40x", "inside a number"),
    ] {
        let p = write(t.path(), "torn.csv", &format!("{rows}{tear}"));
        // streamed in file order, through the sort (rows out of order), and restartable
        // (and by timestamp, `--order time`: sorted, and restartable)
        for (order, restartable) in [
            (Order::File, false),
            (Order::ById, false),
            (Order::ByTime, false),
            (Order::ById, true),
            (Order::ByTime, true),
        ] {
            // a restart (rows found out of order) drops what was delivered before it
            let n = std::cell::Cell::new(0u64);
            let file = DumpFile::open(&p).unwrap();
            let mut opts = ReadOptions::default();
            let mut count = |_| {
                n.set(n.get() + 1);
                Ok(())
            };
            let stats = if restartable {
                file.for_each_ordered_restartable(order, &mut opts, &mut count, &mut || n.set(0))
            } else {
                file.for_each(order, &mut opts, &mut count)
            }
            .unwrap_or_else(|e| panic!("{what}: {e}"));
            let n = n.get();
            if what == "in the last cell" {
                // 12 cells that parse: only the stack is short, and it is read
                assert_eq!((n, stats.torn_last_row), (4, None), "{what}");
                continue;
            }
            assert_eq!(n, 3, "{what}");
            assert_eq!(stats.torn_last_row, Some(5), "{what}");
            let w = stats.torn_warning("torn.csv").unwrap();
            assert!(
                w.starts_with("torn.csv:5: the last row is incomplete"),
                "{w}"
            );
        }
    }
    // a bad row that is not the last, or the last row with its line end, is still an error
    let p = write(
        t.path(),
        "bad.csv",
        &format!("4,MALLOC,PTA,N/A,40x\n{rows}"),
    );
    assert!(read_all(&p, Order::File).is_err());
    let p = write(
        t.path(),
        "bad2.csv",
        &format!("{rows}4,MALLOC,PTA,N/A,17460\n"),
    );
    let e = read_all(&p, Order::File).unwrap_err().to_string();
    assert!(e.contains(":5: expected 12 cells, found 5"), "{e}");
    // a whole last row without a line end (hand-made files) is read
    let p = write(
        t.path(),
        "whole.csv",
        &format!("{rows}4,MSTX,Mark,d,400,7,7,0,N/A,,,"),
    );
    assert_eq!(read_all(&p, Order::ById).unwrap().len(), 4);
}

#[test]
fn order_time_sorts_in_bounded_spilled_runs_by_timestamp_then_id() {
    let t = tempfile::tempdir().unwrap();
    // IDs ascending, timestamps descending in pairs: by time the pairs reverse, IDs break ties
    let mut body = String::new();
    for i in 0..20_000u32 {
        body.push_str(&format!(
            "{i},MSTX,Mark,,{},1,1,0,N/A,,,\n",
            100_000 - i / 2
        ));
    }
    let p = write(t.path(), "t.csv", &body);
    let mut opts = ReadOptions {
        sort: SortOptions {
            run_bytes: 64 << 10,
            temp_dir: Some(t.path().to_path_buf()),
        },
        ..ReadOptions::default()
    };
    let mut got = Vec::new();
    let stats = DumpFile::open(&p)
        .unwrap()
        .for_each(Order::ByTime, &mut opts, &mut |e| {
            got.push((e.ts_ns, e.id));
            Ok(())
        })
        .unwrap();
    let mut want: Vec<(u64, u64)> = (0..20_000u64).map(|i| (100_000 - i / 2, i)).collect();
    want.sort();
    assert_eq!(got, want);
    assert_eq!((stats.rows, stats.torn_last_row), (20_000, None));
    let left: Vec<_> = std::fs::read_dir(t.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(left, vec![std::ffi::OsString::from("t.csv")]);
}

#[test]
fn spilled_sorts_count_their_index_and_stay_correct_for_tiny_rows() {
    let t = tempfile::tempdir().unwrap();
    let mut body = String::new();
    for i in (0..20_000u32).rev() {
        body.push_str(&format!("{i},MSTX,Mark,,{i},1,1,0,N/A,,,\n"));
    }
    let p = write(t.path(), "r.csv", &body);
    let mut opts = ReadOptions {
        sort: SortOptions {
            run_bytes: 64 << 10,
            temp_dir: Some(t.path().to_path_buf()),
        },
        ..ReadOptions::default()
    };
    let mut ids = Vec::new();
    DumpFile::open(&p)
        .unwrap()
        .for_each(Order::ById, &mut opts, &mut |e| {
            ids.push(e.id);
            Ok(())
        })
        .unwrap();
    assert_eq!(ids, (0..20_000u64).collect::<Vec<_>>());
    // spill files have no name: nothing is left in (or ever listed in) the temporary dir
    let left: Vec<_> = std::fs::read_dir(t.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(left, vec![std::ffi::OsString::from("r.csv")]);
    // an unusable temporary directory is named as the sort's
    opts.sort.temp_dir = Some(PathBuf::from("/nonexistent"));
    let e = DumpFile::open(&p)
        .unwrap()
        .for_each(Order::ById, &mut opts, &mut |_| Ok(()))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("needs temporary files in /nonexistent (the temporary directory: set TMPDIR"),
        "{e}"
    );
}

#[test]
fn control_characters_in_cells_are_escaped_in_messages() {
    let t = tempfile::tempdir().unwrap();
    let p = write(
        t.path(),
        "e.csv",
        "1,\u{1b}]0;PWNED\u{7},PTA,N/A,1,1,1,0,0x10,\"{size:1}\",,\n",
    );
    let e = read_all(&p, Order::File).unwrap_err().to_string();
    assert!(!e.chars().any(|c| c.is_control()), "{e:?}");
    assert!(e.contains(r#"unknown Event "\u{1b}]0;PWNED\u{7}""#), "{e}");
    let p = write(t.path(), "n.csv", "1,MAL\u{0}LOC,PTA,N/A,1,1,1,0,0x10,,,\n");
    let e = read_all(&p, Order::File).unwrap_err().to_string();
    assert!(e.contains(r#"unknown Event "MAL\0LOC""#), "{e}");
    // a file name with a newline stays on one line
    let p = write(t.path(), "a\nb.csv", "1,X,PTA,N/A,1,1,1,0,0x10,,,\n");
    let e = read_all(&p, Order::File).unwrap_err().to_string();
    assert!(!e.contains('\n') && e.contains("a\\nb.csv"), "{e}");
}

/// Found by `benches/fuzz` (fuzz_csv, crash-555d87543e1e2002): a record that is valid UTF-8
/// as a whole, with a cell boundary inside a character (`\xef,\xbb\xbf`), panicked when the
/// cells were sliced.
#[test]
fn a_cell_boundary_inside_a_utf8_character_is_read_per_cell() {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("crash.csv");
    std::fs::write(
        &p,
        b"\xef,\xbb\xbfID,Event,Event Type,Name,Timestamp(us),100000000000000000Process Id,Thread Id,Device Id,Ptr,Attr\r\n1,MSTX,Mark,m,1,1,1,",
    )
    .unwrap();
    for order in [Order::File, Order::ById] {
        // the header's cells are replaced per cell: no ID column, a clean error
        let e = read_all(&p, order).unwrap_err().to_string();
        assert!(
            e.contains(":1: not a memscope dump: header has no id column"),
            "{e}"
        );
    }
    // the same split between the two stack cells of a row, read directly and through the
    // sort's blobs (rows out of order): each half is U+FFFD, the rest of the row as written
    let p = t.path().join("row.csv");
    let mut b = format!("{HEADER}\n2,MSTX,Mark,b,2,1,1,0,N/A,,,\n").into_bytes();
    b.extend_from_slice(b"1,MSTX,Mark,a,1,1,1,0,N/A,,\xc3,\xa9\n");
    std::fs::write(&p, &b).unwrap();
    for order in [Order::File, Order::ById] {
        let evs = read_all(&p, order).unwrap();
        let e = evs.iter().find(|e| e.id == 1).unwrap();
        assert_eq!(e.py_stack.as_deref(), Some("\u{fffd}"), "{order:?}");
        assert_eq!(e.c_stack.as_deref(), Some("\u{fffd}"), "{order:?}");
        assert_eq!(e.name.as_deref(), Some("a"));
    }
}
