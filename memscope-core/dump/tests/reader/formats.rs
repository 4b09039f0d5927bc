//! Dump reader: both CSV formats, multi-line records, Attr values with commas and colons, both
//! spellings, errors with file and line, ID order through the external sort, `.db` input.

use std::path::{Path, PathBuf};

use memscope_core::event::{Attrs, Device, EventKind, EventType, Inefficiency};
use memscope_dump::reader::{read_all, read_csv_str, DumpFile, Order, ReadOptions, SortOptions};

const HEADER: &str =
    "ID,Event,Event Type,Name,Timestamp(ns),Process Id,Thread Id,Device Id,Ptr,Attr,Call Stack(Python),Call Stack(C)";

fn write(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, format!("{HEADER}\n{body}")).unwrap();
    p
}

#[test]
fn records_spanning_lines_and_attr_values_with_commas_and_colons_are_read() {
    let text = format!(
        "{HEADER}\n\
         1,ACCESS,READ,aten::add,100,5,6,0,0x0000000000001000,\"{{allocation_id:3,addr:0x1000,size:24,type:PTA,dtype:torch.float32,shape:torch.Size([2, 3])}}\",\"a.py(1): f\nb.py(7): g\n\",\"libc.so(x+0x1)\n\"\n\
         2,MALLOC,MINDSPORE,N/A,200,5,6,1,0x0000000000002000,\"{{allocation_id:4,addr:0x2000,size:8,used:8,total:16,owner:MINDSPORE@a:b,inefficient_type:early_allocation,late_deallocation}}\",,\n\
         3,MSTX,Mark,\"my, message\",300,5,6,0,N/A,,,\n\
         4,KERNEL_LAUNCH,KERNEL_START,k,400,N/A,N/A,N/A,N/A,\"{{path:0_1/0/a:b/before}}\",,\n"
    );
    let evs = read_csv_str("t.csv", &text).unwrap();
    assert_eq!(evs.len(), 4);
    assert_eq!(evs[0].py_stack.as_deref(), Some("a.py(1): f\nb.py(7): g\n"));
    match &evs[0].attrs {
        Attrs::Access(a) => {
            assert_eq!(a.shape.as_deref(), Some("torch.Size([2, 3])"));
            assert_eq!(a.pool.as_deref(), Some("PTA"));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(evs[1].event_type, EventType::MindSpore);
    let m = evs[1].memory().unwrap();
    assert_eq!(
        m.inefficient,
        vec![
            Inefficiency::EarlyAllocation,
            Inefficiency::LateDeallocation
        ]
    );
    assert_eq!(m.owner.as_ref().unwrap().to_string(), "MindSpore@a:b");
    assert_eq!(evs[1].device, Device::Npu(1));
    assert_eq!(evs[2].name.as_deref(), Some("my, message"));
    assert_eq!((evs[3].pid, evs[3].device), (None, Device::NotApplicable));
}

#[test]
fn malformed_cells_name_the_file_and_the_line_where_the_record_starts() {
    let t = tempfile::tempdir().unwrap();
    // the first record spans lines 2-3, so the second starts on line 4
    let p = write(
        t.path(),
        "bad.csv",
        "5,MSTX,Mark,m,10,1,1,0,N/A,,\"x\ny\",\n2,MALLOC,PTA,N/A,abc,1,1,0,0x10,\"{size:1}\",,\n",
    );
    let e = read_all(&p, Order::File).unwrap_err().to_string();
    assert_eq!(e, format!("{}:4: bad Timestamp(ns) \"abc\"", p.display()));
    // IDs out of order (5, 2): the sort path reports the same line
    let e = read_all(&p, Order::ById).unwrap_err().to_string();
    assert_eq!(e, format!("{}:4: bad Timestamp(ns) \"abc\"", p.display()));
    let p = write(t.path(), "cells.csv", "1,MSTX,Mark,a,b,10,1,1,0,N/A,,,\n");
    let e = read_all(&p, Order::File).unwrap_err().to_string();
    assert!(
        e.starts_with(&format!("{}:2: expected 12 cells, found 13", p.display())),
        "{e}"
    );
    let p = t.path().join("nohdr.csv");
    std::fs::write(&p, "a,b,c\n").unwrap();
    let e = read_all(&p, Order::File).unwrap_err().to_string();
    assert!(
        e.starts_with(&format!("{}:1: not a memscope dump", p.display())),
        "{e}"
    );
    let e = DumpFile::open(&t.path().join("missing.csv"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("missing.csv"), "{e}");
}

#[test]
fn rows_in_any_order_come_out_by_process_and_id_even_when_runs_spill() {
    let t = tempfile::tempdir().unwrap();
    let mut body = String::new();
    // 500 rows, IDs written in a scrambled order, two processes
    let mut ids: Vec<u64> = (0..500).collect();
    for i in 0..ids.len() {
        let j = (i * 7919) % ids.len();
        ids.swap(i, j);
    }
    for id in &ids {
        let pid = if id % 2 == 0 { 10 } else { 20 };
        body.push_str(&format!(
            "{id},MSTX,Mark,\"m\",{},{pid},1,0,N/A,,\"s\nt\",\n",
            1000 + id
        ));
    }
    let p = write(t.path(), "scrambled.csv", &body);
    let mut opts = ReadOptions {
        sort: SortOptions {
            run_bytes: 1024,
            temp_dir: Some(t.path().to_owned()),
        },
        ..ReadOptions::default()
    };
    let mut got = Vec::new();
    let calls = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let c2 = calls.clone();
    opts.progress = Some(Box::new(move |done, total| {
        assert!(done <= total);
        c2.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }));
    let stats = DumpFile::open(&p)
        .unwrap()
        .for_each(Order::ById, &mut opts, &mut |e| {
            got.push((e.pid.unwrap(), e.id));
            Ok(())
        })
        .unwrap();
    assert_eq!(stats.rows, 500);
    assert!(calls.load(std::sync::atomic::Ordering::Relaxed) > 0);
    let want: Vec<(u32, u64)> = (0..500)
        .filter(|i| i % 2 == 0)
        .map(|i| (10, i))
        .chain((0..500).filter(|i| i % 2 == 1).map(|i| (20, i)))
        .collect();
    assert_eq!(got, want);
    // spill files are anonymous: nothing left in the temp dir but the input
    assert_eq!(std::fs::read_dir(t.path()).unwrap().count(), 1);
}

#[test]
fn db_dumps_read_in_both_orders_with_json_attrs_and_quoted_mstx_names() {
    let t = tempfile::tempdir().unwrap();
    let db = t.path().join("d.db");
    let c = rusqlite::Connection::open(&db).unwrap();
    c.execute_batch(
        r#"CREATE TABLE memscope_dump ("ID" INTEGER, "Event" TEXT, "Event Type" TEXT, "Name" TEXT, "Timestamp(ns)" INTEGER,
        "Process Id" INTEGER, "Thread Id" INTEGER, "Device Id" TEXT, "Ptr" TEXT, "Attr" TEXT,
        "Call Stack(Python)" TEXT, "Call Stack(C)" TEXT);
        INSERT INTO memscope_dump VALUES (5,'FREE','PTA','N/A',1764753084426805610,3,3,'0','0x000012c041400000','{"allocation_id":"4","addr":"0x000012c041400000","size":"16","used":"0"}','','');
        INSERT INTO memscope_dump VALUES (2,'MSTX','Range_start','"step start"',1764753084426805600,3,3,'0','N/A','{}','','');
        INSERT INTO memscope_dump VALUES (4,'MALLOC','PTA','N/A',1764753084426805605,3,3,'0','0x000012c041400000','{"allocation_id":"4","addr":"0x000012c041400000","size":"16","used":"16","shape":"a, b"}','','');"#,
    )
    .unwrap();
    drop(c);
    assert_eq!(
        DumpFile::open(&db).unwrap().format(),
        memscope_dump::reader::DumpFormat::Db
    );
    let by_id = read_all(&db, Order::ById).unwrap();
    assert_eq!(
        by_id.iter().map(|e| e.id).collect::<Vec<_>>(),
        vec![2, 4, 5]
    );
    assert_eq!(by_id[0].name.as_deref(), Some("step start"));
    assert_eq!(by_id[1].kind, EventKind::Malloc);
    let m = by_id[1].memory().unwrap();
    assert_eq!((m.size, m.used, m.allocation_id), (16, Some(16), 4));
    assert_eq!(m.extra, vec![("shape".to_owned(), "a, b".to_owned())]);
    let in_file = read_all(&db, Order::File).unwrap();
    assert_eq!(
        in_file.iter().map(|e| e.id).collect::<Vec<_>>(),
        vec![5, 2, 4]
    );
}

#[test]
fn a_header_in_another_column_order_is_mapped_by_name() {
    let text = "Event,ID,Event Type,Name,Timestamp(ns),Process Id,Thread Id,Device Id,Ptr,Attr\nMALLOC,9,HAL,N/A,5,1,1,0,0x10,\"{addr:0x10,size:3}\"\n";
    let evs = read_csv_str("x.csv", text).unwrap();
    assert_eq!(
        (
            evs[0].id,
            evs[0].memory().unwrap().size,
            evs[0].py_stack.clone()
        ),
        (9, 3, None)
    );
}

#[test]
fn a_file_already_in_id_order_is_streamed_with_the_same_events() {
    let t = tempfile::tempdir().unwrap();
    let mut body = String::new();
    for id in 0..300u64 {
        body.push_str(&format!(
            "{id},MSTX,Mark,\"m{id}\",{},7,1,0,N/A,,,\n",
            1000 + id
        ));
    }
    let p = write(t.path(), "sorted.csv", &body);
    let mut opts = ReadOptions {
        // a run size this small would spill if the file went through the sort
        sort: SortOptions {
            run_bytes: 64,
            temp_dir: Some(t.path().join("no-such-dir")),
        },
        ..ReadOptions::default()
    };
    let mut got = Vec::new();
    DumpFile::open(&p)
        .unwrap()
        .for_each(Order::ById, &mut opts, &mut |e| {
            got.push(e);
            Ok(())
        })
        .unwrap();
    assert_eq!(got, read_all(&p, Order::File).unwrap());
}
