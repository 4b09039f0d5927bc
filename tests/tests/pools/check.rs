//! Shared checks of the pool tests (`pools.rs`, `pools_demo.rs`): compiling the pool producer
//! programs, reading dumps per device file, replaying pool rows and locating steps.

#![allow(dead_code)] // each test binary uses a different subset

use memscope_tests::{attrs, compile, read_csv, repo_root, Row, Run};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Event Types of the framework pools.
pub const POOL_TYPES: [&str; 4] = ["PTA", "PTA_WORKSPACE", "MindSpore", "ATB"];

/// 1 MiB in bytes.
pub const MIB: i64 = 1 << 20;

/// Compiles `tests/tests/pools/<name>.c` (or, with `programs`, `tests/programs/<name>.c`) once
/// per test binary, under a name of its own so other test binaries never race on the output.
pub fn pool_program(name: &str, programs: bool) -> PathBuf {
    static BUILT: Mutex<BTreeMap<String, PathBuf>> = Mutex::new(BTreeMap::new());
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    let dir = if programs {
        "tests/programs"
    } else {
        "tests/tests/pools"
    };
    let out = format!("pools-{}-{name}", std::process::id());
    built
        .entry(name.to_owned())
        .or_insert_with(|| {
            compile(
                &[&repo_root().join(dir).join(format!("{name}.c"))],
                &out,
                &[],
                false,
            )
        })
        .clone()
}

/// `device_<n>` directory holding a dump file (`<project>/device_<n>/dump/<file>`).
pub fn device_dir(dump: &Path) -> String {
    dump.parent()
        .and_then(Path::parent)
        .and_then(Path::file_name)
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Rows of every CSV dump of a run, per file (device directory name, rows in ID order).
pub fn csv_files(run: &Run) -> Vec<(String, Vec<Row>)> {
    run.dumps(".csv")
        .iter()
        .map(|p| (device_dir(p), sorted(read_csv(p))))
        .collect()
}

/// Rows sorted by their `ID`.
pub fn sorted(mut rows: Vec<Row>) -> Vec<Row> {
    rows.sort_by_key(|r| r["ID"].parse::<u64>().expect("numeric ID"));
    rows
}

/// Whether a row is a MALLOC/FREE of a framework pool.
pub fn is_pool(r: &Row) -> bool {
    matches!(r["Event"].as_str(), "MALLOC" | "FREE")
        && POOL_TYPES.contains(&r["Event Type"].as_str())
}

/// Integer Attr `key` of a row.
pub fn num(r: &Row, key: &str) -> i64 {
    let a = attrs(r);
    let v = a
        .get(key)
        .unwrap_or_else(|| panic!("no {key} in {}", r["Attr"]));
    v.parse()
        .unwrap_or_else(|_| panic!("{key}:{v} is not an integer"))
}

/// Expected pool row: (Event, Event Type, size, used, total), sizes in bytes.
pub type Expected<'a> = (&'a str, &'a str, i64, i64, i64);

/// One pool row reduced to what the hand-computed expectations name:
/// (Event, Event Type, size, used, total), sizes in bytes.
pub fn figures(r: &Row) -> (String, String, i64, i64, i64) {
    (
        r["Event"].clone(),
        r["Event Type"].clone(),
        num(r, "size"),
        num(r, "used"),
        num(r, "total"),
    )
}

/// Replays the pool rows of one file in ID order and checks the pool invariants:
/// * every FREE closes a live MALLOC of the same allocation_id, Event Type, device, address and
///   size, and carries no owner; every MALLOC carries an owner starting with its framework level;
/// * `used` equals the running sum of live block sizes per Event Type and device;
/// * `Ptr` equals the `addr` Attr.
///
/// Returns the blocks still live at the end (allocation_id → MALLOC row).
pub fn replay(rows: &[Row]) -> BTreeMap<i64, Row> {
    let mut live: BTreeMap<i64, Row> = BTreeMap::new();
    let mut sums: BTreeMap<(String, String), i64> = BTreeMap::new();
    for r in rows.iter().filter(|r| is_pool(r)) {
        let key = (r["Event Type"].clone(), r["Device Id"].clone());
        let (id, size) = (num(r, "allocation_id"), num(r, "size"));
        let a = attrs(r);
        assert_eq!(
            u64::from_str_radix(a["addr"].trim_start_matches("0x"), 16).ok(),
            parse_ptr(&r["Ptr"])
        );
        if r["Event"] == "MALLOC" {
            let owner = a
                .get("owner")
                .unwrap_or_else(|| panic!("MALLOC without owner: {r:?}"));
            let framework = owner.split('@').next().unwrap_or_default();
            assert_eq!(framework, r["Event Type"], "owner {owner} of {r:?}");
            assert!(
                live.insert(id, r.clone()).is_none(),
                "allocation_id {id} reused: {r:?}"
            );
            *sums.entry(key.clone()).or_default() += size;
        } else {
            assert!(!a.contains_key("owner"), "FREE with owner: {r:?}");
            let m = live
                .remove(&id)
                .unwrap_or_else(|| panic!("FREE without live MALLOC: {r:?}"));
            for k in ["Event Type", "Device Id", "Ptr"] {
                assert_eq!(m[k], r[k], "{k} of FREE {r:?} vs MALLOC {m:?}");
            }
            assert_eq!(
                num(&m, "size"),
                size,
                "FREE carries the MALLOC's size: {r:?}"
            );
            *sums.entry(key.clone()).or_default() -= size;
        }
        assert_eq!(
            num(r, "used"),
            sums[&key],
            "used is the running sum per pool and device: {r:?}"
        );
    }
    live
}

fn parse_ptr(p: &str) -> Option<u64> {
    p.strip_prefix("0x")
        .map_or_else(|| p.parse().ok(), |h| u64::from_str_radix(h, 16).ok())
}

/// Step of every row of one file (in ID order): an msTX `Range_start` named `step start` opens
/// step n+1, the `Range_end` with the same `range_id` closes it (that row still belongs to it).
pub fn steps_of(rows: &[Row]) -> Vec<Option<u32>> {
    let (mut opened, mut open): (u32, Option<(u32, String)>) = (0, None);
    rows.iter()
        .map(|r| {
            let mstx = r["Event"] == "MSTX";
            if mstx && r["Event Type"] == "Range_start" && r["Name"] == "step start" {
                opened += 1;
                open = Some((
                    opened,
                    attrs(r).get("range_id").cloned().unwrap_or_default(),
                ));
            }
            let step = open.as_ref().map(|o| o.0);
            let closes = open
                .as_ref()
                .is_some_and(|o| attrs(r).get("range_id") == Some(&o.1));
            if mstx && r["Event Type"] == "Range_end" && closes {
                open = None;
            }
            step
        })
        .collect()
}
