//! The records of the stream, and their encoding (the decoder is in `codec`).

use super::{AccessKind, PyCodeKind, PyTraceEvent, SystemCode};

/// One record. Text borrows from the stream buffer (`B = &[u8]`) or is owned
/// (`B = Box<[u8]>`). `ts` is ns since the epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Record<B = Box<[u8]>> {
    /// The following records of this chunk were written by thread `tid`.
    Thread {
        /// Kernel thread id.
        tid: u32,
    },
    /// `mstxMarkA` / `mstxDomainMarkA`.
    Mark {
        /// Time.
        ts: u64,
        /// `aclrtStream` pointer as given (0 for NULL).
        stream: u64,
        /// Message bytes (NULL message: empty, `null` true).
        msg: B,
        /// The caller passed a NULL message.
        null: bool,
    },
    /// `mstxRangeStartA`.
    RangeStart {
        /// Time.
        ts: u64,
        /// Range id returned to the caller.
        id: u64,
        /// Stream pointer.
        stream: u64,
        /// Message bytes.
        msg: B,
        /// The caller passed a NULL message.
        null: bool,
    },
    /// `mstxRangeEnd`.
    RangeEnd {
        /// Time.
        ts: u64,
        /// Range id passed by the caller.
        id: u64,
    },
    /// `mstxMemHeapRegister`: a pool reserved `[ptr, ptr+size)` on `device`.
    HeapRegister {
        /// Time.
        ts: u64,
        /// Pool number ([`crate::MstxPool::pool`]).
        pool: u8,
        /// Device id from the range descriptor (logical, before visible-devices mapping).
        device: u32,
        /// Heap base.
        ptr: u64,
        /// Heap bytes.
        size: u64,
    },
    /// `mstxMemHeapUnregister`.
    HeapUnregister {
        /// Time.
        ts: u64,
        /// Pool number ([`crate::MstxPool::pool`]).
        pool: u8,
        /// Heap handle as passed (the probe hands out the base address as handle).
        ptr: u64,
    },
    /// One region of `mstxMemRegionsRegister`: a block handed out by a pool.
    RegionRegister {
        /// Time.
        ts: u64,
        /// Pool number ([`crate::MstxPool::pool`]).
        pool: u8,
        /// Logical device id.
        device: u32,
        /// Block address.
        ptr: u64,
        /// Block bytes.
        size: u64,
    },
    /// One ref of `mstxMemRegionsUnregister`, resolved to the block address.
    RegionUnregister {
        /// Time.
        ts: u64,
        /// Pool number ([`crate::MstxPool::pool`]).
        pool: u8,
        /// Block address.
        ptr: u64,
    },
    /// Push an owner label on the writing thread's stack.
    OwnerPush {
        /// Time.
        ts: u64,
        /// Label bytes.
        label: B,
    },
    /// The C call stack of the thread's next record (the one with the same `ts`), captured by
    /// the runtime's stack service for any adapter (`--call-stack c:N`): the collector puts it
    /// in that record's rows' `Call Stack(C)`. Written right before that record.
    CallStack {
        /// Time stamp of the record it belongs to.
        ts: u64,
        /// Interned C stack id (see `StackDef`).
        stack: u32,
    },
    /// The thread's next record (the one with the same `ts`, written right after this one) is
    /// an allocation or free made outside a collection window: the memory hooks keep recording
    /// those (without stacks) so the collector can write the blocks already live when a window
    /// opens (msMemScope's shadow blocks).
    Shadow {
        /// Time stamp of the record it belongs to.
        ts: u64,
    },
    /// Pop the writing thread's owner stack.
    OwnerPop {
        /// Time.
        ts: u64,
    },
    /// A process-level event.
    System {
        /// Time.
        ts: u64,
        /// What happened.
        code: SystemCode,
        /// Device of the calling thread (`u32::MAX`: none).
        device: u32,
    },
    // ---- Address records: the allocation-volume shape (tags 14–16, 20–27, `fast.rs`) ----
    // A malloc takes about 5 bytes: the one-byte tag implies the source, and addresses are
    // zig-zag deltas of the chunk's previous one (divided by 16 when aligned). The shape is
    // shared, not one adapter's, because the records it serves are the ones every layer of the
    // data path special-cases for volume (capture columns, fast path, live-block accounts); the
    // registration list binds it to the source that writes it (HOST's descriptor, whose typer
    // and fast path take these records), and step 3 of the redesign opens it to other
    // allocation-volume sources (CPython's allocator domains, plugins).
    /// An allocator handed out a block.
    Malloc {
        /// Time.
        ts: u64,
        /// Block address.
        addr: u64,
        /// Requested bytes.
        size: u64,
        /// Interned call stack id (0: none).
        stack: u32,
    },
    /// An allocator took a block back.
    Free {
        /// Time.
        ts: u64,
        /// Block address.
        addr: u64,
    },
    /// Definition of an interned call stack: `frames` raw return addresses, innermost first,
    /// encoded as varints in `raw` (decode with [`crate::StackFrames`]).
    StackDef {
        /// Stack id (from 1).
        id: u32,
        /// Number of frames.
        count: u32,
        /// Encoded frames.
        raw: B,
    },
    /// A loaded ELF object (HOST adapter, with C stacks): lets the collector symbolise return
    /// addresses after the process is gone. Written once per object per process image.
    Module {
        /// Time the probe saw it loaded.
        ts: u64,
        /// Load bias: runtime address = ELF virtual address + `base`.
        base: u64,
        /// Lowest mapped address of its `PT_LOAD` segments.
        start: u64,
        /// Bytes from `start` to the end of its highest `PT_LOAD` segment.
        size: u64,
        /// GNU build id (`NT_GNU_BUILD_ID` descriptor bytes; empty when it has none).
        build_id: B,
        /// Path as the loader knows it (the executable's real path for the main program).
        path: B,
    },
    /// A mapping was created (`mmap`; HOST with `MEMSCOPE_HOST_MMAP=1`).
    Mmap {
        /// Time.
        ts: u64,
        /// Mapping address.
        addr: u64,
        /// Requested length.
        size: u64,
        /// Interned call stack id (0: none).
        stack: u32,
    },
    /// A `munmap` of `[addr, addr + size)` (`size` rounded up to whole pages).
    Munmap {
        /// Time.
        ts: u64,
        /// Start address.
        addr: u64,
        /// Length.
        size: u64,
    },
    /// An `mremap` that succeeded: the pages of `[old_addr, old_addr + old_size)` now lie
    /// at `[new_addr, new_addr + new_size)` (sizes rounded up to whole pages). With
    /// `keep_old` (an `old_size` of 0, or `MREMAP_DONTUNMAP`) the old range stays mapped.
    Mremap {
        /// Time (taken before the call, like `munmap`'s).
        ts: u64,
        /// Old start address.
        old_addr: u64,
        /// Old length.
        old_size: u64,
        /// New start address (the call's result).
        new_addr: u64,
        /// New length.
        new_size: u64,
        /// The old range is still mapped after the call.
        keep_old: bool,
    },
    /// An event from a third-party adapter (plugin ABI, `schemas/memscope_plugin.h`).
    Plugin {
        /// Time.
        ts: u64,
        /// Event kind code (plugin ABI `MEMSCOPE_KIND_*`).
        kind: u8,
        /// Device (`u32::MAX`: none, `u32::MAX - 1`: cpu).
        device: u32,
        /// Address (0: none).
        ptr: u64,
        /// Size in bytes.
        size: u64,
        /// Event type text.
        event_type: B,
        /// Name text.
        name: B,
        /// Owner / extra attributes text (`k:v,k:v`).
        attrs: B,
    },
    /// An event type a plugin registered (plugin ABI 1.2 `register_type`): a definition (no time
    /// stamp), written by each thread before its first [`Record::Compact`] of the type.
    EventTypeDef {
        /// The type id the host gave (per process image).
        id: u32,
        /// Device of every event of the type (`u32::MAX`: none, `u32::MAX - 1`: cpu).
        device: u32,
        /// `MEMSCOPE_TYPE_*` bits (`1`: account-only volume).
        flags: u32,
        /// Event Type text.
        event_type: B,
        /// Name text of every event of the type.
        name: B,
        /// Fixed attributes of every event (`k:v,k:v`).
        attrs: B,
        /// Names of the per-event values (`k1,k2`).
        values: B,
    },
    /// One event of a registered type (plugin ABI 1.2 `emit_compact`): no text.
    Compact {
        /// Time.
        ts: u64,
        /// Type id ([`Record::EventTypeDef`]).
        ty: u32,
        /// Event kind code (plugin ABI `MEMSCOPE_KIND_*`).
        kind: u8,
        /// Address (0: none).
        addr: u64,
        /// Size in bytes.
        size: u64,
        /// The values of the type's value names, as varints (empty: none).
        values: B,
    },
    /// A record of one source (a built-in adapter or a plugin's source), in the envelope every
    /// adapter's own records travel in: the adapter encodes `body` itself (its `wire.rs`,
    /// declared with [`crate::records!`]); `tag` names the record within the source and its class
    /// ([`crate::source::class`]). `ts` is 0 for a definition, which has none.
    Source {
        /// The source.
        source: crate::SourceId,
        /// The record's tag within the source ([`crate::source::tag_of`]).
        tag: u8,
        /// Time.
        ts: u64,
        /// The fields, as the source encoded them.
        body: B,
    },
    /// Definition of an interned text (mark and range messages): later `MarkRef` /
    /// `RangeStartRef` records of any thread of the process name it by `id`.
    TextDef {
        /// Text id (per process, from 1).
        id: u32,
        /// The text.
        text: B,
    },
    /// `mstxMarkA` whose message was interned ([`Record::TextDef`]).
    MarkRef {
        /// Time.
        ts: u64,
        /// Stream pointer.
        stream: u64,
        /// Text id.
        text: u32,
    },
    /// `mstxRangeStartA` whose message was interned.
    RangeStartRef {
        /// Time.
        ts: u64,
        /// Range id returned to the caller.
        id: u64,
        /// Stream pointer.
        stream: u64,
        /// Text id.
        text: u32,
    },
    /// The runtime's current device of the writing thread, as the probe queried it when the
    /// thread reported an msTX mark or range (`aclrtGetDeviceImpl`, else `rtGetDevice`;
    /// logical id, `u32::MAX`: the runtime could not tell). Written only when it differs from
    /// what the thread last wrote in this stream; it applies to the thread's later msTX rows.
    ThreadDevice {
        /// Time (that of the row it precedes).
        ts: u64,
        /// Logical device id.
        device: u32,
    },
    // ---- Python API (issue 12; codec in `wire/python.rs`, tags 70–89) ----
    /// Definition of a traced callable: later `PyCall`/`PyReturn`/`PyTrace` records of any
    /// thread of the process image name it by `id`. Written before the first reference.
    PyCodeDef {
        /// Code id (per process image, from 1).
        id: u32,
        /// What it is (how the `FuncInfo` of its rows is spelled).
        kind: PyCodeKind,
        /// First line (Python functions; 0 otherwise).
        line: u32,
        /// Source file (Python functions; empty otherwise).
        file: B,
        /// Function name, C-function description, module class or `RecordFunction` name.
        name: B,
    },
    /// The profile hook saw a call (Python or C) of code `code` on the writing thread.
    PyCall {
        /// Time.
        ts: u64,
        /// Code id.
        code: u32,
    },
    /// The profile hook saw the return (or exception exit) of code `code`.
    PyReturn {
        /// Time.
        ts: u64,
        /// Code id.
        code: u32,
    },
    /// Python tracer start/stop, and the frames on the caller's stack at that moment.
    PyTrace {
        /// Time.
        ts: u64,
        /// What happened.
        event: PyTraceEvent,
        /// Code id of the frame (`FrameAt*`; 0 otherwise).
        code: u32,
    },
    /// `take_snapshot()`: device memory figures (SNAPSHOT row).
    Snapshot {
        /// Time.
        ts: u64,
        /// Logical device (`u32::MAX`: unknown).
        device: u32,
        /// Which of `values` the caller knew (`wire::snapshot_known` bits); the collector fills
        /// the others from its pool accounting.
        known: u8,
        /// total, free, reserved, peak_reserved, allocated, peak_allocated (bytes).
        values: [u64; 6],
        /// Snapshot name.
        name: B,
    },
    /// `describer(addr, owner=…)`: the live pool block starting at `addr` gets the user owner
    /// level `label`.
    OwnerTag {
        /// Time.
        ts: u64,
        /// Block start address.
        addr: u64,
        /// Owner label.
        label: B,
    },
    // ---- Python stacks, Aten, CPU tensors, watch (issue 13; codec in `wire/python_ctx.rs`,
    // tags 76–89 of the Python range) ----
    /// Definition of a Python stack node: frame `code` (a `PyCodeDef` id of a function) at
    /// `line`, called from the stack `parent` (0: outermost). A stack is named by its innermost
    /// node; per process image, written by the thread that first uses it, before that use.
    PyFrameDef {
        /// Node id (per process image, from 1).
        id: u32,
        /// Node of the calling frame (0: none).
        parent: u32,
        /// Code id of the frame's function.
        code: u32,
        /// Line the frame is executing (or calling from).
        line: u32,
    },
    /// The writing thread's Python stack is now node `node` (0: no Python frame): applies to
    /// the thread's later rows. Written only when it changed, just before the row it applies
    /// to, with that row's time stamp.
    PyStack {
        /// Time (that of the row it precedes).
        ts: u64,
        /// Innermost stack node.
        node: u32,
    },
    /// An Aten operator starts (`end` false) or ends (a `TorchDispatchMode` of the Python
    /// package): OP_LAUNCH `ATEN_START`/`ATEN_END`.
    AtenOp {
        /// Time.
        ts: u64,
        /// The operator returned.
        end: bool,
        /// Device of its tensors: logical NPU id, `u32::MAX - 1` cpu, `u32::MAX` unknown.
        device: u32,
        /// Operator name (`torch._ops.aten.add.Tensor`).
        name: B,
    },
    /// A tensor the current Aten operator of the writing thread reads or writes (ACCESS row).
    AtenTensor {
        /// Time.
        ts: u64,
        /// How it is accessed.
        access: AccessKind,
        /// Device (as [`Record::AtenOp`]).
        device: u32,
        /// Data address.
        addr: u64,
        /// Bytes.
        size: u64,
        /// `dtype` and `shape` texts, separated by one `\n` (`torch.float32\ntorch.Size([2, 3])`).
        meta: B,
    },
    /// A CPU tensor's storage was created (`free` false) or released: HOST MALLOC/FREE on
    /// device `cpu` (msMemScope's CPU-tensor hooks, `--device cpu`).
    CpuTensor {
        /// Time.
        ts: u64,
        /// The storage was released.
        free: bool,
        /// Storage address.
        addr: u64,
        /// Storage bytes.
        size: u64,
    },
    /// A memory-watch dump: the checksum (CRC-64, behaviour spec §9.9) of the watched memory
    /// before or after an operator, or with `full` a piece of its bytes (`data`, at `offset`).
    WatchDump {
        /// Time.
        ts: u64,
        /// Device (as [`Record::AtenOp`]).
        device: u32,
        /// Checksum (hash mode), or the offset of `data` (full content).
        value: u64,
        /// `data` holds bytes of the dump (several records for one dump, in order).
        full: bool,
        /// Dump name (`<op>_<n>-<watched>_<idx>_<before|after>`); empty after the first piece.
        name: B,
        /// Bytes (full content); empty in hash mode.
        data: B,
    },
    /// A sample of the process's memory on the probe's sampler thread (`--sample`, issue 25):
    /// resident and anonymous resident bytes, whatever allocated them.
    ProcessSample {
        /// Time.
        ts: u64,
        /// Resident bytes (RSS).
        rss: u64,
        /// Anonymous resident bytes (`RssAnon`).
        anon: u64,
    },
    /// A sample of a device's memory on the probe's sampler thread (`--sample`, issue 25), as
    /// the device runtime reports it (`aclrtGetMemInfo`: every process's use of the device).
    DeviceSample {
        /// Time.
        ts: u64,
        /// Logical device id.
        device: u32,
        /// Bytes in use on the device.
        used: u64,
        /// Free bytes on the device.
        free: u64,
    },
}
