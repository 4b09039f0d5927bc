//! memscope adapter `pta`: torch_npu's caching allocator and workspace allocator.
//!
//! torch_npu reports both pools through the msTX memory API (abi.md §1.6): domain `ptaCaching`
//! (older name `msleaks`) for the caching allocator, `ptaWorkspace` for the workspace
//! allocator; heap register/unregister for the segments a pool reserves, region
//! register/unregister for each block it hands out. The mstx adapter's hooks record those calls
//! when this adapter is selected (`--adapters pta`); this crate's typer turns them into
//! `MALLOC`/`FREE` rows of Event Type `PTA` and `PTA_WORKSPACE`, with `used`, `total` and
//! `owner` (framework level `PTA` / `PTA_WORKSPACE`) as [`memscope_collect::pool`] describes.
#![forbid(unsafe_code)]

#[cfg(feature = "collector")]
use memscope_collect::adapter::{AdapterDescriptor, Typer};
#[cfg(feature = "collector")]
use memscope_collect::pool::{PoolTyper, MSTX_POOL_SYMBOLS};
use memscope_wire::MstxPool;

/// This adapter's source id: its bit in the selection mask (`MEMSCOPE_ADAPTERS`, part of the
/// probe's environment protocol, so it never changes).
pub const SOURCE: memscope_wire::SourceId = memscope_wire::SourceId(1);

/// The pools this adapter owns: the caching pool (`PTA`, domain `ptaCaching` and its old name
/// `msleaks`) and the workspace pool (`PTA_WORKSPACE`). The probe hands them to the msTX hooks;
/// pool numbers 1 and 2 are part of the stream format.
pub const MSTX_POOLS: &[MstxPool] = &[
    MstxPool {
        pool: 1,
        domains: &["ptaCaching", "msleaks"],
        source: SOURCE,
        event_type: "PTA",
    },
    MstxPool {
        pool: 2,
        domains: &["ptaWorkspace"],
        source: SOURCE,
        event_type: "PTA_WORKSPACE",
    },
];

/// A fresh typer for one process: takes the heap and region records of [`MSTX_POOLS`] only.
#[cfg(feature = "collector")]
pub fn new_typer() -> Box<dyn Typer> {
    Box::new(PoolTyper::new(MSTX_POOLS))
}

#[cfg(feature = "collector")]
/// This adapter's descriptor: listed once, in the CLI's registration list
/// (`memscope-cli/src/builtin.rs`); nothing registers it at load time, so the probe,
/// which never names it, links none of the collector code it points to.
pub static DESCRIPTOR: AdapterDescriptor = AdapterDescriptor {
    name: "pta",
    source: SOURCE,
    summary: "torch_npu caching and workspace pools (msTX domains ptaCaching/msleaks, \
              ptaWorkspace): blocks as PTA / PTA_WORKSPACE with used, total and owner",
    symbols: MSTX_POOL_SYMBOLS,
    events: &[
        "MALLOC/PTA",
        "FREE/PTA",
        "MALLOC/PTA_WORKSPACE",
        "FREE/PTA_WORKSPACE",
    ],
    config_keys: &[],
    default_on: true,
    device_memory: true,
    new_typer: Some(new_typer),
    ..AdapterDescriptor::BASE
};

#[cfg(all(test, feature = "collector"))]
mod tests {
    use super::*;
    use memscope_collect::adapter::TypeCtx;
    use memscope_core::event::{EventKind, EventType};
    use memscope_wire::Record;

    #[test]
    fn pta_descriptor_is_registered_with_its_events() {
        let d = &DESCRIPTOR;
        assert_eq!(d.source, SOURCE);
        assert!(d.events.contains(&"MALLOC/PTA_WORKSPACE"));
        assert!(d.symbols.contains(&"mstxMemRegionsRegister"));
    }

    #[test]
    fn pta_typer_types_caching_and_workspace_and_leaves_other_pools() {
        let mut t = new_typer();
        let mut ctx = TypeCtx::new(1, vec![]);
        let mut out = Vec::new();
        for (pool, ptr) in [(1, 0x10), (2, 0x20)] {
            let r = Record::RegionRegister {
                ts: 1,
                pool,
                device: 0,
                ptr,
                size: 8,
            };
            assert!(t.type_record(&mut ctx, 1, &r, &mut out));
        }
        // MindSpore's and ATB's pool numbers
        for pool in [3, 4] {
            let r = Record::RegionRegister {
                ts: 1,
                pool,
                device: 0,
                ptr: 0x30,
                size: 8,
            };
            assert!(!t.type_record(&mut ctx, 1, &r, &mut out));
        }
        let got: Vec<_> = out.iter().map(|e| (e.kind, e.event_type)).collect();
        assert_eq!(
            got,
            [
                (EventKind::Malloc, EventType::Pta),
                (EventKind::Malloc, EventType::PtaWorkspace)
            ]
        );
    }
}
