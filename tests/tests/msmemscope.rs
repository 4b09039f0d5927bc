//! Issue 26 item 4: msMemScope's command names on memscope. The `msmemscope` command takes
//! msMemScope's command line — the command lines of its user guide, quick start and best
//! practices run here unmodified, with the sim-npu stand-in job (`python3 train.py`) as their
//! `${Application}` — and `source msmemscope --load-api-env` / `--unload-api-env` change only
//! their own `LD_PRELOAD`/`LD_LIBRARY_PATH` entries, byte for byte.
//!
//! Not run: the guide's `--watch=start:op0,end:op1,full-content` (msMemScope rejects it too:
//! `op0` is no output index) and anything needing torch_npu on a real NPU.

use memscope_tests::{profile_dir, python3, read_csv, repo_root, sim_npu_dir, walk, Row};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn msmemscope() -> PathBuf {
    let p = profile_dir().join("msmemscope");
    assert!(
        p.is_file(),
        "{} is missing: build the workspace first",
        p.display()
    );
    p
}

/// `python3 <repo>/examples/sim-npu/train.py`: the `${Application}` of the guide's lines.
fn application() -> Vec<String> {
    vec![
        python3().display().to_string(),
        repo_root()
            .join("examples/sim-npu/train.py")
            .display()
            .to_string(),
    ]
}

/// Runs one documented command line in `cwd`: `line` is split on spaces, `${Application}` and
/// `python train.py` become the stand-in job.
fn doc_line(cwd: &Path, line: &str) -> Output {
    let app = application().join(" ");
    let line = line
        .replace("${Application}", &app)
        .replace("python ./example_cmd.py", &app)
        .replace("python train.py", &app);
    let words: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(words[0], "msmemscope");
    Command::new(msmemscope())
        .args(&words[1..])
        .current_dir(cwd)
        .env("SIM_NPU_DIR", sim_npu_dir())
        .output()
        .expect("run msmemscope")
}

fn ok(o: &Output, what: &str) {
    memscope_tests::assert_ok(o, what);
}

fn named(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut v = Vec::new();
    walk(dir, &mut |p| {
        if p.file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with(prefix))
        {
            v.push(p.to_path_buf());
        }
    });
    v.sort();
    v
}

fn rows(dir: &Path) -> Vec<Row> {
    named(dir, "memscope_dump_")
        .iter()
        .flat_map(|p| read_csv(p))
        .collect()
}

fn config(dir: &Path) -> serde_json::Value {
    let c = named(dir, "config.json");
    assert_eq!(c.len(), 1, "{c:?}");
    serde_json::from_str(&std::fs::read_to_string(&c[0]).unwrap()).unwrap()
}

#[test]
fn quick_start_command_lines_run_unmodified_old_spellings_with_a_note() {
    for (line, notes) in [
        ("msmemscope --events=alloc,free,access,launch --level=kernel,op --call-stack=c,python --analysis=leaks,inefficient,decompose --output-path=./output --format=csv python ./example_cmd.py", 0),
        ("msmemscope --events=alloc,free,access,launch --level=kernel,op --call-stack=c,python --analysis=leaks,inefficient,decompose --output=./output --data-format=csv python ./example_cmd.py", 2),
    ] {
        let d = tempfile::tempdir().unwrap();
        let o = doc_line(d.path(), line);
        ok(&o, line);
        let err = String::from_utf8_lossy(&o.stderr);
        let deprecated: Vec<&str> = err.lines().filter(|l| l.contains("is deprecated")).collect();
        assert_eq!(deprecated.len(), notes, "{err}");
        let out = d.path().join("output");
        let c = config(&out);
        // eventType alloc|free|launch|access, levelType op|kernel, analysis
        // leaks|decompose|inefficient
        assert_eq!(
            (&c["eventType"], &c["levelType"], &c["analysisType"], &c["cStackDepth"]),
            (&15.into(), &3.into(), &7.into(), &50.into()),
            "{c}"
        );
        let r = rows(&out);
        assert!(r.iter().any(|r| r["Event"] == "KERNEL_LAUNCH"), "{err}");
        assert!(
            r.iter()
                .any(|r| r["Event"] == "MALLOC" && !r["Call Stack(C)"].is_empty()),
            "C stacks on the rows"
        );
    }
}

#[test]
fn user_guide_lines_take_options_after_the_application_as_getopt_does() {
    // train.py would fail ("unrecognized arguments") if it got any of these options
    for (line, check) in [
        ("msmemscope ${Application}", "analysisType"),
        (
            "msmemscope ${Application} --analysis=inefficient",
            "inefficient",
        ),
        (
            "msmemscope ${Application} --steps=2 --level=kernel",
            "steps",
        ),
        ("msmemscope --analysis=oom:30,leaks python train.py", "oom"),
    ] {
        let d = tempfile::tempdir().unwrap();
        let o = doc_line(d.path(), line);
        ok(&o, line);
        let c = config(&d.path().join("memscopeDumpResults"));
        match check {
            "inefficient" => assert_eq!(c["analysisType"], 4, "{line}: {c}"),
            "steps" => {
                assert_eq!(c["SelectedStepList"]["stepCount"], 1, "{c}");
                assert_eq!(c["SelectedStepList"]["stepIdList"][0], 2, "{c}");
                assert_eq!(c["levelType"], 2, "{c}");
            }
            "oom" => assert_eq!((&c["analysisType"], &c["oomTopK"]), (&9.into(), &30.into())),
            _ => assert_eq!(c["analysisType"], 1, "{line}: {c}"),
        }
    }
}

#[test]
fn best_practice_step_runs_and_their_compare_run_unmodified() {
    let d = tempfile::tempdir().unwrap();
    for s in ["2", "5"] {
        let line = format!(
            "msmemscope --events=alloc,free --level=kernel --steps={s} --output-path=./output/step{s} python train.py"
        );
        ok(&doc_line(d.path(), &line), &line);
        assert_eq!(
            config(&d.path().join(format!("output/step{s}")))["SelectedStepList"]["stepIdList"][0],
            s.parse::<u32>().unwrap()
        );
    }
    // Those runs have no kernel launches (`launch` is not in --events): msMemScope finds
    // nothing to compare either; memscope says why, in one line, with exit code 2
    let line = "msmemscope --compare --input-path=./output/step2,./output/step5 --level=kernel";
    let o = doc_line(d.path(), line);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no KERNEL_LAUNCH rows"));
    // with launches collected the same compare of two run directories works
    for s in ["2", "5"] {
        let line = format!(
            "msmemscope --events=alloc,free,launch --level=kernel --steps={s} --output-path=./k/step{s} python train.py"
        );
        ok(&doc_line(d.path(), &line), &line);
    }
    let o = doc_line(
        d.path(),
        "msmemscope --compare --input-path=./k/step2,./k/step5 --level=kernel -o ./cmp",
    );
    ok(&o, "compare");
    assert!(!named(&d.path().join("cmp"), "memory_compare_").is_empty());
}

fn err_line(args: &[&str], bin: &Path) -> (Option<i32>, String) {
    let o = Command::new(bin).args(args).output().unwrap();
    let e = String::from_utf8_lossy(&o.stderr).into_owned();
    (o.status.code(), e)
}

#[test]
fn bad_lines_get_one_line_and_memscope_without_run_says_what_was_meant() {
    let m = msmemscope();
    let (code, e) = err_line(&["python3", "train.py", "--lr", "0.1"], &m);
    assert_eq!(code, Some(2));
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(
        e.contains("unrecognized option '--lr'") && e.contains("after `--`"),
        "{e}"
    );
    let (code, e) = err_line(&["--steps"], &m);
    assert_eq!(
        (code, e.trim()),
        (Some(2), "msmemscope: option '--steps' requires an argument")
    );
    let (code, e) = err_line(&["python3", "train.py"], &memscope_tests::memscope_bin());
    assert_eq!(code, Some(2));
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(
        e.contains("did you mean `memscope run -- python3 train.py`"),
        "{e}"
    );
    for (args, want) in [
        (&["-h"][..], "Usage:"),
        (&["-V"], "msmemscope version "),
        (&["-v"], "msmemscope version "),
    ] {
        let o = Command::new(&m).args(args).output().unwrap();
        assert!(o.status.success());
        assert!(
            String::from_utf8_lossy(&o.stdout).contains(want),
            "{args:?}"
        );
    }
    // not sourced: refused, nothing changed
    let (code, e) = err_line(&["--load-api-env"], &m);
    assert_eq!(code, Some(2));
    assert!(e.contains("source msmemscope --load-api-env"), "{e}");
}

/// Runs `script` in bash with `msmemscope`'s directory on PATH (as an installation has it).
fn bash(script: &str) -> Output {
    let path = format!(
        "{}:{}",
        profile_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    Command::new("bash")
        .args(["-c", script])
        .env("PATH", path)
        .env_remove("MEMSCOPE_API_ENV")
        .env_remove("MEMSCOPE_CLI")
        .output()
        .expect("run bash")
}

#[test]
fn load_and_unload_api_env_change_only_their_own_entries_byte_for_byte() {
    let probe = profile_dir().join("libmemscope_probe.so");
    let dir = profile_dir();
    // (LD_PRELOAD, LD_LIBRARY_PATH) before: unset, empty, odd but valid lists, already there
    let states = [
        ("unset LD_PRELOAD LD_LIBRARY_PATH", false),
        ("export LD_PRELOAD= LD_LIBRARY_PATH=", false),
        (
            "export LD_PRELOAD='/x/a.so' LD_LIBRARY_PATH='/a::/b:'",
            false,
        ),
        (
            &*format!(
                "export LD_PRELOAD='{}' LD_LIBRARY_PATH='/c'",
                probe.display()
            ),
            true,
        ),
    ];
    for (before, had_probe) in states {
        let script = format!(
            r#"{before}
snap() {{ for v in LD_PRELOAD LD_LIBRARY_PATH MEMSCOPE_API_ENV; do if [ "${{!v+x}}" ]; then printf '%s=[%s];' $v "${{!v}}"; else printf '%s=unset;' $v; fi; done; }}
a=$(snap)
source msmemscope --load-api-env || exit 9
b=$(snap)
source msmemscope --load-api-env || exit 9
c=$(snap)
source msmemscope --unload-api-env || exit 9
d=$(snap)
printf '%s\n' "$a" "$b" "$c" "$d"
declare -F | grep -c _msmemscope || true
"#
        );
        let o = bash(&script);
        ok(&o, before);
        let out = String::from_utf8_lossy(&o.stdout);
        let l: Vec<&str> = out.lines().collect();
        assert_eq!(l[0], l[3], "{before}: unload restores every byte\n{out}");
        assert_eq!(l[1], l[2], "a second load adds nothing");
        assert_eq!(l[4], "0", "no functions left behind");
        let preload_part = l[1].split(';').next().unwrap();
        if had_probe {
            assert_eq!(preload_part, format!("LD_PRELOAD=[{}]", probe.display()));
        } else {
            assert!(
                preload_part.starts_with(&format!("LD_PRELOAD=[{}", probe.display())),
                "{l:?}"
            );
        }
        assert!(
            l[1].contains(&format!("LD_LIBRARY_PATH=[{}", dir.display())),
            "{l:?}"
        );
    }
    // an entry another tool added meanwhile stays, in its place
    let o = bash(
        "export LD_LIBRARY_PATH=/a; source msmemscope --load-api-env; \
         export LD_LIBRARY_PATH=/t:$LD_LIBRARY_PATH; source msmemscope --unload-api-env; \
         printf '%s' \"$LD_LIBRARY_PATH\"",
    );
    ok(&o, "interleaved");
    assert_eq!(String::from_utf8_lossy(&o.stdout), "/t:/a");
}

#[test]
fn load_and_unload_api_env_work_when_sourced_from_zsh() {
    if Command::new("zsh").arg("-c").arg("true").output().is_err() {
        eprintln!("SKIP: zsh is not installed (.ci/run installs it)");
        return;
    }
    let script = r#"
snap() { for v in LD_PRELOAD LD_LIBRARY_PATH MEMSCOPE_API_ENV; do if (( ${+parameters[$v]} )); then printf '%s=[%s];' $v "${(P)v}"; else printf '%s=unset;' $v; fi; done; }
unset LD_PRELOAD; export LD_LIBRARY_PATH='/a::/b'
a=$(snap)
source msmemscope --load-api-env || exit 9
b=$(snap)
source msmemscope --unload-api-env || exit 9
c=$(snap)
printf '%s\n' "$a" "$b" "$c"
print -l ${(k)functions} | grep -c _msmemscope || true
"#;
    let path = format!(
        "{}:{}",
        profile_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let o = Command::new("zsh")
        .args(["-c", script])
        .env("PATH", path)
        .env_remove("MEMSCOPE_API_ENV")
        .env_remove("MEMSCOPE_CLI")
        .output()
        .unwrap();
    ok(&o, "zsh");
    let out = String::from_utf8_lossy(&o.stdout);
    let l: Vec<&str> = out.lines().collect();
    assert_eq!(l[0], l[2], "{out}");
    assert!(
        l[1].starts_with(&format!(
            "LD_PRELOAD=[{}];",
            profile_dir().join("libmemscope_probe.so").display()
        )),
        "{out}"
    );
    assert_eq!(l[3], "0", "no functions left behind");
}

#[test]
fn msmemscope_job_arguments_reach_the_job_unchanged_after_double_dash() {
    let d = tempfile::tempdir().unwrap();
    let mut args = vec!["-o".to_string(), "out".into(), "--".into()];
    args.extend(application());
    args.extend(["--steps".into(), "4".into(), "--no-leak".into()]);
    let o = Command::new(msmemscope())
        .args(&args)
        .current_dir(d.path())
        .env("SIM_NPU_DIR", sim_npu_dir())
        .output()
        .unwrap();
    ok(&o, "msmemscope -- train.py --steps 4");
    let r = rows(&d.path().join("out"));
    let steps = r
        .iter()
        .filter(|r| r["Event Type"] == "Range_start")
        .count();
    assert_eq!(steps, 4, "train.py got --steps 4");
}

#[test]
fn the_script_is_installed_next_to_memscope_and_runs_it() {
    let s = std::fs::read_to_string(msmemscope()).unwrap();
    assert!(s.starts_with("#!/usr/bin/env bash"));
    assert_eq!(
        s,
        std::fs::read_to_string(repo_root().join("memscope-cli/msmemscope")).unwrap()
    );
    let o = Command::new(msmemscope())
        .arg("--version")
        .output()
        .unwrap();
    ok(&o, "--version");
    let v = String::from_utf8_lossy(&o.stdout);
    assert!(v.contains(env!("CARGO_PKG_VERSION")), "{v}");
}
