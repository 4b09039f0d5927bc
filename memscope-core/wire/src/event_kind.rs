//! The `Event` column's kinds: what a record stands for, named in the stream format (drop
//! counters per kind) and in every dump.

/// The `Event` column: the kind of thing that happened (seed table 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EventKind {
    /// Process-level events: runtime init/fini, trace start/stop, Python `step()`.
    System,
    /// A block was allocated.
    Malloc,
    /// A block was freed.
    Free,
    /// A tensor read/write of a block.
    Access,
    /// An operator started or ended (ATen, ATB).
    OpLaunch,
    /// A kernel was launched (runtime) or an ATB kernel started/ended.
    KernelLaunch,
    /// An msTX mark or range edge.
    Mstx,
    /// A memory snapshot (user request or OOM).
    Snapshot,
    /// Detail rows of an out-of-memory analysis (msMemScope `OOM_DETAIL`).
    OomDetail,
    /// A timed sample of memory outside the hooks (`--sample`, issue 25): memscope's own, kept
    /// out of the msMemScope-format dumps (capture, exports and report only).
    Sample,
}

impl EventKind {
    /// Every kind, in the order of the seed's table.
    pub const ALL: [EventKind; 10] = [
        EventKind::System,
        EventKind::Malloc,
        EventKind::Free,
        EventKind::Access,
        EventKind::OpLaunch,
        EventKind::KernelLaunch,
        EventKind::Mstx,
        EventKind::Snapshot,
        EventKind::OomDetail,
        EventKind::Sample,
    ];

    /// The spelling in the `Event` column.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::System => "SYSTEM",
            EventKind::Malloc => "MALLOC",
            EventKind::Free => "FREE",
            EventKind::Access => "ACCESS",
            EventKind::OpLaunch => "OP_LAUNCH",
            EventKind::KernelLaunch => "KERNEL_LAUNCH",
            EventKind::Mstx => "MSTX",
            EventKind::Snapshot => "SNAPSHOT",
            EventKind::OomDetail => "OOM_DETAIL",
            EventKind::Sample => "SAMPLE",
        }
    }

    /// Parses the `Event` column (exact, upper case as both tools write it).
    pub fn parse(s: &str) -> Option<EventKind> {
        EventKind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}
