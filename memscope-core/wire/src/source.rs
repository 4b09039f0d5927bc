//! Per-source records: the envelope an adapter's own records travel in, the field codec an
//! adapter encodes them with, and [`records!`](crate::records), the declaration that generates
//! an adapter's record enum and its codec.
//!
//! An adapter crate declares its records in `src/wire.rs`:
//!
//! ```
//! memscope_wire::records! {
//!     /// The toy source's records.
//!     pub enum ToyRecord<'a> {
//!         /// A block was handed out.
//!         Alloc = (MALLOC, 0) { addr: u64, size: u64, name: &'a [u8] },
//!         /// It was given back.
//!         Free = (FREE, 0) { addr: u64 },
//!     }
//! }
//! let rec = ToyRecord::Free { addr: 0x1000 };
//! let mut buf = [0u8; 64];
//! let env = memscope_wire::envelope(&rec, memscope_wire::SourceId(40), 7, &mut buf).unwrap();
//! let memscope_wire::Record::Source { tag, body, .. } = env else { unreachable!() };
//! assert_eq!(ToyRecord::decode(tag, body), Ok(rec));
//! ```
//!
//! Each record names its class (the `Event` it becomes, [`class`]) and a number 0–15 within
//! that class; the pair is its one-byte tag, so the runtime and the collector know a record's
//! kind, drop counter and whether it has a time stamp without the adapter's code. The envelope
//! ([`crate::Record::Source`]) carries the source id, the tag, the time stamp and the body with
//! its length, so the spool reader, the merge and the capture copy records they do not
//! understand.

use crate::{AccessKind, EventKind, In, Out, Record, SourceId, WireError, MAX_TEXT};

/// Record classes: the high four bits of a per-source tag. `SYSTEM` … `SAMPLE` are the position
/// of the record's `Event` kind in [`EventKind::ALL`] (and so its drop counter).
pub mod class {
    /// A `SYSTEM` event.
    pub const SYSTEM: u8 = 0;
    /// A `MALLOC` event.
    pub const MALLOC: u8 = 1;
    /// A `FREE` event.
    pub const FREE: u8 = 2;
    /// An `ACCESS` event.
    pub const ACCESS: u8 = 3;
    /// An `OP_LAUNCH` event.
    pub const OP_LAUNCH: u8 = 4;
    /// A `KERNEL_LAUNCH` event.
    pub const KERNEL_LAUNCH: u8 = 5;
    /// An `MSTX` event.
    pub const MSTX: u8 = 6;
    /// A `SNAPSHOT` event.
    pub const SNAPSHOT: u8 = 7;
    /// An `OOM_DETAIL` event.
    pub const OOM_DETAIL: u8 = 8;
    /// A `SAMPLE` event.
    pub const SAMPLE: u8 = 9;
    /// Time-stamped state that is no event itself (a thread's device, a pool's heap).
    pub const STATE: u8 = 14;
    /// A definition: no time stamp, applied as soon as it is read (an interned name).
    pub const DEFINITION: u8 = 15;
}

/// The tag of record `n` (0–15) of class `class`.
#[inline]
pub const fn tag_of(class: u8, n: u8) -> u8 {
    (class << 4) | (n & 15)
}

/// The class of tag `tag` (one of [`class`]).
#[inline]
pub const fn class_of(tag: u8) -> u8 {
    tag >> 4
}

/// The `Event` kind a record with tag `tag` becomes (`None` for state and definitions).
#[inline]
pub fn event_kind_of(tag: u8) -> Option<EventKind> {
    EventKind::ALL.get(class_of(tag) as usize).copied()
}

/// Whether tag `tag` is a definition's (no time stamp).
#[inline]
pub const fn is_definition_tag(tag: u8) -> bool {
    class_of(tag) == class::DEFINITION
}

/// Fails compilation (in a `const` context) when two records of one declaration share a tag or
/// a number is out of range; [`records!`](crate::records) calls it.
pub const fn check_tags(tags: &[(u8, u8)]) {
    let mut i = 0;
    while i < tags.len() {
        assert!(tags[i].1 < 16, "a record number is 0-15");
        assert!(
            tags[i].0 < 10 || tags[i].0 == class::STATE || tags[i].0 == class::DEFINITION,
            "unknown record class"
        );
        let mut j = i + 1;
        while j < tags.len() {
            assert!(
                tags[i].0 != tags[j].0 || tags[i].1 != tags[j].1,
                "two records share a tag"
            );
            j += 1;
        }
        i += 1;
    }
}

/// A field of a per-source record: how it is written into a body and read back.
pub trait Field<'a>: Sized {
    /// Writes the field.
    fn put(&self, o: &mut Out);
    /// Reads the field.
    ///
    /// # Errors
    /// The body ends inside the field or holds a value the field cannot take.
    fn get(i: &mut In<'a>) -> Result<Self, WireError>;
}

impl Field<'_> for u64 {
    #[inline]
    fn put(&self, o: &mut Out) {
        o.var(*self);
    }
    #[inline]
    fn get(i: &mut In) -> Result<Self, WireError> {
        i.var()
    }
}

impl Field<'_> for u32 {
    #[inline]
    fn put(&self, o: &mut Out) {
        o.var(u64::from(*self));
    }
    #[inline]
    fn get(i: &mut In) -> Result<Self, WireError> {
        i.u32()
    }
}

impl Field<'_> for u8 {
    #[inline]
    fn put(&self, o: &mut Out) {
        o.u8(*self);
    }
    #[inline]
    fn get(i: &mut In) -> Result<Self, WireError> {
        i.u8()
    }
}

impl Field<'_> for bool {
    #[inline]
    fn put(&self, o: &mut Out) {
        o.u8(u8::from(*self));
    }
    #[inline]
    fn get(i: &mut In) -> Result<Self, WireError> {
        match i.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(WireError::Malformed),
        }
    }
}

impl Field<'_> for i64 {
    #[inline]
    fn put(&self, o: &mut Out) {
        o.var(crate::zigzag(*self));
    }
    #[inline]
    fn get(i: &mut In) -> Result<Self, WireError> {
        Ok(crate::unzigzag(i.var()?))
    }
}

impl Field<'_> for i32 {
    #[inline]
    fn put(&self, o: &mut Out) {
        o.var(crate::zigzag(i64::from(*self)));
    }
    #[inline]
    fn get(i: &mut In) -> Result<Self, WireError> {
        i32::try_from(crate::unzigzag(i.var()?)).map_err(|_| WireError::Malformed)
    }
}

/// A `u32` whose "unknown" value is `u32::MAX`, written as `value + 1` (wrapping) so that the
/// common unknown costs one byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OptU32(pub u32);

impl Field<'_> for OptU32 {
    #[inline]
    fn put(&self, o: &mut Out) {
        o.var(u64::from(self.0.wrapping_add(1)));
    }
    #[inline]
    fn get(i: &mut In) -> Result<Self, WireError> {
        Ok(OptU32(i.u32()?.wrapping_sub(1)))
    }
}

impl Field<'_> for AccessKind {
    #[inline]
    fn put(&self, o: &mut Out) {
        o.u8(*self as u8);
    }
    #[inline]
    fn get(i: &mut In) -> Result<Self, WireError> {
        let v = i.u8()?;
        AccessKind::from_u8(v).ok_or(WireError::BadTag(v))
    }
}

/// Text and other bytes: a length and the bytes (cut at [`MAX_TEXT`]).
impl<'a> Field<'a> for &'a [u8] {
    #[inline]
    fn put(&self, o: &mut Out) {
        o.text(self);
    }
    #[inline]
    fn get(i: &mut In<'a>) -> Result<Self, WireError> {
        i.text()
    }
}

/// An adapter's record type, as [`records!`](crate::records) generates it.
pub trait SourceRecord {
    /// The record's tag ([`tag_of`]).
    fn tag(&self) -> u8;
    /// Writes the record's fields.
    fn encode_body(&self, o: &mut Out);
}

/// Most body bytes a record of two texts takes: the runtime's encoding buffer.
pub const MAX_BODY: usize = 2 * MAX_TEXT + 64;

/// Encodes `rec`'s body into `buf`: the bytes written, or `None` when `buf` is too small.
pub fn encode_body<R: SourceRecord + ?Sized>(rec: &R, buf: &mut [u8]) -> Option<usize> {
    let mut o = Out::new(buf);
    rec.encode_body(&mut o);
    o.finish()
}

/// `rec` of source `source` at time `ts` (ignored for a definition) as a stream record, its body
/// encoded into `buf`; `None` when `buf` is too small.
pub fn envelope<'b, R: SourceRecord + ?Sized>(
    rec: &R,
    source: SourceId,
    ts: u64,
    buf: &'b mut [u8],
) -> Option<Record<&'b [u8]>> {
    let n = encode_body(rec, buf)?;
    let tag = rec.tag();
    Some(Record::Source {
        source,
        tag,
        ts: if is_definition_tag(tag) { 0 } else { ts },
        body: &buf[..n],
    })
}

/// `rec` of source `source` at time `ts` as an owned stream record (for the collector side and
/// tests; the probe uses [`envelope`], which does not allocate).
pub fn owned_envelope<R: SourceRecord + ?Sized>(
    rec: &R,
    source: SourceId,
    ts: u64,
) -> Record<Box<[u8]>> {
    let mut buf = vec![0u8; MAX_BODY];
    let n = encode_body(rec, &mut buf).unwrap_or(0);
    buf.truncate(n);
    let tag = rec.tag();
    Record::Source {
        source,
        tag,
        ts: if is_definition_tag(tag) { 0 } else { ts },
        body: buf.into_boxed_slice(),
    }
}

/// Declares an adapter's records: an enum of struct variants, each `Name = (CLASS, n) { fields }`
/// with `CLASS` one of [`class`] and `n` 0–15, and generates its [`SourceRecord`] impl, a
/// `decode(tag, body)` and a `TAGS` table. Field types implement [`Field`]: `u64`, `u32`, `u8`,
/// `bool`, `i32`, `i64`, [`OptU32`], [`AccessKind`] and `&'a [u8]` (text; the enum then takes
/// a lifetime). `of(source, rec)` picks a typer's own records out of the stream's. Fields are written in declaration order; a record's tag and fields never change
/// once a capture holds it (add records, do not edit them).
#[macro_export]
macro_rules! records {
    ($(#[$m:meta])* $vis:vis enum $name:ident<$lt:lifetime> { $($body:tt)* }) => {
        $crate::records!(@emit [$(#[$m])*] $vis $name [<$lt>] [$lt] { $($body)* });
    };
    ($(#[$m:meta])* $vis:vis enum $name:ident { $($body:tt)* }) => {
        $crate::records!(@emit [$(#[$m])*] $vis $name [] ['_] { $($body)* });
    };
    (@emit [$($m:tt)*] $vis:vis $name:ident [$($gen:tt)*] [$blt:lifetime] {
        $(
            $(#[$vm:meta])*
            $var:ident = ($class:ident, $n:literal) {
                $( $(#[$fm:meta])* $f:ident : $t:ty ),* $(,)?
            }
        ),* $(,)?
    }) => {
        $($m)*
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        $vis enum $name $($gen)* {
            $(
                $(#[$vm])*
                $var { $( $(#[$fm])* $f: $t ),* },
            )*
        }

        const _: () = $crate::source::check_tags(&[$(($crate::source::class::$class, $n)),*]);

        impl $($gen)* $name $($gen)* {
            /// Every tag of these records, in declaration order.
            pub const TAGS: &'static [u8] =
                &[$($crate::source::tag_of($crate::source::class::$class, $n)),*];

            /// Decodes the body of the record with tag `tag`.
            ///
            /// # Errors
            /// An unknown tag, or a body that ends early or holds a bad value.
            #[allow(unused_mut, unused_variables)]
            pub fn decode(tag: u8, body: &$blt [u8]) -> Result<Self, $crate::WireError> {
                let mut i = $crate::In::new(body);
                $(
                    if tag == $crate::source::tag_of($crate::source::class::$class, $n) {
                        return Ok($name::$var {
                            $( $f: <$t as $crate::source::Field>::get(&mut i)? ),*
                        });
                    }
                )*
                Err($crate::WireError::BadTag(tag))
            }

            /// `rec` as a record of these, with its time, if it is a per-source record of
            /// `source` (`None` otherwise; `Some(Err(_))` when its body does not decode).
            pub fn of<B: AsRef<[u8]>>(
                source: $crate::SourceId,
                rec: &$blt $crate::Record<B>,
            ) -> Option<Result<(u64, Self), $crate::WireError>> {
                match rec {
                    $crate::Record::Source {
                        source: s,
                        tag,
                        ts,
                        body,
                    } if *s == source => Some(Self::decode(*tag, body.as_ref()).map(|r| (*ts, r))),
                    _ => None,
                }
            }
        }

        impl $($gen)* $crate::source::SourceRecord for $name $($gen)* {
            #[inline]
            fn tag(&self) -> u8 {
                match self {
                    $( $name::$var { .. } => {
                        $crate::source::tag_of($crate::source::class::$class, $n)
                    } )*
                }
            }

            #[allow(unused_variables)]
            #[inline]
            fn encode_body(&self, o: &mut $crate::Out) {
                match self {
                    $( $name::$var { $($f),* } => {
                        $( $crate::source::Field::put($f, o); )*
                    } )*
                }
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    crate::records! {
        /// Test records.
        enum Toy<'a> {
            /// A malloc.
            Alloc = (MALLOC, 0) { addr: u64, size: u64, device: OptU32, stack: u32 },
            /// A free with its return code.
            Free = (FREE, 3) { addr: u64, ret: i32 },
            /// A name.
            Name = (DEFINITION, 0) { hash: u64, name: &'a [u8] },
            /// State.
            Device = (STATE, 1) { device: u32, on: bool, access: AccessKind, d: i64, b: u8 },
        }
    }

    crate::records! {
        /// Records without text take no lifetime.
        enum Plain {
            /// Empty.
            Tick = (SYSTEM, 0) {},
        }
    }

    #[test]
    fn declared_records_round_trip_through_the_envelope_and_the_stream_codec() {
        let recs = [
            Toy::Alloc {
                addr: 0x7f00_0000,
                size: 4096,
                device: OptU32(u32::MAX),
                stack: 3,
            },
            Toy::Free { addr: 9, ret: -7 },
            Toy::Name {
                hash: 11,
                name: b"kernel",
            },
            Toy::Device {
                device: 2,
                on: true,
                access: AccessKind::Write,
                d: -5,
                b: 200,
            },
        ];
        let mut chunk = [0u8; 512];
        let mut st = crate::ChunkState::default();
        let mut pos = 0;
        for (k, r) in recs.iter().enumerate() {
            let mut body = [0u8; 64];
            let env = envelope(r, SourceId(40), 1000 + k as u64, &mut body).unwrap();
            pos += env.encode(&mut st, &mut chunk[pos..]).unwrap();
        }
        let mut st = crate::ChunkState::default();
        let mut at = 0;
        for (k, r) in recs.iter().enumerate() {
            let (rec, n) = crate::decode(&chunk[at..pos], &mut st).unwrap();
            at += n;
            let Record::Source {
                source,
                tag,
                ts,
                body,
            } = rec
            else {
                panic!("not an envelope: {rec:?}")
            };
            assert_eq!(source, SourceId(40));
            assert_eq!(Toy::decode(tag, body).unwrap(), *r);
            if matches!(r, Toy::Name { .. }) {
                assert_eq!(rec.ts(), None);
            } else {
                assert_eq!(ts, 1000 + k as u64);
            }
        }
        assert_eq!(at, pos);
        assert_eq!(Plain::TAGS, &[0]);
        assert_eq!(Toy::TAGS, &[0x10, 0x23, 0xf0, 0xe1]);
        assert_eq!(Plain::decode(0, b""), Ok(Plain::Tick {}));
        assert_eq!(
            Plain::of(SourceId(1), &Record::<&[u8]>::OwnerPop { ts: 1 }),
            None
        );
        assert_eq!(Toy::decode(0x13, b""), Err(WireError::BadTag(0x13)));
        let owned = crate::owned_envelope(&recs[1], SourceId(40), 9);
        assert_eq!(Toy::of(SourceId(40), &owned), Some(Ok((9, recs[1]))));
        assert_eq!(Toy::of(SourceId(41), &owned), None);
        assert_eq!(
            Toy::of(SourceId(40), &Record::<&[u8]>::OwnerPop { ts: 1 }),
            None
        );
    }

    #[test]
    fn a_tag_names_its_event_kind_and_drop_counter() {
        assert_eq!(
            event_kind_of(tag_of(class::MALLOC, 2)),
            Some(EventKind::Malloc)
        );
        assert_eq!(event_kind_of(tag_of(class::STATE, 0)), None);
        assert!(is_definition_tag(tag_of(class::DEFINITION, 1)));
        for (i, k) in EventKind::ALL.iter().enumerate() {
            assert_eq!(event_kind_of(tag_of(i as u8, 0)), Some(*k));
            assert_eq!(crate::drop_slot_of(*k), i);
        }
        let mut body = [0u8; 8];
        let env = envelope(&Toy::Free { addr: 1, ret: 0 }, SourceId(3), 5, &mut body).unwrap();
        assert_eq!(env.event_kind(), Some(EventKind::Free));
        assert_eq!(env.drop_slot(), Some(2));
    }
}
