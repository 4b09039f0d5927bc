//! What was live at chosen points of a process, grouped by allocation site: the input of
//! `memscope diff` (issue 24).
//!
//! * A [`Point`] is `peak` (each allocator's own peak, as [`super::peak`] finds it), `end`,
//!   `step:N` (when step N ends: its `step start` range ends, or the `step()` call that ends
//!   it), `mark:MSG[#K]` (right after the K-th msTX mark or range start whose message is MSG),
//!   `ts:NS` (after the last event stamped at or before NS, ns since the epoch) or `id:N`
//!   (after the event with ID N).
//! * Blocks follow [`super::peak`]: keyed by allocator and address, a `shadow:true` FREE does
//!   not end one, owners are [`owner_label`].
//! * A live set is summed per device, allocator (Event Type) and the key of [`By`].

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use memscope_core::bus::{BusCtx, BusError, Flow, Layer};
use memscope_core::event::{Device, Event, EventKind, EventType};

use super::decompose::owner_label;
use super::ops::{OpTracker, Under};
use super::peak::{Group, LiveSet, PeakLayer, PeakResult};
use super::steps::StepTracker;

/// The roles of an owner chain's role level (issue 25 adds them; `--by role` groups by the
/// first level of the chain that is one of these).
pub const ROLES: [&str; 5] = [
    "weight",
    "gradient",
    "optimizer_state",
    "activation",
    "temp",
];

/// A moment of a process at which live memory is taken.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Point {
    /// Each allocator at its own peak.
    Peak,
    /// After the last event.
    End,
    /// When step N ends.
    Step(u32),
    /// Right after the `nth` (from 1) msTX mark or range start named `name`.
    Mark {
        /// The message.
        name: String,
        /// Which occurrence, from 1.
        nth: u32,
    },
    /// After the last event stamped at or before this time (ns since the epoch).
    Ts(u64),
    /// After the event with this ID.
    Id(u64),
}

impl Point {
    /// Parses `peak`, `end`, `step:N`, `mark:MSG[#K]`, `ts:NS` or `id:N`.
    ///
    /// # Errors
    /// A one-line message naming the expected forms.
    pub fn parse(s: &str) -> Result<Point, String> {
        let bad = || {
            format!(
                "{s:?}: expected peak, end, step:N, mark:MESSAGE[#K], ts:NS (ns since the epoch) or id:N"
            )
        };
        let num = |v: &str| v.trim().parse::<u64>().map_err(|_| bad());
        match s.trim() {
            "peak" => return Ok(Point::Peak),
            "end" => return Ok(Point::End),
            _ => {}
        }
        let (kind, v) = s.split_once(':').ok_or_else(bad)?;
        match kind.trim() {
            "step" => {
                let n = num(v)?;
                u32::try_from(n)
                    .ok()
                    .filter(|n| *n >= 1)
                    .map(Point::Step)
                    .ok_or_else(bad)
            }
            "ts" => Ok(Point::Ts(num(v)?)),
            "id" => Ok(Point::Id(num(v)?)),
            "mark" => {
                let (name, nth) = match v.rsplit_once('#') {
                    Some((n, k)) if k.parse::<u32>().is_ok_and(|k| k >= 1) => {
                        (n, k.parse::<u32>().unwrap_or(1))
                    }
                    _ => (v, 1),
                };
                if name.is_empty() {
                    return Err(bad());
                }
                Ok(Point::Mark {
                    name: name.to_owned(),
                    nth,
                })
            }
            _ => Err(bad()),
        }
    }
}

impl std::fmt::Display for Point {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Point::Peak => f.write_str("peak"),
            Point::End => f.write_str("end"),
            Point::Step(n) => write!(f, "step:{n}"),
            Point::Mark { name, nth: 1 } => write!(f, "mark:{name}"),
            Point::Mark { name, nth } => write!(f, "mark:{name}#{nth}"),
            Point::Ts(t) => write!(f, "ts:{t}"),
            Point::Id(i) => write!(f, "id:{i}"),
        }
    }
}

/// What live blocks are grouped by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum By {
    /// Where the MALLOC row's Python stack says it was allocated: the first frame of the
    /// user's code and its caller (`file(line): function ← file(line): caller`,
    /// [`crate::attribution::Site::label`]).
    Python,
    /// The same for its C stack.
    C,
    /// The owner chain.
    Owner,
    /// The op or kernel the block was allocated under.
    Op,
    /// The owner chain's role level ([`ROLES`]).
    Role,
}

impl By {
    /// Every grouping, in `--by` order.
    pub const ALL: [By; 5] = [By::Owner, By::Python, By::C, By::Op, By::Role];

    /// `owner`, `python`, `c`, `op` or `role`.
    pub fn as_str(self) -> &'static str {
        match self {
            By::Python => "python",
            By::C => "c",
            By::Owner => "owner",
            By::Op => "op",
            By::Role => "role",
        }
    }

    /// Parses [`By::as_str`].
    pub fn parse(s: &str) -> Option<By> {
        By::ALL.into_iter().find(|b| b.as_str() == s.trim())
    }

    /// The group of a block with these texts (empty: not recorded).
    pub fn key(self, py: &str, c: &str, owner: &str, under: &str) -> String {
        let first = |s: &str| {
            s.lines()
                .map(str::trim)
                .find(|l| !l.is_empty() && *l != "NA")
                .map(str::to_owned)
        };
        // one "where" for every view: the first frame of the user's code and its caller
        let site = |py: Option<&str>, c: Option<&str>| {
            crate::attribution::site_of(py, c).map(|s| s.label())
        };
        match self {
            By::Python => first(py)
                .and_then(|_| site(Some(py), None))
                .unwrap_or_else(|| "(no Python stack)".to_owned()),
            By::C => first(c)
                .and_then(|_| site(None, Some(c)))
                .unwrap_or_else(|| "(no C stack)".to_owned()),
            By::Owner if owner.is_empty() => "(no owner)".to_owned(),
            By::Owner => owner.to_owned(),
            By::Op if under.is_empty() => "(no op)".to_owned(),
            By::Op => under.to_owned(),
            By::Role => role_of(owner).unwrap_or("(no role)").to_owned(),
        }
    }
}

/// The role level of an owner chain (`PTA@model@weight` → `weight`), if it has one.
pub fn role_of(owner: &str) -> Option<&str> {
    owner
        .split('@')
        .find_map(|l| ROLES.iter().find(|r| **r == l).copied())
}

/// Device, allocator and group key.
pub type GroupKey = (Device, EventType, String);

/// The live memory of one process at one point, grouped.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// Whether the point was reached (a step, mark, time or ID the process never got to is
    /// not).
    pub reached: bool,
    /// ID of the event after which it was taken (`peak`: none, each allocator has its own).
    pub at_id: Option<u64>,
    /// Timestamp of that event.
    pub at_ts_ns: Option<u64>,
    /// Bytes and blocks per group.
    pub groups: BTreeMap<GroupKey, Group>,
}

#[derive(Clone)]
struct Block {
    device: Device,
    size: u64,
    py: Arc<str>,
    c: Arc<str>,
    owner: Arc<str>,
    under: Arc<str>,
}

/// Takes the live memory of one process at [`Point`]s, as a bus layer (passes events on).
pub struct LivePointsLayer {
    points: Vec<Point>,
    by: By,
    peak: Option<PeakLayer>,
    ops: OpTracker,
    steps: StepTracker,
    marks: HashMap<String, u32>,
    texts: HashMap<Arc<str>, ()>,
    live: HashMap<(EventType, u64), Block>,
    snaps: Vec<Option<Snapshot>>,
    last: Option<(u64, u64)>,
}

impl LivePointsLayer {
    /// A layer taking `points`, grouped `by`.
    pub fn new(points: Vec<Point>, by: By) -> LivePointsLayer {
        let needs_peak = points.iter().any(|p| matches!(p, Point::Peak));
        LivePointsLayer {
            snaps: vec![None; points.len()],
            points,
            by,
            peak: needs_peak.then(PeakLayer::new),
            ops: OpTracker::default(),
            steps: StepTracker::default(),
            marks: HashMap::new(),
            texts: HashMap::new(),
            live: HashMap::new(),
            last: None,
        }
    }

    fn intern(&mut self, s: &str) -> Arc<str> {
        if let Some((k, ())) = self.texts.get_key_value(s) {
            return k.clone();
        }
        let a: Arc<str> = Arc::from(s);
        self.texts.insert(a.clone(), ());
        a
    }

    fn snapshot(&self) -> Snapshot {
        let mut groups: BTreeMap<GroupKey, Group> = BTreeMap::new();
        for ((pool, _), b) in &self.live {
            let key = self.by.key(&b.py, &b.c, &b.owner, &b.under);
            let g = groups.entry((b.device, *pool, key)).or_default();
            g.bytes += b.size;
            g.blocks += 1;
        }
        Snapshot {
            reached: true,
            at_id: self.last.map(|l| l.0),
            at_ts_ns: self.last.map(|l| l.1),
            groups,
        }
    }

    /// Takes the snapshots of the points `hit` says are reached now.
    fn take(&mut self, hit: impl Fn(&Point) -> bool) {
        for i in 0..self.points.len() {
            if self.snaps[i].is_none() && hit(&self.points[i]) {
                self.snaps[i] = Some(self.snapshot());
            }
        }
    }

    fn track(&mut self, ev: &Event) {
        self.ops.observe(ev);
        let Some(m) = ev.memory() else { return };
        let key = (ev.event_type, ev.ptr.unwrap_or(m.addr));
        match ev.kind {
            EventKind::Malloc if ev.device != Device::NotApplicable => {
                let under = match self.ops.label(ev) {
                    Under::Op(n) | Under::Kernel(_, Some(n)) => n.to_string(),
                    Under::Kernel(_, None) => "kernel".to_owned(),
                    Under::Nothing => String::new(),
                };
                let b = Block {
                    device: ev.device,
                    size: m.size,
                    py: self.intern(ev.py_stack.as_deref().unwrap_or("")),
                    c: self.intern(ev.c_stack.as_deref().unwrap_or("")),
                    owner: self.intern(&owner_label(ev)),
                    under: self.intern(&under),
                };
                self.live.insert(key, b);
            }
            EventKind::Free if !m.shadow => {
                self.live.remove(&key);
            }
            _ => {}
        }
    }

    fn observe(&mut self, ev: &Event, ctx: &BusCtx) {
        // a time point is the state before the first event stamped after it
        let ts = ev.ts_ns;
        if self.last.is_some() {
            self.take(|p| matches!(p, Point::Ts(t) if ts > *t));
        }
        self.track(ev);
        self.last = Some((ev.id, ev.ts_ns));
        let ended = self.steps.observe(ev, ctx);
        let mark = (ev.kind == EventKind::Mstx
            && matches!(ev.event_type, EventType::Mark | EventType::RangeStart))
        .then(|| ev.name.clone())
        .flatten()
        .map(|n| {
            let k = self.marks.entry(n.clone()).or_default();
            *k += 1;
            (n, *k)
        });
        let id = ev.id;
        self.take(|p| match p {
            Point::Step(s) => ended == Some(*s),
            Point::Mark { name, nth } => mark.as_ref().is_some_and(|(n, k)| n == name && k == nth),
            Point::Id(i) => id == *i,
            _ => false,
        });
    }

    /// The snapshots, in the order of the points (call once the events are through).
    pub fn result(&mut self) -> Vec<Snapshot> {
        let end = self.snapshot();
        let peak = self
            .peak
            .as_ref()
            .map(|p| regroup_peak(&p.result(), self.by));
        self.points
            .iter()
            .zip(&self.snaps)
            .map(|(p, s)| match p {
                Point::End => end.clone(),
                // a time after the last event is the end
                Point::Ts(t) if s.is_none() && self.last.is_some_and(|l| l.1 <= *t) => end.clone(),
                Point::Peak => peak.clone().unwrap_or_default(),
                _ => s.clone().unwrap_or_default(),
            })
            .collect()
    }
}

/// Each allocator's live set at its peak, grouped `by`.
fn regroup_peak(r: &PeakResult, by: By) -> Snapshot {
    let mut groups: BTreeMap<GroupKey, Group> = BTreeMap::new();
    for a in &r.allocators {
        for (key, g) in keyed(r, &a.peak, by) {
            let e = groups.entry((a.device, a.pool, key)).or_default();
            e.bytes += g.bytes;
            e.blocks += g.blocks;
        }
    }
    Snapshot {
        reached: true,
        at_id: None,
        at_ts_ns: None,
        groups,
    }
}

fn keyed(r: &PeakResult, set: &LiveSet, by: By) -> Vec<(String, Group)> {
    /// Which text a group's index names: Python stack, C stack, owner or op.
    type Texts = fn(&str) -> [&str; 4];
    let (list, text_of): (&[(u32, Group)], Texts) = match by {
        By::Python => (&set.by_py, |t| [t, "", "", ""]),
        By::C => (&set.by_c, |t| ["", t, "", ""]),
        By::Owner | By::Role => (&set.by_owner, |t| ["", "", t, ""]),
        By::Op => (&set.by_under, |t| ["", "", "", t]),
    };
    list.iter()
        .map(|(i, g)| {
            let [py, c, owner, under] = text_of(r.text(*i));
            (by.key(py, c, owner, under), *g)
        })
        .collect()
}

impl Layer for LivePointsLayer {
    fn name(&self) -> &'static str {
        "live-points"
    }

    fn on_event(
        &mut self,
        ev: &mut Event,
        ctx: &BusCtx,
        out: &mut Vec<Event>,
    ) -> Result<Flow, BusError> {
        self.observe(ev, ctx);
        match self.peak.as_mut() {
            Some(p) => p.on_event(ev, ctx, out),
            None => Ok(Flow::Pass),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memscope_core::event::{Attrs, MemoryAttrs};
    use memscope_core::owner::OwnerChain;

    fn mem(id: u64, kind: EventKind, addr: u64, size: u64, py: &str, owner: &str) -> Event {
        let mut e = Event::new(EventType::Pta, id * 10, 1, 1);
        e.id = id;
        e.kind = kind;
        e.device = Device::Npu(0);
        e.ptr = Some(addr);
        e.py_stack = (!py.is_empty()).then(|| py.to_owned());
        e.attrs = Attrs::Memory(MemoryAttrs {
            addr,
            size,
            owner: (!owner.is_empty()).then(|| OwnerChain::parse(owner)),
            ..MemoryAttrs::default()
        });
        e
    }

    fn mark(id: u64, name: &str) -> Event {
        let mut e = Event::new(EventType::Mark, id * 10, 1, 1);
        e.id = id;
        e.name = Some(name.to_owned());
        e
    }

    fn run(points: &[&str], by: By, evs: Vec<Event>) -> Vec<Snapshot> {
        let pts = points.iter().map(|p| Point::parse(p).unwrap()).collect();
        let mut l = LivePointsLayer::new(pts, by);
        let mut ctx = BusCtx::default();
        let mut out = Vec::new();
        for e in evs {
            ctx.steps.observe(&e);
            l.feed(e, &ctx, &mut out).unwrap();
        }
        l.result()
    }

    fn bytes(s: &Snapshot, key: &str) -> (u64, u64) {
        s.groups
            .iter()
            .filter(|(k, _)| k.2 == key)
            .fold((0, 0), |a, (_, g)| (a.0 + g.bytes, a.1 + g.blocks))
    }

    #[test]
    fn points_parse_and_print_back() {
        for s in [
            "peak", "end", "step:3", "mark:a b", "mark:x#2", "ts:17", "id:9",
        ] {
            assert_eq!(Point::parse(s).unwrap().to_string(), s);
        }
        assert_eq!(
            Point::parse("mark:a#b").unwrap(),
            Point::Mark {
                name: "a#b".into(),
                nth: 1
            }
        );
        for bad in ["", "step:0", "step:x", "later", "mark:", "ts:-1"] {
            assert!(Point::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn live_memory_is_taken_at_marks_times_ids_and_the_end_grouped_by_frame() {
        let evs = vec![
            mem(
                1,
                EventKind::Malloc,
                0x10,
                100,
                "a.py(1): f\nmain.py(9): main",
                "",
            ),
            mark(2, "one"),
            mem(3, EventKind::Malloc, 0x20, 50, "a.py(2): g", ""),
            mem(4, EventKind::Malloc, 0x30, 70, "a.py(2): g", ""),
            mem(5, EventKind::Free, 0x10, 100, "", ""),
            mark(6, "one"),
        ];
        let s = run(
            &[
                "mark:one",
                "mark:one#2",
                "ts:35",
                "id:3",
                "end",
                "mark:none",
            ],
            By::Python,
            evs,
        );
        // where: the frame and its caller
        assert_eq!(bytes(&s[0], "a.py(1): f ← main.py(9): main"), (100, 1));
        assert_eq!(bytes(&s[0], "a.py(2): g"), (0, 0));
        assert_eq!(bytes(&s[1], "a.py(2): g"), (120, 2));
        assert_eq!(bytes(&s[1], "a.py(1): f ← main.py(9): main"), (0, 0));
        // ts:35 is after ID 3 (ts 30) and before ID 4 (ts 40)
        assert_eq!(bytes(&s[2], "a.py(2): g"), (50, 1));
        assert_eq!(s[2].at_id, Some(3));
        assert_eq!(bytes(&s[3], "a.py(2): g"), (50, 1));
        assert_eq!(bytes(&s[4], "a.py(2): g"), (120, 2));
        assert!(!s[5].reached);
    }

    #[test]
    fn the_peak_is_each_allocators_own_and_roles_come_from_the_owner_chain() {
        let evs = vec![
            mem(1, EventKind::Malloc, 0x10, 100, "", "PTA@model@weight"),
            mem(2, EventKind::Malloc, 0x20, 60, "", "PTA@model@activation"),
            mem(3, EventKind::Free, 0x20, 60, "", ""),
            mem(4, EventKind::Malloc, 0x30, 10, "", "PTA"),
        ];
        let s = run(&["peak", "end"], By::Role, evs);
        assert_eq!(bytes(&s[0], "weight"), (100, 1));
        assert_eq!(bytes(&s[0], "activation"), (60, 1));
        assert_eq!(bytes(&s[0], "(no role)"), (0, 0));
        assert_eq!(bytes(&s[1], "(no role)"), (10, 1));
        assert_eq!(role_of("PTA@gradient@ops"), Some("gradient"));
        assert_eq!(By::Python.key("", "", "", ""), "(no Python stack)");
        assert_eq!(
            By::C.key("", "f at x.c:3\nmain at x.c:9", "", ""),
            "f at x.c:3 ← main at x.c:9"
        );
    }
}
