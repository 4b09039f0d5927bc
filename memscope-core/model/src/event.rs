//! The typed event model: one [`Event`] per row of a `memscope_dump_*.csv` file.
//!
//! Names are spelled as the seed (`seed-output-files.md`) spells them; [`EventType::parse`] also
//! accepts msMemScope's other spellings (`MINDSPORE`, `acl init`, …) so dumps of either tool read.

pub use crate::attrs::{
    AccessAttrs, AllocType, Attrs, Inefficiency, LaunchAttrs, MemoryAttrs, PageType,
};

/// The `Event` column; defined with the stream format, which both processes share.
pub use memscope_wire::EventKind;

/// The `Event Type` column: the sub-kind. Which types belong to which [`EventKind`] is given by
/// [`EventType::kind`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[allow(missing_docs)] // the variants are the seed's spellings, see `as_str`
pub enum EventType {
    AclInit,
    AclFini,
    StartTrace,
    StopTrace,
    Step,
    /// An owner chain given to a live block after its MALLOC (a framework hook's role tag, or
    /// `describer(addr, owner=…)`): SYSTEM row `MEMORY_OWNER`, memscope's own (issue 25), with
    /// the block's `allocation_id`, `addr`, `size`, `pool` and its new `owner`.
    MemoryOwner,
    /// `aclrtCreateStream` (ACL adapter, issue 36; memscope's own, as are the next eight):
    /// SYSTEM row with the new `stream` handle, Name the ACL function.
    StreamCreate,
    /// `aclrtDestroyStream`: `stream`.
    StreamDestroy,
    /// `aclrtCreateEvent`: the new `event` handle.
    EventCreate,
    /// `aclrtDestroyEvent`: `event`.
    EventDestroy,
    /// `aclrtRecordEvent`: `stream` (where the event is recorded) and `event`.
    EventRecord,
    /// `aclrtStreamWaitEvent`: `stream` (which waits) and `event`.
    StreamWaitEvent,
    /// `aclrtSynchronizeStream`: `stream`.
    StreamSync,
    /// `aclrtSynchronizeEvent`: `event`.
    EventSync,
    /// `aclrtSynchronizeDevice`: no handle.
    DeviceSync,
    Hal,
    Pta,
    MindSpore,
    Atb,
    Host,
    PtaWorkspace,
    /// Memory mapped with `mmap` by the traced process (HOST adapter, `MEMSCOPE_HOST_MMAP=1`);
    /// memscope's own type, apart from the heap's `HOST` (msMemScope has none).
    HostMmap,
    Read,
    Write,
    Unknown,
    AtenStart,
    AtenEnd,
    AtbStart,
    AtbEnd,
    KernelLaunch,
    KernelStart,
    KernelEnd,
    KernelExecuteStart,
    KernelExecuteEnd,
    Mark,
    RangeStart,
    RangeEnd,
    Snapshot,
    OomTrigger,
    OomRecentAlloc,
    OomTopAlloc,
    /// The process's host memory sampled on a timer (`--sample`): SAMPLE row with `rss`,
    /// `anon`, `tracked` and `untracked` bytes (memscope's own, issue 25).
    HostMemory,
    /// A device's memory sampled on a timer (`--sample`, where the device runtime answers):
    /// SAMPLE row with `used`, `free`, `tracked` (live HAL blocks) and `untracked` bytes.
    DeviceMemory,
    /// A type named by a third-party adapter (plugin ABI), interned by [`EventType::custom`].
    Custom(u16),
}

/// Names of custom (plugin) event types; leaked once each, at most [`MAX_CUSTOM_TYPES`].
static CUSTOM_TYPES: std::sync::Mutex<Vec<&'static str>> = std::sync::Mutex::new(Vec::new());

/// Distinct plugin event types kept; later ones are all spelled `PLUGIN`.
pub const MAX_CUSTOM_TYPES: usize = 4096;

impl EventType {
    const TABLE: [(EventType, &'static str, EventKind); 43] = [
        (EventType::AclInit, "ACL_INIT", EventKind::System),
        (EventType::AclFini, "ACL_FINI", EventKind::System),
        (EventType::StartTrace, "START_TRACE", EventKind::System),
        (EventType::StopTrace, "STOP_TRACE", EventKind::System),
        (EventType::Step, "STEP", EventKind::System),
        (EventType::MemoryOwner, "MEMORY_OWNER", EventKind::System),
        (EventType::StreamCreate, "STREAM_CREATE", EventKind::System),
        (
            EventType::StreamDestroy,
            "STREAM_DESTROY",
            EventKind::System,
        ),
        (EventType::EventCreate, "EVENT_CREATE", EventKind::System),
        (EventType::EventDestroy, "EVENT_DESTROY", EventKind::System),
        (EventType::EventRecord, "EVENT_RECORD", EventKind::System),
        (
            EventType::StreamWaitEvent,
            "STREAM_WAIT_EVENT",
            EventKind::System,
        ),
        (EventType::StreamSync, "STREAM_SYNC", EventKind::System),
        (EventType::EventSync, "EVENT_SYNC", EventKind::System),
        (EventType::DeviceSync, "DEVICE_SYNC", EventKind::System),
        (EventType::Hal, "HAL", EventKind::Malloc),
        (EventType::Pta, "PTA", EventKind::Malloc),
        (EventType::MindSpore, "MindSpore", EventKind::Malloc),
        (EventType::Atb, "ATB", EventKind::Malloc),
        (EventType::Host, "HOST", EventKind::Malloc),
        (EventType::PtaWorkspace, "PTA_WORKSPACE", EventKind::Malloc),
        (EventType::HostMmap, "HOST_MMAP", EventKind::Malloc),
        (EventType::Read, "READ", EventKind::Access),
        (EventType::Write, "WRITE", EventKind::Access),
        (EventType::Unknown, "UNKNOWN", EventKind::Access),
        (EventType::AtenStart, "ATEN_START", EventKind::OpLaunch),
        (EventType::AtenEnd, "ATEN_END", EventKind::OpLaunch),
        (EventType::AtbStart, "ATB_START", EventKind::OpLaunch),
        (EventType::AtbEnd, "ATB_END", EventKind::OpLaunch),
        (
            EventType::KernelLaunch,
            "KERNEL_LAUNCH",
            EventKind::KernelLaunch,
        ),
        (
            EventType::KernelStart,
            "KERNEL_START",
            EventKind::KernelLaunch,
        ),
        (EventType::KernelEnd, "KERNEL_END", EventKind::KernelLaunch),
        (
            EventType::KernelExecuteStart,
            "KERNEL_EXECUTE_START",
            EventKind::KernelLaunch,
        ),
        (
            EventType::KernelExecuteEnd,
            "KERNEL_EXECUTE_END",
            EventKind::KernelLaunch,
        ),
        (EventType::Mark, "Mark", EventKind::Mstx),
        (EventType::RangeStart, "Range_start", EventKind::Mstx),
        (EventType::RangeEnd, "Range_end", EventKind::Mstx),
        (EventType::Snapshot, "SNAPSHOT", EventKind::Snapshot),
        (EventType::OomTrigger, "OOM_TRIGGER", EventKind::OomDetail),
        (
            EventType::OomRecentAlloc,
            "OOM_RECENT_ALLOC",
            EventKind::OomDetail,
        ),
        (
            EventType::OomTopAlloc,
            "OOM_TOP_ALLOC",
            EventKind::OomDetail,
        ),
        (EventType::HostMemory, "HOST_MEMORY", EventKind::Sample),
        (EventType::DeviceMemory, "DEVICE_MEMORY", EventKind::Sample),
    ];

    fn index(self) -> Option<usize> {
        Self::TABLE.iter().position(|(t, _, _)| *t == self)
    }

    /// The seed's spelling (`MindSpore`, `PTA_WORKSPACE`, `Range_start`, …), or a plugin's own.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Custom(i) => {
                let names = CUSTOM_TYPES.lock().unwrap_or_else(|e| e.into_inner());
                names.get(i as usize).copied().unwrap_or("PLUGIN")
            }
            t => t.index().map(|i| Self::TABLE[i].1).unwrap_or("UNKNOWN"),
        }
    }

    /// The kind this type belongs to. Memory types report [`EventKind::Malloc`]; they are
    /// equally valid under [`EventKind::Free`] (see [`EventType::fits`]). Custom types report
    /// MALLOC; their producer sets the event's kind.
    pub fn kind(self) -> EventKind {
        self.index()
            .map(|i| Self::TABLE[i].2)
            .unwrap_or(EventKind::Malloc)
    }

    /// Whether this type may appear under `kind` (memory types fit MALLOC and FREE; custom
    /// types fit any kind).
    pub fn fits(self, kind: EventKind) -> bool {
        let own = self.kind();
        matches!(self, EventType::Custom(_))
            || own == kind
            || (own == EventKind::Malloc && kind == EventKind::Free)
    }

    /// The type spelled `name`: a known type, or a custom (third-party) type interned on first
    /// use. Names are cut to 64 bytes; past [`MAX_CUSTOM_TYPES`] distinct names every new one
    /// maps to `PLUGIN`.
    pub fn custom(name: &str) -> EventType {
        if let Some(t) = EventType::parse(name) {
            return t;
        }
        let name = match name.char_indices().nth(64) {
            Some((i, _)) => &name[..i],
            None => name,
        };
        let mut names = CUSTOM_TYPES.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = names.iter().position(|n| *n == name) {
            return EventType::Custom(i as u16);
        }
        if names.len() >= MAX_CUSTOM_TYPES {
            return EventType::Custom(u16::MAX);
        }
        names.push(Box::leak(name.to_owned().into_boxed_str()));
        EventType::Custom((names.len() - 1) as u16)
    }

    /// Whether this is one of the ACL stream and event calls (SYSTEM `STREAM_CREATE` …
    /// `DEVICE_SYNC`): rows that order kernel launches, written with them (`--events launch`).
    pub fn is_stream_order(self) -> bool {
        matches!(
            self,
            EventType::StreamCreate
                | EventType::StreamDestroy
                | EventType::EventCreate
                | EventType::EventDestroy
                | EventType::EventRecord
                | EventType::StreamWaitEvent
                | EventType::StreamSync
                | EventType::EventSync
                | EventType::DeviceSync
        )
    }

    /// Whether this is a memory pool or allocator type (MALLOC/FREE rows).
    pub fn is_memory(self) -> bool {
        self.kind() == EventKind::Malloc
    }

    /// Whether this is a framework pool (PTA, PTA_WORKSPACE, MindSpore, ATB), as opposed to the
    /// driver (HAL) or the host allocator.
    pub fn is_framework_pool(self) -> bool {
        matches!(
            self,
            EventType::Pta | EventType::PtaWorkspace | EventType::MindSpore | EventType::Atb
        )
    }

    /// Parses the `Event Type` column, accepting msMemScope's spellings too
    /// (`MINDSPORE`, `acl init`, `KERNEL_EXECUTE_START`, …; behaviour spec §5.2, §12).
    pub fn parse(s: &str) -> Option<EventType> {
        if let Some(t) = Self::TABLE.iter().find(|(_, n, _)| *n == s) {
            return Some(t.0);
        }
        match s {
            "MINDSPORE" | "Mindspore" => Some(EventType::MindSpore),
            "acl init" | "ACL init" => Some(EventType::AclInit),
            "acl fini" | "ACL fini" | "acl finalize" => Some(EventType::AclFini),
            "PTA_CACHING" => Some(EventType::Pta),
            "HOST_PINNED" => Some(EventType::Host),
            "Range_end " => Some(EventType::RangeEnd),
            _ => None,
        }
    }
}

/// The `Device Id` column.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Device {
    /// An NPU, by its physical id (after `ASCEND_RT_VISIBLE_DEVICES` mapping).
    Npu(u32),
    /// Host memory, written `cpu` (2025 dumps: `host`).
    Cpu,
    /// Device-less events, written `N/A`.
    NotApplicable,
}

impl Device {
    /// Text as written in the dump: decimal id, `cpu` or `N/A`.
    pub fn to_text(self) -> String {
        let mut s = String::new();
        self.write_text(&mut s);
        s
    }

    /// Appends [`Device::to_text`] to `out` (a writer of many rows keeps one buffer).
    pub fn write_text(self, out: &mut String) {
        match self {
            Device::Npu(n) => {
                use std::fmt::Write;
                let _ = write!(out, "{n}");
            }
            Device::Cpu => out.push_str("cpu"),
            Device::NotApplicable => out.push_str("N/A"),
        }
    }

    /// Parses `0`, `cpu`, `host`, `N/A` (also msMemScope's internal 9999/10000).
    pub fn parse(s: &str) -> Option<Device> {
        match s {
            "cpu" | "host" | "10000" => Some(Device::Cpu),
            "N/A" | "" | "9999" => Some(Device::NotApplicable),
            _ => s.parse().ok().map(Device::Npu),
        }
    }

    /// Name of the output folder for this device: `device_<n>` or `device_cpu`; device-less
    /// events have no folder of their own (`None`).
    pub fn dir_name(self) -> Option<String> {
        match self {
            Device::Npu(n) => Some(format!("device_{n}")),
            Device::Cpu => Some("device_cpu".to_owned()),
            Device::NotApplicable => None,
        }
    }
}

/// One row of a dump. Timestamps are ns since the Unix epoch.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    /// Per-process id, unique and increasing in time order (assigned by the collector).
    pub id: u64,
    /// `Event` column.
    pub kind: EventKind,
    /// `Event Type` column.
    pub event_type: EventType,
    /// `Name` column; `None` is written `N/A`.
    pub name: Option<String>,
    /// `Timestamp(ns)`, ns since the Unix epoch.
    pub ts_ns: u64,
    /// `Process Id`; `None` is `N/A`.
    pub pid: Option<u32>,
    /// `Thread Id`; `None` is `N/A`.
    pub tid: Option<u32>,
    /// `Device Id`.
    pub device: Device,
    /// `Ptr` (MALLOC, FREE, ACCESS); `None` is `N/A`.
    pub ptr: Option<u64>,
    /// `Attr`.
    pub attrs: Attrs,
    /// `Call Stack(Python)`, one frame per line, innermost first.
    pub py_stack: Option<String>,
    /// `Call Stack(C)`, one frame per line, innermost first.
    pub c_stack: Option<String>,
}

impl Event {
    /// A bare event of `event_type` (its kind derived; memory types become MALLOC — set
    /// `kind` to FREE afterwards for frees).
    pub fn new(event_type: EventType, ts_ns: u64, pid: u32, tid: u32) -> Event {
        Event {
            id: 0,
            kind: event_type.kind(),
            event_type,
            name: None,
            ts_ns,
            pid: Some(pid),
            tid: Some(tid),
            device: Device::NotApplicable,
            ptr: None,
            attrs: Attrs::None,
            py_stack: None,
            c_stack: None,
        }
    }

    /// Moves the event out, leaving a bare one behind: for a bus layer that keeps what it was
    /// handed, or reshapes it into others ([`crate::bus::Flow::Stop`]).
    pub fn take(&mut self) -> Event {
        std::mem::replace(self, Event::new(EventType::Step, 0, 0, 0))
    }

    /// Memory attributes, if this is a MALLOC/FREE row.
    pub fn memory(&self) -> Option<&MemoryAttrs> {
        match &self.attrs {
            Attrs::Memory(m) => Some(m),
            _ => None,
        }
    }

    /// A MALLOC marked `shadow:true`: written when a collection window opened for a block
    /// allocated before it (msMemScope's history blocks). A row of record only: the leak,
    /// decompose and inefficient analyses leave it out, as msMemScope does; memory levels count
    /// it.
    pub fn is_history_malloc(&self) -> bool {
        self.kind == EventKind::Malloc && self.memory().is_some_and(|m| m.shadow)
    }

    /// Mutable memory attributes, if this is a MALLOC/FREE row.
    pub fn memory_mut(&mut self) -> Option<&mut MemoryAttrs> {
        match &mut self.attrs {
            Attrs::Memory(m) => Some(m),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_types_are_spelled_as_the_seed_and_table_is_in_enum_order() {
        for (i, (t, _, _)) in EventType::TABLE.iter().enumerate() {
            assert_eq!(t.index(), Some(i));
        }
        let c = EventType::custom("MYPOOL");
        assert_eq!(c.as_str(), "MYPOOL");
        assert_eq!(EventType::custom("MYPOOL"), c);
        assert_eq!(EventType::custom("HAL"), EventType::Hal);
        assert_eq!(EventType::MindSpore.as_str(), "MindSpore");
        assert_eq!(EventType::PtaWorkspace.as_str(), "PTA_WORKSPACE");
        assert_eq!(EventType::RangeStart.as_str(), "Range_start");
        assert_eq!(EventType::parse("MINDSPORE"), Some(EventType::MindSpore));
        assert!(EventType::Hal.fits(EventKind::Free));
        assert!(!EventType::Mark.fits(EventKind::Free));
    }

    #[test]
    fn stream_and_event_calls_are_system_types_that_parse_back() {
        let t = EventType::StreamWaitEvent;
        assert_eq!(t.as_str(), "STREAM_WAIT_EVENT");
        assert_eq!(t.kind(), EventKind::System);
        assert_eq!(EventType::parse("DEVICE_SYNC"), Some(EventType::DeviceSync));
        assert!(t.is_stream_order() && !EventType::AclInit.is_stream_order());
    }

    #[test]
    fn device_text_round_trips_and_accepts_2025_host() {
        for d in [Device::Npu(3), Device::Cpu, Device::NotApplicable] {
            assert_eq!(Device::parse(&d.to_text()), Some(d));
        }
        assert_eq!(Device::parse("host"), Some(Device::Cpu));
    }
}
