//! Issue 35 item 5: the user guide (`docs/guide`, an mdBook) and the README are checked, not
//! trusted. Every chapter's console blocks run, in order, in a sandbox of their own, against
//! the demo, and print what the page shows (`guide/harness.rs` says how blocks are marked);
//! the reference pages are generated from the code and must be up to date
//! (`MEMSCOPE_UPDATE_GUIDE=1` rewrites them); the book builds with mdBook (`MEMSCOPE_MDBOOK`,
//! which `.ci/run` sets, or `mdbook` on `PATH`); the README stays short and starts with its two
//! commands.

#[path = "guide/harness.rs"]
mod harness;
#[path = "guide/reference.rs"]
mod reference;

use memscope_tests::repo_root;
use std::process::Command;

/// One test per chapter; `every_chapter_of_the_summary_has_a_test` keeps this list and
/// `SUMMARY.md` the same.
macro_rules! chapters {
    ($($test:ident => $page:literal,)*) => {
        const CHAPTERS: &[&str] = &[$($page),*];
        $(
            #[test]
            fn $test() {
                check_chapter($page);
            }
        )*
    };
}

chapters! {
    getting_started_commands_run_and_print_what_the_chapter_shows => "getting-started.md",
    from_msmemscope_commands_run_and_print_what_the_chapter_shows => "from-msmemscope.md",
    recording_commands_run_and_print_what_the_chapter_shows => "recording.md",
    python_api_commands_run_and_print_what_the_chapter_shows => "python-api.md",
    analyses_commands_run_and_print_what_the_chapter_shows => "analyses.md",
    report_and_exports_commands_run_and_print_what_the_chapter_shows => "report-and-exports.md",
    ci_and_pytest_commands_run_and_print_what_the_chapter_shows => "ci-and-pytest.md",
    ranks_and_clusters_commands_run_and_print_what_the_chapter_shows => "ranks-and-clusters.md",
    writing_an_adapter_commands_run_and_print_what_the_chapter_shows => "writing-an-adapter.md",
    troubleshooting_commands_run_and_print_what_the_chapter_shows => "troubleshooting.md",
    how_it_works_commands_run_and_print_what_the_chapter_shows => "how-it-works.md",
    reference_cli_commands_run_and_print_what_the_page_shows => "reference/cli.md",
    reference_adapters_commands_run_and_print_what_the_page_shows => "reference/adapters.md",
    reference_config_commands_run_and_print_what_the_page_shows => "reference/config.md",
    reference_formats_commands_run_and_print_what_the_page_shows => "reference/formats.md",
    readme_tour_commands_run_and_print_what_the_readme_shows => "README.md",
}

/// Pages the summary includes from `docs/` (checked by their own tests: `export_parquet.rs`
/// runs export.md's queries), with no console block of their own.
const INCLUDED: &[&str] = &["exports-parquet.md", "adapter-spec.md", "roles.md"];

fn check_chapter(page: &str) {
    let t = harness::run_chapter(page);
    assert!(
        t.failures.is_empty(),
        "{page}: {} command(s) failed:\n\n{}",
        t.failures.len(),
        t.failures.join("\n\n")
    );
    assert!(
        t.blocks_run + t.skipped >= 1,
        "{page}: no console block: every chapter runs at least one"
    );
    assert!(t.blocks_run >= 1, "{page}: every console block was skipped");
}

#[test]
fn every_chapter_of_the_summary_has_a_test() {
    let mut summary = harness::summary_chapters();
    summary.retain(|p| !INCLUDED.contains(&p.as_str()));
    let mut ours: Vec<String> = CHAPTERS
        .iter()
        .filter(|p| **p != "README.md")
        .map(|p| p.to_string())
        .collect();
    summary.sort();
    ours.sort();
    assert_eq!(summary, ours, "SUMMARY.md and the chapters! list differ");
}

#[test]
fn included_pages_are_only_includes_of_docs() {
    for p in INCLUDED {
        let text = std::fs::read_to_string(harness::guide_src().join(p)).unwrap();
        // the include, and one line that links the page for readers of the plain Markdown
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        assert!(
            lines.iter().all(|l| l.starts_with("{{#include ../../")
                || (l.starts_with("*This chapter is [") && l.contains("](../../"))),
            "{p} must only include a page of docs/: {lines:?}"
        );
    }
}

#[test]
fn reference_pages_are_generated_from_the_code_and_up_to_date() {
    let update = std::env::var_os("MEMSCOPE_UPDATE_GUIDE").is_some_and(|v| v == "1");
    let mut stale = Vec::new();
    for (rel, text) in reference::pages() {
        let path = harness::guide_src().join(rel);
        let old = std::fs::read_to_string(&path).unwrap_or_default();
        if old == text {
            continue;
        }
        if update {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &text).unwrap();
            eprintln!("rewrote {}", path.display());
        } else {
            let first = old
                .lines()
                .zip(text.lines())
                .position(|(a, b)| a != b)
                .unwrap_or(old.lines().count().min(text.lines().count()));
            stale.push(format!(
                "docs/guide/src/{rel} is stale from line {}:\n- {}\n+ {}",
                first + 1,
                old.lines().nth(first).unwrap_or("(end of file)"),
                text.lines().nth(first).unwrap_or("(end of file)")
            ));
        }
    }
    assert!(
        stale.is_empty(),
        "{}\n\nrun `MEMSCOPE_UPDATE_GUIDE=1 cargo test -p memscope-tests --test guide \
         reference_pages` and commit the pages",
        stale.join("\n\n")
    );
}

#[test]
fn the_guide_builds_with_mdbook_without_warnings() {
    let mdbook = match std::env::var_os("MEMSCOPE_MDBOOK") {
        Some(p) if !p.is_empty() => p.into(),
        _ => {
            let on_path = Command::new("mdbook").arg("--version").output();
            if !on_path.is_ok_and(|o| o.status.success()) {
                eprintln!(
                    "SKIP: mdbook is not installed and MEMSCOPE_MDBOOK is unset (.ci/run \
                     installs it: cargo install mdbook --no-default-features)"
                );
                return;
            }
            std::path::PathBuf::from("mdbook")
        }
    };
    let out = tempfile::tempdir().unwrap();
    let o = Command::new(&mdbook)
        .arg("build")
        .arg(repo_root().join("docs/guide"))
        .arg("-d")
        .arg(out.path())
        .output()
        .expect("run mdbook");
    let log = String::from_utf8_lossy(&o.stderr).into_owned() + &String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "mdbook build failed:\n{log}");
    assert!(
        !log.contains("WARN") && !log.contains("ERROR"),
        "mdbook warned (a missing include or link):\n{log}"
    );
    assert!(out.path().join("getting-started.html").is_file());
}

const FIRST: &str = "cargo build --release -p memscope-cli -p memscope-probe -p memscope-adapter-pymem -p sim-npu && ./target/release/memscope run --adapters pta,mstx --call-stack python:8 -- python3 examples/sim-npu/train.py";
const SECOND: &str = "cargo build --workspace && cargo test --workspace";

#[test]
fn the_readme_is_short_and_its_first_two_commands_are_the_demo_and_the_tests() {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    let n = readme.lines().count();
    assert!(
        n <= 150,
        "README.md has {n} lines; at most 150 (the rest belongs in the guide)"
    );
    let mut blocks = Vec::new();
    let mut lines = readme.lines();
    while let Some(l) = lines.next() {
        if l.starts_with("```") {
            let body: Vec<&str> = lines
                .by_ref()
                .take_while(|l| !l.starts_with("```"))
                .collect();
            blocks.push(body.join("\n"));
        }
    }
    assert_eq!(
        blocks.first().map(String::as_str),
        Some(FIRST),
        "first command"
    );
    assert_eq!(
        blocks.get(1).map(String::as_str),
        Some(SECOND),
        "second command"
    );
    let ci = std::fs::read_to_string(repo_root().join(".ci/run")).unwrap();
    assert!(
        ci.contains(SECOND),
        ".ci/run runs the README's second command"
    );
}

#[test]
fn the_harness_rejects_unmarked_blocks_and_reports_wrong_output() {
    let unmarked = harness::parse("x.md", "```sh\nls\n```\n");
    assert!(
        unmarked.unwrap_err().contains("x.md:1"),
        "an unmarked block is an error"
    );
    let blocks = harness::parse(
        "x.md",
        "```text,file=a.txt\nhello\n```\n\n```console\n$ cat a.txt\nhel[..]\n$ echo one; echo two\nthree\n$ false\n```\n",
    )
    .unwrap();
    let t = harness::Sandbox::new().run("x.md", &blocks);
    assert_eq!((t.files, t.blocks_run, t.commands), (1, 1, 3));
    assert_eq!(t.failures.len(), 2, "{:#?}", t.failures);
    assert!(t.failures[0].contains("echo one"), "{}", t.failures[0]);
    assert!(t.failures[1].contains("must exit 0"), "{}", t.failures[1]);
}
