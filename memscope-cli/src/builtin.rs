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
