//! What holds the memory (issue 25): the *role* of a block, read from its owner chain, and the
//! `MEMORY_OWNER` row that gives a live block a new owner chain after its MALLOC.
//!
//! **Owner strings** keep msMemScope's `{A}@{B}@{C}` form, framework first:
//! `PTA@weight`, `PTA@gradient`, `PTA@optimizer_state`, `PTA@activation@model.layers.3.mlp`,
//! `HOST@activation@lm_head` (torch CPU tensors with `--device cpu`), `PTA@fsdp2@sharded_weight`,
//! `PTA@vllm@kv_cache@attn`. The **role level** is the first level after the framework that is
//! one of [`ROLES`] (or an alias of one, see [`role_of`]); the level after it, if any, is the
//! role's **detail** (the `nn.Module` path of an activation, the kind of a KV cache). A chain
//! without such a level (no owner, `PTA` alone, a user's `describer` label only) has the role
//! `temp`. This format is stable: `memscope diff --by role` (issue 24) and every report group
//! by it.
//!
//! **Roles given after the MALLOC.** The framework hooks tag weights, gradients and optimizer
//! state when `optimizer.step()` returns, long after those blocks were allocated; the role is a
//! property of the block for its whole life, so the analyses apply it from the block's MALLOC
//! on. The collector writes the tag as a SYSTEM row `MEMORY_OWNER` (Device and Ptr of the block,
//! Attr `{allocation_id,addr,size,pool,owner}`), only when the chain changes; msMemScope's
//! readers skip SYSTEM rows they do not know, memscope's analyses read them. The FREE row of a
//! tagged block carries the new chain too.

use crate::event::{Attrs, Device, Event, EventType};
use crate::owner::OwnerChain;

/// The roles, in display order; `temp` is everything without a role.
pub const ROLES: [&str; 9] = [
    "weight",
    "gradient",
    "optimizer_state",
    "activation",
    "kv_cache",
    "sharded_weight",
    "all_gather",
    "graph_pool",
    "temp",
];

/// The role of blocks whose owner chain names none.
pub const TEMP: &str = "temp";

/// msMemScope's spellings of a role in its framework hook tables, and the role they are.
const ALIASES: [(&str, &str); 2] = [("weights", "weight"), ("all_gather_output", "all_gather")];

fn as_role(level: &str) -> Option<&'static str> {
    ROLES
        .iter()
        .copied()
        .find(|r| *r == level)
        .or_else(|| ALIASES.iter().find(|(a, _)| *a == level).map(|(_, r)| *r))
}

/// The role of an owner chain (`PTA@model@weight` → `weight`, `PTA@vllm@weights` → `weight`,
/// `PTA@model` or `(no owner)` → `temp`): its first level after the framework level that is a
/// role.
pub fn role_of(owner: &str) -> &'static str {
    owner.split('@').skip(1).find_map(as_role).unwrap_or(TEMP)
}

/// [`role_of`] of a parsed chain (no text built).
pub fn role_of_chain(chain: &OwnerChain) -> &'static str {
    chain
        .levels()
        .iter()
        .skip(1)
        .find_map(|l| as_role(l))
        .unwrap_or(TEMP)
}

/// The role of an owner chain and the level after the role level, its detail
/// (`PTA@activation@model.layers.3.mlp` → (`activation`, `model.layers.3.mlp`)); the detail is
/// empty when the chain ends at the role (or has no role).
pub fn role_and_detail(owner: &str) -> (&'static str, &str) {
    let mut levels = owner.split('@').skip(1);
    while let Some(l) = levels.next() {
        if let Some(r) = as_role(l) {
            return (r, levels.next().unwrap_or(""));
        }
    }
    (TEMP, "")
}

/// Index of a role in [`ROLES`].
pub fn role_index(role: &str) -> usize {
    ROLES
        .iter()
        .position(|r| *r == role)
        .unwrap_or(ROLES.len() - 1)
}

/// The owner chain a tag gives a block of `pool`: the framework level of the pool (`PTA`,
/// `HOST`, …) followed by the tag's levels (`weight`, or `fsdp2@sharded_weight`); `@` separates
/// levels, empty levels are skipped.
pub fn tagged_chain(pool: EventType, label: &str) -> OwnerChain {
    let mut c = OwnerChain::framework(pool.as_str());
    for l in label.split('@') {
        c.push(l);
    }
    c
}

/// A block given a new owner chain after its MALLOC.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnerTag {
    /// The block's allocator (Event Type of its MALLOC).
    pub pool: EventType,
    /// Its device.
    pub device: Device,
    /// Its start address.
    pub addr: u64,
    /// Its `allocation_id` (0: unknown).
    pub allocation_id: u64,
    /// Its bytes.
    pub size: u64,
    /// The new owner chain.
    pub owner: String,
}

impl OwnerTag {
    /// The SYSTEM `MEMORY_OWNER` row of this tag, made by thread `tid` of `pid` at `ts`.
    pub fn to_event(&self, ts: u64, pid: u32, tid: u32) -> Event {
        let mut ev = Event::new(EventType::MemoryOwner, ts, pid, tid);
        ev.device = self.device;
        ev.ptr = Some(self.addr);
        ev.attrs = Attrs::Pairs(vec![
            ("allocation_id".into(), self.allocation_id.to_string()),
            ("addr".into(), format!("0x{:016x}", self.addr)),
            ("size".into(), self.size.to_string()),
            ("pool".into(), self.pool.as_str().to_owned()),
            ("owner".into(), self.owner.clone()),
        ]);
        ev
    }

    /// The tag a `MEMORY_OWNER` row carries (`None` for any other row or one without `pool`
    /// and `owner`).
    pub fn from_event(ev: &Event) -> Option<OwnerTag> {
        if ev.event_type != EventType::MemoryOwner {
            return None;
        }
        let Attrs::Pairs(p) = &ev.attrs else {
            return None;
        };
        let get = |k: &str| p.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str());
        let num = |k: &str| {
            get(k).and_then(|v| match v.strip_prefix("0x") {
                Some(h) => u64::from_str_radix(h, 16).ok(),
                None => v.parse().ok(),
            })
        };
        let addr = num("addr").or(ev.ptr)?;
        Some(OwnerTag {
            pool: EventType::parse(get("pool")?)
                .unwrap_or_else(|| EventType::custom(get("pool").unwrap_or(""))),
            device: ev.device,
            addr,
            allocation_id: num("allocation_id").unwrap_or(0),
            size: num("size").unwrap_or(0),
            owner: get("owner")?.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_role_is_the_first_role_level_after_the_framework_and_temp_otherwise() {
        assert_eq!(role_of("PTA@weight"), "weight");
        assert_eq!(role_of("PTA@model@gradient@ops"), "gradient");
        assert_eq!(role_of("PTA@vllm@weights"), "weight");
        assert_eq!(role_of("PTA@fsdp2@all_gather_output"), "all_gather");
        assert_eq!(role_of("PTA@model"), "temp");
        assert_eq!(role_of("(no owner)"), "temp");
        // the framework level is never a role, even when spelled like one
        assert_eq!(role_of("weight"), "temp");
        assert_eq!(
            role_and_detail("PTA@activation@model.layers.3.mlp"),
            ("activation", "model.layers.3.mlp")
        );
        assert_eq!(role_and_detail("HOST@weight"), ("weight", ""));
        assert_eq!(role_index("activation"), 3);
        assert_eq!(role_index("nonsense"), ROLES.len() - 1);
        assert_eq!(
            role_of_chain(&OwnerChain::parse("PTA@fsdp2@sharded_weight")),
            "sharded_weight"
        );
    }

    #[test]
    fn a_tag_round_trips_through_its_memory_owner_row() {
        let t = OwnerTag {
            pool: EventType::Pta,
            device: Device::Npu(2),
            addr: 0x1000,
            allocation_id: 7,
            size: 4096,
            owner: tagged_chain(EventType::Pta, "fsdp2@sharded_weight").to_string(),
        };
        assert_eq!(t.owner, "PTA@fsdp2@sharded_weight");
        let ev = t.to_event(5, 1, 2);
        assert_eq!(ev.kind.as_str(), "SYSTEM");
        assert_eq!(ev.event_type.as_str(), "MEMORY_OWNER");
        assert_eq!(OwnerTag::from_event(&ev), Some(t));
        assert_eq!(
            OwnerTag::from_event(&Event::new(EventType::Step, 1, 1, 1)),
            None
        );
    }
}
