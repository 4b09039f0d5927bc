//! Issue 17, `memscope run` under hostile and broken input (report `bad-input-2026-12-01.md`):
//! the job's exit code whatever happens to memscope's stdio (H1), bounded config reads (H2), no
//! symlink followed where memscope writes (M1), output paths checked before launch (M5), clear
//! messages (L7) and strict option lists (L8).

use memscope_tests::*;
use std::path::Path;
use std::process::{Command, Stdio};

fn memscope(args: &[&str]) -> std::process::Output {
    Command::new(memscope_bin()).args(args).output().unwrap()
}

/// `memscope run -q --adapters host -o OUT -- JOB…`'s arguments.
fn host_run<'a>(out: &'a str, job: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec!["run", "-q", "--adapters", "host", "-o", out, "--"];
    v.extend_from_slice(job);
    v
}

fn assert_usage_error(o: &std::process::Output, needle: &str) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "stderr: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err:?}");
    assert!(err.contains(needle), "{needle:?} not in {err:?}");
}

fn spools(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(".memscope_spool"))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn the_job_exit_code_survives_a_full_or_closed_stderr_and_no_spool_is_left() {
    let prog = program("mstx_basic");
    let job = format!("{} 3; exit 5", prog.display());
    // with --report too: the report's lines go to the same broken stderr
    for (quiet, report) in [(false, false), (true, false), (false, true)] {
        let out = tempfile::tempdir().unwrap();
        let mut args = vec![
            "run",
            "--adapters",
            "mstx",
            "-o",
            out.path().to_str().unwrap(),
        ];
        if quiet {
            args.push("-q");
        }
        if report {
            args.push("--report");
        }
        args.extend(["--", "sh", "-c", &job]);
        // stderr on a full device (ENOSPC on every write)
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let st = Command::new(memscope_bin())
            .args(&args)
            .stderr(full)
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert_eq!(
            st.code(),
            Some(5),
            "2>/dev/full, quiet {quiet}, report {report}"
        );
        assert!(spools(out.path()).is_empty(), "{:?}", spools(out.path()));
        // stderr a pipe whose reader is gone (EPIPE), as in `2>&1 | true`
        let mut child = Command::new(memscope_bin())
            .args(&args)
            .stderr(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stderr.take());
        drop(child.stdout.take());
        assert_eq!(child.wait().unwrap().code(), Some(5), "closed pipe");
        assert!(spools(out.path()).is_empty());
        // the dumps were still written
        let mut dumps = 0;
        walk(out.path(), &mut |p| {
            dumps += p.to_string_lossy().ends_with(".csv") as usize;
        });
        assert!(dumps >= 2, "one per run");
        let mut reports = 0;
        walk(out.path(), &mut |p| {
            reports += p.to_string_lossy().ends_with(".html") as usize;
        });
        assert_eq!(reports, if report { 2 } else { 0 }, "one report per run");
    }
    // a usage error with a full stderr still exits 2 (no panic: 101)
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let st = Command::new(memscope_bin())
        .args(["run", "--events", "bogus", "--", "true"])
        .stderr(full)
        .status()
        .unwrap();
    assert_eq!(st.code(), Some(2));
}

#[test]
fn config_library_and_program_reads_are_bounded_under_a_memory_cap() {
    // /proc/self/pagemap has st_size 0 and grew memscope to 23 GiB; 2 GB of address space is
    // plenty for a bounded read, and a failed allocation would abort (134), not exit 2
    let o = Command::new("sh")
        .args([
            "-c",
            "ulimit -v 2000000; exec \"$0\" run --config /proc/self/pagemap -- true",
        ])
        .arg(memscope_bin())
        .output()
        .unwrap();
    assert_usage_error(&o, "--config /proc/self/pagemap: larger than 1 MiB");
    // the plugin check and the static-binary check read files by their size: /proc is empty
    for (args, needle) in [
        (
            "run --adapter-path /proc/self/pagemap -- true",
            "--adapter-path /proc/self/pagemap: not a shared library",
        ),
        (
            "run -- /proc/self/pagemap",
            "program \"/proc/self/pagemap\" is not executable",
        ),
    ] {
        let o = Command::new("sh")
            .args(["-c", &format!("ulimit -v 2000000; exec \"$0\" {args}")])
            .arg(memscope_bin())
            .output()
            .unwrap();
        assert_usage_error(&o, needle);
    }
    let d = tempfile::tempdir().unwrap();
    let fifo = d.path().join("fifo");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let o = memscope(&["run", "--config", fifo.to_str().unwrap(), "--", "true"]);
    assert_usage_error(&o, "not a regular file");
}

#[test]
fn symlinks_as_or_inside_the_output_path_are_refused_before_launch() {
    let d = tempfile::tempdir().unwrap();
    let real = d.path().join("real");
    std::fs::create_dir(&real).unwrap();
    std::os::unix::fs::symlink(&real, d.path().join("link")).unwrap();
    std::os::unix::fs::symlink(d.path().join("gone"), d.path().join("dangling")).unwrap();
    let marker = d.path().join("launched");
    for (o, needle) in [
        ("link", "is a symbolic link"),
        ("link/sub", "is a symbolic link"),
        ("dangling", "is a dangling symbolic link"),
    ] {
        let out = d.path().join(o);
        let r = memscope(&[
            "run",
            "-o",
            out.to_str().unwrap(),
            "--",
            "touch",
            marker.to_str().unwrap(),
        ]);
        assert_usage_error(&r, needle);
        assert!(!marker.exists(), "nothing launched for -o {o}");
    }
    assert_eq!(
        std::fs::read_dir(&real).unwrap().count(),
        0,
        "nothing written through the link"
    );
    assert!(!d.path().join("gone").exists());
}

#[test]
fn a_symlink_planted_as_a_process_directory_is_not_followed() {
    let d = tempfile::tempdir().unwrap();
    let shared = d.path().join("shared");
    let victim = d.path().join("victim");
    std::fs::create_dir(&shared).unwrap();
    std::fs::create_dir(&victim).unwrap();
    let prog = program("mstx_basic");
    // the job plants msmemscope_<its pid>_<ts>_ascend → victim for this second and the
    // neighbouring ones, then becomes a traced program with the same pid
    let plant = format!(
        "now=$(date +%s); for s in -1 0 1 2; do \
           ln -s '{v}' '{sh}'/msmemscope_$$_$(date -d @$((now + s)) +%Y%m%d%H%M%S)_ascend; \
         done; exec '{p}' 3",
        v = victim.display(),
        sh = shared.display(),
        p = prog.display()
    );
    let o = Command::new(memscope_bin())
        .args(["run", "--adapters", "mstx", "-o"])
        .arg(&shared)
        .args(["--", "sh", "-c", &plant])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    // the job succeeded, its outputs could not be written: 2, the spool kept for recover
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("is a symbolic link"), "{err}");
    assert!(err.contains("spool") && err.contains("kept"), "{err}");
    assert_eq!(
        std::fs::read_dir(&victim).unwrap().count(),
        0,
        "nothing written to the link's target"
    );
}

#[test]
fn an_output_path_the_probe_cannot_use_is_refused_before_launch() {
    let d = tempfile::tempdir().unwrap();
    let base = d.path().to_str().unwrap().len() + 1;
    let limit = memscope_dump::layout::MAX_OUTPUT_PATH;
    // relative components of 200 bytes, to just past the limit (absolute)
    let deep = |total: usize| -> String {
        let mut rel = String::new();
        while base + rel.len() < total {
            if !rel.is_empty() {
                rel.push('/');
            }
            let n = (total - base - rel.len()).min(200);
            rel.push_str(&"d".repeat(n));
        }
        rel
    };
    let marker = d.path().join("launched");
    let too_long = deep(limit + 1);
    assert_eq!(base + too_long.len(), limit + 1);
    let o = Command::new(memscope_bin())
        .current_dir(d.path())
        .args(["run", "-o", &too_long, "--", "touch"])
        .arg(&marker)
        .output()
        .unwrap();
    assert_usage_error(&o, &format!("at most {limit} fit"));
    assert!(!marker.exists());
    // at the limit the job is traced: the probe takes the spool and the dumps fit
    let at = deep(limit);
    let prog = program("mstx_basic");
    let o = Command::new(memscope_bin())
        .current_dir(d.path())
        .args(["run", "--adapters", "mstx", "-o", &at, "--"])
        .arg(&prog)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(err.contains("1 process(es) recorded events"), "{err}");
    assert!(!err.contains("passive"), "{err}");
}

#[test]
fn unclear_messages_of_run_are_clear() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("adir");
    std::fs::create_dir(&dir).unwrap();
    assert_usage_error(
        &memscope(&["run", "--", dir.to_str().unwrap()]),
        "is a directory",
    );
    // a file without execute permission: refused before the output directory is made
    let plain = d.path().join("plain.txt");
    std::fs::write(&plain, "data\n").unwrap();
    let out = d.path().join("never");
    assert_usage_error(
        &memscope(&[
            "run",
            "-o",
            out.to_str().unwrap(),
            "--",
            plain.to_str().unwrap(),
        ]),
        "is not executable",
    );
    assert!(!out.exists(), "no output directory left behind");
    // a script without a #! line runs with /bin/sh, as shells run it
    let script = d.path().join("noshebang");
    std::fs::write(&script, "echo from-sh\nexit 3\n").unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let run = memscope_run(
        &["-q", "--adapters", "mstx"],
        &[script.to_str().unwrap()],
        &[],
    );
    assert_eq!(run.code(), 3, "{}", run.stderr());
    assert!(run.stdout().contains("from-sh"));
    // config.json: a BOM is accepted; an array is not an object
    let cfg = d.path().join("config.json");
    std::fs::write(&cfg, "\u{feff}{\"events\": \"alloc\"}").unwrap();
    let run = memscope_run(
        &[
            "-q",
            "--adapters",
            "mstx",
            "--config",
            cfg.to_str().unwrap(),
        ],
        &["true"],
        &[],
    );
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let arr = r#"["alloc","op",null,null,null,null,"/tmp/arr",null,null,null,null,null,null]"#;
    std::fs::write(&cfg, arr).unwrap();
    assert_usage_error(
        &memscope(&["run", "--config", cfg.to_str().unwrap(), "--", "true"]),
        "config.json must be a JSON object ({...}), this is an array",
    );
}

#[test]
fn contradictory_or_empty_option_lists_are_refused() {
    let marker = tempfile::tempdir().unwrap();
    let touched = marker.path().join("launched");
    for (flag, value, needle) in [
        ("--events", "", "no event type named"),
        ("--events", ",", "no event type named"),
        ("--events", "none,alloc", "none cannot be combined"),
        ("--analysis", "none,leaks", "none cannot be combined"),
        ("--analysis", "", "no analysis named"),
        ("--level", "", "no level named"),
        ("--call-stack", "c:0,c:5", "c given more than once"),
    ] {
        let o = memscope(&["run", flag, value, "--", "touch", touched.to_str().unwrap()]);
        assert_usage_error(&o, needle);
    }
    assert!(!touched.exists());
}

#[test]
fn a_summary_json_path_that_is_a_link_a_fifo_or_a_device_is_refused_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("target.json");
    std::fs::write(&target, "{}").unwrap();
    let link = dir.path().join("link.json");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let fifo = dir.path().join("fifo.json");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    for p in [&link, &fifo] {
        let o = memscope(&[
            "run",
            "-o",
            dir.path().join("out").to_str().unwrap(),
            "--summary-json",
            p.to_str().unwrap(),
            "--",
            "true",
        ]);
        assert_usage_error(&o, "not a regular file");
    }
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "{}");
    use std::os::unix::fs::FileTypeExt;
    assert!(std::fs::symlink_metadata(&fifo)
        .unwrap()
        .file_type()
        .is_fifo());
}

#[test]
fn an_output_directory_removed_under_the_run_makes_it_exit_non_zero() {
    // the job moves memscope's output directory (with the spool in it) away half way through
    // (at once, where `rm -rf` races the collector's new files): the capture and the index
    // cannot be written and there is nothing left to write them again from
    let prog = program("host_leak");
    let root = tempfile::tempdir().unwrap();
    let out = root.path().join("out");
    // or empties the spool (its run.json, which `memscope recover` needs, goes with it)
    for step in ["mv {o} {o}.gone", "rm -rf {o}/.memscope_spool_*/*"] {
        let step = step.replace("{o}", &out.display().to_string());
        let job = format!("{p}; {step}; {p}", p = prog.display());
        let o = memscope(&host_run(out.to_str().unwrap(), &["sh", "-c", &job]));
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{step}: {err}");
        assert!(
            err.contains("was removed, emptied or moved away while the run went on"),
            "{step}: {err}"
        );
        assert!(
            !err.contains("memscope recover"),
            "no advice that cannot work: {err}"
        );
    }
}

#[test]
fn a_run_index_that_cannot_be_written_makes_the_run_exit_non_zero() {
    let prog = program("host_leak");
    let out = tempfile::tempdir().unwrap();
    // a directory where the index goes
    std::fs::create_dir(out.path().join("memscope_run.json")).unwrap();
    let o = memscope(&host_run(
        out.path().to_str().unwrap(),
        &[prog.to_str().unwrap()],
    ));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "stderr: {err}");
    assert!(err.contains("run index"), "{err}");
    // the dumps are written all the same
    assert_eq!(entries(out.path(), "msmemscope_").len(), 1, "stderr: {err}");
}

#[test]
fn an_output_directory_that_turns_read_only_keeps_the_spool_for_recover() {
    // root writes anywhere: the run goes as user nobody (setpriv), as a user's would
    let root = Command::new("id").arg("-u").output().unwrap();
    let has_setpriv = Command::new("setpriv").arg("--version").output().is_ok();
    if String::from_utf8_lossy(&root.stdout).trim() != "0" || !has_setpriv {
        eprintln!("skipped: needs root and setpriv to run the job as nobody");
        return;
    }
    let prog = program("host_leak");
    let d = tempfile::tempdir().unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let out = d.path().join("E");
    let as_nobody = |args: &[&str]| {
        Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(memscope_bin())
            .args(args)
            .current_dir(d.path())
            .output()
            .unwrap()
    };
    // the job makes the output directory read-only before memscope creates its directory
    let job = format!("chmod a-w {}; {}", out.display(), prog.display());
    let o = as_nobody(&host_run("E", &["sh", "-c", &job]));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("Permission denied"), "{err}");
    assert!(err.contains("kept: `memscope recover"), "{err}");
    assert_eq!(spools(&out).len(), 1, "the spool is kept whole: {err}");
    // writable again: recover writes what the run could not
    std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o755)).unwrap();
    let o = as_nobody(&["recover", "E"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(!entries(&out, "msmemscope_").is_empty(), "{err}");
    assert!(spools(&out).is_empty(), "{err}");
}
