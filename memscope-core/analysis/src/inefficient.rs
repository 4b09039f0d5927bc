//! Inefficient-memory rules (behaviour spec §10.4: msMemScope's online analyzer and its offline
//! `check_inefficient`, which agree).
//!
//! Two families, each with its own op counter (`api`) per process: PTA (ATEN ops, PTA and
//! PTA_WORKSPACE blocks, ACCESS rows of `type:PTA`/`PTA_WORKSPACE`) and ATB (ATB ops, ATB
//! blocks, every other ACCESS row — msMemScope's split). MindSpore, HAL and host rows take no
//! part. A block is identified by its `allocation_id` (address containment for rows without
//! one, such as ATB ACCESS rows of msMemScope's own dumps), across families: an ATB operator
//! that touches a torch-allocated tensor counts its own ops.
//!
//! **msMemScope's rule** ([`IneffRule::MsMemScope`], the default): every op START increments
//! the family's `api` and opens the op; its END closes it and, if the family's memory rows since
//! the last such point include a MALLOC, sets `malloc_api = api`, a FREE, `free_api = api`. A
//! memory row while no op is open increments `api` and does the same at once. Nested ops have
//! no depth: the inner END closes "the op" (msMemScope keeps one flag), so the outer op's later
//! rows count as rows outside any op. Each row is classified **when it arrives**, with the
//! `malloc_api`/`free_api` known at that moment:
//!
//! * `temporary_idleness`, on an ACCESS: the block's previous row is an ACCESS and
//!   `api − api(prev) > idle_threshold`;
//! * `early_allocation`, on an ACCESS once `free_api` is set: with `m` the api of the block's
//!   MALLOC and `fa` the api of its first ACCESS whose api ≠ `m`: `fa` exists, `m ≠ free_api`
//!   and `m < free_api < fa` (another op freed memory between the allocation and first use);
//! * `late_deallocation`, on a FREE once `malloc_api` is set: the block's previous row is an
//!   ACCESS with api `la` ≠ the FREE's api and `la < malloc_api < api(FREE)` (another op
//!   allocated memory between the last use and the free).
//!
//! Rows of a block only count when the block's MALLOC was seen. Each type is found at most once
//! per block, in the order found; a block's result ([`Finding`]) is final at its FREE (or at the
//! end of the stream).
//!
//! **memscope's stricter variant** ([`IneffRule::OpEnd`], `--inefficient-rule op-end`): ops nest
//! by depth, and the rows inside an op are classified only when the outermost op ends, after its
//! own MALLOC/FREE moved `malloc_api`/`free_api` to it. A free (or malloc) in the same op as the
//! first (or last) use then never counts as "another op's": it finds a subset of msMemScope's
//! blocks.
//!
//! Memory: one small record per live PTA/ATB block, plus the open op's rows (`op-end` only).

use std::collections::{BTreeMap, HashMap};

use memscope_core::event::{Attrs, Event, EventKind, EventType, Inefficiency};

/// Which classification rule the analysis follows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum IneffRule {
    /// msMemScope's: each row is classified as it arrives; nested ops share one open/closed
    /// state.
    #[default]
    #[serde(rename = "msmemscope")]
    MsMemScope,
    /// memscope's stricter variant: rows inside an op are classified when the outermost op
    /// ends; ops nest by depth.
    #[serde(rename = "op-end")]
    OpEnd,
}

impl IneffRule {
    /// Parses `msmemscope` or `op-end`.
    pub fn parse(s: &str) -> Option<IneffRule> {
        match s.trim() {
            "msmemscope" => Some(IneffRule::MsMemScope),
            "op-end" => Some(IneffRule::OpEnd),
            _ => None,
        }
    }

    /// `msmemscope` or `op-end`.
    pub fn as_str(self) -> &'static str {
        match self {
            IneffRule::MsMemScope => "msmemscope",
            IneffRule::OpEnd => "op-end",
        }
    }
}

/// Settings of the inefficient-memory analysis.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IneffConfig {
    /// `temporary_idleness` threshold in ops (`--idle-threshold`, default 3000).
    pub idle_threshold: u64,
    /// Only blocks of at least this many bytes are reported (`--mem-size`, default 0).
    pub mem_size: u64,
    /// Types reported (`--types`); empty means all three.
    pub types: Vec<Inefficiency>,
    /// Classification rule (`--inefficient-rule`, default msMemScope's).
    pub rule: IneffRule,
}

impl Default for IneffConfig {
    fn default() -> Self {
        IneffConfig {
            idle_threshold: 3000,
            mem_size: 0,
            types: Vec::new(),
            rule: IneffRule::MsMemScope,
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
    Pta = 0,
    Atb = 1,
}

fn family_of_pool(t: EventType) -> Option<Family> {
    match t {
        EventType::Pta | EventType::PtaWorkspace => Some(Family::Pta),
        EventType::Atb => Some(Family::Atb),
        _ => None,
    }
}

/// The family whose op counter an ACCESS row uses: PTA for `type:PTA` (and `PTA_WORKSPACE`),
/// ATB for anything else (msMemScope's split).
fn family_of_access(ev: &Event) -> Family {
    let pool = match &ev.attrs {
        Attrs::Access(a) => a.pool.as_deref(),
        _ => None,
    };
    match pool.and_then(EventType::parse) {
        Some(EventType::Pta | EventType::PtaWorkspace) => Family::Pta,
        _ => Family::Atb,
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
    /// msMemScope: an op is open. op-end: open ops (depth).
    open: bool,
    depth: u32,
    /// A MALLOC / FREE row since the last point where the apis were updated.
    saw_malloc: bool,
    saw_free: bool,
    malloc_api: Option<u64>,
    free_api: Option<u64>,
    /// op-end only: rows of the open op, classified when it ends (block, step, api).
    buffered: Vec<(Option<u64>, Step, u64)>,
}

impl FamilyState {
    /// Moves `malloc_api`/`free_api` to the current op if it had such rows.
    fn settle(&mut self) {
        if self.saw_malloc {
            self.malloc_api = Some(self.api);
        }
        if self.saw_free {
            self.free_api = Some(self.api);
        }
        self.saw_malloc = false;
        self.saw_free = false;
    }

    fn note(&mut self, step: Step) {
        match step {
            Step::Malloc => self.saw_malloc = true,
            Step::Free => self.saw_free = true,
            Step::Access => {}
        }
    }
}

/// Follows one process's events in ID order and finds inefficient blocks.
pub struct IneffTracker {
    cfg: IneffConfig,
    fam: [FamilyState; 2],
    blocks: HashMap<u64, Block>,
    by_alloc_id: HashMap<u64, u64>,
    by_addr: BTreeMap<u64, (u64, u64)>, // start addr → (block uid, size)
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
            fam: [FamilyState::default(), FamilyState::default()],
            blocks: HashMap::new(),
            by_alloc_id: HashMap::new(),
            by_addr: BTreeMap::new(),
            next_uid: 0,
        }
    }

    /// Blocks being followed.
    pub fn live_blocks(&self) -> usize {
        self.blocks.len()
    }

    fn lookup(&self, ev: &Event) -> Option<u64> {
        let alloc_id = match &ev.attrs {
            Attrs::Access(a) => a.allocation_id,
            Attrs::Memory(m) if m.allocation_id != 0 => Some(m.allocation_id),
            _ => None,
        };
        if let Some(a) = alloc_id {
            // the row names its block: that one or none (msMemScope groups by allocation_id)
            return self
                .by_alloc_id
                .get(&a)
                .copied()
                .filter(|u| self.blocks.contains_key(u));
        }
        let addr = ev.ptr.or_else(|| ev.memory().map(|m| m.addr))?;
        let (start, (uid, size)) = self.by_addr.range(..=addr).next_back()?;
        (addr == *start || addr < start.saturating_add(*size)).then_some(*uid)
    }

    fn forget(&mut self, uid: u64) -> Option<Block> {
        let b = self.blocks.remove(&uid)?;
        if self.by_addr.get(&b.addr).is_some_and(|(u, _)| *u == uid) {
            self.by_addr.remove(&b.addr);
        }
        if b.alloc_id != 0 && self.by_alloc_id.get(&b.alloc_id) == Some(&uid) {
            self.by_alloc_id.remove(&b.alloc_id);
        }
        Some(b)
    }

    /// Feeds one event (in ID order).
    pub fn observe(&mut self, ev: &Event) -> Observed {
        let mut out = Observed::default();
        match ev.kind {
            EventKind::OpLaunch => {
                let (fam, start) = match ev.event_type {
                    EventType::AtenStart => (Family::Pta, true),
                    EventType::AtenEnd => (Family::Pta, false),
                    EventType::AtbStart => (Family::Atb, true),
                    EventType::AtbEnd => (Family::Atb, false),
                    _ => return out,
                };
                self.op_edge(fam, start, &mut out);
            }
            EventKind::Malloc => {
                let Some(fam) = family_of_pool(ev.event_type) else {
                    return out;
                };
                if ev.is_history_malloc() {
                    // a block from before the window is not judged (msMemScope)
                    return out;
                }
                let (size, alloc_id) = ev.memory().map_or((0, 0), |m| (m.size, m.allocation_id));
                let addr = ev.ptr.or_else(|| ev.memory().map(|m| m.addr)).unwrap_or(0);
                let uid = self.next_uid;
                self.next_uid += 1;
                if let Some((old, _)) = self.by_addr.insert(addr, (uid, size)) {
                    // double malloc: the old block ends here without a FREE
                    if let Some(b) = self.forget(old) {
                        out.findings.push(self.finding(b));
                    }
                    self.by_addr.insert(addr, (uid, size));
                }
                if alloc_id != 0 {
                    self.by_alloc_id.insert(alloc_id, uid);
                }
                self.blocks.insert(
                    uid,
                    Block {
                        pid: ev.pid,
                        malloc_id: ev.id,
                        addr,
                        alloc_id,
                        size,
                        m_api: 0,
                        fa: None,
                        last: None,
                        found: Vec::new(),
                    },
                );
                out.tracked_malloc = size >= self.cfg.mem_size;
                self.memory_row(fam, Some(uid), Step::Malloc, &mut out);
            }
            EventKind::Free => {
                let Some(fam) = family_of_pool(ev.event_type) else {
                    return out;
                };
                let uid = self.lookup(ev);
                self.memory_row(fam, uid, Step::Free, &mut out);
            }
            EventKind::Access => {
                let uid = self.lookup(ev);
                self.memory_row(family_of_access(ev), uid, Step::Access, &mut out);
            }
            _ => {}
        }
        out
    }

    fn op_edge(&mut self, fam: Family, start: bool, out: &mut Observed) {
        let st = &mut self.fam[fam as usize];
        match (self.cfg.rule, start) {
            (IneffRule::MsMemScope, true) => {
                st.open = true;
                st.api += 1;
            }
            (IneffRule::MsMemScope, false) => {
                st.open = false;
                st.settle();
            }
            (IneffRule::OpEnd, true) => {
                st.depth += 1;
                st.api += 1;
            }
            (IneffRule::OpEnd, false) => {
                if st.depth == 0 {
                    return;
                }
                st.depth -= 1;
                if st.depth == 0 {
                    st.settle();
                    let rows = std::mem::take(&mut st.buffered);
                    for (uid, step, api) in rows {
                        self.classify(fam, uid, step, api, out);
                    }
                }
            }
        }
    }

    fn memory_row(&mut self, fam: Family, uid: Option<u64>, step: Step, out: &mut Observed) {
        let rule = self.cfg.rule;
        let st = &mut self.fam[fam as usize];
        let inside = match rule {
            IneffRule::MsMemScope => st.open,
            IneffRule::OpEnd => st.depth > 0,
        };
        if !inside {
            st.api += 1;
        }
        st.note(step);
        if !inside {
            st.settle();
        }
        let api = st.api;
        if step == Step::Malloc {
            if let Some(b) = uid.and_then(|u| self.blocks.get_mut(&u)) {
                b.m_api = api;
            }
        }
        if rule == IneffRule::OpEnd && inside {
            self.fam[fam as usize].buffered.push((uid, step, api));
        } else {
            self.classify(fam, uid, step, api, out);
        }
    }

    fn classify(
        &mut self,
        fam: Family,
        uid: Option<u64>,
        step: Step,
        api: u64,
        out: &mut Observed,
    ) {
        let Some(uid) = uid else { return };
        let st = &self.fam[fam as usize];
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
                    if api > prev && api - prev > threshold {
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
            if let Some(b) = self.forget(uid) {
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

    /// The stream ended: results of the blocks still live (rows of an op still open are
    /// classified first).
    pub fn finish(&mut self) -> Vec<Finding> {
        let mut out = Observed::default();
        for fam in [Family::Pta, Family::Atb] {
            let rows = std::mem::take(&mut self.fam[fam as usize].buffered);
            for (uid, step, api) in rows {
                self.classify(fam, uid, step, api, &mut out);
            }
        }
        let mut rest: Vec<Block> = self.blocks.drain().map(|(_, b)| b).collect();
        self.by_addr.clear();
        self.by_alloc_id.clear();
        rest.sort_by_key(|b| b.malloc_id);
        out.findings
            .extend(rest.into_iter().map(|b| self.finding(b)));
        out.findings
    }
}
