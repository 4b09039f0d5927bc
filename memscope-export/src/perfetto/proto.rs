//! A minimal protobuf encoder for the Perfetto messages memscope writes, with the field numbers
//! of `perfetto_trace.proto` (checked against the `perfetto` PyPI wheel's descriptors).
//!
//! A trace file is `Trace { repeated TracePacket packet = 1; }`, i.e. a plain concatenation of
//! `0x0A <varint length> <TracePacket>` records: it is written packet by packet, and a file cut
//! anywhere loses only the packet at the cut.

use memscope_wire::put_var;

/// Field numbers (`perfetto/protos/perfetto/trace/...`).
#[allow(missing_docs)]
pub mod field {
    pub const TRACE_PACKET: u32 = 1;
    // TracePacket
    pub const TIMESTAMP: u32 = 8;
    pub const SEQUENCE_ID: u32 = 10;
    pub const TRACK_EVENT: u32 = 11;
    pub const INTERNED_DATA: u32 = 12;
    pub const SEQUENCE_FLAGS: u32 = 13;
    pub const TRACK_DESCRIPTOR: u32 = 60;
    // TrackEvent
    pub const DEBUG_ANNOTATIONS: u32 = 4;
    pub const TYPE: u32 = 9;
    pub const NAME_IID: u32 = 10;
    pub const TRACK_UUID: u32 = 11;
    pub const CATEGORIES: u32 = 22;
    pub const NAME: u32 = 23;
    pub const COUNTER_VALUE: u32 = 30;
    pub const FLOW_IDS: u32 = 47;
    // TrackDescriptor
    pub const UUID: u32 = 1;
    pub const TD_NAME: u32 = 2;
    pub const PROCESS: u32 = 3;
    pub const PARENT_UUID: u32 = 5;
    pub const COUNTER: u32 = 8;
    pub const CHILD_ORDERING: u32 = 11;
    pub const SIBLING_ORDER_RANK: u32 = 12;
    // ProcessDescriptor
    pub const PID: u32 = 1;
    pub const PROCESS_NAME: u32 = 6;
    pub const PROCESS_LABELS: u32 = 8;
    // CounterDescriptor
    pub const UNIT: u32 = 3;
    // DebugAnnotation
    pub const DA_UINT: u32 = 3;
    pub const DA_INT: u32 = 4;
    pub const DA_STRING: u32 = 6;
    pub const DA_NAME: u32 = 10;
    // InternedData / EventName
    pub const EVENT_NAMES: u32 = 2;
    pub const IID: u32 = 1;
    pub const EN_NAME: u32 = 2;
}

/// `TrackEvent.Type`.
#[allow(missing_docs)]
pub mod event_type {
    pub const SLICE_BEGIN: u64 = 1;
    pub const SLICE_END: u64 = 2;
    pub const INSTANT: u64 = 3;
    pub const COUNTER: u64 = 4;
}

/// `CounterDescriptor.Unit.UNIT_SIZE_BYTES`.
pub const UNIT_SIZE_BYTES: u64 = 3;
/// `TracePacket.SequenceFlags.SEQ_INCREMENTAL_STATE_CLEARED`.
pub const SEQ_INCREMENTAL_STATE_CLEARED: u64 = 1;
/// `TracePacket.SequenceFlags.SEQ_NEEDS_INCREMENTAL_STATE`.
pub const SEQ_NEEDS_INCREMENTAL_STATE: u64 = 2;
/// `TrackDescriptor.ChildTracksOrdering.EXPLICIT`.
pub const CHILD_ORDERING_EXPLICIT: u64 = 3;

const VARINT: u32 = 0;
const FIXED64: u32 = 1;
const LEN: u32 = 2;

/// A message being encoded.
#[derive(Default)]
pub struct Msg {
    /// The encoded bytes.
    pub buf: Vec<u8>,
}

impl Msg {
    fn tag(&mut self, field: u32, wire: u32) {
        put_var(&mut self.buf, u64::from(field << 3 | wire));
    }

    /// A varint field (uint32/uint64/enum/bool).
    pub fn uint(&mut self, field: u32, v: u64) -> &mut Msg {
        self.tag(field, VARINT);
        put_var(&mut self.buf, v);
        self
    }

    /// An int64/int32 field (two's complement varint).
    pub fn int(&mut self, field: u32, v: i64) -> &mut Msg {
        self.uint(field, v as u64)
    }

    /// A fixed64 field.
    pub fn fixed64(&mut self, field: u32, v: u64) -> &mut Msg {
        self.tag(field, FIXED64);
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }

    /// A string field.
    pub fn string(&mut self, field: u32, s: &str) -> &mut Msg {
        self.tag(field, LEN);
        put_var(&mut self.buf, s.len() as u64);
        self.buf.extend_from_slice(s.as_bytes());
        self
    }

    /// A nested message field written by `f`.
    pub fn nested(&mut self, field: u32, f: impl FnOnce(&mut Msg)) -> &mut Msg {
        self.tag(field, LEN);
        let at = self.buf.len();
        f(self);
        let len = (self.buf.len() - at) as u64;
        let mut head = Vec::with_capacity(5);
        put_var(&mut head, len);
        self.buf.splice(at..at, head);
        self
    }

    /// Clears the message for reuse.
    pub fn clear(&mut self) {
        self.buf.clear();
    }
}

/// Appends `packet` to `out` as one `Trace.packet` record.
pub fn frame_packet(out: &mut Vec<u8>, packet: &Msg) {
    put_var(out, u64::from(field::TRACE_PACKET << 3 | LEN));
    put_var(out, packet.buf.len() as u64);
    out.extend_from_slice(&packet.buf);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_encode_as_protobuf_wire_format() {
        let mut m = Msg::default();
        m.uint(1, 300).int(2, -1).string(3, "ab").fixed64(4, 1);
        m.nested(5, |n| {
            n.uint(1, 1);
        });
        let mut expect = vec![0x08, 0xac, 0x02, 0x10];
        expect.extend([0xff; 9]);
        expect.push(0x01);
        expect.extend([0x1a, 2, b'a', b'b', 0x21, 1, 0, 0, 0, 0, 0, 0, 0]);
        expect.extend([0x2a, 2, 0x08, 0x01]);
        assert_eq!(m.buf, expect);
        let mut out = Vec::new();
        frame_packet(&mut out, &m);
        assert_eq!(&out[..2], &[0x0a, expect.len() as u8]);
    }
}
