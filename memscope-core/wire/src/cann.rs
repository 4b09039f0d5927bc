//! Codec of the CANN-source records (HAL, ACL, kernel launches, ATB): tags 30–59 of the
//! stream format. Kept apart from the other records so `wire.rs` only delegates to it.
//!
//! Conventions: `u32` fields whose "unknown" value is `u32::MAX` are written as
//! `value.wrapping_add(1)`, so the common unknown costs one byte; return codes are zig-zag
//! varints; booleans select between two tags instead of taking a byte.

use super::{unzigzag, zigzag, AccessKind, ChunkState, In, Out, Record, StackFrames, WireError};

pub(super) mod tag {
    pub const HAL_ALLOC: u8 = 30;
    pub const HAL_CREATE: u8 = 31;
    pub const HAL_FREE: u8 = 32;
    pub const HAL_RELEASE: u8 = 33;
    pub const HAL_OOM_ALLOC: u8 = 34;
    pub const HAL_OOM_CREATE: u8 = 35;
    pub const PINNED_REGISTER: u8 = 36;
    pub const PINNED_UNREGISTER: u8 = 37;
    pub const SET_DEVICE: u8 = 38;
    pub const KERNEL_NAME: u8 = 39;
    pub const KERNEL_LAUNCH: u8 = 40;
    pub const ATB_OP_START: u8 = 41;
    pub const ATB_OP_END: u8 = 42;
    pub const ATB_KERNEL_START: u8 = 43;
    pub const ATB_KERNEL_END: u8 = 44;
    pub const ATB_TENSOR_OP: u8 = 45;
    pub const ATB_TENSOR_KERNEL: u8 = 46;
    /// Last tag of the range reserved for these records.
    pub const LAST: u8 = 59;
}

/// Longest dimension list an [`Record::AtbTensor`] carries (ATB's `Dims` holds 8).
pub const MAX_DIMS: usize = 8;

/// Encodes tensor dimensions for [`Record::AtbTensor`] into `out` (zig-zag varints, at most
/// [`MAX_DIMS`] of them). Returns the bytes written, or `None` if `out` is too small
/// (80 bytes always suffice).
pub fn encode_dims(dims: &[i64], out: &mut [u8]) -> Option<usize> {
    let mut o = Out {
        buf: out,
        pos: 0,
        ok: true,
    };
    for d in dims.iter().take(MAX_DIMS) {
        o.var(zigzag(*d));
    }
    o.ok.then_some(o.pos)
}

/// Decodes the dimensions written by [`encode_dims`].
pub fn decode_dims(raw: &[u8]) -> impl Iterator<Item = i64> + '_ {
    StackFrames::new(raw).map(unzigzag)
}

#[inline]
fn ts(o: &mut Out, next: &mut ChunkState, t: u64) {
    o.var(t.saturating_sub(next.last_ts));
    next.last_ts = next.last_ts.max(t);
}

#[inline]
fn opt32(v: u32) -> u64 {
    u64::from(v.wrapping_add(1))
}

#[inline]
fn ret(v: i32) -> u64 {
    zigzag(i64::from(v))
}

/// Encodes one CANN record (the caller checked the variant). Returns `false` for any other
/// variant, which `Record::encode` never passes.
pub(super) fn encode<B: AsRef<[u8]>>(rec: &Record<B>, o: &mut Out, next: &mut ChunkState) -> bool {
    match rec {
        Record::HalAlloc {
            ts: t,
            addr,
            size,
            flag,
            stack,
        } => {
            o.u8(tag::HAL_ALLOC);
            ts(o, next, *t);
            o.var(*addr);
            o.var(*size);
            o.var(*flag);
            o.var(u64::from(*stack));
        }
        Record::HalCreate {
            ts: t,
            handle,
            size,
            flag,
            device,
            module,
            page,
            stack,
        } => {
            o.u8(tag::HAL_CREATE);
            ts(o, next, *t);
            o.var(*handle);
            o.var(*size);
            o.var(*flag);
            o.var(opt32(*device));
            o.var(opt32(*module));
            o.var(opt32(*page));
            o.var(u64::from(*stack));
        }
        Record::HalFree {
            ts: t,
            addr,
            create,
            ret: r,
        } => {
            o.u8(if *create {
                tag::HAL_RELEASE
            } else {
                tag::HAL_FREE
            });
            ts(o, next, *t);
            o.var(*addr);
            o.var(ret(*r));
        }
        Record::HalOom {
            ts: t,
            create,
            size,
            flag,
            device,
            free,
            total,
            stack,
        } => {
            o.u8(if *create {
                tag::HAL_OOM_CREATE
            } else {
                tag::HAL_OOM_ALLOC
            });
            ts(o, next, *t);
            o.var(*size);
            o.var(*flag);
            o.var(opt32(*device));
            o.var(*free);
            o.var(*total);
            o.var(u64::from(*stack));
        }
        Record::PinnedRegister {
            ts: t,
            addr,
            size,
            rss,
            stack,
        } => {
            o.u8(tag::PINNED_REGISTER);
            ts(o, next, *t);
            o.var(*addr);
            o.var(*size);
            o.var(*rss);
            o.var(u64::from(*stack));
        }
        Record::PinnedUnregister {
            ts: t,
            addr,
            ret: r,
        } => {
            o.u8(tag::PINNED_UNREGISTER);
            ts(o, next, *t);
            o.var(*addr);
            o.var(ret(*r));
        }
        Record::SetDevice { ts: t, device } => {
            o.u8(tag::SET_DEVICE);
            ts(o, next, *t);
            o.var(u64::from(*device));
        }
        Record::KernelName { hash, name } => {
            o.u8(tag::KERNEL_NAME);
            o.var(*hash);
            o.text(name.as_ref());
        }
        Record::KernelLaunch {
            ts: t,
            hash,
            device,
            stream,
            task,
        } => {
            o.u8(tag::KERNEL_LAUNCH);
            ts(o, next, *t);
            o.var(*hash);
            o.var(opt32(*device));
            o.var(opt32(*stream));
            o.var(opt32(*task));
        }
        Record::AtbOp {
            ts: t,
            end,
            device,
            ws_ptr,
            ws_size,
            name,
            path,
        } => {
            o.u8(if *end {
                tag::ATB_OP_END
            } else {
                tag::ATB_OP_START
            });
            ts(o, next, *t);
            o.var(opt32(*device));
            o.var(*ws_ptr);
            o.var(*ws_size);
            o.text(name.as_ref());
            o.text(path.as_ref());
        }
        Record::AtbKernel {
            ts: t,
            end,
            device,
            path,
        } => {
            o.u8(if *end {
                tag::ATB_KERNEL_END
            } else {
                tag::ATB_KERNEL_START
            });
            ts(o, next, *t);
            o.var(opt32(*device));
            o.text(path.as_ref());
        }
        Record::AtbTensor {
            ts: t,
            access,
            kernel,
            addr,
            size,
            dtype,
            format,
            dims,
        } => {
            o.u8(if *kernel {
                tag::ATB_TENSOR_KERNEL
            } else {
                tag::ATB_TENSOR_OP
            });
            ts(o, next, *t);
            o.u8(*access as u8);
            o.var(*addr);
            o.var(*size);
            o.var(zigzag(i64::from(*dtype)));
            o.var(zigzag(i64::from(*format)));
            o.text(dims.as_ref());
        }
        _ => return false,
    }
    true
}

impl In<'_> {
    fn opt32(&mut self) -> Result<u32, WireError> {
        let v = u32::try_from(self.var()?).map_err(|_| WireError::Malformed)?;
        Ok(v.wrapping_sub(1))
    }
    fn i32z(&mut self) -> Result<i32, WireError> {
        i32::try_from(unzigzag(self.var()?)).map_err(|_| WireError::Malformed)
    }
}

/// Decodes the body of a record whose tag `t` is in 30..=59.
pub(super) fn decode<'a>(
    t: u8,
    i: &mut In<'a>,
    next: &mut ChunkState,
) -> Result<Record<&'a [u8]>, WireError> {
    Ok(match t {
        tag::HAL_ALLOC => Record::HalAlloc {
            ts: i.ts(next)?,
            addr: i.var()?,
            size: i.var()?,
            flag: i.var()?,
            stack: i.u32()?,
        },
        tag::HAL_CREATE => Record::HalCreate {
            ts: i.ts(next)?,
            handle: i.var()?,
            size: i.var()?,
            flag: i.var()?,
            device: i.opt32()?,
            module: i.opt32()?,
            page: i.opt32()?,
            stack: i.u32()?,
        },
        tag::HAL_FREE | tag::HAL_RELEASE => Record::HalFree {
            ts: i.ts(next)?,
            addr: i.var()?,
            create: t == tag::HAL_RELEASE,
            ret: i.i32z()?,
        },
        tag::HAL_OOM_ALLOC | tag::HAL_OOM_CREATE => Record::HalOom {
            ts: i.ts(next)?,
            create: t == tag::HAL_OOM_CREATE,
            size: i.var()?,
            flag: i.var()?,
            device: i.opt32()?,
            free: i.var()?,
            total: i.var()?,
            stack: i.u32()?,
        },
        tag::PINNED_REGISTER => Record::PinnedRegister {
            ts: i.ts(next)?,
            addr: i.var()?,
            size: i.var()?,
            rss: i.var()?,
            stack: i.u32()?,
        },
        tag::PINNED_UNREGISTER => Record::PinnedUnregister {
            ts: i.ts(next)?,
            addr: i.var()?,
            ret: i.i32z()?,
        },
        tag::SET_DEVICE => Record::SetDevice {
            ts: i.ts(next)?,
            device: i.u32()?,
        },
        tag::KERNEL_NAME => Record::KernelName {
            hash: i.var()?,
            name: i.text()?,
        },
        tag::KERNEL_LAUNCH => Record::KernelLaunch {
            ts: i.ts(next)?,
            hash: i.var()?,
            device: i.opt32()?,
            stream: i.opt32()?,
            task: i.opt32()?,
        },
        tag::ATB_OP_START | tag::ATB_OP_END => Record::AtbOp {
            ts: i.ts(next)?,
            end: t == tag::ATB_OP_END,
            device: i.opt32()?,
            ws_ptr: i.var()?,
            ws_size: i.var()?,
            name: i.text()?,
            path: i.text()?,
        },
        tag::ATB_KERNEL_START | tag::ATB_KERNEL_END => Record::AtbKernel {
            ts: i.ts(next)?,
            end: t == tag::ATB_KERNEL_END,
            device: i.opt32()?,
            path: i.text()?,
        },
        tag::ATB_TENSOR_OP | tag::ATB_TENSOR_KERNEL => {
            let ts = i.ts(next)?;
            let a = i.u8()?;
            Record::AtbTensor {
                ts,
                access: AccessKind::from_u8(a).ok_or(WireError::BadTag(a))?,
                kernel: t == tag::ATB_TENSOR_KERNEL,
                addr: i.var()?,
                size: i.var()?,
                dtype: i.i32z()?,
                format: i.i32z()?,
                dims: i.text()?,
            }
        }
        other => return Err(WireError::BadTag(other)),
    })
}

/// The time stamp of a CANN record (`None` for [`Record::KernelName`]); `None` too for any
/// other variant.
pub(super) fn ts_of<B>(rec: &Record<B>) -> Option<u64> {
    match rec {
        Record::HalAlloc { ts, .. }
        | Record::HalCreate { ts, .. }
        | Record::HalFree { ts, .. }
        | Record::HalOom { ts, .. }
        | Record::PinnedRegister { ts, .. }
        | Record::PinnedUnregister { ts, .. }
        | Record::SetDevice { ts, .. }
        | Record::KernelLaunch { ts, .. }
        | Record::AtbOp { ts, .. }
        | Record::AtbKernel { ts, .. }
        | Record::AtbTensor { ts, .. } => Some(*ts),
        _ => None,
    }
}

/// Copies a CANN record's borrowed texts (`None` for any other variant).
pub(super) fn to_owned<B: AsRef<[u8]>>(rec: &Record<B>) -> Option<Record<Box<[u8]>>> {
    let b = |x: &B| -> Box<[u8]> { x.as_ref().into() };
    Some(match rec {
        Record::HalAlloc {
            ts,
            addr,
            size,
            flag,
            stack,
        } => Record::HalAlloc {
            ts: *ts,
            addr: *addr,
            size: *size,
            flag: *flag,
            stack: *stack,
        },
        Record::HalCreate {
            ts,
            handle,
            size,
            flag,
            device,
            module,
            page,
            stack,
        } => Record::HalCreate {
            ts: *ts,
            handle: *handle,
            size: *size,
            flag: *flag,
            device: *device,
            module: *module,
            page: *page,
            stack: *stack,
        },
        Record::HalFree {
            ts,
            addr,
            create,
            ret,
        } => Record::HalFree {
            ts: *ts,
            addr: *addr,
            create: *create,
            ret: *ret,
        },
        Record::HalOom {
            ts,
            create,
            size,
            flag,
            device,
            free,
            total,
            stack,
        } => Record::HalOom {
            ts: *ts,
            create: *create,
            size: *size,
            flag: *flag,
            device: *device,
            free: *free,
            total: *total,
            stack: *stack,
        },
        Record::PinnedRegister {
            ts,
            addr,
            size,
            rss,
            stack,
        } => Record::PinnedRegister {
            ts: *ts,
            addr: *addr,
            size: *size,
            rss: *rss,
            stack: *stack,
        },
        Record::PinnedUnregister { ts, addr, ret } => Record::PinnedUnregister {
            ts: *ts,
            addr: *addr,
            ret: *ret,
        },
        Record::SetDevice { ts, device } => Record::SetDevice {
            ts: *ts,
            device: *device,
        },
        Record::KernelName { hash, name } => Record::KernelName {
            hash: *hash,
            name: b(name),
        },
        Record::KernelLaunch {
            ts,
            hash,
            device,
            stream,
            task,
        } => Record::KernelLaunch {
            ts: *ts,
            hash: *hash,
            device: *device,
            stream: *stream,
            task: *task,
        },
        Record::AtbOp {
            ts,
            end,
            device,
            ws_ptr,
            ws_size,
            name,
            path,
        } => Record::AtbOp {
            ts: *ts,
            end: *end,
            device: *device,
            ws_ptr: *ws_ptr,
            ws_size: *ws_size,
            name: b(name),
            path: b(path),
        },
        Record::AtbKernel {
            ts,
            end,
            device,
            path,
        } => Record::AtbKernel {
            ts: *ts,
            end: *end,
            device: *device,
            path: b(path),
        },
        Record::AtbTensor {
            ts,
            access,
            kernel,
            addr,
            size,
            dtype,
            format,
            dims,
        } => Record::AtbTensor {
            ts: *ts,
            access: *access,
            kernel: *kernel,
            addr: *addr,
            size: *size,
            dtype: *dtype,
            format: *format,
            dims: b(dims),
        },
        _ => return None,
    })
}

#[cfg(test)]
#[path = "cann_tests.rs"]
mod tests;
