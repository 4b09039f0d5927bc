//! Issue 10 item 6: offline analyses replay rows in ID order; a file whose IDs and timestamps
//! disagree gets one warning line with the count, and `--order time` replays by timestamp.

use memscope_tests::*;
use std::path::Path;
use std::process::Command;

const HEADER: &str = "ID,Event,Event Type,Name,Timestamp(ns),Process Id,Thread Id,Device Id,Ptr,Attr,Call Stack(Python),Call Stack(C)";

/// Block b is allocated (ID 3) after a is freed (ID 2), but stamped before: by ID the pool
/// peaks at 100 bytes, by time at 200.
fn disagreeing_dump(dir: &Path) -> std::path::PathBuf {
    let rows = [
        "1,MALLOC,PTA,N/A,10,7,7,0,0x0000000000001000,\"{allocation_id:1,addr:0x1000,size:100,owner:PTA}\",,",
        "2,FREE,PTA,N/A,40,7,7,0,0x0000000000001000,\"{allocation_id:1,addr:0x1000,size:100}\",,",
        "3,MALLOC,PTA,N/A,20,7,8,0,0x0000000000002000,\"{allocation_id:2,addr:0x2000,size:100,owner:PTA}\",,",
        "4,FREE,PTA,N/A,50,7,8,0,0x0000000000002000,\"{allocation_id:2,addr:0x2000,size:100}\",,",
    ];
    let p = dir.join("memscope_dump_disorder.csv");
    std::fs::write(&p, format!("{HEADER}\n{}\n", rows.join("\n"))).unwrap();
    p
}

fn decompose(file: &Path, extra: &[&str]) -> (String, String) {
    let out = tempfile::tempdir().unwrap();
    let o = Command::new(memscope_bin())
        .args(["analyze", "decompose"])
        .arg(file)
        .arg("-o")
        .arg(out.path())
        .args(extra)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{err}");
    let mut csv = String::new();
    walk(out.path(), &mut |p| {
        csv = std::fs::read_to_string(p).unwrap()
    });
    let peak = csv
        .lines()
        .nth(1)
        .and_then(|l| l.split(',').nth(4))
        .unwrap_or_default()
        .to_owned();
    (err, peak)
}

#[test]
fn ids_and_timestamps_that_disagree_give_one_warning_and_order_time_replays_by_timestamp() {
    let dir = tempfile::tempdir().unwrap();
    let f = disagreeing_dump(dir.path());
    let (err, peak) = decompose(&f, &[]);
    let warnings: Vec<&str> = err.lines().filter(|l| l.contains("warning")).collect();
    assert_eq!(warnings.len(), 1, "{err}");
    assert!(
        warnings[0].contains("1 row(s)") && warnings[0].contains("--order time"),
        "{err}"
    );
    assert_eq!(peak, "100", "ID order");
    let (err, peak) = decompose(&f, &["--order", "time"]);
    assert!(!err.contains("warning"), "{err}");
    assert_eq!(peak, "200", "time order");
    // every offline analysis takes --order
    for a in ["leaks", "inefficient", "gap"] {
        let o = Command::new(memscope_bin())
            .args(["analyze", a])
            .arg(&f)
            .args(["--order", "time"])
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{a}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

#[test]
fn a_file_in_time_order_gives_no_warning() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("memscope_dump_ok.csv");
    std::fs::write(
        &p,
        format!(
            "{HEADER}\n1,MALLOC,PTA,N/A,10,7,7,0,0x0000000000001000,\"{{allocation_id:1,addr:0x1000,size:100}}\",,\n2,FREE,PTA,N/A,40,7,7,0,0x0000000000001000,\"{{allocation_id:1,addr:0x1000,size:100}}\",,\n"
        ),
    )
    .unwrap();
    let (err, peak) = decompose(&p, &[]);
    assert!(!err.contains("warning"), "{err}");
    assert_eq!(peak, "100");
}
