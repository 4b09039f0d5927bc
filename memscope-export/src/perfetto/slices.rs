//! Slice and instant tracks of a process: marks, operators per thread, kernels per device and
//! stream, msTX range lanes, and the operator → kernel flows.

use std::io::{self, Write};

use memscope_core::event::{Attrs, Device, Event};

use super::super::proto::event_type;
use super::super::{TrackKind, Writer};
use super::{
    device_name, pairs, Arg, Lane, ProcessTrace, SliceTrack, Stream, RANK_KERNELS, RANK_MARKS,
    RANK_OPS, RANK_RANGES,
};

impl ProcessTrace {
    pub(super) fn marks_track<W: Write>(&mut self, w: &mut Writer<W>) -> io::Result<u64> {
        if let Some(u) = self.marks {
            return Ok(u);
        }
        let u = self.child(w, "msTX marks", TrackKind::Plain, RANK_MARKS)?;
        self.marks = Some(u);
        Ok(u)
    }

    pub(super) fn instant<W: Write>(
        &mut self,
        w: &mut Writer<W>,
        ev: &Event,
        name: &str,
        args: &[(&str, Arg<'_>)],
    ) -> io::Result<()> {
        let t = self.marks_track(w)?;
        self.emit(w, ev.ts_ns, t, event_type::INSTANT, Some(name), None, args)
    }

    pub(super) fn op_track<W: Write>(
        &mut self,
        w: &mut Writer<W>,
        tid: Option<u32>,
    ) -> io::Result<u64> {
        if let Some(t) = self.ops.get(&tid) {
            return Ok(t.uuid);
        }
        let name = match tid {
            Some(t) => format!("ops (tid {t})"),
            None => "ops".to_owned(),
        };
        let uuid = self.child(w, &name, TrackKind::Plain, RANK_OPS)?;
        self.ops.insert(
            tid,
            SliceTrack {
                uuid,
                stack: Vec::new(),
            },
        );
        Ok(uuid)
    }

    pub(super) fn kernel_track<W: Write>(
        &mut self,
        w: &mut Writer<W>,
        d: Device,
    ) -> io::Result<u64> {
        if let Some(t) = self.kernels.get(&d) {
            return Ok(t.uuid);
        }
        let uuid = self.child(
            w,
            &format!("{} kernels", device_name(d)),
            TrackKind::Plain,
            RANK_KERNELS,
        )?;
        self.kernels.insert(
            d,
            SliceTrack {
                uuid,
                stack: Vec::new(),
            },
        );
        Ok(uuid)
    }

    /// Ends slices of `stack` down to the innermost one named `name` (an end without a
    /// matching begin is ignored).
    pub(super) fn end_named<W: Write>(
        &mut self,
        w: &mut Writer<W>,
        ts: u64,
        uuid: u64,
        mut stack: Vec<String>,
        name: &str,
    ) -> io::Result<Vec<String>> {
        if let Some(at) = stack.iter().rposition(|n| n == name) {
            while stack.len() > at {
                stack.pop();
                self.emit(w, ts, uuid, event_type::SLICE_END, None, None, &[])?;
            }
        }
        Ok(stack)
    }

    /// A flow for a kernel launched on `tid` inside an open operator: the `launch` instant on
    /// the operator's track; returns the flow id for the kernel's slice.
    pub(super) fn launch_flow<W: Write>(
        &mut self,
        w: &mut Writer<W>,
        ev: &Event,
        kernel: &str,
    ) -> io::Result<Option<u64>> {
        let Some(t) = self.ops.get(&ev.tid) else {
            return Ok(None);
        };
        if t.stack.is_empty() {
            return Ok(None);
        }
        let uuid = t.uuid;
        self.next_flow += 1;
        let flow = self.next_flow;
        let name = format!("launch {kernel}");
        self.emit(
            w,
            ev.ts_ns,
            uuid,
            event_type::INSTANT,
            Some(&name),
            Some(flow),
            &[],
        )?;
        Ok(Some(flow))
    }

    pub(super) fn kernel_launch<W: Write>(
        &mut self,
        w: &mut Writer<W>,
        ev: &Event,
        name: &str,
    ) -> io::Result<()> {
        let (stream, task) = match &ev.attrs {
            Attrs::Launch(l) => (l.stream_id, l.task_id),
            _ => (None, None),
        };
        let key = (ev.device, stream.unwrap_or(-1));
        let flow = self.launch_flow(w, ev, name)?;
        if !self.streams.contains_key(&key) {
            let tname = match stream {
                Some(s) => format!("{} stream {s}", device_name(ev.device)),
                None => format!("{} stream ?", device_name(ev.device)),
            };
            let uuid = self.child(w, &tname, TrackKind::Plain, RANK_KERNELS)?;
            self.streams.insert(key, Stream { uuid, open: false });
        }
        let s = self.streams.get_mut(&key).expect("inserted above");
        let (uuid, was_open) = (s.uuid, s.open);
        s.open = true;
        if was_open {
            self.emit(w, ev.ts_ns, uuid, event_type::SLICE_END, None, None, &[])?;
        }
        let mut args: Vec<(&str, Arg<'_>)> = Vec::new();
        if let Some(t) = task {
            args.push(("task_id", Arg::Int(t)));
        }
        self.emit(
            w,
            ev.ts_ns,
            uuid,
            event_type::SLICE_BEGIN,
            Some(name),
            flow,
            &args,
        )
    }

    pub(super) fn range_id(ev: &Event) -> Option<u64> {
        pairs(ev)
            .iter()
            .find(|(k, _)| k == "range_id")
            .and_then(|(_, v)| v.parse().ok())
    }

    pub(super) fn range_start<W: Write>(
        &mut self,
        w: &mut Writer<W>,
        ev: &Event,
        name: &str,
    ) -> io::Result<()> {
        let id = Self::range_id(ev).unwrap_or(u64::MAX);
        let lane = match self.lanes.iter().position(|l| l.open.is_none()) {
            Some(i) => i,
            None => {
                let n = self.lanes.len();
                let tname = if n == 0 {
                    "msTX ranges".to_owned()
                } else {
                    format!("msTX ranges {}", n + 1)
                };
                let uuid = self.child(w, &tname, TrackKind::Plain, RANK_RANGES)?;
                self.lanes.push(Lane { uuid, open: None });
                n
            }
        };
        self.lanes[lane].open = Some(id);
        let uuid = self.lanes[lane].uuid;
        self.emit(
            w,
            ev.ts_ns,
            uuid,
            event_type::SLICE_BEGIN,
            Some(name),
            None,
            &[],
        )
    }

    pub(super) fn range_end<W: Write>(&mut self, w: &mut Writer<W>, ev: &Event) -> io::Result<()> {
        let Some(id) = Self::range_id(ev) else {
            return Ok(());
        };
        if let Some(l) = self.lanes.iter_mut().find(|l| l.open == Some(id)) {
            l.open = None;
            let uuid = l.uuid;
            self.emit(w, ev.ts_ns, uuid, event_type::SLICE_END, None, None, &[])?;
        }
        Ok(())
    }
}
