//! Cross-stream race check (issue 36, item 2): happens-before per stream with vector clocks,
//! the model of PyTorch's CUDA Sanitizer (`torch.cuda._sanitizer.EventHandler`, "CSAN").
//!
//! Input: [`StreamOp`]s in program (host) order — kernel launches with the buffers they read
//! and write, stream/event creation, event record/wait, stream/event/device synchronisation,
//! allocations and frees. Output: [`RaceFinding`]s, each naming both operations, both
//! streams, the address and size, the tensors' aliases and owners and both call stacks.
//!
//! The semantics are CSAN's, so that its `EventHandler` fed the same sequence is an oracle
//! (`tests/tests/races.rs` compares verdict sets exactly):
//!
//! * every launch takes the next global sequence number (1, 2, ...) and sets its stream's own
//!   entry in that stream's vector clock to it;
//! * a stream's clock starts as a copy of the host's clock when the stream is created (or
//!   first used); the default stream 0 exists from the start;
//! * an event record copies the stream's clock into the event; a wait merges (max) the event's
//!   clock into the stream's; a stream synchronise merges that stream's clock into every
//!   stream's and the host's; an event synchronise merges the event's into every stream's and
//!   the host's; a device synchronise sets the host's entry of each stream to that stream's
//!   own entry and merges the host's clock into every stream's;
//! * an earlier access (sequence number `n`, stream `t`) is ordered before the current
//!   launch on stream `s` iff `n <= clock[s][t]`;
//! * per data pointer (the exact start address, as CSAN's `data_ptr`) the last write and the
//!   reads since it are kept; a read is checked against the last write
//!   ([`RaceKind::ReadAfterWrite`]); a write is checked against every read since the last
//!   write if there was one ([`RaceKind::WriteAfterRead`]), else against the last write
//!   ([`RaceKind::WriteAfterWrite`]); within one launch all reads come before all writes;
//! * an allocation forgets what was recorded at its address, and so does a free.
//!
//! Where memscope goes further than CSAN: a free is also checked ([`RaceKind::FreeWhileInUse`]):
//! every access still recorded at the address must be ordered before the freeing stream (the
//! stream the allocator hands the block back to), or before the host when the free names no
//! stream. CSAN forgets a freed pointer without a check (the CUDA caching allocator's
//! `record_stream` is its answer), so the oracle comparison leaves this kind out.
//!
//! Memory: state is kept per live data pointer and per stream and event, not per launch. A
//! launch stays referenced (for its stacks) only while one of its accesses is the last write or
//! a read since the last write at some pointer; reads that are ordered before every stream and
//! the host can never conflict again and are dropped as the list grows.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod check;
mod clocks;
mod layer;
mod mapper;
pub mod sanitizer_op;

use std::sync::Arc;

pub use check::{check, Checker, RaceChecker};
pub use layer::{FindingSink, RaceLayer, KEPT_FINDINGS};
pub use mapper::{MapStats, RowMapper};

/// A stream's id (the runtime's handle value, or any stable number; 0 is the default stream).
pub type StreamId = u64;
/// An event's id (the runtime's handle value, or any stable number).
pub type EventId = u64;

/// How a launch uses one buffer (CSAN's `read_only`, `read_write` and `outputs` sets).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AccessKind {
    /// Read and not written.
    ReadOnly,
    /// Written (and maybe read): an in-place or `out=` argument.
    ReadWrite,
    /// Written as the operator's output (a write, reported as "the output").
    Output,
}

/// One buffer a kernel launch touches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorAccess {
    /// The buffer's start address (the data pointer races are keyed by).
    pub addr: u64,
    /// Bytes accessed.
    pub size: u64,
    /// How the launch uses it.
    pub kind: AccessKind,
    /// The argument names it is passed as (CSAN's `tensor_aliases`), e.g. `["self", "out"]`.
    pub aliases: Vec<String>,
    /// The tensor's owner chain (memscope's owner, e.g. `"model@layer1.weight"`), if known.
    pub owner: Option<String>,
}

/// A kernel launch: one operator enqueued on one stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelLaunch {
    /// The recording's id of this launch (the event id), reported back in findings.
    pub id: u64,
    /// Time of the launch on the host, ns.
    pub time_ns: u64,
    /// The stream it is enqueued on.
    pub stream: StreamId,
    /// The operator's (or kernel's) name.
    pub operator: String,
    /// The buffers it reads and writes. A buffer listed both as read and written is a write;
    /// one listed twice is one access.
    pub accesses: Vec<TensorAccess>,
    /// The Python stack at the launch, rendered (innermost last), if recorded.
    pub python_stack: Option<Arc<str>>,
    /// The C stack at the launch, rendered, if recorded.
    pub c_stack: Option<Arc<str>>,
}

/// A free of device memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Free {
    /// The recording's id of this free.
    pub id: u64,
    /// Time of the free on the host, ns.
    pub time_ns: u64,
    /// The block's address (the data pointer).
    pub addr: u64,
    /// The block's size.
    pub size: u64,
    /// The stream the block returns to (a caching allocator reuses it there at once); `None`:
    /// freed to the host (accesses must be ordered before the host).
    pub stream: Option<StreamId>,
    /// The Python stack at the free, if recorded.
    pub python_stack: Option<Arc<str>>,
    /// The C stack at the free, if recorded.
    pub c_stack: Option<Arc<str>>,
}

/// One stream operation, in program (host) order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StreamOp {
    /// A kernel launch.
    KernelLaunch(KernelLaunch),
    /// A stream was created.
    StreamCreate {
        /// The new stream.
        stream: StreamId,
    },
    /// An event was created.
    EventCreate {
        /// The new event.
        event: EventId,
    },
    /// An event was destroyed.
    EventDelete {
        /// The event.
        event: EventId,
    },
    /// An event was recorded on a stream (`aclrtRecordEvent`).
    EventRecord {
        /// The event.
        event: EventId,
        /// The stream it captures.
        stream: StreamId,
    },
    /// A stream waits for an event (`aclrtStreamWaitEvent`).
    EventWait {
        /// The waiting stream.
        stream: StreamId,
        /// The event waited for.
        event: EventId,
    },
    /// The host waited for a stream (`aclrtSynchronizeStream`).
    StreamSynchronize {
        /// The stream.
        stream: StreamId,
    },
    /// The host waited for an event (`aclrtSynchronizeEvent`).
    EventSynchronize {
        /// The event.
        event: EventId,
    },
    /// The host waited for the whole device (`aclrtSynchronizeDevice`).
    DeviceSynchronize,
    /// Device memory was allocated (forgets any earlier accesses at `addr`).
    Alloc {
        /// The block's address.
        addr: u64,
        /// The block's size.
        size: u64,
    },
    /// Device memory was freed to a known stream or to the host ([`Free::stream`]): every
    /// access not ordered before it is a finding now.
    Free(Free),
    /// A block went back to a pool that does not record the stream it serves (a caching
    /// allocator's free as msTX reports it; [`Free::stream`] is not looked at). CSAN forgets
    /// its accesses; memscope keeps those not yet ordered before everything and reports each
    /// later access to the address (the block's next user) that is not ordered after one of
    /// them and conflicts with it: the block was reused while another stream may still use it.
    PoolFree(Free),
}

/// What kind of conflict a finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RaceKind {
    /// A read not ordered after an earlier write on another stream.
    ReadAfterWrite,
    /// A write not ordered after an earlier read on another stream.
    WriteAfterRead,
    /// A write not ordered after an earlier write on another stream.
    WriteAfterWrite,
    /// A free not ordered after an access on another stream (memscope's own check).
    FreeWhileInUse,
}

impl RaceKind {
    /// The kind's name in reports, e.g. `"read-after-write"`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ReadAfterWrite => "read-after-write",
            Self::WriteAfterRead => "write-after-read",
            Self::WriteAfterWrite => "write-after-write",
            Self::FreeWhileInUse => "free-while-in-use",
        }
    }
}

/// What one side of a finding did to the buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AccessRole {
    /// Read it.
    Read,
    /// Wrote it.
    Write,
    /// Freed it.
    Free,
}

/// One side of a finding: the operation and how it touched the buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpSide {
    /// The recording's id of the operation ([`KernelLaunch::id`] or [`Free::id`]).
    pub id: u64,
    /// CSAN's sequence number of the launch (1-based count of launches); 0 for a free.
    pub seq: u64,
    /// The operator's name, or `"free"`.
    pub name: Arc<str>,
    /// The stream; `None` for a free to the host.
    pub stream: Option<StreamId>,
    /// What it did.
    pub role: AccessRole,
    /// Whether the buffer is the operator's output.
    pub is_output: bool,
    /// The argument names the buffer was passed as.
    pub aliases: Vec<String>,
    /// The tensor's owner, if known.
    pub owner: Option<String>,
    /// Bytes accessed.
    pub size: u64,
    /// Host time of the operation, ns.
    pub time_ns: u64,
    /// The Python stack, if recorded.
    pub python_stack: Option<Arc<str>>,
    /// The C stack, if recorded.
    pub c_stack: Option<Arc<str>>,
}

/// Two operations on different streams that touch one buffer with no synchronisation that
/// orders the earlier before the later.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RaceFinding {
    /// The kind of conflict.
    pub kind: RaceKind,
    /// The buffer's address (data pointer).
    pub addr: u64,
    /// The buffer's size as the current operation accesses it.
    pub size: u64,
    /// The later operation (in program order).
    pub current: OpSide,
    /// The earlier access it is not ordered after.
    pub previous: OpSide,
    /// For a reuse after a [`StreamOp::PoolFree`]: that free (`current` is the new user).
    pub free: Option<OpSide>,
}

/// ` at <frame> ← <caller>` of a side's Python stack, else its C stack (the two innermost
/// frames, files without their folders), or nothing.
fn top_frame(s: &OpSide) -> String {
    let Some(stack) = [&s.python_stack, &s.c_stack]
        .into_iter()
        .flatten()
        .find(|st| !st.trim().is_empty())
    else {
        return String::new();
    };
    let frames: Vec<String> = stack
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .take(2)
        .map(|f| {
            // `/a/b/x.py(12): fn` -> `x.py(12): fn`; C frames keep their form
            let (path, rest) = f.split_at(f.find(['(', ' ']).unwrap_or(f.len()));
            format!("{}{rest}", path.rsplit('/').next().unwrap_or(path))
        })
        .collect();
    format!(" at {}", frames.join(" ← "))
}

impl std::fmt::Display for RaceFinding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let side = |s: &OpSide| {
            let stream = match s.stream {
                None => "host".to_owned(),
                Some(0) => "the default stream".to_owned(),
                Some(x) => format!("stream {x:#x}"),
            };
            let owner = s
                .owner
                .as_deref()
                .map(|o| format!(" [{o}]"))
                .unwrap_or_default();
            let al = if s.aliases.is_empty() {
                String::new()
            } else {
                format!(" ({})", s.aliases.join(", "))
            };
            format!(
                "{} #{} on {stream}{al}{owner}{}",
                s.name,
                s.id,
                top_frame(s)
            )
        };
        write!(
            f,
            "{} at {:#x} ({} B): {} after {}",
            self.kind.as_str(),
            self.addr,
            self.size,
            side(&self.current),
            side(&self.previous)
        )?;
        if let Some(fr) = &self.free {
            write!(f, ", reused after free #{}", fr.id)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
