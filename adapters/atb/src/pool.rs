//! The ATB pool: msTX domain `atb` (abi.md §1.6). The mstx adapter's hooks record its heap and
//! region calls when this adapter is selected (`--adapters atb`), with HANDLE refs resolved to
//! the block address; [`new_typer`] turns them into `MALLOC`/`FREE` rows of Event Type `ATB`,
//! with `used`, `total` and `owner` (framework level `ATB`) as [`memscope_collect::pool`]
//! describes. Unlike msMemScope, regions on a device without a registered heap are kept.

use crate::MSTX_POOLS;
use memscope_collect::adapter::Typer;
use memscope_collect::pool::PoolTyper;

/// `Event/Event Type` pairs of the pool part.
pub const EVENTS: &[&str] = &["MALLOC/ATB", "FREE/ATB"];

/// The pool typer on its own, for an ATB typer that also handles operator records to delegate
/// to: takes the heap and region records of [`MSTX_POOLS`] only.
pub fn pool_typer() -> PoolTyper {
    PoolTyper::new(MSTX_POOLS)
}

/// A fresh typer for one process (today: the pool typer alone).
pub fn new_typer() -> Box<dyn Typer> {
    Box::new(pool_typer())
}

#[cfg(test)]
mod tests {
    use super::*;
    use memscope_collect::adapter::TypeCtx;
    use memscope_core::event::{EventKind, EventType};
    use memscope_wire::Record;

    #[test]
    fn atb_descriptor_is_registered_with_pool_events() {
        let d = &crate::DESCRIPTOR;
        assert_eq!(d.source, crate::SOURCE);
        // The descriptor lists the operator events too (issue 5); the pool's are all there.
        assert!(
            EVENTS.iter().all(|e| d.events.contains(e)),
            "{:?}",
            d.events
        );
    }

    #[test]
    fn atb_typer_frees_by_address_and_ignores_other_pools() {
        let mut t = new_typer();
        let mut ctx = TypeCtx::new(1, vec![]);
        let mut out = Vec::new();
        let heap = Record::HeapRegister {
            ts: 1,
            pool: 4,
            device: 0,
            ptr: 0x100,
            size: 64,
        };
        let reg = Record::RegionRegister {
            ts: 2,
            pool: 4,
            device: 0,
            ptr: 0x100,
            size: 16,
        };
        let unreg = Record::RegionUnregister {
            ts: 3,
            pool: 4,
            ptr: 0x100,
        };
        let other = Record::RegionUnregister {
            ts: 3,
            pool: 3,
            ptr: 0x100,
        };
        for r in [heap, reg, unreg] {
            assert!(t.type_record(&mut ctx, 1, &r, &mut out));
        }
        assert!(!t.type_record(&mut ctx, 1, &other, &mut out));
        let got: Vec<_> = out
            .iter()
            .map(|e| {
                (
                    e.kind,
                    e.event_type,
                    e.memory().and_then(|m| m.used),
                    e.memory().and_then(|m| m.total),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (EventKind::Malloc, EventType::Atb, Some(16), Some(64)),
                (EventKind::Free, EventType::Atb, Some(0), Some(64)),
            ]
        );
    }
}
