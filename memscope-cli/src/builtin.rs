//! The CLI's registration list: every adapter's descriptor ([`REGISTRY`]) — the built-in ones
//! and those shipped as plugins —, named here and nowhere else in the CLI or the collector (the
//! probe's list is the `export_hooks!()` lines of `memscope-probe/src/lib.rs`). A new built-in
//! adapter adds one line to each list.

use memscope_analysis::thresholds::NamedScope;
use memscope_collect::adapter::{AccountSummary, AdapterDescriptor, LayerSlot, Volume};
use memscope_collect::registry::Registry;
use memscope_core::event::Event;

/// CPython's allocator domains (issue 16), shipped as a plugin: built on the adapter SDK only
/// (as a third party builds one, `adapters/pymem`), loaded by the probe like any
/// `--adapter-path` plugin, and selected by name like a built-in adapter. Its events are plugin
/// records, typed by the plugin typer.
static PYMEM: AdapterDescriptor = AdapterDescriptor {
    name: "pymem",
    summary:
        "CPython's allocator domains (raw, mem, object; PyMem_SetAllocator) and pymalloc arenas",
    symbols: &["PyMem_SetAllocator", "PyObject_SetArenaAllocator"],
    events: &[
        "MALLOC/PYMEM",
        "FREE/PYMEM",
        "MALLOC/PYMEM_ARENA",
        "FREE/PYMEM_ARENA",
    ],
    host_memory: true,
    library: Some("libmemscope_adapter_pymem.so"),
    // rows at malloc volume, kept in the capture and summed up by Python stack
    volume: Volume::Account {
        is_row: is_pymem_row,
    },
    account_summary: Some(AccountSummary {
        event_type: "PYMEM",
        object: "Python object",
        objects: "Python objects",
        counted: "Python object(s)",
    }),
    // `--fail-on peak.pymem>…`: Python objects; `cpu` leaves out objects and arenas
    limit_scope: Some(NamedScope {
        name: "pymem",
        event_type: "PYMEM",
        apart: "PYMEM",
    }),
    // with HOST's mappings (`MEMSCOPE_HOST_MMAP=1`): pymalloc's arenas marked on their rows
    layers: crate::pymem_arenas::layers,
    layer_slot: LayerSlot::Summary,
    ..AdapterDescriptor::BASE
};

/// Whether `ev` is a row of the pymem adapter (objects and arenas).
fn is_pymem_row(ev: &Event) -> bool {
    matches!(ev.event_type.as_str(), "PYMEM" | "PYMEM_ARENA")
}

/// Every adapter: the built-in ones in source id order, then the shipped plugins.
static DESCRIPTORS: &[&AdapterDescriptor] = &[
    &memscope_adapter_mstx::DESCRIPTOR,
    &memscope_adapter_pta::DESCRIPTOR,
    &memscope_adapter_mindspore::DESCRIPTOR,
    &memscope_adapter_atb::DESCRIPTOR,
    &memscope_adapter_hal::DESCRIPTOR,
    &memscope_adapter_acl::DESCRIPTOR,
    &memscope_adapter_host::DESCRIPTOR,
    &PYMEM,
];

/// What the collector types with: every adapter's descriptor.
pub static REGISTRY: Registry = Registry {
    descriptors: DESCRIPTORS,
};

/// Installs [`REGISTRY`] as the process's registration list
/// ([`memscope_collect::registry::install`]); the CLI does it first thing.
pub fn install() {
    memscope_collect::registry::install(&REGISTRY);
}

#[cfg(test)]
mod tests {
    use super::{PYMEM, REGISTRY};
    use memscope_collect::account_summary::Accounts;
    use memscope_core::event::{Attrs, Device, Event, EventKind, EventType, MemoryAttrs};

    #[test]
    fn pymem_rows_are_account_only_and_summed_up_as_python_objects() {
        super::install();
        let mut e = Event::new(EventType::custom("PYMEM_ARENA"), 1, 1, 1);
        e.kind = EventKind::Malloc;
        e.device = Device::Cpu;
        e.attrs = Attrs::Memory(MemoryAttrs {
            allocation_id: 1,
            size: 24,
            ..MemoryAttrs::default()
        });
        let memscope_collect::adapter::Volume::Account { is_row } = PYMEM.volume else {
            panic!("pymem rows are account-only");
        };
        assert!(is_row(&e), "arena rows too");
        let mut a = Accounts::default();
        a.malloc(
            EventType::custom("PYMEM"),
            (0x10, 24, 1),
            (0, 1),
            None,
            || None,
        );
        let r = a.report(Some(7), false);
        assert_eq!(
            r[0].title,
            "PYMEM peak (pid 7): 24 bytes in 1 Python object(s), by where they were allocated at the peak"
        );
        assert_eq!(
            r[1].title,
            "PYMEM Python objects live at exit (pid 7): 1 object(s), 24 bytes (0 freed before)"
        );
    }

    #[test]
    fn built_in_adapters_come_first_in_source_id_order_with_distinct_names_and_bits() {
        let built_in: Vec<_> = REGISTRY
            .descriptors
            .iter()
            .take_while(|d| d.built_in())
            .collect();
        for (i, d) in built_in.iter().enumerate() {
            assert_eq!(d.source.0 as usize, i, "{}", d.name);
            assert_eq!(REGISTRY.by_name(d.name).map(|x| x.source), Some(d.source));
        }
        assert!(REGISTRY.descriptors[built_in.len()..]
            .iter()
            .all(|d| d.library.is_some() && d.source.bit() == 0));
        let mut names: Vec<_> = REGISTRY.names().collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), REGISTRY.descriptors.len());
    }
}
