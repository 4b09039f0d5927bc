//! Encoding of records into a chunk (allocation-free: the probe calls it inside hooks).

use super::{compact, python, python_ctx, sample, tag, zigzag, ChunkState, Out, Record};

impl<B: AsRef<[u8]>> Record<B> {
    /// Encodes into `out`, updating `st` only on success. Returns the bytes written, or `None`
    /// when `out` is too small (the caller moves to a fresh chunk and retries). Texts longer than
    /// [`crate::MAX_TEXT`] are cut.
    #[inline(always)]
    pub fn encode(&self, st: &mut ChunkState, out: &mut [u8]) -> Option<usize> {
        if let Some(n) = super::fast::encode(self, st, out) {
            return Some(n);
        }
        self.encode_generic(st, out)
    }

    /// The encoder of every record (the fast path of [`super::fast`] writes the same bytes).
    #[inline(never)]
    pub(crate) fn encode_generic(&self, st: &mut ChunkState, out: &mut [u8]) -> Option<usize> {
        let mut next = *st;
        let mut o = Out {
            buf: out,
            pos: 0,
            ok: true,
        };
        let ts = |o: &mut Out, next: &mut ChunkState, t: u64| {
            o.var(t.saturating_sub(next.last_ts));
            next.last_ts = next.last_ts.max(t);
        };
        match self {
            Record::Thread { tid } => {
                o.u8(tag::THREAD);
                o.var(*tid as u64);
            }
            Record::Mark {
                ts: t,
                stream,
                msg,
                null,
            } => {
                o.u8(if *null { tag::MARK_NULL } else { tag::MARK });
                ts(&mut o, &mut next, *t);
                o.var(*stream);
                o.text(msg.as_ref());
            }
            Record::RangeStart {
                ts: t,
                id,
                stream,
                msg,
                null,
            } => {
                o.u8(if *null {
                    tag::RANGE_START_NULL
                } else {
                    tag::RANGE_START
                });
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
            Record::HeapRegister {
                ts: t,
                pool,
                device,
                ptr,
                size,
            }
            | Record::RegionRegister {
                ts: t,
                pool,
                device,
                ptr,
                size,
            } => {
                let heap = matches!(self, Record::HeapRegister { .. });
                o.u8(if heap {
                    tag::HEAP_REGISTER
                } else {
                    tag::REGION_REGISTER
                });
                ts(&mut o, &mut next, *t);
                o.u8(*pool);
                o.var(*device as u64);
                o.var(*ptr);
                o.var(*size);
            }
            Record::HeapUnregister { ts: t, pool, ptr }
            | Record::RegionUnregister { ts: t, pool, ptr } => {
                let heap = matches!(self, Record::HeapUnregister { .. });
                o.u8(if heap {
                    tag::HEAP_UNREGISTER
                } else {
                    tag::REGION_UNREGISTER
                });
                ts(&mut o, &mut next, *t);
                o.u8(*pool);
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
            Record::CallStack { ts: t, stack } => {
                o.u8(tag::CALL_STACK);
                ts(&mut o, &mut next, *t);
                o.var(*stack as u64);
            }
            Record::Shadow { ts: t } => {
                o.u8(tag::SHADOW);
                ts(&mut o, &mut next, *t);
            }
            Record::System {
                ts: t,
                code,
                device,
            } => {
                o.u8(tag::SYSTEM);
                ts(&mut o, &mut next, *t);
                o.u8(*code as u8);
                o.var(*device as u64);
            }
            Record::Malloc {
                ts: t,
                addr,
                size,
                stack,
            } => {
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
            Record::Free { ts: t, addr } => {
                let d = addr.wrapping_sub(next.last_addr) as i64;
                o.u8(if d % 16 == 0 {
                    tag::HOST_FREE_A16
                } else {
                    tag::HOST_FREE
                });
                ts(&mut o, &mut next, *t);
                o.var(zigzag(if d % 16 == 0 { d / 16 } else { d }));
                next.last_addr = *addr;
            }
            Record::TextDef { id, text } => {
                o.u8(tag::TEXT_DEF);
                o.var(*id as u64);
                o.text(text.as_ref());
            }
            Record::MarkRef {
                ts: t,
                stream,
                text,
            } => {
                o.u8(tag::MARK_REF);
                ts(&mut o, &mut next, *t);
                o.var(*stream);
                o.var(*text as u64);
            }
            Record::RangeStartRef {
                ts: t,
                id,
                stream,
                text,
            } => {
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
            Record::Module {
                ts: t,
                base,
                start,
                size,
                build_id,
                path,
            } => {
                o.u8(tag::MODULE);
                ts(&mut o, &mut next, *t);
                o.var(*base);
                o.var(*start);
                o.var(*size);
                o.text(build_id.as_ref());
                o.text(path.as_ref());
            }
            Record::Mmap {
                ts: t,
                addr,
                size,
                stack,
            } => {
                o.u8(if *stack == 0 {
                    tag::HOST_MMAP
                } else {
                    tag::HOST_MMAP_STACK
                });
                ts(&mut o, &mut next, *t);
                o.var(*addr);
                o.var(*size);
                if *stack != 0 {
                    o.var(*stack as u64);
                }
            }
            Record::Munmap { ts: t, addr, size } => {
                o.u8(tag::HOST_MUNMAP);
                ts(&mut o, &mut next, *t);
                o.var(*addr);
                o.var(*size);
            }
            Record::Mremap {
                ts: t,
                old_addr,
                old_size,
                new_addr,
                new_size,
                keep_old,
            } => {
                o.u8(if *keep_old {
                    tag::HOST_MREMAP_KEEP
                } else {
                    tag::HOST_MREMAP
                });
                ts(&mut o, &mut next, *t);
                o.var(*old_addr);
                o.var(*old_size);
                o.var(*new_addr);
                o.var(*new_size);
            }
            Record::ThreadDevice { ts: t, device } => {
                o.u8(tag::THREAD_DEVICE);
                ts(&mut o, &mut next, *t);
                o.var(u64::from(*device));
            }
            Record::Plugin {
                ts: t,
                kind,
                device,
                ptr,
                size,
                event_type,
                name,
                attrs,
            } => {
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
            Record::Source {
                source,
                tag: t,
                ts: time,
                body,
            } => {
                o.u8(tag::SOURCE);
                o.var(u64::from(source.0));
                o.u8(*t);
                if !crate::source::is_definition_tag(*t) {
                    ts(&mut o, &mut next, *time);
                }
                let body = body.as_ref();
                o.var(body.len() as u64);
                o.bytes(body);
            }
            Record::PyCodeDef { .. }
            | Record::PyCall { .. }
            | Record::PyReturn { .. }
            | Record::PyTrace { .. }
            | Record::Snapshot { .. }
            | Record::OwnerTag { .. } => python::encode(self, &mut o, &mut next),
            Record::PyFrameDef { .. }
            | Record::PyStack { .. }
            | Record::AtenOp { .. }
            | Record::AtenTensor { .. }
            | Record::CpuTensor { .. }
            | Record::WatchDump { .. } => python_ctx::encode(self, &mut o, &mut next),
            Record::ProcessSample { .. } | Record::DeviceSample { .. } => {
                sample::encode(self, &mut o, &mut next)
            }
            Record::EventTypeDef { .. } | Record::Compact { .. } => {
                compact::encode(self, &mut o, &mut next)
            }
        }
        if o.ok {
            *st = next;
            Some(o.pos)
        } else {
            None
        }
    }
}
