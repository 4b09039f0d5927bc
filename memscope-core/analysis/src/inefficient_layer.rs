//! The inefficient-memory analysis as a bus layer.
//!
//! **Online (annotate mode).** The types of a block are final only when the block is freed, but
//! its MALLOC row must carry them (Attr `inefficient:<types>`) and rows must reach the sinks in
//! ID order. So the layer holds events back: a queue starts at the oldest MALLOC whose block is
//! still being classified; everything after it waits too. When the block's result is known its
//! row is annotated and the queue drains up to the next waiting MALLOC.
//!
//! The queue is bounded by `cap` events. Past the cap the oldest events are released anyway (a
//! long-lived block, such as a weight, would otherwise hold the whole run back); their MALLOC
//! rows go out unannotated, and types found for them later are listed in the report instead.
//! The report says how many rows this concerned and the largest queue length seen.
//!
//! **Offline (collect mode).** Events pass through at once and the findings are handed to the
//! caller at `finish` (`memscope analyze inefficient` writes them into a new copy of the input).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};

use memscope_core::bus::{BusCtx, BusError, Flow, Layer, ReportSection};
use memscope_core::event::{Event, Inefficiency};

use super::inefficient::{Finding, IneffConfig, IneffTracker};

/// Default cap of the held-back queue, in events.
pub const DEFAULT_HOLD_BACK_CAP: usize = 1 << 18;

/// Findings shared with the caller in collect mode (only blocks with at least one type).
pub type FindingsHandle = Arc<Mutex<Vec<Finding>>>;

type Key = (Option<u32>, u64);

/// Inefficient-memory layer.
pub struct InefficientLayer {
    tracker: IneffTracker,
    collect: Option<FindingsHandle>,
    collected: Vec<Finding>,
    cap: usize,
    queue: VecDeque<(Event, bool)>,
    base: u64,
    waiting: HashMap<Key, u64>,
    released: HashSet<Key>,
    late: Vec<Finding>,
    forced: u64,
    counts: [u64; 3],
    /// Innermost Python frame of each tracked MALLOC row that has one (until classified).
    frames: HashMap<Key, Arc<str>>,
    /// Blocks per (type, allocating Python frame).
    sites: HashMap<(Inefficiency, Arc<str>), u64>,
}

/// Allocation sites listed per type in the report.
pub const MAX_SITES: usize = 5;

impl InefficientLayer {
    /// Annotate mode with a queue of at most `cap` events (online).
    pub fn annotating(cfg: IneffConfig, cap: usize) -> InefficientLayer {
        InefficientLayer {
            tracker: IneffTracker::new(cfg),
            collect: None,
            collected: Vec::new(),
            cap: cap.max(1),
            queue: VecDeque::new(),
            base: 0,
            waiting: HashMap::new(),
            released: HashSet::new(),
            late: Vec::new(),
            forced: 0,
            counts: [0; 3],
            frames: HashMap::new(),
            sites: HashMap::new(),
        }
    }

    /// Collect mode (offline): events pass through; findings go to the returned handle.
    pub fn collecting(cfg: IneffConfig) -> (InefficientLayer, FindingsHandle) {
        let h: FindingsHandle = Arc::default();
        let mut l = InefficientLayer::annotating(cfg, 1);
        l.collect = Some(h.clone());
        (l, h)
    }

    fn apply(&mut self, f: Finding) {
        let frame = self.frames.remove(&(f.pid, f.malloc_id));
        for t in &f.types {
            self.counts[*t as usize] += 1;
            if let Some(fr) = &frame {
                *self.sites.entry((*t, fr.clone())).or_default() += 1;
            }
        }
        if self.collect.is_some() {
            if !f.types.is_empty() {
                self.collected.push(f);
            }
            return;
        }
        let key = (f.pid, f.malloc_id);
        if let Some(seq) = self.waiting.remove(&key) {
            if let Some((ev, wait)) = self.queue.get_mut((seq - self.base) as usize) {
                *wait = false;
                if let Some(m) = ev.memory_mut() {
                    for t in f.types {
                        if !m.inefficient.contains(&t) {
                            m.inefficient.push(t);
                        }
                    }
                }
            }
        } else if self.released.remove(&key) && !f.types.is_empty() {
            self.late.push(f);
        }
    }

    fn drain(&mut self, out: &mut Vec<Event>) {
        while self.queue.front().is_some_and(|(_, w)| !w) {
            if let Some((ev, _)) = self.queue.pop_front() {
                out.push(ev);
                self.base += 1;
            }
        }
        while self.queue.len() > self.cap {
            if let Some((ev, wait)) = self.queue.pop_front() {
                if wait {
                    let key = (ev.pid, ev.id);
                    self.waiting.remove(&key);
                    self.released.insert(key);
                    self.forced += 1;
                }
                out.push(ev);
                self.base += 1;
            }
            while self.queue.front().is_some_and(|(_, w)| !w) {
                if let Some((ev, _)) = self.queue.pop_front() {
                    out.push(ev);
                    self.base += 1;
                }
            }
        }
    }

    /// The report's lines, listing at most `late_max` of the rows written unannotated.
    fn report(&self, late_max: usize) -> Vec<String> {
        let mut lines: Vec<String> = [
            Inefficiency::EarlyAllocation,
            Inefficiency::LateDeallocation,
            Inefficiency::TemporaryIdleness,
        ]
        .iter()
        .flat_map(|t| {
            let mut v = vec![format!(
                "{}: {} block(s)",
                t.as_str(),
                self.counts[*t as usize]
            )];
            let mut sites: Vec<(&Arc<str>, u64)> = self
                .sites
                .iter()
                .filter(|((st, _), _)| st == t)
                .map(|((_, fr), n)| (fr, *n))
                .collect();
            sites.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
            v.extend(
                sites
                    .iter()
                    .take(MAX_SITES)
                    .map(|(fr, n)| format!("    allocated at {fr}: {n} block(s)")),
            );
            v
        })
        .collect();
        if self.collect.is_none() && self.forced > 0 {
            // the queue's size is internal; that rows went out unannotated is the user's news
            lines.push(format!(
                "WARNING: {} MALLOC row(s) were written before their block was classified (the analysis holds at most {} rows back); their classes:",
                self.forced, self.cap
            ));
            for f in self.late.iter().take(late_max) {
                let t: Vec<&str> = f.types.iter().map(|t| t.as_str()).collect();
                lines.push(format!(
                    "  MALLOC ID {} (written unannotated): {}",
                    f.malloc_id,
                    t.join(",")
                ));
            }
            if self.late.len() > late_max {
                lines.push(format!("  ... and {} more", self.late.len() - late_max));
            }
        }
        lines
    }
}

impl Layer for InefficientLayer {
    fn name(&self) -> &'static str {
        "inefficient"
    }

    fn on_event(
        &mut self,
        ev: &mut Event,
        _ctx: &BusCtx,
        out: &mut Vec<Event>,
    ) -> Result<Flow, BusError> {
        let obs = self.tracker.observe(ev);
        if obs.tracked_malloc {
            let site = crate::attribution::site_of(ev.py_stack.as_deref(), ev.c_stack.as_deref());
            if let Some(site) = site {
                self.frames.insert((ev.pid, ev.id), site.frame.into());
            }
        }
        let flow = if self.collect.is_some() {
            Flow::Pass
        } else {
            if obs.tracked_malloc {
                self.waiting
                    .insert((ev.pid, ev.id), self.base + self.queue.len() as u64);
            }
            self.queue.push_back((ev.take(), obs.tracked_malloc));
            Flow::Stop
        };
        for f in obs.findings {
            self.apply(f);
        }
        self.drain(out);
        Ok(flow)
    }

    fn finish(
        &mut self,
        ctx: &BusCtx,
        out: &mut Vec<Event>,
        report: &mut Vec<ReportSection>,
    ) -> Result<(), BusError> {
        for f in self.tracker.finish() {
            self.apply(f);
        }
        out.extend(self.queue.drain(..).map(|(e, _)| e));
        self.waiting.clear();
        if let Some(h) = &self.collect {
            // published only here, so a layer dropped unfinished (a restarted read) adds nothing
            h.lock()
                .map_err(|_| BusError::Other("inefficient: poisoned lock".into()))?
                .append(&mut self.collected);
        }
        let sfx = ctx.pid.map_or(String::new(), |p| format!(" (pid {p})"));
        report.push(ReportSection::bounded(
            format!("Inefficient memory{sfx}"),
            self.report(memscope_core::listing::CONSOLE_TOP),
            self.report(100),
        ));
        Ok(())
    }
}
