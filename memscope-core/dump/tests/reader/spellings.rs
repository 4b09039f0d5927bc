//! Issue 10 item 5: every reader path (CSV streamed in ID order, CSV through the external sort,
//! `.db` with JSON Attr cells; in ID and in time order) accepts msMemScope's spellings —
//! `MINDSPORE` (Event Type, ACCESS `type`, owner framework level), `inefficient_type`,
//! `workspace_ptr`/`workspace_size`, the 2025 `host` device, the code's SNAPSHOT keys — and yields
//! the seed's; writers keep the seed's.

use memscope_core::attr_text::format_attr;
use memscope_core::event::{Attrs, Device, Event, EventType, Inefficiency};
use memscope_core::snapshot::SEED_KEYS;
use memscope_dump::reader::{read_all, Order};

const HEADER: &str =
    "ID,Event,Event Type,Name,Timestamp(ns),Process Id,Thread Id,Device Id,Ptr,Attr,Call Stack(Python),Call Stack(C)";

/// (ID, Event, Event Type, Name, Device, Ptr, Attr as msMemScope writes it)
const ROWS: [(u64, &str, &str, &str, &str, &str, &str); 5] = [
    (1, "MALLOC", "MINDSPORE", "N/A", "0", "0x0000000000002000",
     "{allocation_id:1,addr:0x0000000000002000,size:64,used:64,total:128,owner:MINDSPORE@layer,inefficient_type:early_allocation,late_deallocation}"),
    (2, "ACCESS", "READ", "op", "0", "0x0000000000002000",
     "{allocation_id:1,addr:0x0000000000002000,size:64,type:MINDSPORE,dtype:torch.float16}"),
    (3, "OP_LAUNCH", "ATB_START", "Op", "0", "N/A",
     "{path:0_7/0/0_Op,workspace_ptr:0x7f00,workspace_size:4096}"),
    (4, "MALLOC", "HAL", "N/A", "host", "20615843020800",
     "{addr:20615843020800,size:16384,owner:,MID:7}"),
    (5, "SNAPSHOT", "SNAPSHOT", "OOM_Snapshot", "0", "N/A",
     "{reserved:1,max_reserved:2,allocated:1,max_allocated:1,total:8,free:4,device_rate:50.000000,reserved_rate:100.000000}"),
];

fn csv_line(r: &(u64, &str, &str, &str, &str, &str, &str)) -> String {
    format!(
        "{},{},{},{},{},7,7,{},{},\"{}\",,",
        r.0,
        r.1,
        r.2,
        r.3,
        1_000 + r.0,
        r.4,
        r.5,
        r.6
    )
}

/// The Attr text as msMemScope's `.db` holds it: a JSON object of strings.
fn json_attr(cell: &str) -> String {
    let m: serde_json::Map<String, serde_json::Value> = memscope_core::attr_text::parse_attr(cell)
        .into_iter()
        .map(|(k, v)| (k, serde_json::Value::String(v)))
        .collect();
    serde_json::Value::Object(m).to_string()
}

fn check(evs: &[Event], path: &str) {
    assert_eq!(evs.len(), 5, "{path}");
    assert_eq!(evs[0].event_type, EventType::MindSpore, "{path}");
    assert_eq!(evs[0].event_type.as_str(), "MindSpore");
    let m = evs[0].memory().unwrap();
    assert_eq!(
        m.owner.as_ref().map(ToString::to_string).as_deref(),
        Some("MindSpore@layer"),
        "{path}"
    );
    assert_eq!(
        m.inefficient,
        [
            Inefficiency::EarlyAllocation,
            Inefficiency::LateDeallocation
        ],
        "{path}"
    );
    assert_eq!(
        format_attr(&evs[0]),
        "{allocation_id:1,addr:0x0000000000002000,size:64,used:64,total:128,owner:MindSpore@layer,inefficient:early_allocation,late_deallocation}",
        "the seed's spellings are written back ({path})"
    );
    match &evs[1].attrs {
        Attrs::Access(a) => {
            assert_eq!(a.pool.as_deref(), Some("MindSpore"), "{path}");
            assert_eq!(a.allocation_id, Some(1), "{path}");
        }
        other => panic!("{path}: {other:?}"),
    }
    match &evs[2].attrs {
        Attrs::Launch(l) => {
            assert_eq!(
                (l.workspace_ptr, l.workspace_size),
                (Some(0x7f00), Some(4096)),
                "{path}"
            );
        }
        other => panic!("{path}: {other:?}"),
    }
    assert_eq!(
        format_attr(&evs[2]),
        "{path:0_7/0/0_Op,workspace ptr:0x7f00,workspace size:4096}"
    );
    assert_eq!(evs[3].device, Device::Cpu, "2025 `host` ({path})");
    assert_eq!(evs[3].memory().unwrap().module_id, Some(7));
    match &evs[4].attrs {
        Attrs::Pairs(p) => {
            let mut keys: Vec<&str> = p.iter().map(|(k, _)| k.as_str()).collect();
            keys.sort_unstable();
            let mut want = SEED_KEYS.to_vec();
            want.sort_unstable();
            assert_eq!(keys, want, "{path}");
            let get = |k: &str| p.iter().find(|(x, _)| x == k).map(|(_, v)| v.as_str());
            assert_eq!(get("peak_reserved"), Some("2"), "{path}");
            assert_eq!(get("device_utilization"), Some("50.000000"), "{path}");
        }
        other => panic!("{path}: {other:?}"),
    }
}

#[test]
fn readers_accept_msmemscope_spellings_on_every_path_and_give_the_seeds() {
    let t = tempfile::tempdir().unwrap();
    // CSV in ID order: streamed
    let sorted = t.path().join("sorted.csv");
    let lines: Vec<String> = ROWS.iter().map(csv_line).collect();
    std::fs::write(&sorted, format!("{HEADER}\n{}\n", lines.join("\n"))).unwrap();
    check(&read_all(&sorted, Order::ById).unwrap(), "csv streamed");
    check(
        &read_all(&sorted, Order::File).unwrap(),
        "csv in file order",
    );
    // CSV in msMemScope's row order (blocks written when they die): through the sort
    let shuffled = t.path().join("shuffled.csv");
    let rev: Vec<String> = lines.iter().rev().cloned().collect();
    std::fs::write(&shuffled, format!("{HEADER}\n{}\n", rev.join("\n"))).unwrap();
    check(&read_all(&shuffled, Order::ById).unwrap(), "csv sorted");
    // and by timestamp (`--order time`) through the same bounded sort
    check(
        &read_all(&shuffled, Order::ByTime).unwrap(),
        "csv sorted by time",
    );
    // .db with JSON Attr cells
    let db = t.path().join("d.db");
    let c = rusqlite::Connection::open(&db).unwrap();
    c.execute_batch(
        r#"CREATE TABLE memscope_dump ("ID" INTEGER, "Event" TEXT, "Event Type" TEXT, "Name" TEXT, "Timestamp(ns)" INTEGER,
        "Process Id" INTEGER, "Thread Id" INTEGER, "Device Id" TEXT, "Ptr" TEXT, "Attr" TEXT,
        "Call Stack(Python)" TEXT, "Call Stack(C)" TEXT);"#,
    )
    .unwrap();
    for r in ROWS.iter().rev() {
        c.execute(
            "INSERT INTO memscope_dump VALUES (?1,?2,?3,?4,?5,7,7,?6,?7,?8,'','')",
            rusqlite::params![
                r.0 as i64,
                r.1,
                r.2,
                r.3,
                1_000 + r.0 as i64,
                r.4,
                r.5,
                json_attr(r.6)
            ],
        )
        .unwrap();
    }
    drop(c);
    check(&read_all(&db, Order::ById).unwrap(), "db");
    check(&read_all(&db, Order::ByTime).unwrap(), "db by time");
}
