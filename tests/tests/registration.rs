//! Issue 11: built-in adapters are registered by two explicit lists — the probe's
//! `export_hooks!()` lines and the pool adapters' `MSTX_POOLS` lines in the msTX one
//! (`memscope-probe/src/lib.rs`) and the CLI's `builtin.rs` — and
//! named nowhere else: not by the collector (`memscope-core/collect`), the other crates of the
//! core, the runtime, nor by each other.

use memscope_tests::*;
use std::path::Path;

fn sources(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    walk(dir, &mut |p| {
        if p.extension().is_some_and(|e| e == "rs") {
            out.push(p.to_path_buf());
        }
    });
}

#[test]
fn adapter_crates_are_named_only_in_the_two_registration_lists() {
    let root = repo_root();
    let mut files = Vec::new();
    for d in [
        "memscope-cli/src",
        "memscope-core",
        "memscope-probe/src",
        "memscope-runtime/src",
        "memscope-adapter-sdk/src",
    ] {
        sources(&root.join(d), &mut files);
    }
    assert!(files.len() > 50, "found the sources");
    let adapters = adapter_names();
    for f in files {
        let rel = f.strip_prefix(&root).unwrap().display().to_string();
        let text = std::fs::read_to_string(&f).unwrap();
        for (i, line) in text.lines().enumerate() {
            let names_one = adapters.iter().any(|a| {
                let c = format!("memscope_adapter_{a}");
                line.match_indices(&c).any(|(at, _)| {
                    !line[at + c.len()..].starts_with(|ch: char| ch.is_alphanumeric() || ch == '_')
                })
            });
            if !names_one {
                continue;
            }
            // the probe's list: one `export_hooks!` per adapter with hooks, and inside the msTX
            // one, one `MSTX_POOLS` line per pool adapter
            let probe_entry = |l: &str| {
                let l = l.trim();
                l.ends_with("::export_hooks!();")
                    || l.ends_with("::export_hooks!(")
                    || l.ends_with("::MSTX_POOLS,")
                    || l.starts_with("//")
            };
            let listed = rel == "memscope-cli/src/builtin.rs"
                || (rel == "memscope-probe/src/lib.rs" && probe_entry(line));
            assert!(listed, "{rel}:{}: names an adapter crate: {line}", i + 1);
        }
    }
}

#[test]
fn no_adapter_manifest_names_another_adapter() {
    let root = repo_root();
    for entry in std::fs::read_dir(root.join("adapters")).unwrap().flatten() {
        let manifest = entry.path().join("Cargo.toml");
        let Ok(text) = std::fs::read_to_string(&manifest) else {
            continue;
        };
        let me = format!("memscope-adapter-{}", entry.file_name().to_string_lossy());
        for line in text.lines() {
            if line.contains("memscope-adapter-") && !line.contains("memscope-adapter-sdk") {
                assert!(
                    line.contains(&me) && line.trim_start().starts_with("name"),
                    "{}: {line}",
                    manifest.display()
                );
            }
        }
    }
}

/// Copies the tracked files of the repository to `dst`.
fn copy_repo(dst: &Path) {
    let root = repo_root();
    let out = std::process::Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(&root)
        .output()
        .expect("run git ls-files");
    assert!(out.status.success(), "git ls-files failed");
    for rel in out.stdout.split(|b| *b == 0).filter(|r| !r.is_empty()) {
        let rel = Path::new(std::str::from_utf8(rel).unwrap());
        let (from, to) = (root.join(rel), dst.join(rel));
        if from.is_file() {
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            std::fs::copy(&from, &to).unwrap();
        }
    }
}

/// Inserts `line` after the line of `path` that ends with `after`.
fn add_line(path: &Path, after: &str, line: &str) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut out = String::new();
    let mut done = false;
    for l in text.lines() {
        out.push_str(l);
        out.push('\n');
        if !done && l.trim_end().ends_with(after) {
            out.push_str(line);
            out.push('\n');
            done = true;
        }
    }
    assert!(done, "{}: no line ending with {after:?}", path.display());
    std::fs::write(path, out).unwrap();
}

/// The built-in adapter contract, end to end (issue 33): a toy adapter with two records of its
/// own (`tests/fixtures/toy-adapter`), added to a copy of the workspace the way
/// docs/adapter-spec.md says — its folder under `adapters/`, one line in each registration list
/// (and its dependency line in that list's manifest) — builds, is listed, and its hooks' records
/// become rows of a dump.
#[test]
fn a_toy_adapter_added_as_its_folder_and_one_line_per_list_writes_its_rows() {
    let root = repo_root();
    let ws = tempfile::tempdir().unwrap();
    let w = ws.path();
    copy_repo(w);
    let fx = root.join("tests/fixtures/toy-adapter");
    for f in [
        "Cargo.toml",
        "src/lib.rs",
        "src/wire.rs",
        "src/hooks.rs",
        "src/typer.rs",
    ] {
        let to = w.join("adapters/toy").join(f);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(fx.join(f), to).unwrap();
    }
    add_line(
        &w.join("memscope-probe/src/lib.rs"),
        "memscope_adapter_atb::export_hooks!();",
        "memscope_adapter_toy::export_hooks!();",
    );
    add_line(
        &w.join("memscope-cli/src/builtin.rs"),
        "&memscope_adapter_host::DESCRIPTOR,",
        "    &memscope_adapter_toy::DESCRIPTOR,",
    );
    add_line(
        &w.join("memscope-probe/Cargo.toml"),
        "[dependencies]",
        "memscope-adapter-toy = { path = \"../adapters/toy\" }",
    );
    add_line(
        &w.join("memscope-cli/Cargo.toml"),
        "[dependencies]",
        "memscope-adapter-toy = { path = \"../adapters/toy\", features = [\"collector\"] }",
    );
    // a target directory of its own, kept between runs (the copy's crates differ from ours)
    let target = root.join("target/toy-adapter");
    let build = std::process::Command::new(std::env::var("CARGO").unwrap_or("cargo".into()))
        .args([
            "build",
            "--offline",
            "-q",
            "-p",
            "memscope-cli",
            "-p",
            "memscope-probe",
        ])
        .current_dir(w)
        .env("CARGO_TARGET_DIR", &target)
        .output()
        .expect("run cargo");
    assert!(
        build.status.success(),
        "the workspace with the toy adapter does not build:\n{}",
        String::from_utf8_lossy(&build.stderr)
    );
    let memscope = target.join("debug/memscope");
    let list = std::process::Command::new(&memscope)
        .args(["adapters", "list"])
        .output()
        .unwrap();
    let list = String::from_utf8_lossy(&list.stdout);
    assert!(list.contains("toy"), "not listed:\n{list}");

    let lib = compile(&[&fx.join("toy_alloc.c")], "libtoy_alloc.so", &[], true);
    let job = compile(
        &[&fx.join("toy_job.c")],
        "toy_job",
        &[&lib.display().to_string()],
        false,
    );
    let out = tempfile::tempdir().unwrap();
    let run = std::process::Command::new(&memscope)
        .arg("run")
        .arg("-o")
        .arg(out.path())
        .args(["--adapters", "toy", "--"])
        .arg(&job)
        .env("LD_LIBRARY_PATH", lib.parent().unwrap())
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "memscope run --adapters toy failed: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    let mut rows = Vec::new();
    walk(out.path(), &mut |p| {
        let n = p.file_name().unwrap().to_str().unwrap();
        if n.starts_with("memscope_dump_") && n.ends_with(".csv") {
            rows.extend(read_csv(p));
        }
    });
    let got: Vec<_> = rows
        .iter()
        .map(|r| {
            (
                r["Event"].as_str(),
                r["Event Type"].as_str(),
                r["Device Id"].as_str(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("MALLOC", "TOY", "cpu"),
            ("MALLOC", "TOY", "cpu"),
            ("FREE", "TOY", "cpu")
        ],
        "{rows:?}"
    );
    assert!(rows[0]["Attr"].contains("size:100"), "{}", rows[0]["Attr"]);
    assert_eq!(rows[0]["Ptr"], rows[2]["Ptr"]);
}
