//! Decompose: bytes per owner chain, per device and allocator (Event Type), at the allocator's
//! peak and at the end of the run (issue 6 §5, behaviour spec §7).
//!
//! * The owner of a block is its MALLOC's `owner` attribute; a HAL block without one but with a
//!   module id (2025 `MID:n`) is `CANN@<MODULE>`; otherwise `(no owner)`. An owner that names
//!   nothing (`(no owner)`, or only the pool itself: `PTA`, the tag torch_npu gives every
//!   untagged block) is split by the first frame of the user's code on the row when it has a
//!   stack: `PTA at file(line): function`.
//! * Allocators are kept apart (a pool's blocks live inside HAL memory, so adding them would
//!   count bytes twice): the peak is the moment the allocator's live bytes on that device were
//!   highest (the first such moment), and the table shows how those bytes split by owner.
//! * A synthetic FREE marked `shadow:true` (msMemScope closes every block at exit with one) does
//!   not end a block, so "end" shows what was live at exit.
//! * An owner given to a live block after its MALLOC (a SYSTEM `MEMORY_OWNER` row: a framework
//!   hook's role tag, `describer(addr, …)`) is the block's owner for its whole life, at the
//!   peak too ([`memscope_core::roles`]).
//! * Memory: one entry per live block, plus the blocks live at the peak and freed since (a
//!   list emptied at each new peak): O(1) amortised per event, as in [`super::peak`].
//! * The CSV's last column is the owner's role; the console adds a "Memory by role" section
//!   when any block has a role ([`super::role_timeline`]).
//!
//! Console table plus, when an output folder is set, `decompose_{ts}.csv` — only for a process
//! that had rows: the event-less processes of a launcher (a pyenv shim, a shell) get neither a
//! file nor a folder.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use memscope_core::bus::{BusCtx, BusError, Flow, Layer, ReportSection};
use memscope_core::event::{Device, Event, EventKind, EventType};
use memscope_core::roles::{role_and_detail, role_index, role_of, OwnerTag, ROLES};

use super::cann::module_name;
use super::mib;
use super::outfile::create_unique;
use super::role_timeline::{Activations, Key, Levels, RoleTimeline, StepAlloc, N};

/// Header of `decompose_{ts}.csv`.
pub const DECOMPOSE_HEADER: &str =
    "Process Id,Device Id,Event Type,Owner,Peak Memory(byte),End Memory(byte),Role";

/// Rows shared with the caller by [`DecomposeLayer::collecting`], with their process.
pub type RowsHandle = Arc<Mutex<Vec<(Option<u32>, DecomposeRow)>>>;

/// Live bytes of one allocator on one device, and its peak.
#[derive(Default)]
struct Allocator {
    total: i64,
    peak: i64,
    /// Sequence number of the event after which the live bytes were highest (0: none yet).
    peak_seq: u64,
    /// (owner, bytes) of the blocks live at the peak and freed since (emptied at each new
    /// peak): with the blocks still live allocated up to `peak_seq`, what was live at it.
    freed_since_peak: Vec<(u32, u64)>,
}

/// A live block: its allocator's device, owner, bytes, sequence number and time of its MALLOC.
#[derive(Clone, Copy)]
struct Live {
    device: Device,
    owner: u32,
    size: u64,
    seq: u64,
    ts: u64,
}

/// The owner of a MALLOC row as decompose counts it: its `owner` chain; for a HAL block
/// without one but with a module id (2025 `MID:n`), `CANN@<MODULE>`; otherwise `(no owner)`.
pub fn owner_label(ev: &Event) -> String {
    let Some(m) = ev.memory() else {
        return "(no owner)".to_owned();
    };
    match (&m.owner, m.module_id) {
        (Some(o), _) if !o.is_empty() => o.to_string(),
        (_, Some(mid)) if ev.event_type == EventType::Hal => {
            format!("CANN@{}", module_name(mid))
        }
        _ => "(no owner)".to_owned(),
    }
}

/// The owner a decompose row counts a MALLOC under: [`owner_label`]; a block whose owner names
/// nothing — none, or only its pool (`PTA` for a PTA block) — and whose row has a call stack is
/// counted under the first frame of the user's code too ([`crate::attribution`]): `(no
/// owner) at file(line): function`, `PTA at file(line): function` (issues 13, 23), so untagged
/// memory still names its code.
pub fn decompose_label(ev: &Event) -> String {
    let label = owner_label(ev);
    if label != "(no owner)" && label != ev.event_type.as_str() {
        return label;
    }
    match crate::attribution::site_of(ev.py_stack.as_deref(), ev.c_stack.as_deref()) {
        Some(site) => format!("{label} at {}", site.label()),
        None => label,
    }
}

/// One line of the result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecomposeRow {
    /// Device.
    pub device: Device,
    /// Allocator (Event Type).
    pub pool: EventType,
    /// Owner chain (`A@B@C`, or `(no owner)`).
    pub owner: String,
    /// Bytes of this owner when the allocator peaked.
    pub peak: i64,
    /// Bytes of this owner live at the end.
    pub end: i64,
}

/// The decompose analysis as a bus layer (passes events on unchanged).
#[derive(Default)]
pub struct DecomposeLayer {
    out_dir: Option<PathBuf>,
    collect: Option<RowsHandle>,
    owners: Vec<String>,
    owner_ids: HashMap<String, u32>,
    live: HashMap<(EventType, u64), Live>,
    alloc: BTreeMap<(Device, EventType), Allocator>,
    seq: u64,
    /// Bytes by role over time (issue 25), fed as blocks come, go and get tagged.
    timeline: RoleTimeline,
    /// The process had any row at all.
    seen: bool,
}

impl DecomposeLayer {
    /// A layer that writes `decompose_{ts}.csv` into `out_dir` at the end, when given.
    pub fn new(out_dir: Option<PathBuf>) -> DecomposeLayer {
        DecomposeLayer {
            out_dir,
            ..DecomposeLayer::default()
        }
    }

    /// A layer that hands its rows to the returned handle at the end instead of writing a file
    /// (offline: one file for all processes of a dump, see [`write_decompose_csv`]).
    pub fn collecting() -> (DecomposeLayer, RowsHandle) {
        let h = RowsHandle::default();
        (
            DecomposeLayer {
                collect: Some(h.clone()),
                ..DecomposeLayer::default()
            },
            h,
        )
    }

    fn owner_id(&mut self, name: String) -> u32 {
        if let Some(i) = self.owner_ids.get(&name) {
            return *i;
        }
        let i = self.owners.len() as u32;
        self.owners.push(name.clone());
        self.owner_ids.insert(name, i);
        i
    }

    fn remove(&mut self, pool: EventType, key: (EventType, u64), ts: u64) {
        let Some(b) = self.live.remove(&key) else {
            return;
        };
        let a = self.alloc.entry((b.device, pool)).or_default();
        a.total = a.total.saturating_sub(b.size as i64);
        if a.peak_seq != 0 && b.seq <= a.peak_seq {
            a.freed_since_peak.push((b.owner, b.size));
        }
        self.timeline
            .free(&self.owners, (b.device, pool), b.owner, b.size, b.seq, ts);
    }

    fn observe(&mut self, ev: &Event, ctx: &BusCtx) {
        self.seq += 1;
        self.timeline.step(ctx, self.seq, ev.ts_ns);
        if let Some(tag) = OwnerTag::from_event(ev) {
            // a role given after the MALLOC counts from the MALLOC on
            let oid = self.owner_id(tag.owner);
            if let Some(b) = self.live.get_mut(&(tag.pool, tag.addr)) {
                let old = std::mem::replace(&mut b.owner, oid);
                let b = *b;
                self.timeline.retag(
                    &self.owners,
                    (b.device, tag.pool),
                    old,
                    oid,
                    b.size,
                    b.seq,
                    b.ts,
                );
            }
            return;
        }
        let Some(m) = ev.memory() else { return };
        if ev.is_history_malloc() {
            // blocks from before the window: written, not decomposed (msMemScope)
            return;
        }
        let addr = ev.ptr.unwrap_or(m.addr);
        let key = (ev.event_type, addr);
        match ev.kind {
            EventKind::Malloc if ev.device != Device::NotApplicable => {
                self.remove(ev.event_type, key, ev.ts_ns);
                let owner = self.owner_id(decompose_label(ev));
                let seq = self.seq;
                self.live.insert(
                    key,
                    Live {
                        device: ev.device,
                        owner,
                        size: m.size,
                        seq,
                        ts: ev.ts_ns,
                    },
                );
                let a = self.alloc.entry((ev.device, ev.event_type)).or_default();
                // saturating: each size is < 2^63 (the reader refuses more), but a hostile dump
                // can sum past i64
                a.total = a.total.saturating_add(m.size as i64);
                if a.total > a.peak {
                    a.peak = a.total;
                    a.peak_seq = seq;
                    a.freed_since_peak.clear();
                }
                self.timeline.malloc(
                    &self.owners,
                    (ev.device, ev.event_type),
                    owner,
                    m.size,
                    ev.ts_ns,
                );
            }
            EventKind::Free if !m.shadow => self.remove(ev.event_type, key, ev.ts_ns),
            _ => {}
        }
    }

    /// The result so far: per device and allocator, owners by peak bytes (largest first). What
    /// was live at the peak is rebuilt from the live blocks and those freed since the peak, so
    /// an owner given to a block after its MALLOC (a `MEMORY_OWNER` row) counts at the peak too.
    pub fn rows(&self) -> Vec<DecomposeRow> {
        // per allocator, bytes by owner (at the peak, at the end)
        type Split = (HashMap<u32, i64>, HashMap<u32, i64>);
        let mut split: BTreeMap<(Device, EventType), Split> = BTreeMap::new();
        for (&(pool, _), b) in &self.live {
            let (peak, end) = split.entry((b.device, pool)).or_default();
            *end.entry(b.owner).or_default() += b.size as i64;
            let a = &self.alloc[&(b.device, pool)];
            if a.peak_seq != 0 && b.seq <= a.peak_seq {
                *peak.entry(b.owner).or_default() += b.size as i64;
            }
        }
        for (k, a) in &self.alloc {
            let (peak, _) = split.entry(*k).or_default();
            for (o, sz) in &a.freed_since_peak {
                *peak.entry(*o).or_default() += *sz as i64;
            }
        }
        let mut rows = Vec::new();
        for ((dev, pool), (peak, end)) in split {
            let mut ids: Vec<u32> = peak.keys().chain(end.keys()).copied().collect();
            ids.sort_unstable();
            ids.dedup();
            let mut part: Vec<DecomposeRow> = ids
                .into_iter()
                .map(|i| DecomposeRow {
                    device: dev,
                    pool,
                    owner: self.owners[i as usize].clone(),
                    peak: peak.get(&i).copied().unwrap_or(0),
                    end: end.get(&i).copied().unwrap_or(0),
                })
                .filter(|r| r.peak != 0 || r.end != 0)
                .collect();
            part.sort_by(|x, y| {
                y.peak
                    .cmp(&x.peak)
                    .then(y.end.cmp(&x.end))
                    .then(x.owner.cmp(&y.owner))
            });
            rows.extend(part);
        }
        rows
    }

    /// Bytes by role over time, per step and at the activations' own peak.
    pub fn timeline(&self) -> &RoleTimeline {
        &self.timeline
    }

    /// The blocks of role `activation` live when that role's bytes were highest, by module
    /// path (largest first), per device and allocator; see [`RoleTimeline`].
    pub fn activations_at_peak(&self) -> Vec<Activations> {
        let live = self
            .live
            .iter()
            .map(|(&(pool, _), b)| ((b.device, pool), b.owner, b.size, b.seq));
        self.timeline.activations_at_peak(&self.owners, live)
    }
}

/// Writes `dir/decompose_{ts}.csv` (folder 0750, file 0600, a new name, no symbolic link
/// followed; owners neutralised against formula injection) and returns its path.
///
/// # Errors
/// The folder or file cannot be created or written.
pub fn write_decompose_csv(
    dir: &Path,
    rows: &[(Option<u32>, DecomposeRow)],
) -> std::io::Result<PathBuf> {
    let ts = chrono::Local::now().format("%Y%m%d%H%M%S");
    let (path, file) = create_unique(dir, &format!("decompose_{ts}"), "csv")?;
    let mut w = csv::WriterBuilder::new()
        .terminator(csv::Terminator::Any(b'\n'))
        .from_writer(std::io::BufWriter::new(file));
    w.write_record(DECOMPOSE_HEADER.split(','))?;
    for (pid, r) in rows {
        w.write_record([
            pid.map_or("N/A".to_owned(), |p| p.to_string()),
            r.device.to_text(),
            r.pool.as_str().to_owned(),
            memscope_core::sanitize::csv_report_cell(&r.owner).into_owned(),
            r.peak.to_string(),
            r.end.to_string(),
            role_of(&r.owner).to_owned(),
        ])?;
    }
    w.flush()?;
    Ok(path)
}

/// Console lines of a decompose result: every owner.
pub fn format_table(rows: &[DecomposeRow]) -> Vec<String> {
    format_table_top(rows, usize::MAX)
}

/// As [`format_table`], with at most `top` owners per device and allocator (in the rows'
/// order) and a line counting the others.
pub fn format_table_top(rows: &[DecomposeRow], top: usize) -> Vec<String> {
    let mut lines = Vec::new();
    if rows.is_empty() {
        lines.push("No MALLOC rows on any device.".to_owned());
    }
    let mut last: Option<(Device, EventType)> = None;
    let mut shown = 0;
    for (i, r) in rows.iter().enumerate() {
        if last != Some((r.device, r.pool)) {
            shown = 0;
            last = Some((r.device, r.pool));
            let (peak, end): (i64, i64) = rows
                .iter()
                .filter(|x| (x.device, x.pool) == (r.device, r.pool))
                .fold((0, 0), |(p, e), x| (p + x.peak, e + x.end));
            lines.push(format!(
                "Device {} {}: peak {:.6} MiB, end {:.6} MiB",
                r.device.to_text(),
                r.pool.as_str(),
                mib(peak.max(0) as u64),
                mib(end.max(0) as u64)
            ));
            lines.push(format!(
                "  {:<48} {:>16} {:>16}",
                "Owner", "Peak(MiB)", "End(MiB)"
            ));
        }
        shown += 1;
        if shown <= top {
            lines.push(format!(
                "  {:<48} {:>16.6} {:>16.6}",
                r.owner,
                r.peak as f64 / 1_048_576.0,
                r.end as f64 / 1_048_576.0
            ));
        }
        let group_ends = rows
            .get(i + 1)
            .is_none_or(|n| (n.device, n.pool) != (r.device, r.pool));
        if group_ends && shown > top {
            lines.push(format!("  … {} more owner(s)", shown - top));
        }
    }
    lines
}

impl Layer for DecomposeLayer {
    fn name(&self) -> &'static str {
        "decompose"
    }

    fn on_event(
        &mut self,
        ev: &mut Event,
        ctx: &BusCtx,
        _: &mut Vec<Event>,
    ) -> Result<Flow, BusError> {
        self.seen = true;
        self.observe(ev, ctx);
        Ok(Flow::Pass)
    }

    fn finish(
        &mut self,
        ctx: &BusCtx,
        _out: &mut Vec<Event>,
        report: &mut Vec<ReportSection>,
    ) -> Result<(), BusError> {
        if !self.seen {
            // a process without rows (a shell or launcher in front of the job) leaves nothing
            return Ok(());
        }
        let rows = self.rows();
        let mut lines = format_table(&rows);
        let mut shown = format_table_top(&rows, memscope_core::listing::CONSOLE_TOP);
        let by_role = format_roles(self, &rows);
        let tagged: Vec<(Option<u32>, DecomposeRow)> =
            rows.into_iter().map(|r| (ctx.pid, r)).collect();
        if let Some(h) = &self.collect {
            h.lock()
                .map_err(|_| BusError::Other("decompose: poisoned lock".into()))?
                .extend(tagged);
        } else if let Some(dir) = &self.out_dir {
            let p = write_decompose_csv(dir, &tagged).map_err(|e| BusError::Io {
                path: dir.display().to_string(),
                source: e,
            })?;
            lines.push(format!("written to {}", p.display()));
            shown.push(format!("written to {}", p.display()));
        }
        let sfx = ctx.pid.map_or(String::new(), |p| format!(" (pid {p})"));
        report.push(ReportSection::bounded(
            format!("Memory decomposition{sfx}"),
            shown,
            lines,
        ));
        if !by_role.is_empty() {
            report.push(ReportSection::new(format!("Memory by role{sfx}"), by_role));
        }
        Ok(())
    }
}

/// Bytes per role of decompose rows, per device and allocator: (peak, end) by role index.
pub fn by_role(rows: &[DecomposeRow]) -> BTreeMap<Key, [(i64, i64); N]> {
    let mut out: BTreeMap<Key, [(i64, i64); N]> = BTreeMap::new();
    for r in rows {
        let i = role_index(role_and_detail(&r.owner).0);
        let e = &mut out.entry((r.device, r.pool)).or_insert([(0, 0); N])[i];
        e.0 += r.peak;
        e.1 += r.end;
    }
    out
}

fn split(levels: &Levels) -> String {
    let parts: Vec<String> = ROLES
        .iter()
        .zip(levels)
        .filter(|(_, v)| **v != 0)
        .map(|(r, v)| format!("{r} {:.6}", *v as f64 / 1_048_576.0))
        .collect();
    if parts.is_empty() {
        "nothing".to_owned()
    } else {
        parts.join(", ")
    }
}

/// Steps printed on the console (the report has them all).
const CONSOLE_STEPS: usize = 10;
/// Modules printed per allocator.
const CONSOLE_MODULES: usize = 10;

/// The console lines of the "Memory by role" section: per device and allocator with roles, the
/// bytes of each role at the peak and at the end, the activations at their peak by module, and
/// per step the split at the step's highest and lowest moment. Empty when no block has a role.
pub fn format_roles(layer: &DecomposeLayer, rows: &[DecomposeRow]) -> Vec<String> {
    let t = layer.timeline();
    if !t.has_roles() {
        return Vec::new();
    }
    let acts = layer.activations_at_peak();
    let mut lines = Vec::new();
    for ((dev, pool), roles) in by_role(rows) {
        if roles[..N - 1].iter().all(|(p, e)| *p == 0 && *e == 0) {
            continue;
        }
        let (peak, end) = roles.iter().fold((0, 0), |(p, e), (x, y)| (p + x, e + y));
        lines.push(format!(
            "Device {} {}: peak {:.6} MiB, end {:.6} MiB",
            dev.to_text(),
            pool.as_str(),
            mib(peak.max(0) as u64),
            mib(end.max(0) as u64)
        ));
        lines.push(format!(
            "  {:<24} {:>16} {:>16}",
            "Role", "Peak(MiB)", "End(MiB)"
        ));
        for (r, (p, e)) in ROLES.iter().zip(roles) {
            if p != 0 || e != 0 {
                lines.push(format!(
                    "  {:<24} {:>16.6} {:>16.6}",
                    r,
                    p as f64 / 1_048_576.0,
                    e as f64 / 1_048_576.0
                ));
            }
        }
        if let Some((_, _, mods)) = acts.iter().find(|(d, p, _)| (*d, *p) == (dev, pool)) {
            let sum: u64 = mods.iter().map(|(_, s)| s).sum();
            lines.push(format!(
                "  activations at their peak, {:.6} MiB, by module:",
                mib(sum)
            ));
            for (m, s) in mods.iter().take(CONSOLE_MODULES) {
                let m = if m.is_empty() { "(no module)" } else { m };
                lines.push(format!("    {:<46} {:>16.6}", m, *s as f64 / 1_048_576.0));
            }
            if mods.len() > CONSOLE_MODULES {
                lines.push(format!(
                    "    ({} more modules)",
                    mods.len() - CONSOLE_MODULES
                ));
            }
        }
        let steps: Vec<(u32, &StepAlloc)> = t
            .steps()
            .iter()
            .filter_map(|s| s.allocs.get(&(dev, pool)).map(|a| (s.step, a)))
            .collect();
        for (n, a) in steps.iter().take(CONSOLE_STEPS) {
            lines.push(format!(
                "  step {n}: highest {:.6} MiB = {}; lowest {:.6} MiB = {}",
                mib(a.high.total.max(0) as u64),
                split(&a.high.levels),
                mib(a.low.total.max(0) as u64),
                split(&a.low.levels)
            ));
        }
        if steps.len() > CONSOLE_STEPS {
            lines.push(format!(
                "  ({} more steps; memscope report shows them all)",
                steps.len() - CONSOLE_STEPS
            ));
        }
    }
    lines
}
