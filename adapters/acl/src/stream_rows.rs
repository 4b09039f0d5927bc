//! Collector side of the stream and event calls (issue 36): one `SYSTEM` row per recorded call.
//!
//! * Event Type: `STREAM_CREATE`, `STREAM_DESTROY`, `EVENT_CREATE`, `EVENT_DESTROY`,
//!   `EVENT_RECORD`, `STREAM_WAIT_EVENT`, `STREAM_SYNC`, `EVENT_SYNC`, `DEVICE_SYNC`
//!   (memscope's own; msMemScope writes no such rows).
//! * Name: the ACL function (`aclrtRecordEvent`, …).
//! * Device: the thread's current device (`aclrtSetDevice`), else `N/A`.
//! * Attr: the handles, `0x%x` as the `stream` key of `KERNEL_LAUNCH` rows writes them:
//!   `stream` (0x0 is the default stream) first, then `event`; `DEVICE_SYNC` has none.

use crate::wire::AclRecord;
use memscope_collect::adapter::TypeCtx;
use memscope_core::event::{Attrs, Device, Event, EventType};

/// The Event Type, Name and handles (`stream`, `event`) of a stream or event record.
fn parts(rec: AclRecord) -> Option<(EventType, &'static str, Option<u64>, Option<u64>)> {
    use AclRecord as R;
    use EventType as T;
    Some(match rec {
        R::StreamCreate { stream } => (T::StreamCreate, "aclrtCreateStream", Some(stream), None),
        R::StreamDestroy { stream } => (T::StreamDestroy, "aclrtDestroyStream", Some(stream), None),
        R::EventCreate { event } => (T::EventCreate, "aclrtCreateEvent", None, Some(event)),
        R::EventDestroy { event } => (T::EventDestroy, "aclrtDestroyEvent", None, Some(event)),
        R::EventRecord { event, stream } => (
            T::EventRecord,
            "aclrtRecordEvent",
            Some(stream),
            Some(event),
        ),
        R::StreamWaitEvent { stream, event } => (
            T::StreamWaitEvent,
            "aclrtStreamWaitEvent",
            Some(stream),
            Some(event),
        ),
        R::StreamSync { stream } => (T::StreamSync, "aclrtSynchronizeStream", Some(stream), None),
        R::EventSync { event } => (T::EventSync, "aclrtSynchronizeEvent", None, Some(event)),
        R::DeviceSync {} => (T::DeviceSync, "aclrtSynchronizeDevice", None, None),
        _ => return None,
    })
}

/// The `SYSTEM` row of a stream or event record at `(tid, ts)`; `None` for other records.
pub fn row(ctx: &TypeCtx, (tid, ts): (u32, u64), rec: AclRecord) -> Option<Event> {
    let (t, name, stream, event) = parts(rec)?;
    let mut ev = Event::new(t, ts, ctx.pid, tid);
    ev.name = Some(name.to_owned());
    ev.device = ctx
        .current_device(tid)
        .map_or(Device::NotApplicable, Device::Npu);
    let mut pairs = Vec::with_capacity(2);
    if let Some(s) = stream {
        pairs.push(("stream".to_owned(), format!("0x{s:x}")));
    }
    if let Some(e) = event {
        pairs.push(("event".to_owned(), format!("0x{e:x}")));
    }
    if !pairs.is_empty() {
        ev.attrs = Attrs::Pairs(pairs);
    }
    Some(ev)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::typer::AclTyper;
    use memscope_collect::adapter::Typer;
    use memscope_core::attr_text::format_attr;
    use memscope_core::event::EventKind;
    use memscope_wire::OptU32;

    #[test]
    fn stream_and_event_calls_are_system_rows_with_handles_and_the_threads_device() {
        let (s1, s2, e) = (0x5500_0010u64, 0x5500_0030u64, 0x7700_0020u64);
        let recs = [
            AclRecord::SetDevice { device: 1 },
            AclRecord::StreamCreate { stream: s1 },
            AclRecord::EventCreate { event: e },
            AclRecord::KernelLaunchOn {
                hash: 0,
                device: OptU32(u32::MAX),
                stream: OptU32(1),
                task: OptU32(4),
                handle: s1,
            },
            AclRecord::EventRecord {
                event: e,
                stream: s1,
            },
            AclRecord::StreamWaitEvent {
                stream: s2,
                event: e,
            },
            AclRecord::StreamSync { stream: 0 },
            AclRecord::EventSync { event: e },
            AclRecord::DeviceSync {},
            AclRecord::EventDestroy { event: e },
            AclRecord::StreamDestroy { stream: s1 },
        ];
        let mut t = AclTyper::default();
        let mut ctx = TypeCtx::new(3, vec![4, 5]);
        let mut out = Vec::new();
        for (i, r) in recs.into_iter().enumerate() {
            let rec = crate::wire::rec(i as u64 + 1, r);
            assert!(t.type_record(&mut ctx, 9, &rec, &mut out));
        }
        let got: Vec<_> = out
            .iter()
            .map(|e| {
                (
                    e.kind,
                    e.event_type.as_str(),
                    e.name.clone().unwrap_or_default(),
                    e.device,
                    format_attr(e),
                    e.ts_ns,
                )
            })
            .collect();
        let sys = |t, n: &str, a: &str, ts| {
            (
                EventKind::System,
                t,
                n.to_owned(),
                Device::Npu(5),
                a.to_owned(),
                ts,
            )
        };
        assert_eq!(
            got,
            [
                sys(
                    "STREAM_CREATE",
                    "aclrtCreateStream",
                    "{stream:0x55000010}",
                    2
                ),
                sys("EVENT_CREATE", "aclrtCreateEvent", "{event:0x77000020}", 3),
                (
                    EventKind::KernelLaunch,
                    "KERNEL_LAUNCH",
                    String::new(),
                    Device::Npu(5),
                    "{streamId:1,taskId:4,stream:0x55000010}".to_owned(),
                    4
                ),
                sys(
                    "EVENT_RECORD",
                    "aclrtRecordEvent",
                    "{stream:0x55000010,event:0x77000020}",
                    5
                ),
                sys(
                    "STREAM_WAIT_EVENT",
                    "aclrtStreamWaitEvent",
                    "{stream:0x55000030,event:0x77000020}",
                    6
                ),
                sys("STREAM_SYNC", "aclrtSynchronizeStream", "{stream:0x0}", 7),
                sys(
                    "EVENT_SYNC",
                    "aclrtSynchronizeEvent",
                    "{event:0x77000020}",
                    8
                ),
                sys("DEVICE_SYNC", "aclrtSynchronizeDevice", "", 9),
                sys(
                    "EVENT_DESTROY",
                    "aclrtDestroyEvent",
                    "{event:0x77000020}",
                    10
                ),
                sys(
                    "STREAM_DESTROY",
                    "aclrtDestroyStream",
                    "{stream:0x55000010}",
                    11
                ),
            ]
        );
    }

    #[test]
    fn a_thread_without_a_device_gives_device_less_rows() {
        let ctx = TypeCtx::new(3, vec![]);
        let ev = row(&ctx, (1, 5), AclRecord::DeviceSync {}).unwrap();
        assert_eq!((ev.device, ev.attrs), (Device::NotApplicable, Attrs::None));
        assert!(row(&ctx, (1, 5), AclRecord::SetDevice { device: 0 }).is_none());
    }
}
