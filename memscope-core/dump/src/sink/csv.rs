//! CSV dump writer: msMemScope's `memscope_dump_<ts>.csv` (behaviour spec §5.2) with proper
//! RFC 4180 quoting (msMemScope does not escape names; we do, so names with commas, quotes and
//! newlines round-trip through the `csv` crate and Python's `csv` module).
//!
//! Rows are encoded here, a whole row into one buffer, rather than field by field through the
//! `csv` crate's writer: eight of the twelve fields are numbers or fixed words that never need
//! quotes, and the field-by-field path was a fifth of the collector's time on HOST rows
//! (issue 37). The quoting rule is the `csv` crate's `QuoteStyle::Necessary` (a test checks the
//! two agree); the crate still reads every dump.

use super::DeviceWriter;
pub use memscope_core::attr_text::fmt_ptr;
use memscope_core::attr_text::write_attr;
use memscope_core::bus::BusError;
use memscope_core::event::{Device, Event};
use std::fs::File;
use std::io::{BufWriter, Write};
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
    w: BufWriter<Guarded>,
    path: PathBuf,
    rows: u64,
    scratch: String,
    line: Vec<u8>,
    /// File length at the last successful flush (ends on a whole row).
    durable_len: u64,
    /// Rows at the last successful flush.
    durable_rows: u64,
}

fn writer_on(file: File) -> BufWriter<Guarded> {
    BufWriter::with_capacity(
        1 << 18,
        Guarded {
            file,
            off: std::sync::atomic::AtomicBool::new(false),
        },
    )
}

fn io_err(path: &Path, e: impl Into<std::io::Error>) -> BusError {
    BusError::Io {
        path: path.display().to_string(),
        source: e.into(),
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
        w.write_all(header_line().as_bytes())
            .map_err(|e| io_err(&path, e))?;
        Ok(CsvFile {
            w,
            path,
            rows: 0,
            scratch: String::with_capacity(256),
            line: Vec::with_capacity(512),
            durable_len: 0,
            durable_rows: 0,
        })
    }
}

/// The header row with its newline.
pub fn header_line() -> String {
    let mut s = HEADER.join(",");
    s.push('\n');
    s
}

fn opt_u32(b: &mut itoa::Buffer, v: Option<u32>) -> &str {
    match v {
        Some(v) => b.format(v),
        None => "N/A",
    }
}

/// Appends `f` to `line` as one CSV field, quoted (its quotes doubled) only where the `csv`
/// crate's `QuoteStyle::Necessary` quotes: a comma, quote, CR or LF inside.
fn push_field(line: &mut Vec<u8>, f: &[u8]) {
    if !f.iter().any(|b| matches!(b, b',' | b'"' | b'\n' | b'\r')) {
        line.extend_from_slice(f);
        return;
    }
    line.push(b'"');
    for part in f.split_inclusive(|b| *b == b'"') {
        line.extend_from_slice(part);
        if part.last() == Some(&b'"') {
            line.push(b'"');
        }
    }
    line.push(b'"');
}

/// Appends the row of `ev` (12 fields and a newline) to `line` (shared with tools that write
/// rows); `scratch` is a reusable buffer, so a row costs no allocation.
pub fn write_row(line: &mut Vec<u8>, ev: &Event, scratch: &mut String) {
    let mut b = itoa::Buffer::new();
    line.extend_from_slice(b.format(ev.id).as_bytes());
    line.push(b',');
    line.extend_from_slice(ev.kind.as_str().as_bytes());
    line.push(b',');
    line.extend_from_slice(ev.event_type.as_str().as_bytes());
    line.push(b',');
    push_field(line, ev.name.as_deref().unwrap_or("N/A").as_bytes());
    line.push(b',');
    line.extend_from_slice(b.format(ev.ts_ns).as_bytes());
    line.push(b',');
    line.extend_from_slice(opt_u32(&mut b, ev.pid).as_bytes());
    line.push(b',');
    line.extend_from_slice(opt_u32(&mut b, ev.tid).as_bytes());
    line.push(b',');
    match ev.device {
        Device::Npu(n) => line.extend_from_slice(b.format(n).as_bytes()),
        Device::Cpu => line.extend_from_slice(b"cpu"),
        Device::NotApplicable => line.extend_from_slice(b"N/A"),
    }
    line.push(b',');
    match ev.ptr {
        Some(p) => {
            let mut hex = [0u8; 18];
            line.extend_from_slice(fmt_ptr(p, &mut hex));
        }
        None => line.extend_from_slice(b"N/A"),
    }
    line.push(b',');
    scratch.clear();
    write_attr(ev, scratch);
    push_field(line, scratch.as_bytes());
    line.push(b',');
    push_field(line, ev.py_stack.as_deref().unwrap_or("").as_bytes());
    line.push(b',');
    push_field(line, ev.c_stack.as_deref().unwrap_or("").as_bytes());
    line.push(b'\n');
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
            line: Vec::with_capacity(512),
            durable_len: n,
            durable_rows: self.rows,
        })
    }

    fn write(&mut self, ev: &Event) -> Result<(), BusError> {
        self.line.clear();
        write_row(&mut self.line, ev, &mut self.scratch);
        self.w
            .write_all(&self.line)
            .map_err(|e| io_err(&self.path, e))?;
        self.rows += 1;
        Ok(())
    }
    fn flush(&mut self) -> Result<(), BusError> {
        self.w.flush().map_err(|e| io_err(&self.path, e))?;
        let g = self.w.get_ref();
        if !g.off.load(std::sync::atomic::Ordering::Relaxed) {
            self.durable_len = g.file.metadata().map_err(|e| io_err(&self.path, e))?.len();
            self.durable_rows = self.rows;
        }
        Ok(())
    }
    fn abandon(&mut self) -> u64 {
        self.w
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

#[cfg(test)]
mod tests {
    use super::*;
    use memscope_core::event::{Attrs, EventKind, EventType, MemoryAttrs};

    /// The row the `csv` crate writes for `ev` (the writer rows used to go through).
    fn by_csv_crate(ev: &Event) -> Vec<u8> {
        let mut w = csv::WriterBuilder::new()
            .quote_style(csv::QuoteStyle::Necessary)
            .terminator(csv::Terminator::Any(b'\n'))
            .from_writer(Vec::new());
        let mut attr = String::new();
        write_attr(ev, &mut attr);
        let mut hex = [0u8; 18];
        let ptr = ev
            .ptr
            .map_or(b"N/A".to_vec(), |p| fmt_ptr(p, &mut hex).to_vec());
        let opt = |v: Option<u32>| v.map_or("N/A".to_owned(), |v| v.to_string());
        w.write_record([
            ev.id.to_string().as_bytes(),
            ev.kind.as_str().as_bytes(),
            ev.event_type.as_str().as_bytes(),
            ev.name.as_deref().unwrap_or("N/A").as_bytes(),
            ev.ts_ns.to_string().as_bytes(),
            opt(ev.pid).as_bytes(),
            opt(ev.tid).as_bytes(),
            ev.device.to_text().as_bytes(),
            &ptr,
            attr.as_bytes(),
            ev.py_stack.as_deref().unwrap_or("").as_bytes(),
            ev.c_stack.as_deref().unwrap_or("").as_bytes(),
        ])
        .unwrap();
        w.into_inner().unwrap()
    }

    #[test]
    fn rows_are_quoted_exactly_as_the_csv_crate_quotes_them() {
        let names = [
            None,
            Some(""),
            Some("plain"),
            Some("a,b"),
            Some("say \"hi\""),
            Some("\"\""),
            Some("two\nlines"),
            Some("cr\rhere"),
            Some("ünïcode ✓"),
            Some(" lead and trail "),
        ];
        for (i, name) in names.into_iter().enumerate() {
            let mut ev = Event::new(EventType::Host, 1_700_000_000_000 + i as u64, 42, 7);
            ev.id = i as u64;
            ev.name = name.map(str::to_owned);
            if i % 2 == 0 {
                ev.kind = EventKind::Free;
                ev.device = Device::Cpu;
                ev.ptr = Some(0xdead_beef);
                ev.attrs = Attrs::Memory(MemoryAttrs {
                    allocation_id: 3,
                    addr: 0xdead_beef,
                    size: 64,
                    total: Some(128),
                    ..MemoryAttrs::default()
                });
            } else {
                ev.device = Device::Npu(3);
                ev.pid = None;
                ev.attrs = Attrs::Pairs(vec![("k".into(), "v,\"w\"".into())]);
            }
            ev.py_stack = name.map(|n| format!("f.py:1 {n}\ng.py:2"));
            ev.c_stack = (i % 3 == 0).then(|| "0x1 main\n0x2 \"start\"".to_owned());
            let mut line = Vec::new();
            write_row(&mut line, &ev, &mut String::new());
            assert_eq!(
                String::from_utf8_lossy(&line),
                String::from_utf8_lossy(&by_csv_crate(&ev)),
                "row {i}"
            );
        }
        assert_eq!(header_line(), "ID,Event,Event Type,Name,Timestamp(ns),Process Id,Thread Id,Device Id,Ptr,Attr,Call Stack(Python),Call Stack(C)\n");
    }
}
