//! Issue 36: the ACL stream and event calls a cross-stream check needs — creates and destroys,
//! `aclrtRecordEvent`, `aclrtStreamWaitEvent`, the three synchronisations — are SYSTEM rows
//! with their handles, and each kernel launch carries its stream, under `memscope run` on the
//! sim-npu stand-ins (`tests/programs/acl_streams.c`).

use memscope_tests::*;
use std::path::{Path, PathBuf};

fn streams_program() -> PathBuf {
    let src = repo_root().join("tests/programs/acl_streams.c");
    compile(&[&src], "acl_streams", ACL_LIBS, false)
}

fn run_ok(args: &[&str], prog: &Path) -> Run {
    let run = memscope_run(args, &[prog.to_str().unwrap()], &[]);
    assert_eq!(run.code(), 0, "{}\n{}", run.stdout(), run.stderr());
    assert!(run.stdout().contains("streams ok"), "{}", run.stdout());
    run
}

/// `<name> 0x…` from the program's stdout, as the dumps spell a handle (`0x%x`).
fn handle(stdout: &str, name: &str) -> String {
    let v = stdout
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name} 0x")))
        .unwrap_or_else(|| panic!("{name} not printed: {stdout}"));
    format!("0x{:x}", u64::from_str_radix(v.trim(), 16).unwrap())
}

const ORDER_TYPES: [&str; 10] = [
    "STREAM_CREATE",
    "STREAM_DESTROY",
    "EVENT_CREATE",
    "EVENT_DESTROY",
    "EVENT_RECORD",
    "STREAM_WAIT_EVENT",
    "STREAM_SYNC",
    "EVENT_SYNC",
    "DEVICE_SYNC",
    "KERNEL_LAUNCH",
];

/// `(Event, Event Type, Name, Device Id, Attr)` of the stream, event and launch rows, in ID
/// order.
fn order_rows(rows: &[Row]) -> Vec<(String, String, String, String, String)> {
    let mut v: Vec<&Row> = rows
        .iter()
        .filter(|r| ORDER_TYPES.contains(&r["Event Type"].as_str()))
        .collect();
    v.sort_by_key(|r| r["ID"].parse::<u64>().unwrap());
    v.iter()
        .map(|r| {
            (
                r["Event"].clone(),
                r["Event Type"].clone(),
                r["Name"].clone(),
                r["Device Id"].clone(),
                r["Attr"].clone(),
            )
        })
        .collect()
}

#[test]
fn stream_and_event_calls_are_system_rows_in_call_order_and_launches_carry_their_stream() {
    let run = run_ok(
        &[
            "--adapters",
            "acl",
            "--level",
            "kernel",
            "--events",
            "alloc,free,launch",
        ],
        &streams_program(),
    );
    let out = run.stdout();
    let (s1, s2, e) = (handle(&out, "s1"), handle(&out, "s2"), handle(&out, "e"));
    assert!(s1 != s2 && s1 != "0x0" && e != "0x0", "{out}");
    let sys = |t: &str, n: &str, a: String| {
        (
            "SYSTEM".to_owned(),
            t.to_owned(),
            n.to_owned(),
            "0".to_owned(),
            a,
        )
    };
    let launch = |n: &str, s: &str, id: &str, task: &str| {
        (
            "KERNEL_LAUNCH".to_owned(),
            "KERNEL_LAUNCH".to_owned(),
            n.to_owned(),
            "0".to_owned(),
            format!("{{streamId:{id},taskId:{task},stream:{s}}}"),
        )
    };
    let got = order_rows(&run.rows());
    // the stand-in runtime numbers created streams from 1 and tasks per process from 1
    let task = |i: usize| {
        let a = &got[i].4;
        a.split("taskId:")
            .nth(1)
            .unwrap()
            .split(',')
            .next()
            .unwrap()
            .to_owned()
    };
    assert_eq!(got.len(), 14, "{got:#?}");
    let expected = vec![
        sys(
            "STREAM_CREATE",
            "aclrtCreateStream",
            format!("{{stream:{s1}}}"),
        ),
        sys(
            "STREAM_CREATE",
            "aclrtCreateStream",
            format!("{{stream:{s2}}}"),
        ),
        sys("EVENT_CREATE", "aclrtCreateEvent", format!("{{event:{e}}}")),
        launch("K_producer", &s1, "1", &task(3)),
        sys(
            "EVENT_RECORD",
            "aclrtRecordEvent",
            format!("{{stream:{s1},event:{e}}}"),
        ),
        sys(
            "STREAM_WAIT_EVENT",
            "aclrtStreamWaitEvent",
            format!("{{stream:{s2},event:{e}}}"),
        ),
        launch("K_consumer", &s2, "2", &task(6)),
        launch("K_default", "0x0", "0", &task(7)),
        sys(
            "STREAM_SYNC",
            "aclrtSynchronizeStream",
            format!("{{stream:{s2}}}"),
        ),
        sys(
            "EVENT_SYNC",
            "aclrtSynchronizeEvent",
            format!("{{event:{e}}}"),
        ),
        sys("DEVICE_SYNC", "aclrtSynchronizeDevice", String::new()),
        sys(
            "EVENT_DESTROY",
            "aclrtDestroyEvent",
            format!("{{event:{e}}}"),
        ),
        sys(
            "STREAM_DESTROY",
            "aclrtDestroyStream",
            format!("{{stream:{s2}}}"),
        ),
        sys(
            "STREAM_DESTROY",
            "aclrtDestroyStream",
            format!("{{stream:{s1}}}"),
        ),
    ];
    assert_eq!(got, expected, "the failed calls (a NULL event) give no row");
}

#[test]
fn stream_and_event_rows_go_to_the_sqlite_dump_alike() {
    let prog = streams_program();
    let run = run_ok(
        &[
            "--adapters",
            "acl",
            "--level",
            "kernel",
            "--events",
            "alloc,free,launch",
            "--format",
            "db",
        ],
        &prog,
    );
    let e = handle(&run.stdout(), "e");
    let rows: Vec<Row> = run.dumps(".db").iter().flat_map(|p| read_db(p)).collect();
    let got = order_rows(&rows);
    let types: Vec<&str> = got.iter().map(|r| r.1.as_str()).collect();
    assert_eq!(
        types,
        [
            "STREAM_CREATE",
            "STREAM_CREATE",
            "EVENT_CREATE",
            "KERNEL_LAUNCH",
            "EVENT_RECORD",
            "STREAM_WAIT_EVENT",
            "KERNEL_LAUNCH",
            "KERNEL_LAUNCH",
            "STREAM_SYNC",
            "EVENT_SYNC",
            "DEVICE_SYNC",
            "EVENT_DESTROY",
            "STREAM_DESTROY",
            "STREAM_DESTROY",
        ]
    );
    assert!(got[4].4.contains(&e), "{:?}", got[4]);
    assert!(got[7].4.contains("0x0"), "the default stream: {:?}", got[7]);
}

#[test]
fn stream_and_event_rows_are_written_only_when_launches_are() {
    let prog = streams_program();
    for args in [
        &["--adapters", "acl"][..],
        &[
            "--adapters",
            "acl",
            "--level",
            "kernel",
            "--events",
            "alloc,free",
        ][..],
        &[
            "--adapters",
            "hal",
            "--level",
            "kernel",
            "--events",
            "alloc,free,launch",
        ][..],
    ] {
        let run = run_ok(args, &prog);
        assert!(order_rows(&run.rows()).is_empty(), "{args:?}");
    }
}

/// Runs `tests/python/npu_streams.py` (`extra`: its arguments after the sim-npu directory).
fn python_job(extra: &[&str]) -> Run {
    let script = repo_root().join("tests/python/npu_streams.py");
    let (py, sim) = (python3(), sim_npu_dir());
    let mut prog = vec![
        py.to_str().unwrap().to_owned(),
        script.to_str().unwrap().to_owned(),
        sim.to_str().unwrap().to_owned(),
    ];
    prog.extend(extra.iter().map(|a| a.to_string()));
    let prog: Vec<&str> = prog.iter().map(String::as_str).collect();
    let run = memscope_run(
        &[
            "--adapters",
            "acl",
            "--level",
            "kernel",
            "--events",
            "alloc,free,launch",
        ],
        &prog,
        &[],
    );
    assert_eq!(run.code(), 0, "{}\n{}", run.stdout(), run.stderr());
    run
}

#[test]
fn the_probes_own_device_synchronisation_of_a_watch_dump_is_no_row() {
    let run = python_job(&["watch"]);
    assert!(run.stdout().contains("watch 0"), "{}", run.stdout());
    let syncs = order_rows(&run.rows())
        .into_iter()
        .filter(|r| r.1 == "DEVICE_SYNC")
        .count();
    assert_eq!(syncs, 1, "only the job's own aclrtSynchronizeDevice");
}

#[test]
fn the_python_demo_helper_calls_the_stream_and_event_functions_and_each_is_a_row() {
    let run = python_job(&[]);
    let out = run.stdout();
    assert!(out.contains("streams ok"), "{out}");
    let (s, e) = (handle(&out, "s"), handle(&out, "e"));
    let got: Vec<(String, String)> = order_rows(&run.rows())
        .into_iter()
        .map(|r| (r.1, r.4))
        .collect();
    let p = |t: &str, a: String| (t.to_owned(), a);
    assert_eq!(
        got,
        [
            p("STREAM_CREATE", format!("{{stream:{s}}}")),
            p("EVENT_CREATE", format!("{{event:{e}}}")),
            p("EVENT_RECORD", format!("{{stream:{s},event:{e}}}")),
            p("STREAM_WAIT_EVENT", format!("{{stream:0x0,event:{e}}}")),
            p("STREAM_SYNC", format!("{{stream:{s}}}")),
            p("EVENT_SYNC", format!("{{event:{e}}}")),
            p("DEVICE_SYNC", String::new()),
            p("EVENT_DESTROY", format!("{{event:{e}}}")),
            p("STREAM_DESTROY", format!("{{stream:{s}}}")),
        ]
    );
}
