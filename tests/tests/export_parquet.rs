//! Issue 15: `memscope export --to parquet` — a hive-partitioned dataset of a 64-rank job,
//! queried with the documented DuckDB, DataFusion and Spark (pyspark in local mode; issue 35)
//! queries of `docs/export.md` (`tests/export/query_parquet.py`), giving the per-rank peaks and
//! leaks of memscope's own analysis.

mod export_common;

use export_common::*;
use memscope_tests::*;
use std::collections::BTreeMap;
use std::path::Path;

const RANKS: u32 = 64;

/// Rank `r` of a synthetic job: pid 3000+r on NPU r, steps of PTA blocks with a peak that
/// grows with the rank, `r % 3` blocks leaked per rank (closed by msMemScope's shadow FREEs),
/// HAL reservations, and on even ranks a host (device_cpu) file too. Returns the leaked blocks
/// as (step allocated in, bytes).
fn rank(r: u32, root: &Path) -> Vec<(u64, u64)> {
    let mut p = Proc::new(3000 + r, 1_767_225_600_000_000_000 + u64::from(r) * 7);
    let dev = r.to_string();
    p.row("SYSTEM", "ACL_INIT", "", "N/A", None, "", "", "");
    let seg = 0x1_0000_0000 + u64::from(r) * 0x1000_0000;
    let hal = p.malloc("HAL", &dev, seg, 256 << 20, None, "CANN@RUNTIME", "", "");
    if r.is_multiple_of(2) {
        let h = p.malloc("HOST", "cpu", 0x7000_0000, 4096, None, "", "", "");
        p.free("HOST", "cpu", h, 0x7000_0000, 4096, None, false);
    }
    let mut leaked = Vec::new();
    let mut addr = seg;
    for step in 1..=5u64 {
        p.row(
            "MSTX",
            "Range_start",
            "step start",
            &dev,
            None,
            &format!("{{range_id:{step}}}"),
            "",
            "",
        );
        let mut live = Vec::new();
        for k in 0..(20 + u64::from(r)) {
            let size = 4096 * (1 + (k % 7)) + u64::from(r) * 512;
            let owner = if k % 2 == 0 {
                "PTA@model@layer"
            } else {
                "PTA@optimizer"
            };
            let id = p.malloc("PTA", &dev, addr, size, Some(256 << 20), owner, "", "");
            if k % 2 == 1 {
                // issue 25: a role given after the MALLOC (the optimizer hook's tag)
                let tag = format!(
                    "{{allocation_id:{id},addr:0x{addr:016x},size:{size},pool:PTA,owner:PTA@optimizer_state}}"
                );
                p.row("SYSTEM", "MEMORY_OWNER", "", &dev, Some(addr), &tag, "", "");
            }
            live.push((id, addr, size));
            addr += size;
            if k % 3 == 2 {
                let (id, a, s) = live.remove(0);
                p.free("PTA", &dev, id, a, s, Some(256 << 20), false);
            }
        }
        if step <= u64::from(r % 3) {
            leaked.push((step, live.pop().unwrap()));
        }
        for (id, a, s) in live {
            p.free("PTA", &dev, id, a, s, Some(256 << 20), false);
        }
        p.row(
            "MSTX",
            "Range_end",
            "step start",
            &dev,
            None,
            &format!("{{range_id:{step}}}"),
            "",
            "",
        );
    }
    for &(_, (id, a, s)) in &leaked {
        p.free("PTA", &dev, id, a, s, Some(256 << 20), true);
    }
    p.free("HAL", &dev, hal, seg, 256 << 20, None, true);
    p.row("SYSTEM", "ACL_FINI", "", "N/A", None, "", "", "");
    p.write_layout(root);
    leaked.iter().map(|&(step, (_, _, s))| (step, s)).collect()
}

/// PTA peak of each rank's dump as `memscope analyze decompose` reports it (sum of the owners'
/// bytes at the pool's peak).
fn decompose_peaks(root: &Path, out: &Path) -> BTreeMap<i64, i64> {
    let mut peaks = BTreeMap::new();
    for r in 0..RANKS {
        let dump = root
            .join(format!("msmemscope_{}_20260101000000_ascend", 3000 + r))
            .join(format!("device_{r}/dump/memscope_dump_20260101000000.csv"));
        let dir = out.join(format!("dec{r}"));
        let o = memscope(&[
            "analyze",
            "decompose",
            dump.to_str().unwrap(),
            "-o",
            dir.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let csv = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .next()
            .unwrap()
            .path();
        let mut peak = 0i64;
        for row in csv::Reader::from_path(&csv).unwrap().records() {
            let row = row.unwrap();
            if &row[1] == r.to_string().as_str() && &row[2] == "PTA" {
                peak += row[4].parse::<i64>().unwrap();
            }
        }
        peaks.insert(i64::from(r), peak);
    }
    peaks
}

/// The PTA pool's figures of each rank as `memscope analyze leaks <job> --summary-json` gives
/// them: (peak bytes, blocks live at exit, their bytes, step-rule leaked blocks, their bytes).
fn summary_figures(root: &Path, out: &Path) -> BTreeMap<i64, [i64; 5]> {
    let json = out.join("summary.json");
    let o = memscope(&[
        "analyze",
        "leaks",
        root.to_str().unwrap(),
        "--summary-json",
        json.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let mut figures = BTreeMap::new();
    for p in v["inputs"][0]["processes"].as_array().unwrap() {
        for a in p["allocators"].as_array().unwrap() {
            if a["allocator"] == "PTA" {
                let f = |k: &str| a[k].as_i64().unwrap_or_else(|| panic!("{k}: {a}"));
                let figs = [
                    "peak_bytes",
                    "live_at_exit_blocks",
                    "live_at_exit_bytes",
                    "leaked_blocks",
                    "leaked_bytes",
                ]
                .map(f);
                figures.insert(p["rank"].as_i64().unwrap(), figs);
            }
        }
    }
    figures
}

fn column(rows: &serde_json::Value, key: usize, val: usize) -> BTreeMap<i64, i64> {
    rows.as_array()
        .unwrap()
        .iter()
        .map(|r| (r[key].as_i64().unwrap(), r[val].as_i64().unwrap()))
        .collect()
}

#[test]
fn parquet_per_rank_peaks_and_leaks_of_a_64_rank_job_match_memscope_analysis_on_duckdb_datafusion_and_spark(
) {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("job");
    let leaked: BTreeMap<i64, Vec<(u64, u64)>> =
        (0..RANKS).map(|r| (i64::from(r), rank(r, &root))).collect();
    let ds = d.path().join("dataset");
    let stdout = export("parquet", &[&root], &ds);
    assert!(stdout.contains("64 process(es)"), "{stdout}");
    let v = py_check(
        "query_parquet.py",
        &[
            repo_root().join("docs/export.md").to_str().unwrap(),
            ds.to_str().unwrap(),
        ],
    );
    let want = decompose_peaks(&root, d.path());
    assert_eq!(want.len(), 64);
    assert!(
        want.values()
            .collect::<std::collections::BTreeSet<_>>()
            .len()
            > 32,
        "peaks differ by rank: {want:?}"
    );
    let figures = summary_figures(&root, d.path());
    let figure =
        |i: usize| -> BTreeMap<i64, i64> { figures.iter().map(|(r, f)| (*r, f[i])).collect() };
    assert_eq!(figure(0), want, "the summary's PTA peaks are decompose's");
    for engine in ["duckdb", "datafusion", "spark"] {
        let peaks = column(&v[engine]["peak_per_rank"], 0, 2);
        assert_eq!(peaks, want, "{engine}'s peaks are memscope's");
        // device_id = rank: ranks come from the device directories
        for row in v[engine]["peak_per_rank"].as_array().unwrap() {
            assert_eq!(row[0], row[1], "{engine}: {row}");
        }
    }
    let imb = &v["duckdb"]["imbalance"][0];
    assert_eq!(imb[0], 64, "{imb}");
    let heaviest = want
        .iter()
        .max_by_key(|(_, p)| **p)
        .map(|(r, _)| *r)
        .unwrap();
    assert_eq!(imb[5], heaviest, "the rank with the largest peak: {imb}");
    assert_eq!(imb[3], *want.values().max().unwrap(), "{imb}");
    assert_eq!(imb[1], *want.values().min().unwrap(), "{imb}");
    // leaks: the blocks never freed (closed by shadow FREEs at exit), on 2 ranks in 3
    let sum = |l: &[(u64, u64)]| l.iter().map(|b| b.1 as i64).sum::<i64>();
    let never_freed = |i: usize| -> BTreeMap<i64, i64> {
        leaked
            .iter()
            .filter(|(_, l)| !l.is_empty())
            .map(|(r, l)| (*r, if i == 0 { l.len() as i64 } else { sum(l) }))
            .collect()
    };
    assert_eq!(never_freed(0).len(), 42);
    let nonzero = |m: BTreeMap<i64, i64>| -> BTreeMap<i64, i64> {
        m.into_iter().filter(|(_, n)| *n > 0).collect()
    };
    assert_eq!(
        nonzero(figure(1)),
        never_freed(0),
        "memscope: PTA blocks live at exit"
    );
    assert_eq!(nonzero(figure(2)), never_freed(1), "memscope: their bytes");
    for engine in ["duckdb", "datafusion", "spark"] {
        let rows = &v[engine]["leaks_per_rank"];
        assert_eq!(
            column(rows, 0, 1),
            never_freed(0),
            "{engine}'s leaked blocks"
        );
        assert_eq!(
            column(rows, 0, 2),
            never_freed(1),
            "{engine}'s leaked bytes"
        );
    }
    // memscope's step rule leaves out the blocks of step 1 (warm-up), so only the step-2 blocks
    let step_rule: BTreeMap<i64, (i64, i64)> = leaked
        .iter()
        .map(|(r, l)| {
            let late: Vec<_> = l.iter().copied().filter(|b| b.0 >= 2).collect();
            (*r, (late.len() as i64, sum(&late)))
        })
        .collect();
    let got: BTreeMap<i64, (i64, i64)> = figures.iter().map(|(r, f)| (*r, (f[3], f[4]))).collect();
    assert_eq!(got, step_rule, "memscope's step-rule leaks");
    let owners = v["duckdb"]["top_owners"].as_array().unwrap();
    let names: Vec<&str> = owners.iter().map(|o| o[0].as_str().unwrap_or("")).collect();
    assert!(
        names.contains(&"PTA@model@layer") && names.contains(&"PTA@optimizer"),
        "{names:?}"
    );
    assert_eq!(
        owners[0][1], 64,
        "the top owner is on every rank: {owners:?}"
    );
    // bytes by role: the tagged blocks are optimizer state, the others temp (issue 25)
    let mut by_owner: BTreeMap<String, i64> = BTreeMap::new();
    walk(&root, &mut |p| {
        for row in read_csv(p) {
            if row["Event"] == "MALLOC" && row["Event Type"] == "PTA" {
                *by_owner.entry(attrs(&row)["owner"].clone()).or_default() +=
                    attrs(&row)["size"].parse::<i64>().unwrap();
            }
        }
    });
    let roles: BTreeMap<String, (i64, i64)> = v["duckdb"]["bytes_by_role"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r[0].as_str().unwrap().to_owned(),
                (r[1].as_i64().unwrap(), r[3].as_i64().unwrap()),
            )
        })
        .collect();
    assert_eq!(
        roles["optimizer_state"],
        (64, by_owner["PTA@optimizer"]),
        "{roles:?}"
    );
    assert_eq!(
        roles["temp"],
        (64, by_owner["PTA@model@layer"]),
        "{roles:?}"
    );
    // every row of every dump, once (device-less rows copied into each device file once)
    let rows: u64 = (0..RANKS)
        .map(|r| {
            let dir = root.join(format!("msmemscope_{}_20260101000000_ascend", 3000 + r));
            let mut ids = std::collections::BTreeSet::new();
            walk(&dir, &mut |p| {
                for row in read_csv(p) {
                    ids.insert(row["ID"].clone());
                }
            });
            ids.len() as u64
        })
        .sum();
    assert_eq!(v["rows"], rows, "{v}");
    assert_eq!(v["files"], 64);
}

#[test]
fn parquet_refuses_a_non_empty_output_and_takes_loose_files_rank_from_their_rows() {
    let d = tempfile::tempdir().unwrap();
    let mut p = Proc::new(61, 1_767_225_600_000_000_000);
    let id = p.malloc("PTA", "5", 0x1000, 4096, Some(1 << 20), "PTA", "", "");
    p.free("PTA", "5", id, 0x1000, 4096, Some(1 << 20), false);
    let loose = d.path().join("rank5.csv");
    p.write_file(&loose);
    let ds = d.path().join("ds");
    std::fs::create_dir(&ds).unwrap();
    std::fs::write(ds.join("keep.txt"), b"x").unwrap();
    let err = fails(&memscope(&[
        "export",
        "--to",
        "parquet",
        loose.to_str().unwrap(),
        "-o",
        ds.to_str().unwrap(),
    ]));
    assert!(err.contains("not empty"), "{err}");
    let ds2 = d.path().join("ds2");
    export("parquet", &[&loose], &ds2);
    assert!(
        ds2.join("events/rank=5/pid=61/part-00000.parquet")
            .is_file(),
        "rank from the Device Id of a loose file's rows"
    );
    let mut tmp = Vec::new();
    walk(&ds2, &mut |f| {
        if f.to_string_lossy().ends_with(".tmp") {
            tmp.push(f.to_path_buf());
        }
    });
    assert!(tmp.is_empty(), "{tmp:?}");
}

#[test]
fn parquet_splits_a_dump_file_holding_several_processes_by_pid() {
    let d = tempfile::tempdir().unwrap();
    let mut text = format!("{HEADER}\n");
    for (pid, dev) in [(71u32, "2"), (72, "3")] {
        let mut p = Proc::new(pid, 1_767_225_600_000_000_000);
        let id = p.malloc("PTA", dev, 0x1000, 4096, Some(1 << 20), "PTA", "", "");
        p.free("PTA", dev, id, 0x1000, 4096, Some(1 << 20), false);
        for r in &p.rows {
            text.push_str(&r.line());
            text.push('\n');
        }
    }
    let f = d.path().join("two.csv");
    std::fs::write(&f, text).unwrap();
    let ds = d.path().join("ds");
    let stdout = export("parquet", &[&f], &ds);
    assert!(stdout.contains("4 event(s) of 2 process(es)"), "{stdout}");
    for part in ["rank=2/pid=71", "rank=3/pid=72"] {
        assert!(
            ds.join("events")
                .join(part)
                .join("part-00000.parquet")
                .is_file(),
            "{part}"
        );
    }
}
