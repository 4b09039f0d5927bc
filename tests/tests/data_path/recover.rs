//! `memscope recover` and outputs that cannot be written: a spool is removed only once
//! everything in it is written; a damaged one is kept, with what could be read written.

use super::summary_rows;
use memscope_tests::*;
use std::path::{Path, PathBuf};
use std::process::Command;

#[test]
fn recover_of_a_directory_that_is_not_a_spool_fails_with_one_line() {
    let d = tempfile::tempdir().unwrap();
    let (code, err) = recover(d.path());
    assert_eq!(code, 2);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("not a memscope spool"), "{err}");
    let spool = d.path().join(".memscope_spool_1");
    std::fs::create_dir(&spool).unwrap();
    let (code, err) = recover(d.path());
    assert_eq!(code, 2);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("no run.json"), "{err}");
}

/// A run whose memscope (not its job) has a 1 MiB file-size limit: its dump stops early.
fn limited_run() -> Run {
    limited_run_with("")
}

/// [`limited_run`] with more options of `memscope run` (`--format db`).
fn limited_run_with(opts: &str) -> Run {
    let prog = program("mstx_many");
    let out = tempfile::tempdir().unwrap();
    // the soft limit only, lifted again for the job: its stream in the spool stays whole
    let o = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "ulimit -S -f 1024; exec {} run --adapters mstx {opts} -o {} -- sh -c 'ulimit -S -f unlimited; exec {} 30000 unique'",
            memscope_bin().display(),
            out.path().display(),
            prog.display()
        ))
        .output()
        .unwrap();
    Run { output: o, out }
}

/// The run's spool and the stream of the job's marks (its largest: `sh` wrote the other).
fn spool_and_stream(out: &Path) -> (PathBuf, PathBuf) {
    let spools = entries(out, ".memscope_spool_");
    assert_eq!(spools.len(), 1, "{spools:?}");
    let stream = std::fs::read_dir(&spools[0])
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "stream"))
        .max_by_key(|p| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0))
        .expect("a stream");
    (spools[0].clone(), stream)
}

/// Rows of the CSV dumps of the process directories directly under `out`.
fn top_level_rows(out: &Path) -> usize {
    let mut n = 0;
    for d in entries(out, "msmemscope_") {
        walk(&d, &mut |p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if name.starts_with("memscope_dump_") && name.ends_with(".csv") {
                n += read_csv(p).len();
            }
        });
    }
    n
}

fn recover(out: &Path) -> (i32, String) {
    let o = Command::new(memscope_bin())
        .arg("recover")
        .arg(out)
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn a_file_size_limit_stops_one_file_keeps_the_spool_and_exits_2_and_recover_then_writes_every_row()
{
    let run = limited_run();
    let err = run.stderr();
    assert_eq!(run.code(), 2, "{err}");
    assert!(err.contains("file-size limit"), "{err}");
    assert!(err.contains("memscope recover"), "{err}");
    let rows = top_level_rows(run.out.path());
    assert!(rows > 1000 && rows < 30_000, "{rows}");
    let s = summary_rows(&err);
    assert_eq!(s[0].0, rows as u64, "{err}");
    let (spool, _) = spool_and_stream(run.out.path());
    let dirs = entries(run.out.path(), "msmemscope_");
    assert!(dirs[0].join(".memscope_incomplete").exists(), "{dirs:?}");
    // room again: recover writes the process anew, whole, and removes the spool
    let (code, err) = recover(run.out.path());
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("recovered"), "{err}");
    assert!(!spool.exists(), "{err}");
    assert_eq!(top_level_rows(run.out.path()), 30_000, "{err}");
    // a second recover: nothing left, said as such in one line
    let (code, again) = recover(run.out.path());
    assert_eq!(code, 2, "{again}");
    assert_eq!(again.trim().lines().count(), 1, "{again}");
    assert!(again.contains("recovered already"), "{again}");
    let dirs = entries(run.out.path(), "msmemscope_");
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    assert!(!dirs[0].join(".memscope_incomplete").exists());
    // what the run said before it was cut short stays beside the new log
    let old_logs = entries(&dirs[0].join("msmemscope_logs"), "msmemscope_")
        .into_iter()
        .filter(|p| p.to_string_lossy().ends_with(".before_recover.log"))
        .collect::<Vec<_>>();
    assert_eq!(
        old_logs.len(),
        1,
        "{:?}",
        entries(&dirs[0].join("msmemscope_logs"), "")
    );
    let text = std::fs::read_to_string(&old_logs[0]).unwrap();
    assert!(text.contains("File too large"), "{text}");
    // and the new log says what wrote it and where the old lines are
    let new_log = old_logs[0]
        .to_string_lossy()
        .replace(".before_recover.log", ".log");
    let text = std::fs::read_to_string(&new_log).unwrap();
    let last = text.lines().last().unwrap_or_default();
    assert!(
        last.contains("written by memscope recover") && last.contains(".before_recover.log"),
        "{text}"
    );
    // one run in the index: the recover replaced the run's entry
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run.out.path().join("memscope_run.json")).unwrap())
            .unwrap();
    assert_eq!(index["runs"].as_array().unwrap().len(), 1, "{index}");
}

#[test]
fn recover_of_a_cut_stream_writes_what_it_can_keeps_the_spool_and_exits_2() {
    let run = limited_run();
    assert_eq!(run.code(), 2, "{}", run.stderr());
    let out = run.out.path();
    let (spool, stream) = spool_and_stream(out);
    let incomplete = entries(out, "msmemscope_");
    assert_eq!(incomplete.len(), 1);
    let len = std::fs::metadata(&stream).unwrap().len();
    let (header, chunk) = (4096u64, 256 * 1024u64);
    assert!(len > header + 2 * chunk, "{len}");
    // cut inside the second chunk: the first is read, the rest cannot be
    std::fs::OpenOptions::new()
        .write(true)
        .open(&stream)
        .unwrap()
        .set_len(header + chunk + chunk / 2)
        .unwrap();
    let (code, err) = recover(out);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("cut short inside a chunk"), "{err}");
    assert!(err.contains("only partly recovered"), "{err}");
    assert!(!err.contains("memscope: recovered"), "{err}");
    let rows = top_level_rows(out);
    assert!(rows > 0 && rows < 30_000, "{rows}\n{err}");
    // the spool stays, with the incomplete outputs the recover replaced
    assert!(stream.exists(), "{err}");
    let name = incomplete[0].file_name().unwrap();
    assert!(spool.join("replaced").join(name).is_dir(), "{err}");
    // a stream cut before its header: nothing of it, said, spool kept
    std::fs::OpenOptions::new()
        .write(true)
        .open(&stream)
        .unwrap()
        .set_len(100)
        .unwrap();
    // a capture the killed collector left in the spool may be all that can be read
    let cap = spool.join("1-2.mscap");
    std::fs::write(&cap, b"capture so far").unwrap();
    let (code, err) = recover(out);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("no readable stream header"), "{err}");
    assert!(
        stream.exists() && spool.join("replaced").join(name).is_dir(),
        "{err}"
    );
    assert!(!cap.exists(), "{err}");
    assert_eq!(
        std::fs::read(spool.join("replaced").join("1-2.mscap")).unwrap(),
        b"capture so far",
        "set aside, not deleted: {err}"
    );
    // the index names only files that are there, and no run without processes
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("memscope_run.json")).unwrap()).unwrap();
    for r in index["runs"].as_array().unwrap() {
        let procs = r["processes"].as_array().unwrap();
        assert!(!procs.is_empty(), "{index}");
        for f in procs.iter().flat_map(|p| p["files"].as_array().unwrap()) {
            assert!(out.join(f["path"].as_str().unwrap()).is_file(), "{index}");
        }
    }
    // every stream unreadable: nothing recovered, and the index is left as it was
    for e in std::fs::read_dir(&spool).unwrap().flatten() {
        if e.path().extension().is_some_and(|x| x == "stream") {
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open(e.path())
                .unwrap();
            f.set_len(100).unwrap();
        }
    }
    let before = std::fs::read(out.join("memscope_run.json")).unwrap();
    let (code, err) = recover(out);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("could not be recovered"), "{err}");
    assert_eq!(
        std::fs::read(out.join("memscope_run.json")).unwrap(),
        before
    );
}

#[test]
fn recover_refuses_a_stream_header_naming_another_pid_and_a_spool_without_streams() {
    let run = limited_run();
    assert_eq!(run.code(), 2, "{}", run.stderr());
    let out = run.out.path();
    let (spool, stream) = spool_and_stream(out);
    // the file's name says one pid, its header another: the header is damaged, and its pid
    // and start time must not name an output directory
    let name = stream.file_name().unwrap().to_str().unwrap().to_owned();
    let (pid, rest) = name.split_once('-').unwrap();
    let other = pid.parse::<u32>().unwrap() + 1;
    let renamed = spool.join(format!("{other}-{rest}"));
    std::fs::rename(&stream, &renamed).unwrap();
    let (code, err) = recover(out);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains(&format!(
            "damaged stream header: it names pid {pid}, the file pid {other}"
        )),
        "{err}"
    );
    assert!(
        entries(out, &format!("msmemscope_{other}_")).is_empty(),
        "{err}"
    );
    assert!(renamed.exists(), "the spool is kept: {err}");
    // the other process was written: partly
    assert!(err.contains("only partly recovered"), "{err}");
    // a garbage pid in the header and the same one in the name: no Linux pid, refused; the
    // only stream left, so nothing at all is recovered
    let garbage = spool.join(format!("{}-{rest}", u32::MAX));
    std::fs::rename(&renamed, &garbage).unwrap();
    for e in std::fs::read_dir(&spool).unwrap().flatten() {
        if e.path().extension().is_some_and(|x| x == "stream") && e.path() != garbage {
            std::fs::remove_file(e.path()).unwrap();
        }
    }
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&garbage)
            .unwrap();
        f.write_all_at(&u32::MAX.to_le_bytes(), memscope_wire::FH_PID as u64)
            .unwrap();
    }
    let (code, err) = recover(out);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("damaged stream header: pid 4294967295 is no Linux pid"),
        "{err}"
    );
    assert!(
        entries(out, &format!("msmemscope_{}_", u32::MAX)).is_empty(),
        "{err}"
    );
    // nothing was written this time: said so, not "partly"
    assert!(err.contains("could not be recovered"), "{err}");
    assert!(!err.contains("partly"), "{err}");
    // no stream at all: nothing recovered, said, the spool kept
    for e in std::fs::read_dir(&spool).unwrap().flatten() {
        if e.path().extension().is_some_and(|x| x == "stream") {
            std::fs::remove_file(e.path()).unwrap();
        }
    }
    let (code, err) = recover(out);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("holds no stream file"), "{err}");
    assert!(!err.contains("memscope: recovered"), "{err}");
    assert!(spool.is_dir(), "{err}");
}

#[test]
fn a_file_size_limit_on_a_database_is_named_as_such() {
    // SQLite reports the write past the limit as a bare "disk I/O error"
    let run = limited_run_with("--format db");
    let err = run.stderr();
    assert_eq!(run.code(), 2, "{err}");
    let line = err
        .lines()
        .find(|l| l.contains(".db") && l.contains("cannot write"))
        .unwrap_or_else(|| panic!("no line for the .db: {err}"));
    assert!(
        line.contains("(a file-size limit of 1048576 bytes is set: ulimit -f)"),
        "{line}"
    );
}

#[test]
fn a_recover_after_a_failed_one_keeps_both_old_logs_in_the_process_directory() {
    let run = limited_run();
    assert_eq!(run.code(), 2, "{}", run.stderr());
    let out = run.out.path();
    let (_, stream) = spool_and_stream(out);
    let whole = std::fs::read(&stream).unwrap();
    // a first recover over a cut stream fails (and sets the run's directory aside) ...
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&stream)
        .unwrap();
    f.set_len(4096 + 256 * 1024 + 100).unwrap();
    let (code, err) = recover(out);
    assert_eq!(code, 2, "{err}");
    // ... a second one, over the whole stream again, sets its outputs aside too and succeeds
    std::fs::write(&stream, &whole).unwrap();
    let (code, err) = recover(out);
    assert_eq!(code, 0, "{err}");
    assert_eq!(top_level_rows(out), 30_000, "{err}");
    let dirs = entries(out, "msmemscope_");
    assert_eq!(dirs.len(), 1, "no `<dir>.<k>` beside it: {dirs:?}");
    let old_logs: Vec<_> = entries(&dirs[0].join("msmemscope_logs"), "")
        .into_iter()
        .filter(|p| p.to_string_lossy().contains(".before_recover"))
        .collect();
    assert_eq!(old_logs.len(), 2, "{old_logs:?}");
}

#[test]
fn recover_writes_the_full_summary_of_cut_lists_as_run_does() {
    use std::io::Read;
    let out = tempfile::tempdir().unwrap();
    let train = repo_root().join("examples/sim-npu/train.py");
    let mut ms = Command::new(memscope_bin())
        .args(["run", "--adapters", "pta,mstx", "-o"])
        .arg(out.path())
        .args(["--", "python3"])
        .arg(&train)
        .args(["--steps", "100", "--step-ms", "20"])
        .env("SIM_NPU_DIR", sim_npu_dir())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // the job runs 2 s or more: memscope is killed in its middle, the job goes on to its end
    std::thread::sleep(std::time::Duration::from_millis(1000));
    super::kill9(ms.id() as i32);
    let _ = ms.wait();
    let mut job_out = String::new();
    ms.stdout
        .take()
        .unwrap()
        .read_to_string(&mut job_out)
        .unwrap();
    assert!(job_out.contains("leaked_blocks="), "{job_out}");
    let (code, err) = recover(out.path());
    assert_eq!(code, 0, "{err}");
    // more leaks than the console lists: the whole list in the file the console names
    assert!(err.contains("more leak(s)"), "{err}");
    let full = err
        .lines()
        .find_map(|l| l.strip_prefix("memscope: every list in full: "))
        .unwrap_or_else(|| panic!("the full summary is named:\n{err}"));
    let text = std::fs::read_to_string(full).unwrap();
    assert!(text.starts_with("memscope recover of "), "{text}");
    assert!(text.contains("====== SUMMARY: "), "{text}");
}
