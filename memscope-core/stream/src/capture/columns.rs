//! The column layout of a capture block (shared by writer and reader).
//!
//! Every source (one thread of one process image) of a block has [`NCOL`] byte columns; the
//! block stores column 0 of every source, then column 1 of every source, and so on, so zstd
//! sees bytes of one kind together. Per record:
//!
//! * `TAG`: one byte, a record code (low 6 bits, `code::*`) plus [`DEFERRED`] and [`NEG_TS`].
//! * time stamp (records that have one): the difference to the source's previous time stamp
//!   (its magnitude; [`NEG_TS`] marks a decrease), low byte in `TS_LO`, the rest as a varint
//!   in `TS_HI`.
//! * `MALLOC*`: the address as the zig-zag difference to the source's previous allocation
//!   (divided by 16 for the `_A16` codes) in the `ADDR_*` planes (low byte, second byte, rest
//!   as varint), the size as a varint in `SIZE`, the stack id (`_STACK` codes) in `STACK`.
//! * `FREE_REF`: the freed block named by its allocation: `(distance << 1) | cross` in the
//!   `REF_*` planes, where distance counts back through the allocations of the source that made
//!   it (this source, or for `cross` the source whose index follows in `XSRC`).
//! * `FREE`/`FREE_A16`: a block allocated before this block, by address (as `MALLOC`).
//! * `TMALLOC*`, `TFREE*` (format 4): the compact MALLOC/FREE events of registered types
//!   (plugin ABI 1.2) take the same planes as `MALLOC`/`FREE` — their allocation view: the
//!   address in the `ADDR_*` planes (a free's always by address), the type id in `STACK`, the
//!   size (a free's too) in `SIZE`.
//! * `GENERIC_TS`/`GENERIC`: any other record in the stream's own encoding ([`memscope_wire`])
//!   in `GENERIC`, its time stamp (if it has one) in the time-stamp columns.
//!
//! Order: the reader emits, at every step, the source whose next record has the smallest key
//! (time stamp — for a definition, the source's previous time stamp — then source index);
//! a record the collector emitted out of that order is [`DEFERRED`]: its source waits until
//! the position the block's deferred list gives for it.

pub use memscope_wire::put_var;

/// Columns per source.
pub const NCOL: usize = 12;
/// Record codes and flags.
pub const TAG: usize = 0;
/// Time-stamp difference, low byte.
pub const TS_LO: usize = 1;
/// Time-stamp difference >> 8, varint.
pub const TS_HI: usize = 2;
/// Address difference, low byte.
pub const ADDR_LO: usize = 3;
/// Address difference, second byte.
pub const ADDR_MID: usize = 4;
/// Address difference >> 16, varint.
pub const ADDR_HI: usize = 5;
/// Allocation sizes, varints.
pub const SIZE: usize = 6;
/// Stack ids, varints.
pub const STACK: usize = 7;
/// Free references, low byte.
pub const REF_LO: usize = 8;
/// Free references >> 8, varint.
pub const REF_HI: usize = 9;
/// Source index of a cross-source free reference, varint.
pub const XSRC: usize = 10;
/// Other records, wire-encoded.
pub const GENERIC: usize = 11;

/// Tag flag: the record is out of key order (see the module docs).
pub const DEFERRED: u8 = 0x80;
/// Tag flag: the time stamp is lower than the source's previous one.
pub const NEG_TS: u8 = 0x40;
/// Mask of the record code in a tag.
pub const CODE: u8 = 0x3f;

/// Record codes.
pub mod code {
    /// `Malloc`, address difference not a multiple of 16.
    pub const MALLOC: u8 = 1;
    /// `Malloc`, address difference / 16.
    pub const MALLOC_A16: u8 = 2;
    /// `Malloc` with a stack id.
    pub const MALLOC_STACK: u8 = 3;
    /// `Malloc` with a stack id, address difference / 16.
    pub const MALLOC_STACK_A16: u8 = 4;
    /// `Free` of a block allocated earlier in the block.
    pub const FREE_REF: u8 = 5;
    /// `Free` by address.
    pub const FREE: u8 = 6;
    /// `Free` by address difference / 16.
    pub const FREE_A16: u8 = 7;
    /// Another record with a time stamp.
    pub const GENERIC_TS: u8 = 8;
    /// Another record without a time stamp (definitions).
    pub const GENERIC: u8 = 9;
    /// Compact MALLOC of a registered type, address difference not a multiple of 16.
    pub const TMALLOC: u8 = 10;
    /// Compact MALLOC of a registered type, address difference / 16.
    pub const TMALLOC_A16: u8 = 11;
    /// Compact FREE by address.
    pub const TFREE: u8 = 12;
    /// Compact FREE by address difference / 16.
    pub const TFREE_A16: u8 = 13;
}

/// Splits `v` into a low byte (column `lo`) and a varint of the rest (column `hi`).
#[inline]
pub fn put_lo_hi(cols: &mut [Vec<u8>; NCOL], lo: usize, hi: usize, v: u64) {
    cols[lo].push(v as u8);
    put_var(&mut cols[hi], v >> 8);
}

/// An address difference into the three `ADDR_*` planes.
#[inline]
pub fn put_addr(cols: &mut [Vec<u8>; NCOL], v: u64) {
    cols[ADDR_LO].push(v as u8);
    cols[ADDR_MID].push((v >> 8) as u8);
    put_var(&mut cols[ADDR_HI], v >> 16);
}
