//! Issue 10 item 2: the three inefficient-memory rules of msMemScope (behaviour spec §10.4),
//! table-driven over small event sequences — other-op free/malloc, same-op free/malloc,
//! nested ATB ops, rows outside ops, an ATB op touching a torch block — with the classes each
//! rule gives. Every sequence runs through both paths:
//!
//! * online: the layers `memscope run` puts between the typers and the dump (ACCESS
//!   allocation ids, the annotating inefficient layer, the CSV sink), read back from the CSV;
//! * offline: the same sequence dumped without the analysis, then `memscope analyze
//!   inefficient` on the file, read back from its annotated copy.
//!
//! Both must give the table's classes, for msMemScope's rule (default) and for memscope's
//! stricter `--inefficient-rule op-end`.

use memscope_analysis::inefficient::{IneffConfig, IneffRule};
use memscope_analysis::inefficient_layer::{InefficientLayer, DEFAULT_HOLD_BACK_CAP};
use memscope_collect::access_blocks::AccessBlocks;
use memscope_core::bus::{Bus, Layer};
use memscope_core::event::MemoryAttrs;
use memscope_core::event::{AccessAttrs, Attrs, Device, Event, EventKind, EventType, LaunchAttrs};
use memscope_dump::sink::csv::CsvSink;
use memscope_dump::sink::Place;
use memscope_tests::*;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

const PID: u32 = 4242;

/// One row of a sequence: `malloc B atb|pta`, `free B`, `access B atb|pta` (the ACCESS `type`
/// names the family whose ops it counts), `atb{`/`atb}` and `aten{`/`aten}` (op start / end).
fn events(seq: &[&str]) -> Vec<Event> {
    let mut out = Vec::new();
    let mut blocks: HashMap<String, (u64, EventType, u64)> = HashMap::new(); // addr, pool, id
    let mut next_id = 1;
    for (i, step) in seq.iter().enumerate() {
        let w: Vec<&str> = step.split_whitespace().collect();
        let ts = 1_000 + i as u64 * 10;
        let mut ev = match w.as_slice() {
            ["malloc", b, pool] | ["free", b, pool] => {
                let t = if *pool == "atb" {
                    EventType::Atb
                } else {
                    EventType::Pta
                };
                let addr = 0x10_0000 * (blocks.len() as u64 + 1);
                let (addr, t, id) = *blocks.entry(b.to_string()).or_insert_with(|| {
                    next_id += 1;
                    (addr, t, next_id - 1)
                });
                let mut e = Event::new(t, ts, PID, PID);
                if w[0] == "free" {
                    e.kind = EventKind::Free;
                }
                e.ptr = Some(addr);
                e.attrs = Attrs::Memory(MemoryAttrs {
                    allocation_id: id,
                    addr,
                    size: 4096,
                    ..MemoryAttrs::default()
                });
                e
            }
            ["access", b, fam] => {
                let mut e = Event::new(EventType::Read, ts, PID, PID);
                e.name = Some("op".into());
                e.ptr = Some(blocks[*b].0 + 64);
                e.attrs = Attrs::Access(AccessAttrs {
                    size: Some(64),
                    pool: Some(fam.to_uppercase()),
                    ..AccessAttrs::default()
                });
                e
            }
            [op] => {
                let t = match *op {
                    "atb{" => EventType::AtbStart,
                    "atb}" => EventType::AtbEnd,
                    "aten{" => EventType::AtenStart,
                    "aten}" => EventType::AtenEnd,
                    other => panic!("bad step {other}"),
                };
                let mut e = Event::new(t, ts, PID, PID);
                e.name = Some("Op".into());
                e.attrs = Attrs::Launch(LaunchAttrs::default());
                e
            }
            other => panic!("bad step {other:?}"),
        };
        ev.id = i as u64;
        ev.device = Device::Npu(0);
        out.push(ev);
    }
    out
}

/// A sequence, written name → address by the order blocks first appear (for the result).
fn block_names(seq: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for s in seq {
        let w: Vec<&str> = s.split_whitespace().collect();
        if w.len() > 1 && !v.iter().any(|b| b == w[1]) {
            v.push(w[1].to_owned());
        }
    }
    v
}

/// Dumps `evs` through `extra` layers and the CSV sink into `dir/dump.csv` (ACCESS rows get
/// their allocation ids first, as in `memscope run`).
fn dump(evs: &[Event], extra: Vec<Box<dyn Layer>>, dir: &Path) -> PathBuf {
    let path = dir.join("memscope_dump_0.csv");
    let p = path.clone();
    let mut layers: Vec<Box<dyn Layer>> = vec![Box::new(AccessBlocks::new())];
    layers.extend(extra);
    layers.push(Box::new(CsvSink::new(Box::new(move |place: Place| {
        // one device in these sequences; device-less rows wait in a backlog file of their own
        let p = match place {
            Place::Device(_) => p.clone(),
            Place::Backlog => p.with_file_name(".memscope_backlog_0.csv"),
        };
        let f = std::fs::File::create(&p).map_err(|e| memscope_core::bus::BusError::Io {
            path: p.display().to_string(),
            source: e,
        })?;
        Ok((f, p))
    }))));
    let mut bus = Bus::new(Some(PID), layers);
    for e in evs {
        bus.push(e.clone()).unwrap();
    }
    bus.finish().unwrap();
    path
}

/// Block name → classes written on its MALLOC row (`inefficient`, msMemScope's
/// `inefficient_type` accepted too).
fn classes(csv: &Path, names: &[String]) -> BTreeMap<String, String> {
    let mallocs: Vec<Row> = read_csv(csv)
        .into_iter()
        .filter(|r| r["Event"] == "MALLOC")
        .collect();
    let mut by_addr: HashMap<String, String> = HashMap::new();
    for r in &mallocs {
        let a = attrs(r);
        let t = a
            .get("inefficient")
            .or_else(|| a.get("inefficient_type"))
            .cloned()
            .unwrap_or_default();
        by_addr.insert(r["Ptr"].clone(), t);
    }
    names
        .iter()
        .enumerate()
        .filter_map(|(i, n)| {
            let ptr = format!("0x{:016x}", 0x10_0000 * (i as u64 + 1));
            by_addr.get(&ptr).map(|t| (n.clone(), t.clone()))
        })
        .collect()
}

fn online(seq: &[&str], rule: IneffRule, dir: &Path) -> BTreeMap<String, String> {
    let cfg = IneffConfig {
        idle_threshold: 2,
        rule,
        ..IneffConfig::default()
    };
    let layer = InefficientLayer::annotating(cfg, DEFAULT_HOLD_BACK_CAP);
    let csv = dump(&events(seq), vec![Box::new(layer)], dir);
    classes(&csv, &block_names(seq))
}

fn offline(seq: &[&str], rule: IneffRule, dir: &Path) -> BTreeMap<String, String> {
    let csv = dump(&events(seq), Vec::new(), dir);
    let o = Command::new(memscope_bin())
        .args(["analyze", "inefficient", "--idle-threshold", "2"])
        .args(["--inefficient-rule", rule.as_str()])
        .arg(&csv)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let copy = out
        .lines()
        .find_map(|l| l.split("annotated copy written to ").nth(1))
        .unwrap_or_else(|| panic!("no annotated copy named in: {out}"));
    classes(Path::new(copy.trim()), &block_names(seq))
}

struct Case {
    name: &'static str,
    seq: &'static [&'static str],
    /// (block, classes under msMemScope's rule, classes under op-end)
    want: &'static [(&'static str, &'static str, &'static str)],
}

const CASES: &[Case] = &[
    Case {
        name: "early: another op frees between the allocation and the first use",
        seq: &[
            "malloc Y atb",
            "malloc B atb",
            "atb{",
            "free Y atb",
            "atb}",
            "atb{",
            "access B atb",
            "atb}",
            "free B atb",
        ],
        want: &[("B", "early_allocation", "early_allocation"), ("Y", "", "")],
    },
    Case {
        name: "early: the op of the first use frees too (msMemScope classifies on arrival)",
        seq: &[
            "malloc Y atb",
            "malloc Z atb",
            "malloc B atb",
            "atb{",
            "free Y atb",
            "atb}",
            "atb{",
            "free Z atb",
            "access B atb",
            "atb}",
            "free B atb",
        ],
        want: &[("B", "early_allocation", ""), ("Y", "", ""), ("Z", "", "")],
    },
    Case {
        name: "same op: a free and the first use in one op, nothing freed before",
        seq: &[
            "malloc Y atb",
            "malloc B atb",
            "atb{",
            "free Y atb",
            "access B atb",
            "atb}",
            "free B atb",
        ],
        want: &[("B", "", ""), ("Y", "", "")],
    },
    Case {
        name: "late: another op allocates between the last use and the free",
        seq: &[
            "malloc B atb",
            "atb{",
            "access B atb",
            "atb}",
            "atb{",
            "malloc X atb",
            "atb}",
            "atb{",
            "free B atb",
            "atb}",
        ],
        want: &[
            ("B", "late_deallocation", "late_deallocation"),
            ("X", "", ""),
        ],
    },
    Case {
        name: "late: the freeing op allocates too (msMemScope classifies on arrival)",
        seq: &[
            "malloc B atb",
            "atb{",
            "access B atb",
            "atb}",
            "atb{",
            "malloc X atb",
            "atb}",
            "atb{",
            "malloc W atb",
            "free B atb",
            "atb}",
        ],
        want: &[("B", "late_deallocation", ""), ("X", "", ""), ("W", "", "")],
    },
    Case {
        name: "nested ATB ops: the inner end closes the op, the outer op's later rows count alone",
        seq: &[
            "malloc Y atb",
            "malloc B atb",
            "atb{",
            "atb{",
            "free Y atb",
            "atb}",
            "access B atb",
            "atb}",
            "free B atb",
        ],
        want: &[("B", "early_allocation", ""), ("Y", "", "")],
    },
    Case {
        name: "nested ATB ops: the outer op's malloc is settled at the inner end",
        seq: &[
            "malloc B atb",
            "atb{",
            "access B atb",
            "atb}",
            "atb{",
            "malloc X atb",
            "atb{",
            "atb}",
            "free B atb",
            "atb}",
        ],
        want: &[("B", "late_deallocation", ""), ("X", "", "")],
    },
    Case {
        name: "rows outside any op count as ops of their own",
        seq: &[
            "malloc B atb",
            "malloc Y atb",
            "free Y atb",
            "access B atb",
            "free B atb",
        ],
        want: &[("B", "early_allocation", "early_allocation"), ("Y", "", "")],
    },
    Case {
        name: "temporary idleness: more than the threshold (2) ops between two uses",
        seq: &[
            "malloc B atb",
            "atb{",
            "access B atb",
            "atb}",
            "atb{",
            "atb}",
            "atb{",
            "atb}",
            "atb{",
            "atb}",
            "atb{",
            "access B atb",
            "atb}",
            "atb{",
            "access B atb",
            "atb}",
            "free B atb",
        ],
        want: &[("B", "temporary_idleness", "temporary_idleness")],
    },
    Case {
        name: "an ATB op using a torch (PTA) block counts ATB ops; ATEN ops are the PTA family",
        seq: &[
            "malloc B pta",
            "malloc Y atb",
            "atb{",
            "free Y atb",
            "atb}",
            "atb{",
            "access B atb",
            "atb}",
            "aten{",
            "access B pta",
            "aten}",
            "free B pta",
        ],
        want: &[("B", "early_allocation", "early_allocation"), ("Y", "", "")],
    },
    Case {
        name: "PTA family: ATEN ops, other-op free and malloc",
        seq: &[
            "malloc Y pta",
            "malloc B pta",
            "aten{",
            "free Y pta",
            "aten}",
            "aten{",
            "access B pta",
            "aten}",
            "aten{",
            "malloc X pta",
            "aten}",
            "aten{",
            "free B pta",
            "aten}",
        ],
        want: &[
            (
                "B",
                "early_allocation,late_deallocation",
                "early_allocation,late_deallocation",
            ),
            ("Y", "", ""),
            ("X", "", ""),
        ],
    },
];

#[test]
fn the_three_rules_give_the_tables_classes_online_and_offline_for_both_rules() {
    let mut failures = Vec::new();
    for case in CASES {
        for rule in [IneffRule::MsMemScope, IneffRule::OpEnd] {
            let want: BTreeMap<String, String> = case
                .want
                .iter()
                .map(|(b, ms, oe)| {
                    let t = if rule == IneffRule::MsMemScope {
                        ms
                    } else {
                        oe
                    };
                    (b.to_string(), t.to_string())
                })
                .collect();
            let on = online(case.seq, rule, tempfile::tempdir().unwrap().path());
            let off = offline(case.seq, rule, tempfile::tempdir().unwrap().path());
            if on != want || off != want {
                failures.push(format!(
                    "{} [{}]: want {want:?}, online {on:?}, offline {off:?}",
                    case.name,
                    rule.as_str()
                ));
            }
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

#[test]
fn in_place_rewrites_the_input_as_msmemscope_does_and_repeats_without_new_files() {
    use std::os::unix::fs::PermissionsExt;
    let seq = CASES[0].seq;
    let t = tempfile::tempdir().unwrap();
    let csv = dump(&events(seq), Vec::new(), t.path());
    std::fs::set_permissions(&csv, std::fs::Permissions::from_mode(0o640)).unwrap();
    let other = tempfile::tempdir().unwrap();
    let want = offline(seq, IneffRule::MsMemScope, other.path());
    for _ in 0..2 {
        let o = Command::new(memscope_bin())
            .args([
                "analyze",
                "inefficient",
                "--idle-threshold",
                "2",
                "--in-place",
            ])
            .arg(&csv)
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success(), "{out}");
        assert!(
            out.contains(&format!("{} rewritten", csv.display())),
            "{out}"
        );
        assert_eq!(
            classes(&csv, &block_names(seq)),
            want,
            "annotated in place, once"
        );
    }
    let names: Vec<String> = std::fs::read_dir(t.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["memscope_dump_0.csv"], "no copy left next to it");
    assert_eq!(
        std::fs::metadata(&csv).unwrap().permissions().mode() & 0o777,
        0o640,
        "the input keeps its mode"
    );
}

#[test]
fn in_place_refuses_a_dump_whose_last_row_is_cut_and_leaves_it_as_it_is() {
    let seq = CASES[0].seq;
    let t = tempfile::tempdir().unwrap();
    let csv = dump(&events(seq), Vec::new(), t.path());
    let whole = std::fs::read(&csv).unwrap();
    // cut inside the last row: no line end
    let cut = &whole[..whole.len() - 5];
    std::fs::write(&csv, cut).unwrap();
    let o = Command::new(memscope_bin())
        .args(["analyze", "inefficient", "--in-place"])
        .arg(&csv)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("the last row is incomplete"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert_eq!(std::fs::read(&csv).unwrap(), cut, "the input is untouched");
}
