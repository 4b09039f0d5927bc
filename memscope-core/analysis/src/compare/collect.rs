//! One side of a compare: per device, the op or kernel sequence and the memory change of each
//! entry, read in file order with memory O(entries + pool events) (no sort needed).
//!
//! * Level op: ATEN_START…ATEN_END and ATB_START…ATB_END pairs, matched per process, thread and
//!   family by name (an END closes the innermost open START of that name). Sequence order is
//!   the START order.
//! * Level kernel: KERNEL_LAUNCH rows, each lasting until the next launch on the device.
//! * Memory change of an entry: net bytes (MALLOC − FREE) of the framework pools recorded on the
//!   device with a key (timestamp, ID) inside the entry; of HAL when the file has no pool
//!   event. 2025 HAL FREEs without a device take the device of their MALLOC.
//!
//! The values come from prefix sums over the sorted memory deltas, so row order in the file
//! does not matter.

use std::collections::{BTreeMap, HashMap};

use memscope_core::event::{Device, Event, EventKind, EventType};
use memscope_dump::reader::{DumpFile, Order, ReadError, ReadOptions, ReadStats};

use super::Level;

type Key = (u64, u64);
/// Open op STARTs per (pid, tid, ATB family): (name, start key, device).
type OpenOps = HashMap<(Option<u32>, Option<u32>, bool), Vec<(u32, Key, u32)>>;

/// One op or kernel of one device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Index into [`Sequence::names`].
    pub name: u32,
    /// Net bytes allocated during the entry.
    pub delta: i64,
    /// The step it started in (spec §10.1 numbering: msTX `step start` ranges, or SYSTEM/STEP
    /// rows, call *k* starting step *k + 1*); 0 before the first step.
    pub step: u32,
}

/// One side of a compare.
#[derive(Clone, Debug, Default)]
pub struct Sequence {
    /// Distinct names (`N/A` for unnamed kernels).
    pub names: Vec<String>,
    /// Entries per device, in sequence order.
    pub devices: BTreeMap<u32, Vec<Entry>>,
    /// Whether the values count HAL memory (the file has no pool events).
    pub used_hal: bool,
    /// START rows without an END (left out).
    pub unmatched: u64,
    /// END rows without a START (left out).
    pub unmatched_ends: u64,
    /// What the read went through (a torn last row, for a warning).
    pub stats: ReadStats,
}

#[derive(Default)]
struct DeviceData {
    spans: Vec<(Key, Option<Key>, u32)>,
    pool: Vec<(Key, i64)>,
    hal: Vec<(Key, i64)>,
}

#[derive(Default)]
struct Collector {
    level: Option<Level>,
    names: Vec<String>,
    name_ids: HashMap<String, u32>,
    dev: BTreeMap<u32, DeviceData>,
    open: OpenOps,
    hal_dev: HashMap<(Option<u32>, u64), u32>,
    has_pool: bool,
    unmatched: u64,
    unmatched_ends: u64,
    /// Keys of msTX `step start` range starts and of SYSTEM/STEP rows.
    mstx_steps: Vec<Key>,
    py_steps: Vec<Key>,
}

impl Collector {
    fn name_id(&mut self, name: Option<&str>) -> u32 {
        let n = name.unwrap_or("N/A");
        if let Some(i) = self.name_ids.get(n) {
            return *i;
        }
        let i = self.names.len() as u32;
        self.names.push(n.to_owned());
        self.name_ids.insert(n.to_owned(), i);
        i
    }

    fn observe(&mut self, ev: &Event) {
        let key = (ev.ts_ns, ev.id);
        let npu = match ev.device {
            Device::Npu(d) => Some(d),
            _ => None,
        };
        match ev.kind {
            EventKind::Mstx
                if ev.event_type == EventType::RangeStart
                    && ev.name.as_deref() == Some(memscope_core::bus::STEP_RANGE_NAME) =>
            {
                self.mstx_steps.push(key);
            }
            EventKind::System if ev.event_type == EventType::Step => self.py_steps.push(key),
            EventKind::OpLaunch if self.level == Some(Level::Op) => {
                let Some(d) = npu else { return };
                let atb = matches!(ev.event_type, EventType::AtbStart | EventType::AtbEnd);
                let name = self.name_id(ev.name.as_deref());
                let stack = self.open.entry((ev.pid, ev.tid, atb)).or_default();
                match ev.event_type {
                    EventType::AtenStart | EventType::AtbStart => stack.push((name, key, d)),
                    _ => {
                        if let Some(pos) = stack.iter().rposition(|(n, _, _)| *n == name) {
                            self.unmatched += (stack.len() - pos - 1) as u64;
                            let (_, start, sd) = stack[pos];
                            stack.truncate(pos);
                            self.dev
                                .entry(sd)
                                .or_default()
                                .spans
                                .push((start, Some(key), name));
                        } else {
                            self.unmatched_ends += 1;
                        }
                    }
                }
            }
            EventKind::KernelLaunch
                if self.level == Some(Level::Kernel)
                    && ev.event_type == EventType::KernelLaunch =>
            {
                let Some(d) = npu else { return };
                let name = self.name_id(ev.name.as_deref());
                self.dev.entry(d).or_default().spans.push((key, None, name));
            }
            EventKind::Malloc | EventKind::Free => {
                let size = ev.memory().map_or(0, |m| m.size) as i64;
                let delta = if ev.kind == EventKind::Malloc {
                    size
                } else {
                    -size
                };
                if ev.event_type.is_framework_pool() {
                    let Some(d) = npu else { return };
                    if !self.has_pool {
                        self.has_pool = true;
                        self.hal_dev = HashMap::new();
                        for dd in self.dev.values_mut() {
                            dd.hal = Vec::new();
                        }
                    }
                    self.dev.entry(d).or_default().pool.push((key, delta));
                } else if ev.event_type == EventType::Hal && !self.has_pool {
                    let addr = ev.ptr.or_else(|| ev.memory().map(|m| m.addr)).unwrap_or(0);
                    let d = if ev.kind == EventKind::Malloc {
                        if let Some(d) = npu {
                            self.hal_dev.insert((ev.pid, addr), d);
                        }
                        npu
                    } else {
                        self.hal_dev.remove(&(ev.pid, addr)).or(npu)
                    };
                    if let Some(d) = d {
                        self.dev.entry(d).or_default().hal.push((key, delta));
                    }
                }
            }
            _ => {}
        }
    }

    fn finish(mut self) -> Sequence {
        self.unmatched += self.open.values().map(|s| s.len() as u64).sum::<u64>();
        // step() calls win over msTX ranges when a file has both (spec §3: the first source
        // seen wins; a file rarely holds both)
        let (mut bounds, py) = if self.py_steps.is_empty() {
            (std::mem::take(&mut self.mstx_steps), 0)
        } else {
            (std::mem::take(&mut self.py_steps), 1)
        };
        bounds.sort_unstable();
        // device-less rows are copied into every device file of a process: count each once
        bounds.dedup();
        let step_at = |k: Key| -> u32 {
            let n = bounds.partition_point(|b| *b <= k) as u32;
            if n == 0 {
                0
            } else {
                n + py
            }
        };
        let mut seq = Sequence {
            names: self.names,
            used_hal: !self.has_pool,
            unmatched: self.unmatched,
            unmatched_ends: self.unmatched_ends,
            ..Sequence::default()
        };
        for (d, mut data) in self.dev {
            let mut deltas = if self.has_pool { data.pool } else { data.hal };
            deltas.sort_unstable();
            let mut prefix = Vec::with_capacity(deltas.len() + 1);
            prefix.push(0i64);
            for (_, v) in &deltas {
                // saturating: sizes are < 2^63 each, but a hostile dump can sum past i64
                prefix.push(prefix[prefix.len() - 1].saturating_add(*v));
            }
            let lt = |k: Key| prefix[deltas.partition_point(|x| x.0 < k)];
            let le = |k: Key| prefix[deltas.partition_point(|x| x.0 <= k)];
            data.spans.sort_unstable_by_key(|s| (s.0, s.1));
            let n = data.spans.len();
            let mut entries = Vec::with_capacity(n);
            for i in 0..n {
                let (start, end, name) = data.spans[i];
                let delta = match end {
                    Some(e) => le(e).saturating_sub(lt(start)),
                    None => match data.spans.get(i + 1) {
                        Some(next) => lt(next.0).saturating_sub(lt(start)),
                        None => prefix[deltas.len()].saturating_sub(lt(start)),
                    },
                };
                entries.push(Entry {
                    name,
                    delta,
                    step: step_at(start),
                });
            }
            if !entries.is_empty() {
                seq.devices.insert(d, entries);
            }
        }
        seq
    }
}

/// Reads one side of a compare.
///
/// # Errors
/// As [`DumpFile::for_each`].
pub fn collect(
    file: &DumpFile,
    level: Level,
    opts: &mut ReadOptions,
) -> Result<Sequence, ReadError> {
    let mut c = Collector {
        level: Some(level),
        ..Collector::default()
    };
    let stats = file.for_each(Order::File, opts, &mut |ev| {
        c.observe(&ev);
        Ok(())
    })?;
    let mut seq = c.finish();
    seq.stats = stats;
    Ok(seq)
}

/// Builds one side from events already in memory (tests, online use).
pub fn collect_events<'a>(events: impl IntoIterator<Item = &'a Event>, level: Level) -> Sequence {
    let mut c = Collector {
        level: Some(level),
        ..Collector::default()
    };
    for ev in events {
        c.observe(ev);
    }
    c.finish()
}

/// Builds one side from events pushed one at a time (any order), e.g. a run's processes
/// replayed one after another.
pub struct SequenceBuilder(Collector);

impl SequenceBuilder {
    /// An empty side at `level`.
    pub fn new(level: Level) -> SequenceBuilder {
        SequenceBuilder(Collector {
            level: Some(level),
            ..Collector::default()
        })
    }

    /// Adds one event.
    pub fn observe(&mut self, ev: &Event) {
        self.0.observe(ev);
    }

    /// The side.
    pub fn finish(self) -> Sequence {
        self.0.finish()
    }
}
