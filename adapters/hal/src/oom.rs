//! Out-of-memory capture, collector side: a bus [`Layer`] that completes the rows the HAL
//! typer emits when `halMemAlloc`/`halMemCreate` fail with `DRV_ERROR_OUT_OF_MEMORY`
//! (behaviour spec §6, §9.10, §10.6).
//!
//! It watches every collected MALLOC/FREE row and keeps, per device, the live blocks of the
//! `HAL` allocator and of the framework pools `PTA` (caching), `ATB` and `MindSpore` (the
//! pools msMemScope scans; the PTA workspace pool is left out like there), with their MALLOC
//! time and call stacks, plus the latest `used`/`total` figures of every framework pool.
//!
//! On the `SNAPSHOT` row named `OOM_Snapshot` it replaces the Attr with the snapshot figures of
//! the failing device, under the seed's keys (seed table 2; msMemScope's own spellings in
//! brackets): `total_mem`, `free_mem` (`total`, `free`: device memory as the runtime reported
//! it; 0 when it did not, as msMemScope writes them, and the log says so), `reserved` and
//! `allocated` (sums of the framework pools' `total` and `used`), `peak_reserved`,
//! `peak_allocated` (`max_*`: their peaks so far), `device_utilization = (total-free)/total*100`
//! (`device_rate`; 0 without device figures) and `pt_utilization = allocated/reserved*100`
//! (`reserved_rate`); all eight on every row, rates with 6 decimals as msMemScope prints them.
//!
//! With `--analysis oom[:K]` the typer follows the snapshot with an `OOM_TRIGGER` row
//! (`{func,req_size,flag}`) and K `OOM_RECENT_ALLOC` and K `OOM_TOP_ALLOC` placeholders; this
//! layer fills them with the K most recently allocated and the K largest live blocks, each
//! `{pool:<HAL|PTA|ATB|MindSpore>,ptr:0x..,size:N,timestamp:<MALLOC ns>}` with the MALLOC's
//! stacks, and drops the placeholders it cannot fill. Unless another detail dump happened less
//! than 2 s earlier (msMemScope's rule): then the trigger and detail rows are dropped and only
//! the snapshot stays. When memory events are not collected at all (no alloc/free/access and
//! no memory analysis) every OOM row is dropped, as msMemScope runs its OOM path only while
//! alloc/free tracing is on. All other rows pass through unchanged.

use crate::typer::{set_oom_top_k, OOM_FUNC_KEY, OOM_SNAPSHOT};
use memscope_collect::config::RunConfig;
use memscope_core::bus::{BusCtx, BusError, Flow, Layer};
use memscope_core::event::{Attrs, Device, Event, EventKind, EventType};
use memscope_core::snapshot::seed_key;
use std::collections::{HashMap, VecDeque};

/// Minimum time between two detail dumps, ns (behaviour spec §10.6).
pub const DETAIL_INTERVAL_NS: u64 = 2_000_000_000;

/// A live block as the OOM rows describe it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Live {
    pool: EventType,
    ptr: u64,
    size: u64,
    ts: u64,
    seq: u64,
    py_stack: Option<String>,
    c_stack: Option<String>,
}

/// The OOM layer of one process.
#[derive(Debug, Default)]
pub struct OomLayer {
    memory: bool,
    live: HashMap<(EventType, Device, u64), Live>,
    pool_used: HashMap<(EventType, Device), i64>,
    pool_total: HashMap<(EventType, Device), i64>,
    peaks: HashMap<Device, (i64, i64)>,
    last_detail: Option<u64>,
    seq: u64,
    recent: VecDeque<Live>,
    top: VecDeque<Live>,
    dropping_detail: bool,
}

/// Whether `t` is scanned for OOM detail rows.
fn scanned(t: EventType) -> bool {
    matches!(
        t,
        EventType::Hal | EventType::Pta | EventType::Atb | EventType::MindSpore
    )
}

fn pairs(ev: &Event) -> &[(String, String)] {
    match &ev.attrs {
        Attrs::Pairs(p) => p,
        _ => &[],
    }
}

fn pct(num: i64, den: i64) -> String {
    let r = if den > 0 {
        num as f64 / den as f64 * 100.0
    } else {
        0.0
    };
    format!("{r:.6}")
}

impl OomLayer {
    /// The layer for a run configured by `cfg`. Also tells the HAL typers built afterwards how
    /// many detail rows to reserve (`--analysis oom:K`).
    pub fn new(cfg: &RunConfig) -> OomLayer {
        set_oom_top_k(cfg.analysis.oom);
        let (e, a) = (cfg.events, cfg.analysis);
        let memory = e.alloc
            || e.free
            || e.access
            || a.leaks
            || a.decompose
            || a.inefficient
            || a.races
            || a.oom.is_some();
        OomLayer::with_memory(memory)
    }

    /// A layer that keeps (`memory` true) or drops the OOM rows, without touching the typers'
    /// K (for tests and offline use).
    pub fn with_memory(memory: bool) -> OomLayer {
        OomLayer {
            memory,
            ..OomLayer::default()
        }
    }

    fn watch(&mut self, ev: &Event) {
        let Some(m) = ev.memory() else { return };
        if ev.event_type.is_framework_pool() {
            let key = (ev.event_type, ev.device);
            if let Some(u) = m.used {
                self.pool_used.insert(key, u);
            }
            if let Some(t) = m.total {
                self.pool_total.insert(key, t);
            }
            let (reserved, allocated) = self.figures(ev.device);
            let p = self.peaks.entry(ev.device).or_default();
            *p = (p.0.max(reserved), p.1.max(allocated));
        }
        if !scanned(ev.event_type) {
            return;
        }
        let key = (ev.event_type, ev.device, m.addr);
        match ev.kind {
            EventKind::Malloc => {
                self.seq += 1;
                let live = Live {
                    pool: ev.event_type,
                    ptr: m.addr,
                    size: m.size,
                    ts: ev.ts_ns,
                    seq: self.seq,
                    py_stack: ev.py_stack.clone(),
                    c_stack: ev.c_stack.clone(),
                };
                self.live.insert(key, live);
            }
            EventKind::Free => {
                self.live.remove(&key);
            }
            _ => {}
        }
    }

    /// (reserved, allocated) of the framework pools on `device`.
    fn figures(&self, device: Device) -> (i64, i64) {
        let sum = |m: &HashMap<(EventType, Device), i64>| -> i64 {
            m.iter()
                .filter(|((_, d), _)| *d == device)
                .map(|(_, v)| *v)
                .fold(0i64, |a, b| a.saturating_add(b))
        };
        (sum(&self.pool_total), sum(&self.pool_used))
    }

    fn snapshot(&mut self, ev: &mut Event) {
        let find = |k: &str| {
            pairs(ev)
                .iter()
                .find(|(key, _)| seed_key(key) == k)
                .and_then(|(_, v)| v.parse::<i64>().ok())
        };
        // All eight of the seed's keys on every row (issue 27), as msMemScope writes them: device
        // figures the runtime did not report are 0 (the typer says so in the log).
        let (total, free) = match (find("total_mem"), find("free_mem")) {
            (Some(t), Some(f)) if t > 0 => (t, f),
            _ => (0, 0),
        };
        let (reserved, allocated) = self.figures(ev.device);
        let (max_r, max_a) = self.peaks.get(&ev.device).copied().unwrap_or_default();
        let a: Vec<(String, String)> = vec![
            ("total_mem".into(), total.to_string()),
            ("free_mem".into(), free.to_string()),
            ("reserved".into(), reserved.to_string()),
            ("peak_reserved".into(), max_r.max(reserved).to_string()),
            ("allocated".into(), allocated.to_string()),
            ("peak_allocated".into(), max_a.max(allocated).to_string()),
            ("device_utilization".into(), pct(total - free, total)),
            ("pt_utilization".into(), pct(allocated, reserved)),
        ];
        ev.attrs = Attrs::Pairs(a);
        // Prepare the detail rows that follow (if the typer reserved any).
        self.dropping_detail = self
            .last_detail
            .is_some_and(|t| ev.ts_ns.saturating_sub(t) < DETAIL_INTERVAL_NS);
        let mut blocks: Vec<Live> = self
            .live
            .iter()
            .filter(|((_, d, _), _)| *d == ev.device)
            .map(|(_, l)| l.clone())
            .collect();
        blocks.sort_by(|x, y| y.ts.cmp(&x.ts).then(y.seq.cmp(&x.seq)));
        self.recent = blocks.iter().cloned().collect();
        blocks.sort_by(|x, y| y.size.cmp(&x.size).then(y.seq.cmp(&x.seq)));
        self.top = blocks.into();
    }

    fn fill(&mut self, mut ev: Event) -> Option<Event> {
        let list = match ev.event_type {
            EventType::OomRecentAlloc => &mut self.recent,
            _ => &mut self.top,
        };
        let b = list.pop_front()?;
        ev.attrs = Attrs::Pairs(vec![
            ("pool".into(), b.pool.as_str().to_owned()),
            ("ptr".into(), format!("0x{:016x}", b.ptr)),
            ("size".into(), b.size.to_string()),
            ("timestamp".into(), b.ts.to_string()),
        ]);
        ev.py_stack = b.py_stack;
        ev.c_stack = b.c_stack;
        Some(ev)
    }
}

impl Layer for OomLayer {
    fn name(&self) -> &'static str {
        "oom"
    }

    fn on_event(
        &mut self,
        ev: &mut Event,
        _: &BusCtx,
        out: &mut Vec<Event>,
    ) -> Result<Flow, BusError> {
        let pass = |yes: bool| if yes { Flow::Pass } else { Flow::Stop };
        Ok(match ev.event_type {
            EventType::Snapshot
                if ev.name.as_deref() == Some(OOM_SNAPSHOT)
                    && pairs(ev).iter().any(|(k, _)| k == OOM_FUNC_KEY) =>
            {
                if self.memory {
                    self.snapshot(ev);
                }
                pass(self.memory)
            }
            EventType::OomTrigger => {
                let keep = self.memory && !self.dropping_detail;
                if keep {
                    self.last_detail = Some(ev.ts_ns);
                }
                pass(keep)
            }
            EventType::OomRecentAlloc | EventType::OomTopAlloc if pairs(ev).is_empty() => {
                if self.memory && !self.dropping_detail {
                    out.extend(self.fill(ev.take()));
                }
                Flow::Stop
            }
            _ => {
                self.watch(ev);
                Flow::Pass
            }
        })
    }
}

#[cfg(test)]
#[path = "oom_tests.rs"]
mod tests;
