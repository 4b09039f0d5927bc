//! Collector-side half: the adapter descriptor and the [`Typer`] that turns `Mark`,
//! `RangeStart` and `RangeEnd` records into `MSTX` events. Safe code only.
#![forbid(unsafe_code)]

use memscope_collect::adapter::{AdapterDescriptor, TypeCtx, Typer};
use memscope_core::event::{Attrs, Device, Event, EventType};
use memscope_wire::Record;
use std::collections::HashMap;

/// `MSTX/…` event pairs this adapter produces.
pub const EVENTS: &[&str] = &["MSTX/Mark", "MSTX/Range_start", "MSTX/Range_end"];

/// C symbols the probe exports (or registers) for this adapter.
pub const SYMBOLS: &[&str] = &["InitInjectionMstx"];

/// Builds a fresh typer (for [`AdapterDescriptor::new_typer`]).
pub fn new_typer() -> Box<dyn Typer> {
    Box::<MstxTyper>::default()
}

/// This adapter's descriptor: listed once, in the CLI's registration list
/// (`memscope-cli/src/builtin.rs`); nothing registers it at load time, so the probe,
/// which never names it, links none of the collector code it points to.
pub static DESCRIPTOR: AdapterDescriptor = AdapterDescriptor {
    name: "mstx",
    source: crate::SOURCE,
    summary: "msTX marks and ranges (mstxMarkA, mstxRangeStartA/End) via InitInjectionMstx; \
              also routes msTX memory-domain calls to the pta/mindspore/atb adapters",
    symbols: SYMBOLS,
    events: EVENTS,
    config_keys: &[],
    default_on: true,
    new_typer: Some(new_typer),
    ..AdapterDescriptor::BASE
};

/// The `Name` of a mark or range: the message as lossy UTF-8. A message starting with `=`,
/// `+`, `-` or `@` gets a leading `'` so spreadsheet programs opening the CSV do not evaluate
/// it as a formula (CSV injection); an empty or NULL message gives an empty name.
pub fn display_name(msg: &[u8]) -> String {
    let s = String::from_utf8_lossy(msg);
    match s.as_bytes().first() {
        Some(b'=' | b'+' | b'-' | b'@') => format!("'{s}"),
        _ => s.into_owned(),
    }
}

/// Per-process typer of msTX records.
///
/// * `Mark` → `MSTX / Mark`, Name = message, Attr `stream:0x…` when made on a stream (not
///   NULL).
/// * `RangeStart` → `MSTX / Range_start`, Name = message, Attr `range_id`.
/// * `RangeEnd` → `MSTX / Range_end`, Name = the message of the range it ends (ids are
///   process-wide, so one map per process; the entry is removed at the end), or
///   `Range end from id <id>` for an id this process never started; Attr `range_id`.
///
/// Device = the runtime's current device of the thread as the probe queried it for the row
/// (`ThreadDevice` records, mapped through `ASCEND_RT_VISIBLE_DEVICES`), else the thread's
/// current device from `aclrtSetDevice` (`TypeCtx::current_device`, ACL adapter), else `N/A`.
/// Ptr is `N/A`. Pool (heap/region) records are left to the pool adapters' typers.
#[derive(Debug, Default)]
pub struct MstxTyper {
    open: HashMap<u64, String>,
    /// Last `ThreadDevice` of each thread (logical id; `u32::MAX`: the runtime had none).
    devices: HashMap<u32, u32>,
}

impl MstxTyper {
    /// Ranges started and not yet ended.
    pub fn open_ranges(&self) -> usize {
        self.open.len()
    }
}

/// A mark made on a stream says which (`stream:0x…`, memscope's own key: a `sanitizer-op:`
/// mark's operator runs there, issue 36); msMemScope leaves a mark's Attr empty, and so does
/// a mark on the default stream (NULL).
fn mark_attrs(stream: u64) -> Attrs {
    if stream == 0 {
        Attrs::None
    } else {
        Attrs::Pairs(vec![("stream".to_owned(), format!("{stream:#x}"))])
    }
}

fn range_attrs(id: u64) -> Attrs {
    Attrs::Pairs(vec![("range_id".to_owned(), id.to_string())])
}

impl Typer for MstxTyper {
    fn type_record(
        &mut self,
        ctx: &mut TypeCtx,
        tid: u32,
        rec: &Record<Box<[u8]>>,
        out: &mut Vec<Event>,
    ) -> bool {
        let (event_type, ts, name, attrs) = match rec {
            Record::ThreadDevice { device, .. } => {
                self.devices.insert(tid, *device);
                return true;
            }
            Record::Mark {
                ts, msg, stream, ..
            } => (EventType::Mark, *ts, display_name(msg), mark_attrs(*stream)),
            Record::RangeStart { ts, id, msg, .. } => {
                let name = display_name(msg);
                self.open.insert(*id, name.clone());
                (EventType::RangeStart, *ts, name, range_attrs(*id))
            }
            Record::RangeEnd { ts, id } => {
                let name = self
                    .open
                    .remove(id)
                    .unwrap_or_else(|| format!("Range end from id {id}"));
                (EventType::RangeEnd, *ts, name, range_attrs(*id))
            }
            _ => return false,
        };
        let mut ev = Event::new(event_type, ts, ctx.pid, tid);
        ev.name = Some(name);
        ev.attrs = attrs;
        ev.device = match self.devices.get(&tid) {
            Some(&d) if d != u32::MAX => Some(ctx.map_device(d)),
            _ => ctx.current_device(tid),
        }
        .map_or(Device::NotApplicable, Device::Npu);
        out.push(ev);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memscope_core::event::EventKind;

    fn b(s: &str) -> Box<[u8]> {
        s.as_bytes().into()
    }

    fn run(recs: &[(u32, Record<Box<[u8]>>)], ctx: &mut TypeCtx) -> (Vec<Event>, Vec<bool>) {
        let mut t = MstxTyper::default();
        let mut out = Vec::new();
        let claimed = recs
            .iter()
            .map(|(tid, r)| t.type_record(ctx, *tid, r, &mut out))
            .collect();
        (out, claimed)
    }

    #[test]
    fn marks_and_ranges_become_mstx_events() {
        let mut ctx = TypeCtx::new(42, vec![]);
        let (ev, claimed) = run(
            &[
                (
                    7,
                    Record::Mark {
                        ts: 10,
                        stream: 0,
                        msg: b("hello"),
                        null: false,
                    },
                ),
                (
                    7,
                    Record::RangeStart {
                        ts: 20,
                        id: 1,
                        stream: 0,
                        msg: b("step start"),
                        null: false,
                    },
                ),
                (8, Record::RangeEnd { ts: 30, id: 1 }),
            ],
            &mut ctx,
        );
        assert_eq!(claimed, [true, true, true]);
        assert_eq!(ev.len(), 3);
        assert!(ev
            .iter()
            .all(|e| e.kind == EventKind::Mstx && e.pid == Some(42)));
        assert_eq!(ev[0].event_type, EventType::Mark);
        assert_eq!(ev[0].name.as_deref(), Some("hello"));
        assert_eq!(ev[0].attrs, Attrs::None);
        assert_eq!(ev[0].tid, Some(7));
        assert_eq!(ev[0].ts_ns, 10);
        assert_eq!(ev[0].ptr, None);
        assert_eq!(ev[0].device, Device::NotApplicable);
        assert_eq!(ev[1].event_type, EventType::RangeStart);
        assert_eq!(ev[1].name.as_deref(), Some("step start"));
        assert_eq!(ev[1].attrs, range_attrs(1));
        assert_eq!(ev[2].event_type, EventType::RangeEnd);
        assert_eq!(ev[2].name.as_deref(), Some("step start"));
        assert_eq!(ev[2].tid, Some(8));
        assert_eq!(ev[2].attrs, range_attrs(1));
    }

    #[test]
    fn a_mark_made_on_a_stream_names_it_in_attr() {
        let mut ctx = TypeCtx::new(42, vec![]);
        let (ev, _) = run(
            &[(
                7,
                Record::Mark {
                    ts: 10,
                    stream: 0xabc0,
                    msg: b("sanitizer-op: name=x;write=o:0x10:4"),
                    null: false,
                },
            )],
            &mut ctx,
        );
        assert_eq!(
            ev[0].attrs,
            Attrs::Pairs(vec![("stream".into(), "0xabc0".into())])
        );
    }

    #[test]
    fn marks_take_the_queried_runtime_device_of_their_thread_mapped_through_visible_devices() {
        let mut ctx = TypeCtx::new(42, vec![4, 6]);
        ctx.set_current_device(9, 6);
        let mark = |ts| Record::Mark {
            ts,
            stream: 0,
            msg: b("m"),
            null: false,
        };
        let (ev, claimed) = run(
            &[
                (7, Record::ThreadDevice { ts: 1, device: 1 }),
                (7, mark(1)),
                (8, mark(2)), // no query result on thread 8: N/A
                (7, Record::ThreadDevice { ts: 3, device: 0 }),
                (7, mark(3)),
                (
                    9,
                    Record::ThreadDevice {
                        ts: 4,
                        device: u32::MAX,
                    },
                ),
                (9, mark(4)), // the runtime had none: aclrtSetDevice's device, if any
            ],
            &mut ctx,
        );
        assert!(claimed.iter().all(|c| *c));
        let devices: Vec<Device> = ev.iter().map(|e| e.device).collect();
        assert_eq!(
            devices,
            [
                Device::Npu(6),
                Device::NotApplicable,
                Device::Npu(4),
                Device::Npu(6)
            ]
        );
    }

    #[test]
    fn range_attr_is_what_the_bus_reads() {
        let mut ctx = TypeCtx::new(1, vec![]);
        let (ev, _) = run(
            &[(
                1,
                Record::RangeStart {
                    ts: 1,
                    id: 99,
                    stream: 0,
                    msg: b("r"),
                    null: false,
                },
            )],
            &mut ctx,
        );
        let id = match &ev[0].attrs {
            Attrs::Pairs(p) => p
                .iter()
                .find(|(k, _)| k == "range_id")
                .map(|(_, v)| v.clone()),
            _ => None,
        };
        assert_eq!(id.as_deref(), Some("99"));
    }

    #[test]
    fn unknown_range_end_and_map_cleanup() {
        let mut ctx = TypeCtx::new(1, vec![]);
        let mut t = MstxTyper::default();
        let mut out = Vec::new();
        t.type_record(
            &mut ctx,
            1,
            &Record::RangeStart {
                ts: 1,
                id: 5,
                stream: 0,
                msg: b("a"),
                null: false,
            },
            &mut out,
        );
        assert_eq!(t.open_ranges(), 1);
        t.type_record(&mut ctx, 1, &Record::RangeEnd { ts: 2, id: 5 }, &mut out);
        assert_eq!(t.open_ranges(), 0);
        t.type_record(&mut ctx, 1, &Record::RangeEnd { ts: 3, id: 5 }, &mut out);
        assert_eq!(out[1].name.as_deref(), Some("a"));
        assert_eq!(out[2].name.as_deref(), Some("Range end from id 5"));
    }

    #[test]
    fn null_and_formula_like_and_invalid_utf8_messages() {
        let mut ctx = TypeCtx::new(1, vec![]);
        let (ev, _) = run(
            &[
                (
                    1,
                    Record::Mark {
                        ts: 1,
                        stream: 0,
                        msg: b(""),
                        null: true,
                    },
                ),
                (
                    1,
                    Record::Mark {
                        ts: 2,
                        stream: 0,
                        msg: b("=SUM(A1)"),
                        null: false,
                    },
                ),
                (
                    1,
                    Record::Mark {
                        ts: 3,
                        stream: 0,
                        msg: b("+1"),
                        null: false,
                    },
                ),
                (
                    1,
                    Record::Mark {
                        ts: 4,
                        stream: 0,
                        msg: b("-x"),
                        null: false,
                    },
                ),
                (
                    1,
                    Record::Mark {
                        ts: 5,
                        stream: 0,
                        msg: b("@cmd"),
                        null: false,
                    },
                ),
                (
                    1,
                    Record::Mark {
                        ts: 6,
                        stream: 0,
                        msg: Box::new([b'a', 0xff, b'b']),
                        null: false,
                    },
                ),
                (
                    1,
                    Record::RangeStart {
                        ts: 7,
                        id: 3,
                        stream: 0,
                        msg: b("=r"),
                        null: false,
                    },
                ),
                (1, Record::RangeEnd { ts: 8, id: 3 }),
            ],
            &mut ctx,
        );
        let names: Vec<_> = ev.iter().map(|e| e.name.clone().unwrap()).collect();
        assert_eq!(
            names,
            [
                "",
                "'=SUM(A1)",
                "'+1",
                "'-x",
                "'@cmd",
                "a\u{fffd}b",
                "'=r",
                "'=r"
            ]
        );
    }

    #[test]
    fn device_comes_from_the_threads_current_device() {
        let mut ctx = TypeCtx::new(1, vec![4, 5]);
        ctx.set_current_device(7, 5);
        let (ev, _) = run(
            &[
                (
                    7,
                    Record::Mark {
                        ts: 1,
                        stream: 0,
                        msg: b("on dev"),
                        null: false,
                    },
                ),
                (
                    8,
                    Record::Mark {
                        ts: 2,
                        stream: 0,
                        msg: b("no dev"),
                        null: false,
                    },
                ),
            ],
            &mut ctx,
        );
        assert_eq!(ev[0].device, Device::Npu(5));
        assert_eq!(ev[1].device, Device::NotApplicable);
    }

    #[test]
    fn other_records_are_not_claimed() {
        let mut ctx = TypeCtx::new(1, vec![]);
        let (ev, claimed) = run(
            &[
                (1, Record::Thread { tid: 1 }),
                (
                    1,
                    Record::HeapRegister {
                        ts: 1,
                        pool: 4,
                        device: 0,
                        ptr: 1,
                        size: 2,
                    },
                ),
                (
                    1,
                    Record::RegionUnregister {
                        ts: 1,
                        pool: 1,
                        ptr: 1,
                    },
                ),
            ],
            &mut ctx,
        );
        assert!(ev.is_empty());
        assert_eq!(claimed, [false, false, false]);
    }

    #[test]
    fn descriptor_is_registered() {
        let m = &DESCRIPTOR;
        assert_eq!(m.source, crate::SOURCE);
        assert_eq!(m.events, EVENTS);
        assert!(m.config_keys.is_empty());
        let _ = (m.new_typer.unwrap())();
    }
}
