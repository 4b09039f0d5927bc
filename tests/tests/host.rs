//! Issue 4: the HOST adapter — libc allocator events with C call stacks, from real C/C++
//! programs (and CPython) run under `memscope run --adapters host`.

mod host_common;

use host_common::*;
use memscope_tests::*;
use std::collections::{BTreeMap, HashMap};

use std::process::Command;
use std::time::{Duration, Instant};

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
        // The leak summary: one line per site (the first frame of the program's own code, its
        // caller and the rule), 1 block of 1024 bytes each.
        let err = run.stderr();
        let live = err
            .split_once("HOST memory live at exit")
            .unwrap_or_else(|| panic!("{err}"))
            .1;
        for site in ["leak_site_alpha", "leak_site_beta", "leak_site_gamma"] {
            let head = live
                .lines()
                .find(|l| l.contains(&format!(" bytes at {site} at ")))
                .unwrap_or_else(|| panic!("{site} in report:\n{err}"));
            assert!(
                head.contains("1 block(s), 1024 bytes")
                    && head.contains(" ← ")
                    && head.ends_with("[first frame in your code, C stack]"),
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
        // `memscope analyze leaks` over the dump says what the run said of HOST memory
        let dump = &run.dumps(".csv")[0];
        let o = Command::new(memscope_bin())
            .args(["analyze", "leaks", "--full"])
            .arg(dump)
            .output()
            .unwrap();
        let offline = assert_ok(&o, "analyze leaks");
        let section = |text: &str, title: &str| -> Vec<String> {
            let at = text
                .find(title)
                .unwrap_or_else(|| panic!("{title} in:\n{text}"));
            text[at..]
                .lines()
                .take_while(|l| !l.trim().is_empty())
                .map(|l| l.trim().trim_end_matches(" ====").trim_end_matches(':'))
                .map(str::to_owned)
                .collect()
        };
        for title in ["HOST peak (pid", "HOST memory live at exit (pid"] {
            assert_eq!(
                section(&offline, title)[0],
                section(&err, title)[0],
                "{title}: offline\n{offline}\nrun\n{err}"
            );
        }
        let live = section(&offline, "HOST memory live at exit (pid");
        for site in ["leak_site_alpha", "leak_site_beta", "leak_site_gamma"] {
            assert!(
                live.iter()
                    .any(|l| l.starts_with("1 block(s), 1024 bytes at ") && l.contains(site)),
                "{site}: {live:?}"
            );
        }
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
        .args(["--adapters", "host", "--host-rows", "--"])
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
fn blocks_from_before_a_deferred_window_are_written_once_and_not_summarised() {
    // issue 26: with --host-rows the block live at memscope_start() is written once (shadow)
    // and its FREE in the window pairs with it; the HOST summary, on the rows or on the fast
    // path, lists the window's leak only
    let p = prog("host_history");
    let deferred = ["--collect-mode", "deferred"];
    let run = run_host(&deferred, &[p.to_str().unwrap()]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let rows = run.rows();
    let h = host(&rows);
    let of = |sz: u64| -> Vec<String> {
        h.iter()
            .filter(|r| size(r) == sz)
            .map(|r| {
                let shadow = attrs(r).get("shadow").is_some_and(|v| v == "true");
                format!("{}{}", r["Event"], if shadow { " history" } else { "" })
            })
            .collect()
    };
    assert_eq!(of(777777), ["MALLOC history"]);
    assert_eq!(of(111111), ["MALLOC history", "FREE"]);
    assert!(of(222222).is_empty(), "made and freed before the window");
    assert_eq!(
        of(333333),
        ["MALLOC", "FREE"],
        "its FREE after stop() is written"
    );
    assert_eq!(of(555555), ["MALLOC"]);
    let fast = memscope_run(
        &["--adapters", "host", "--collect-mode", "deferred"],
        &[p.to_str().unwrap()],
        &[],
    );
    assert_eq!(fast.code(), 0, "{}", fast.stderr());
    for r in [&run, &fast] {
        let err = r.stderr();
        assert!(err.contains("555555 bytes"), "the window's leak:\n{err}");
        assert!(
            !err.contains("777777"),
            "no history block in the summary:\n{err}"
        );
    }
}
