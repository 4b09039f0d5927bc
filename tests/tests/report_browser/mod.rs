//! Headless Chromium for the report tests (Debian's `chromium`, installed by `.ci/run`): load a
//! page offline (every host name fails to resolve), read the DOM after its scripts ran, the
//! console lines and the network requests the page made (from Chromium's NetLog), and take
//! screenshots.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What loading a page gave.
pub struct Page {
    /// The DOM after the scripts ran (`--dump-dom`).
    pub dom: String,
    /// Console lines of the page (`INFO:CONSOLE…`).
    pub console: Vec<String>,
    /// URLs the page asked the network for.
    pub requests: Vec<String>,
}

impl Page {
    /// The value of `attr` on `<body>`, HTML entities decoded.
    pub fn body_attr(&self, attr: &str) -> Option<String> {
        let start = self.dom.find("<body")?;
        let tag = &self.dom[start..start + self.dom[start..].find('>')?];
        let key = format!("{attr}=\"");
        let i = tag.find(&key)? + key.len();
        let v = &tag[i..i + tag[i..].find('"')?];
        Some(
            v.replace("&quot;", "\"")
                .replace("&lt;", "<")
                .replace("&gt;", ">")
                .replace("&amp;", "&"),
        )
    }

    /// The HTML of `<section id="{id}">`.
    pub fn section(&self, id: &str) -> &str {
        let open = format!("<section id=\"{id}\"");
        let i = self
            .dom
            .find(&open)
            .unwrap_or_else(|| panic!("no section {id}"));
        let end = self.dom[i..]
            .find("</section>")
            .map_or(self.dom.len(), |e| i + e);
        &self.dom[i..end]
    }
}

/// The Chromium binary (`$MEMSCOPE_CHROMIUM`, else `chromium` on the PATH).
pub fn chromium() -> PathBuf {
    if let Some(p) = std::env::var_os("MEMSCOPE_CHROMIUM") {
        return PathBuf::from(p);
    }
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("chromium"))
            .find(|p| p.is_file())
    });
    found.unwrap_or_else(|| {
        panic!("chromium not found on the PATH: the report tests need Debian's chromium (apt-get install chromium), which .ci/run installs")
    })
}

fn run(args: &[String], what: &str) -> (String, String) {
    let profile = tempfile::tempdir().expect("profile dir");
    let mut cmd = Command::new(chromium());
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--host-resolver-rules=MAP * ~NOTFOUND",
        "--enable-logging=stderr",
        "--v=0",
        "--virtual-time-budget=15000",
    ])
    .arg(format!("--user-data-dir={}", profile.path().display()))
    .args(args)
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("start chromium");
    let out = child.stdout.take().expect("stdout");
    let err = child.stderr.take().expect("stderr");
    let t_out = std::thread::spawn(move || std::io::read_to_string(out).unwrap_or_default());
    let t_err = std::thread::spawn(move || std::io::read_to_string(err).unwrap_or_default());
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        if child.try_wait().expect("wait chromium").is_some() {
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish {what} within 180 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    (
        t_out.join().unwrap_or_default(),
        t_err.join().unwrap_or_default(),
    )
}

/// URLs the page (origin `file://`) requested, from a NetLog file.
fn page_requests(netlog: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(netlog).expect("read the NetLog");
    let v: serde_json::Value = serde_json::from_str(&text).expect("NetLog is JSON");
    let start_job = v["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
        .as_i64()
        .expect("NetLog event type URL_REQUEST_START_JOB");
    v["events"]
        .as_array()
        .expect("NetLog events")
        .iter()
        .filter(|e| e["type"].as_i64() == Some(start_job))
        .filter(|e| {
            e["params"]["network_isolation_key"]
                .as_str()
                .is_some_and(|k| k.contains("file://"))
        })
        .map(|e| e["params"]["url"].as_str().unwrap_or("?").to_owned())
        .collect()
}

/// Loads `html` offline and returns its DOM, console lines and network requests.
pub fn load(html: &Path) -> Page {
    let dir = tempfile::tempdir().expect("netlog dir");
    let netlog = dir.path().join("net.json");
    let (dom, log) = run(
        &[
            format!("--log-net-log={}", netlog.display()),
            "--dump-dom".into(),
            format!("file://{}", html.display()),
        ],
        "loading the page",
    );
    let console = log
        .lines()
        .filter(|l| l.contains(":CONSOLE") || l.contains("Uncaught"))
        .map(str::to_owned)
        .collect();
    Page {
        dom,
        console,
        requests: page_requests(&netlog),
    }
}

/// Saves a screenshot of `html` (width × height CSS pixels) to `png`.
pub fn screenshot(html: &Path, png: &Path, width: u32, height: u32) {
    let _ = std::fs::remove_file(png);
    run(
        &[
            format!("--window-size={width},{height}"),
            format!("--screenshot={}", png.display()),
            format!("file://{}", html.display()),
        ],
        "the screenshot",
    );
    let bytes =
        std::fs::read(png).unwrap_or_else(|e| panic!("no screenshot {}: {e}", png.display()));
    assert!(
        bytes.starts_with(b"\x89PNG"),
        "{} is not a PNG",
        png.display()
    );
}

/// Where the tests keep their screenshots: `target/<profile>/report-screenshots/`.
pub fn screenshot_dir() -> PathBuf {
    let d = memscope_tests::profile_dir().join("report-screenshots");
    std::fs::create_dir_all(&d).expect("screenshot dir");
    d
}

/// A copy of `html` with `script` run after the page's own (at `load`): it drives the page and
/// leaves its findings (object `r`), as JSON, in `<body data-selftest>`. The script runs in an
/// async function with `tick()` (a short wait: uPlot applies scale changes in a microtask).
pub fn with_script(html: &Path, script: &str, dir: &Path) -> PathBuf {
    let page = std::fs::read_to_string(html).expect("read the report");
    let tail = format!(
        "<script>window.addEventListener(\"load\", () => setTimeout(async () => {{ const r = {{}}; const tick = () => new Promise((ok) => setTimeout(ok, 30)); try {{ {script} }} catch (e) {{ r.error = String(e && e.stack || e); }} document.body.setAttribute(\"data-selftest\", JSON.stringify(r)); }}, 0));</script></body>"
    );
    let i = page.rfind("</body>").expect("</body>");
    let out = dir.join("selftest.html");
    std::fs::write(&out, format!("{}{}{}", &page[..i], tail, &page[i + 7..])).expect("write");
    out
}

/// The findings of a [`with_script`] page.
pub fn selftest(page: &Page) -> serde_json::Value {
    let text = page.body_attr("data-selftest").unwrap_or_else(|| {
        panic!(
            "the test script left no result; console: {:?}",
            page.console
        )
    });
    let v: serde_json::Value = serde_json::from_str(&text).expect("selftest JSON");
    assert!(
        v.get("error").is_none(),
        "the test script failed: {}",
        v["error"]
    );
    v
}

/// The report data embedded in a page (`<script id="report-data">`).
pub fn report_data(html: &Path) -> serde_json::Value {
    let page = std::fs::read_to_string(html).expect("read the report");
    let open = "<script type=\"application/json\" id=\"report-data\">";
    let i = page.find(open).expect("data block") + open.len();
    let j = i + page[i..].find("</script>").expect("end of the data block");
    serde_json::from_str(&page[i..j]).expect("the data block is JSON")
}

/// Checks what every report page must show: ready, no console line, no network request.
pub fn assert_clean(page: &Page) {
    assert_eq!(
        page.body_attr("data-ready").as_deref(),
        Some("1"),
        "the page did not set its ready marker; error: {:?}; console: {:?}",
        page.body_attr("data-error"),
        page.console
    );
    assert!(page.console.is_empty(), "console lines: {:?}", page.console);
    assert!(
        page.requests.is_empty(),
        "network requests: {:?}",
        page.requests
    );
}
