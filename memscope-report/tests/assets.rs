//! The page's assets: the vendored uPlot is the pinned release with its licence, the page loads
//! nothing from elsewhere, and our JS helpers pass their node tests.

use sha2::{Digest, Sha256};

use memscope_report::html::{
    CSS, HELPERS_JS, JS, ROLES_JS, TEMPLATE, UPLOT_CSS, UPLOT_JS, UPLOT_LICENSE, UPLOT_VERSION,
};

/// SHA-256 of `uplot@1.6.32`'s `dist/uPlot.iife.min.js` (from the npm tarball).
const UPLOT_JS_SHA256: &str = "19c8d4c6ad88929a79f4ae49d6f7161566dfd0ba3d15cc495e974f787eb78f1f";
/// SHA-256 of its `dist/uPlot.min.css`.
const UPLOT_CSS_SHA256: &str = "df630c6a8d6f8eeaff264b50f73ce5b114f646ffd9a0bb74f049b0a00135fa04";

fn sha256(s: &str) -> String {
    Sha256::digest(s.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[test]
fn the_vendored_uplot_is_the_pinned_release_with_its_mit_licence() {
    assert_eq!(UPLOT_VERSION, "1.6.32");
    assert!(UPLOT_JS.starts_with("/*! https://github.com/leeoniya/uPlot (v1.6.32) */"));
    assert_eq!(
        sha256(UPLOT_JS),
        UPLOT_JS_SHA256,
        "assets/vendor/uPlot.iife.min.js changed"
    );
    assert_eq!(
        sha256(UPLOT_CSS),
        UPLOT_CSS_SHA256,
        "assets/vendor/uPlot.min.css changed"
    );
    assert!(UPLOT_LICENSE.starts_with("The MIT License (MIT)"));
    assert!(UPLOT_LICENSE.contains("Copyright (c) 2022 Leon Sorokin"));
}

#[test]
fn the_page_references_nothing_outside_itself() {
    for (name, text) in [
        ("template", TEMPLATE),
        ("css", CSS),
        ("helpers", HELPERS_JS),
        ("js", JS),
        ("roles", ROLES_JS),
        ("uplot", UPLOT_JS),
    ] {
        for bad in [
            "src=\"http",
            "href=\"http",
            "url(http",
            "@import",
            "fetch(",
            "XMLHttpRequest",
        ] {
            assert!(!text.contains(bad), "{name} contains {bad:?}");
        }
        // inlined into <script>/<style>: must not close the element early
        if name != "template" {
            assert!(
                !text.contains("</script") && !text.contains("</style"),
                "{name}"
            );
        }
    }
    assert!(TEMPLATE.contains("Content-Security-Policy\" content=\"default-src 'none'"));
}

#[test]
fn our_js_helpers_pass_their_node_tests() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/js");
    let out = std::process::Command::new("node")
        .arg("--test")
        .arg(dir.join("report.test.js"))
        .output()
        .unwrap_or_else(|e| {
            panic!("node not found ({e}): install Node.js (Debian: apt-get install nodejs), as .ci/run does")
        });
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "node --test failed:\n{text}");
    assert!(
        text.contains("# pass 8"),
        "expected 8 passing node tests:\n{text}"
    );
    assert!(text.contains("# fail 0"), "{text}");
}
