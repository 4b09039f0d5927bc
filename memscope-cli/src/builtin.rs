//! The CLI's registration list: every built-in adapter's descriptor and the collector-side
//! pieces the collector takes from it ([`REGISTRY`]), named here and nowhere else in the CLI or
//! the collector (the probe's list is the `export_hooks!()` lines of
//! `memscope-probe/src/lib.rs`). A new built-in adapter adds one line to each list.

use memscope_collect::adapter::AdapterDescriptor;
use memscope_collect::config::RunConfig;
use memscope_collect::fast_path::FastPath;
use memscope_collect::registry::Registry;
use memscope_core::bus::Layer;
use std::path::Path;

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

/// What the collector types with: the descriptors and HOST's and HAL's collector-side pieces.
pub static REGISTRY: Registry = Registry {
    descriptors: &BUILTIN,
    host_leak_layer,
    oom_layer,
    host_fast,
};

/// HOST's end-of-run leak summary layer (`None` when HOST is not selected).
fn host_leak_layer(cfg: &RunConfig) -> Option<Box<dyn Layer>> {
    memscope_adapter_host::leak_layer(cfg)
}

/// HAL's out-of-memory layer (`OOM_Snapshot`, `--analysis oom[:K]`).
fn oom_layer(cfg: &RunConfig) -> Box<dyn Layer> {
    Box::new(memscope_adapter_hal::oom::OomLayer::new(cfg))
}

/// HOST's fast path (issue 9): HOST heap records typed and accounted without events when HOST
/// rows are neither written nor analysed.
fn host_fast(cfg: &RunConfig) -> Box<dyn FastPath> {
    Box::new(memscope_adapter_host::fast::HostFast::for_config(cfg))
}

/// HOST's pre-launch warnings about `program` (statically linked, own allocator).
pub fn preflight_warnings(program: &Path, host: bool) -> Vec<String> {
    memscope_adapter_host::preflight::warnings(program, host)
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_adapter_id_has_exactly_one_descriptor_in_selection_bit_order() {
        let ids: Vec<_> = super::REGISTRY.descriptors.iter().map(|d| d.id).collect();
        assert_eq!(ids, memscope_wire::AdapterId::ALL);
    }
}
