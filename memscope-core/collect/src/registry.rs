//! The adapters a collector is handed: the caller's registration list.

use crate::adapter::{AdapterDescriptor, Typer};
use crate::config::RunConfig;
use crate::fast_path::FastPath;
use memscope_core::bus::Layer;

/// The adapters a collector types with, as its caller's registration list gives them
/// (`memscope-cli/src/builtin.rs`): the descriptors, and the collector-side pieces of HOST and
/// HAL that are not descriptor fields yet. The collector names no adapter crate itself.
#[derive(Clone, Copy, Debug)]
pub struct Registry {
    /// Every built-in adapter's descriptor, in [`memscope_wire::AdapterId`] order.
    pub descriptors: &'static [&'static AdapterDescriptor],
    /// HOST's end-of-run leak summary layer (`None` when HOST is not selected).
    pub host_leak_layer: fn(&RunConfig) -> Option<Box<dyn Layer>>,
    /// HAL's out-of-memory layer (`OOM_Snapshot`, `--analysis oom[:K]`).
    pub oom_layer: fn(&RunConfig) -> Box<dyn Layer>,
    /// HOST's fast path: HOST heap records typed and accounted without events when HOST rows
    /// are neither written nor analysed.
    pub host_fast: fn(&RunConfig) -> Box<dyn FastPath>,
}

impl Registry {
    /// A fresh typer of every adapter, for one process.
    pub fn typers(&self) -> Vec<Box<dyn Typer>> {
        self.descriptors.iter().map(|d| (d.new_typer)()).collect()
    }
}
