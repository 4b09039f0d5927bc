//! The page: `assets/report.html` with the CSS, the vendored uPlot (MIT, `assets/vendor/`,
//! version and SHA-256 pinned by a test), our JS (`helpers.js`, `report.js`, `roles.js`) and the
//! data inlined. Nothing is loaded from
//! anywhere else, and the page's Content-Security-Policy forbids it.
//!
//! The data goes into `<script type="application/json">` with every `<` written `\u003c`
//! (still the same JSON, and the HTML parser cannot see a tag in it). [`render`] shrinks the
//! data's caps until the page fits [`Budget::max_bytes`]. [`write_new`] writes the page to a
//! temporary file beside the target and moves it into place, so a failed report leaves no
//! half-written file, and never replaces an existing file unless asked to.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::budget::{fit_points, shrink};
use crate::model::ReportData;
use crate::{Budget, ReportError};

/// The page template.
pub const TEMPLATE: &str = include_str!("../assets/report.html");
/// Our stylesheet.
pub const CSS: &str = include_str!("../assets/report.css");
/// Our pure helpers (also run by the node tests).
pub const HELPERS_JS: &str = include_str!("../assets/helpers.js");
/// Our script: the page.
pub const JS: &str = include_str!("../assets/report.js");
/// The "What holds the memory" and "Fragmentation and OOM" sections (issue 25).
pub const ROLES_JS: &str = include_str!("../assets/roles.js");
/// uPlot's minified script (vendored).
pub const UPLOT_JS: &str = include_str!("../assets/vendor/uPlot.iife.min.js");
/// uPlot's stylesheet (vendored).
pub const UPLOT_CSS: &str = include_str!("../assets/vendor/uPlot.min.css");
/// uPlot's licence, inlined as a comment next to it.
pub const UPLOT_LICENSE: &str = include_str!("../assets/vendor/uPlot.LICENSE");
/// The vendored uPlot version.
pub const UPLOT_VERSION: &str = "1.6.32";

fn escape_html(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// JSON text safe inside a `<script>` element.
pub fn script_json(data: &ReportData) -> Result<String, ReportError> {
    let json = serde_json::to_string(data).map_err(|e| ReportError::Analysis(e.to_string()))?;
    Ok(json.replace('<', "\\u003c"))
}

fn fill(data_json: &str, title: &str) -> String {
    let uplot = format!(
        "/*! uPlot {UPLOT_VERSION}\n{}*/\n{UPLOT_JS}",
        UPLOT_LICENSE.replace("*/", "* /")
    );
    let mut out = String::with_capacity(
        TEMPLATE.len()
            + data_json.len()
            + UPLOT_JS.len()
            + JS.len()
            + ROLES_JS.len()
            + HELPERS_JS.len()
            + 8192,
    );
    let mut rest = TEMPLATE;
    while let Some(i) = rest.find("{{memscope:") {
        out.push_str(&rest[..i]);
        let tail = &rest[i + "{{memscope:".len()..];
        let Some(j) = tail.find("}}") else { break };
        match &tail[..j] {
            "title" => out.push_str(&escape_html(title)),
            "uplot-css" => out.push_str(UPLOT_CSS),
            "css" => out.push_str(CSS),
            "data" => out.push_str(data_json),
            "uplot-js" => out.push_str(&uplot),
            "helpers-js" => out.push_str(HELPERS_JS),
            "js" => out.push_str(JS),
            "roles-js" => out.push_str(ROLES_JS),
            other => {
                out.push_str("{{memscope:");
                out.push_str(other);
                out.push_str("}}");
            }
        }
        rest = &tail[j + 2..];
    }
    out.push_str(rest);
    out
}

/// The page for `data`, its caps lowered until it fits `budget.max_bytes`.
///
/// # Errors
/// [`ReportError::TooLarge`] when even the smallest caps do not fit.
pub fn render(data: &mut ReportData, budget: &Budget) -> Result<String, ReportError> {
    fit_points(data, budget.total_points);
    let title = format!(
        "memscope report — {}",
        data.runs
            .iter()
            .map(|r| r.label.as_str())
            .collect::<Vec<_>>()
            .join(" vs ")
    );
    loop {
        let page = fill(&script_json(data)?, &title);
        if page.len() <= budget.max_bytes {
            return Ok(page);
        }
        if !shrink(data) {
            return Err(ReportError::TooLarge {
                size: page.len(),
                max: budget.max_bytes,
            });
        }
    }
}

/// Mode of the page before the umask: a report is meant to be shared, as the exports are
/// (`memscope-export`'s outputs; the dumps stay 0600).
pub const PAGE_MODE: u32 = 0o666;

/// Writes `page` to `path` through a temporary file in the same folder ([`PAGE_MODE`]). An
/// existing `path` is an error unless `replace`. The folder is opened without following
/// symbolic links and every step is relative to it ([`memscope_dump::safe_fs`]): the page is
/// never written through a link (a link as `path` itself is an existing file, replaced only
/// with `replace`, and then the link itself, never its target).
///
/// # Errors
/// [`ReportError::Write`] (a symbolic link in the folder's path included), or
/// [`ReportError::Input`] when `path` exists.
pub fn write_new(path: &Path, page: &str, replace: bool) -> Result<PathBuf, ReportError> {
    use memscope_dump::safe_fs::{split_file, Dir};
    let werr = |e: std::io::Error| ReportError::Write {
        path: path.display().to_string(),
        source: e,
    };
    let (dir, name) = split_file(path).map_err(|_| ReportError::input(path, "not a file name"))?;
    let dir = Dir::open(&dir).map_err(werr)?;
    if !replace && dir.contains(&name) {
        return Err(ReportError::input(
            path,
            "exists; not replaced (give another -o, or --force)",
        ));
    }
    // a FIFO or device (`/dev/null`) is never replaced by the page (a link is, itself)
    if std::fs::symlink_metadata(path).is_ok_and(|m| {
        let t = m.file_type();
        !t.is_file() && !t.is_dir() && !t.is_symlink()
    }) {
        return Err(ReportError::input(
            path,
            "a FIFO, socket or device, not a file; not replaced",
        ));
    }
    let tmp = format!(".{name}.{}.tmp", std::process::id());
    let result = (|| -> std::io::Result<()> {
        let mut f: File = dir.create_new(&tmp, PAGE_MODE)?;
        f.write_all(page.as_bytes())?;
        f.sync_all()?;
        if replace {
            dir.rename(&tmp, &name)
        } else {
            // a hard link fails if `path` appeared meanwhile: never replaces; where the file
            // system has no hard links, a rename after a last check
            match dir.link_new(&tmp, &name) {
                Ok(()) => dir.remove_file(&tmp),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(e),
                Err(_) if !dir.contains(&name) => dir.rename(&tmp, &name),
                Err(e) => Err(e),
            }
        }
    })();
    if let Err(e) = result {
        let _ = dir.remove_file(&tmp);
        return Err(werr(e));
    }
    Ok(path.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_are_filled_once_and_unknown_ones_are_kept() {
        let page = fill("{\"x\":\"\\u003c/script>\"}", "a <b>");
        assert!(page.contains("<title>a &lt;b&gt;</title>"));
        assert!(page.contains("{\"x\":\"\\u003c/script>\"}"));
        assert!(!page.contains("{{memscope:"));
        assert_eq!(page.matches("</script>").count(), 5);
    }

    #[test]
    fn an_existing_file_is_not_replaced_and_no_temporary_file_is_left() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("r.html");
        write_new(&p, "one", false).unwrap();
        let e = write_new(&p, "two", false).unwrap_err();
        assert!(e.to_string().contains("exists"), "{e}");
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "one");
        write_new(&p, "three", true).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "three");
        let names: Vec<_> = std::fs::read_dir(t.path()).unwrap().flatten().collect();
        assert_eq!(names.len(), 1);
        let e = write_new(&t.path().join("no/such/dir/r.html"), "x", false).unwrap_err();
        assert!(e.to_string().starts_with("cannot write"), "{e}");
    }

    #[test]
    fn the_page_is_never_written_through_a_symbolic_link() {
        use std::os::unix::fs::symlink;
        let t = tempfile::tempdir().unwrap();
        let victim = t.path().join("victim");
        std::fs::create_dir(&victim).unwrap();
        symlink(&victim, t.path().join("dlink")).unwrap();
        let e = write_new(&t.path().join("dlink/r.html"), "x", false).unwrap_err();
        assert!(e.to_string().contains("is a symbolic link"), "{e}");
        assert_eq!(std::fs::read_dir(&victim).unwrap().count(), 0);
        // a link as the file: an existing name, and with replace the link itself goes
        let target = victim.join("t.html");
        std::fs::write(&target, "keep").unwrap();
        let p = t.path().join("r.html");
        symlink(&target, &p).unwrap();
        let e = write_new(&p, "x", false).unwrap_err();
        assert!(e.to_string().contains("exists"), "{e}");
        write_new(&p, "new", true).unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "new");
        assert!(!std::fs::symlink_metadata(&p)
            .unwrap()
            .file_type()
            .is_symlink());
    }

    #[test]
    fn a_fifo_is_never_replaced_by_the_page_even_when_asked_to() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("fifo.html");
        assert!(std::process::Command::new("mkfifo")
            .arg(&p)
            .status()
            .unwrap()
            .success());
        let e = write_new(&p, "x", true).unwrap_err();
        assert!(e.to_string().contains("FIFO, socket or device"), "{e}");
        assert!(!std::fs::symlink_metadata(&p).unwrap().file_type().is_file());
    }
}
