//! Helpers of the `memscope export` tests: synthetic dumps in msMemScope's layout, running the
//! command, and the Python checkers under `tests/export/`.
//!
//! The checkers run with `$MEMSCOPE_TEST_PYTHON` (`.ci/run` points it at a venv holding
//! protobuf, perfetto, duckdb, datafusion, pyarrow and jsonschema), else `python3`.
#![allow(dead_code)]

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use memscope_tests::*;

/// The Python interpreter of the checkers.
pub fn python() -> String {
    std::env::var("MEMSCOPE_TEST_PYTHON").unwrap_or_else(|_| "python3".to_owned())
}

/// Runs `tests/export/<script> <args>` and parses its JSON output. Panics with the script's
/// message on a failed check, and with the install hint when a package (or Java, Spark's) is
/// missing.
pub fn py_check(script: &str, args: &[&str]) -> serde_json::Value {
    let path = repo_root().join("tests/export").join(script);
    let o = Command::new(python())
        .arg(&path)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {} ({e}); set MEMSCOPE_TEST_PYTHON", python()));
    let err = String::from_utf8_lossy(&o.stderr);
    match o.status.code() {
        Some(0) => serde_json::from_slice(&o.stdout)
            .unwrap_or_else(|e| panic!("{script}: bad JSON output ({e}): {err}")),
        Some(3) => panic!(
            "{script} needs what {} or this machine does not have: {err}\
             (.ci/run installs Java from Debian and the Python packages into a venv; point \
             MEMSCOPE_TEST_PYTHON at its python)",
            python()
        ),
        _ => panic!("{script} {args:?} failed: {err}"),
    }
}

/// `memscope <args>`.
pub fn memscope(args: &[&str]) -> Output {
    Command::new(memscope_bin())
        .args(args)
        .output()
        .expect("run memscope")
}

/// `memscope export --to <to> <inputs> -o <out>`, asserting success; returns stdout.
pub fn export(to: &str, inputs: &[&Path], out: &Path) -> String {
    let mut cmd = Command::new(memscope_bin());
    cmd.args(["export", "--to", to])
        .args(inputs)
        .arg("-o")
        .arg(out);
    let o = cmd.output().expect("run memscope export");
    assert!(
        o.status.success(),
        "memscope export --to {to} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Header of memscope's CSV dumps.
pub const HEADER: &str = "ID,Event,Event Type,Name,Timestamp(ns),Process Id,Thread Id,Device Id,Ptr,Attr,Call Stack(Python),Call Stack(C)";

/// One dump row; `device` is written as in the dump (`0`, `cpu`, `N/A`).
#[derive(Clone, Debug)]
pub struct Row {
    pub id: u64,
    pub event: &'static str,
    pub etype: &'static str,
    pub name: String,
    pub ts: u64,
    pub pid: u32,
    pub device: String,
    pub ptr: Option<u64>,
    pub attr: String,
    pub py: String,
    pub c: String,
}

fn quote(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_owned()
    }
}

impl Row {
    /// The CSV line (RFC 4180 quoting).
    pub fn line(&self) -> String {
        let ptr = self.ptr.map_or("N/A".to_owned(), |p| format!("0x{p:016x}"));
        let name = if self.name.is_empty() {
            "N/A".to_owned()
        } else {
            quote(&self.name)
        };
        format!(
            "{},{},{},{},{},{},{},{},{},{},{},{}",
            self.id,
            self.event,
            self.etype,
            name,
            self.ts,
            self.pid,
            self.pid,
            self.device,
            ptr,
            quote(&self.attr),
            quote(&self.py),
            quote(&self.c)
        )
    }
}

/// Builds the rows of one process in ID order, keeping pool figures (`used`) right.
pub struct Proc {
    pub pid: u32,
    pub rows: Vec<Row>,
    next_id: u64,
    pub ts: u64,
    alloc_id: u64,
    pub used: std::collections::BTreeMap<(String, &'static str), i64>,
}

impl Proc {
    pub fn new(pid: u32, ts: u64) -> Proc {
        Proc {
            pid,
            rows: Vec::new(),
            next_id: 1,
            ts,
            alloc_id: 0,
            used: Default::default(),
        }
    }

    /// Appends a row; returns its ID.
    #[allow(clippy::too_many_arguments)]
    pub fn row(
        &mut self,
        event: &'static str,
        etype: &'static str,
        name: &str,
        device: &str,
        ptr: Option<u64>,
        attr: &str,
        py: &str,
        c: &str,
    ) -> u64 {
        self.ts += 1000;
        let id = self.next_id;
        self.next_id += 1;
        self.rows.push(Row {
            id,
            event,
            etype,
            name: name.to_owned(),
            ts: self.ts,
            pid: self.pid,
            device: device.to_owned(),
            ptr,
            attr: attr.to_owned(),
            py: py.to_owned(),
            c: c.to_owned(),
        });
        id
    }

    /// A MALLOC of `pool` on `device`; returns its allocation id.
    #[allow(clippy::too_many_arguments)]
    pub fn malloc(
        &mut self,
        pool: &'static str,
        device: &str,
        addr: u64,
        size: u64,
        total: Option<u64>,
        owner: &str,
        py: &str,
        c: &str,
    ) -> u64 {
        self.alloc_id += 1;
        let used = self.used.entry((device.to_owned(), pool)).or_default();
        *used += size as i64;
        let mut attr = format!(
            "{{allocation_id:{},addr:0x{addr:016x},size:{size},used:{used}",
            self.alloc_id
        );
        if let Some(t) = total {
            let _ = write!(attr, ",total:{t}");
        }
        if !owner.is_empty() {
            let _ = write!(attr, ",owner:{owner}");
        }
        attr.push('}');
        self.row("MALLOC", pool, "", device, Some(addr), &attr, py, c);
        self.alloc_id
    }

    /// A FREE of block `id` (`shadow`: msMemScope's closing row, which changes nothing).
    #[allow(clippy::too_many_arguments)]
    pub fn free(
        &mut self,
        pool: &'static str,
        device: &str,
        id: u64,
        addr: u64,
        size: u64,
        total: Option<u64>,
        shadow: bool,
    ) {
        let used = self.used.entry((device.to_owned(), pool)).or_default();
        if !shadow {
            *used -= size as i64;
        }
        let mut attr = format!("{{allocation_id:{id},addr:0x{addr:016x},size:{size},used:{used}");
        if let Some(t) = total {
            let _ = write!(attr, ",total:{t}");
        }
        if shadow {
            attr.push_str(",shadow:true");
        }
        attr.push('}');
        self.row("FREE", pool, "", device, Some(addr), &attr, "", "");
    }

    /// Writes the rows in msMemScope's layout under `root`: one file per device directory,
    /// device-less rows in every file. Returns the process directory.
    pub fn write_layout(&self, root: &Path) -> PathBuf {
        let dir = root.join(format!("msmemscope_{}_20260101000000_ascend", self.pid));
        let mut devices: Vec<String> = self
            .rows
            .iter()
            .filter(|r| r.device != "N/A")
            .map(|r| r.device.clone())
            .collect();
        devices.sort();
        devices.dedup();
        for d in devices {
            let sub = dir.join(format!("device_{d}")).join("dump");
            std::fs::create_dir_all(&sub).unwrap();
            let mut text = format!("{HEADER}\n");
            for r in self
                .rows
                .iter()
                .filter(|r| r.device == d || r.device == "N/A")
            {
                text.push_str(&r.line());
                text.push('\n');
            }
            std::fs::write(sub.join("memscope_dump_20260101000000.csv"), text).unwrap();
        }
        dir
    }

    /// The rows in msMemScope's order: a block's MALLOC written just before its FREE (as
    /// msMemScope writes a block's rows when it dies), blocks never freed at the end.
    pub fn msmemscope_order(&self) -> Proc {
        let alloc_id = |r: &Row| -> Option<String> {
            let a = r.attr.split("allocation_id:").nth(1)?;
            Some(a.split([',', '}']).next()?.to_owned())
        };
        let mut held: Vec<(String, Row)> = Vec::new();
        let mut rows = Vec::new();
        for r in &self.rows {
            match (r.event, alloc_id(r)) {
                ("MALLOC", Some(id)) => held.push((id, r.clone())),
                ("FREE", Some(id)) => {
                    if let Some(i) = held.iter().position(|(h, _)| *h == id) {
                        rows.push(held.remove(i).1);
                    }
                    rows.push(r.clone());
                }
                _ => rows.push(r.clone()),
            }
        }
        rows.extend(held.into_iter().map(|(_, r)| r));
        Proc {
            pid: self.pid,
            rows,
            next_id: self.next_id,
            ts: self.ts,
            alloc_id: self.alloc_id,
            used: self.used.clone(),
        }
    }

    /// Writes every row into one loose file.
    pub fn write_file(&self, path: &Path) {
        let mut text = format!("{HEADER}\n");
        for r in &self.rows {
            text.push_str(&r.line());
            text.push('\n');
        }
        std::fs::write(path, text).unwrap();
    }
}

/// The one-line error of a failed `memscope` call (exit code 2 asserted).
pub fn fails(o: &Output) -> String {
    assert_eq!(
        o.status.code(),
        Some(2),
        "expected exit code 2: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let err = String::from_utf8_lossy(&o.stderr).trim().to_owned();
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    err
}
