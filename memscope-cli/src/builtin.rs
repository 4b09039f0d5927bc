//! The CLI's registration list: every built-in adapter's descriptor, named here and nowhere
//! else in the collector (the probe's list is the `export_hooks!()` lines of
//! `memscope-probe/src/lib.rs`). A new built-in adapter adds one line to each list.

use memscope_core::adapter::AdapterDescriptor;

/// The built-in adapters, in selection-bit order.
static BUILTIN: [&AdapterDescriptor; 7] = [
    &memscope_adapter_mstx::DESCRIPTOR,
    &memscope_adapter_pta::DESCRIPTOR,
    &memscope_adapter_mindspore::DESCRIPTOR,
    &memscope_adapter_atb::DESCRIPTOR,
    &memscope_adapter_hal::DESCRIPTOR,
    &memscope_adapter_acl::DESCRIPTOR,
    &memscope_adapter_host::DESCRIPTOR,
];

/// Every built-in adapter's descriptor, in [`memscope_core::adapter::AdapterId`] order.
pub fn descriptors() -> Vec<&'static AdapterDescriptor> {
    let mut v = BUILTIN.to_vec();
    v.sort_by_key(|d| d.id);
    v
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_adapter_id_has_exactly_one_descriptor() {
        let ids: Vec<_> = super::descriptors().iter().map(|d| d.id).collect();
        assert_eq!(ids, memscope_core::adapter::AdapterId::ALL);
    }
}

/// Collector-side pieces of built-in adapters the collector still wires by hand (a descriptor
/// field for layers, preflight and side paths is the remaining step of issue 11); named here,
/// in the registration list, so no other CLI file names an adapter crate.
pub mod wiring {
    use memscope_core::bus::Layer;
    use memscope_core::config::RunConfig;
    use std::path::Path;

    /// HOST's end-of-run leak summary layer (`None` when HOST is not selected).
    pub fn host_leak_layer(cfg: &RunConfig) -> Option<Box<dyn Layer>> {
        memscope_adapter_host::leak_layer(cfg)
    }

    /// HAL's out-of-memory layer (`OOM_Snapshot`, `--analysis oom[:K]`).
    pub fn oom_layer(cfg: &RunConfig) -> Box<dyn Layer> {
        Box::new(memscope_adapter_hal::oom::OomLayer::new(cfg))
    }

    /// HOST's fast path (issue 9): HOST heap records typed and accounted without events when
    /// HOST rows are neither written nor analysed.
    pub fn host_fast(cfg: &RunConfig) -> Box<HostFast> {
        Box::new(HostFast::for_config(cfg))
    }

    pub use memscope_adapter_host::fast::{is_host_record, HostFast, PyStack};

    /// HOST's pre-launch warnings about `program` (statically linked, own allocator).
    pub fn preflight_warnings(program: &Path, host: bool) -> Vec<String> {
        memscope_adapter_host::preflight::warnings(program, host)
    }
}
