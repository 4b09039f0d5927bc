//! Parquet datasets for SQL engines (DuckDB, DataFusion, Spark, Polars): every process's rows
//! in a hive-partitioned layout, queried with the engine's own glob or partition discovery.
//!
//! ```text
//! OUT/events/rank=<R>/pid=<P>/part-<NNNNN>.parquet   the rows ([`columns`] has the schema)
//! OUT/processes/part-00000.parquet                   one row per process
//! ```
//!
//! * `rank` and `pid` are only in the paths (engines add them as columns; a copy inside the
//!   files makes DataFusion and Spark fail or double them). `-1` stands for unknown.
//! * ZSTD(3), row groups of at most [`ROW_GROUP_ROWS`] rows, a new part every
//!   [`FILE_ROWS`] rows; rows in ID order (declared as the sorting column `id`); key-value
//!   metadata `memscope.schema_version`, `memscope.version`, `memscope.rank`,
//!   `memscope.rank_source`, `memscope.pid`, `memscope.node`.
//! * Each part is written as `.part-<NNNNN>.parquet.tmp` and renamed when its footer is
//!   written: a glob never meets a file without footer (DuckDB fails the whole query on one).
//! * `processes`: `rank`, `pid`, `synthetic_pid`, `node`, `rank_source`, `devices`, `source`,
//!   `events`, `parts` — the table to join on when ranks repeat across nodes.

pub mod columns;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::builder::{Int64Builder, StringBuilder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::{KeyValue, SortingColumn};
use parquet::file::properties::WriterProperties;

use memscope_core::bus::StepState;
use memscope_core::event::Device;

use crate::error::ExportError;
use crate::input::ProcessInput;
use crate::progress::Progress;
use crate::replay::{replay, Flow, Item};
use crate::Summary;

/// Rows per Arrow batch handed to the writer.
pub const BATCH_ROWS: usize = 64 * 1024;
/// Largest row group.
pub const ROW_GROUP_ROWS: usize = 1024 * 1024;
/// Rows per part file.
pub const FILE_ROWS: u64 = 8 * 1024 * 1024;

fn perr(path: &Path, e: impl std::fmt::Display) -> ExportError {
    ExportError::Write {
        path: path.display().to_string(),
        source: std::io::Error::other(e.to_string()),
    }
}

fn properties(kv: Vec<KeyValue>) -> Result<WriterProperties, ExportError> {
    let level = ZstdLevel::try_new(3).map_err(|e| ExportError::Other(e.to_string()))?;
    Ok(WriterProperties::builder()
        .set_compression(Compression::ZSTD(level))
        .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
        .set_sorting_columns(Some(vec![SortingColumn {
            column_idx: 0,
            descending: false,
            nulls_first: false,
        }]))
        .set_key_value_metadata(Some(kv))
        .build())
}

/// A part being written: removed unless closed.
struct Part {
    tmp: PathBuf,
    path: PathBuf,
    writer: Option<ArrowWriter<File>>,
    rows: u64,
}

impl Part {
    fn create(
        dir: &Path,
        n: u32,
        schema: &SchemaRef,
        props: WriterProperties,
    ) -> Result<Part, ExportError> {
        let path = dir.join(format!("part-{n:05}.parquet"));
        let tmp = dir.join(format!(".part-{n:05}.parquet.tmp"));
        let f = crate::out_file::create_tmp(&tmp)?;
        let writer =
            ArrowWriter::try_new(f, schema.clone(), Some(props)).map_err(|e| perr(&path, e))?;
        Ok(Part {
            tmp,
            path,
            writer: Some(writer),
            rows: 0,
        })
    }

    fn write(&mut self, batch: &RecordBatch) -> Result<(), ExportError> {
        self.rows += batch.num_rows() as u64;
        self.writer
            .as_mut()
            .expect("open")
            .write(batch)
            .map_err(|e| perr(&self.path, e))
    }

    fn close(mut self) -> Result<(PathBuf, u64), ExportError> {
        let w = self.writer.take().expect("open");
        w.close().map_err(|e| perr(&self.path, e))?;
        crate::out_file::publish(&self.tmp, &self.path)?;
        let size = std::fs::metadata(&self.path)
            .map_err(|e| ExportError::write(&self.path, e))?
            .len();
        Ok((self.path.clone(), size))
    }
}

impl Drop for Part {
    fn drop(&mut self) {
        if self.writer.take().is_some() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// A process's rows written into its partition.
struct Written {
    events: u64,
    files: Vec<(PathBuf, u64)>,
}

fn metadata(p: &ProcessInput) -> Vec<KeyValue> {
    let kv = |k: &str, v: String| KeyValue::new(k.to_owned(), v);
    vec![
        kv(
            "memscope.schema_version",
            columns::SCHEMA_VERSION.to_owned(),
        ),
        kv("memscope.version", env!("CARGO_PKG_VERSION").to_owned()),
        kv("memscope.rank", p.rank.as_i64().to_string()),
        kv("memscope.rank_source", p.rank.source.as_str().to_owned()),
        kv("memscope.pid", p.pid.map_or(-1, i64::from).to_string()),
        kv("memscope.node", p.node.clone()),
    ]
}

fn write_process(
    p: &ProcessInput,
    events_dir: &Path,
    schema: &SchemaRef,
    progress: &mut dyn Progress,
) -> Result<Written, ExportError> {
    progress.stage(&format!("parquet: {}", p.label()));
    let dir = events_dir
        .join(format!("rank={}", p.rank.as_i64()))
        .join(format!("pid={}", p.pid.map_or(-1, i64::from)));
    crate::out_file::create_dirs(&dir)?;
    // two inputs of the same rank and pid (two nodes) share the partition: next free part
    let mut n: u32 = 0;
    while dir.join(format!("part-{n:05}.parquet")).exists() {
        n += 1;
    }
    let kv = metadata(p);
    let mut part: Option<Part> = None;
    let mut files: Vec<(PathBuf, u64)> = Vec::new();
    let mut batch = columns::Batch::new();
    let mut steps = StepState::default();
    let flush = |batch: &mut columns::Batch,
                 part: &mut Option<Part>,
                 files: &mut Vec<(PathBuf, u64)>,
                 n: &mut u32|
     -> Result<(), ExportError> {
        if batch.rows() == 0 {
            return Ok(());
        }
        if part.is_none() {
            *part = Some(Part::create(&dir, *n, schema, properties(kv.clone())?)?);
            *n += 1;
        }
        let rb = batch
            .finish(schema)
            .map_err(|e| ExportError::Other(format!("parquet batch: {e}")))?;
        let open = part.as_mut().expect("created above");
        open.write(&rb)?;
        if open.rows >= FILE_ROWS {
            files.push(part.take().expect("open").close()?);
        }
        Ok(())
    };
    let first = n;
    let stats = replay(p, None, progress, &mut |item| {
        match item {
            Item::Restart => {
                part = None; // its temporary file goes
                for (f, _) in files.drain(..) {
                    std::fs::remove_file(&f).map_err(|e| ExportError::write(&f, e))?;
                }
                n = first;
                batch = columns::Batch::new();
                steps = StepState::default();
            }
            Item::Event(ev) => {
                steps.observe(&ev);
                batch.push(&ev, steps.current);
                if batch.rows() >= BATCH_ROWS {
                    flush(&mut batch, &mut part, &mut files, &mut n)?;
                }
            }
        }
        Ok(Flow::Continue)
    })?;
    flush(&mut batch, &mut part, &mut files, &mut n)?;
    if let Some(open) = part.take() {
        files.push(open.close()?);
    }
    if files.is_empty() {
        let _ = std::fs::remove_dir(&dir);
        let _ = dir.parent().map(std::fs::remove_dir);
    }
    Ok(Written {
        events: stats.events,
        files,
    })
}

fn device_list(devices: &[Device]) -> String {
    let v: Vec<String> = devices.iter().map(|d| d.to_text()).collect();
    v.join(",")
}

fn write_processes(
    out: &Path,
    rows: &[(&ProcessInput, &Written)],
) -> Result<(PathBuf, u64), ExportError> {
    let dir = out.join("processes");
    crate::out_file::create_dirs(&dir)?;
    let schema: SchemaRef = Arc::new(Schema::new(vec![
        Field::new("rank", DataType::Int64, false),
        Field::new("pid", DataType::Int64, false),
        Field::new("synthetic_pid", DataType::Int64, false),
        Field::new("node", DataType::Utf8, false),
        Field::new("rank_source", DataType::Utf8, false),
        Field::new("devices", DataType::Utf8, false),
        Field::new("source", DataType::Utf8, false),
        Field::new("events", DataType::Int64, false),
        Field::new("parts", DataType::Int64, false),
    ]));
    let mut ints: Vec<Int64Builder> = (0..5).map(|_| Int64Builder::new()).collect();
    let mut strs: Vec<StringBuilder> = (0..4).map(|_| StringBuilder::new()).collect();
    for (p, w) in rows {
        ints[0].append_value(p.rank.as_i64());
        ints[1].append_value(p.pid.map_or(-1, i64::from));
        ints[2].append_value(i64::from(p.synthetic_pid));
        ints[3].append_value(w.events as i64);
        ints[4].append_value(w.files.len() as i64);
        strs[0].append_value(&p.node);
        strs[1].append_value(p.rank.source.as_str());
        strs[2].append_value(device_list(&p.devices));
        strs[3].append_value(p.origin());
    }
    let mut i = ints
        .into_iter()
        .map(|mut b| Arc::new(b.finish()) as ArrayRef);
    let mut s = strs
        .into_iter()
        .map(|mut b| Arc::new(b.finish()) as ArrayRef);
    let cols: Vec<ArrayRef> = vec![
        i.next().expect("rank"),
        i.next().expect("pid"),
        i.next().expect("synthetic_pid"),
        s.next().expect("node"),
        s.next().expect("rank_source"),
        s.next().expect("devices"),
        s.next().expect("source"),
        i.next().expect("events"),
        i.next().expect("parts"),
    ];
    let rb = RecordBatch::try_new(schema.clone(), cols)
        .map_err(|e| ExportError::Other(format!("parquet batch: {e}")))?;
    let kv = vec![
        KeyValue::new(
            "memscope.schema_version".into(),
            columns::SCHEMA_VERSION.to_owned(),
        ),
        KeyValue::new(
            "memscope.version".into(),
            env!("CARGO_PKG_VERSION").to_owned(),
        ),
    ];
    let mut part = Part::create(&dir, 0, &schema, properties(kv)?)?;
    part.write(&rb)?;
    part.close()
}

/// Checks that `out` is absent or an empty directory, and creates it.
fn prepare(out: &Path) -> Result<(), ExportError> {
    match std::fs::symlink_metadata(out) {
        Ok(md) if md.is_dir() => {
            let mut rd = std::fs::read_dir(out).map_err(|e| ExportError::write(out, e))?;
            if rd.next().is_some() {
                return Err(ExportError::Output {
                    path: out.display().to_string(),
                    msg: "is not empty; memscope does not add to or overwrite a dataset (choose a new directory)".into(),
                });
            }
            Ok(())
        }
        Ok(_) => Err(ExportError::Output {
            path: out.display().to_string(),
            msg: "exists and is not a directory; the Parquet dataset is a directory".into(),
        }),
        Err(_) => crate::out_file::create_dirs(out),
    }
}

/// `memscope export --to parquet`: the dataset of every process of the input.
///
/// # Errors
/// An unreadable input, an existing or unwritable output.
pub fn export(
    procs: &[ProcessInput],
    out: &Path,
    progress: &mut dyn Progress,
) -> Result<Summary, ExportError> {
    prepare(out)?;
    progress.plan(procs.iter().map(|p| p.bytes_for(None)).sum());
    let schema = columns::schema();
    let events_dir = out.join("events");
    let mut summary = Summary::default();
    let mut written = Vec::new();
    for p in procs {
        let w = write_process(p, &events_dir, &schema, progress)?;
        summary.events += w.events;
        summary.processes += 1;
        for (f, size) in &w.files {
            summary.files.push(f.clone());
            summary.bytes += size;
        }
        written.push(w);
    }
    let rows: Vec<(&ProcessInput, &Written)> = procs.iter().zip(&written).collect();
    let (f, size) = write_processes(out, &rows)?;
    summary.files.push(f);
    summary.bytes += size;
    Ok(summary)
}
