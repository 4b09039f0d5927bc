//! Issue 4: the HOST adapter — libc allocator events with C call stacks, from real C/C++
//! programs (and CPython) run under `memscope run --adapters host`.

use memscope_tests::*;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

/// Compiles `tests/programs/<name>.c|.cpp` with `flags` into `<name><suffix>` (no extra
/// libraries: these programs only need libc/libstdc++).
fn build(name: &str, suffix: &str, flags: &[&str]) -> PathBuf {
    let dir = profile_dir().join("test-programs");
    std::fs::create_dir_all(&dir).unwrap();
    let c = repo_root().join("tests/programs").join(format!("{name}.c"));
    let (src, cc) = if c.is_file() {
        (c, "cc")
    } else {
        (
            repo_root()
                .join("tests/programs")
                .join(format!("{name}.cpp")),
            "c++",
        )
    };
    let out = dir.join(format!("{name}{suffix}"));
    let tmp = private_name(&out);
    let o = Command::new(cc)
        .args(["-g", "-Wall"])
        .args(flags)
        .arg(&src)
        .arg("-o")
        .arg(&tmp)
        .args(["-lpthread", "-ldl"])
        .output()
        .expect("run the C compiler");
    assert!(
        o.status.success(),
        "compiling {name}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    std::fs::rename(&tmp, &out).unwrap();
    out
}

/// A private name next to `out` to compile to and rename from: tests running in parallel may
/// build the same program while another runs it ("Text file busy" on an in-place write).
fn private_name(out: &std::path::Path) -> PathBuf {
    static SEQ: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = out.file_name().unwrap().to_string_lossy();
    out.with_file_name(format!(".{name}.{}.{seq}", std::process::id()))
}

/// Compiles `tests/programs/<name>.c` into the shared object `out` (frame pointers, debug
/// information, no DT_SONAME).
fn build_lib(name: &str, out: &std::path::Path) -> PathBuf {
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    let src = repo_root().join("tests/programs").join(format!("{name}.c"));
    let tmp = private_name(out);
    let o = Command::new("cc")
        .args([
            "-g",
            "-Wall",
            "-O1",
            "-fno-omit-frame-pointer",
            "-shared",
            "-fPIC",
        ])
        .arg(&src)
        .arg("-o")
        .arg(&tmp)
        .output()
        .expect("run the C compiler");
    assert!(
        o.status.success(),
        "compiling {name}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    std::fs::rename(&tmp, out).unwrap();
    out.to_path_buf()
}

fn prog(name: &str) -> PathBuf {
    build(name, "", &["-O1", "-fno-omit-frame-pointer"])
}

fn host(rows: &[Row]) -> Vec<&Row> {
    rows.iter().filter(|r| r["Event Type"] == "HOST").collect()
}

fn size(r: &Row) -> u64 {
    attrs(r)["size"].parse().unwrap()
}

fn count(rows: &[&Row], event: &str, sz: u64) -> usize {
    rows.iter()
        .filter(|r| r["Event"] == event && size(r) == sz)
        .count()
}

fn run_host(args: &[&str], program: &[&str]) -> Run {
    let mut a = vec!["--adapters", "host"];
    a.extend_from_slice(args);
    memscope_run(&a, program, &[])
}

/// The real CPython binary (the `python3` on PATH may be a wrapper script).
fn python() -> String {
    let o = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("python3");
    String::from_utf8_lossy(&o.stdout).trim().to_owned()
}

#[test]
fn leak_of_three_blocks_is_reported_with_counts_bytes_and_functions() {
    for (suffix, flags) in [
        ("", &["-O1", "-fno-omit-frame-pointer"][..]),
        (
            "-nofp",
            &["-O2", "-fomit-frame-pointer", "-fno-optimize-sibling-calls"][..],
        ),
    ] {
        let p = build("host_leak", suffix, flags);
        let run = run_host(&["--call-stack", "c:16"], &[p.to_str().unwrap()]);
        assert_eq!(run.code(), 0, "{}", run.stderr());
        let rows = run.rows();
        let h = host(&rows);
        assert!(run
            .dumps(".csv")
            .iter()
            .all(|d| d.to_string_lossy().contains("device_cpu")));
        // MALLOC rows of the leak sites carry their function in Call Stack(C), innermost first.
        for site in ["leak_site_alpha", "leak_site_beta", "leak_site_gamma"] {
            let m: Vec<_> = h
                .iter()
                .filter(|r| r["Event"] == "MALLOC" && size(r) == 1024)
                .filter(|r| {
                    r["Call Stack(C)"]
                        .lines()
                        .next()
                        .is_some_and(|l| l.starts_with(site))
                })
                .collect();
            assert_eq!(
                m.len(),
                1,
                "{site}{suffix}: {:?}",
                h.iter()
                    .filter(|r| size(r) == 1024)
                    .map(|r| &r["Call Stack(C)"])
                    .collect::<Vec<_>>()
            );
            let stack = &m[0]["Call Stack(C)"];
            assert!(stack.contains("main"), "{stack}");
            assert!(stack.contains("host_leak.c:"), "file:line in {stack}");
            assert!(!stack.contains("memscope"), "no probe frames: {stack}");
        }
        let level2: Vec<_> = h
            .iter()
            .filter(|r| r["Call Stack(C)"].starts_with("leak_site_alpha"))
            .collect();
        assert!(
            level2[0]["Call Stack(C)"]
                .lines()
                .nth(1)
                .unwrap()
                .starts_with("level2"),
            "{}",
            level2[0]["Call Stack(C)"]
        );
        // The leak summary: one group per site, 1 block of 1024 bytes each, with the function.
        let err = run.stderr();
        for site in ["leak_site_alpha", "leak_site_beta", "leak_site_gamma"] {
            let i = err
                .find(&format!("        {site}"))
                .unwrap_or_else(|| panic!("{site} in report:\n{err}"));
            let head = err[..i].lines().last().unwrap();
            assert!(
                head.contains("1 block(s), 1024 bytes"),
                "{site}: {head}\n{err}"
            );
        }
        // Totals: every FREE matches a MALLOC; `total` is the running live sum.
        let mut live: HashMap<String, u64> = HashMap::new();
        let mut total = 0i64;
        for r in &h {
            let a = attrs(r);
            match r["Event"].as_str() {
                "MALLOC" => {
                    live.insert(a["allocation_id"].clone(), size(r));
                    total += size(r) as i64;
                }
                "FREE" => {
                    assert_eq!(live.remove(&a["allocation_id"]), Some(size(r)));
                    total -= size(r) as i64;
                }
                e => panic!("{e}"),
            }
            assert_eq!(a["total"].parse::<i64>().unwrap(), total);
        }
        let leaked: Vec<u64> = live.values().copied().filter(|s| *s == 1024).collect();
        assert_eq!(leaked.len(), 3, "three 1024-byte blocks live at exit");
    }
}

#[test]
fn realloc_chains_and_glibc_edge_cases() {
    let p = prog("host_realloc");
    let run = run_host(&[], &[p.to_str().unwrap()]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let rows = run.rows();
    let h = host(&rows);
    for (ev, sz, n) in [
        ("MALLOC", 101, 1),
        ("FREE", 101, 1),
        ("MALLOC", 202, 1),
        ("FREE", 202, 1),
        ("MALLOC", 30303, 1),
        ("FREE", 30303, 1),
        ("MALLOC", 404, 1),
        ("FREE", 404, 1),
        ("MALLOC", 505, 1),
        ("FREE", 505, 1),
        ("MALLOC", 606, 1),
        ("FREE", 606, 1),
    ] {
        assert_eq!(count(&h, ev, sz), n, "{ev} {sz}");
    }
    // The chain: each step frees the previous block and allocates a new one (new id), in order.
    let chain: Vec<(String, u64, String)> = h
        .iter()
        .filter(|r| [101, 202, 30303, 404].contains(&size(r)))
        .map(|r| {
            (
                r["Event"].clone(),
                size(r),
                attrs(r)["allocation_id"].clone(),
            )
        })
        .collect();
    let kinds: Vec<(&str, u64)> = chain.iter().map(|(e, s, _)| (e.as_str(), *s)).collect();
    assert_eq!(
        kinds,
        [
            ("MALLOC", 101),
            ("FREE", 101),
            ("MALLOC", 202),
            ("FREE", 202),
            ("MALLOC", 30303),
            ("FREE", 30303),
            ("MALLOC", 404),
            ("FREE", 404)
        ]
    );
    assert_ne!(
        chain[0].2, chain[2].2,
        "a realloc'd block gets a new allocation_id"
    );
    // malloc(0) is a block of size 0; free(NULL), failed allocations and the overflowing
    // reallocarray record nothing.
    assert!(count(&h, "MALLOC", 0) >= 1);
    assert!(h.iter().all(|r| size(r) < 1 << 40));
}

#[test]
fn every_alignment_function_is_recorded() {
    let p = prog("host_align");
    let run = run_host(&[], &[p.to_str().unwrap()]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let rows = run.rows();
    let h = host(&rows);
    for (sz, n, align) in [
        (1001, 2, 64),
        (1027, 1, 128),
        (1004, 1, 256),
        (1005, 1, 4096),
        (1006, 1, 4096),
    ] {
        let m: Vec<_> = h
            .iter()
            .filter(|r| r["Event"] == "MALLOC" && size(r) == sz)
            .collect();
        assert_eq!(m.len(), n, "MALLOC {sz}");
        assert_eq!(count(&h, "FREE", sz), n, "FREE {sz}");
        let addr = u64::from_str_radix(m[0]["Ptr"].trim_start_matches("0x"), 16).unwrap();
        if n == 1 {
            assert_eq!(addr % align, 0, "{sz} aligned to {align}");
        }
    }
    assert_eq!(
        count(&h, "MALLOC", 1002),
        0,
        "posix_memalign with a bad alignment records nothing"
    );
}

#[test]
fn sixteen_threads_times_100k_pairs_have_exact_totals() {
    let p = prog("host_threads");
    let t0 = Instant::now();
    let run = run_host(
        &["--events", "alloc,free"],
        &[p.to_str().unwrap(), "16", "100000"],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let rows = run.rows();
    let h = host(&rows);
    assert_eq!(count(&h, "MALLOC", 777), 1_600_000);
    assert_eq!(count(&h, "FREE", 777), 1_600_000);
    let tids: std::collections::BTreeSet<&str> = h
        .iter()
        .filter(|r| size(r) == 777)
        .map(|r| r["Thread Id"].as_str())
        .collect();
    assert_eq!(tids.len(), 16);
    assert!(!run.stderr().contains("DROPPED"), "{}", run.stderr());
    eprintln!("16x100k under memscope: {:?}", t0.elapsed());
}

#[test]
fn fork_and_exec_children_get_their_own_dumps() {
    let p = prog("host_fork");
    let run = run_host(&["--call-stack", "c:8"], &[p.to_str().unwrap()]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let mut by_pid: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for d in run.dumps(".csv") {
        assert!(d.to_string_lossy().contains("device_cpu"));
        for r in read_csv(&d) {
            if r["Event"] == "MALLOC" && r["Event Type"] == "HOST" {
                by_pid
                    .entry(r["Process Id"].clone())
                    .or_default()
                    .push(size(&r));
            }
        }
    }
    let with = |s: u64| {
        by_pid
            .iter()
            .filter(|(_, v)| v.contains(&s))
            .map(|(p, _)| p.clone())
            .collect::<Vec<_>>()
    };
    let (parent, forked, execd, execd_before) = (with(1111), with(2222), with(3333), with(4444));
    assert_eq!(parent.len(), 1, "{by_pid:?}");
    assert_eq!(forked.len(), 1);
    assert_eq!(execd.len(), 1);
    assert_ne!(parent, forked);
    assert_ne!(parent, execd);
    assert_ne!(forked, execd);
    assert_eq!(
        execd, execd_before,
        "the exec'd image keeps its pid's directory"
    );
    // Each process has its own output directory.
    let dirs: std::collections::BTreeSet<_> = run
        .dumps(".csv")
        .iter()
        .map(|d| {
            d.parent()
                .unwrap()
                .parent()
                .unwrap()
                .parent()
                .unwrap()
                .to_path_buf()
        })
        .collect();
    assert!(dirs.len() >= 3, "{dirs:?}");
    // The forked child's 1111 block is inherited, not allocated by it.
    assert!(!by_pid[&forked[0]].contains(&1111));
}

#[test]
fn exit_underscore_loses_nothing() {
    let p = prog("host_exit");
    let run = run_host(&[], &[p.to_str().unwrap(), "5000"]);
    assert_eq!(run.code(), 3, "{}", run.stderr());
    let rows = run.rows();
    assert_eq!(count(&host(&rows), "MALLOC", 4321), 5000);
}

#[test]
fn cpp_static_constructors_containers_and_exceptions() {
    let p = build("host_ctor", "", &["-O1", "-fno-omit-frame-pointer"]);
    let run = run_host(&["--call-stack", "c:16"], &[p.to_str().unwrap()]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let rows = run.rows();
    let h = host(&rows);
    let ctor: Vec<_> = h
        .iter()
        .filter(|r| r["Event"] == "MALLOC" && size(r) == 5555)
        .collect();
    assert_eq!(ctor.len(), 1, "the static constructor's new char[5555]");
    assert!(
        ctor[0]["Call Stack(C)"].contains("Global::Global"),
        "{}",
        ctor[0]["Call Stack(C)"]
    );
    assert!(
        ctor[0]["Call Stack(C)"]
            .lines()
            .next()
            .unwrap()
            .starts_with("operator new"),
        "{}",
        ctor[0]["Call Stack(C)"]
    );
    // 50 exceptions were thrown: each allocates its exception object.
    let exc = h
        .iter()
        .filter(|r| {
            r["Event"] == "MALLOC" && r["Call Stack(C)"].contains("__cxa_allocate_exception")
        })
        .count();
    assert!(exc >= 50, "{exc} exception allocations");
}

#[test]
fn sigkill_loses_nothing_already_recorded() {
    let p = prog("host_killme");
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pid");
    let out = tempfile::tempdir().unwrap();
    let child = Command::new(memscope_bin())
        .args(["run", "-o"])
        .arg(out.path())
        .args(["--adapters", "host", "--"])
        .arg(&p)
        .arg(&pidfile)
        .arg("300")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    let pid = loop {
        if let Ok(s) = std::fs::read_to_string(&pidfile) {
            break s.trim().parse::<i32>().unwrap();
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "program did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    // SAFETY-free: kill(2) through the libc crate.
    assert_eq!(unsafe_kill(pid), 0);
    let o = child.wait_with_output().unwrap();
    let run = Run { output: o, out };
    assert_eq!(run.code(), 128 + 9, "{}", run.stderr());
    let rows = run.rows();
    assert_eq!(count(&host(&rows), "MALLOC", 6666), 300);
    assert!(
        run.stderr().contains("HOST memory live at exit"),
        "leak summary of a killed job: {}",
        run.stderr()
    );
}

fn unsafe_kill(pid: i32) -> i32 {
    let o = Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap();
    if o.success() {
        0
    } else {
        -1
    }
}

#[test]
fn python_runs_under_the_host_adapter() {
    let py = python();
    let run = run_host(
        &["--call-stack", "c:16"],
        &[&py, "-c", "x = bytearray(7777777); print(len(x))"],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(run.stdout().trim(), "7777777");
    let rows = run.rows();
    let h = host(&rows);
    assert!(h.len() > 1000, "{} HOST rows", h.len());
    let big: Vec<_> = h
        .iter()
        .filter(|r| r["Event"] == "MALLOC" && (7777777..7777900).contains(&size(r)))
        .collect();
    assert_eq!(big.len(), 1);
    let st = &big[0]["Call Stack(C)"];
    assert!(
        st.contains("bytearray") || st.contains("PyByteArray"),
        "symbolised CPython frames: {st}"
    );
    assert!(run.stderr().contains("HOST memory live at exit"));
}

#[test]
fn threads_signals_deepbind_and_teardown_frees_are_safe() {
    let p = prog("host_safety");
    // A library opened with RTLD_DEEPBIND binds malloc/free to glibc directly (memscope does
    // not interpose dlopen): the program frees and reallocates blocks the tracer never saw,
    // and the library frees one the tracer saw allocated. The program must run exactly as it
    // does alone; those blocks need not be traced.
    let lib = build_lib(
        "host_dlib",
        &profile_dir().join("test-programs/libhost_dlib_deep.so"),
    );
    let args = [p.to_str().unwrap(), lib.to_str().unwrap()];
    let native = Command::new(args[0]).args(&args[1..]).output().unwrap();
    assert_eq!(
        native.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&native.stderr)
    );
    let run = run_host(&["--call-stack", "c:8"], &args);
    assert_eq!(run.code(), 0, "the job's exit code: {}", run.stderr());
    assert_eq!(run.stdout(), String::from_utf8_lossy(&native.stdout));
    assert!(!run.stderr().contains("panic"), "{}", run.stderr());
    let rows = run.rows();
    let h = host(&rows);
    assert_eq!(count(&h, "MALLOC", 8888), 200);
    assert_eq!(count(&h, "FREE", 8888), 200);
    assert_eq!(count(&h, "MALLOC", 9999), 200);
    assert_eq!(
        count(&h, "FREE", 9999),
        200,
        "frees made by thread-exit destructors are recorded"
    );
    assert_eq!(
        count(&h, "MALLOC", 1212),
        50,
        "allocations in a signal handler"
    );
    assert_eq!(
        count(&h, "MALLOC", 6666),
        100,
        "the program's own allocations are traced"
    );
    // Nothing that comes from the untraced blocks is reported as a problem.
    for log in walk_files(run.out.path(), ".log") {
        let text = std::fs::read_to_string(&log).unwrap();
        assert!(!text.contains("[WARN] HOST"), "{}: {text}", log.display());
    }
}

/// Files under `dir` whose name ends with `ext`.
fn walk_files(dir: &std::path::Path, ext: &str) -> Vec<PathBuf> {
    let mut v = Vec::new();
    walk(dir, &mut |p| {
        if p.to_string_lossy().ends_with(ext) {
            v.push(p.to_path_buf());
        }
    });
    v
}

#[test]
fn libraries_opened_after_start_are_symbolised_and_runpath_lookups_still_work() {
    // One copy of the library is opened by full path; another by bare name, which only the
    // program's own RUNPATH finds: glibc resolves it with the RUNPATH of the object that calls
    // dlopen, so memscope must not wrap dlopen (whether or not HOST is selected).
    let dir = profile_dir().join("test-programs");
    let full = build_lib("host_dlib", &dir.join("libhost_dlib.so"));
    let rp_dir = dir.join("host_dlopen_runpath");
    build_lib("host_dlib", &rp_dir.join("libhost_dlib_rp.so"));
    let rpath = format!("-Wl,-rpath,{},--enable-new-dtags", rp_dir.display());
    let p = build(
        "host_dlopen",
        "",
        &["-O1", "-fno-omit-frame-pointer", &rpath],
    );
    let args = [
        p.to_str().unwrap(),
        full.to_str().unwrap(),
        "libhost_dlib_rp.so",
    ];
    let native = Command::new(args[0]).args(&args[1..]).output().unwrap();
    assert_eq!(
        native.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&native.stderr)
    );
    let plain = memscope_run(&[], &args, &[]);
    assert_eq!(plain.code(), 0, "without HOST: {}", plain.stderr());
    assert_eq!(plain.stdout().trim(), "loaded");

    let run = run_host(&["--call-stack", "c:16"], &args);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(run.stdout().trim(), "loaded");
    let rows = run.rows();
    let h = host(&rows);
    for sz in [4321, 4322] {
        let m: Vec<_> = h
            .iter()
            .filter(|r| r["Event"] == "MALLOC" && size(r) == sz)
            .collect();
        assert_eq!(m.len(), 1, "{sz}");
        let stack = &m[0]["Call Stack(C)"];
        assert!(
            stack
                .lines()
                .next()
                .unwrap_or("")
                .starts_with("dlib_leak_site"),
            "{sz}: {stack}"
        );
        assert!(stack.contains("host_dlib.c:"), "{sz}: {stack}");
        assert!(stack.contains("leak_from"), "{sz}: {stack}");
        assert!(stack.contains("main"), "{sz}: {stack}");
    }
    let err = run.stderr();
    assert!(
        err.contains("        dlib_leak_site"),
        "leak summary:\n{err}"
    );
}

#[test]
fn host_is_off_unless_selected() {
    let p = prog("host_leak");
    let run = memscope_run(&[], &[p.to_str().unwrap()], &[]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(host(&run.rows()).is_empty());
    assert!(!run.stderr().contains("HOST memory"));
}

#[test]
fn statically_linked_programs_run_untraced_with_a_warning() {
    let dir = profile_dir().join("test-programs");
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("host_exit_static");
    let src = repo_root().join("tests/programs/host_exit.c");
    let ok = Command::new("cc")
        .arg("-static")
        .arg(&src)
        .arg("-o")
        .arg(&out)
        .status()
        .unwrap()
        .success();
    if !ok {
        eprintln!("no static libc: skipped");
        return;
    }
    let run = run_host(&[], &[out.to_str().unwrap(), "10"]);
    assert_eq!(run.code(), 3, "{}", run.stderr());
    assert!(
        run.stderr().contains("statically linked"),
        "{}",
        run.stderr()
    );
    assert!(host(&run.rows()).is_empty());
}

#[test]
fn a_foreign_allocator_preloaded_after_the_probe_is_traced_through() {
    // jemalloc in LD_PRELOAD: `memscope run` puts the probe first, so the hooks must forward to
    // jemalloc (dlsym(RTLD_NEXT)), never mix it with glibc. Skipped where it is not installed.
    let je = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2";
    if !std::path::Path::new(je).is_file() {
        eprintln!("{je} not installed: skipped");
        return;
    }
    // (host_align is not used: jemalloc has no pvalloc, so that program crashes under jemalloc
    // alone, with or without memscope.)
    for name in ["host_leak", "host_realloc", "host_safety"] {
        let p = prog(name);
        let run = memscope_run(
            &["--adapters", "host", "--call-stack", "c:8"],
            &[p.to_str().unwrap()],
            &[("LD_PRELOAD", je)],
        );
        assert_eq!(run.code(), 0, "{name}: {}", run.stderr());
        let rows = run.rows();
        let h = host(&rows);
        assert!(!h.is_empty(), "{name}");
        if name == "host_realloc" {
            assert_eq!(count(&h, "MALLOC", 30303), 1);
            assert_eq!(count(&h, "FREE", 606), 1);
        }
        if name == "host_leak" {
            assert_eq!(
                h.iter()
                    .filter(|r| size(r) == 1024 && r["Call Stack(C)"].starts_with("leak_site_"))
                    .count(),
                3
            );
        }
    }
}
