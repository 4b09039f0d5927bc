//! The `events` table: one row per dump row, the dump's columns typed, the common Attr keys as
//! their own columns and the rest as JSON.
//!
//! | column | type | from |
//! |---|---|---|
//! | `id` | INT64 | `ID` (sorted ascending in every file) |
//! | `ts_ns` | INT64 | `Timestamp(ns)`, ns since the epoch |
//! | `event`, `event_type` | STRING | `Event`, `Event Type` |
//! | `name` | STRING | `Name` (null for `N/A`) |
//! | `tid` | INT64 | `Thread Id` |
//! | `device` | STRING | `Device Id` as written (`0`, `cpu`, `N/A`) |
//! | `device_id` | INT32 | NPU id (null for `cpu` / `N/A`) |
//! | `ptr` | INT64 | `Ptr` |
//! | `step` | INT32 | the msTX `step start` range the row is in (memscope's step rule) |
//! | `allocation_id`, `addr`, `size` | INT64 | Attr (MALLOC/FREE; ACCESS `allocation_id`, `size`) |
//! | `used`, `total`, `process_used`, `device_used` | INT64 | Attr (bytes after the row) |
//! | `owner`, `inefficient`, `page_type`, `alloc_type` | STRING | Attr |
//! | `pinned`, `shadow` | BOOLEAN | Attr |
//! | `module_id` | INT32 | Attr `MID` |
//! | `dtype`, `shape`, `format`, `pool` | STRING | ACCESS Attr (`pool` is msMemScope's `type`) |
//! | `path` | STRING | OP_LAUNCH / KERNEL_LAUNCH Attr |
//! | `workspace_ptr`, `workspace_size`, `stream_id`, `task_id` | INT64 | Attr (`workspace ptr`,
//! `workspace size`, `streamId`, `taskId`) |
//! | `attrs` | STRING | every other Attr key, as a JSON object of strings (null when none): e.g. the
//! `stream` handle of KERNEL_LAUNCH rows and the `stream`/`event` handles of the SYSTEM stream and
//! event rows (issue 36) |
//! | `call_stack_python`, `call_stack_c` | STRING | `Call Stack(Python)`, `Call Stack(C)` |
//! | `rss`, `anon`, `tracked`, `untracked` | INT64 | SAMPLE rows (`--sample`, issue 25):
//! HOST_MEMORY: resident, anonymous resident, live in the hooks' blocks (HOST, HOST_MMAP, PYMEM),
//! `rss − tracked`; DEVICE_MEMORY: `device_used` (the device's used bytes), `tracked` (live HAL
//! blocks), `untracked` = used − tracked; their Attr keys (and `free`) stay in `attrs` too |
//! | `role` | STRING | the owner chain's role (issue 25: `weight`, `gradient`, `optimizer_state`,
//! `activation`, …, `temp`) on MALLOC rows, on FREE rows that carry an owner and on SYSTEM
//! `MEMORY_OWNER` rows (whose block also fills `allocation_id`, `addr`, `size` and `owner`) |
//!
//! Unsigned values (addresses) are stored as INT64 (their bit pattern; user-space addresses fit):
//! Spark reads UINT64 as DECIMAL(20,0). `rank` and `pid` are not columns: they are the
//! partition directories.

use std::sync::Arc;

use arrow_array::builder::{BooleanBuilder, Int32Builder, Int64Builder, StringBuilder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};

use memscope_core::attr_text::push_json_str;
use memscope_core::event::{Attrs, Device, Event, EventKind};
use memscope_core::roles::{role_of, OwnerTag};
use memscope_core::sample::SamplePoint;

/// Version of the table layout, written as `memscope.schema_version`.
pub const SCHEMA_VERSION: &str = "3";

const INT64: &[&str] = &[
    "allocation_id",
    "addr",
    "size",
    "used",
    "total",
    "process_used",
    "device_used",
    "workspace_ptr",
    "workspace_size",
    "stream_id",
    "task_id",
    "rss",
    "anon",
    "tracked",
    "untracked",
];

const STRINGS: &[&str] = &[
    "owner",
    "inefficient",
    "page_type",
    "alloc_type",
    "dtype",
    "shape",
    "format",
    "pool",
    "path",
    "attrs",
    "call_stack_python",
    "call_stack_c",
    "role",
];

/// The schema of the `events` files.
pub fn schema() -> SchemaRef {
    let mut f = vec![
        Field::new("id", DataType::Int64, false),
        Field::new("ts_ns", DataType::Int64, false),
        Field::new("event", DataType::Utf8, false),
        Field::new("event_type", DataType::Utf8, false),
        Field::new("name", DataType::Utf8, true),
        Field::new("tid", DataType::Int64, true),
        Field::new("device", DataType::Utf8, false),
        Field::new("device_id", DataType::Int32, true),
        Field::new("ptr", DataType::Int64, true),
        Field::new("step", DataType::Int32, true),
    ];
    f.extend(INT64.iter().map(|n| Field::new(*n, DataType::Int64, true)));
    f.push(Field::new("pinned", DataType::Boolean, true));
    f.push(Field::new("shadow", DataType::Boolean, true));
    f.push(Field::new("module_id", DataType::Int32, true));
    f.extend(STRINGS.iter().map(|n| Field::new(*n, DataType::Utf8, true)));
    Arc::new(Schema::new(f))
}

fn as_i64(v: u64) -> i64 {
    v as i64
}

fn json(pairs: &[(String, String)], out: &mut String) -> bool {
    if pairs.is_empty() {
        return false;
    }
    out.clear();
    out.push('{');
    for (i, (k, v)) in pairs.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_json_str(out, k);
        out.push(':');
        push_json_str(out, v);
    }
    out.push('}');
    true
}

/// Column builders of one batch.
pub struct Batch {
    id: Int64Builder,
    ts: Int64Builder,
    event: StringBuilder,
    event_type: StringBuilder,
    name: StringBuilder,
    tid: Int64Builder,
    device: StringBuilder,
    device_id: Int32Builder,
    ptr: Int64Builder,
    step: Int32Builder,
    ints: Vec<Int64Builder>,
    pinned: BooleanBuilder,
    shadow: BooleanBuilder,
    module_id: Int32Builder,
    strs: Vec<StringBuilder>,
    rows: usize,
    scratch: String,
    owner: String,
    ineff: String,
}

/// Indexes into `Batch::ints` / `Batch::strs`, in [`INT64`] / [`STRINGS`] order.
mod col {
    pub const ALLOCATION_ID: usize = 0;
    pub const ADDR: usize = 1;
    pub const SIZE: usize = 2;
    pub const USED: usize = 3;
    pub const TOTAL: usize = 4;
    pub const PROCESS_USED: usize = 5;
    pub const DEVICE_USED: usize = 6;
    pub const WORKSPACE_PTR: usize = 7;
    pub const WORKSPACE_SIZE: usize = 8;
    pub const STREAM_ID: usize = 9;
    pub const TASK_ID: usize = 10;
    pub const RSS: usize = 11;
    pub const ANON: usize = 12;
    pub const TRACKED: usize = 13;
    pub const UNTRACKED: usize = 14;
    pub const OWNER: usize = 0;
    pub const INEFFICIENT: usize = 1;
    pub const PAGE_TYPE: usize = 2;
    pub const ALLOC_TYPE: usize = 3;
    pub const DTYPE: usize = 4;
    pub const SHAPE: usize = 5;
    pub const FORMAT: usize = 6;
    pub const POOL: usize = 7;
    pub const PATH: usize = 8;
    pub const ATTRS: usize = 9;
    pub const PY: usize = 10;
    pub const C: usize = 11;
    pub const ROLE: usize = 12;
}

impl Default for Batch {
    fn default() -> Self {
        Batch::new()
    }
}

impl Batch {
    /// Empty builders.
    pub fn new() -> Batch {
        Batch {
            id: Int64Builder::new(),
            ts: Int64Builder::new(),
            event: StringBuilder::new(),
            event_type: StringBuilder::new(),
            name: StringBuilder::new(),
            tid: Int64Builder::new(),
            device: StringBuilder::new(),
            device_id: Int32Builder::new(),
            ptr: Int64Builder::new(),
            step: Int32Builder::new(),
            ints: INT64.iter().map(|_| Int64Builder::new()).collect(),
            pinned: BooleanBuilder::new(),
            shadow: BooleanBuilder::new(),
            module_id: Int32Builder::new(),
            strs: STRINGS.iter().map(|_| StringBuilder::new()).collect(),
            rows: 0,
            scratch: String::new(),
            owner: String::new(),
            ineff: String::new(),
        }
    }

    /// Rows held.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Appends one row; `step` is the row's step.
    pub fn push(&mut self, ev: &Event, step: Option<u32>) {
        self.rows += 1;
        self.id.append_value(as_i64(ev.id));
        self.ts.append_value(as_i64(ev.ts_ns));
        self.event.append_value(ev.kind.as_str());
        self.event_type.append_value(ev.event_type.as_str());
        self.name.append_option(ev.name.as_deref());
        self.tid.append_option(ev.tid.map(i64::from));
        match ev.device {
            Device::Npu(n) => {
                let mut b = itoa::Buffer::new();
                self.device.append_value(b.format(n));
                self.device_id.append_option(i32::try_from(n).ok());
            }
            d => {
                self.device.append_value(d.to_text());
                self.device_id.append_null();
            }
        }
        self.ptr.append_option(ev.ptr.map(as_i64));
        self.step
            .append_option(step.and_then(|s| i32::try_from(s).ok()));
        let mut ints: [Option<i64>; INT64.len()] = [None; INT64.len()];
        let mut strs: [Option<&str>; 13] = [None; 13];
        let mut owner = std::mem::take(&mut self.owner);
        let mut ineff = std::mem::take(&mut self.ineff);
        let (mut pinned, mut shadow, mut mid) = (None, None, None);
        let mut has_attrs = false;
        let mut attrs = std::mem::take(&mut self.scratch);
        match &ev.attrs {
            Attrs::None => {}
            Attrs::Memory(m) => {
                ints[col::ALLOCATION_ID] = Some(as_i64(m.allocation_id));
                ints[col::ADDR] = Some(as_i64(m.addr));
                ints[col::SIZE] = Some(as_i64(m.size));
                ints[col::USED] = m.used;
                ints[col::TOTAL] = m.total;
                ints[col::PROCESS_USED] = m.process_used;
                ints[col::DEVICE_USED] = m.device_used;
                pinned = Some(m.pinned);
                shadow = Some(m.shadow);
                mid = m.module_id.and_then(|v| i32::try_from(v).ok());
                if let Some(o) = &m.owner {
                    owner.clear();
                    for (i, l) in o.levels().iter().enumerate() {
                        if i > 0 {
                            owner.push('@');
                        }
                        owner.push_str(l);
                    }
                    strs[col::OWNER] = Some(&owner);
                }
                if m.owner.is_some() || ev.kind == EventKind::Malloc {
                    strs[col::ROLE] = Some(role_of(if m.owner.is_some() { &owner } else { "" }));
                }
                if !m.inefficient.is_empty() {
                    ineff.clear();
                    for (i, x) in m.inefficient.iter().enumerate() {
                        if i > 0 {
                            ineff.push(',');
                        }
                        ineff.push_str(x.as_str());
                    }
                    strs[col::INEFFICIENT] = Some(&ineff);
                }
                strs[col::PAGE_TYPE] = m.page_type.map(|p| p.as_str());
                strs[col::ALLOC_TYPE] = m.alloc_type.map(|a| a.as_str());
                has_attrs = json(&m.extra, &mut attrs);
            }
            Attrs::Access(a) => {
                ints[col::ALLOCATION_ID] = a.allocation_id.map(as_i64);
                ints[col::SIZE] = a.size.map(as_i64);
                strs[col::DTYPE] = a.dtype.as_deref();
                strs[col::SHAPE] = a.shape.as_deref();
                strs[col::FORMAT] = a.format.as_deref();
                strs[col::POOL] = a.pool.as_deref();
                has_attrs = json(&a.extra, &mut attrs);
            }
            Attrs::Launch(l) => {
                strs[col::PATH] = l.path.as_deref();
                ints[col::WORKSPACE_PTR] = l.workspace_ptr.map(as_i64);
                ints[col::WORKSPACE_SIZE] = l.workspace_size.map(as_i64);
                ints[col::STREAM_ID] = l.stream_id;
                ints[col::TASK_ID] = l.task_id;
                // the launch's stream handle (issue 36) is an Attr key like the SYSTEM stream
                // rows' `stream`, which go to `attrs` too: no column of its own
                has_attrs = match l.stream {
                    Some(s) => {
                        let mut kv = vec![("stream".to_owned(), format!("0x{s:x}"))];
                        kv.extend(l.extra.iter().cloned());
                        json(&kv, &mut attrs)
                    }
                    None => json(&l.extra, &mut attrs),
                };
            }
            Attrs::Pairs(p) => {
                // a memory sample (issue 25): its figures in their columns
                if let Some(s) = SamplePoint::of(ev) {
                    if s.is_host() {
                        ints[col::RSS] = Some(s.sampled);
                        ints[col::ANON] = Some(s.other);
                    } else {
                        ints[col::DEVICE_USED] = Some(s.sampled);
                    }
                    ints[col::TRACKED] = Some(s.tracked);
                    ints[col::UNTRACKED] = Some(s.untracked);
                }
                has_attrs = json(p, &mut attrs);
                // a MEMORY_OWNER row (issue 25): its block and new owner chain in their columns
                if let Some(t) = OwnerTag::from_event(ev) {
                    ints[col::ALLOCATION_ID] = Some(as_i64(t.allocation_id));
                    ints[col::ADDR] = Some(as_i64(t.addr));
                    ints[col::SIZE] = Some(as_i64(t.size));
                    owner.clear();
                    owner.push_str(&t.owner);
                    strs[col::OWNER] = Some(&owner);
                    strs[col::ROLE] = Some(role_of(&t.owner));
                }
            }
        }
        if has_attrs {
            strs[col::ATTRS] = Some(&attrs);
        }
        strs[col::PY] = ev.py_stack.as_deref();
        strs[col::C] = ev.c_stack.as_deref();
        for (b, v) in self.ints.iter_mut().zip(ints) {
            b.append_option(v);
        }
        self.pinned.append_option(pinned);
        self.shadow.append_option(shadow);
        self.module_id.append_option(mid);
        for (b, v) in self.strs.iter_mut().zip(strs) {
            b.append_option(v);
        }
        self.scratch = attrs;
        self.owner = owner;
        self.ineff = ineff;
    }

    /// The rows as a record batch of [`schema`]; the builders start over.
    ///
    /// # Errors
    /// Arrow's error (a column of the wrong length: a bug).
    pub fn finish(&mut self, schema: &SchemaRef) -> Result<RecordBatch, arrow_schema::ArrowError> {
        let mut cols: Vec<ArrayRef> = vec![
            Arc::new(self.id.finish()),
            Arc::new(self.ts.finish()),
            Arc::new(self.event.finish()),
            Arc::new(self.event_type.finish()),
            Arc::new(self.name.finish()),
            Arc::new(self.tid.finish()),
            Arc::new(self.device.finish()),
            Arc::new(self.device_id.finish()),
            Arc::new(self.ptr.finish()),
            Arc::new(self.step.finish()),
        ];
        for b in &mut self.ints {
            cols.push(Arc::new(b.finish()));
        }
        cols.push(Arc::new(self.pinned.finish()));
        cols.push(Arc::new(self.shadow.finish()));
        cols.push(Arc::new(self.module_id.finish()));
        for b in &mut self.strs {
            cols.push(Arc::new(b.finish()));
        }
        self.rows = 0;
        RecordBatch::try_new(schema.clone(), cols)
    }
}
