//! One dump row (12 text cells, from CSV or SQLite) → [`Event`].
//!
//! Both msMemScope formats are accepted (behaviour spec §5.2, §11): the 2025 one (µs timestamps,
//! decimal Ptr, Device `host`, negative FREE sizes, `MID:`) and the current one (ns, `0x%016x`
//! Ptr, `cpu`, `allocation_id`). The time unit is a property of the file, see [`TimeUnit`].

use memscope_core::attr_text::{launch_attrs, try_parse_attr};
use memscope_core::event::{Attrs, Device, Event, EventKind, EventType};
use memscope_core::sanitize::quoted;

use memscope_core::attr_text::values::{access_attrs_fast, memory_attrs_fast};

/// Unit of the `Timestamp(ns)` column of a file. Events always carry ns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeUnit {
    /// Nanoseconds since the epoch (current msMemScope, memscope).
    Nanos,
    /// Microseconds since the epoch (msMemScope dumps of 2025, despite the header).
    Micros,
}

impl TimeUnit {
    /// The unit of a file whose first non-zero timestamp is `ts`: values in `[1e14, 1e17)` are
    /// µs since the epoch (years 1973–5138); ns since the epoch are ≥ 1e17 from 1973 on. Small
    /// values (hand-written test dumps) are taken as ns.
    pub fn detect(ts: u64) -> TimeUnit {
        if (100_000_000_000_000..100_000_000_000_000_000).contains(&ts) {
            TimeUnit::Micros
        } else {
            TimeUnit::Nanos
        }
    }

    fn scale(self, ts: u64) -> u64 {
        match self {
            TimeUnit::Nanos => ts,
            TimeUnit::Micros => ts.saturating_mul(1000),
        }
    }
}

/// Column positions of a dump, from its header.
#[derive(Clone, Debug)]
pub struct Columns {
    idx: [usize; 10],
    py: Option<usize>,
    c: Option<usize>,
    /// Cells per record.
    pub count: usize,
    /// Unit named by the header (`Timestamp(us)`), if any.
    pub header_unit: Option<TimeUnit>,
}

const REQUIRED: [&str; 10] = [
    "id",
    "event",
    "eventtype",
    "name",
    "timestamp",
    "processid",
    "threadid",
    "deviceid",
    "ptr",
    "attr",
];

fn norm(s: &str) -> String {
    s.trim_start_matches('\u{feff}')
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect::<String>()
        .to_ascii_lowercase()
}

impl Columns {
    /// The columns of the current header (what memscope and msMemScope write).
    pub fn standard() -> Columns {
        Columns {
            idx: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
            py: Some(10),
            c: Some(11),
            count: 12,
            header_unit: None,
        }
    }

    /// Maps a header by column name (case and spaces ignored; `Timestamp(ns)`, `Timestamp(us)`
    /// and `Timestamp` accepted; the two call-stack columns are optional).
    pub fn from_header(cells: &[&str]) -> Result<Columns, String> {
        let names: Vec<String> = cells.iter().map(|c| norm(c)).collect();
        let mut idx = [usize::MAX; 10];
        let mut header_unit = None;
        let (mut py, mut c) = (None, None);
        for (i, n) in names.iter().enumerate() {
            let key = match n.as_str() {
                "timestamp(ns)" | "timestamp" => "timestamp",
                "timestamp(us)" => {
                    header_unit = Some(TimeUnit::Micros);
                    "timestamp"
                }
                "callstack(python)" => {
                    py = Some(i);
                    continue;
                }
                "callstack(c)" => {
                    c = Some(i);
                    continue;
                }
                other => other,
            };
            if let Some(k) = REQUIRED.iter().position(|r| *r == key) {
                idx[k] = i;
            }
        }
        if let Some(k) = idx.iter().position(|&i| i == usize::MAX) {
            return Err(format!(
                "not a memscope dump: header has no {} column (expected ID,Event,Event Type,Name,Timestamp(ns),Process Id,Thread Id,Device Id,Ptr,Attr,Call Stack(Python),Call Stack(C))",
                REQUIRED[k]
            ));
        }
        Ok(Columns {
            idx,
            py,
            c,
            count: cells.len(),
            header_unit,
        })
    }

    /// Position of the `Attr` cell.
    pub fn attr_index(&self) -> usize {
        self.idx[9]
    }

    /// Position of the `ID` cell.
    pub fn id_index(&self) -> usize {
        self.idx[0]
    }

    /// Position of the `Process Id` cell.
    pub fn pid_index(&self) -> usize {
        self.idx[5]
    }

    /// Position of the `Timestamp(ns)` cell.
    pub fn ts_index(&self) -> usize {
        self.idx[4]
    }

    /// The `ID` cell of a record.
    pub fn id_cell<'a>(&self, cells: &[&'a str]) -> &'a str {
        cells[self.idx[0]]
    }

    /// The `Process Id` cell of a record.
    pub fn pid_cell<'a>(&self, cells: &[&'a str]) -> &'a str {
        cells[self.idx[5]]
    }

    /// The `Timestamp(ns)` cell of a record.
    pub fn ts_cell<'a>(&self, cells: &[&'a str]) -> &'a str {
        cells[self.idx[4]]
    }
}

/// Decimal digits only, at most 19 of them (no overflow); `None` sends callers to the slow path.
fn fast_u64(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    if b.is_empty() || b.len() > 19 {
        return None;
    }
    let mut v = 0u64;
    for &c in b {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        v = v * 10 + u64::from(d);
    }
    Some(v)
}

/// Parses an `ID` cell.
pub fn parse_id(s: &str) -> Result<u64, String> {
    fast_u64(s).map_or_else(
        || {
            s.trim()
                .parse()
                .map_err(|_| format!("bad ID {}", quoted(s)))
        },
        Ok,
    )
}

/// Parses a `Process Id` / `Thread Id` cell (`N/A` or empty is `None`).
pub fn parse_opt_u32(s: &str, col: &str) -> Result<Option<u32>, String> {
    if let Some(v) = fast_u64(s).and_then(|v| u32::try_from(v).ok()) {
        return Ok(Some(v));
    }
    let t = s.trim();
    if t == "N/A" || t.is_empty() {
        return Ok(None);
    }
    t.parse()
        .map(Some)
        .map_err(|_| format!("bad {col} {}", quoted(s)))
}

/// Parses a `Timestamp(ns)` cell in the file's raw unit.
pub fn parse_ts(s: &str) -> Result<u64, String> {
    fast_u64(s).map_or_else(
        || {
            s.trim()
                .parse()
                .map_err(|_| format!("bad Timestamp(ns) {}", quoted(s)))
        },
        Ok,
    )
}

fn parse_ptr(s: &str) -> Result<Option<u64>, String> {
    if let Some(v) = s
        .strip_prefix("0x")
        .and_then(|h| u64::from_str_radix(h, 16).ok())
    {
        return Ok(Some(v));
    }
    let t = s.trim();
    if t == "N/A" || t.is_empty() {
        return Ok(None);
    }
    let v = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => t.parse().ok(),
    };
    v.map(Some).ok_or_else(|| format!("bad Ptr {}", quoted(s)))
}

/// The most common Event cells, without a table scan.
fn fast_kind(s: &str) -> Option<EventKind> {
    Some(match s {
        "MALLOC" => EventKind::Malloc,
        "FREE" => EventKind::Free,
        "ACCESS" => EventKind::Access,
        "OP_LAUNCH" => EventKind::OpLaunch,
        "KERNEL_LAUNCH" => EventKind::KernelLaunch,
        _ => return None,
    })
}

/// The most common Event Type cells, without a table scan.
fn fast_type(s: &str) -> Option<EventType> {
    Some(match s {
        "PTA" => EventType::Pta,
        "HAL" => EventType::Hal,
        "ATB" => EventType::Atb,
        "READ" => EventType::Read,
        "WRITE" => EventType::Write,
        "UNKNOWN" => EventType::Unknown,
        "ATEN_START" => EventType::AtenStart,
        "ATEN_END" => EventType::AtenEnd,
        "ATB_START" => EventType::AtbStart,
        "ATB_END" => EventType::AtbEnd,
        "KERNEL_LAUNCH" => EventType::KernelLaunch,
        _ => return None,
    })
}

fn opt_text(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_owned())
}

/// Builds an event from the cells of one record. `strip_mstx_quotes`: the `.db` keeps the
/// quotes msMemScope wraps MSTX names in (the CSV reader removes them by unquoting).
pub fn parse_row(
    cols: &Columns,
    cells: &[&str],
    unit: TimeUnit,
    strip_mstx_quotes: bool,
) -> Result<Event, String> {
    let i = &cols.idx;
    let id = parse_id(cells[i[0]])?;
    let ev_cell = cells[i[1]];
    let kind = fast_kind(ev_cell)
        .or_else(|| EventKind::parse(ev_cell.trim()))
        .ok_or_else(|| format!("unknown Event {}", quoted(ev_cell)))?;
    let et_cell = cells[i[2]];
    let event_type = fast_type(et_cell)
        .or_else(|| EventType::parse(et_cell.trim()))
        .or_else(|| custom_type(et_cell.trim()))
        .ok_or_else(|| format!("unknown Event Type {}", quoted(et_cell)))?;
    let ts_ns = unit.scale(parse_ts(cells[i[4]])?);
    let pid = parse_opt_u32(cells[i[5]], "Process Id")?;
    let tid = parse_opt_u32(cells[i[6]], "Thread Id")?;
    let dev_cell = cells[i[7]];
    let device = fast_u64(dev_cell)
        .and_then(|d| u32::try_from(d).ok())
        .filter(|d| *d < 9999)
        .map(Device::Npu)
        .or_else(|| Device::parse(dev_cell.trim()))
        .ok_or_else(|| format!("bad Device Id {}", quoted(dev_cell)))?;
    let ptr = parse_ptr(cells[i[8]])?;
    let name_cell = cells[i[3]];
    let name = if name_cell == "N/A" || name_cell.is_empty() {
        None
    } else if strip_mstx_quotes
        && kind == EventKind::Mstx
        && name_cell.len() >= 2
        && name_cell.starts_with('"')
        && name_cell.ends_with('"')
    {
        Some(name_cell[1..name_cell.len() - 1].to_owned())
    } else {
        Some(name_cell.to_owned())
    };
    let attr = cells[i[9]].trim();
    let empty = attr.is_empty() || attr == "{}";
    let attrs = match kind {
        EventKind::Malloc | EventKind::Free => {
            let mut m = memory_attrs_fast(attr)?;
            if m.addr == 0 {
                m.addr = ptr.unwrap_or(0);
            }
            Attrs::Memory(m)
        }
        _ if empty => Attrs::None,
        EventKind::Access => Attrs::Access(access_attrs_fast(attr)?),
        EventKind::OpLaunch | EventKind::KernelLaunch => {
            Attrs::Launch(launch_attrs(try_parse_attr(attr)?)?)
        }
        EventKind::Snapshot => {
            Attrs::Pairs(memscope_core::snapshot::seed_pairs(try_parse_attr(attr)?))
        }
        _ => Attrs::Pairs(try_parse_attr(attr)?),
    };
    Ok(Event {
        id,
        kind,
        event_type,
        name,
        ts_ns,
        pid,
        tid,
        device,
        ptr,
        attrs,
        py_stack: cols.py.and_then(|p| opt_text(cells[p])),
        c_stack: cols.c.and_then(|p| opt_text(cells[p])),
    })
}

/// A third-party adapter's Event Type (plugin ABI): an identifier of at most 64 bytes
/// (`[A-Za-z0-9_]`, not starting with a digit). Anything else is malformed input.
fn custom_type(cell: &str) -> Option<EventType> {
    let ok = !cell.is_empty()
        && cell.len() <= 64
        && !cell.starts_with(|c: char| c.is_ascii_digit())
        && cell.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    ok.then(|| EventType::custom(cell))
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = "ID,Event,Event Type,Name,Timestamp(ns),Process Id,Thread Id,Device Id,Ptr,Attr,Call Stack(Python),Call Stack(C)";

    fn row(line: &str, unit: TimeUnit) -> Result<Event, String> {
        let cols = Columns::from_header(&HEADER.split(',').collect::<Vec<_>>()).unwrap();
        // test rows have no commas inside cells except the Attr, which is last-but-two
        let cells: Vec<&str> = line.splitn(10, ',').collect();
        let (head, rest) = cells.split_at(9);
        let mut v: Vec<&str> = head.to_vec();
        let r = rest[0];
        let a = r.rfind(",,").unwrap();
        v.push(&r[..a]);
        v.push("");
        v.push("");
        parse_row(&cols, &v, unit, false)
    }

    #[test]
    fn time_unit_is_detected_from_magnitude() {
        assert_eq!(TimeUnit::detect(1_746_006_014_162_153), TimeUnit::Micros);
        assert_eq!(TimeUnit::detect(1_764_753_083_997_498_270), TimeUnit::Nanos);
        assert_eq!(TimeUnit::detect(1000), TimeUnit::Nanos);
    }

    #[test]
    fn a_2025_free_row_has_positive_size_decimal_ptr_and_us_time() {
        let e = row(
            "321,FREE,PTA,N/A,1746006024182194,2523740,2523740,1,20623381625344,{addr:20623381625344,size:-512,owner:,total:2097152,used:3537408},,",
            TimeUnit::Micros,
        )
        .unwrap();
        assert_eq!(e.kind, EventKind::Free);
        assert_eq!(e.ts_ns, 1_746_006_024_182_194_000);
        assert_eq!(e.ptr, Some(20_623_381_625_344));
        assert_eq!(e.device, Device::Npu(1));
        let m = e.memory().unwrap();
        assert_eq!((m.size, m.used), (512, Some(3_537_408)));
    }

    #[test]
    fn bad_cells_are_named() {
        let e = row(
            "5,MALLOC,PTA,N/A,abc,1,1,0,0x10,{size:1},,",
            TimeUnit::Nanos,
        )
        .unwrap_err();
        assert_eq!(e, "bad Timestamp(ns) \"abc\"");
        let e = row("x,MALLOC,PTA,N/A,1,1,1,0,0x10,{size:1},,", TimeUnit::Nanos).unwrap_err();
        assert_eq!(e, "bad ID \"x\"");
        let e = row(
            "1,MALLOC,NO PE!,N/A,1,1,1,0,0x10,{size:1},,",
            TimeUnit::Nanos,
        )
        .unwrap_err();
        assert_eq!(e, "unknown Event Type \"NO PE!\"");
        let ok = row(
            "1,MALLOC,MYPOOL,N/A,1,1,1,0,0x10,{size:1},,",
            TimeUnit::Nanos,
        )
        .unwrap();
        assert_eq!(
            ok.event_type.as_str(),
            "MYPOOL",
            "third-party adapter types read back"
        );
    }

    #[test]
    fn header_must_name_the_required_columns() {
        assert!(Columns::from_header(&["ID", "Event"]).is_err());
        let c = Columns::from_header(
            &HEADER
                .replace("(ns)", "(us)")
                .split(',')
                .collect::<Vec<_>>(),
        )
        .unwrap();
        assert_eq!(c.header_unit, Some(TimeUnit::Micros));
    }
}
