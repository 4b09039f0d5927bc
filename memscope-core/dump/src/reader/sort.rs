//! External sort of a CSV dump into process / ID order.
//!
//! msMemScope writes a block's MALLOC and ACCESS rows only when the block dies, so a row can
//! come arbitrarily late; no window bounded by live blocks can restore ID order, because a live
//! block's rows are not known before it dies. Analyses that need ID order (leaks, inefficient,
//! decompose, gap) therefore read through this sort:
//!
//! * phase 1 reads records, keeps each one's raw cells (a compact blob) with its key
//!   `(pid, ID, file position)` (`(pid, timestamp, ID, file position)` for
//!   [`super::Order::ByTime`]) in a run buffer of at most `run_bytes`; a full buffer is sorted
//!   and spilled to an anonymous temporary file (`O_TMPFILE`, or unlinked at once: nothing is
//!   left behind);
//! * phase 2 merges the runs (k-way, a heap over the run heads) and parses each record into an
//!   event, reporting errors at the record's original line.
//!
//! A file that fits in one run is sorted in memory and never spilled; a file already in ID
//! order (memscope's own dumps) never gets here (see [`csv_in_order`] and
//! `DumpFile::for_each_by_id_restartable`). Memory stays at about
//! `run_bytes` (record data and index entries together) plus 64 KiB per run, whatever the file
//! size; temporary disk use is about the size of the file (so at most the 8 GiB input limit).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::Path;

use memscope_core::event::Event;
use memscope_wire::put_var;

use super::csv_source::CsvSource;
use super::error::{ConsumerError, Location, ReadError};
use super::row::{parse_id, parse_opt_u32, parse_row, parse_ts, TimeUnit};

/// (pid, or u64::MAX for N/A; ID or timestamp; 0 or ID; file sequence)
type Key = (u64, u64, u64, u64);

struct Entry {
    key: Key,
    line: u64,
    off: usize,
    len: usize,
}

fn get_varint(b: &[u8], pos: &mut usize) -> u64 {
    let mut v = 0u64;
    let mut shift = 0;
    while let Some(&x) = b.get(*pos) {
        *pos += 1;
        v |= u64::from(x & 0x7f) << shift;
        if x < 0x80 {
            break;
        }
        shift += 7;
    }
    v
}

/// Appends the cells of `rec` as a blob: count, then each length and its bytes.
fn encode(rec: &csv::ByteRecord, out: &mut Vec<u8>) {
    put_var(out, rec.len() as u64);
    for c in rec.iter() {
        put_var(out, c.len() as u64);
    }
    out.extend_from_slice(rec.as_slice());
}

/// Calls `f` with the cells of a blob (one UTF-8 check for the whole record).
fn with_blob_cells<T>(blob: &[u8], lens: &mut Vec<usize>, f: impl FnOnce(&[&str]) -> T) -> T {
    let mut pos = 0;
    let n = get_varint(blob, &mut pos) as usize;
    lens.clear();
    lens.extend((0..n).map(|_| get_varint(blob, &mut pos) as usize));
    let body = &blob[pos.min(blob.len())..];
    let owned;
    // valid as a whole is not enough: a cell boundary may split a character
    let whole = std::str::from_utf8(body).ok().filter(|t| {
        let mut at = 0;
        lens.iter().all(|l| {
            at += l;
            at <= t.len() && t.is_char_boundary(at)
        })
    });
    let text: &str = match whole {
        Some(t) => t,
        None => {
            // rare: invalid UTF-8; replace per cell so cell boundaries stay right
            let mut s = String::new();
            let mut p = 0;
            for l in lens.iter_mut() {
                let end = (p + *l).min(body.len());
                let cell = String::from_utf8_lossy(&body[p..end]);
                p = end;
                *l = cell.len();
                s.push_str(&cell);
            }
            owned = s;
            &owned
        }
    };
    let mut cells: Vec<&str> = Vec::with_capacity(n);
    let mut p = 0;
    for l in lens.iter() {
        let end = (p + l).min(text.len());
        cells.push(text.get(p..end).unwrap_or(""));
        p = end;
    }
    f(&cells)
}

fn ascii(b: &[u8]) -> &str {
    std::str::from_utf8(b).unwrap_or("?")
}

/// Settings of the sort.
#[derive(Clone, Debug)]
pub struct SortOptions {
    /// Bytes of record data held in memory before a run is spilled.
    pub run_bytes: usize,
    /// Where spill files go (default: the system temporary directory).
    pub temp_dir: Option<std::path::PathBuf>,
}

impl Default for SortOptions {
    fn default() -> Self {
        SortOptions {
            run_bytes: 64 << 20,
            temp_dir: None,
        }
    }
}

struct Run {
    rdr: BufReader<File>,
    buf: Vec<u8>,
    head: Option<(Key, u64)>,
}

impl Run {
    fn advance(&mut self) -> std::io::Result<()> {
        let mut hdr = [0u8; 44];
        match self.rdr.read_exact(&mut hdr) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                self.head = None;
                return Ok(());
            }
            Err(e) => return Err(e),
        }
        let u = |i: usize| u64::from_le_bytes(hdr[i..i + 8].try_into().unwrap_or([0; 8]));
        let len = u32::from_le_bytes(hdr[40..44].try_into().unwrap_or([0; 4])) as usize;
        // a record was at most MAX_RECORD_BYTES (plus its cell lengths) when it was spilled
        if len as u64 > 2 * super::limits::MAX_RECORD_BYTES {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "temporary sort file damaged (record length out of range)",
            ));
        }
        self.buf.resize(len, 0);
        self.rdr.read_exact(&mut self.buf)?;
        self.head = Some(((u(0), u(8), u(16), u(24)), u(32)));
        Ok(())
    }
}

fn spill(dir: &Path, arena: &[u8], idx: &mut [Entry]) -> std::io::Result<File> {
    idx.sort_unstable_by_key(|e| e.key);
    let mut f = anon_file(dir)?;
    {
        let mut w = BufWriter::with_capacity(1 << 20, &mut f);
        for e in idx.iter() {
            w.write_all(&e.key.0.to_le_bytes())?;
            w.write_all(&e.key.1.to_le_bytes())?;
            w.write_all(&e.key.2.to_le_bytes())?;
            w.write_all(&e.key.3.to_le_bytes())?;
            w.write_all(&e.line.to_le_bytes())?;
            w.write_all(&(e.len as u32).to_le_bytes())?;
            w.write_all(&arena[e.off..e.off + e.len])?;
        }
        w.flush()?;
    }
    f.seek(SeekFrom::Start(0))?;
    Ok(f)
}

/// A temporary file in `dir` that has no name (`tempfile`: `O_TMPFILE` where the file system
/// supports it, else a random private name, mode 0600, unlinked at once). Nothing is left
/// behind, even when memscope is killed (with `O_TMPFILE`).
fn anon_file(dir: &Path) -> std::io::Result<File> {
    tempfile::tempfile_in(dir)
}

/// The error of a spill file in `dir`, naming it as the sort's temporary directory.
fn temp_err(file: &str, dir: &Path, e: std::io::Error) -> ReadError {
    ReadError::parse(
        file,
        None,
        format!(
            "sorting the rows needs temporary files in {} (the temporary directory: set TMPDIR to a writable one): {e}",
            dir.display()
        ),
    )
}

/// The sort key of the current record of `src`, by (pid, ID) or, `by_time`, (pid, raw
/// timestamp, ID); the file sequence is left 0.
fn key_of<R: Read>(src: &CsvSource<R>, by_time: bool) -> Result<Key, ReadError> {
    let rec = src.record();
    (|| -> Result<Key, String> {
        let pid = parse_opt_u32(
            ascii(rec.get(src.cols.pid_index()).unwrap_or(b"")),
            "Process Id",
        )?;
        let pid = pid.map_or(u64::MAX, u64::from);
        let id = parse_id(ascii(rec.get(src.cols.id_index()).unwrap_or(b"")))?;
        Ok(if by_time {
            let ts = parse_ts(ascii(rec.get(src.cols.ts_index()).unwrap_or(b"")))?;
            (pid, ts, id, 0)
        } else {
            (pid, id, 0, 0)
        })
    })()
    .map_err(|m| src.error(m))
}

/// Whether the records of `src` are already in (pid, ID) order (memscope's own dumps are), or
/// with `by_time` in (pid, timestamp, ID) order, in which case no sort is needed. Reads only up
/// to the first record out of order, so for msMemScope's dumps this costs a few rows;
/// `progress` sees the bytes scanned.
///
/// # Errors
/// Malformed ID, Timestamp or Process Id cells, I/O.
pub fn csv_in_order<R: Read>(
    src: &mut CsvSource<R>,
    by_time: bool,
    progress: &mut dyn FnMut(u64),
) -> Result<bool, ReadError> {
    let mut prev: Option<Key> = None;
    let mut n = 0u64;
    while src.next_record()? {
        let key = key_of(src, by_time)?;
        if prev.is_some_and(|p| key < p) {
            return Ok(false);
        }
        prev = Some(key);
        n += 1;
        if n & 0xffff == 0 {
            progress(src.byte_pos());
        }
    }
    Ok(true)
}

/// Reads every record of `src` and passes the events to `f` in (pid, ID) order, or with
/// `by_time` in (pid, timestamp, ID) order.
/// `progress(done, total)` runs now and then; the read counts as the first half of `total`
/// when runs are spilled.
///
/// # Errors
/// Malformed records, I/O on the input or the spill files, or `f`'s error.
pub fn sort_csv<R: Read>(
    src: &mut CsvSource<R>,
    file: &str,
    total: u64,
    opts: &SortOptions,
    by_time: bool,
    progress: &mut dyn FnMut(u64, u64),
    f: &mut dyn FnMut(Event) -> Result<(), ConsumerError>,
) -> Result<u64, ReadError> {
    let dir = opts.temp_dir.clone().unwrap_or_else(std::env::temp_dir);
    // reserved up front: growing a run-sized buffer by doubling would copy it several times
    let cap = opts
        .run_bytes
        .min(usize::try_from(total).unwrap_or(usize::MAX))
        .saturating_add(1 << 16);
    let mut arena: Vec<u8> = Vec::with_capacity(cap);
    // a typical record: ~96 bytes of blob and one entry
    let mut idx: Vec<Entry> = Vec::with_capacity(cap / (96 + std::mem::size_of::<Entry>()));
    let mut runs: Vec<File> = Vec::new();
    let mut seq = 0u64;
    while src.next_record()? {
        if src.known_unit().is_none() {
            src.unit()?;
        }
        let mut key = key_of(src, by_time)?;
        key.3 = seq;
        seq += 1;
        let off = arena.len();
        encode(src.record(), &mut arena);
        idx.push(Entry {
            key,
            line: src.line(),
            off,
            len: arena.len() - off,
        });
        // the index counts too: tiny records would otherwise cost 3× the arena in entries
        if arena.len() + idx.len() * std::mem::size_of::<Entry>() >= opts.run_bytes {
            runs.push(spill(&dir, &arena, &mut idx).map_err(|e| temp_err(file, &dir, e))?);
            arena.clear();
            idx.clear();
        }
        if seq & 0xffff == 0 {
            progress(
                src.byte_pos(),
                if runs.is_empty() { total } else { 2 * total },
            );
        }
    }
    let unit = src.known_unit().unwrap_or(TimeUnit::Nanos);
    let cols = src.cols.clone();
    let mut lens = Vec::new();
    let mut emit =
        |blob: &[u8], line: u64, f: &mut dyn FnMut(Event) -> Result<(), ConsumerError>| {
            let ev = with_blob_cells(blob, &mut lens, |c| parse_row(&cols, c, unit, false))
                .map_err(|m| ReadError::parse(file, Some(Location::Line(line)), m))?;
            f(ev).map_err(ReadError::Consumer)
        };
    if runs.is_empty() {
        idx.sort_unstable_by_key(|e| e.key);
        for e in &idx {
            emit(&arena[e.off..e.off + e.len], e.line, f)?;
        }
        progress(total, total);
        return Ok(seq);
    }
    if !idx.is_empty() {
        runs.push(spill(&dir, &arena, &mut idx).map_err(|e| temp_err(file, &dir, e))?);
    }
    drop((arena, idx));
    let io = |e: std::io::Error| temp_err(file, &dir, e);
    let mut runs: Vec<Run> = runs
        .into_iter()
        .map(|f| Run {
            rdr: BufReader::with_capacity(64 << 10, f),
            buf: Vec::new(),
            head: None,
        })
        .collect();
    let mut heap = BinaryHeap::new();
    for (i, r) in runs.iter_mut().enumerate() {
        r.advance().map_err(io)?;
        if let Some((k, _)) = r.head {
            heap.push(Reverse((k, i)));
        }
    }
    let mut done = 0u64;
    while let Some(Reverse((_, i))) = heap.pop() {
        let r = &mut runs[i];
        let (_, line) = r.head.unwrap_or(((0, 0, 0, 0), 0));
        emit(&r.buf, line, f)?;
        done += 1;
        if done & 0xffff == 0 {
            progress(total + total * done / seq.max(1), 2 * total);
        }
        r.advance().map_err(io)?;
        if let Some((k, _)) = r.head {
            heap.push(Reverse((k, i)));
        }
    }
    progress(2 * total, 2 * total);
    Ok(seq)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_blobs_round_trip() {
        let mut rec = csv::ByteRecord::new();
        rec.push_field(b"12");
        rec.push_field(&[b'x'; 300]);
        rec.push_field(b"");
        rec.push_field(&[0xff, b'a']);
        let mut out = Vec::new();
        encode(&rec, &mut out);
        let cells: Vec<String> = with_blob_cells(&out, &mut Vec::new(), |c| {
            c.iter().map(|s| s.to_string()).collect()
        });
        assert_eq!(cells.len(), 4);
        assert_eq!(cells[0], "12");
        assert_eq!(cells[1].len(), 300);
        assert_eq!(cells[2], "");
        assert_eq!(cells[3], "\u{fffd}a");
    }

    #[test]
    fn spilled_runs_merge_in_pid_then_id_order() {
        let mut text = String::from("ID,Event,Event Type,Name,Timestamp(ns),Process Id,Thread Id,Device Id,Ptr,Attr,Call Stack(Python),Call Stack(C)\n");
        let ids = [9u64, 3, 7, 1, 8, 2, 6, 4, 5, 0];
        for (n, id) in ids.iter().enumerate() {
            let pid = if n % 3 == 0 { 2 } else { 1 };
            text.push_str(&format!(
                "{id},MSTX,Mark,\"m{id}\",{},{pid},1,0,N/A,,\"a\nb\",\n",
                100 + id
            ));
        }
        let mut src = CsvSource::new("t.csv", text.as_bytes(), None).unwrap();
        let opts = SortOptions {
            run_bytes: 64,
            temp_dir: None,
        };
        let mut got = Vec::new();
        let n = sort_csv(
            &mut src,
            "t.csv",
            text.len() as u64,
            &opts,
            false,
            &mut |_, _| {},
            &mut |e| {
                got.push((e.pid.unwrap(), e.id, e.py_stack.clone().unwrap()));
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(n, 10);
        let keys: Vec<(u32, u64)> = got.iter().map(|g| (g.0, g.1)).collect();
        let mut want = keys.clone();
        want.sort();
        assert_eq!(keys, want);
        assert_eq!(keys[0], (1, 2)); // pid 1 has IDs 3, 7, 8, 2, 4, 5
        assert!(got.iter().all(|g| g.2 == "a\nb"));
    }

    #[test]
    fn spilled_runs_merge_in_pid_then_time_order_with_ids_breaking_ties() {
        let mut text = String::from("ID,Event,Event Type,Name,Timestamp(ns),Process Id,Thread Id,Device Id,Ptr,Attr,Call Stack(Python),Call Stack(C)\n");
        // (ID, ts): IDs and timestamps disagree; IDs 4 and 5 share a timestamp
        for (id, ts) in [(1u64, 50u64), (2, 10), (3, 40), (5, 20), (4, 20), (6, 30)] {
            text.push_str(&format!("{id},MSTX,Mark,m,{ts},1,1,0,N/A,,,\n"));
        }
        let mut src = CsvSource::new("t.csv", text.as_bytes(), None).unwrap();
        let opts = SortOptions {
            run_bytes: 64,
            temp_dir: None,
        };
        let mut got = Vec::new();
        sort_csv(
            &mut src,
            "t.csv",
            text.len() as u64,
            &opts,
            true,
            &mut |_, _| {},
            &mut |e| {
                got.push(e.id);
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(got, [2, 4, 5, 6, 3, 1]);
    }
}
