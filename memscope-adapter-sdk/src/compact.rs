//! Plugin ABI 1.2 on the SDK: an event type registered once ([`TypeSpec`], `Host::register`)
//! and its events emitted by id with no text ([`TypeId`]).

use crate::{sys, Device, Emitted, Host, Kind};
use core::ffi::CStr;
use core::marker::PhantomData;

/// An event type to register once (plugin ABI 1.2): its texts travel once, its events by id.
#[derive(Clone, Copy, Debug)]
pub struct TypeSpec<'a> {
    raw: sys::EventType,
    _texts: PhantomData<&'a CStr>,
}

impl<'a> TypeSpec<'a> {
    /// A type of Event Type `event_type`, on the host CPU, every event a row.
    pub fn new(event_type: &'a CStr) -> TypeSpec<'a> {
        TypeSpec {
            raw: sys::EventType {
                struct_size: core::mem::size_of::<sys::EventType>() as u32,
                device: sys::DEVICE_CPU,
                flags: 0,
                reserved: 0,
                event_type: event_type.as_ptr(),
                name: core::ptr::null(),
                attrs: core::ptr::null(),
                value_names: core::ptr::null(),
            },
            _texts: PhantomData,
        }
    }

    /// The device of every event of the type.
    pub fn device(mut self, d: Device) -> TypeSpec<'a> {
        self.raw.device = d.raw();
        self
    }

    /// The Name of every event of the type.
    pub fn name(mut self, name: &'a CStr) -> TypeSpec<'a> {
        self.raw.name = name.as_ptr();
        self
    }

    /// Fixed attributes of every event, `k:v,k:v` (`owner` extends the owner chain).
    pub fn attrs(mut self, attrs: &'a CStr) -> TypeSpec<'a> {
        self.raw.attrs = attrs.as_ptr();
        self
    }

    /// Names of the per-event numeric attributes, `k1,k2` (at most [`sys::MAX_VALUES`]).
    pub fn values(mut self, names: &'a CStr) -> TypeSpec<'a> {
        self.raw.value_names = names.as_ptr();
        self
    }

    /// Account-only volume (`MEMSCOPE_TYPE_ACCOUNT`): MALLOC/FREE events summed up in the live
    /// account, rows only with `--host-rows`.
    pub fn account(mut self) -> TypeSpec<'a> {
        self.raw.flags |= sys::TYPE_ACCOUNT;
        self
    }

    /// The raw ABI struct.
    pub fn as_raw(&self) -> &sys::EventType {
        &self.raw
    }

    /// How many values its events carry (the names of [`TypeSpec::values`]).
    pub(crate) fn value_count(&self) -> usize {
        if self.raw.value_names.is_null() {
            return 0;
        }
        // SAFETY: a non-NULL `value_names` comes from a `&'a CStr` (`TypeSpec::values`).
        let names = unsafe { CStr::from_ptr(self.raw.value_names) }.to_bytes();
        if names.is_empty() {
            0
        } else {
            names.iter().filter(|&&b| b == b',').count() + 1
        }
    }
}

/// A registered event type: emit its events with no text (plugin ABI 1.2). Only
/// [`Host::register`] makes one, so the host it came from has `emit_compact`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TypeId {
    id: i32,
    /// Values each event carries.
    values: usize,
}

impl TypeId {
    /// The type `register` gave id `id`, whose events carry `values` values.
    pub(crate) fn new(id: i32, values: usize) -> TypeId {
        TypeId { id, values }
    }

    /// The id the host gave.
    pub fn raw(self) -> i32 {
        self.id
    }

    /// Emits one event of this type through `host` (`values`: one per registered value name,
    /// or empty for none; fewer than registered: dropped). The hot path: one indirect call, no
    /// text.
    #[inline]
    pub fn emit(
        self,
        host: Host,
        kind: Kind,
        ptr: u64,
        size: u64,
        flags: u32,
        values: &[u64],
    ) -> Emitted {
        let v = if values.is_empty() {
            core::ptr::null()
        } else if values.len() < self.values {
            return Emitted::Dropped;
        } else {
            values.as_ptr()
        };
        if !host.supports_compact() {
            return Emitted::Dropped;
        }
        // SAFETY: the vtable covers `emit_compact` (checked above); `v` is NULL or points to
        // at least as many values as the type registered names, valid for the call.
        match unsafe { (host.0.emit_compact)(self.id, kind.code(), ptr, size, flags, v) } {
            0 => Emitted::Recorded,
            1 => Emitted::NotRecording,
            _ => Emitted::Dropped,
        }
    }

    /// A MALLOC of `[ptr, ptr+size)`.
    #[inline]
    pub fn malloc(self, host: Host, ptr: u64, size: u64) -> Emitted {
        self.emit(host, Kind::Malloc, ptr, size, 0, &[])
    }

    /// A FREE of the block at `ptr` (`size` 0: the MALLOC's).
    #[inline]
    pub fn free(self, host: Host, ptr: u64, size: u64) -> Emitted {
        self.emit(host, Kind::Free, ptr, size, 0, &[])
    }
}
