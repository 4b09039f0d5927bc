//! The unit tests' registration list (the collector names no adapter crate): descriptors with
//! the built-in adapters' names, ids and selection properties and the shipped plugin's, and no
//! typers. [`crate::registry::installed`] answers it in this crate's unit tests.

use crate::adapter::{AccountSummary, AdapterDescriptor, SourceId, Volume};
use crate::registry::Registry;

const fn built_in(name: &'static str, source: u16, device_memory: bool) -> AdapterDescriptor {
    AdapterDescriptor {
        name,
        source: SourceId(source),
        default_on: true,
        device_memory,
        ..AdapterDescriptor::BASE
    }
}

static MSTX: AdapterDescriptor = built_in("mstx", 0, false);
static PTA: AdapterDescriptor = built_in("pta", 1, true);
static MINDSPORE: AdapterDescriptor = built_in("mindspore", 2, true);
static ATB: AdapterDescriptor = built_in("atb", 3, true);
static HAL: AdapterDescriptor = built_in("hal", 4, true);
static ACL: AdapterDescriptor = built_in("acl", 5, false);
static HOST: AdapterDescriptor = AdapterDescriptor {
    default_on: false,
    host_memory: true,
    volume: Volume::Account {
        is_row: crate::layers::is_host_adapter_row,
    },
    ..built_in("host", 6, false)
};
static PYMEM: AdapterDescriptor = AdapterDescriptor {
    name: "pymem",
    host_memory: true,
    library: Some("libstand_in.so"),
    volume: Volume::Account {
        is_row: |ev| matches!(ev.event_type.as_str(), "PYMEM" | "PYMEM_ARENA"),
    },
    account_summary: Some(AccountSummary {
        event_type: "PYMEM",
        object: "Python object",
        objects: "Python objects",
        counted: "Python object(s)",
    }),
    ..AdapterDescriptor::BASE
};

/// The list.
pub static REGISTRY: Registry = Registry {
    descriptors: &[&MSTX, &PTA, &MINDSPORE, &ATB, &HAL, &ACL, &HOST, &PYMEM],
};
