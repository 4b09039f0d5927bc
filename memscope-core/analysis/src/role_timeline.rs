//! Bytes by role over time (issue 25), kept beside the decompose analysis
//! (the decompose layer feeds it): per device and allocator, each role's bytes
//! over time, per step at the step's highest and lowest moment and at its end, and the
//! activations at their own peak by module.
//!
//! A role given after a block's MALLOC (`MEMORY_OWNER`, [`memscope_core::roles`]) holds for the
//! block's whole life, so every figure here is corrected when the tag arrives, at O(1) (series)
//! or O(steps since the MALLOC) (steps) cost:
//!
//! * **Series.** Time is cut into at most [`MAX_BUCKETS`] buckets (their width doubles as the
//!   run grows); a bucket keeps each role's net change and its highest excursion above the
//!   bucket's start. A role's level at any time is the sum of the changes before it, so moving a
//!   block from one role to another is moving its `+size` in the bucket of its MALLOC. In
//!   that one bucket the highest excursions are corrected as if the block was live at each
//!   role's highest moment (bucket resolution); every other figure is exact.
//! * **Steps.** Each step keeps, per allocator, the role split when the allocator's live bytes
//!   were highest and lowest in the step and at its end, with the event sequence number of each
//!   moment: a tag shifts the moments at or after the block's MALLOC.
//! * **Activations at their peak.** The moment the `activation` bytes were highest is found as
//!   the run goes; which blocks were live then is rebuilt at the end (like the peak of
//!   [`super::peak`]), with their final roles.

use std::collections::{BTreeMap, HashMap};

use memscope_core::bus::BusCtx;
use memscope_core::event::{Device, EventType};
use memscope_core::roles::{role_and_detail, role_index, ROLES};

/// Number of roles.
pub const N: usize = ROLES.len();
/// Most time buckets per allocator.
pub const MAX_BUCKETS: usize = 4096;
/// Most step records kept (beyond it every other one is dropped, evenly).
pub const MAX_STEPS: usize = 4096;
/// Width of a time bucket when a run starts, ns (doubles as needed).
const FIRST_WIDTH_NS: u64 = 1_000_000;
const ACTIVATION: usize = 3;

/// Role bytes.
pub type Levels = [i64; N];
/// The activations of one allocator at their peak: device, allocator, (module path, bytes).
pub type Activations = (Device, EventType, Vec<(String, u64)>);
/// Device and allocator.
pub type Key = (Device, EventType);

/// One moment of a step: the allocator's live bytes, the role split and when.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Moment {
    /// Live bytes of the allocator.
    pub total: i64,
    /// Bytes per role (index into [`ROLES`]).
    pub levels: Levels,
    /// Time, ns since the epoch.
    pub ts: u64,
    seq: u64,
}

/// One allocator in one step.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StepAlloc {
    /// When the allocator's live bytes were highest in the step (the first such moment).
    pub high: Moment,
    /// When they were lowest.
    pub low: Moment,
    /// At the end of the step (or of the run, for a step still open).
    pub end: Moment,
}

/// One step.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StepRoles {
    /// Number, from 1.
    pub step: u32,
    /// Allocators touched in the step or live in it.
    pub allocs: BTreeMap<Key, StepAlloc>,
    end_seq: u64,
}

#[derive(Clone, Debug, Default)]
struct Buckets {
    t0: u64,
    width: u64,
    last_ts: u64,
    deltas: Vec<Levels>,
    exc: Vec<Levels>,
    start: Levels,
}

impl Buckets {
    fn index(&self, ts: u64) -> usize {
        (ts.saturating_sub(self.t0) / self.width) as usize
    }

    fn merge(&mut self) {
        let cur = self.deltas.len() - 1;
        if cur % 2 == 1 {
            for (s, d) in self.start.iter_mut().zip(self.deltas[cur - 1]) {
                *s -= d;
            }
        }
        let mut deltas = Vec::with_capacity(self.deltas.len() / 2 + 1);
        let mut exc = Vec::with_capacity(deltas.capacity());
        for (d, e) in self.deltas.chunks(2).zip(self.exc.chunks(2)) {
            let mut nd = d[0];
            let mut ne = e[0];
            if let (Some(d1), Some(e1)) = (d.get(1), e.get(1)) {
                for r in 0..N {
                    ne[r] = ne[r].max(d[0][r] + e1[r]);
                    nd[r] += d1[r];
                }
            }
            deltas.push(nd);
            exc.push(ne);
        }
        self.deltas = deltas;
        self.exc = exc;
        self.width *= 2;
    }

    /// Moves to the bucket of `ts` (levels carried into the buckets passed over).
    fn advance(&mut self, ts: u64, levels: &Levels) {
        if self.deltas.is_empty() {
            self.t0 = ts;
            self.width = FIRST_WIDTH_NS;
            self.deltas.push([0; N]);
            self.exc.push([0; N]);
            self.start = *levels;
        }
        self.last_ts = self.last_ts.max(ts);
        let mut b = self.index(self.last_ts);
        while b >= MAX_BUCKETS {
            self.merge();
            b = self.index(self.last_ts);
        }
        while self.deltas.len() <= b {
            self.deltas.push([0; N]);
            self.exc.push([0; N]);
            self.start = *levels;
        }
    }

    fn change(&mut self, levels: &Levels, role: usize, delta: i64) {
        let cur = self.deltas.len() - 1;
        self.deltas[cur][role] += delta;
        let e = &mut self.exc[cur][role];
        *e = (*e).max(levels[role] - self.start[role]);
    }

    /// A block of `size` allocated at `ts` moves from role `old` to `new`.
    fn retag(&mut self, ts: u64, old: usize, new: usize, size: i64) {
        let cur = self.deltas.len() - 1;
        let b = self.index(ts.max(self.t0)).min(cur);
        self.deltas[b][old] -= size;
        self.deltas[b][new] += size;
        if b < cur {
            self.start[old] -= size;
            self.start[new] += size;
        }
        // the bucket of the MALLOC: taken as if the block was live at each role's highest
        // moment in it (it is, from its MALLOC on)
        let e = &mut self.exc[b];
        e[old] = (e[old] - size).max(self.deltas[b][old]).max(0);
        e[new] = (e[new] + size).max(self.deltas[b][new]);
    }
}

#[derive(Clone, Debug, Default)]
struct Alloc {
    levels: Levels,
    total: i64,
    buckets: Buckets,
    act_peak: i64,
    act_peak_seq: u64,
    act_freed: Vec<(u32, u64)>,
}

/// See the module docs.
#[derive(Clone, Debug, Default)]
pub struct RoleTimeline {
    allocs: BTreeMap<Key, Alloc>,
    /// Role of each owner id (filled as owners appear).
    role_of: Vec<u8>,
    steps: Vec<StepRoles>,
    open: Option<u32>,
    stride: u64,
    seen_steps: u64,
    seq: u64,
    tagged: bool,
}

/// A role's bytes over time on one allocator: the highest value in each time bucket (at the
/// bucket's start time), then the value at the end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoleSeries {
    /// Device.
    pub device: Device,
    /// Allocator.
    pub pool: EventType,
    /// Role.
    pub role: &'static str,
    /// Times, ns since the epoch.
    pub t: Vec<u64>,
    /// Bytes.
    pub v: Vec<i64>,
}

impl RoleTimeline {
    fn role(&mut self, owners: &[String], owner: u32) -> usize {
        while self.role_of.len() < owners.len() {
            let i = self.role_of.len();
            self.role_of
                .push(role_index(role_and_detail(&owners[i]).0) as u8);
        }
        self.role_of[owner as usize] as usize
    }

    /// Called before each event: opens and closes steps as the bus's step state says.
    /// `seq` numbers the events (the decompose layer's count, shared with its blocks).
    pub fn step(&mut self, ctx: &BusCtx, seq: u64, ts: u64) {
        self.seq = seq;
        let now = ctx.steps.current;
        if now == self.open {
            return;
        }
        self.close(ts);
        if let Some(n) = now {
            self.open = Some(n);
            self.seen_steps += 1;
            let stride = self.stride.max(1);
            if !(self.seen_steps - 1).is_multiple_of(stride) {
                return;
            }
            let m = |a: &Alloc| Moment {
                total: a.total,
                levels: a.levels,
                ts,
                seq: self.seq,
            };
            let allocs = self
                .allocs
                .iter()
                .map(|(k, a)| {
                    (
                        *k,
                        StepAlloc {
                            high: m(a),
                            low: m(a),
                            end: m(a),
                        },
                    )
                })
                .collect();
            self.steps.push(StepRoles {
                step: n,
                allocs,
                end_seq: u64::MAX,
            });
            if self.steps.len() > MAX_STEPS {
                let mut i = 0;
                self.steps.retain(|_| {
                    i += 1;
                    i % 2 == 1
                });
                self.stride = stride * 2;
            }
        }
    }

    fn close(&mut self, ts: u64) {
        if self.open.take().is_none() {
            return;
        }
        if let Some(s) = self.steps.last_mut().filter(|s| s.end_seq == u64::MAX) {
            s.end_seq = self.seq;
            for (k, sa) in s.allocs.iter_mut() {
                if let Some(a) = self.allocs.get(k) {
                    sa.end = Moment {
                        total: a.total,
                        levels: a.levels,
                        ts,
                        seq: self.seq,
                    };
                }
            }
        }
    }

    fn apply(&mut self, key: Key, role: usize, delta: i64, ts: u64) {
        let seq = self.seq;
        let a = self.allocs.entry(key).or_default();
        a.buckets.advance(ts, &a.levels);
        a.levels[role] += delta;
        a.total += delta;
        a.buckets.change(&a.levels, role, delta);
        if role == ACTIVATION && a.levels[role] > a.act_peak {
            a.act_peak = a.levels[role];
            a.act_peak_seq = seq;
            a.act_freed.clear();
        }
        let (levels, total) = (a.levels, a.total);
        if let Some(s) = self.steps.last_mut().filter(|s| s.end_seq == u64::MAX) {
            let m = Moment {
                total,
                levels,
                ts,
                seq,
            };
            let sa = s.allocs.entry(key).or_insert_with(|| {
                let mut before = m;
                before.total -= delta;
                before.levels[role] -= delta;
                StepAlloc {
                    high: before,
                    low: before,
                    end: before,
                }
            });
            if total > sa.high.total {
                sa.high = m;
            }
            if total < sa.low.total {
                sa.low = m;
            }
            sa.end = m;
        }
    }

    /// A block of `size` bytes of owner `owner` was allocated.
    pub fn malloc(&mut self, owners: &[String], key: Key, owner: u32, size: u64, ts: u64) {
        let r = self.role(owners, owner);
        self.apply(key, r, size as i64, ts);
    }

    /// A block was freed (`seq`: its MALLOC's sequence number in the decompose layer).
    pub fn free(&mut self, owners: &[String], key: Key, owner: u32, size: u64, seq: u64, ts: u64) {
        let r = self.role(owners, owner);
        self.apply(key, r, -(size as i64), ts);
        if let Some(a) = self.allocs.get_mut(&key) {
            if a.act_peak_seq != 0 && seq <= a.act_peak_seq {
                a.act_freed.push((owner, size));
            }
        }
    }

    /// A live block allocated at `ts` (sequence `seq`) got owner `new` in place of `old`.
    #[allow(clippy::too_many_arguments)]
    pub fn retag(
        &mut self,
        owners: &[String],
        key: Key,
        old: u32,
        new: u32,
        size: u64,
        seq: u64,
        ts: u64,
    ) {
        let (ro, rn) = (self.role(owners, old), self.role(owners, new));
        if ro == rn {
            return;
        }
        self.tagged = true;
        let size = size as i64;
        let Some(a) = self.allocs.get_mut(&key) else {
            return;
        };
        a.levels[ro] -= size;
        a.levels[rn] += size;
        a.buckets.retag(ts, ro, rn, size);
        // steps: every recorded moment at or after the MALLOC had the block live
        for s in self.steps.iter_mut().rev() {
            if s.end_seq < seq {
                break;
            }
            if let Some(sa) = s.allocs.get_mut(&key) {
                for m in [&mut sa.high, &mut sa.low, &mut sa.end] {
                    if m.seq >= seq {
                        m.levels[ro] -= size;
                        m.levels[rn] += size;
                    }
                }
            }
        }
    }

    /// The steps recorded (evenly thinned past [`MAX_STEPS`]); a step still open at the end has
    /// its last moment as its end.
    pub fn steps(&self) -> &[StepRoles] {
        &self.steps
    }

    /// Per device, allocator and role that ever held bytes, the role's bytes over time.
    pub fn series(&self) -> Vec<RoleSeries> {
        let mut out = Vec::new();
        for ((device, pool), a) in &self.allocs {
            let b = &a.buckets;
            let mut level: Levels = [0; N];
            let mut pts: Vec<Vec<(u64, i64)>> = vec![Vec::new(); N];
            for (i, (d, e)) in b.deltas.iter().zip(&b.exc).enumerate() {
                let t = b.t0 + i as u64 * b.width;
                for r in 0..N {
                    pts[r].push((t, level[r] + e[r]));
                    level[r] += d[r];
                }
            }
            for (r, p) in pts.into_iter().enumerate() {
                if p.iter().all(|(_, v)| *v == 0) && a.levels[r] == 0 {
                    continue;
                }
                let (mut t, mut v): (Vec<u64>, Vec<i64>) = p.into_iter().unzip();
                t.push(b.last_ts);
                v.push(a.levels[r]);
                out.push(RoleSeries {
                    device: *device,
                    pool: *pool,
                    role: ROLES[r],
                    t,
                    v,
                });
            }
        }
        out
    }

    /// Whether any block has a role other than `temp` (tagged at its MALLOC or after).
    pub fn has_roles(&self) -> bool {
        self.tagged
            || self
                .allocs
                .values()
                .any(|a| a.levels[..N - 1].iter().any(|v| *v != 0))
            || self.role_of.iter().any(|r| (*r as usize) < N - 1)
    }

    /// The blocks of role `activation` live at that role's peak, by detail (module path),
    /// largest first, per allocator; `live` lists the blocks still live (allocator, owner,
    /// bytes, MALLOC sequence number).
    pub fn activations_at_peak(
        &self,
        owners: &[String],
        live: impl Iterator<Item = (Key, u32, u64, u64)>,
    ) -> Vec<Activations> {
        let mut by: BTreeMap<Key, HashMap<u32, u64>> = BTreeMap::new();
        for (k, owner, size, seq) in live {
            let a = &self.allocs.get(&k);
            if a.is_some_and(|a| a.act_peak_seq != 0 && seq <= a.act_peak_seq) {
                *by.entry(k).or_default().entry(owner).or_default() += size;
            }
        }
        for (k, a) in &self.allocs {
            for (o, sz) in &a.act_freed {
                *by.entry(*k).or_default().entry(*o).or_default() += sz;
            }
        }
        let mut out = Vec::new();
        for ((dev, pool), m) in by {
            let mut parts: HashMap<&str, u64> = HashMap::new();
            for (o, sz) in m {
                let (role, detail) = role_and_detail(&owners[o as usize]);
                if role == ROLES[ACTIVATION] {
                    *parts.entry(detail).or_default() += sz;
                }
            }
            if parts.is_empty() {
                continue;
            }
            let mut v: Vec<(String, u64)> =
                parts.into_iter().map(|(d, s)| (d.to_owned(), s)).collect();
            v.sort_by(|x, y| y.1.cmp(&x.1).then(x.0.cmp(&y.0)));
            out.push((dev, pool, v));
        }
        out
    }
}
