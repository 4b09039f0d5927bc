//! The per-process event stream: file layout and record codec.
//!
//! One stream file per traced process image (`<spool>/<pid>-<start_ns>.stream`). The probe maps
//! it `MAP_SHARED` in chunks, appends records and publishes a committed length after each one
//! with a release store, so a record is either wholly visible to the collector or not at all and
//! nothing committed is lost when the process is killed (design notes §2, memray's approach).
//!
//! ```text
//! offset 0             file header (FILE_HEADER_SIZE bytes, fields at FH_* offsets)
//! FILE_HEADER_SIZE + i*CHUNK_SIZE   chunk i: header (CHUNK_HEADER_SIZE) + payload
//! ```
//! A chunk is written by one thread at a time; a `Thread` record names the writer at the start
//! of the chunk and whenever the chunk changes hands. Records are a 1-byte tag and LEB128
//! varints; timestamps are deltas from the previous record of the same chunk, addresses of
//! host-allocator records are zig-zag deltas, so a `malloc` record takes ~5–7 bytes.
//!
//! Everything here is allocation-free so the probe can use it inside allocator hooks.

/// First 8 bytes of a stream file.
pub const STREAM_MAGIC: [u8; 8] = *b"MSCOPEST";
/// Stream format version; a collector refuses other versions.
pub const STREAM_VERSION: u32 = 1;
/// Bytes of the file header.
pub const FILE_HEADER_SIZE: usize = 4096;
/// Bytes of one chunk, header included.
pub const CHUNK_SIZE: usize = 256 * 1024;
/// Bytes of a chunk header.
pub const CHUNK_HEADER_SIZE: usize = 64;
/// Payload bytes per chunk.
pub const CHUNK_PAYLOAD: usize = CHUNK_SIZE - CHUNK_HEADER_SIZE;
/// Magic of an initialised chunk header (`u32` at [`CH_MAGIC`]).
pub const CHUNK_MAGIC: u32 = u32::from_le_bytes(*b"MSCK");
/// Longest message or label the probe records, in bytes; longer ones are cut.
pub const MAX_TEXT: usize = 1024;
/// Longest encoded record: tag + a handful of varints + one text.
pub const MAX_RECORD: usize = MAX_TEXT + 128;

/// File header: magic (8 bytes).
pub const FH_MAGIC: usize = 0;
/// File header: format version (`u32`).
pub const FH_VERSION: usize = 8;
/// File header: chunk size (`u32`).
pub const FH_CHUNK_SIZE: usize = 12;
/// File header: pid of the process (`u32`).
pub const FH_PID: usize = 16;
/// File header: parent pid (`u32`).
pub const FH_PPID: usize = 20;
/// File header: start time, ns since the epoch (`u64`).
pub const FH_START_NS: usize = 24;
/// File header: events the probe could not record (`u64`, atomically updated).
pub const FH_DROPPED: usize = 32;
/// File header: flags (`u32`, atomically updated), see `FLAG_*`.
pub const FH_FLAGS: usize = 40;
/// File header: offset of the monotonic clock to the epoch clock, ns (`i64`).
pub const FH_CLOCK_OFFSET: usize = 48;
/// File header: NUL-padded executable path, up to [`FH_EXE_LEN`] bytes.
pub const FH_EXE: usize = 256;
/// Room for the executable path.
pub const FH_EXE_LEN: usize = 1024;
/// Flag: the process ended through `exit`/`_exit` (the probe saw it).
pub const FLAG_EXITED: u32 = 1;
/// Flag: host tracing was requested but is unavailable (static binary, foreign allocator).
pub const FLAG_HOST_UNAVAILABLE: u32 = 2;

/// Chunk header: [`CHUNK_MAGIC`] (`u32`).
pub const CH_MAGIC: usize = 0;
/// Chunk header: committed payload bytes (`u32`, release-stored after each record).
pub const CH_COMMITTED: usize = 4;
/// Chunk header: 1 once the writer has moved to another chunk (`u32`).
pub const CH_SEALED: usize = 8;

/// Framework pools that report through msTX memory domains (abi.md §1.6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum PoolId {
    /// Domain `ptaCaching` (and its old name `msleaks`).
    PtaCaching = 1,
    /// Domain `ptaWorkspace`.
    PtaWorkspace = 2,
    /// Domain `mindsporeMemPool`.
    MindSpore = 3,
    /// Domain `atb`.
    Atb = 4,
}

impl PoolId {
    /// Every pool.
    pub const ALL: [PoolId; 4] =
        [PoolId::PtaCaching, PoolId::PtaWorkspace, PoolId::MindSpore, PoolId::Atb];

    /// The pool that owns an msTX domain name, if any.
    pub fn from_domain(name: &[u8]) -> Option<PoolId> {
        match name {
            b"ptaCaching" | b"msleaks" => Some(PoolId::PtaCaching),
            b"ptaWorkspace" => Some(PoolId::PtaWorkspace),
            b"mindsporeMemPool" => Some(PoolId::MindSpore),
            b"atb" => Some(PoolId::Atb),
            _ => None,
        }
    }

    /// Decodes the wire value.
    pub fn from_u8(v: u8) -> Option<PoolId> {
        PoolId::ALL.into_iter().find(|p| *p as u8 == v)
    }
}

/// Process-level events recorded by the probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum SystemCode {
    /// `aclInit` returned.
    AclInit = 1,
    /// `aclFinalize` was called.
    AclFini = 2,
    /// A collection window opened (`memscope_start`).
    StartTrace = 3,
    /// A collection window closed (`memscope_stop`).
    StopTrace = 4,
    /// Python-API `step()`.
    Step = 5,
}

impl SystemCode {
    /// Decodes the wire value.
    pub fn from_u8(v: u8) -> Option<SystemCode> {
        [
            SystemCode::AclInit,
            SystemCode::AclFini,
            SystemCode::StartTrace,
            SystemCode::StopTrace,
            SystemCode::Step,
        ]
        .into_iter()
        .find(|c| *c as u8 == v)
    }
}

/// One decoded record. Text borrows from the stream buffer. `ts` is ns since the epoch.
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
        /// Pool.
        pool: PoolId,
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
        /// Pool.
        pool: PoolId,
        /// Heap handle as passed (the probe hands out the base address as handle).
        ptr: u64,
    },
    /// One region of `mstxMemRegionsRegister`: a block handed out by a pool.
    RegionRegister {
        /// Time.
        ts: u64,
        /// Pool.
        pool: PoolId,
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
        /// Pool.
        pool: PoolId,
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
    /// Host allocator: a block was allocated.
    HostMalloc {
        /// Time.
        ts: u64,
        /// Block address.
        addr: u64,
        /// Requested bytes.
        size: u64,
        /// Interned call stack id (0: none).
        stack: u32,
    },
    /// Host allocator: a block was freed.
    HostFree {
        /// Time.
        ts: u64,
        /// Block address.
        addr: u64,
    },
    /// Definition of an interned call stack: `frames` raw return addresses, innermost first,
    /// encoded as varints in `raw` (decode with [`StackFrames`]).
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
    /// Host `mmap` (HOST adapter with `MEMSCOPE_HOST_MMAP=1`): a mapping was created.
    HostMmap {
        /// Time.
        ts: u64,
        /// Mapping address.
        addr: u64,
        /// Requested length.
        size: u64,
        /// Interned call stack id (0: none).
        stack: u32,
    },
    /// Host `munmap` of `[addr, addr + size)`.
    HostMunmap {
        /// Time.
        ts: u64,
        /// Start address.
        addr: u64,
        /// Length.
        size: u64,
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
    // ---- CANN sources (issue 5; codec in `wire/cann.rs`, tags 30–59) ----
    /// `halMemAlloc` succeeded (abi.md §2.1): `size` bytes at `addr`, allocated with `flag`
    /// (device, memory type, page type and module id packed as abi.md §2.3).
    HalAlloc {
        /// Time.
        ts: u64,
        /// Address handed out.
        addr: u64,
        /// Bytes requested.
        size: u64,
        /// The caller's flag word.
        flag: u64,
        /// Interned C stack id (0: none).
        stack: u32,
    },
    /// `halMemCreate` succeeded: physical handle `handle` of `size` bytes (abi.md §2.1–§2.2).
    HalCreate {
        /// Time.
        ts: u64,
        /// The handle value (`*handle`), recorded as the block address like msMemScope does.
        handle: u64,
        /// Bytes requested.
        size: u64,
        /// The caller's flag word.
        flag: u64,
        /// `drv_mem_prop.devid` (`u32::MAX`: `prop` was NULL).
        device: u32,
        /// `drv_mem_prop.module_id` (`u32::MAX`: `prop` was NULL).
        module: u32,
        /// `drv_mem_prop.pg_type`: 0 normal, 1 huge, 2 giant (`u32::MAX`: `prop` was NULL).
        page: u32,
        /// Interned C stack id (0: none).
        stack: u32,
    },
    /// `halMemFree(addr)` (`create` false) or `halMemRelease(addr)` (`create` true) returned
    /// `ret`. Failed calls are recorded too, so the collector can warn about double frees.
    HalFree {
        /// Time.
        ts: u64,
        /// Address or handle passed.
        addr: u64,
        /// `halMemRelease` rather than `halMemFree`.
        create: bool,
        /// The driver's return code (0: success).
        ret: i32,
    },
    /// `halMemAlloc` (`create` false) or `halMemCreate` (`create` true) returned
    /// `DRV_ERROR_OUT_OF_MEMORY` (abi.md §2.5).
    HalOom {
        /// Time.
        ts: u64,
        /// The failing call was `halMemCreate`.
        create: bool,
        /// Bytes requested.
        size: u64,
        /// The caller's flag word.
        flag: u64,
        /// Device asked for: flag bits 0–9, or `drv_mem_prop.devid` (logical id).
        device: u32,
        /// Free device bytes reported by `aclrtGetMemInfo` at the failure (0: unknown).
        free: u64,
        /// Total device bytes reported by `aclrtGetMemInfo` (0: unknown).
        total: u64,
        /// Interned C stack id (0: none).
        stack: u32,
    },
    /// `aclrtHostRegisterV2` with `ACL_HOST_REG_PINNED` succeeded (abi.md §3.2).
    PinnedRegister {
        /// Time.
        ts: u64,
        /// Host address registered.
        addr: u64,
        /// Bytes registered.
        size: u64,
        /// Resident set size of the process after the call, bytes (0: unknown).
        rss: u64,
        /// Interned C stack id (0: none).
        stack: u32,
    },
    /// `aclrtHostUnregister(addr)` returned `ret`.
    PinnedUnregister {
        /// Time.
        ts: u64,
        /// Host address passed.
        addr: u64,
        /// The runtime's return code (0: success).
        ret: i32,
    },
    /// `aclrtSetDevice(device)` succeeded on the writing thread (logical id).
    SetDevice {
        /// Time.
        ts: u64,
        /// Logical device id passed.
        device: u32,
    },
    /// The runtime hashed a kernel name through the profiling GET_HASH_ID callback
    /// (abi.md §3.6). Written once per hash per process image; carries no time stamp.
    KernelName {
        /// Hash id returned to the runtime.
        hash: u64,
        /// The kernel name.
        name: B,
    },
    /// A kernel launch through one of the runtime entry points of abi.md §3.5, counted once
    /// however many entry points it crossed.
    KernelLaunch {
        /// Time (entry into the outermost launch hook).
        ts: u64,
        /// Kernel-name hash from the runtime's task-track record (0: none arrived).
        hash: u64,
        /// Device id of the task-track record (`u32::MAX`: unknown).
        device: u32,
        /// Stream id (`u32::MAX`: unknown).
        stream: u32,
        /// Task id (`u32::MAX`: unknown).
        task: u32,
    },
    /// `atb::Runner::Execute` started (`end` false) or returned (`end` true) (abi.md §4.2).
    AtbOp {
        /// Time.
        ts: u64,
        /// The operator returned.
        end: bool,
        /// Logical device of the calling thread (`u32::MAX`: unknown).
        device: u32,
        /// `workspaceBuffer` of the variant pack.
        ws_ptr: u64,
        /// `workspaceBufferSize + intermediateBufferSize`, bytes.
        ws_size: u64,
        /// Operation name (`Runner::GetOperationName`; empty: unknown).
        name: B,
        /// Runner directory (`Runner::GetSaveTensorDir`; empty: unknown).
        path: B,
    },
    /// `atb::StoreUtil::SaveLaunchParam` with a `…/before` (`end` false) or `…/after`
    /// (`end` true) path: an ATB kernel starts or ends.
    AtbKernel {
        /// Time.
        ts: u64,
        /// The kernel ended.
        end: bool,
        /// Logical device of the calling thread (`u32::MAX`: unknown).
        device: u32,
        /// The directory path passed (`…/<kernel>/before|after`).
        path: B,
    },
    /// One tensor of the ATB operator (`kernel` false) or kernel (`kernel` true) the writing
    /// thread is in.
    AtbTensor {
        /// Time.
        ts: u64,
        /// How the tensor is accessed.
        access: AccessKind,
        /// It belongs to the current kernel rather than the current operator.
        kernel: bool,
        /// Device address.
        addr: u64,
        /// Bytes.
        size: u64,
        /// `aclDataType` code.
        dtype: i32,
        /// `aclFormat` code.
        format: i32,
        /// Dimensions as zig-zag varints ([`encode_dims`], [`decode_dims`]).
        dims: B,
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
}

mod cann;
pub use cann::{decode_dims, encode_dims, AccessKind, MAX_DIMS};

mod tag {
    pub const THREAD: u8 = 1;
    pub const MARK: u8 = 2;
    pub const MARK_NULL: u8 = 3;
    pub const RANGE_START: u8 = 4;
    pub const RANGE_START_NULL: u8 = 5;
    pub const RANGE_END: u8 = 6;
    pub const HEAP_REGISTER: u8 = 7;
    pub const HEAP_UNREGISTER: u8 = 8;
    pub const REGION_REGISTER: u8 = 9;
    pub const REGION_UNREGISTER: u8 = 10;
    pub const OWNER_PUSH: u8 = 11;
    pub const OWNER_POP: u8 = 12;
    pub const SYSTEM: u8 = 13;
    pub const HOST_MALLOC: u8 = 14;
    pub const HOST_MALLOC_STACK: u8 = 15;
    pub const HOST_FREE: u8 = 16;
    pub const STACK_DEF: u8 = 17;
    pub const PLUGIN: u8 = 18;
    pub const TEXT_DEF: u8 = 60;
    pub const MARK_REF: u8 = 61;
    pub const RANGE_START_REF: u8 = 62;
    pub const MODULE: u8 = 19;
    pub const HOST_MMAP: u8 = 20;
    pub const HOST_MMAP_STACK: u8 = 21;
    pub const HOST_MUNMAP: u8 = 22;
    // HOST_MALLOC, HOST_MALLOC_STACK and HOST_FREE whose address delta is a multiple of 16 (the
    // malloc alignment): the zig-zag delta is stored divided by 16, saving about half a byte.
    pub const HOST_MALLOC_A16: u8 = 23;
    pub const HOST_MALLOC_STACK_A16: u8 = 24;
    pub const HOST_FREE_A16: u8 = 25;
}

/// Delta state of one chunk, shared by encoder and decoder. Starts at zero for every chunk.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChunkState {
    /// Timestamp of the previous record.
    pub last_ts: u64,
    /// Address of the previous host-allocator record.
    pub last_addr: u64,
}

/// Why a buffer did not decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WireError {
    /// The buffer ends inside a record.
    Truncated,
    /// A tag or enum value this version does not know.
    BadTag(u8),
    /// A varint longer than 10 bytes or a length past the buffer.
    Malformed,
}

impl core::fmt::Display for WireError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            WireError::Truncated => f.write_str("stream record truncated"),
            WireError::BadTag(t) => write!(f, "unknown stream record tag {t}"),
            WireError::Malformed => f.write_str("malformed stream record"),
        }
    }
}

impl std::error::Error for WireError {}

struct Out<'b> {
    buf: &'b mut [u8],
    pos: usize,
    ok: bool,
}

impl Out<'_> {
    #[inline]
    fn u8(&mut self, v: u8) {
        if let Some(b) = self.buf.get_mut(self.pos) {
            *b = v;
            self.pos += 1;
        } else {
            self.ok = false;
        }
    }
    #[inline]
    fn var(&mut self, mut v: u64) {
        loop {
            let byte = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                self.u8(byte);
                return;
            }
            self.u8(byte | 0x80);
        }
    }
    #[inline]
    fn text(&mut self, t: &[u8]) {
        let t = &t[..t.len().min(MAX_TEXT)];
        self.var(t.len() as u64);
        match self.buf.get_mut(self.pos..self.pos + t.len()) {
            Some(dst) => {
                dst.copy_from_slice(t);
                self.pos += t.len();
            }
            None => self.ok = false,
        }
    }
}

#[inline]
fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

#[inline]
fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

impl<B: AsRef<[u8]>> Record<B> {
    /// Encodes into `out`, updating `st` only on success. Returns the bytes written, or `None`
    /// when `out` is too small (the caller moves to a fresh chunk and retries). Texts longer than
    /// [`MAX_TEXT`] are cut.
    pub fn encode(&self, st: &mut ChunkState, out: &mut [u8]) -> Option<usize> {
        let mut next = *st;
        let mut o = Out { buf: out, pos: 0, ok: true };
        let ts = |o: &mut Out, next: &mut ChunkState, t: u64| {
            o.var(t.saturating_sub(next.last_ts));
            next.last_ts = next.last_ts.max(t);
        };
        match self {
            Record::Thread { tid } => {
                o.u8(tag::THREAD);
                o.var(*tid as u64);
            }
            Record::Mark { ts: t, stream, msg, null } => {
                o.u8(if *null { tag::MARK_NULL } else { tag::MARK });
                ts(&mut o, &mut next, *t);
                o.var(*stream);
                o.text(msg.as_ref());
            }
            Record::RangeStart { ts: t, id, stream, msg, null } => {
                o.u8(if *null { tag::RANGE_START_NULL } else { tag::RANGE_START });
                ts(&mut o, &mut next, *t);
                o.var(*id);
                o.var(*stream);
                o.text(msg.as_ref());
            }
            Record::RangeEnd { ts: t, id } => {
                o.u8(tag::RANGE_END);
                ts(&mut o, &mut next, *t);
                o.var(*id);
            }
            Record::HeapRegister { ts: t, pool, device, ptr, size }
            | Record::RegionRegister { ts: t, pool, device, ptr, size } => {
                let heap = matches!(self, Record::HeapRegister { .. });
                o.u8(if heap { tag::HEAP_REGISTER } else { tag::REGION_REGISTER });
                ts(&mut o, &mut next, *t);
                o.u8(*pool as u8);
                o.var(*device as u64);
                o.var(*ptr);
                o.var(*size);
            }
            Record::HeapUnregister { ts: t, pool, ptr }
            | Record::RegionUnregister { ts: t, pool, ptr } => {
                let heap = matches!(self, Record::HeapUnregister { .. });
                o.u8(if heap { tag::HEAP_UNREGISTER } else { tag::REGION_UNREGISTER });
                ts(&mut o, &mut next, *t);
                o.u8(*pool as u8);
                o.var(*ptr);
            }
            Record::OwnerPush { ts: t, label } => {
                o.u8(tag::OWNER_PUSH);
                ts(&mut o, &mut next, *t);
                o.text(label.as_ref());
            }
            Record::OwnerPop { ts: t } => {
                o.u8(tag::OWNER_POP);
                ts(&mut o, &mut next, *t);
            }
            Record::System { ts: t, code, device } => {
                o.u8(tag::SYSTEM);
                ts(&mut o, &mut next, *t);
                o.u8(*code as u8);
                o.var(*device as u64);
            }
            Record::HostMalloc { ts: t, addr, size, stack } => {
                let d = addr.wrapping_sub(next.last_addr) as i64;
                o.u8(match (*stack == 0, d % 16 == 0) {
                    (true, false) => tag::HOST_MALLOC,
                    (false, false) => tag::HOST_MALLOC_STACK,
                    (true, true) => tag::HOST_MALLOC_A16,
                    (false, true) => tag::HOST_MALLOC_STACK_A16,
                });
                ts(&mut o, &mut next, *t);
                o.var(zigzag(if d % 16 == 0 { d / 16 } else { d }));
                next.last_addr = *addr;
                o.var(*size);
                if *stack != 0 {
                    o.var(*stack as u64);
                }
            }
            Record::HostFree { ts: t, addr } => {
                let d = addr.wrapping_sub(next.last_addr) as i64;
                o.u8(if d % 16 == 0 { tag::HOST_FREE_A16 } else { tag::HOST_FREE });
                ts(&mut o, &mut next, *t);
                o.var(zigzag(if d % 16 == 0 { d / 16 } else { d }));
                next.last_addr = *addr;
            }
            Record::TextDef { id, text } => {
                o.u8(tag::TEXT_DEF);
                o.var(*id as u64);
                o.text(text.as_ref());
            }
            Record::MarkRef { ts: t, stream, text } => {
                o.u8(tag::MARK_REF);
                ts(&mut o, &mut next, *t);
                o.var(*stream);
                o.var(*text as u64);
            }
            Record::RangeStartRef { ts: t, id, stream, text } => {
                o.u8(tag::RANGE_START_REF);
                ts(&mut o, &mut next, *t);
                o.var(*id);
                o.var(*stream);
                o.var(*text as u64);
            }
            Record::StackDef { id, count, raw } => {
                let raw = raw.as_ref();
                o.u8(tag::STACK_DEF);
                o.var(*id as u64);
                o.var(*count as u64);
                o.var(raw.len() as u64);
                match o.buf.get_mut(o.pos..o.pos + raw.len()) {
                    Some(dst) => {
                        dst.copy_from_slice(raw);
                        o.pos += raw.len();
                    }
                    None => o.ok = false,
                }
            }
            Record::Module { ts: t, base, start, size, build_id, path } => {
                o.u8(tag::MODULE);
                ts(&mut o, &mut next, *t);
                o.var(*base);
                o.var(*start);
                o.var(*size);
                o.text(build_id.as_ref());
                o.text(path.as_ref());
            }
            Record::HostMmap { ts: t, addr, size, stack } => {
                o.u8(if *stack == 0 { tag::HOST_MMAP } else { tag::HOST_MMAP_STACK });
                ts(&mut o, &mut next, *t);
                o.var(*addr);
                o.var(*size);
                if *stack != 0 {
                    o.var(*stack as u64);
                }
            }
            Record::HostMunmap { ts: t, addr, size } => {
                o.u8(tag::HOST_MUNMAP);
                ts(&mut o, &mut next, *t);
                o.var(*addr);
                o.var(*size);
            }
            Record::Plugin { ts: t, kind, device, ptr, size, event_type, name, attrs } => {
                o.u8(tag::PLUGIN);
                ts(&mut o, &mut next, *t);
                o.u8(*kind);
                o.var(*device as u64);
                o.var(*ptr);
                o.var(*size);
                o.text(event_type.as_ref());
                o.text(name.as_ref());
                o.text(attrs.as_ref());
            }
            Record::HalAlloc { .. }
            | Record::HalCreate { .. }
            | Record::HalFree { .. }
            | Record::HalOom { .. }
            | Record::PinnedRegister { .. }
            | Record::PinnedUnregister { .. }
            | Record::SetDevice { .. }
            | Record::KernelName { .. }
            | Record::KernelLaunch { .. }
            | Record::AtbOp { .. }
            | Record::AtbKernel { .. }
            | Record::AtbTensor { .. } => {
                cann::encode(self, &mut o, &mut next);
            }
        }
        if o.ok {
            *st = next;
            Some(o.pos)
        } else {
            None
        }
    }

    /// The record's time stamp (`None` for `Thread` and `StackDef`, which have none).
    pub fn ts(&self) -> Option<u64> {
        match self {
            Record::Thread { .. } | Record::StackDef { .. } | Record::TextDef { .. } => None,
            Record::MarkRef { ts, .. } | Record::RangeStartRef { ts, .. } => Some(*ts),
            Record::Mark { ts, .. }
            | Record::RangeStart { ts, .. }
            | Record::RangeEnd { ts, .. }
            | Record::HeapRegister { ts, .. }
            | Record::HeapUnregister { ts, .. }
            | Record::RegionRegister { ts, .. }
            | Record::RegionUnregister { ts, .. }
            | Record::OwnerPush { ts, .. }
            | Record::OwnerPop { ts }
            | Record::System { ts, .. }
            | Record::HostMalloc { ts, .. }
            | Record::HostFree { ts, .. }
            | Record::Module { ts, .. }
            | Record::HostMmap { ts, .. }
            | Record::HostMunmap { ts, .. }
            | Record::Plugin { ts, .. } => Some(*ts),
            Record::HalAlloc { .. }
            | Record::HalCreate { .. }
            | Record::HalFree { .. }
            | Record::HalOom { .. }
            | Record::PinnedRegister { .. }
            | Record::PinnedUnregister { .. }
            | Record::SetDevice { .. }
            | Record::KernelName { .. }
            | Record::KernelLaunch { .. }
            | Record::AtbOp { .. }
            | Record::AtbKernel { .. }
            | Record::AtbTensor { .. } => cann::ts_of(self),
        }
    }

    /// Copies the borrowed texts so the record can outlive the stream buffer.
    pub fn to_owned(&self) -> Record<Box<[u8]>> {
        let b = |x: &B| -> Box<[u8]> { x.as_ref().into() };
        match self {
            Record::Thread { tid } => Record::Thread { tid: *tid },
            Record::Mark { ts, stream, msg, null } => {
                Record::Mark { ts: *ts, stream: *stream, msg: b(msg), null: *null }
            }
            Record::RangeStart { ts, id, stream, msg, null } => {
                Record::RangeStart { ts: *ts, id: *id, stream: *stream, msg: b(msg), null: *null }
            }
            Record::RangeEnd { ts, id } => Record::RangeEnd { ts: *ts, id: *id },
            Record::HeapRegister { ts, pool, device, ptr, size } => Record::HeapRegister {
                ts: *ts,
                pool: *pool,
                device: *device,
                ptr: *ptr,
                size: *size,
            },
            Record::HeapUnregister { ts, pool, ptr } => {
                Record::HeapUnregister { ts: *ts, pool: *pool, ptr: *ptr }
            }
            Record::RegionRegister { ts, pool, device, ptr, size } => Record::RegionRegister {
                ts: *ts,
                pool: *pool,
                device: *device,
                ptr: *ptr,
                size: *size,
            },
            Record::RegionUnregister { ts, pool, ptr } => {
                Record::RegionUnregister { ts: *ts, pool: *pool, ptr: *ptr }
            }
            Record::OwnerPush { ts, label } => Record::OwnerPush { ts: *ts, label: b(label) },
            Record::OwnerPop { ts } => Record::OwnerPop { ts: *ts },
            Record::System { ts, code, device } => {
                Record::System { ts: *ts, code: *code, device: *device }
            }
            Record::HostMalloc { ts, addr, size, stack } => {
                Record::HostMalloc { ts: *ts, addr: *addr, size: *size, stack: *stack }
            }
            Record::HostFree { ts, addr } => Record::HostFree { ts: *ts, addr: *addr },
            Record::TextDef { id, text } => Record::TextDef { id: *id, text: b(text) },
            Record::MarkRef { ts, stream, text } => {
                Record::MarkRef { ts: *ts, stream: *stream, text: *text }
            }
            Record::RangeStartRef { ts, id, stream, text } => {
                Record::RangeStartRef { ts: *ts, id: *id, stream: *stream, text: *text }
            }
            Record::StackDef { id, count, raw } => {
                Record::StackDef { id: *id, count: *count, raw: b(raw) }
            }
            Record::Module { ts, base, start, size, build_id, path } => Record::Module {
                ts: *ts,
                base: *base,
                start: *start,
                size: *size,
                build_id: b(build_id),
                path: b(path),
            },
            Record::HostMmap { ts, addr, size, stack } => {
                Record::HostMmap { ts: *ts, addr: *addr, size: *size, stack: *stack }
            }
            Record::HostMunmap { ts, addr, size } => {
                Record::HostMunmap { ts: *ts, addr: *addr, size: *size }
            }
            Record::Plugin { ts, kind, device, ptr, size, event_type, name, attrs } => {
                Record::Plugin {
                    ts: *ts,
                    kind: *kind,
                    device: *device,
                    ptr: *ptr,
                    size: *size,
                    event_type: b(event_type),
                    name: b(name),
                    attrs: b(attrs),
                }
            }
            Record::HalAlloc { .. }
            | Record::HalCreate { .. }
            | Record::HalFree { .. }
            | Record::HalOom { .. }
            | Record::PinnedRegister { .. }
            | Record::PinnedUnregister { .. }
            | Record::SetDevice { .. }
            | Record::KernelName { .. }
            | Record::KernelLaunch { .. }
            | Record::AtbOp { .. }
            | Record::AtbKernel { .. }
            | Record::AtbTensor { .. } => cann::to_owned(self).expect("a CANN record"),
        }
    }
}

struct In<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> In<'a> {
    fn u8(&mut self) -> Result<u8, WireError> {
        let b = *self.buf.get(self.pos).ok_or(WireError::Truncated)?;
        self.pos += 1;
        Ok(b)
    }
    fn var(&mut self) -> Result<u64, WireError> {
        let mut v = 0u64;
        for shift in (0..70).step_by(7) {
            let b = self.u8()?;
            if shift == 63 && b > 1 {
                return Err(WireError::Malformed);
            }
            v |= ((b & 0x7f) as u64) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(WireError::Malformed)
    }
    fn u32(&mut self) -> Result<u32, WireError> {
        u32::try_from(self.var()?).map_err(|_| WireError::Malformed)
    }
    fn bytes(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        let end = self.pos.checked_add(n).ok_or(WireError::Malformed)?;
        let s = self.buf.get(self.pos..end).ok_or(WireError::Truncated)?;
        self.pos = end;
        Ok(s)
    }
    fn text(&mut self) -> Result<&'a [u8], WireError> {
        let n = self.var()? as usize;
        self.bytes(n)
    }
    fn ts(&mut self, st: &mut ChunkState) -> Result<u64, WireError> {
        let t = st.last_ts.wrapping_add(self.var()?);
        st.last_ts = t;
        Ok(t)
    }
    fn pool(&mut self) -> Result<PoolId, WireError> {
        let v = self.u8()?;
        PoolId::from_u8(v).ok_or(WireError::BadTag(v))
    }
    fn addr(&mut self, st: &mut ChunkState) -> Result<u64, WireError> {
        let a = st.last_addr.wrapping_add(unzigzag(self.var()?) as u64);
        st.last_addr = a;
        Ok(a)
    }
    fn addr16(&mut self, st: &mut ChunkState) -> Result<u64, WireError> {
        let a = st.last_addr.wrapping_add((unzigzag(self.var()?) as u64).wrapping_mul(16));
        st.last_addr = a;
        Ok(a)
    }
}

/// Decodes the record at the start of `buf`, updating `st`. Returns the record and its length.
///
/// # Errors
/// [`WireError::Truncated`] when `buf` ends inside the record, [`WireError::BadTag`] for an
/// unknown tag, [`WireError::Malformed`] for overlong varints or lengths.
pub fn decode<'a>(
    buf: &'a [u8],
    st: &mut ChunkState,
) -> Result<(Record<&'a [u8]>, usize), WireError> {
    let mut i = In { buf, pos: 0 };
    let mut next = *st;
    let t = i.u8()?;
    let rec = match t {
        tag::THREAD => Record::Thread { tid: i.u32()? },
        tag::MARK | tag::MARK_NULL => {
            let ts = i.ts(&mut next)?;
            let stream = i.var()?;
            let msg = i.text()?;
            Record::Mark { ts, stream, msg, null: t == tag::MARK_NULL }
        }
        tag::RANGE_START | tag::RANGE_START_NULL => {
            let ts = i.ts(&mut next)?;
            let id = i.var()?;
            let stream = i.var()?;
            let msg = i.text()?;
            Record::RangeStart { ts, id, stream, msg, null: t == tag::RANGE_START_NULL }
        }
        tag::RANGE_END => Record::RangeEnd { ts: i.ts(&mut next)?, id: i.var()? },
        tag::HEAP_REGISTER => Record::HeapRegister {
            ts: i.ts(&mut next)?,
            pool: i.pool()?,
            device: i.u32()?,
            ptr: i.var()?,
            size: i.var()?,
        },
        tag::HEAP_UNREGISTER => {
            Record::HeapUnregister { ts: i.ts(&mut next)?, pool: i.pool()?, ptr: i.var()? }
        }
        tag::REGION_REGISTER => Record::RegionRegister {
            ts: i.ts(&mut next)?,
            pool: i.pool()?,
            device: i.u32()?,
            ptr: i.var()?,
            size: i.var()?,
        },
        tag::REGION_UNREGISTER => {
            Record::RegionUnregister { ts: i.ts(&mut next)?, pool: i.pool()?, ptr: i.var()? }
        }
        tag::OWNER_PUSH => Record::OwnerPush { ts: i.ts(&mut next)?, label: i.text()? },
        tag::OWNER_POP => Record::OwnerPop { ts: i.ts(&mut next)? },
        tag::SYSTEM => {
            let ts = i.ts(&mut next)?;
            let c = i.u8()?;
            let code = SystemCode::from_u8(c).ok_or(WireError::BadTag(c))?;
            Record::System { ts, code, device: i.u32()? }
        }
        tag::HOST_MALLOC | tag::HOST_MALLOC_STACK | tag::HOST_MALLOC_A16 | tag::HOST_MALLOC_STACK_A16 => {
            let ts = i.ts(&mut next)?;
            let a16 = t == tag::HOST_MALLOC_A16 || t == tag::HOST_MALLOC_STACK_A16;
            let addr = if a16 { i.addr16(&mut next)? } else { i.addr(&mut next)? };
            let size = i.var()?;
            let stack = if t == tag::HOST_MALLOC_STACK || t == tag::HOST_MALLOC_STACK_A16 { i.u32()? } else { 0 };
            Record::HostMalloc { ts, addr, size, stack }
        }
        tag::HOST_FREE => {
            let ts = i.ts(&mut next)?;
            Record::HostFree { ts, addr: i.addr(&mut next)? }
        }
        tag::HOST_FREE_A16 => {
            let ts = i.ts(&mut next)?;
            Record::HostFree { ts, addr: i.addr16(&mut next)? }
        }
        tag::STACK_DEF => {
            let id = i.u32()?;
            let count = i.u32()?;
            let n = i.var()? as usize;
            Record::StackDef { id, count, raw: i.bytes(n)? }
        }
        tag::MODULE => Record::Module {
            ts: i.ts(&mut next)?,
            base: i.var()?,
            start: i.var()?,
            size: i.var()?,
            build_id: i.text()?,
            path: i.text()?,
        },
        tag::HOST_MMAP | tag::HOST_MMAP_STACK => {
            let ts = i.ts(&mut next)?;
            let addr = i.var()?;
            let size = i.var()?;
            let stack = if t == tag::HOST_MMAP_STACK { i.u32()? } else { 0 };
            Record::HostMmap { ts, addr, size, stack }
        }
        tag::HOST_MUNMAP => {
            Record::HostMunmap { ts: i.ts(&mut next)?, addr: i.var()?, size: i.var()? }
        }
        tag::TEXT_DEF => Record::TextDef { id: i.u32()?, text: i.text()? },
        tag::MARK_REF => {
            Record::MarkRef { ts: i.ts(&mut next)?, stream: i.var()?, text: i.u32()? }
        }
        tag::RANGE_START_REF => Record::RangeStartRef {
            ts: i.ts(&mut next)?,
            id: i.var()?,
            stream: i.var()?,
            text: i.u32()?,
        },
        tag::PLUGIN => Record::Plugin {
            ts: i.ts(&mut next)?,
            kind: i.u8()?,
            device: i.u32()?,
            ptr: i.var()?,
            size: i.var()?,
            event_type: i.text()?,
            name: i.text()?,
            attrs: i.text()?,
        },
        cann::tag::HAL_ALLOC..=cann::tag::LAST => cann::decode(t, &mut i, &mut next)?,
        other => return Err(WireError::BadTag(other)),
    };
    *st = next;
    Ok((rec, i.pos))
}

/// Encodes stack frames (raw addresses, innermost first) as varints into `out` for a
/// [`Record::StackDef`]; returns the bytes written or `None` if `out` is too small.
pub fn encode_frames(frames: &[u64], out: &mut [u8]) -> Option<usize> {
    let mut o = Out { buf: out, pos: 0, ok: true };
    for f in frames {
        o.var(*f);
    }
    o.ok.then_some(o.pos)
}

/// Iterates the frames of a [`Record::StackDef`].
pub struct StackFrames<'a> {
    inner: In<'a>,
}

impl<'a> StackFrames<'a> {
    /// Frames encoded in `raw`.
    pub fn new(raw: &'a [u8]) -> StackFrames<'a> {
        StackFrames { inner: In { buf: raw, pos: 0 } }
    }
}

impl Iterator for StackFrames<'_> {
    type Item = u64;
    fn next(&mut self) -> Option<u64> {
        if self.inner.pos >= self.inner.buf.len() {
            return None;
        }
        self.inner.var().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(recs: &[Record<&[u8]>]) -> usize {
        let mut buf = vec![0u8; 1 << 16];
        let mut st = ChunkState::default();
        let mut pos = 0;
        for r in recs {
            pos += r.encode(&mut st, &mut buf[pos..]).expect("fits");
        }
        let mut st = ChunkState::default();
        let mut at = 0;
        for r in recs {
            let (got, n) = decode(&buf[at..pos], &mut st).expect("decodes");
            assert_eq!(&got, r);
            at += n;
        }
        assert_eq!(at, pos);
        pos
    }

    #[test]
    fn every_record_kind_round_trips() {
        round_trip(&[
            Record::Thread { tid: 77 },
            Record::Mark { ts: 1_700_000_000_000_000_000, stream: 0, msg: b"a,b", null: false },
            Record::Mark { ts: 1_700_000_000_000_000_100, stream: 5, msg: b"", null: true },
            Record::RangeStart { ts: 1_700_000_000_000_000_200, id: 9, stream: 0, msg: b"step start", null: false },
            Record::RangeEnd { ts: 1_700_000_000_000_000_300, id: 9 },
            Record::HeapRegister { ts: 1_700_000_000_000_000_400, pool: PoolId::PtaCaching, device: 1, ptr: 0x1000, size: 1 << 30 },
            Record::RegionRegister { ts: 1_700_000_000_000_000_500, pool: PoolId::Atb, device: 0, ptr: 0x2000, size: 512 },
            Record::RegionUnregister { ts: 1_700_000_000_000_000_600, pool: PoolId::Atb, ptr: 0x2000 },
            Record::HeapUnregister { ts: 1_700_000_000_000_000_700, pool: PoolId::PtaCaching, ptr: 0x1000 },
            Record::OwnerPush { ts: 1_700_000_000_000_000_800, label: b"gradient" },
            Record::OwnerPop { ts: 1_700_000_000_000_000_900 },
            Record::System { ts: 1_700_000_000_000_001_000, code: SystemCode::AclInit, device: u32::MAX },
            Record::HostMalloc { ts: 1_700_000_000_000_001_100, addr: 0x5555_0000_1000, size: 64, stack: 0 },
            Record::HostMalloc { ts: 1_700_000_000_000_001_150, addr: 0x5555_0000_0f00, size: 64, stack: 3 },
            Record::HostFree { ts: 1_700_000_000_000_001_200, addr: 0x5555_0000_1000 },
            Record::HostMalloc { ts: 1_700_000_000_000_001_201, addr: 0x5555_0000_1008, size: 8, stack: 0 },
            Record::HostMalloc { ts: 1_700_000_000_000_001_202, addr: 0x0000_0000_0010, size: 8, stack: 2 },
            Record::HostMalloc { ts: 1_700_000_000_000_001_203, addr: u64::MAX - 15, size: 8, stack: 0 },
            Record::HostFree { ts: 1_700_000_000_000_001_204, addr: 0x5555_0000_1008 },
            Record::HostFree { ts: 1_700_000_000_000_001_205, addr: 0x10 },
            Record::StackDef { id: 3, count: 2, raw: &[0x81, 0x01, 0x05] },
            Record::Module { ts: 1_700_000_000_000_001_210, base: 0x7f00_0000_0000, start: 0x7f00_0000_1000, size: 0x20_0000, build_id: &[0xab, 0xcd], path: b"/lib/libx.so" },
            Record::HostMmap { ts: 1_700_000_000_000_001_220, addr: 0x7f11_0000_0000, size: 1 << 20, stack: 0 },
            Record::HostMmap { ts: 1_700_000_000_000_001_230, addr: 0x7f12_0000_0000, size: 4096, stack: 9 },
            Record::HostMunmap { ts: 1_700_000_000_000_001_240, addr: 0x7f11_0000_0000, size: 1 << 20 },
            Record::Plugin { ts: 1_700_000_000_000_001_300, kind: 1, device: 2, ptr: 7, size: 8, event_type: b"MYPOOL", name: b"n", attrs: b"owner:x" },
            Record::TextDef { id: 4, text: b"step start" },
            Record::MarkRef { ts: 1_700_000_000_009_000_000, stream: 0, text: 4 },
            Record::RangeStartRef { ts: 1_700_000_000_009_000_010, id: 2, stream: 0, text: 4 },
        ]);
    }

    #[test]
    fn host_records_stay_small() {
        let base = 1_700_000_000_000_000_000u64;
        let mut recs = vec![Record::Thread { tid: 1 }];
        for i in 0..1000u64 {
            recs.push(Record::HostMalloc { ts: base + i * 120, addr: 0x5555_0000_0000 + (i % 7) * 64, size: 32 + i % 100, stack: 0 });
            recs.push(Record::HostFree { ts: base + i * 120 + 60, addr: 0x5555_0000_0000 + (i % 7) * 64 });
        }
        let bytes = round_trip(&recs) as f64 / 2000.0;
        assert!(bytes <= 6.0, "{bytes} bytes per event");
    }

    #[test]
    fn encode_refuses_when_out_of_room_and_keeps_state() {
        let mut st = ChunkState::default();
        let mut small = [0u8; 4];
        let r = Record::Mark { ts: 123_456_789, stream: 0, msg: b"hello", null: false };
        assert_eq!(r.encode(&mut st, &mut small), None);
        assert_eq!(st, ChunkState::default());
    }

    #[test]
    fn decode_reports_truncation_and_unknown_tags() {
        let mut st = ChunkState::default();
        assert_eq!(decode(&[tag::MARK, 0x80], &mut st), Err(WireError::Truncated));
        assert_eq!(decode(&[200], &mut st), Err(WireError::BadTag(200)));
    }

    #[test]
    fn frames_round_trip() {
        let frames = [0x7f00_0000_1234u64, 0x5555_1111_0000, 1];
        let mut buf = [0u8; 64];
        let n = encode_frames(&frames, &mut buf).unwrap();
        assert_eq!(StackFrames::new(&buf[..n]).collect::<Vec<_>>(), frames);
    }
}
