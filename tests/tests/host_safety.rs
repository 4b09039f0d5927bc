//! Issue 4: the HOST adapter is safe in awkward programs — signals, RTLD_DEEPBIND, thread
//! teardown, libraries opened after start, static binaries, foreign allocators — and is off
//! unless selected.

mod host_common;

use host_common::*;
use memscope_tests::*;

use std::path::PathBuf;
use std::process::Command;

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
    // the leak summary names the library's function (symbolised after its dlopen) as the site
    assert!(
        err.contains(" bytes at dlib_leak_site at ") && err.contains("host_dlib.c:"),
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
            // HOST rows in the dumps (issue 9 keeps them in the capture by default)
            &["--adapters", "host", "--host-rows", "--call-stack", "c:8"],
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
