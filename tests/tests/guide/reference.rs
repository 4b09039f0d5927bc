//! The guide's reference pages, generated from the code: every subcommand's `--help`, the
//! adapters `memscope adapters list` describes, config.json's keys (`memscope config schema`),
//! and the file formats (the dump header and table of `memscope-dump`, the compare, Python
//! trace and watch headers, and the JSON schemas of `schemas/`). `guide.rs` compares them with
//! the committed pages and rewrites those under `MEMSCOPE_UPDATE_GUIDE=1`.

use memscope_tests::{memscope_bin, repo_root};
use serde_json::Value;
use std::fmt::Write as _;
use std::process::Command;

const NOTE: &str = "<!-- Generated from the code by tests/tests/guide.rs: do not edit; \
                    `MEMSCOPE_UPDATE_GUIDE=1 cargo test -p memscope-tests --test guide` \
                    rewrites it. -->";

fn memscope(args: &[&str]) -> String {
    let o = Command::new(memscope_bin())
        .args(args)
        .env("COLUMNS", "100")
        .output()
        .expect("run memscope");
    assert!(o.status.success(), "memscope {args:?}: {o:?}");
    String::from_utf8(o.stdout).expect("UTF-8 help")
}

/// The subcommands a `--help` text lists (without `help`).
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| l.trim() != "Commands:")
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_owned)
        .collect()
}

fn console(page: &mut String, command: &str, output: &str) {
    let _ = writeln!(page, "```console\n$ {command}\n{}```\n", output);
}

/// `reference/cli.md`: `memscope --help`, every subcommand's and every nested one's.
pub fn cli_page() -> String {
    let mut page = format!(
        "# Command line\n\n{NOTE}\n\nEvery subcommand's `--help`, as this build prints it.\n\n"
    );
    let top = memscope(&["--help"]);
    console(&mut page, "memscope --help", &top);
    for sub in subcommands(&top) {
        let help = memscope(&[&sub, "--help"]);
        let _ = writeln!(page, "## memscope {sub}\n");
        console(&mut page, &format!("memscope {sub} --help"), &help);
        for nested in subcommands(&help) {
            let h = memscope(&[&sub, &nested, "--help"]);
            let _ = writeln!(page, "### memscope {sub} {nested}\n");
            console(&mut page, &format!("memscope {sub} {nested} --help"), &h);
        }
    }
    page
}

/// `reference/adapters.md`: `memscope adapters list`.
pub fn adapters_page() -> String {
    let mut page = format!(
        "# Adapters\n\n{NOTE}\n\nThe built-in adapters and the shipped plugins (`pymem`), \
         as `memscope adapters list` describes them; `--adapter-path LIB` adds a third-party \
         one to the list.\n\n"
    );
    console(
        &mut page,
        "memscope adapters list",
        &memscope(&["adapters", "list"]),
    );
    page
}

/// A schema's type, in a few words.
fn kind(v: &Value) -> String {
    if let Some(r) = v.get("$ref").and_then(Value::as_str) {
        let name = r.rsplit('/').next().unwrap_or(r);
        return match name {
            "list" => "string `\"a,b\"` or list of strings".to_owned(),
            n => format!("`{n}`"),
        };
    }
    if let Some(c) = v.get("const") {
        return format!("`{c}`");
    }
    if let Some(e) = v.get("enum").and_then(Value::as_array) {
        let vals: Vec<String> = e.iter().map(|x| format!("`{x}`")).collect();
        return format!("one of {}", vals.join(", "));
    }
    if let Some(alts) = v.get("oneOf").or(v.get("anyOf")).and_then(Value::as_array) {
        return alts.iter().map(kind).collect::<Vec<_>>().join(" or ");
    }
    match v.get("type") {
        Some(Value::String(t)) if t == "array" => match v.get("items") {
            Some(items) => format!("list of {}", kind(items)),
            None => "list".to_owned(),
        },
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(" or "),
        _ => "any".to_owned(),
    }
}

fn cell(s: &str) -> String {
    s.replace('|', "\\|")
        .replace('<', "&lt;")
        .replace('\n', " ")
}

/// A table of an object schema's properties.
fn table(page: &mut String, obj: &Value) {
    let Some(props) = obj.get("properties").and_then(Value::as_object) else {
        let _ = writeln!(page, "{}\n", kind(obj));
        return;
    };
    let required: Vec<&str> = obj
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    page.push_str("| key | type | description |\n|---|---|---|\n");
    for (k, v) in props {
        let req = if required.contains(&k.as_str()) {
            " (required)"
        } else {
            ""
        };
        let desc = v.get("description").and_then(Value::as_str).unwrap_or("");
        let _ = writeln!(page, "| `{k}`{req} | {} | {} |", cell(&kind(v)), cell(desc));
    }
    page.push('\n');
}

/// `reference/config.md`: config.json's keys from `memscope config schema`.
pub fn config_page() -> String {
    let text = memscope(&["config", "schema"]);
    let schema: Value = serde_json::from_str(&text).expect("config schema is JSON");
    let mut page = format!("# config.json keys\n\n{NOTE}\n\n");
    let desc = schema["description"].as_str().unwrap_or_default();
    let _ = writeln!(page, "{desc}\n");
    table(&mut page, &schema);
    page.push_str("The schema itself (validate a file with any JSON Schema tool):\n\n");
    console(&mut page, "memscope config schema", &text);
    page
}

fn schema_section(page: &mut String, file: &str) {
    let path = repo_root().join("schemas").join(file);
    let text = std::fs::read_to_string(&path).expect("read schema");
    let s: Value = serde_json::from_str(&text).expect("schema is JSON");
    let title = s["title"].as_str().unwrap_or(file);
    let _ = writeln!(
        page,
        "### {title}\n\n`schemas/{file}`. {}\n",
        s["description"].as_str().unwrap_or("")
    );
    table(page, &s);
    if let Some(defs) = s.get("$defs").and_then(Value::as_object) {
        for (name, d) in defs {
            if d.get("properties").is_some() {
                let _ = writeln!(page, "`{name}`:\n");
                table(page, d);
            }
        }
    }
}

/// `reference/formats.md`: the files memscope writes, from the constants that write them.
pub fn formats_page() -> String {
    use memscope_analysis::compare::{COMPARE_HEADER_1, COMPARE_HEADER_2, COMPARE_HEADER_2_STEP};
    let mut page = format!("# File formats\n\n{NOTE}\n\n");
    let header = memscope_dump::sink::csv::HEADER.join(",");
    let _ = writeln!(
        page,
        "## Dumps\n\n`device_<n>/dump/memscope_dump_<ts>.csv` (msMemScope's format), header:\n\n\
         ```text,norun\n{header}\n```\n\n`--format db` writes the same rows into one SQLite \
         table:\n\n```sql,norun\n{};\n```\n\nThe header of a dump the demo writes:\n",
        memscope_dump::sink::sqlite::CREATE_TABLE.replace("    ", "  ")
    );
    console(
        &mut page,
        "memscope run -q -o fmt -- python3 examples/sim-npu/train.py --steps 2 > /dev/null",
        "",
    );
    console(
        &mut page,
        "head -n 1 fmt/msmemscope_*/device_0/dump/memscope_dump_*.csv",
        &format!("{header}\n"),
    );
    let _ = writeln!(
        page,
        "## Aggregate\n\n`memscope_aggregate_<ts>.csv` of a process directory (`memscope run \
         --aggregate`, issue 38): one row per allocator (`Device Id`, `Event Type`), call site \
         (the first frame of the user's code `← its caller`, or `(no stack)`) and owner (a \
         later `MEMORY_OWNER` row moves a block, with its allocation, to its new owner). \
         `Blocks At Peak` and `Bytes At Peak` are what the row held when its allocator's live \
         bytes were first highest (summed over an allocator's rows: its peak; the `Aggregate` \
         section of the run's end names the ID of the event after which it was reached, as a \
         full run numbers it); the stacks are the first seen for the row. Rows by allocator, \
         then bytes at the peak, largest first. Header:\n\n```text,norun\n{}\n```\n",
        memscope_analysis::aggregate::HEADER.join(",")
    );
    let _ = writeln!(
        page,
        "## Compare\n\n`compare/memory_compare_<ts>.csv` starts with msMemScope's two header \
         lines:\n\n```text,norun\n{COMPARE_HEADER_1}\n{COMPARE_HEADER_2}\n```\n\nWith \
         `--step-column` the second is\n\n```text,norun\n{COMPARE_HEADER_2_STEP}\n```\n\n\
         ## Python trace\n\n`device_<n>/dump/python_trace_<tid>_<ts>.csv` (`--events \
         traceback`; with `--format db` table `python_trace_<pid>`):\n\n```text,norun\n{}\n\
         ```\n\n## Memory watch\n\n`device_<n>/watch_dump/watch_dump_data_check_sum_<ts>.csv`:\
         \n\n```text,norun\n{}\n```\n\n## JSON files\n",
        memscope_collect::python::TRACE_HEADER.join(","),
        memscope_collect::torch::WATCH_SUM_HEADER,
    );
    for f in [
        "memscope_run.schema.json",
        "memscope_summary.schema.json",
        "memscope_diff.schema.json",
    ] {
        schema_section(&mut page, f);
    }
    page
}

/// Every generated page: its path under `docs/guide/src` and its text.
pub fn pages() -> Vec<(&'static str, String)> {
    vec![
        ("reference/cli.md", cli_page()),
        ("reference/adapters.md", adapters_page()),
        ("reference/config.md", config_page()),
        ("reference/formats.md", formats_page()),
    ]
}
