//! Rows to stream operations: what a recording (a run's bus, a dump, a capture) says about
//! launches, their accesses, the stream and event calls and device memory, as the race check
//! reads it.
//!
//! * `SYSTEM` rows of the ACL adapter's stream and event calls (`STREAM_CREATE`, `EVENT_RECORD`,
//!   `STREAM_WAIT_EVENT`, `STREAM_SYNC`, `EVENT_SYNC`, `DEVICE_SYNC`, `EVENT_CREATE`,
//!   `EVENT_DESTROY`; Attr `stream:0x…`, `event:0x…`) become the matching operations.
//! * An operator (`ATEN_START`…`ATEN_END` or `ATB_START`…`ATB_END` on one thread, outermost
//!   pair) with device `ACCESS` rows inside is one launch, on the stream of the last
//!   `KERNEL_LAUNCH` inside it (Attr `stream:0x…`), else of the thread's last launch, else
//!   the default stream: READ rows are reads, WRITE and UNKNOWN rows writes (an unknown
//!   access is taken as the one that can conflict).
//! * An `ACCESS` row outside any operator is a launch of its own, on the thread's stream.
//! * A `sanitizer-op:` mark is a launch on the mark's stream (Attr `stream:0x…`, else the
//!   default stream) with the accesses it lists; a malformed one is counted, not checked.
//! * A device `MALLOC` forgets the address's accesses (CSAN's rule). A framework-pool `FREE`
//!   (PTA, MindSpore, ATB, a plugin's pool) is a [`StreamOp::PoolFree`]: msTX does not say
//!   which stream the block serves, so its accesses are checked against its next users. A
//!   driver (HAL) `FREE` forgets, as CSAN does. Host memory is not looked at.
//!
//! Owners come from the device `MALLOC` rows: an access takes the owner of the live block that
//! holds its address.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use memscope_core::attr_text::values::unsigned;
use memscope_core::event::{Attrs, Device, Event, EventKind, EventType};

use super::sanitizer_op;
use super::{AccessKind, Free, KernelLaunch, StreamId, StreamOp, TensorAccess};

/// A launch being gathered from an operator's rows on one thread.
struct OpenOp {
    depth: u32,
    launch: KernelLaunch,
    stream: Option<StreamId>,
}

#[derive(Default)]
struct ThreadState {
    open: Option<OpenOp>,
    stream: Option<StreamId>,
}

/// What the mapper saw, for a report that says what was and was not recorded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MapStats {
    /// Launches handed to the check (operators with accesses, marks, lone accesses).
    pub launches: u64,
    /// `KERNEL_LAUNCH` rows that named their stream.
    pub stream_launches: u64,
    /// Stream and event calls (`SYSTEM` rows).
    pub stream_calls: u64,
    /// `sanitizer-op:` marks that did not parse (not checked).
    pub malformed_marks: u64,
    /// Launches placed on a stream other than the default one.
    pub on_streams: u64,
}

impl MapStats {
    /// Whether anything the check needs was recorded: launches with accesses, launches with
    /// their streams, or `sanitizer-op:` marks (checked or not).
    #[must_use]
    pub fn recorded(&self) -> bool {
        self.launches > 0 || self.stream_launches > 0 || self.malformed_marks > 0
    }
}

/// Maps rows to [`StreamOp`]s (see the module's text); one per process, fed in row order.
#[derive(Default)]
pub struct RowMapper {
    threads: HashMap<Option<u32>, ThreadState>,
    /// Live device blocks: start → (end, owner).
    blocks: BTreeMap<u64, (u64, Option<Arc<str>>)>,
    stats: MapStats,
    /// The first malformed mark's error, for the report.
    first_malformed: Option<String>,
}

/// The value of `key` in a row's Attr pairs: `None` without the key, else the number (a
/// handle, `0x…`) or the Attr reader's error.
fn attr_number(ev: &Event, key: &str) -> Option<Result<u64, String>> {
    let Attrs::Pairs(p) = &ev.attrs else {
        return None;
    };
    let (k, v) = p.iter().find(|(k, _)| k == key)?;
    Some(unsigned(k, v))
}

fn hex_pair(ev: &Event, key: &str) -> Option<u64> {
    attr_number(ev, key)?.ok()
}

/// The stream of a mark: its `stream` Attr (0, the default stream, without one); an Attr that
/// is not a handle is an error, never taken as the default stream.
fn stream_attr(ev: &Event) -> Result<StreamId, String> {
    match attr_number(ev, "stream") {
        None => Ok(0),
        Some(r) => r.map_err(|e| format!("stream: {e}; not checked")),
    }
}

impl RowMapper {
    /// A mapper that has seen nothing.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// What was seen so far.
    #[must_use]
    pub fn stats(&self) -> MapStats {
        self.stats
    }

    /// The first malformed `sanitizer-op:` mark's error (`name: …` field by field).
    #[must_use]
    pub fn first_malformed(&self) -> Option<&str> {
        self.first_malformed.as_deref()
    }

    /// Maps one row, pushing the operations it stands for onto `out`.
    pub fn map(&mut self, ev: &Event, out: &mut Vec<StreamOp>) {
        match ev.kind {
            EventKind::System => self.system(ev, out),
            EventKind::OpLaunch => self.op_edge(ev, out),
            EventKind::KernelLaunch => {
                if let Attrs::Launch(l) = &ev.attrs {
                    if let Some(s) = l.stream {
                        self.stats.stream_launches += 1;
                        let t = self.threads.entry(ev.tid).or_default();
                        t.stream = Some(s);
                        if let Some(o) = &mut t.open {
                            o.stream = Some(s);
                        }
                    }
                }
            }
            EventKind::Access => self.access(ev, out),
            EventKind::Mstx if ev.event_type == EventType::Mark => self.mark(ev, out),
            EventKind::Malloc | EventKind::Free => self.memory(ev, out),
            _ => {}
        }
    }

    fn system(&mut self, ev: &Event, out: &mut Vec<StreamOp>) {
        if !ev.event_type.is_stream_order() {
            return;
        }
        let stream = hex_pair(ev, "stream");
        let event = hex_pair(ev, "event");
        let op = match (ev.event_type, stream, event) {
            (EventType::StreamCreate, Some(stream), _) => StreamOp::StreamCreate { stream },
            (EventType::EventCreate, _, Some(event)) => StreamOp::EventCreate { event },
            (EventType::EventDestroy, _, Some(event)) => StreamOp::EventDelete { event },
            (EventType::EventRecord, Some(stream), Some(event)) => {
                StreamOp::EventRecord { event, stream }
            }
            (EventType::StreamWaitEvent, Some(stream), Some(event)) => {
                StreamOp::EventWait { stream, event }
            }
            (EventType::StreamSync, Some(stream), _) => StreamOp::StreamSynchronize { stream },
            (EventType::EventSync, _, Some(event)) => StreamOp::EventSynchronize { event },
            (EventType::DeviceSync, _, _) => StreamOp::DeviceSynchronize,
            // STREAM_DESTROY orders nothing; a row without its handle cannot be placed
            _ => return,
        };
        self.stats.stream_calls += 1;
        out.push(op);
    }

    fn op_edge(&mut self, ev: &Event, out: &mut Vec<StreamOp>) {
        let start = matches!(ev.event_type, EventType::AtenStart | EventType::AtbStart);
        let end = matches!(ev.event_type, EventType::AtenEnd | EventType::AtbEnd);
        let t = self.threads.entry(ev.tid).or_default();
        if start {
            match &mut t.open {
                Some(o) => o.depth += 1,
                None => {
                    t.open = Some(OpenOp {
                        depth: 1,
                        launch: launch_of(ev, ev.name.clone().unwrap_or_default(), 0),
                        stream: None,
                    });
                }
            }
        } else if end {
            let Some(o) = &mut t.open else { return };
            o.depth -= 1;
            if o.depth > 0 {
                return;
            }
            let o = t.open.take().expect("open operator");
            let mut l = o.launch;
            if l.accesses.is_empty() {
                return;
            }
            l.stream = o.stream.or(t.stream).unwrap_or(0);
            self.push_launch(l, out);
        }
    }

    fn push_launch(&mut self, l: KernelLaunch, out: &mut Vec<StreamOp>) {
        self.stats.launches += 1;
        self.stats.on_streams += u64::from(l.stream != 0);
        out.push(StreamOp::KernelLaunch(l));
    }

    fn owner_of(&self, addr: u64) -> Option<String> {
        let (_, (end, owner)) = self.blocks.range(..=addr).next_back()?;
        (addr < *end).then(|| owner.as_deref().map(str::to_owned))?
    }

    fn access(&mut self, ev: &Event, out: &mut Vec<StreamOp>) {
        let (Some(addr), Device::Npu(_)) = (ev.ptr, ev.device) else {
            return;
        };
        let size = match &ev.attrs {
            Attrs::Access(a) => a.size.unwrap_or(0),
            _ => 0,
        };
        let kind = if ev.event_type == EventType::Read {
            AccessKind::ReadOnly
        } else {
            AccessKind::ReadWrite
        };
        let a = TensorAccess {
            addr,
            size,
            kind,
            aliases: Vec::new(),
            owner: self.owner_of(addr),
        };
        let t = self.threads.entry(ev.tid).or_default();
        if let Some(o) = &mut t.open {
            o.launch.accesses.push(a);
            return;
        }
        let stream = t.stream.unwrap_or(0);
        let mut l = launch_of(ev, ev.name.clone().unwrap_or_default(), stream);
        l.accesses.push(a);
        self.push_launch(l, out);
    }

    fn mark(&mut self, ev: &Event, out: &mut Vec<StreamOp>) {
        let Some(msg) = ev.name.as_deref() else {
            return;
        };
        let parsed = match sanitizer_op::parse(msg) {
            Ok(None) => return,
            // the recorder keeps MAX_MESSAGE bytes of a text: a mark that long may have been
            // cut, and a cut list would be checked as if whole
            Ok(Some(_)) if msg.len() >= sanitizer_op::MAX_MESSAGE => Err(format!(
                "message: {} bytes, the recorder's limit: it may have been cut; not checked",
                msg.len()
            )),
            Ok(Some(op)) => match stream_attr(ev) {
                Ok(s) => Ok((op, s)),
                Err(e) => Err(e),
            },
            Err(e) => Err(e),
        };
        let (op, stream) = match parsed {
            Ok(x) => x,
            Err(e) => {
                self.stats.malformed_marks += 1;
                self.first_malformed.get_or_insert(e);
                return;
            }
        };
        let mut l = launch_of(ev, op.name, stream);
        let written: Vec<u64> = op.write.iter().map(|a| a.addr).collect();
        for (list, read) in [(&op.read, true), (&op.write, false)] {
            for a in list {
                let kind = match (read, written.contains(&a.addr)) {
                    (true, false) => AccessKind::ReadOnly,
                    (true, true) => continue, // listed again as a write
                    (false, _) if op.read.iter().any(|r| r.addr == a.addr) => AccessKind::ReadWrite,
                    (false, _) => AccessKind::Output,
                };
                l.accesses.push(TensorAccess {
                    addr: a.addr,
                    size: a.size,
                    kind,
                    aliases: vec![a.alias.clone()],
                    owner: self.owner_of(a.addr),
                });
            }
        }
        self.push_launch(l, out);
    }

    fn memory(&mut self, ev: &Event, out: &mut Vec<StreamOp>) {
        let Device::Npu(_) = ev.device else { return };
        let Some(m) = ev.memory() else { return };
        if ev.is_history_malloc()
            || m.account_only
            || m.cpu_tensor
            || ev.event_type == EventType::Host
        {
            return;
        }
        if ev.kind == EventKind::Malloc {
            let owner = m.owner.as_ref().map(|o| Arc::from(o.to_string()));
            self.blocks
                .insert(m.addr, (m.addr.saturating_add(m.size.max(1)), owner));
            out.push(StreamOp::Alloc {
                addr: m.addr,
                size: m.size,
            });
            return;
        }
        self.blocks.remove(&m.addr);
        let f = Free {
            id: ev.id,
            time_ns: ev.ts_ns,
            addr: m.addr,
            size: m.size,
            stream: None,
            python_stack: ev.py_stack.as_deref().map(Arc::from),
            c_stack: ev.c_stack.as_deref().map(Arc::from),
        };
        out.push(if ev.event_type == EventType::Hal {
            // the driver's free: forgotten, as CSAN does
            StreamOp::Alloc {
                addr: m.addr,
                size: m.size,
            }
        } else {
            StreamOp::PoolFree(f)
        });
    }
}

fn launch_of(ev: &Event, operator: String, stream: StreamId) -> KernelLaunch {
    KernelLaunch {
        id: ev.id,
        time_ns: ev.ts_ns,
        stream,
        operator,
        accesses: Vec::new(),
        python_stack: ev.py_stack.as_deref().map(Arc::from),
        c_stack: ev.c_stack.as_deref().map(Arc::from),
    }
}

#[cfg(test)]
#[path = "mapper_tests.rs"]
mod tests;
