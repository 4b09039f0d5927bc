//! Streaming CSV records of a dump, in file order (RFC 4180: quoted cells may span lines, so
//! call stacks read fine; `""` inside quotes is a quote), with bounded reads.

use std::io::Read;
use std::sync::Arc;

use memscope_core::event::Event;

use super::error::{Location, ReadError};
use super::limits::{
    human, limit_hit, Bound, Bounded, ReadState, MAX_HEADER_BYTES, MAX_RECORD_BYTES, READ_BUFFER,
};
use super::row::{parse_row, parse_ts, Columns, TimeUnit};

/// Records of one CSV dump. Use [`CsvEvents`] for typed events.
///
/// Reads are bounded ([`super::limits`]): the header by [`MAX_HEADER_BYTES`], each record by
/// [`MAX_RECORD_BYTES`], the whole input by [`super::MAX_INPUT_BYTES`], counted on the bytes
/// read. A last record that is cut short (no line end, too few cells or an unparsable cell:
/// a writer stopped mid-row) ends the input instead of failing it: [`CsvSource::torn_line`]
/// then names its line.
pub struct CsvSource<R: Read> {
    rdr: csv::Reader<Bounded<R>>,
    state: Arc<ReadState>,
    rec: csv::ByteRecord,
    header: csv::ByteRecord,
    /// Column layout from the header.
    pub cols: Columns,
    unit: Option<TimeUnit>,
    file: String,
    line: u64,
    torn: Option<u64>,
}

impl<R: Read> CsvSource<R> {
    /// Reads the header of `inner`; `file` names it in errors; `unit` forces the time unit.
    ///
    /// # Errors
    /// Unreadable input or a header that is not a dump header.
    pub fn new(file: &str, inner: R, unit: Option<TimeUnit>) -> Result<Self, ReadError> {
        let (inner, state) = Bounded::new(inner, MAX_HEADER_BYTES + READ_BUFFER as u64);
        let rdr = csv::ReaderBuilder::new()
            .has_headers(false)
            .flexible(true)
            .buffer_capacity(READ_BUFFER)
            .from_reader(inner);
        let mut s = CsvSource {
            rdr,
            state,
            rec: csv::ByteRecord::new(),
            header: csv::ByteRecord::new(),
            cols: Columns::standard(),
            unit,
            file: file.to_owned(),
            line: 0,
            torn: None,
        };
        if !s.read_raw(MAX_HEADER_BYTES, "the header")? {
            return Err(ReadError::parse(file, None, "empty file: no header"));
        }
        let cols = s
            .with_cells(Columns::from_header)
            .map_err(|m| ReadError::parse(file, Some(Location::Line(1)), m))?;
        if s.unit.is_none() {
            s.unit = cols.header_unit;
        }
        s.header = s.rec.clone();
        s.cols = cols;
        Ok(s)
    }

    /// Reads one raw record of at most `cap` bytes (`what` names it in the error).
    fn read_raw(&mut self, cap: u64, what: &str) -> Result<bool, ReadError> {
        let start = self.rdr.position().byte();
        let start_line = self.rdr.position().line();
        self.state
            .allow_until(start.saturating_add(cap).saturating_add(READ_BUFFER as u64));
        let too_long = |s: &Self| {
            ReadError::parse(
                &s.file,
                Some(Location::Line(start_line)),
                format!(
                    "{what} is longer than {} (not a dump, or a quoted cell that never ends)",
                    human(cap)
                ),
            )
        };
        match self.rdr.read_byte_record(&mut self.rec) {
            Ok(more) => {
                self.line = self.rec.position().map_or(self.line + 1, |p| p.line());
                if more && self.rdr.position().byte() - start > cap {
                    return Err(too_long(self));
                }
                Ok(more)
            }
            Err(e) => {
                let line = e.position().map(|p| p.line());
                Err(match e.into_kind() {
                    csv::ErrorKind::Io(io) => match limit_hit(&io) {
                        Some(Bound::Record) => too_long(self),
                        Some(Bound::Input) => ReadError::parse(
                            &self.file,
                            Some(Location::Line(start_line)),
                            format!(
                                "more than {} read: over the input limit",
                                human(super::MAX_INPUT_BYTES)
                            ),
                        ),
                        None => ReadError::io(&self.file, io),
                    },
                    other => {
                        ReadError::parse(&self.file, line.map(Location::Line), format!("{other:?}"))
                    }
                })
            }
        }
    }

    /// Whether the current record is the input's last one and has no line end after it.
    fn last_and_unterminated(&self) -> bool {
        self.state.eof()
            && self.rdr.position().byte() == self.state.read()
            && !matches!(self.state.last_byte(), b'\n' | b'\r')
    }

    /// Reads the next record; `false` at the end (or at a torn last record, see
    /// [`CsvSource::torn_line`]).
    ///
    /// # Errors
    /// I/O, a bound, or a record without the header's number of cells.
    pub fn next_record(&mut self) -> Result<bool, ReadError> {
        if self.torn.is_some() || !self.read_raw(MAX_RECORD_BYTES, "a record")? {
            return Ok(false);
        }
        if self.rec.len() != self.cols.count {
            if self.last_and_unterminated() {
                self.torn = Some(self.line);
                return Ok(false);
            }
            return Err(self.error(format!(
                "expected {} cells, found {} (an unquoted comma or quote in a Name?)",
                self.cols.count,
                self.rec.len()
            )));
        }
        if self.last_and_unterminated() {
            let unit = self.unit.unwrap_or(TimeUnit::Nanos);
            if self
                .with_cells(|c| parse_row(&self.cols, c, unit, false))
                .is_err()
            {
                self.torn = Some(self.line);
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Line of a torn last record (cut short with no line end, e.g. by a killed writer), which
    /// was left out; `None` while the input is whole.
    pub fn torn_line(&self) -> Option<u64> {
        self.torn
    }

    /// An error at the current record.
    pub fn error(&self, msg: impl Into<String>) -> ReadError {
        ReadError::parse(&self.file, Some(Location::Line(self.line)), msg)
    }

    /// Line where the current record starts.
    pub fn line(&self) -> u64 {
        self.line
    }

    /// Bytes consumed so far.
    pub fn byte_pos(&self) -> u64 {
        self.rdr.position().byte()
    }

    /// The header record as read.
    pub fn header(&self) -> &csv::ByteRecord {
        &self.header
    }

    /// The current record's raw cells.
    pub fn record(&self) -> &csv::ByteRecord {
        &self.rec
    }

    /// Calls `f` with the current record's cells as text (invalid UTF-8 is replaced).
    pub fn with_cells<T>(&self, f: impl FnOnce(&[&str]) -> T) -> T {
        with_cells(&self.rec, f)
    }

    /// The time unit, once forced, named by the header or detected.
    pub fn known_unit(&self) -> Option<TimeUnit> {
        self.unit
    }

    /// The file's time unit: forced, named by the header, or detected from the current record.
    ///
    /// # Errors
    /// A bad timestamp cell.
    pub fn unit(&mut self) -> Result<TimeUnit, ReadError> {
        if let Some(u) = self.unit {
            return Ok(u);
        }
        let ts = self
            .with_cells(|c| parse_ts(self.cols.ts_cell(c)))
            .map_err(|m| self.error(m))?;
        if ts == 0 {
            return Ok(TimeUnit::Nanos); // undecided; ns for this record
        }
        let u = TimeUnit::detect(ts);
        self.unit = Some(u);
        Ok(u)
    }

    /// The current record as an event.
    ///
    /// # Errors
    /// A malformed cell.
    pub fn event(&mut self) -> Result<Event, ReadError> {
        let unit = self.unit()?;
        self.with_cells(|c| parse_row(&self.cols, c, unit, false))
            .map_err(|m| self.error(m))
    }
}

/// Calls `f` with the cells of `rec` as text (invalid UTF-8 is replaced by U+FFFD, per cell).
pub fn with_cells<T>(rec: &csv::ByteRecord, f: impl FnOnce(&[&str]) -> T) -> T {
    // the record may be valid UTF-8 as a whole while a cell boundary splits a character
    // (`\xef,\xbb\xbf`): then each cell is checked on its own (fuzzing found it)
    let whole = std::str::from_utf8(rec.as_slice()).ok().filter(|all| {
        let mut at = 0;
        rec.iter().all(|c| {
            at += c.len();
            all.is_char_boundary(at)
        })
    });
    if let Some(all) = whole {
        let mut arr: [&str; 16] = [""; 16];
        let mut vec: Vec<&str> = Vec::new();
        let mut start = 0;
        for (i, c) in rec.iter().enumerate() {
            let cell = &all[start..start + c.len()];
            start += c.len();
            if i < 16 {
                arr[i] = cell;
            } else {
                if i == 16 {
                    vec.extend_from_slice(&arr);
                }
                vec.push(cell);
            }
        }
        return if rec.len() <= 16 {
            f(&arr[..rec.len()])
        } else {
            f(&vec)
        };
    }
    let owned: Vec<String> = rec
        .iter()
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect();
    let cells: Vec<&str> = owned.iter().map(String::as_str).collect();
    f(&cells)
}

/// Typed events of a CSV dump, in file order.
pub struct CsvEvents<R: Read> {
    src: CsvSource<R>,
    done: bool,
}

impl<R: Read> CsvEvents<R> {
    /// Reads the header of `inner`; `file` names it in errors.
    ///
    /// # Errors
    /// As [`CsvSource::new`].
    pub fn new(file: &str, inner: R, unit: Option<TimeUnit>) -> Result<Self, ReadError> {
        Ok(CsvEvents {
            src: CsvSource::new(file, inner, unit)?,
            done: false,
        })
    }

    /// Bytes consumed so far.
    pub fn byte_pos(&self) -> u64 {
        self.src.byte_pos()
    }
}

impl<R: Read> Iterator for CsvEvents<R> {
    type Item = Result<Event, ReadError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.src.next_record() {
            Ok(true) => Some(self.src.event()),
            Ok(false) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}
