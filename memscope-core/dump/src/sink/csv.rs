//! CSV dump writer: msMemScope's `memscope_dump_<ts>.csv` (behaviour spec §5.2) with proper
//! RFC 4180 quoting (msMemScope does not escape names; we do, so names with commas, quotes and
//! newlines round-trip through the `csv` crate and Python's `csv` module).

use super::DeviceWriter;
pub use memscope_core::attr_text::fmt_ptr;
use memscope_core::attr_text::write_attr;
use memscope_core::bus::BusError;
use memscope_core::event::{Device, Event};
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

/// The header row, exactly.
pub const HEADER: [&str; 12] = [
    "ID",
    "Event",
    "Event Type",
    "Name",
    "Timestamp(ns)",
    "Process Id",
    "Thread Id",
    "Device Id",
    "Ptr",
    "Attr",
    "Call Stack(Python)",
    "Call Stack(C)",
];

/// The file under a CSV writer: once `off` is set (the file failed and was cut back to its
/// last whole row) it swallows whatever the buffers still hold, so nothing lands after the cut.
struct Guarded {
    file: File,
    off: std::sync::atomic::AtomicBool,
}

impl std::io::Write for Guarded {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        if self.off.load(std::sync::atomic::Ordering::Relaxed) {
            return Ok(b.len());
        }
        self.file.write(b)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        if self.off.load(std::sync::atomic::Ordering::Relaxed) {
            return Ok(());
        }
        self.file.flush()
    }
}

/// One CSV file.
pub struct CsvFile {
    w: csv::Writer<BufWriter<Guarded>>,
    path: PathBuf,
    rows: u64,
    scratch: String,
    /// File length at the last successful flush (ends on a whole row).
    durable_len: u64,
    /// Rows at the last successful flush.
    durable_rows: u64,
}

fn writer_on(file: File) -> csv::Writer<BufWriter<Guarded>> {
    csv::WriterBuilder::new()
        .quote_style(csv::QuoteStyle::Necessary)
        .terminator(csv::Terminator::Any(b'\n'))
        .from_writer(BufWriter::with_capacity(
            1 << 18,
            Guarded {
                file,
                off: std::sync::atomic::AtomicBool::new(false),
            },
        ))
}

fn io_err(path: &Path, e: impl Into<std::io::Error>) -> BusError {
    BusError::Io {
        path: path.display().to_string(),
        source: e.into(),
    }
}

fn csv_err(path: &Path, e: csv::Error) -> BusError {
    match e.into_kind() {
        csv::ErrorKind::Io(io) => io_err(path, io),
        other => io_err(path, std::io::Error::other(format!("{other:?}"))),
    }
}

/// Whole rows (12 fields, ending in a newline) in `data`, and the byte length they take.
/// `header`: the first record is the header row (not counted).
fn whole_rows(data: &[u8], header: bool) -> (u64, u64) {
    let mut r = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(data);
    let (mut rows, mut end) = (0u64, 0u64);
    let mut rec = csv::ByteRecord::new();
    let mut first = header;
    while let Ok(true) = r.read_byte_record(&mut rec) {
        let pos = r.position().byte();
        if rec.len() != HEADER.len() || pos == 0 || data.get(pos as usize - 1) != Some(&b'\n') {
            break;
        }
        if !first {
            rows += 1;
        }
        first = false;
        end = pos;
    }
    (rows, end)
}

impl CsvFile {
    /// Starts a CSV file on `file` (already created with the right mode) and writes the header.
    ///
    /// # Errors
    /// Writing the header failed.
    pub fn new(file: File, path: PathBuf) -> Result<CsvFile, BusError> {
        let mut w = writer_on(file);
        w.write_record(HEADER).map_err(|e| csv_err(&path, e))?;
        Ok(CsvFile {
            w,
            path,
            rows: 0,
            scratch: String::with_capacity(256),
            durable_len: 0,
            durable_rows: 0,
        })
    }
}

fn opt_u32(b: &mut itoa::Buffer, v: Option<u32>) -> &str {
    match v {
        Some(v) => b.format(v),
        None => "N/A",
    }
}

/// Writes the 12 fields of `ev` to `w` (shared with tools that export rows); `scratch` is a
/// reusable buffer so a row costs no allocation.
///
/// # Errors
/// The csv crate's error.
pub fn write_row<W: std::io::Write>(
    w: &mut csv::Writer<W>,
    ev: &Event,
    scratch: &mut String,
) -> csv::Result<()> {
    let (mut b1, mut b2, mut b3, mut b4) = (
        itoa::Buffer::new(),
        itoa::Buffer::new(),
        itoa::Buffer::new(),
        itoa::Buffer::new(),
    );
    w.write_field(b1.format(ev.id))?;
    w.write_field(ev.kind.as_str())?;
    w.write_field(ev.event_type.as_str())?;
    w.write_field(ev.name.as_deref().unwrap_or("N/A"))?;
    w.write_field(b2.format(ev.ts_ns))?;
    w.write_field(opt_u32(&mut b3, ev.pid))?;
    w.write_field(opt_u32(&mut b4, ev.tid))?;
    match ev.device {
        Device::Npu(n) => w.write_field(itoa::Buffer::new().format(n))?,
        Device::Cpu => w.write_field("cpu")?,
        Device::NotApplicable => w.write_field("N/A")?,
    }
    match ev.ptr {
        Some(p) => {
            let mut hex = [0u8; 18];
            w.write_field(fmt_ptr(p, &mut hex))?
        }
        None => w.write_field("N/A")?,
    }
    scratch.clear();
    write_attr(ev, scratch);
    w.write_field(scratch.as_bytes())?;
    w.write_field(ev.py_stack.as_deref().unwrap_or(""))?;
    w.write_field(ev.c_stack.as_deref().unwrap_or(""))?;
    w.write_record(None::<&[u8]>)
}

impl DeviceWriter for CsvFile {
    const KIND: &'static str = "csv";

    fn create(file: File, path: PathBuf) -> Result<Self, BusError> {
        CsvFile::new(file, path)
    }

    fn copy_into(&mut self, mut file: File, path: PathBuf) -> Result<Self, BusError> {
        self.w.flush().map_err(|e| io_err(&self.path, e))?;
        let mut src = File::open(&self.path).map_err(|e| io_err(&self.path, e))?;
        let n = std::io::copy(&mut src, &mut file).map_err(|e| io_err(&path, e))?;
        Ok(CsvFile {
            w: writer_on(file),
            path,
            rows: self.rows,
            scratch: String::with_capacity(256),
            durable_len: n,
            durable_rows: self.rows,
        })
    }

    fn write(&mut self, ev: &Event) -> Result<(), BusError> {
        write_row(&mut self.w, ev, &mut self.scratch).map_err(|e| csv_err(&self.path, e))?;
        self.rows += 1;
        Ok(())
    }
    fn flush(&mut self) -> Result<(), BusError> {
        self.w.flush().map_err(|e| io_err(&self.path, e))?;
        let g = self.w.get_ref().get_ref();
        if !g.off.load(std::sync::atomic::Ordering::Relaxed) {
            self.durable_len = g.file.metadata().map_err(|e| io_err(&self.path, e))?.len();
            self.durable_rows = self.rows;
        }
        Ok(())
    }
    fn abandon(&mut self) -> u64 {
        self.w
            .get_ref()
            .get_ref()
            .off
            .store(true, std::sync::atomic::Ordering::Relaxed);
        // Keep every whole row that reached the file after the last flush, cut the torn one.
        let mut kept = 0;
        let mut cut = self.durable_len;
        if let Ok(mut f) = File::open(&self.path) {
            use std::io::{Read, Seek};
            let mut tail = Vec::new();
            if f.seek(std::io::SeekFrom::Start(self.durable_len)).is_ok()
                && f.read_to_end(&mut tail).is_ok()
            {
                let (rows, end) = whole_rows(&tail, self.durable_len == 0);
                kept = rows;
                cut = self.durable_len + end;
            }
        }
        if let Ok(f) = std::fs::OpenOptions::new().write(true).open(&self.path) {
            let _ = f.set_len(cut);
        }
        self.rows = self.durable_rows + kept;
        self.durable_rows = self.rows;
        self.durable_len = cut;
        kept
    }
    fn path(&self) -> &Path {
        &self.path
    }
    fn rows(&self) -> u64 {
        self.rows
    }
}

/// The CSV sink layer of one process.
pub type CsvSink = super::DumpSink<CsvFile>;
