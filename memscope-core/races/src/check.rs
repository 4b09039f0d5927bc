//! The checker: per-data-pointer access records checked against the clocks.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use super::clocks::Syncs;
use super::{AccessKind, AccessRole, Free, KernelLaunch, OpSide, RaceFinding, RaceKind, StreamOp};

/// One recorded access: which launch, which of its accesses, and where it sits in the order.
#[derive(Clone)]
struct Rec {
    seq: i64,
    /// Dense stream index.
    stream: usize,
    write: bool,
    /// Index into the launch's `accesses`.
    idx: u32,
    launch: Arc<KernelLaunch>,
    /// The launch's operator name, shared by its findings (made once per launch).
    name: Arc<str>,
}

/// What is known about one data pointer (CSAN's `TensorInfo`).
#[derive(Default)]
struct PtrState {
    write: Option<Rec>,
    /// Reads since the last write, less those already ordered before everything. Never
    /// emptied by thinning (the newest read is ordered before no other stream yet), so
    /// "empty" still means CSAN's "no reads since the last write".
    reads: Vec<Rec>,
    /// Length at which the read list is next thinned.
    thin_at: usize,
    /// Accesses made before the block was returned to a pool whose stream is not recorded
    /// ([`StreamOp::PoolFree`]): each later access that is not ordered after one of them uses
    /// memory another stream may still be using. Each is reported once.
    ghosts: Vec<Rec>,
    /// The pool free the ghosts come from.
    freed: Option<Arc<OpSide>>,
}

const THIN_MIN: usize = 64;

/// The race check as a state machine: feed [`StreamOp`]s in program order with
/// [`RaceChecker::apply`]. [`check`] wraps it as an iterator.
pub struct RaceChecker {
    syncs: Syncs,
    ptrs: HashMap<u64, PtrState>,
    seq: i64,
    /// Scratch for one launch's deduplicated accesses: (addr, index, is_write).
    scratch: Vec<(u64, u32, bool)>,
}

impl Default for RaceChecker {
    fn default() -> Self {
        Self::new()
    }
}

impl RaceChecker {
    /// A checker with only the default stream 0, no events and nothing accessed.
    #[must_use]
    pub fn new() -> Self {
        Self {
            syncs: Syncs::new(),
            ptrs: HashMap::new(),
            seq: 0,
            scratch: Vec::new(),
        }
    }

    /// Data pointers with recorded accesses now (the checker's state size).
    #[must_use]
    pub fn live_pointers(&self) -> usize {
        self.ptrs.len()
    }

    /// Access records held now (last writes plus kept reads).
    #[must_use]
    pub fn held_records(&self) -> usize {
        self.ptrs
            .values()
            .map(|p| p.reads.len() + usize::from(p.write.is_some()))
            .sum()
    }

    /// Applies one operation; pushes its findings onto `out`.
    pub fn apply(&mut self, op: StreamOp, out: &mut Vec<RaceFinding>) {
        match op {
            StreamOp::KernelLaunch(l) => self.launch(l, out),
            StreamOp::StreamCreate { stream } => {
                self.syncs.stream(stream);
            }
            StreamOp::EventCreate { event } => self.syncs.create_event(event),
            StreamOp::EventDelete { event } => self.syncs.delete_event(event),
            StreamOp::EventRecord { event, stream } => self.syncs.record(event, stream),
            StreamOp::EventWait { stream, event } => self.syncs.wait(stream, event),
            StreamOp::StreamSynchronize { stream } => self.syncs.sync_stream(stream),
            StreamOp::EventSynchronize { event } => self.syncs.sync_event(event),
            StreamOp::DeviceSynchronize => self.syncs.sync_device(),
            StreamOp::Alloc { addr, .. } => {
                // CSAN's forgetting, but what a pool free left is checked by the new user
                if let Some(p) = self.ptrs.remove(&addr) {
                    if !p.ghosts.is_empty() {
                        self.ptrs.insert(addr, ghosts_only(p.ghosts, p.freed));
                    }
                }
            }
            StreamOp::Free(f) => self.free(&f, out),
            StreamOp::PoolFree(f) => self.pool_free(&f),
        }
    }

    fn launch(&mut self, l: KernelLaunch, out: &mut Vec<RaceFinding>) {
        self.seq += 1;
        let seq = self.seq;
        let s = self.syncs.stream(l.stream);
        self.syncs.launch(s, seq);
        // CSAN's sets: a pointer once per launch, written if any listing writes it.
        self.scratch.clear();
        for (i, a) in l.accesses.iter().enumerate() {
            let idx = u32::try_from(i).unwrap_or(u32::MAX);
            self.scratch
                .push((a.addr, idx, a.kind != AccessKind::ReadOnly));
        }
        // Writes first per address so the dedup keeps a write; then reads before writes.
        self.scratch.sort_by_key(|&(addr, i, w)| (addr, !w, i));
        self.scratch.dedup_by_key(|e| e.0);
        self.scratch.sort_by_key(|&(addr, _, w)| (w, addr));
        let name: Arc<str> = Arc::from(l.operator.as_str());
        let launch = Arc::new(l);
        let scratch = std::mem::take(&mut self.scratch);
        for &(addr, idx, write) in &scratch {
            let cur = Rec {
                seq,
                stream: s,
                write,
                idx,
                launch: Arc::clone(&launch),
                name: Arc::clone(&name),
            };
            self.access(addr, cur, out);
        }
        self.scratch = scratch;
    }

    fn access(&mut self, addr: u64, cur: Rec, out: &mut Vec<RaceFinding>) {
        let syncs = &self.syncs;
        let p = self.ptrs.entry(addr).or_default();
        let unordered = |prev: &Rec| !syncs.ordered(Some(cur.stream), prev.seq, prev.stream);
        if !p.ghosts.is_empty() {
            let freed = p.freed.clone();
            p.ghosts.retain(|g| {
                let hit = (cur.write || g.write) && unordered(g);
                if hit {
                    let mut f = finding(RaceKind::FreeWhileInUse, addr, &cur, g);
                    f.free = freed.as_deref().cloned();
                    out.push(f);
                }
                !hit
            });
            if cur.write {
                // the new owner's write: a ghost ordered before it is ordered before whatever
                // is ordered after the write, and what is not conflicts with the write itself
                p.ghosts.clear();
            } else if !p.ghosts.is_empty() {
                let floor = syncs.floor();
                p.ghosts
                    .retain(|g| g.seq > floor.get(g.stream).copied().unwrap_or(-1));
            }
        }
        if cur.write {
            if !p.reads.is_empty() {
                for r in p.reads.iter().filter(|r| unordered(r)) {
                    out.push(finding(RaceKind::WriteAfterRead, addr, &cur, r));
                }
            } else if let Some(w) = p.write.as_ref().filter(|w| unordered(w)) {
                out.push(finding(RaceKind::WriteAfterWrite, addr, &cur, w));
            }
            p.reads.clear();
            p.thin_at = THIN_MIN;
            p.write = Some(cur);
        } else {
            if let Some(w) = p.write.as_ref().filter(|w| unordered(w)) {
                out.push(finding(RaceKind::ReadAfterWrite, addr, &cur, w));
            }
            p.reads.push(cur);
            if p.reads.len() >= p.thin_at.max(THIN_MIN) {
                // Reads everyone is ordered after can never conflict again.
                let floor = syncs.floor();
                p.reads
                    .retain(|r| r.seq > floor.get(r.stream).copied().unwrap_or(-1));
                p.thin_at = (2 * p.reads.len()).max(THIN_MIN);
            }
        }
    }

    fn free(&mut self, f: &Free, out: &mut Vec<RaceFinding>) {
        let Some(p) = self.ptrs.remove(&f.addr) else {
            return;
        };
        // A stream not seen yet would start from the host's clock: check against that.
        let s = f.stream.and_then(|id| self.syncs.known(id));
        let cur = OpSide {
            id: f.id,
            seq: 0,
            name: Arc::from("free"),
            stream: f.stream,
            role: AccessRole::Free,
            is_output: false,
            aliases: Vec::new(),
            owner: None,
            size: f.size,
            time_ns: f.time_ns,
            python_stack: f.python_stack.clone(),
            c_stack: f.c_stack.clone(),
        };
        for r in p.write.iter().chain(&p.reads) {
            if !self.syncs.ordered(s, r.seq, r.stream) {
                let prev = side(r);
                out.push(RaceFinding {
                    kind: RaceKind::FreeWhileInUse,
                    addr: f.addr,
                    size: f.size,
                    // The freed tensor is the one the access named.
                    current: OpSide {
                        owner: prev.owner.clone(),
                        aliases: prev.aliases.clone(),
                        ..cur.clone()
                    },
                    previous: prev,
                    free: None,
                });
            }
        }
    }

    /// A block returned to a pool whose stream is not recorded: CSAN forgets its accesses;
    /// those not yet ordered before every stream and the host are kept for the next users.
    fn pool_free(&mut self, f: &Free) {
        let Some(p) = self.ptrs.remove(&f.addr) else {
            return;
        };
        let floor = self.syncs.floor();
        let mut ghosts: Vec<Rec> = p
            .write
            .into_iter()
            .chain(p.reads)
            .chain(p.ghosts)
            .filter(|r| r.seq > floor.get(r.stream).copied().unwrap_or(-1))
            .collect();
        ghosts.sort_by_key(|r| r.seq);
        ghosts.dedup_by_key(|r| (r.seq, r.write));
        if ghosts.is_empty() {
            return;
        }
        let freed = OpSide {
            id: f.id,
            seq: 0,
            name: Arc::from("free"),
            stream: None,
            role: AccessRole::Free,
            is_output: false,
            aliases: Vec::new(),
            owner: None,
            size: f.size,
            time_ns: f.time_ns,
            python_stack: f.python_stack.clone(),
            c_stack: f.c_stack.clone(),
        };
        self.ptrs
            .insert(f.addr, ghosts_only(ghosts, Some(Arc::new(freed))));
    }
}

fn ghosts_only(ghosts: Vec<Rec>, freed: Option<Arc<OpSide>>) -> PtrState {
    PtrState {
        ghosts,
        freed,
        ..PtrState::default()
    }
}

fn side(r: &Rec) -> OpSide {
    let l = &r.launch;
    let a = usize::try_from(r.idx).ok().and_then(|i| l.accesses.get(i));
    let addr = a.map(|a| a.addr);
    // Every listing of the buffer in this launch (CSAN merges them into one access).
    let same = || l.accesses.iter().filter(move |x| Some(x.addr) == addr);
    let mut aliases: Vec<String> = Vec::new();
    for x in same() {
        for n in &x.aliases {
            if !aliases.contains(n) {
                aliases.push(n.clone());
            }
        }
    }
    OpSide {
        id: l.id,
        seq: u64::try_from(r.seq).unwrap_or(0),
        name: Arc::clone(&r.name),
        stream: Some(l.stream),
        role: if r.write {
            AccessRole::Write
        } else {
            AccessRole::Read
        },
        is_output: same().any(|x| x.kind == AccessKind::Output),
        aliases,
        owner: same().find_map(|x| x.owner.clone()),
        size: a.map_or(0, |a| a.size),
        time_ns: l.time_ns,
        python_stack: l.python_stack.clone(),
        c_stack: l.c_stack.clone(),
    }
}

fn finding(kind: RaceKind, addr: u64, cur: &Rec, prev: &Rec) -> RaceFinding {
    let current = side(cur);
    RaceFinding {
        kind,
        addr,
        size: current.size,
        current,
        previous: side(prev),
        free: None,
    }
}
/// The race check over `ops` in program order, as an iterator of findings (produced as the
/// operations are consumed: a 1 M-launch input need not be in memory at once).
pub fn check<I: IntoIterator<Item = StreamOp>>(ops: I) -> Checker<I::IntoIter> {
    Checker {
        ops: ops.into_iter(),
        state: RaceChecker::new(),
        pending: VecDeque::new(),
        buf: Vec::new(),
    }
}

/// The iterator [`check`] returns.
pub struct Checker<I> {
    ops: I,
    state: RaceChecker,
    pending: VecDeque<RaceFinding>,
    buf: Vec<RaceFinding>,
}

impl<I> Checker<I> {
    /// The checker's state (e.g. its size after the input is consumed).
    pub fn state(&self) -> &RaceChecker {
        &self.state
    }
}

impl<I: Iterator<Item = StreamOp>> Iterator for Checker<I> {
    type Item = RaceFinding;

    fn next(&mut self) -> Option<RaceFinding> {
        loop {
            if let Some(f) = self.pending.pop_front() {
                return Some(f);
            }
            let op = self.ops.next()?;
            self.state.apply(op, &mut self.buf);
            self.pending.extend(self.buf.drain(..));
        }
    }
}
