//! Bad input to `memscope report` (one line, exit 2, no file), a torn last row, msMemScope's
//! own dumps.

use super::*;

fn bad(args: &[&str], cwd: &Path) -> (i32, String) {
    let o = Command::new(memscope_bin())
        .arg("report")
        .args(args)
        .current_dir(cwd)
        .output()
        .expect("run memscope report");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn listing(dir: &Path) -> Vec<String> {
    let mut v = Vec::new();
    walk(dir, &mut |p| v.push(p.display().to_string()));
    v.sort();
    v
}

#[test]
fn bad_input_gives_one_line_exit_2_and_no_file() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    let header = "ID,Event,Event Type,Name,Timestamp(ns),Process Id,Thread Id,Device Id,Ptr,Attr,Call Stack(Python),Call Stack(C)\n";
    std::fs::write(d.join("notes.txt"), "this is no dump\n").unwrap();
    std::fs::create_dir_all(d.join("nodumps/sub")).unwrap();
    std::fs::write(d.join("nodumps/sub/readme.md"), "x").unwrap();
    let empty = d.join("empty/msmemscope_1_x_ascend/device_0/dump");
    std::fs::create_dir_all(&empty).unwrap();
    std::fs::write(empty.join("memscope_dump_1.csv"), header).unwrap();
    // good rows, then a bad one: the error comes after reading began
    std::fs::write(
        d.join("late.csv"),
        format!("{header}0,SYSTEM,ACL_INIT,N/A,100,7,7,N/A,N/A,,,\n1,MALLOC,HAL,N/A,abc,7,7,0,0x10,\"{{size:8}}\",,\n"),
    )
    .unwrap();
    std::fs::write(d.join("taken.html"), "keep me").unwrap();
    // a dump that gives a report, and a folder link pointing elsewhere (issue 17, M1)
    std::fs::write(
        d.join("good.csv"),
        format!("{header}0,SYSTEM,ACL_INIT,N/A,100,7,7,N/A,N/A,,,\n1,MALLOC,HAL,N/A,200,7,7,0,0x10,\"{{size:8}}\",,\n"),
    )
    .unwrap();
    let victim = t.path().join("victim");
    std::fs::create_dir(&victim).unwrap();
    std::os::unix::fs::symlink(&victim, d.join("dlink")).unwrap();
    // a run whose only process recorded nothing
    let idle = memscope_run(&[], &["/bin/true"], &[]);
    assert_eq!(idle.code(), 0, "{}", idle.stderr());
    let idle_dir = idle.out.path().to_str().unwrap().to_owned();

    let before = listing(d);
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["missing_dir"],
            "missing_dir: No such file or directory",
        ),
        (vec!["notes.txt"], "notes.txt:1:"),
        (vec!["nodumps"], "nodumps: no dump files"),
        (vec!["empty"], "empty: the run recorded no events"),
        (vec!["late.csv"], "late.csv:3: bad Timestamp(ns)"),
        (vec![&idle_dir], "no dump files"),
        (
            vec!["late.csv", "notes.txt", "empty"],
            "unexpected value 'empty'",
        ),
        (
            vec!["empty", "-o", "taken.html"],
            "taken.html: exists; not replaced",
        ),
        (
            vec!["empty", "-o", "no/such/dir/r.html"],
            "no such directory",
        ),
        (
            vec!["good.csv", "-o", "dlink/r.html"],
            "dlink is a symbolic link",
        ),
    ];
    for (args, want) in cases {
        let (code, err) = bad(&args, d);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: not one line: {err}");
        assert!(err.starts_with("memscope: "), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err:?} lacks {want:?}");
    }
    assert_eq!(listing(d), before, "a file was written or left behind");
    assert_eq!(
        std::fs::read_to_string(d.join("taken.html")).unwrap(),
        "keep me"
    );
    assert_eq!(std::fs::read_dir(&victim).unwrap().count(), 0);
}

#[test]
fn a_torn_last_row_is_left_out_of_the_report_with_a_warning() {
    // issue 17: a writer killed mid-row; the rows before it make the report
    let t = tempfile::tempdir().unwrap();
    let header = "ID,Event,Event Type,Name,Timestamp(ns),Process Id,Thread Id,Device Id,Ptr,Attr,Call Stack(Python),Call Stack(C)\n";
    let dump = t.path().join("torn.csv");
    std::fs::write(
        &dump,
        format!("{header}0,SYSTEM,ACL_INIT,N/A,100,7,7,N/A,N/A,,,\n1,MALLOC,HAL,N/A,200,7,7,0,0x10,\"{{size:8}}\",,\n2,FREE,HAL,N/A,30"),
    )
    .unwrap();
    let out = t.path().join("r.html");
    let o = report(&[&dump], &out);
    let err = String::from_utf8_lossy(&o.stderr);
    let warnings: Vec<&str> = err.lines().filter(|l| l.contains("warning")).collect();
    assert_eq!(warnings.len(), 1, "{err}");
    assert!(
        warnings[0].contains("torn.csv:4: the last row is incomplete")
            && warnings[0].contains("the 2 row(s) before it were read"),
        "{err}"
    );
    assert!(out.is_file());
}

#[test]
fn msmemscope_dumps_give_a_report() {
    let fx = repo_root().join("../shared/fixtures/msmemscope");
    if !fx.is_dir() {
        eprintln!("SKIP: {} not present", fx.display());
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let a = fx.join("memscope_dump_20250428113810.csv");
    let b = fx.join("memscope_dump_20250428113811.csv");
    let html = dir.path().join("fx.html");
    report(&[&a, &b], &html);
    let data = report_data(&html);
    let p = &data["runs"][0]["processes"];
    assert!(!p.as_array().unwrap().is_empty());
    assert!(
        p.as_array()
            .unwrap()
            .iter()
            .any(|p| p["leaks"]["hal_count"].as_u64().unwrap_or(0) > 0),
        "HAL blocks live at exit"
    );
    assert!(!data["compare"]["levels"].as_array().unwrap().is_empty());
}
