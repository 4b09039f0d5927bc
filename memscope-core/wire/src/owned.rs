//! Owned copies of records (the collector keeps records past the stream buffer).

use super::{compact, python, python_ctx, sample, Record};

impl<B: AsRef<[u8]>> Record<B> {
    /// Copies the borrowed texts so the record can outlive the stream buffer.
    pub fn to_owned(&self) -> Record<Box<[u8]>> {
        let b = |x: &B| -> Box<[u8]> { x.as_ref().into() };
        match self {
            Record::Thread { tid } => Record::Thread { tid: *tid },
            Record::Mark {
                ts,
                stream,
                msg,
                null,
            } => Record::Mark {
                ts: *ts,
                stream: *stream,
                msg: b(msg),
                null: *null,
            },
            Record::RangeStart {
                ts,
                id,
                stream,
                msg,
                null,
            } => Record::RangeStart {
                ts: *ts,
                id: *id,
                stream: *stream,
                msg: b(msg),
                null: *null,
            },
            Record::RangeEnd { ts, id } => Record::RangeEnd { ts: *ts, id: *id },
            Record::HeapRegister {
                ts,
                pool,
                device,
                ptr,
                size,
            } => Record::HeapRegister {
                ts: *ts,
                pool: *pool,
                device: *device,
                ptr: *ptr,
                size: *size,
            },
            Record::HeapUnregister { ts, pool, ptr } => Record::HeapUnregister {
                ts: *ts,
                pool: *pool,
                ptr: *ptr,
            },
            Record::RegionRegister {
                ts,
                pool,
                device,
                ptr,
                size,
            } => Record::RegionRegister {
                ts: *ts,
                pool: *pool,
                device: *device,
                ptr: *ptr,
                size: *size,
            },
            Record::RegionUnregister { ts, pool, ptr } => Record::RegionUnregister {
                ts: *ts,
                pool: *pool,
                ptr: *ptr,
            },
            Record::OwnerPush { ts, label } => Record::OwnerPush {
                ts: *ts,
                label: b(label),
            },
            Record::OwnerPop { ts } => Record::OwnerPop { ts: *ts },
            Record::CallStack { ts, stack } => Record::CallStack {
                ts: *ts,
                stack: *stack,
            },
            Record::Shadow { ts } => Record::Shadow { ts: *ts },
            Record::System { ts, code, device } => Record::System {
                ts: *ts,
                code: *code,
                device: *device,
            },
            Record::Malloc {
                ts,
                addr,
                size,
                stack,
            } => Record::Malloc {
                ts: *ts,
                addr: *addr,
                size: *size,
                stack: *stack,
            },
            Record::Free { ts, addr } => Record::Free {
                ts: *ts,
                addr: *addr,
            },
            Record::TextDef { id, text } => Record::TextDef {
                id: *id,
                text: b(text),
            },
            Record::MarkRef { ts, stream, text } => Record::MarkRef {
                ts: *ts,
                stream: *stream,
                text: *text,
            },
            Record::RangeStartRef {
                ts,
                id,
                stream,
                text,
            } => Record::RangeStartRef {
                ts: *ts,
                id: *id,
                stream: *stream,
                text: *text,
            },
            Record::StackDef { id, count, raw } => Record::StackDef {
                id: *id,
                count: *count,
                raw: b(raw),
            },
            Record::Module {
                ts,
                base,
                start,
                size,
                build_id,
                path,
            } => Record::Module {
                ts: *ts,
                base: *base,
                start: *start,
                size: *size,
                build_id: b(build_id),
                path: b(path),
            },
            Record::Mmap {
                ts,
                addr,
                size,
                stack,
            } => Record::Mmap {
                ts: *ts,
                addr: *addr,
                size: *size,
                stack: *stack,
            },
            Record::Munmap { ts, addr, size } => Record::Munmap {
                ts: *ts,
                addr: *addr,
                size: *size,
            },
            Record::Mremap {
                ts,
                old_addr,
                old_size,
                new_addr,
                new_size,
                keep_old,
            } => Record::Mremap {
                ts: *ts,
                old_addr: *old_addr,
                old_size: *old_size,
                new_addr: *new_addr,
                new_size: *new_size,
                keep_old: *keep_old,
            },
            Record::ThreadDevice { ts, device } => Record::ThreadDevice {
                ts: *ts,
                device: *device,
            },
            Record::Plugin {
                ts,
                kind,
                device,
                ptr,
                size,
                event_type,
                name,
                attrs,
            } => Record::Plugin {
                ts: *ts,
                kind: *kind,
                device: *device,
                ptr: *ptr,
                size: *size,
                event_type: b(event_type),
                name: b(name),
                attrs: b(attrs),
            },
            Record::Source {
                source,
                tag,
                ts,
                body,
            } => Record::Source {
                source: *source,
                tag: *tag,
                ts: *ts,
                body: b(body),
            },
            Record::PyCodeDef { .. }
            | Record::PyCall { .. }
            | Record::PyReturn { .. }
            | Record::PyTrace { .. }
            | Record::Snapshot { .. }
            | Record::OwnerTag { .. } => python::to_owned(self).expect("a Python record"),
            Record::PyFrameDef { .. }
            | Record::PyStack { .. }
            | Record::AtenOp { .. }
            | Record::AtenTensor { .. }
            | Record::CpuTensor { .. }
            | Record::WatchDump { .. } => python_ctx::to_owned(self).expect("an issue-13 record"),
            Record::ProcessSample { .. } | Record::DeviceSample { .. } => {
                sample::to_owned(self).expect("a sample record")
            }
            Record::EventTypeDef { .. } | Record::Compact { .. } => {
                compact::to_owned(self).expect("a compact record")
            }
        }
    }
}
