//! `memscope compare`: alignment, in-op memory change on both levels, both msMemScope formats,
//! multi-line rows, `.db` input, the output file, and the real 2025 dumps. Expected values are
//! worked out by hand from the rule in each test's comment.

use std::path::{Path, PathBuf};

use memscope_analysis::compare::{
    collect, compare, compare_csv, compare_files, write_compare_csv, CompareRow, Level,
    COMPARE_HEADER_1, COMPARE_HEADER_2,
};
use memscope_dump::reader::{DumpFile, ReadOptions};

const HEADER: &str =
    "ID,Event,Event Type,Name,Timestamp(ns),Process Id,Thread Id,Device Id,Ptr,Attr,Call Stack(Python),Call Stack(C)";

/// `id,event,type,name,ts(=id*10),pid 7,tid 7,device,ptr,attr,,`
fn r(id: u64, ev: &str, et: &str, name: &str, dev: &str, ptr: &str, attr: &str) -> String {
    format!(
        "{id},{ev},{et},{name},{},7,7,{dev},{ptr},\"{attr}\",,",
        id * 10
    )
}

fn op(id: u64, start: bool, name: &str) -> String {
    r(
        id,
        "OP_LAUNCH",
        if start { "ATEN_START" } else { "ATEN_END" },
        name,
        "0",
        "N/A",
        "",
    )
}

fn mem(id: u64, ev: &str, pool: &str, addr: u64, size: u64) -> String {
    r(
        id,
        ev,
        pool,
        "N/A",
        "0",
        &format!("0x{addr:016x}"),
        &format!("{{allocation_id:{addr},addr:0x{addr:016x},size:{size}}}"),
    )
}

fn write(dir: &Path, name: &str, rows: &[String]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, format!("{HEADER}\n{}\n", rows.join("\n"))).unwrap();
    p
}

fn run(base: &Path, cmp: &Path, level: Level) -> Vec<CompareRow> {
    compare_files(
        base,
        cmp,
        level,
        &mut ReadOptions::default(),
        &mut ReadOptions::default(),
    )
    .unwrap()
    .rows
}

fn row(name: &str, device: u32, base: Option<i64>, cmp: Option<i64>, level: Level) -> CompareRow {
    CompareRow {
        event: level.event(),
        name: name.into(),
        device,
        base,
        compare: cmp,
        step: None,
    }
}

#[test]
fn ops_align_with_insertions_and_deletions_and_values_are_the_change_inside_each_op() {
    let t = tempfile::tempdir().unwrap();
    // base ops A B C D: A allocates 100; B allocates 50 (kept); a MALLOC of 7 between B and C
    // belongs to no op; C frees A's 100; D does nothing. The block rows of A's MALLOC come last
    // (msMemScope writes a block's rows when it dies): order must not matter.
    let base = write(
        t.path(),
        "base.csv",
        &[
            op(1, true, "A"),
            op(3, false, "A"),
            op(4, true, "B"),
            mem(5, "MALLOC", "PTA", 0x200, 50),
            op(6, false, "B"),
            mem(7, "MALLOC", "PTA", 0x300, 7),
            op(8, true, "C"),
            op(10, false, "C"),
            op(11, true, "D"),
            op(12, false, "D"),
            mem(2, "MALLOC", "PTA", 0x100, 100),
            mem(9, "FREE", "PTA", 0x100, 100),
        ],
    );
    // compare ops A C X D: A allocates 200, C frees it, X allocates 30, D nothing
    let cmp = write(
        t.path(),
        "cmp.csv",
        &[
            op(1, true, "A"),
            mem(2, "MALLOC", "PTA", 0x100, 200),
            op(3, false, "A"),
            op(4, true, "C"),
            mem(5, "FREE", "PTA", 0x100, 200),
            op(6, false, "C"),
            op(7, true, "X"),
            mem(8, "MALLOC", "PTA", 0x400, 30),
            op(9, false, "X"),
            op(10, true, "D"),
            op(11, false, "D"),
        ],
    );
    let l = Level::Op;
    let rows = run(&base, &cmp, l);
    assert_eq!(
        rows,
        vec![
            row("A", 0, Some(100), Some(200), l),
            row("B", 0, Some(50), None, l),
            row("C", 0, Some(-100), Some(-200), l),
            row("X", 0, None, Some(30), l),
            row("D", 0, Some(0), Some(0), l),
        ]
    );
    let diffs: Vec<i64> = rows.iter().map(CompareRow::diff).collect();
    assert_eq!(diffs, vec![100, -50, -100, 30, 0]);
}

#[test]
fn kernels_last_until_the_next_launch_and_devices_come_out_ascending() {
    let t = tempfile::tempdir().unwrap();
    let k = |id: u64, dev: &str| {
        r(
            id,
            "KERNEL_LAUNCH",
            "KERNEL_LAUNCH",
            &format!("k{id}"),
            dev,
            "N/A",
            "{streamId:1,taskId:2}",
        )
    };
    let m = |id: u64, ev: &str, dev: &str, addr: u64, size: u64| {
        r(
            id,
            ev,
            "PTA",
            "N/A",
            dev,
            &format!("0x{addr:x}"),
            &format!("{{allocation_id:{id},addr:0x{addr:x},size:{size}}}"),
        )
    };
    // device 1 is written first. Device 1: k1 [1,4) gets +64; k4 [4,∞) gets +16 −64.
    // Device 0: a MALLOC before any kernel counts for nobody; k3 [3,6) gets +8; the MALLOC with
    // ID 20 (time 200, written out of place) falls in k6 [6,∞).
    let rows = [
        m(0, "MALLOC", "0", 0x98, 5),
        k(1, "1"),
        m(2, "MALLOC", "1", 0x10, 64),
        m(20, "MALLOC", "0", 0x99, 1000),
        k(3, "0"),
        k(4, "1"),
        m(5, "MALLOC", "0", 0x20, 8),
        m(7, "MALLOC", "1", 0x30, 16),
        m(8, "FREE", "1", 0x10, 64),
        k(6, "0"),
    ];
    let a = write(t.path(), "a.csv", &rows);
    let l = Level::Kernel;
    let got = run(&a, &a, l);
    assert_eq!(
        got,
        vec![
            row("k3", 0, Some(8), Some(8), l),
            row("k6", 0, Some(1000), Some(1000), l),
            row("k1", 1, Some(64), Some(64), l),
            row("k4", 1, Some(-48), Some(-48), l),
        ]
    );
}

#[test]
fn format_2025_negative_free_sizes_us_times_and_hal_fallback() {
    let t = tempfile::tempdir().unwrap();
    let h = "ID,Event,Event Type,Name,Timestamp(ns),Process Id,Thread Id,Device Id,Ptr,Attr,Call Stack(Python),Call Stack(C)";
    // 2025 format: µs times, decimal Ptr; PTA FREE sizes negative. Kernel window: +2048 −2048 +512.
    let pool = format!(
        "{h}\n1,KERNEL_LAUNCH,KERNEL_LAUNCH,N/A,1746006024486387,9,9,0,N/A,,,\n\
         2,MALLOC,PTA,N/A,1746006024486400,9,9,0,4096,\"{{addr:4096,size:2048,owner:,total:2097152,used:2048}}\",,\n\
         3,FREE,PTA,N/A,1746006024486500,9,9,0,4096,\"{{addr:4096,size:-2048,owner:,total:2097152,used:0}}\",,\n\
         4,MALLOC,PTA,N/A,1746006024486600,9,9,0,8192,\"{{addr:8192,size:512,owner:,total:2097152,used:512}}\",,\n"
    );
    let p = t.path().join("pool.csv");
    std::fs::write(&p, pool).unwrap();
    let got = run(&p, &p, Level::Kernel);
    assert_eq!(got[0].base, Some(512));
    // No pool event at all: HAL counts; a HAL FREE without device (2025) takes its MALLOC's device.
    let hal = format!(
        "{h}\n1,KERNEL_LAUNCH,KERNEL_LAUNCH,N/A,1746006024486387,9,9,0,N/A,,,\n\
         2,MALLOC,HAL,N/A,1746006024486400,9,9,0,4096,\"{{addr:4096,size:300,owner:,MID:7}}\",,\n\
         3,MALLOC,HAL,N/A,1746006024486450,9,9,0,8192,\"{{addr:8192,size:5,owner:,MID:7}}\",,\n\
         4,FREE,HAL,N/A,1746006024486500,9,9,N/A,4096,\"{{addr:4096,size:300,owner:,MID:-1}}\",,\n"
    );
    let p = t.path().join("hal.csv");
    std::fs::write(&p, hal).unwrap();
    let got = run(&p, &p, Level::Kernel);
    assert_eq!(got[0].base, Some(5));
}

#[test]
fn files_with_multi_line_call_stacks_compare_like_files_without() {
    let t = tempfile::tempdir().unwrap();
    let plain = write(
        t.path(),
        "plain.csv",
        &[
            op(1, true, "A"),
            mem(2, "MALLOC", "PTA", 0x10, 64),
            op(3, false, "A"),
        ],
    );
    let stacked = t.path().join("stacked.csv");
    std::fs::write(
        &stacked,
        format!(
            "{HEADER}\n1,OP_LAUNCH,ATEN_START,A,10,7,7,0,N/A,,\"a.py(1): f\nb.py(2): g\n\",\"libx.so(foo+0x1)\n\"\n\
             2,MALLOC,PTA,N/A,20,7,7,0,0x0000000000000010,\"{{allocation_id:1,addr:0x10,size:64}}\",\"a.py(3): h\n\",\n\
             3,OP_LAUNCH,ATEN_END,A,30,7,7,0,N/A,,\"a.py(1): f\n\",\n"
        ),
    )
    .unwrap();
    assert_eq!(
        run(&plain, &stacked, Level::Op),
        vec![row("A", 0, Some(64), Some(64), Level::Op)]
    );
}

#[test]
fn db_inputs_give_the_same_rows_as_csv() {
    let t = tempfile::tempdir().unwrap();
    let csv = write(
        t.path(),
        "a.csv",
        &[
            op(1, true, "A"),
            mem(2, "MALLOC", "PTA", 0x10, 64),
            op(3, false, "A"),
        ],
    );
    let db = t.path().join("a.db");
    let c = rusqlite::Connection::open(&db).unwrap();
    c.execute_batch(
        r#"CREATE TABLE memscope_dump ("ID" INTEGER, "Event" TEXT, "Event Type" TEXT, "Name" TEXT, "Timestamp(ns)" INTEGER,
        "Process Id" INTEGER, "Thread Id" INTEGER, "Device Id" TEXT, "Ptr" TEXT, "Attr" TEXT,
        "Call Stack(Python)" TEXT, "Call Stack(C)" TEXT);
        INSERT INTO memscope_dump VALUES (2,'MALLOC','PTA','N/A',20,7,7,'0','0x0000000000000010','{"allocation_id":"1","addr":"0x0000000000000010","size":"64"}','','');
        INSERT INTO memscope_dump VALUES (1,'OP_LAUNCH','ATEN_START','A',10,7,7,'0','N/A','{}','','');
        INSERT INTO memscope_dump VALUES (3,'OP_LAUNCH','ATEN_END','A',30,7,7,'0','N/A','{}','','');"#,
    )
    .unwrap();
    drop(c);
    assert_eq!(
        run(&csv, &db, Level::Op),
        vec![row("A", 0, Some(64), Some(64), Level::Op)]
    );
}

#[test]
fn the_output_file_has_two_header_lines_private_mode_and_never_replaces_a_file() {
    use std::os::unix::fs::PermissionsExt;
    let t = tempfile::tempdir().unwrap();
    let rows = vec![row("a,b", 0, Some(1), None, Level::Op)];
    let p1 = write_compare_csv(&t.path().join("out"), &rows).unwrap();
    let p2 = write_compare_csv(&t.path().join("out"), &rows).unwrap();
    assert_ne!(p1, p2);
    assert!(p1.parent().unwrap().ends_with("out/compare"));
    let text = std::fs::read_to_string(&p1).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines,
        vec![
            COMPARE_HEADER_1,
            COMPARE_HEADER_2,
            "OP_LAUNCH,\"a,b\",0,1,N/A,-1"
        ]
    );
    assert_eq!(
        std::fs::metadata(&p1).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert_eq!(compare_csv(&rows, false), text.into_bytes());
}

#[test]
fn the_two_2025_dumps_at_kernel_level_give_five_matches_and_one_base_only_kernel_per_device() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures/msmemscope");
    let (a, b) = (
        dir.join("memscope_dump_20250428113810.csv"),
        dir.join("memscope_dump_20250428113811.csv"),
    );
    if !a.is_file() || !b.is_file() {
        eprintln!("SKIP: {} not found", dir.display());
        return;
    }
    let l = Level::Kernel;
    let sa = collect(&DumpFile::open(&a).unwrap(), l, &mut ReadOptions::default()).unwrap();
    let sb = collect(&DumpFile::open(&b).unwrap(), l, &mut ReadOptions::default()).unwrap();
    let res = compare(&sa, &sb, l);
    assert_eq!(res.rows.len(), 12);
    for d in [0, 1] {
        let dev: Vec<&CompareRow> = res.rows.iter().filter(|r| r.device == d).collect();
        assert_eq!(dev.len(), 6);
        assert_eq!(
            dev.iter()
                .filter(|r| r.base.is_some() && r.compare.is_some())
                .count(),
            5
        );
        assert!(dev[5].base.is_some() && dev[5].compare.is_none());
        assert!(dev.iter().all(|r| r.name == "N/A"));
    }
    assert_eq!(res.rows[0].device, 0);
    // device 0, first kernel (ID 317) until the next (ID 323): PTA MALLOCs 7168 + 28160
    assert_eq!(res.rows[0].base, Some(35_328));
    // device 0, third kernel (325 → 332): 3584 + 512 + 512 + 18944 + 18944 − 18944
    assert_eq!(res.rows[2].base, Some(23_552));
}

#[test]
fn rows_carry_the_step_their_entry_started_in() {
    let t = tempfile::tempdir().unwrap();
    // two steps (msTX "step start" ranges), one kernel launch in each, 10 then 20 bytes
    let rows = [
        "0,MSTX,Range_start,\"step start\",10,7,7,0,N/A,,,",
        "1,KERNEL_LAUNCH,KERNEL_LAUNCH,K,11,7,7,0,N/A,,,",
        "2,MALLOC,PTA,N/A,12,7,7,0,0x0000000000000010,\"{allocation_id:1,addr:0x10,size:10,used:10,total:10}\",,",
        "3,MSTX,Range_end,\"step start\",13,7,7,0,N/A,,,",
        "4,MSTX,Range_start,\"step start\",20,7,7,0,N/A,,,",
        "5,KERNEL_LAUNCH,KERNEL_LAUNCH,K,21,7,7,0,N/A,,,",
        "6,MALLOC,PTA,N/A,22,7,7,0,0x0000000000000020,\"{allocation_id:2,addr:0x20,size:20,used:30,total:30}\",,",
        "7,MSTX,Range_end,\"step start\",23,7,7,0,N/A,,,",
    ];
    let p = t.path().join("a.csv");
    std::fs::write(&p, format!("{HEADER}\n{}\n", rows.join("\n"))).unwrap();
    let res = compare_files(
        &p,
        &p,
        Level::Kernel,
        &mut ReadOptions::default(),
        &mut ReadOptions::default(),
    )
    .unwrap();
    let steps: Vec<(Option<u32>, Option<i64>)> =
        res.rows.iter().map(|r| (r.step, r.base)).collect();
    assert_eq!(steps, vec![(Some(1), Some(10)), (Some(2), Some(20))]);
    assert!(String::from_utf8(compare_csv(&res.rows, true))
        .unwrap()
        .contains("KERNEL_LAUNCH,K,0,20,20,0,2\n"));
    assert!(String::from_utf8(compare_csv(&res.rows, false))
        .unwrap()
        .contains("KERNEL_LAUNCH,K,0,20,20,0\n"));
}

#[test]
fn ignore_device_and_device_maps_align_other_devices() {
    use memscope_analysis::compare::{map_devices, parse_device_map, DeviceMap};
    let seq = |d: u32| {
        let mut s = memscope_analysis::compare::Sequence::default();
        s.names.push("K".into());
        s.devices.insert(
            d,
            vec![memscope_analysis::compare::Entry {
                name: 0,
                delta: 4,
                step: 1,
            }],
        );
        s
    };
    let base = seq(0);
    assert_eq!(compare(&base, &seq(5), Level::Kernel).rows.len(), 2);
    let mut c = seq(5);
    assert!(map_devices(&base, &mut c, &DeviceMap::Ignore)
        .unwrap()
        .is_some());
    let r = compare(&base, &c, Level::Kernel).rows;
    assert_eq!(r.len(), 1);
    assert_eq!(
        (r[0].device, r[0].base, r[0].compare),
        (0, Some(4), Some(4))
    );
    let mut c = seq(5);
    let m = parse_device_map("5=0").unwrap();
    map_devices(&base, &mut c, &DeviceMap::Map(m)).unwrap();
    assert_eq!(compare(&base, &c, Level::Kernel).rows.len(), 1);
    assert!(parse_device_map("5").is_err());
    assert!(parse_device_map("5=0,5=1").is_err());
    let mut two = seq(5);
    two.devices.insert(6, vec![]);
    assert!(map_devices(&base, &mut two, &DeviceMap::Ignore).is_err());
}
