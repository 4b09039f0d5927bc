//! Inefficient-memory rules (behaviour spec §10.4, msMemScope's op-sequence rules).
//!
//! Two families with separate state: PTA (ATen ops, PTA and PTA-workspace blocks) and ATB (ATB
//! ops and blocks). In each family:
//!
//! * every op START increments `api` and opens the op; memory events inside an open op take the
//!   current `api` and are buffered; at the END that closes the outermost open op,
//!   `malloc_api = api` if the buffer holds a MALLOC and `free_api = api` if it holds a FREE,
//!   then the buffered events are classified in order;
//! * a memory event outside any op increments `api` and is classified at once.
//!
//! Classification of a block's events (checks only for blocks whose MALLOC was seen):
//!
//! * `temporary_idleness`, on an ACCESS: the block's previous event is an ACCESS and
//!   `api − api(prev) > idle_threshold`;
//! * `early_allocation`, on an ACCESS once `free_api` is set: with `m` the api of the block's
//!   MALLOC and `fa` the api of its first ACCESS whose api ≠ `m`: `fa` exists, `m ≠ free_api`
//!   and `m < free_api < fa`;
//! * `late_deallocation`, on a FREE once `malloc_api` is set: the block's previous event is an
//!   ACCESS with api `la` ≠ the FREE's api and `la < malloc_api < api(FREE)`.
//!
//! Each type is found at most once per block, in the order found. A block's result
//! ([`Finding`]) is final when its FREE is classified (or at the end of the stream).
//! Memory: one small record per live block of the two families, plus the open op's buffer.

use std::collections::{BTreeMap, HashMap};

use crate::event::{Event, EventKind, EventType, Inefficiency};

/// Settings of the inefficient-memory analysis.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IneffConfig {
    /// `temporary_idleness` threshold in ops (`--idle-threshold`, default 3000).
    pub idle_threshold: u64,
    /// Only blocks of at least this many bytes are reported (`--mem-size`, default 0).
    pub mem_size: u64,
    /// Types reported (`--types`); empty means all three.
    pub types: Vec<Inefficiency>,
}

impl Default for IneffConfig {
    fn default() -> Self {
        IneffConfig {
            idle_threshold: 3000,
            mem_size: 0,
            types: Vec::new(),
        }
    }
}

/// The result for one block: its MALLOC row and the types found (in the order found; may be
/// empty).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// Process of the MALLOC row.
    pub pid: Option<u32>,
    /// ID of the MALLOC row.
    pub malloc_id: u64,
    /// Types found, filtered by [`IneffConfig::types`].
    pub types: Vec<Inefficiency>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Family {
    Pta,
    Atb,
}

fn family_of_pool(t: EventType) -> Option<Family> {
    match t {
        EventType::Pta | EventType::PtaWorkspace => Some(Family::Pta),
        EventType::Atb => Some(Family::Atb),
        _ => None,
    }
}

fn family_of_type_attr(s: &str) -> Option<Family> {
    match s {
        "PTA" | "PTA_WORKSPACE" => Some(Family::Pta),
        "ATB" => Some(Family::Atb),
        _ => None,
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Step {
    Malloc,
    Access,
    Free,
}

struct Block {
    pid: Option<u32>,
    malloc_id: u64,
    addr: u64,
    alloc_id: u64,
    size: u64,
    m_api: u64,
    fa: Option<u64>,
    last: Option<(Step, u64)>,
    found: Vec<Inefficiency>,
}

#[derive(Default)]
struct FamilyState {
    api: u64,
    depth: u32,
    op_malloc: bool,
    op_free: bool,
    malloc_api: Option<u64>,
    free_api: Option<u64>,
    buffered: Vec<(u64, Step, u64)>,    // (block uid, step, api)
    by_addr: BTreeMap<u64, (u64, u64)>, // start addr → (block uid, size)
}

/// Follows one process's events in ID order and finds inefficient blocks.
pub struct IneffTracker {
    cfg: IneffConfig,
    fam: HashMap<Family, FamilyState>,
    blocks: HashMap<u64, Block>,
    by_alloc_id: HashMap<u64, u64>,
    next_uid: u64,
}

/// What [`IneffTracker::observe`] learnt from one event.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Observed {
    /// The event is a MALLOC whose block is tracked: its row should wait for the finding.
    pub tracked_malloc: bool,
    /// Blocks whose result became final.
    pub findings: Vec<Finding>,
}

impl IneffTracker {
    /// A tracker with `cfg`.
    pub fn new(cfg: IneffConfig) -> IneffTracker {
        IneffTracker {
            cfg,
            fam: HashMap::new(),
            blocks: HashMap::new(),
            by_alloc_id: HashMap::new(),
            next_uid: 0,
        }
    }

    /// Blocks being followed.
    pub fn live_blocks(&self) -> usize {
        self.blocks.len()
    }

    fn lookup(&self, fam: Family, ev: &Event) -> Option<u64> {
        let alloc_id = match &ev.attrs {
            crate::event::Attrs::Access(a) => a.allocation_id,
            crate::event::Attrs::Memory(m) if m.allocation_id != 0 => Some(m.allocation_id),
            _ => None,
        };
        if let Some(uid) = alloc_id.and_then(|a| self.by_alloc_id.get(&a)) {
            if self.blocks.contains_key(uid) {
                return Some(*uid);
            }
        }
        let addr = ev.ptr.or_else(|| ev.memory().map(|m| m.addr))?;
        let st = self.fam.get(&fam)?;
        let (start, (uid, size)) = st.by_addr.range(..=addr).next_back()?;
        (addr == *start || addr < start.saturating_add(*size)).then_some(*uid)
    }

    /// Feeds one event (in ID order).
    pub fn observe(&mut self, ev: &Event) -> Observed {
        let mut out = Observed::default();
        match (ev.kind, ev.event_type) {
            (EventKind::OpLaunch, t) => {
                let fam = if matches!(t, EventType::AtenStart | EventType::AtenEnd) {
                    Family::Pta
                } else {
                    Family::Atb
                };
                let st = self.fam.entry(fam).or_default();
                match t {
                    EventType::AtenStart | EventType::AtbStart => {
                        st.api += 1;
                        st.depth += 1;
                    }
                    _ if st.depth > 0 => {
                        st.depth -= 1;
                        if st.depth == 0 {
                            if st.op_malloc {
                                st.malloc_api = Some(st.api);
                            }
                            if st.op_free {
                                st.free_api = Some(st.api);
                            }
                            st.op_malloc = false;
                            st.op_free = false;
                            let buf = std::mem::take(&mut st.buffered);
                            for (uid, step, api) in buf {
                                self.classify(fam, uid, step, api, &mut out);
                            }
                        }
                    }
                    _ => {}
                }
            }
            (EventKind::Malloc, t) => {
                let Some(fam) = family_of_pool(t) else {
                    return out;
                };
                let (size, alloc_id) = ev.memory().map_or((0, 0), |m| (m.size, m.allocation_id));
                let addr = ev.ptr.or_else(|| ev.memory().map(|m| m.addr)).unwrap_or(0);
                let uid = self.next_uid;
                self.next_uid += 1;
                let st = self.fam.entry(fam).or_default();
                if let Some((old, _)) = st.by_addr.insert(addr, (uid, size)) {
                    // double malloc: the old block ends here without a FREE
                    if let Some(b) = self.blocks.remove(&old) {
                        out.findings.push(self.finding(b));
                    }
                }
                if alloc_id != 0 {
                    self.by_alloc_id.insert(alloc_id, uid);
                }
                let b = Block {
                    pid: ev.pid,
                    malloc_id: ev.id,
                    addr,
                    alloc_id,
                    size,
                    m_api: 0,
                    fa: None,
                    last: None,
                    found: Vec::new(),
                };
                self.blocks.insert(uid, b);
                out.tracked_malloc = size >= self.cfg.mem_size;
                self.memory_event(fam, uid, Step::Malloc, &mut out);
            }
            (EventKind::Free, t) => {
                let Some(fam) = family_of_pool(t) else {
                    return out;
                };
                let Some(uid) = self.lookup(fam, ev) else {
                    return out;
                };
                if let Some(b) = self.blocks.get(&uid) {
                    let (addr, alloc_id) = (b.addr, b.alloc_id);
                    let st = self.fam.entry(fam).or_default();
                    if st.by_addr.get(&addr).is_some_and(|(u, _)| *u == uid) {
                        st.by_addr.remove(&addr);
                    }
                    if alloc_id != 0 && self.by_alloc_id.get(&alloc_id) == Some(&uid) {
                        self.by_alloc_id.remove(&alloc_id);
                    }
                }
                self.memory_event(fam, uid, Step::Free, &mut out);
            }
            (EventKind::Access, _) => {
                let typed = match &ev.attrs {
                    crate::event::Attrs::Access(a) => {
                        a.pool.as_deref().and_then(family_of_type_attr)
                    }
                    _ => None,
                };
                let fams: &[Family] = match typed {
                    Some(Family::Pta) => &[Family::Pta],
                    Some(Family::Atb) => &[Family::Atb],
                    None => &[Family::Pta, Family::Atb],
                };
                for &fam in fams {
                    if let Some(uid) = self.lookup(fam, ev) {
                        self.memory_event(fam, uid, Step::Access, &mut out);
                        break;
                    }
                }
            }
            _ => {}
        }
        out
    }

    fn memory_event(&mut self, fam: Family, uid: u64, step: Step, out: &mut Observed) {
        let st = self.fam.entry(fam).or_default();
        if st.depth > 0 {
            match step {
                Step::Malloc => st.op_malloc = true,
                Step::Free => st.op_free = true,
                Step::Access => {}
            }
            let api = st.api;
            st.buffered.push((uid, step, api));
            if step == Step::Malloc {
                if let Some(b) = self.blocks.get_mut(&uid) {
                    b.m_api = api;
                }
            }
        } else {
            st.api += 1;
            let api = st.api;
            if step == Step::Malloc {
                if let Some(b) = self.blocks.get_mut(&uid) {
                    b.m_api = api;
                }
            }
            self.classify(fam, uid, step, api, out);
        }
    }

    fn classify(&mut self, fam: Family, uid: u64, step: Step, api: u64, out: &mut Observed) {
        let st = self.fam.entry(fam).or_default();
        let (malloc_api, free_api) = (st.malloc_api, st.free_api);
        let threshold = self.cfg.idle_threshold;
        let Some(b) = self.blocks.get_mut(&uid) else {
            return;
        };
        fn flag(b: &mut Block, t: Inefficiency) {
            if !b.found.contains(&t) {
                b.found.push(t);
            }
        }
        match step {
            Step::Malloc => {}
            Step::Access => {
                if let Some((Step::Access, prev)) = b.last {
                    if api.saturating_sub(prev) > threshold {
                        flag(b, Inefficiency::TemporaryIdleness);
                    }
                }
                if b.fa.is_none() && api != b.m_api {
                    b.fa = Some(api);
                }
                if let (Some(f), Some(fa)) = (free_api, b.fa) {
                    if b.m_api != f && b.m_api < f && f < fa {
                        flag(b, Inefficiency::EarlyAllocation);
                    }
                }
            }
            Step::Free => {
                if let (Some(ma), Some((Step::Access, la))) = (malloc_api, b.last) {
                    if la != api && la < ma && ma < api {
                        flag(b, Inefficiency::LateDeallocation);
                    }
                }
            }
        }
        b.last = Some((step, api));
        if step == Step::Free {
            if let Some(b) = self.blocks.remove(&uid) {
                out.findings.push(self.finding(b));
            }
        }
    }

    fn finding(&self, b: Block) -> Finding {
        let mut types = if b.size >= self.cfg.mem_size {
            b.found
        } else {
            Vec::new()
        };
        if !self.cfg.types.is_empty() {
            types.retain(|t| self.cfg.types.contains(t));
        }
        Finding {
            pid: b.pid,
            malloc_id: b.malloc_id,
            types,
        }
    }

    /// The stream ended: results of the blocks still live.
    pub fn finish(&mut self) -> Vec<Finding> {
        let mut fams: Vec<Family> = self.fam.keys().copied().collect();
        fams.sort_by_key(|f| *f as u8);
        let mut out = Observed::default();
        for fam in fams {
            let buf = self
                .fam
                .get_mut(&fam)
                .map(|s| std::mem::take(&mut s.buffered))
                .unwrap_or_default();
            for (uid, step, api) in buf {
                self.classify(fam, uid, step, api, &mut out);
            }
        }
        let mut rest: Vec<Block> = self.blocks.drain().map(|(_, b)| b).collect();
        rest.sort_by_key(|b| b.malloc_id);
        out.findings
            .extend(rest.into_iter().map(|b| self.finding(b)));
        out.findings
    }
}
