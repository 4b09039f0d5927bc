//! The Attr cell's typed attributes, one family per kind of row (MALLOC/FREE, ACCESS, launches,
//! key/value pairs), and the HAL and inefficiency words they use. Re-exported by
//! [`crate::event`], where the rows are.

use crate::owner::OwnerChain;

/// HAL page type, from flag bits 17 (huge) and 31 (giant) (abi.md §2.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum PageType {
    Normal,
    Huge,
    Giant,
}

impl PageType {
    /// `normal`, `huge` or `giant`.
    pub fn as_str(self) -> &'static str {
        match self {
            PageType::Normal => "normal",
            PageType::Huge => "huge",
            PageType::Giant => "giant",
        }
    }
}

/// How a HAL block was made: `halMemAlloc` (`alloc`) or `halMemCreate` (`create`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum AllocType {
    Alloc,
    Create,
}

impl AllocType {
    /// `alloc` or `create`.
    pub fn as_str(self) -> &'static str {
        match self {
            AllocType::Alloc => "alloc",
            AllocType::Create => "create",
        }
    }
}

/// The three inefficient-memory classes of msMemScope (behaviour spec §10.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[allow(missing_docs)]
pub enum Inefficiency {
    EarlyAllocation,
    LateDeallocation,
    TemporaryIdleness,
}

impl Inefficiency {
    /// `early_allocation`, `late_deallocation` or `temporary_idleness`.
    pub fn as_str(self) -> &'static str {
        match self {
            Inefficiency::EarlyAllocation => "early_allocation",
            Inefficiency::LateDeallocation => "late_deallocation",
            Inefficiency::TemporaryIdleness => "temporary_idleness",
        }
    }

    /// Parses one of the three names.
    pub fn parse(s: &str) -> Option<Inefficiency> {
        match s {
            "early_allocation" => Some(Inefficiency::EarlyAllocation),
            "late_deallocation" => Some(Inefficiency::LateDeallocation),
            "temporary_idleness" => Some(Inefficiency::TemporaryIdleness),
            _ => None,
        }
    }
}

/// Attributes of MALLOC and FREE rows (seed table 2, "当Event为MALLOC或FREE时").
/// Sizes and totals are bytes. `None` fields are not written.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MemoryAttrs {
    /// Same id for every row of one block; per process, from 1.
    pub allocation_id: u64,
    /// Start address of the block.
    pub addr: u64,
    /// Block size in bytes; a FREE carries the size of its MALLOC.
    pub size: u64,
    /// Pinned host memory registered with the runtime (`pinned:true`).
    pub pinned: bool,
    /// Bytes handed out by the pool / live in the allocator, after this event.
    pub used: Option<i64>,
    /// Bytes the pool has reserved (pools) or live host bytes (HOST), after this event.
    pub total: Option<i64>,
    /// Process memory as the driver reports it (msMemScope `process_used`).
    pub process_used: Option<i64>,
    /// Whole-device memory in use (msMemScope `device_used`).
    pub device_used: Option<i64>,
    /// Row made up for a block whose real event was not seen: a synthetic FREE at exit, or a
    /// MALLOC written when a collection window opened for a block allocated before it
    /// ([`crate::event::Event::is_history_malloc`]).
    pub shadow: bool,
    /// A torch CPU tensor storage (issue 13's CPU-tensor hooks), not a HOST adapter malloc:
    /// written whether or not HOST adapter rows are (`--host-rows`).
    pub cpu_tensor: bool,
    /// A block of an account-only source (a registered type with `MEMSCOPE_TYPE_ACCOUNT`):
    /// summed up in its live account, written only with `--host-rows`, not an ACCESS target.
    pub account_only: bool,
    /// Owner chain, MALLOC rows only.
    pub owner: Option<OwnerChain>,
    /// Inefficient-memory classes, MALLOC rows only.
    pub inefficient: Vec<Inefficiency>,
    /// HAL page type, HAL MALLOC rows only.
    pub page_type: Option<PageType>,
    /// HAL allocation path, HAL MALLOC rows only.
    pub alloc_type: Option<AllocType>,
    /// Module id of 2025 dumps (`MID:n`).
    pub module_id: Option<u32>,
    /// Keys this model does not know, kept in order so files round-trip.
    pub extra: Vec<(String, String)>,
}

/// Attributes of ACCESS rows.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AccessAttrs {
    /// Block id of the accessed memory, when known.
    pub allocation_id: Option<u64>,
    /// Tensor dtype.
    pub dtype: Option<String>,
    /// Tensor shape, as the framework prints it.
    pub shape: Option<String>,
    /// Tensor size in bytes.
    pub size: Option<u64>,
    /// Tensor format.
    pub format: Option<String>,
    /// Pool of the accessed memory (`PTA`, `ATB`, …).
    pub pool: Option<String>,
    /// Unknown keys, in order.
    pub extra: Vec<(String, String)>,
}

/// Attributes of OP_LAUNCH and KERNEL_LAUNCH rows.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LaunchAttrs {
    /// Position of the ATB operator/kernel in the model (`0_1967120/0/0_GraphOperation/...`).
    pub path: Option<String>,
    /// ATB workspace start address.
    pub workspace_ptr: Option<u64>,
    /// ATB workspace size in bytes.
    pub workspace_size: Option<u64>,
    /// Runtime stream id.
    pub stream_id: Option<i64>,
    /// Runtime task id.
    pub task_id: Option<i64>,
    /// The `aclrtStream` handle the launch was given (`stream:0x…`, 0 the default stream;
    /// memscope's own, issue 36).
    pub stream: Option<u64>,
    /// Unknown keys, in order.
    pub extra: Vec<(String, String)>,
}

/// Typed attributes, one variant per event family.
#[derive(Clone, Debug, PartialEq, Default)]
pub enum Attrs {
    /// No attributes (empty Attr cell).
    #[default]
    None,
    /// MALLOC / FREE.
    Memory(MemoryAttrs),
    /// ACCESS.
    Access(AccessAttrs),
    /// OP_LAUNCH / KERNEL_LAUNCH.
    Launch(LaunchAttrs),
    /// SYSTEM, SNAPSHOT, OOM_DETAIL and plugin events: ordered key/value pairs whose keys are
    /// fixed by the producer (e.g. snapshot keys of the seed).
    Pairs(Vec<(String, String)>),
}
