//! Issue 11: the example adapter for a real third-party allocator, jemalloc
//! (`examples/adapter-jemalloc`, Rust SDK, outside the workspace), run against a program
//! linked with Debian's libjemalloc: its rows, owners (the arena), own Attr keys and C stacks
//! land in the dumps. Needs `libjemalloc-dev` (`.ci/run` installs it).

use memscope_tests::*;
use std::path::Path;

fn jemalloc_job() -> std::path::PathBuf {
    assert!(
        Path::new("/usr/include/jemalloc/jemalloc.h").is_file(),
        "jemalloc's headers are missing: install the Debian package libjemalloc-dev \
         (`apt-get install libjemalloc-dev`; .ci/run does)"
    );
    let src = repo_root().join("tests/programs/jemalloc_job.c");
    compile(&[&src], "jemalloc_job", &["-ljemalloc"], false)
}

#[test]
fn the_jemalloc_adapter_writes_rows_with_arena_owners_attrs_and_c_stacks() {
    let job = jemalloc_job();
    let lib = build_adapter_example("adapter-jemalloc", "memscope_jemalloc_adapter");
    let run = memscope_run(
        &[
            "--device",
            "npu,cpu",
            "--call-stack",
            "c:16",
            "--adapter-path",
            lib.to_str().unwrap(),
        ],
        &[job.to_str().unwrap()],
        &[],
    );
    assert_eq!(run.code(), 0, "{}\n{}", run.stdout(), run.stderr());
    let arena: String = run
        .stdout()
        .lines()
        .find_map(|l| l.strip_prefix("arena ").map(str::to_owned))
        .expect("the job's arena line");
    let rows = run.rows();
    let m = select(&rows, "MALLOC", "JEMALLOC");
    let f = select(&rows, "FREE", "JEMALLOC");
    // mallocx a, mallocx b, rallocx b → b2 (FREE b + MALLOC b2), mallocx c; sdallocx a, dallocx c
    assert_eq!((m.len(), f.len()), (4, 3), "{}", run.stderr());
    let a: Vec<_> = m.iter().map(|r| attrs(r)).collect();
    let sizes: Vec<&str> = a.iter().map(|x| x["size"].as_str()).collect();
    assert_eq!(sizes, ["4096", "1048576", "2097152", "256"]);
    assert_eq!(a[0]["owner"], "JEMALLOC@default");
    for x in &a[1..3] {
        assert_eq!(x["owner"], format!("JEMALLOC@arena{arena}"));
        assert_eq!(x["tcache"], "none");
    }
    assert_eq!(
        (a[3]["zero"].as_str(), a[3]["lg_align"].as_str()),
        ("1", "6")
    );
    assert!(a[0]["usable"].parse::<u64>().unwrap() >= 4096);
    assert!(m.iter().all(|r| r["Device Id"] == "cpu"));
    // stacks start at the program's code: jemalloc's caller, not the adapter or the probe
    assert!(
        m[1]["Call Stack(C)"].contains("kv_cache_alloc"),
        "{}",
        m[1]["Call Stack(C)"]
    );
    for r in &m {
        let s = &r["Call Stack(C)"];
        assert!(s.contains("main"), "{s}");
        let first = s.lines().next().unwrap_or("");
        assert!(
            !s.contains("memscope") && !first.contains("mallocx"),
            "adapter or probe frames on top:\n{s}"
        );
    }
    // frees pair with their blocks; b2 stays live (the leak)
    let fa: Vec<_> = f.iter().map(|r| attrs(r)).collect();
    assert_eq!(fa[0]["allocation_id"], a[1]["allocation_id"]);
    assert_eq!(fa[0]["size"], "1048576");
    let freed: Vec<&str> = fa.iter().map(|x| x["allocation_id"].as_str()).collect();
    assert!(!freed.contains(&a[2]["allocation_id"].as_str()));
}

#[test]
fn the_jemalloc_adapter_is_compliant() {
    let job = jemalloc_job().display().to_string();
    let lib = build_adapter_example("adapter-jemalloc", "memscope_jemalloc_adapter")
        .display()
        .to_string();
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    compliance::assert_adapter_compliance(&compliance::Case {
        name: "jemalloc".into(),
        on: s(&["--device", "npu,cpu", "--adapter-path", &lib]),
        off: s(&["--device", "npu,cpu"]),
        program: s(&[&job]),
        event_types: s(&["JEMALLOC"]),
        own_code: Some("adapter-jemalloc/src/lib.rs".into()),
        flood: Some((s(&[&job, "200000"]), 400_007)),
        ..Default::default()
    });
}
