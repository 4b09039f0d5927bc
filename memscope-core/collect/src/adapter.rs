//! Adapters: the allocator and event sources memscope hooks.
//!
//! A built-in adapter is one crate under `adapters/` with two halves: hooks that the probe
//! exports inside the traced process, and a collector-side [`Typer`] that turns the adapter's
//! stream records into typed [`Event`]s. Each crate declares one `pub static DESCRIPTOR:`
//! [`AdapterDescriptor`]; the CLI's explicit registration list (`memscope-cli/src/builtin.rs`)
//! lists and instantiates them — no constructor registers anything, so nothing of the collector
//! half runs or is linked in the traced process. Selection is a
//! bit mask ([`SourceId::bit`]) handed to the probe, so an unselected adapter costs one atomic
//! load per intercepted call. An adapter shipped as a plugin (built on the adapter SDK, loaded
//! like any `--adapter-path` library) is one more descriptor, with its
//! [`AdapterDescriptor::library`].

use memscope_core::event::Event;
use memscope_wire::Record;

/// Source ids (a built-in adapter's is its selection bit, part of the probe's environment
/// protocol).
pub use memscope_wire::SourceId;

use crate::config::RunConfig;
use crate::fast_path::FastPath;
use memscope_core::bus::Layer;
use std::path::Path;

/// A config.json key an adapter reads.
#[derive(Debug)]
pub struct ConfigKey {
    /// Key name.
    pub name: &'static str,
    /// One line: type, default and meaning.
    pub summary: &'static str,
}

/// Per-process context handed to typers: identity, device mapping and the state shared by all
/// adapters of one process.
#[derive(Debug, Default)]
pub struct TypeCtx {
    /// Process id.
    pub pid: u32,
    /// `ASCEND_RT_VISIBLE_DEVICES` of the job: logical index → physical id.
    pub visible_devices: Vec<u32>,
    /// Next `allocation_id` (per process, from 1, shared by all pools).
    next_allocation_id: u64,
    /// Per-thread owner label stacks (from `OwnerPush`/`OwnerPop` records).
    owners: std::collections::HashMap<u32, Vec<String>>,
    /// Per-thread current device (set by the ACL adapter's `aclrtSetDevice`).
    current_device: std::collections::HashMap<u32, u32>,
    /// Warnings for the process log (double frees, unknown pointers, …), drained by the
    /// collector.
    warnings: Vec<String>,
    /// Interned call stacks of the process (`StackDef` records): (image, id) → raw return
    /// addresses, innermost first. Filled by the collector as it reads the streams, before the
    /// records that use them are typed. Ids are per process image (each exec'd image of a pid
    /// writes its own stream and numbers its stacks from 1).
    stacks: std::collections::HashMap<(usize, u32), Vec<u64>>,
    /// Image (stream index within the pid) of the record being typed.
    image: usize,
    /// The C stack service: module maps, symbolised stacks, `CallStack`s waiting for their
    /// record.
    c_stacks: crate::symbolize::CStacks,
    /// Registered event types of plugins (plugin ABI 1.2), per image.
    pub types: crate::compact::TypeTable,
}

impl TypeCtx {
    /// A context for process `pid` with the job's visible-device list.
    pub fn new(pid: u32, visible_devices: Vec<u32>) -> TypeCtx {
        TypeCtx {
            pid,
            visible_devices,
            next_allocation_id: 1,
            ..TypeCtx::default()
        }
    }

    /// Maps a logical device id through `ASCEND_RT_VISIBLE_DEVICES` (identity when unset or
    /// out of range, as msMemScope does).
    pub fn map_device(&self, logical: u32) -> u32 {
        self.visible_devices
            .get(logical as usize)
            .copied()
            .unwrap_or(logical)
    }

    /// A fresh `allocation_id`.
    pub fn next_allocation_id(&mut self) -> u64 {
        let id = self.next_allocation_id.max(1);
        self.next_allocation_id = id + 1;
        id
    }

    /// Pushes an owner label for thread `tid`.
    pub fn push_owner(&mut self, tid: u32, label: String) {
        self.owners.entry(tid).or_default().push(label);
    }

    /// Pops thread `tid`'s innermost owner label (no-op on an empty stack).
    pub fn pop_owner(&mut self, tid: u32) {
        if let Some(s) = self.owners.get_mut(&tid) {
            s.pop();
        }
    }

    /// Thread `tid`'s owner labels, outermost first.
    pub fn owner_labels(&self, tid: u32) -> &[String] {
        self.owners.get(&tid).map(Vec::as_slice).unwrap_or(&[])
    }

    /// Sets thread `tid`'s current (physical) device.
    pub fn set_current_device(&mut self, tid: u32, device: u32) {
        self.current_device.insert(tid, device);
    }

    /// Queues a warning for the process log (at most 1000 are kept between drains; the rest
    /// are counted in a final line).
    pub fn warn(&mut self, msg: String) {
        if self.warnings.len() < 1000 {
            self.warnings.push(msg);
        } else if self.warnings.len() == 1000 {
            self.warnings.push("more warnings suppressed".to_owned());
        }
    }

    /// A typer's own record decoded by its `records!` type (`<Rec>::of`), or, when its body did
    /// not decode, `None` after a warning naming `adapter`.
    pub fn decoded<R>(
        &mut self,
        adapter: &str,
        rec: Result<(u64, R), memscope_wire::WireError>,
    ) -> Option<(u64, R)> {
        match rec {
            Ok(r) => Some(r),
            Err(e) => {
                self.warn(format!("{adapter}: a record did not decode ({e}); skipped"));
                None
            }
        }
    }

    /// Takes the queued warnings.
    pub fn take_warnings(&mut self) -> Vec<String> {
        std::mem::take(&mut self.warnings)
    }

    /// Stores interned stack `id` of process image `image` (raw return addresses, innermost
    /// first).
    pub fn define_stack(&mut self, image: usize, id: u32, frames: Vec<u64>) {
        self.stacks.insert((image, id), frames);
    }

    /// Interned stack `id` of the image of the record being typed, if its `StackDef` was seen.
    pub fn stack(&self, id: u32) -> Option<&[u64]> {
        self.stacks.get(&(self.image, id)).map(Vec::as_slice)
    }

    /// Sets the process image (stream index within the pid, from 0) of the record about to be
    /// typed.
    pub fn set_image(&mut self, image: usize) {
        self.image = image;
    }

    /// The process image of the record being typed (stream index within the pid, from 0).
    pub fn image(&self) -> usize {
        self.image
    }

    /// Adds a loaded module (a `Module` record) to the current image's map.
    pub fn add_module(&mut self, module: (u64, u64, u64), path: &[u8], build_id: &[u8]) {
        self.c_stacks.add_module(self.image, module, path, build_id);
    }

    /// `Call Stack(C)` text of stack `id` of the current image (one frame per line, innermost
    /// first); `None` for 0 or a stack whose `StackDef` was not seen.
    pub fn c_stack_text(&mut self, id: u32) -> Option<String> {
        if id == 0 {
            return None;
        }
        let frames = self.stacks.get(&(self.image, id))?;
        Some(self.c_stacks.text(self.image, id, frames).to_string())
    }

    /// A `CallStack { ts, stack }` record of thread `tid`: its stack goes on the rows of the
    /// thread's next record stamped `ts` ([`TypeCtx::take_call_stack`]).
    pub fn set_call_stack(&mut self, tid: u32, ts: u64, stack: u32) {
        self.c_stacks.set_pending(self.image, tid, ts, stack);
    }

    /// Drops the C stack waiting for thread `tid`'s record stamped `ts` without symbolising it
    /// (a record accounted without a row).
    pub fn discard_call_stack(&mut self, tid: u32, ts: Option<u64>) {
        let _ = self.c_stacks.take_pending(self.image, tid, ts);
    }

    /// The C stack captured for thread `tid`'s record stamped `ts`, symbolised (`None`: none).
    pub fn take_call_stack(&mut self, tid: u32, ts: Option<u64>) -> Option<String> {
        let id = self.c_stacks.take_pending(self.image, tid, ts)?;
        self.c_stack_text(id)
    }

    /// Thread `tid`'s current (physical) device, if one was set.
    pub fn current_device(&self, tid: u32) -> Option<u32> {
        self.current_device.get(&tid).copied()
    }
}

/// Collector-side half of an adapter: turns stream records into typed events, keeping whatever
/// per-process state the source needs (pool totals, live blocks).
pub trait Typer: Send {
    /// Types one record of thread `tid`, pushing 0..n events onto `out` (IDs are assigned later).
    /// Returns `false` when the record is not this adapter's, so the next typer is asked.
    fn type_record(
        &mut self,
        ctx: &mut TypeCtx,
        tid: u32,
        rec: &Record<Box<[u8]>>,
        out: &mut Vec<Event>,
    ) -> bool;

    /// The process ended: emit whatever is still pending (nothing, for most adapters).
    fn finish(&mut self, _ctx: &mut TypeCtx, _out: &mut Vec<Event>) {}
}

/// A probe setting an adapter reads from the job's environment.
#[derive(Debug)]
pub struct Setting {
    /// The config.json key(s) or option(s) the value comes from (documentation).
    pub key: &'static str,
    /// The environment variable the probe side reads (`memscope_wire::probe_env`).
    pub env: &'static str,
    /// One line: values and meaning.
    pub summary: &'static str,
    /// The value `memscope run` sets on the job, from the run's configuration; `None` when the
    /// user sets the variable (it passes through the environment).
    pub value: Option<fn(&RunConfig) -> &'static str>,
}

/// How many rows an adapter's source writes.
#[derive(Clone, Copy, Debug)]
pub enum Volume {
    /// Its rows are written as the run's event selection says.
    Rows,
    /// An account-only source (malloc volume): the rows `is_row` picks out are written only on
    /// request (`--host-rows`, config.json `host_rows`); they stay in the capture and are
    /// summed up by the source's summaries.
    Account {
        /// Whether an event is one of those rows.
        is_row: fn(&memscope_core::event::Event) -> bool,
    },
}

/// The leak and peak summary of an [`Volume::Account`] source whose blocks are summed up by
/// Python stack (`crate::account_summary`).
#[derive(Clone, Copy, Debug)]
pub struct AccountSummary {
    /// The Event Type of the blocks summed up (others, e.g. arenas, are left out).
    pub event_type: &'static str,
    /// What a block is (`Python object`), in `--host-rows`' help.
    pub object: &'static str,
    /// What a block is, plural, in the section titles (`Python objects`).
    pub objects: &'static str,
    /// What a block is, counted (`Python object(s)`).
    pub counted: &'static str,
}

/// Builds an adapter's fast path for a run.
pub type NewFastPath = fn(&RunConfig) -> Box<dyn FastPath>;

/// Where an adapter's layers go in a process's bus.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayerSlot {
    /// With the summaries, before the pool extents (HOST's leak summary).
    Summary,
    /// After the pool extents and the OOM verdict, before the analyses (HAL's OOM layer,
    /// which rewrites the snapshot whose request size the extents need).
    AfterExtents,
}

/// What `memscope adapters list` prints, and everything the CLI and the collector take from
/// one adapter: its name and source id, its typer, layers and fast path, its selection
/// defaults, the probe settings it reads.
pub struct AdapterDescriptor {
    /// The name used in `--adapters` and config.json.
    pub name: &'static str,
    /// Its source id: the selection bit of a built-in adapter (part of the probe's environment
    /// protocol, so it never changes). A shipped plugin's has no selection bit.
    pub source: SourceId,
    /// One-line summary.
    pub summary: &'static str,
    /// C symbols the probe interposes or registers for this adapter.
    pub symbols: &'static [&'static str],
    /// `Event/Event Type` pairs this adapter produces, e.g. `MSTX/Mark`.
    pub events: &'static [&'static str],
    /// config.json keys it reads besides `adapters`.
    pub config_keys: &'static [ConfigKey],
    /// Selected when neither flags nor config.json name any adapter.
    pub default_on: bool,
    /// Its rows are device memory: selecting it makes an analysis count device memory as
    /// traced.
    pub device_memory: bool,
    /// Its rows are host memory (device `cpu`): selecting it selects the `cpu` device.
    pub host_memory: bool,
    /// A shipped plugin's library file, found next to the probe library and loaded like any
    /// `--adapter-path` plugin; `None` for a built-in adapter (hooks in the probe).
    pub library: Option<&'static str>,
    /// Builds a fresh typer for one process; `None` for a shipped plugin (its events are
    /// plugin records, typed by the plugin typer).
    pub new_typer: Option<fn() -> Box<dyn Typer>>,
    /// Its bus layers for a run (none when they have nothing to do in it), placed at
    /// [`AdapterDescriptor::layer_slot`]. Not asked when the run takes its fast path.
    pub layers: fn(&RunConfig) -> Vec<Box<dyn Layer>>,
    /// Where [`AdapterDescriptor::layers`] go.
    pub layer_slot: LayerSlot,
    /// Its layers in `memscope analyze leaks` over a dump or capture: the summaries of what
    /// its blocks held, as the run prints them (HOST: the peak and what was live at exit). A
    /// layer reports nothing over rows without its blocks.
    pub offline_leaks: fn() -> Vec<Box<dyn Layer>>,
    /// Its fast path: its records typed and accounted without events when its rows are
    /// neither written nor analysed.
    pub fast_path: Option<NewFastPath>,
    /// Warnings about the program before launch (`program`, whether the adapter is selected).
    pub preflight: Option<fn(&Path, bool) -> Vec<String>>,
    /// The probe settings it reads from the job's environment.
    pub settings: &'static [Setting],
    /// How many rows it writes.
    pub volume: Volume,
    /// Its summary by Python stack, if it has one.
    pub account_summary: Option<AccountSummary>,
    /// The scope of `--fail-on` limits it names (`peak.NAME>…`), if any.
    pub limit_scope: Option<memscope_analysis::thresholds::NamedScope>,
}

impl AdapterDescriptor {
    /// A descriptor's defaults: no name, symbols, events, typer, layers, settings; not selected
    /// by default; rows written. Descriptors name what differs and take the rest from here
    /// (`..AdapterDescriptor::BASE`).
    pub const BASE: AdapterDescriptor = AdapterDescriptor {
        name: "",
        source: SourceId(u16::MAX),
        summary: "",
        symbols: &[],
        events: &[],
        config_keys: &[],
        default_on: false,
        device_memory: false,
        host_memory: false,
        library: None,
        new_typer: None,
        layers: |_| Vec::new(),
        layer_slot: LayerSlot::Summary,
        offline_leaks: Vec::new,
        fast_path: None,
        preflight: None,
        settings: &[],
        volume: Volume::Rows,
        account_summary: None,
        limit_scope: None,
    };

    /// Whether this adapter is built in (its hooks are in the probe), not a shipped plugin.
    pub fn built_in(&self) -> bool {
        self.library.is_none()
    }
}

impl std::fmt::Debug for AdapterDescriptor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdapterDescriptor")
            .field("name", &self.name)
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_ctx_maps_visible_devices_and_counts_allocation_ids_from_one() {
        let mut c = TypeCtx::new(1, vec![4, 5]);
        assert_eq!(c.map_device(0), 4);
        assert_eq!(c.map_device(1), 5);
        assert_eq!(c.map_device(7), 7);
        assert_eq!(c.next_allocation_id(), 1);
        assert_eq!(c.next_allocation_id(), 2);
        c.push_owner(3, "a".into());
        c.push_owner(3, "b".into());
        c.pop_owner(3);
        assert_eq!(c.owner_labels(3), ["a".to_string()]);
    }
}
