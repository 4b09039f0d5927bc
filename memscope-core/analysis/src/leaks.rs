//! Step-based leak detection (online during `memscope run`, offline in `memscope analyze
//! leaks`), issue 6 §3 / behaviour spec §10.1.
//!
//! **Rule.** A framework-pool block (PTA, PTA workspace, ATB, MindSpore) allocated in step
//! *a* ≥ 2 that is still live when a later step *S* > *a* ends, and is still live at the end of
//! the run, is a leak. Unlike msMemScope a candidate freed later is not reported. Because steps
//! end in increasing order, "live at some later step end and at the end of the run" is the same
//! as "live at the end and the highest ended step is > *a*", so no scan per step is needed.
//!
//! **Live at the end.** msMemScope closes every block still alive at exit with a synthetic FREE
//! marked `shadow:true`; such a FREE does not end a block here (it is what "live at exit"
//! looks like in a dump). A later MALLOC at the same address does.
//!
//! **History blocks** (MALLOC rows marked `shadow:true`, written when a window opened for
//! blocks allocated before it) are not judged, as in msMemScope.
//!
//! **HAL.** Every HAL block live at the end is reported too, with where it was allocated, in a
//! section of its own: msMemScope writes these only to its log and does not call them leaks
//! (`--fail-on leaks` does not read them; `hal_at_exit` does). HAL blocks are keyed by address,
//! because 2025 dumps write HAL FREEs without a device.
//!
//! Memory: one entry per live block; stacks are kept only for blocks that can still become
//! leaks (*a* ≥ 2).

use std::collections::HashMap;

use crate::attribution::{Attribution, Site};
use memscope_core::bus::{BusCtx, BusError, Flow, Layer, ReportSection};
use memscope_core::event::{Device, Event, EventKind, EventType};
use memscope_core::listing::{top_n, CONSOLE_TOP};

use super::ops::Under;
use super::steps::StepTracker;
use super::{mib, pool_name, OpTracker};

/// Longest list of live HAL blocks in the log; the rest is summed up.
pub const MAX_HAL_LINES: usize = 200;

/// A leak's place when neither an op or kernel nor a call stack was recorded.
pub const NOWHERE: &str = "(no op, kernel or call stack recorded)";

/// One pool leak, as [`LeakLayer::pool_leaks`] returns it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolLeak {
    /// ID of the MALLOC row.
    pub id: u64,
    /// Timestamp of the MALLOC row, ns since the epoch.
    pub ts_ns: u64,
    /// Start address.
    pub addr: u64,
    /// Device.
    pub device: Device,
    /// Pool (Event Type).
    pub pool: EventType,
    /// Bytes.
    pub size: u64,
    /// Step the block was allocated in.
    pub step: u32,
    /// The op or kernel it was allocated under, as the report prints it; without one, where in
    /// the user's code its stacks say it was allocated (`frame ← caller`,
    /// [`crate::attribution::Site::label`]); else [`NOWHERE`].
    pub under: String,
    /// Where in the user's code it was allocated (`frame ← caller`), when stacks were recorded.
    pub site: Option<String>,
    /// The rule that chose [`PoolLeak::site`].
    pub site_rule: Option<&'static str>,
    /// Owner chain, when the MALLOC row had one.
    pub owner: Option<String>,
    /// Python stack of the MALLOC row, when recorded.
    pub py_stack: Option<String>,
    /// C stack of the MALLOC row, when recorded.
    pub c_stack: Option<String>,
}

/// A HAL block live at the end, as [`LeakLayer::hal_live`] returns it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HalLive {
    /// Process of the MALLOC row.
    pub pid: Option<u32>,
    /// Device.
    pub device: Device,
    /// Start address.
    pub addr: u64,
    /// Bytes.
    pub size: u64,
    /// Where it was allocated (`frame ← caller`), when stacks were recorded.
    pub site: Option<String>,
}

struct PoolBlock {
    id: u64,
    ts_ns: u64,
    addr: u64,
    device: Device,
    pool: EventType,
    size: u64,
    step: u32,
    under: Under,
    owner: Option<String>,
    stacks: Option<(Option<String>, Option<String>)>,
}

impl PoolBlock {
    /// The first frame of the user's code in its stacks.
    fn site(&self) -> Option<Site> {
        let (py, c) = self.stacks.as_ref()?;
        Attribution::global().site(py.as_deref(), c.as_deref())
    }

    /// Where the block was allocated: its op or kernel, else its site's frame, else
    /// [`NOWHERE`].
    fn where_(&self, site: Option<&Site>) -> String {
        match (&self.under, site) {
            (Under::Nothing, Some(s)) => s.frame.clone(),
            (Under::Nothing, None) => NOWHERE.to_owned(),
            (u, _) => u.to_string(),
        }
    }

    /// [`PoolBlock::where_`] with the caller of a stack's frame (`frame ← caller`): the one
    /// "where" of every view but the console's leak lines, which print the caller on a line
    /// of their own.
    fn where_label(&self, site: Option<&Site>) -> String {
        match (&self.under, site) {
            (Under::Nothing, Some(s)) => s.label(),
            _ => self.where_(site),
        }
    }
}

struct HalBlock {
    pid: Option<u32>,
    device: Device,
    size: u64,
    /// Where it was allocated (`frame ← caller`), when stacks were recorded.
    site: Option<String>,
}

/// `  by role: gradient 8.000000 Mb(s) in 2, temp …` for leaks of which any has a role (issue
/// 25), roles in [`memscope_core::roles::ROLES`] order.
fn by_role(leaks: &[&PoolBlock]) -> Option<String> {
    use memscope_core::roles::{role_index, role_of, ROLES};
    let mut sums = [(0u64, 0u64); ROLES.len()];
    for b in leaks {
        let i = role_index(role_of(b.owner.as_deref().unwrap_or("")));
        sums[i].0 = sums[i].0.saturating_add(b.size);
        sums[i].1 += 1;
    }
    if sums[..ROLES.len() - 1].iter().all(|s| s.1 == 0) {
        return None;
    }
    let parts: Vec<String> = ROLES
        .iter()
        .zip(sums)
        .filter(|(_, s)| s.1 > 0)
        .map(|(r, (b, n))| format!("{r} {:.6} Mb(s) in {n}", mib(b)))
        .collect();
    Some(format!("  by role: {}", parts.join(", ")))
}

/// The leak analysis as a bus layer (passes every event on unchanged).
#[derive(Default)]
pub struct LeakLayer {
    steps: StepTracker,
    ops: OpTracker,
    pool: HashMap<(EventType, u64), PoolBlock>,
    hal: HashMap<u64, HalBlock>,
    /// Whether any framework-pool block was seen: without one, "no leaks" would be a claim
    /// about memory that was not recorded.
    pool_seen: bool,
    /// Whether any HAL row was seen (offline, nothing else says whether HAL was traced).
    hal_seen: bool,
    /// Driver memory (HAL) is not traced in this run: no HAL section (issue 23: "There is no
    /// hal leak memory" would be a claim about memory nobody looked at).
    hal_untraced: bool,
}

impl LeakLayer {
    /// A fresh layer.
    pub fn new() -> LeakLayer {
        LeakLayer::default()
    }

    /// A layer for a run that does not trace driver memory (HAL): it reports pool leaks only.
    pub fn without_hal() -> LeakLayer {
        LeakLayer {
            hal_untraced: true,
            ..LeakLayer::default()
        }
    }

    fn observe(&mut self, ev: &Event, ctx: &BusCtx) {
        self.steps.observe(ev, ctx);
        self.ops.observe(ev);
        if let Some(tag) = memscope_core::roles::OwnerTag::from_event(ev) {
            // an owner (role) given after the MALLOC names the block from then on
            if let Some(b) = self.pool.get_mut(&(tag.pool, tag.addr)) {
                b.owner = Some(tag.owner);
            }
            return;
        }
        self.hal_seen |= ev.event_type == EventType::Hal;
        if ev.is_history_malloc() {
            return;
        }
        let (Some(m), Some(addr)) = (ev.memory(), ev.ptr.or_else(|| ev.memory().map(|m| m.addr)))
        else {
            return;
        };
        let addr = if m.addr != 0 { m.addr } else { addr };
        if ev.event_type.is_framework_pool() {
            let key = (ev.event_type, addr);
            match ev.kind {
                EventKind::Malloc => {
                    self.pool_seen = true;
                    let step = self.steps.current();
                    let keep = step >= 2;
                    self.pool.insert(
                        key,
                        PoolBlock {
                            id: ev.id,
                            ts_ns: ev.ts_ns,
                            addr,
                            device: ev.device,
                            pool: ev.event_type,
                            size: m.size,
                            step,
                            under: self.ops.label(ev),
                            owner: m.owner.as_ref().map(|o| o.to_string()),
                            stacks: keep.then(|| (ev.py_stack.clone(), ev.c_stack.clone())),
                        },
                    );
                }
                EventKind::Free if !m.shadow => {
                    self.pool.remove(&key);
                }
                _ => {}
            }
        } else if ev.event_type == EventType::Hal {
            match ev.kind {
                EventKind::Malloc => {
                    self.hal.insert(
                        addr,
                        HalBlock {
                            pid: ev.pid,
                            device: ev.device,
                            size: m.size,
                            site: crate::attribution::site_of(
                                ev.py_stack.as_deref(),
                                ev.c_stack.as_deref(),
                            )
                            .map(|s| s.label()),
                        },
                    );
                }
                EventKind::Free if !m.shadow => {
                    self.hal.remove(&addr);
                }
                _ => {}
            }
        }
    }

    fn leaked(&self) -> Vec<&PoolBlock> {
        let s_max = self.steps.closed_max();
        let mut leaks: Vec<&PoolBlock> = self
            .pool
            .values()
            .filter(|b| b.step >= 2 && s_max > b.step)
            .collect();
        leaks.sort_by_key(|b| (b.device, b.step, b.id));
        leaks
    }

    /// The pool leaks found so far (by the rule above), by device, step and ID.
    pub fn pool_leaks(&self) -> Vec<PoolLeak> {
        self.leaked()
            .into_iter()
            .map(|b| {
                let site = b.site();
                (b, site)
            })
            .map(|(b, site)| PoolLeak {
                id: b.id,
                ts_ns: b.ts_ns,
                addr: b.addr,
                device: b.device,
                pool: b.pool,
                size: b.size,
                step: b.step,
                under: b.where_label(site.as_ref()),
                site: site.as_ref().map(Site::label),
                site_rule: site.as_ref().map(|s| s.rule.describe()),
                owner: b.owner.clone(),
                py_stack: b.stacks.as_ref().and_then(|s| s.0.clone()),
                c_stack: b.stacks.as_ref().and_then(|s| s.1.clone()),
            })
            .collect()
    }

    /// HAL blocks live now (at the end: live at exit), by device, process and address.
    pub fn hal_live(&self) -> Vec<HalLive> {
        let mut v: Vec<HalLive> = self
            .hal
            .iter()
            .map(|(a, b)| HalLive {
                pid: b.pid,
                device: b.device,
                addr: *a,
                size: b.size,
                site: b.site.clone(),
            })
            .collect();
        v.sort_by_key(|h| (h.device, h.pid, h.addr));
        v
    }

    /// Whether any framework-pool block was recorded (without one, no leak was looked for).
    pub fn pool_recorded(&self) -> bool {
        self.pool_seen
    }

    /// The step running now (what a block allocated now is counted in).
    pub fn current_step(&self) -> u32 {
        self.steps.current()
    }

    /// Highest step that has ended.
    pub fn steps_ended(&self) -> u32 {
        self.steps.closed_max()
    }

    fn pool_report(&self, title: String) -> ReportSection {
        let s_max = self.steps.closed_max();
        let leaks = self.leaked();
        let (mut shown, mut all) = (Vec::new(), Vec::new());
        if !self.pool_seen {
            let none = format!(
                "Not recorded: no framework-pool block (PTA, MindSpore, ATB) was seen, so no leak was looked for ({s_max} step(s) ended)."
            );
            shown.push(none.clone());
            all.push(none);
        } else if leaks.is_empty() {
            let none = format!(
                "No memory pool leaks detected ({} step(s) ended; blocks of step 1 and of the last ended step are not judged).",
                s_max
            );
            shown.push(none.clone());
            all.push(none);
        }
        let mut i = 0;
        while i < leaks.len() {
            let dev = leaks[i].device;
            let group: Vec<(&PoolBlock, Option<Site>)> = leaks[i..]
                .iter()
                .take_while(|b| b.device == dev)
                .map(|b| (*b, b.site()))
                .collect();
            i += group.len();
            let head = format!(
                "====== ERROR: Detected memory leaks on device {} ======",
                dev.to_text()
            );
            shown.push(head.clone());
            all.push(head);
            for (b, site) in &group {
                leak_lines(b, site.as_ref(), true, &mut all);
            }
            shown.extend(top_n(
                &group,
                CONSOLE_TOP,
                |(b, site), out| leak_lines(b, site.as_ref(), false, out),
                |rest| {
                    let bytes: u64 = rest.iter().map(|(b, _)| b.size).sum();
                    let steps = (
                        rest.iter().map(|(b, _)| b.step).min().unwrap_or(0),
                        rest.iter().map(|(b, _)| b.step).max().unwrap_or(0),
                    );
                    format!(
                        "… {} more leak(s), {:.6} Mb(s), at steps {}–{}",
                        rest.len(),
                        mib(bytes),
                        steps.0,
                        steps.1
                    )
                },
            ));
            let sum = group
                .iter()
                .fold(0u64, |a, (b, _)| a.saturating_add(b.size));
            let summary = format!(
                "====== SUMMARY: {:.6} Mb(s) leaked in {} allocation(s) ======",
                mib(sum),
                group.len()
            );
            if let Some(l) = by_role(&group.iter().map(|(b, _)| *b).collect::<Vec<_>>()) {
                shown.push(l.clone());
                all.push(l);
            }
            shown.push(summary.clone());
            all.push(summary);
        }
        ReportSection::bounded(title, shown, all)
    }

    fn hal_report(&self, title: String) -> ReportSection {
        let mut live: Vec<(&u64, &HalBlock)> = self.hal.iter().collect();
        live.sort_by_key(|(a, b)| (b.device, b.pid, **a));
        // msMemScope's log line, then where the block was allocated
        let lines = |(addr, b): &(&u64, &HalBlock), out: &mut Vec<String>| {
            out.push(format!(
                "[client {}][device: {}]: Leak memory in Malloc operator, addr: 0x{:016x}, size: {} bytes",
                b.pid.map_or("N/A".to_owned(), |p| p.to_string()),
                b.device.to_text(),
                addr,
                b.size
            ));
            out.push(format!(
                "    at {}",
                b.site.as_deref().unwrap_or("(no call stack recorded)")
            ));
        };
        let more = |rest: &[(&u64, &HalBlock)]| format!("... and {} more", rest.len());
        let mut shown = top_n(&live, CONSOLE_TOP, lines, more);
        let mut all = top_n(&live, MAX_HAL_LINES, lines, more);
        let tail = if !self.hal_seen {
            "Not recorded: no driver (HAL) row was seen.".to_owned()
        } else if live.is_empty() {
            "There is no hal leak memory".to_owned()
        } else {
            let total: u64 = live.iter().map(|(_, b)| b.size).sum();
            format!(
                "{} HAL block(s), {:.6} Mb(s), live at exit (driver memory: not a leak by msMemScope's rule, which logs it; gate it with --fail-on hal_at_exit>SIZE)",
                live.len(),
                mib(total)
            )
        };
        shown.push(tail.clone());
        all.push(tail);
        ReportSection::bounded(title, shown, all)
    }
}

/// The lines of one pool leak: msMemScope's line, where in the user's code it was allocated,
/// and with `stacks`, its call stacks.
fn leak_lines(b: &PoolBlock, site: Option<&Site>, stacks: bool, out: &mut Vec<String>) {
    out.push(format!(
        "Direct {} leak of {:.6} Mb(s) at 0x{:016x} in {} at step {}. owner: {}",
        pool_name(b.pool),
        mib(b.size),
        b.addr,
        b.where_(site),
        b.step,
        b.owner.as_deref().unwrap_or("N/A"),
    ));
    match (site, &b.under) {
        // the line names the frame already: its caller and the rule
        (Some(s), Under::Nothing) => out.push(match &s.caller {
            Some(c) => format!("    called from {c} ({})", s.rule.describe()),
            None => format!("    ({})", s.rule.describe()),
        }),
        (Some(s), _) => out.push(format!("    at {} ({})", s.label(), s.rule.describe())),
        (None, _) => {}
    }
    if !stacks {
        return;
    }
    if let Some((py, c)) = &b.stacks {
        for (label, st) in [("Python", py), ("C", c)] {
            if let Some(st) = st
                .as_deref()
                .filter(|s| !s.trim().is_empty() && s.trim() != "NA")
            {
                out.push(format!("    Call Stack({label}):"));
                out.extend(
                    st.lines()
                        .filter(|l| !l.is_empty())
                        .map(|l| format!("        {l}")),
                );
            }
        }
    }
}

fn suffix(ctx: &BusCtx) -> String {
    ctx.pid.map_or(String::new(), |p| format!(" (pid {p})"))
}

impl Layer for LeakLayer {
    fn name(&self) -> &'static str {
        "leaks"
    }

    fn on_event(
        &mut self,
        ev: &mut Event,
        ctx: &BusCtx,
        _: &mut Vec<Event>,
    ) -> Result<Flow, BusError> {
        self.observe(ev, ctx);
        Ok(Flow::Pass)
    }

    fn finish(
        &mut self,
        ctx: &BusCtx,
        _out: &mut Vec<Event>,
        report: &mut Vec<ReportSection>,
    ) -> Result<(), BusError> {
        let sfx = suffix(ctx);
        report.push(self.pool_report(format!("Memory pool leaks{sfx}")));
        if !self.hal_untraced {
            report.push(self.hal_report(format!("HAL memory live at exit{sfx}")));
        }
        Ok(())
    }
}
