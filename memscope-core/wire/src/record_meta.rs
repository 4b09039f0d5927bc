//! What a record is, apart from its fields: its time stamp, its `Event` kind and its slot in
//! the stream header's drop counters.

use super::{python, python_ctx, Record, DROP_KINDS, DROP_KIND_UNKNOWN};
use crate::EventKind;

impl<B: AsRef<[u8]>> Record<B> {
    /// Whether this record is a definition (no time stamp; applied as soon as read).
    pub fn is_definition(&self) -> bool {
        self.ts().is_none()
    }

    /// The record's time stamp (`None` for `Thread` and `StackDef`, which have none).
    #[inline]
    pub fn ts(&self) -> Option<u64> {
        match self {
            Record::Thread { .. }
            | Record::StackDef { .. }
            | Record::TextDef { .. }
            | Record::EventTypeDef { .. } => None,
            Record::MarkRef { ts, .. } | Record::RangeStartRef { ts, .. } => Some(*ts),
            Record::Mark { ts, .. }
            | Record::RangeStart { ts, .. }
            | Record::RangeEnd { ts, .. }
            | Record::HeapRegister { ts, .. }
            | Record::HeapUnregister { ts, .. }
            | Record::RegionRegister { ts, .. }
            | Record::RegionUnregister { ts, .. }
            | Record::OwnerPush { ts, .. }
            | Record::OwnerPop { ts }
            | Record::CallStack { ts, .. }
            | Record::Shadow { ts }
            | Record::System { ts, .. }
            | Record::Malloc { ts, .. }
            | Record::Free { ts, .. }
            | Record::Module { ts, .. }
            | Record::Mmap { ts, .. }
            | Record::Munmap { ts, .. }
            | Record::Mremap { ts, .. }
            | Record::ThreadDevice { ts, .. }
            | Record::ProcessSample { ts, .. }
            | Record::DeviceSample { ts, .. }
            | Record::Plugin { ts, .. }
            | Record::Compact { ts, .. } => Some(*ts),
            Record::Source { tag, ts, .. } => {
                (!crate::source::is_definition_tag(*tag)).then_some(*ts)
            }
            Record::PyCodeDef { .. }
            | Record::PyCall { .. }
            | Record::PyReturn { .. }
            | Record::PyTrace { .. }
            | Record::Snapshot { .. }
            | Record::OwnerTag { .. } => python::ts_of(self),
            Record::PyFrameDef { .. }
            | Record::PyStack { .. }
            | Record::AtenOp { .. }
            | Record::AtenTensor { .. }
            | Record::CpuTensor { .. }
            | Record::WatchDump { .. } => python_ctx::ts_of(self),
        }
    }

    /// The kind of the event this record becomes (the `Event` column), for counting drops:
    /// `None` for records that are not events themselves (`Thread`, definitions, modules,
    /// owner and pool-heap state, device selection).
    pub fn event_kind(&self) -> Option<EventKind> {
        Some(match self {
            Record::Mark { .. }
            | Record::MarkRef { .. }
            | Record::RangeStart { .. }
            | Record::RangeStartRef { .. }
            | Record::RangeEnd { .. } => EventKind::Mstx,
            // an mremap is a FREE of the old range and a MALLOC of the new one: counted as the
            // MALLOC it would have written
            Record::Malloc { .. }
            | Record::Mmap { .. }
            | Record::Mremap { .. }
            | Record::RegionRegister { .. } => EventKind::Malloc,
            Record::Free { .. } | Record::Munmap { .. } | Record::RegionUnregister { .. } => {
                EventKind::Free
            }
            Record::System { .. } => EventKind::System,
            Record::ProcessSample { .. } | Record::DeviceSample { .. } => EventKind::Sample,
            Record::Source { tag, .. } => return crate::source::event_kind_of(*tag),
            Record::Snapshot { .. } => EventKind::Snapshot,
            Record::AtenOp { .. } => EventKind::OpLaunch,
            Record::AtenTensor { .. } => EventKind::Access,
            Record::CpuTensor { free: false, .. } => EventKind::Malloc,
            Record::CpuTensor { free: true, .. } => EventKind::Free,
            Record::Plugin { kind, .. } | Record::Compact { kind, .. } => match kind {
                1 => EventKind::Malloc,
                2 => EventKind::Free,
                3 => EventKind::Mstx,
                4 | 5 => EventKind::OpLaunch,
                6 | 7 => EventKind::KernelLaunch,
                8 => EventKind::Access,
                _ => return None,
            },
            Record::Thread { .. }
            | Record::TextDef { .. }
            | Record::EventTypeDef { .. }
            | Record::StackDef { .. }
            | Record::Module { .. }
            | Record::OwnerPush { .. }
            | Record::OwnerPop { .. }
            | Record::CallStack { .. }
            | Record::Shadow { .. }
            | Record::HeapRegister { .. }
            | Record::HeapUnregister { .. }
            | Record::ThreadDevice { .. }
            | Record::PyCodeDef { .. }
            | Record::OwnerTag { .. }
            | Record::PyFrameDef { .. }
            | Record::PyStack { .. }
            | Record::WatchDump { .. } => return None,
            // python_trace rows, not events: their own drop counter (`drop_slot`)
            Record::PyCall { .. } | Record::PyReturn { .. } | Record::PyTrace { .. } => {
                return None
            }
        })
    }

    /// The drop counter of this record (index into the header's [`super::FH_DROPPED_KINDS`]
    /// table), `None` when it is neither an event nor a python_trace record.
    pub fn drop_slot(&self) -> Option<usize> {
        match self {
            Record::PyCall { .. } | Record::PyReturn { .. } | Record::PyTrace { .. } => {
                Some(super::DROP_KIND_PYTHON_TRACE)
            }
            _ => self.event_kind().map(drop_slot_of),
        }
    }
}

/// The drop counter index of events of kind `k` (its position in [`EventKind::ALL`]).
pub fn drop_slot_of(k: EventKind) -> usize {
    let i = EventKind::ALL
        .iter()
        .position(|x| *x == k)
        .unwrap_or(DROP_KIND_UNKNOWN);
    i.min(DROP_KINDS - 1)
}
