//! memscope adapter `mindspore`: MindSpore's device memory pool.
//!
//! MindSpore reports its pool through the msTX memory API on domain `mindsporeMemPool`
//! (abi.md §1.6). The mstx adapter's hooks record those calls when this adapter is selected
//! (`--adapters mindspore`); this crate's typer turns them into `MALLOC`/`FREE` rows of Event
//! Type `MindSpore`, with `used`, `total` and `owner` (framework level `MindSpore`) as
//! [`memscope_collect::pool`] describes.
#![forbid(unsafe_code)]

#[cfg(feature = "collector")]
use memscope_collect::adapter::{AdapterDescriptor, Typer};
#[cfg(feature = "collector")]
use memscope_collect::pool::{PoolTyper, MSTX_POOL_SYMBOLS};
use memscope_wire::MstxPool;

/// This adapter's source id: its bit in the selection mask (`MEMSCOPE_ADAPTERS`, part of the
/// probe's environment protocol, so it never changes).
pub const SOURCE: memscope_wire::SourceId = memscope_wire::SourceId(2);

/// The pool this adapter owns: domain `mindsporeMemPool`, rows of Event Type `MindSpore`. The
/// probe hands it to the msTX hooks; pool number 3 is part of the stream format.
pub const MSTX_POOLS: &[MstxPool] = &[MstxPool {
    pool: 3,
    domains: &["mindsporeMemPool"],
    source: SOURCE,
    event_type: "MindSpore",
}];

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
    name: "mindspore",
    source: SOURCE,
    summary: "MindSpore memory pool (msTX domain mindsporeMemPool): blocks as MindSpore \
              with used, total and owner",
    symbols: MSTX_POOL_SYMBOLS,
    events: &["MALLOC/MindSpore", "FREE/MindSpore"],
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
    use memscope_core::event::EventType;
    use memscope_wire::Record;

    #[test]
    fn mindspore_descriptor_is_registered() {
        assert_eq!(DESCRIPTOR.source, SOURCE);
        assert_eq!(DESCRIPTOR.events, ["MALLOC/MindSpore", "FREE/MindSpore"]);
    }

    #[test]
    fn mindspore_typer_takes_only_the_mindspore_pool() {
        let mut t = new_typer();
        let mut ctx = TypeCtx::new(1, vec![]);
        let mut out = Vec::new();
        for pool in 1..=4 {
            let r = Record::RegionRegister {
                ts: 1,
                pool,
                device: 0,
                ptr: 0x10,
                size: 8,
            };
            assert_eq!(t.type_record(&mut ctx, 1, &r, &mut out), pool == 3);
        }
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].event_type, EventType::MindSpore);
    }
}
