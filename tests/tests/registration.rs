//! Issue 11: built-in adapters are registered by two explicit lists — the probe's
//! `export_hooks!()` lines (`memscope-probe/src/lib.rs`) and the CLI's `builtin.rs` — and
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
            let listed = rel == "memscope-cli/src/builtin.rs"
                || (rel == "memscope-probe/src/lib.rs"
                    && (line.trim_end().ends_with("::export_hooks!();") || line.starts_with("//")));
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
