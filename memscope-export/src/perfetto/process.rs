//! One process's events turned into Perfetto packets (tracks and rules: see the parent module).

use std::collections::HashMap;
use std::io::{self, Write};

use memscope_core::event::{Attrs, Device, Event, EventKind, EventType};
use memscope_core::roles::{role_index, role_of, role_of_chain, OwnerTag, ROLES};
use memscope_core::sample::SamplePoint;

use super::proto::{
    event_type, field, Msg, SEQ_INCREMENTAL_STATE_CLEARED, SEQ_NEEDS_INCREMENTAL_STATE,
};
use super::{TrackKind, Writer};
use crate::input::ProcessInput;

#[path = "slices.rs"]
mod slices;

/// Distinct slice names interned per process; later new names are written inline.
const MAX_INTERNED: usize = 1 << 20;

/// Sibling order of the process's tracks: counters, marks, ranges, ops, kernels.
const RANK_MARKS: i64 = 1_000_000;
const RANK_RANGES: i64 = 1_100_000;
const RANK_OPS: i64 = 2_000_000;
const RANK_KERNELS: i64 = 3_000_000;

/// An argument of an event.
enum Arg<'a> {
    Int(i64),
    Str(&'a str),
}

struct Counter {
    uuid: u64,
    last: Option<i64>,
}

/// Index of `temp`, which gets no counter (it is what the pool's other bytes are).
const TEMP: usize = ROLES.len() - 1;

/// Role counters of a process.
#[derive(Default)]
struct RoleCounters {
    block: HashMap<(EventType, u64), usize>,
    levels: HashMap<(Device, EventType), [i64; ROLES.len()]>,
    counters: HashMap<((Device, EventType), usize), u64>,
}

/// Bytes of one pool on one device: from `used` when its first row has it, else counted.
struct Pool {
    from_used: bool,
    live: i64,
}

struct SliceTrack {
    uuid: u64,
    stack: Vec<String>,
}

struct Stream {
    uuid: u64,
    open: bool,
}

struct Lane {
    uuid: u64,
    open: Option<u64>,
}

/// The state of one process's sequence.
pub struct ProcessTrace {
    seq: u32,
    uuid: u64,
    last_ts: u64,
    names: HashMap<String, u64>,
    counters: HashMap<(Device, EventType, bool), Counter>,
    pools: HashMap<(Device, EventType), Pool>,
    live: HashMap<(EventType, u64), (Device, u64)>,
    /// Bytes by role per pool (issue 25): counters `<device> <pool> <role>` for every role but
    /// `temp`, from each block's owner chain (a `MEMORY_OWNER` row moves a block from then on).
    roles: RoleCounters,
    /// Counter tracks of the memory samples per device (issue 25): `host RSS (sampled)`,
    /// `host untracked`, `NPU0 used (sampled)`, `NPU0 untracked`.
    sampled: HashMap<Device, [u64; 2]>,
    ops: HashMap<Option<u32>, SliceTrack>,
    kernels: HashMap<Device, SliceTrack>,
    streams: HashMap<(Device, i64), Stream>,
    lanes: Vec<Lane>,
    marks: Option<u64>,
    /// Account-only blocks by Python line (`super::lines`).
    lines: Option<super::lines::ByLine>,
    next_flow: u64,
    tracks: i64,
    pkt: Msg,
}

fn device_name(d: Device) -> String {
    match d {
        Device::Npu(n) => format!("NPU{n}"),
        Device::Cpu => "host".to_owned(),
        Device::NotApplicable => "N/A".to_owned(),
    }
}

fn pairs(ev: &Event) -> &[(String, String)] {
    match &ev.attrs {
        Attrs::Pairs(p) => p,
        _ => &[],
    }
}

impl ProcessTrace {
    /// Declares the process track (first packet of its sequence).
    ///
    /// # Errors
    /// The sink's error (here and in every method that writes).
    pub fn begin<W: Write>(w: &mut Writer<W>, p: &ProcessInput) -> io::Result<ProcessTrace> {
        let seq = p.synthetic_pid;
        let mut name = p.label();
        if !p.node.is_empty() {
            name.push_str(&format!(" ({})", p.node));
        }
        let mut labels = vec![
            format!("pid={}", p.pid.map_or("N/A".to_owned(), |x| x.to_string())),
            format!("rank={} ({})", p.rank.as_i64(), p.rank.source.as_str()),
        ];
        if !p.node.is_empty() {
            labels.push(format!("node={}", p.node));
        }
        labels.push(format!("source={}", p.origin()));
        let uuid = w.track(
            seq,
            SEQ_INCREMENTAL_STATE_CLEARED,
            None,
            "",
            TrackKind::Process(seq, &name, &labels),
            i64::from(seq),
        )?;
        Ok(ProcessTrace {
            seq,
            uuid,
            last_ts: 0,
            names: HashMap::new(),
            counters: HashMap::new(),
            roles: RoleCounters::default(),
            sampled: HashMap::new(),
            pools: HashMap::new(),
            live: HashMap::new(),
            ops: HashMap::new(),
            kernels: HashMap::new(),
            streams: HashMap::new(),
            lanes: Vec::new(),
            marks: None,
            lines: None,
            next_flow: u64::from(seq) << 40,
            tracks: 0,
            pkt: Msg::default(),
        })
    }

    fn child<W: Write>(
        &mut self,
        w: &mut Writer<W>,
        name: &str,
        kind: TrackKind<'_>,
        base: i64,
    ) -> io::Result<u64> {
        self.tracks += 1;
        w.track(self.seq, 0, Some(self.uuid), name, kind, base + self.tracks)
    }

    /// Writes one TrackEvent packet at `ts` (clamped so time never goes back in the sequence).
    #[allow(clippy::too_many_arguments)]
    fn emit<W: Write>(
        &mut self,
        w: &mut Writer<W>,
        ts: u64,
        track: u64,
        ty: u64,
        name: Option<&str>,
        flow: Option<u64>,
        args: &[(&str, Arg<'_>)],
    ) -> io::Result<()> {
        let ts = ts.max(self.last_ts);
        self.last_ts = ts;
        let mut interned: Option<u64> = None;
        let mut iid = None;
        if let Some(n) = name {
            match self.names.get(n) {
                Some(i) => iid = Some(*i),
                None if self.names.len() < MAX_INTERNED => {
                    let i = self.names.len() as u64 + 1;
                    self.names.insert(n.to_owned(), i);
                    iid = Some(i);
                    interned = Some(i);
                }
                None => {}
            }
        }
        let mut p = std::mem::take(&mut self.pkt);
        p.clear();
        p.uint(field::TIMESTAMP, ts);
        p.uint(field::SEQUENCE_ID, u64::from(self.seq));
        if iid.is_some() {
            p.uint(field::SEQUENCE_FLAGS, SEQ_NEEDS_INCREMENTAL_STATE);
        }
        p.nested(field::TRACK_EVENT, |te| {
            te.uint(field::TYPE, ty);
            te.uint(field::TRACK_UUID, track);
            match (iid, name) {
                (Some(i), _) => {
                    te.uint(field::NAME_IID, i);
                }
                (None, Some(n)) => {
                    te.string(field::NAME, n);
                }
                (None, None) => {}
            }
            if let Some(f) = flow {
                te.fixed64(field::FLOW_IDS, f);
            }
            for (k, v) in args {
                te.nested(field::DEBUG_ANNOTATIONS, |a| {
                    a.string(field::DA_NAME, k);
                    match v {
                        Arg::Int(i) => a.int(field::DA_INT, *i),
                        Arg::Str(s) => a.string(field::DA_STRING, s),
                    };
                });
            }
        });
        if let (Some(i), Some(n)) = (interned, name) {
            p.nested(field::INTERNED_DATA, |d| {
                d.nested(field::EVENT_NAMES, |e| {
                    e.uint(field::IID, i);
                    e.string(field::EN_NAME, n);
                });
            });
        }
        let r = w.packet(&p);
        self.pkt = p;
        r
    }

    fn counter<W: Write>(
        &mut self,
        w: &mut Writer<W>,
        ts: u64,
        key: (Device, EventType, bool),
        value: i64,
    ) -> io::Result<()> {
        if !self.counters.contains_key(&key) {
            let name = format!(
                "{} {} {}",
                device_name(key.0),
                key.1.as_str(),
                if key.2 { "reserved" } else { "allocated" }
            );
            let uuid = self.child(w, &name, TrackKind::Bytes, 0)?;
            self.counters.insert(key, Counter { uuid, last: None });
        }
        let c = self.counters.get_mut(&key).expect("inserted above");
        if c.last == Some(value) {
            return Ok(());
        }
        c.last = Some(value);
        let uuid = c.uuid;
        self.counter_value(w, ts, uuid, value)
    }

    /// A counter track in bytes named `name` (the line tracks of `super::lines`).
    pub(super) fn line_track<W: Write>(
        &mut self,
        w: &mut Writer<W>,
        name: &str,
    ) -> io::Result<u64> {
        self.child(w, name, TrackKind::Bytes, 0)
    }

    /// One value of a line track.
    pub(super) fn line_value<W: Write>(
        &mut self,
        w: &mut Writer<W>,
        ts: u64,
        uuid: u64,
        value: i64,
    ) -> io::Result<()> {
        self.counter_value(w, ts, uuid, value)
    }

    /// One value of counter track `uuid`.
    fn counter_value<W: Write>(
        &mut self,
        w: &mut Writer<W>,
        ts: u64,
        uuid: u64,
        value: i64,
    ) -> io::Result<()> {
        let ts = ts.max(self.last_ts);
        self.last_ts = ts;
        let mut p = std::mem::take(&mut self.pkt);
        p.clear();
        p.uint(field::TIMESTAMP, ts);
        p.uint(field::SEQUENCE_ID, u64::from(self.seq));
        p.nested(field::TRACK_EVENT, |te| {
            te.uint(field::TYPE, event_type::COUNTER);
            te.uint(field::TRACK_UUID, uuid);
            te.int(field::COUNTER_VALUE, value);
        });
        let r = w.packet(&p);
        self.pkt = p;
        r
    }

    /// Moves `size` bytes of `(device, pool)` between roles and writes the counters that
    /// changed.
    fn role_change<W: Write>(
        &mut self,
        w: &mut Writer<W>,
        ts: u64,
        key: (Device, EventType),
        moves: [(usize, i64); 2],
    ) -> io::Result<()> {
        for (role, delta) in moves {
            if delta == 0 || role == TEMP {
                continue;
            }
            let v = {
                let l = self.roles.levels.entry(key).or_insert([0; ROLES.len()]);
                l[role] += delta;
                l[role]
            };
            let c = match self.roles.counters.get(&(key, role)) {
                Some(c) => *c,
                None => {
                    let name = format!("{} {} {}", device_name(key.0), key.1.as_str(), ROLES[role]);
                    let uuid = self.child(w, &name, TrackKind::Bytes, 0)?;
                    self.roles.counters.insert((key, role), uuid);
                    uuid
                }
            };
            self.counter_value(w, ts, c, v)?;
        }
        Ok(())
    }

    /// Live blocks by (pool, address) → (device, size): a FREE row without a device
    /// (msMemScope's 2025 dumps) counts on its block's device; a pool whose rows have no
    /// `used` is counted from them.
    fn memory<W: Write>(&mut self, w: &mut Writer<W>, ev: &Event) -> io::Result<()> {
        let Some(m) = ev.memory() else {
            return Ok(());
        };
        let addr = ev.ptr.unwrap_or(m.addr);
        let k = (ev.event_type, addr);
        let role = m
            .owner
            .as_ref()
            .map_or(TEMP, |o| role_index(role_of_chain(o)));
        let (device, change) = match ev.kind {
            EventKind::Malloc => {
                let old = self.live.insert(k, (ev.device, m.size));
                let gone = self.roles.block.insert(k, role).zip(old);
                let key = (ev.device, ev.event_type);
                let gone = gone.map_or((TEMP, 0), |(r, (_, s))| (r, -(s as i64)));
                self.role_change(w, ev.ts_ns, key, [gone, (role, m.size as i64)])?;
                (ev.device, Some((old, m.size as i64)))
            }
            _ if m.shadow => (ev.device, None),
            _ => match self.live.remove(&k) {
                Some((d, size)) => {
                    let d = if ev.device == Device::NotApplicable {
                        d
                    } else {
                        ev.device
                    };
                    let r = self.roles.block.remove(&k).unwrap_or(TEMP);
                    self.role_change(
                        w,
                        ev.ts_ns,
                        (d, ev.event_type),
                        [(r, -(size as i64)), (TEMP, 0)],
                    )?;
                    (d, Some((None, -(size as i64))))
                }
                None => (ev.device, None),
            },
        };
        if device == Device::NotApplicable {
            return Ok(()); // a FREE of a block never seen, without a device: nowhere to count
        }
        let pool = self.pools.entry((device, ev.event_type)).or_insert(Pool {
            from_used: m.used.is_some(),
            live: 0,
        });
        if let Some((old, delta)) = change {
            if let Some((_, s)) = old {
                pool.live -= s as i64;
            }
            pool.live += delta;
        }
        let allocated = if pool.from_used {
            m.used
        } else {
            Some(pool.live)
        };
        if let Some(a) = allocated {
            self.counter(w, ev.ts_ns, (device, ev.event_type, false), a)?;
        }
        if let Some(t) = m.total {
            self.counter(w, ev.ts_ns, (device, ev.event_type, true), t)?;
        }
        Ok(())
    }

    /// A memory sample (`--sample`): the sampled bytes (host RSS, device used) and the
    /// untracked bytes (sampled − the hooks' live blocks) as two counters per device.
    fn sample<W: Write>(&mut self, w: &mut Writer<W>, ev: &Event) -> io::Result<()> {
        let Some(p) = SamplePoint::of(ev) else {
            return Ok(());
        };
        let tracks = match self.sampled.get(&p.device) {
            Some(t) => *t,
            None => {
                let dev = device_name(p.device);
                let what = if p.is_host() { "RSS" } else { "used" };
                let sampled = format!("{dev} {what} (sampled)");
                let sampled = self.child(w, &sampled, TrackKind::Bytes, 0)?;
                let untracked = format!("{dev} untracked");
                let untracked = self.child(w, &untracked, TrackKind::Bytes, 0)?;
                *self.sampled.entry(p.device).or_insert([sampled, untracked])
            }
        };
        self.counter_value(w, ev.ts_ns, tracks[0], p.sampled)?;
        self.counter_value(w, ev.ts_ns, tracks[1], p.untracked)
    }

    /// Handles one event.
    pub fn on_event<W: Write>(&mut self, w: &mut Writer<W>, ev: &Event) -> io::Result<()> {
        let name = ev.name.as_deref().unwrap_or(ev.event_type.as_str());
        match (ev.kind, ev.event_type) {
            (EventKind::Malloc | EventKind::Free, _) => {
                self.memory(w, ev)?;
                let mut lines = self.lines.take().unwrap_or_default();
                let r = lines.on_event(self, w, ev);
                self.lines = Some(lines);
                r?
            }
            (EventKind::Sample, _) => self.sample(w, ev)?,
            (EventKind::System, EventType::MemoryOwner) => {
                if let Some(t) = OwnerTag::from_event(ev) {
                    let k = (t.pool, t.addr);
                    if let (Some(&(d, size)), Some(old)) =
                        (self.live.get(&k), self.roles.block.get(&k))
                    {
                        let (old, new) = (*old, role_index(role_of(&t.owner)));
                        self.roles.block.insert(k, new);
                        let s = size as i64;
                        self.role_change(w, ev.ts_ns, (d, t.pool), [(old, -s), (new, s)])?;
                    }
                }
            }
            (EventKind::OpLaunch, EventType::AtenStart | EventType::AtbStart) => {
                let t = self.op_track(w, ev.tid)?;
                let path = match &ev.attrs {
                    Attrs::Launch(l) => l.path.clone(),
                    _ => None,
                };
                let args: Vec<(&str, Arg<'_>)> =
                    path.iter().map(|p| ("path", Arg::Str(p))).collect();
                self.emit(
                    w,
                    ev.ts_ns,
                    t,
                    event_type::SLICE_BEGIN,
                    Some(name),
                    None,
                    &args,
                )?;
                if let Some(st) = self.ops.get_mut(&ev.tid) {
                    st.stack.push(name.to_owned());
                }
            }
            (EventKind::OpLaunch, EventType::AtenEnd | EventType::AtbEnd) => {
                if let Some(st) = self.ops.get_mut(&ev.tid) {
                    let (uuid, stack) = (st.uuid, std::mem::take(&mut st.stack));
                    let stack = self.end_named(w, ev.ts_ns, uuid, stack, name)?;
                    if let Some(st) = self.ops.get_mut(&ev.tid) {
                        st.stack = stack;
                    }
                }
            }
            (EventKind::KernelLaunch, EventType::KernelLaunch) => {
                self.kernel_launch(w, ev, name)?
            }
            (EventKind::KernelLaunch, EventType::KernelStart | EventType::KernelExecuteStart) => {
                let flow = self.launch_flow(w, ev, name)?;
                let t = self.kernel_track(w, ev.device)?;
                self.emit(
                    w,
                    ev.ts_ns,
                    t,
                    event_type::SLICE_BEGIN,
                    Some(name),
                    flow,
                    &[],
                )?;
                if let Some(k) = self.kernels.get_mut(&ev.device) {
                    k.stack.push(name.to_owned());
                }
            }
            (EventKind::KernelLaunch, EventType::KernelEnd | EventType::KernelExecuteEnd) => {
                if let Some(k) = self.kernels.get_mut(&ev.device) {
                    let (uuid, stack) = (k.uuid, std::mem::take(&mut k.stack));
                    let stack = self.end_named(w, ev.ts_ns, uuid, stack, name)?;
                    if let Some(k) = self.kernels.get_mut(&ev.device) {
                        k.stack = stack;
                    }
                }
            }
            (EventKind::Mstx, EventType::RangeStart) => self.range_start(w, ev, name)?,
            (EventKind::Mstx, EventType::RangeEnd) => self.range_end(w, ev)?,
            (EventKind::Mstx, _) => {
                let dev = device_name(ev.device);
                self.instant(w, ev, name, &[("device", Arg::Str(&dev))])?;
            }
            (EventKind::Snapshot, _) => {
                let dev = device_name(ev.device);
                let title = if ev.name.as_deref() == Some("OOM_Snapshot") {
                    format!("OOM on {dev}")
                } else {
                    format!("snapshot {name}")
                };
                let mut args: Vec<(&str, Arg<'_>)> = Vec::new();
                for (k, v) in pairs(ev) {
                    args.push((k, v.parse::<i64>().map_or(Arg::Str(v), Arg::Int)));
                }
                self.instant(w, ev, &title, &args)?;
            }
            (EventKind::System, t) => self.instant(w, ev, t.as_str(), &[])?,
            _ => {}
        }
        Ok(())
    }

    /// Ends every open slice at the process's last timestamp.
    pub fn end<W: Write>(mut self, w: &mut Writer<W>) -> io::Result<()> {
        let ts = self.last_ts;
        let mut ends: Vec<(u64, usize)> = Vec::new();
        ends.extend(self.ops.values().map(|t| (t.uuid, t.stack.len())));
        ends.extend(self.kernels.values().map(|t| (t.uuid, t.stack.len())));
        ends.extend(self.streams.values().map(|s| (s.uuid, usize::from(s.open))));
        ends.extend(
            self.lanes
                .iter()
                .map(|l| (l.uuid, usize::from(l.open.is_some()))),
        );
        ends.sort_unstable();
        for (uuid, n) in ends {
            for _ in 0..n {
                self.emit(w, ts, uuid, event_type::SLICE_END, None, None, &[])?;
            }
        }
        Ok(())
    }
}
