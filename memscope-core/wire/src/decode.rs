//! The decoder: a record's tag picks its family (the shared records and the per-source envelope
//! here, the Python and sample families in their own files).

use super::codec::tag;
use super::{compact, python, python_ctx, sample, ChunkState, In, Record, SystemCode, WireError};

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
            Record::Mark {
                ts,
                stream,
                msg,
                null: t == tag::MARK_NULL,
            }
        }
        tag::RANGE_START | tag::RANGE_START_NULL => {
            let ts = i.ts(&mut next)?;
            let id = i.var()?;
            let stream = i.var()?;
            let msg = i.text()?;
            Record::RangeStart {
                ts,
                id,
                stream,
                msg,
                null: t == tag::RANGE_START_NULL,
            }
        }
        tag::RANGE_END => Record::RangeEnd {
            ts: i.ts(&mut next)?,
            id: i.var()?,
        },
        tag::HEAP_REGISTER => Record::HeapRegister {
            ts: i.ts(&mut next)?,
            pool: i.pool()?,
            device: i.u32()?,
            ptr: i.var()?,
            size: i.var()?,
        },
        tag::HEAP_UNREGISTER => Record::HeapUnregister {
            ts: i.ts(&mut next)?,
            pool: i.pool()?,
            ptr: i.var()?,
        },
        tag::REGION_REGISTER => Record::RegionRegister {
            ts: i.ts(&mut next)?,
            pool: i.pool()?,
            device: i.u32()?,
            ptr: i.var()?,
            size: i.var()?,
        },
        tag::REGION_UNREGISTER => Record::RegionUnregister {
            ts: i.ts(&mut next)?,
            pool: i.pool()?,
            ptr: i.var()?,
        },
        tag::OWNER_PUSH => Record::OwnerPush {
            ts: i.ts(&mut next)?,
            label: i.text()?,
        },
        tag::OWNER_POP => Record::OwnerPop {
            ts: i.ts(&mut next)?,
        },
        tag::CALL_STACK => Record::CallStack {
            ts: i.ts(&mut next)?,
            stack: i.var()? as u32,
        },
        tag::SHADOW => Record::Shadow {
            ts: i.ts(&mut next)?,
        },
        tag::SYSTEM => {
            let ts = i.ts(&mut next)?;
            let c = i.u8()?;
            let code = SystemCode::from_u8(c).ok_or(WireError::BadTag(c))?;
            Record::System {
                ts,
                code,
                device: i.u32()?,
            }
        }
        tag::HOST_MALLOC
        | tag::HOST_MALLOC_STACK
        | tag::HOST_MALLOC_A16
        | tag::HOST_MALLOC_STACK_A16 => {
            let ts = i.ts(&mut next)?;
            let a16 = t == tag::HOST_MALLOC_A16 || t == tag::HOST_MALLOC_STACK_A16;
            let addr = if a16 {
                i.addr16(&mut next)?
            } else {
                i.addr(&mut next)?
            };
            let size = i.var()?;
            let stack = if t == tag::HOST_MALLOC_STACK || t == tag::HOST_MALLOC_STACK_A16 {
                i.u32()?
            } else {
                0
            };
            Record::Malloc {
                ts,
                addr,
                size,
                stack,
            }
        }
        tag::HOST_FREE => {
            let ts = i.ts(&mut next)?;
            Record::Free {
                ts,
                addr: i.addr(&mut next)?,
            }
        }
        tag::HOST_FREE_A16 => {
            let ts = i.ts(&mut next)?;
            Record::Free {
                ts,
                addr: i.addr16(&mut next)?,
            }
        }
        tag::STACK_DEF => {
            let id = i.u32()?;
            let count = i.u32()?;
            let n = i.var()? as usize;
            Record::StackDef {
                id,
                count,
                raw: i.bytes(n)?,
            }
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
            let stack = if t == tag::HOST_MMAP_STACK {
                i.u32()?
            } else {
                0
            };
            Record::Mmap {
                ts,
                addr,
                size,
                stack,
            }
        }
        tag::HOST_MUNMAP => Record::Munmap {
            ts: i.ts(&mut next)?,
            addr: i.var()?,
            size: i.var()?,
        },
        tag::HOST_MREMAP | tag::HOST_MREMAP_KEEP => Record::Mremap {
            ts: i.ts(&mut next)?,
            old_addr: i.var()?,
            old_size: i.var()?,
            new_addr: i.var()?,
            new_size: i.var()?,
            keep_old: t == tag::HOST_MREMAP_KEEP,
        },
        tag::THREAD_DEVICE => Record::ThreadDevice {
            ts: i.ts(&mut next)?,
            device: i.u32()?,
        },
        tag::TEXT_DEF => Record::TextDef {
            id: i.u32()?,
            text: i.text()?,
        },
        tag::MARK_REF => Record::MarkRef {
            ts: i.ts(&mut next)?,
            stream: i.var()?,
            text: i.u32()?,
        },
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
        tag::SOURCE => {
            let source =
                crate::SourceId(u16::try_from(i.var()?).map_err(|_| WireError::Malformed)?);
            let t = i.u8()?;
            let ts = if crate::source::is_definition_tag(t) {
                0
            } else {
                i.ts(&mut next)?
            };
            let n = i.var()?;
            let body = i.bytes(usize::try_from(n).map_err(|_| WireError::Malformed)?)?;
            Record::Source {
                source,
                tag: t,
                ts,
                body,
            }
        }
        python_ctx::tag::PY_FRAME_DEF..=python::tag::LAST => {
            python_ctx::decode(t, &mut i, &mut next)?
        }
        python::tag::PY_CODE_DEF..=python::tag::LAST => python::decode(t, &mut i, &mut next)?,
        sample::tag::HOST_SAMPLE..=sample::tag::LAST => sample::decode(t, &mut i, &mut next)?,
        compact::tag::COMPACT_MALLOC..=compact::tag::LAST => compact::decode(t, &mut i, &mut next)?,
        other => return Err(WireError::BadTag(other)),
    };
    *st = next;
    Ok((rec, i.pos))
}

/// A decoded HOST `Malloc` (`free` false) or `Free` (`free` true; `size` and `stack` 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostRecord {
    /// `Free` rather than `Malloc`.
    pub free: bool,
    /// Time.
    pub ts: u64,
    /// Block address.
    pub addr: u64,
    /// Bytes (`Malloc`).
    pub size: u64,
    /// Interned stack id (`Malloc`, 0: none).
    pub stack: u32,
}

impl HostRecord {
    /// `rec` if it is a `Malloc` or `Free`.
    #[inline(always)]
    pub fn of<B>(rec: &Record<B>) -> Option<HostRecord> {
        match *rec {
            Record::Malloc {
                ts,
                addr,
                size,
                stack,
            } => Some(HostRecord {
                free: false,
                ts,
                addr,
                size,
                stack,
            }),
            Record::Free { ts, addr } => Some(HostRecord {
                free: true,
                ts,
                addr,
                size: 0,
                stack: 0,
            }),
            _ => None,
        }
    }

    /// The record as the generic decoder gives it, with owned texts.
    #[inline(always)]
    pub fn record(self) -> Record<Box<[u8]>> {
        if self.free {
            Record::Free {
                ts: self.ts,
                addr: self.addr,
            }
        } else {
            Record::Malloc {
                ts: self.ts,
                addr: self.addr,
                size: self.size,
                stack: self.stack,
            }
        }
    }
}

/// Decodes a HOST `Malloc`/`Free` at the start of `buf` as [`decode`] would (the same record
/// and state), returning it with its length; `None` for any other record and for one that
/// does not decode (the caller then uses [`decode`], which says why). The collector's reader
/// takes this for the records that are most of every stream: scalars only, so nothing is
/// written to memory and read back on the way.
#[inline(always)]
pub fn decode_host(buf: &[u8], st: &mut ChunkState) -> Option<(HostRecord, usize)> {
    let t = *buf.first()?;
    let free = match t {
        tag::HOST_MALLOC
        | tag::HOST_MALLOC_STACK
        | tag::HOST_MALLOC_A16
        | tag::HOST_MALLOC_STACK_A16 => false,
        tag::HOST_FREE | tag::HOST_FREE_A16 => true,
        _ => return None,
    };
    let mut i = In { buf, pos: 1 };
    let mut next = *st;
    let ts = i.ts(&mut next).ok()?;
    let a16 = matches!(
        t,
        tag::HOST_MALLOC_A16 | tag::HOST_MALLOC_STACK_A16 | tag::HOST_FREE_A16
    );
    let addr = if a16 {
        i.addr16(&mut next).ok()?
    } else {
        i.addr(&mut next).ok()?
    };
    let (mut size, mut stack) = (0, 0);
    if !free {
        size = i.var().ok()?;
        if t == tag::HOST_MALLOC_STACK || t == tag::HOST_MALLOC_STACK_A16 {
            stack = i.u32().ok()?;
        }
    }
    *st = next;
    Some((
        HostRecord {
            free,
            ts,
            addr,
            size,
            stack,
        },
        i.pos,
    ))
}
