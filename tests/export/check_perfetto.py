#!/usr/bin/env python3
"""Decodes a Perfetto trace with Python protobuf and the TrackEvent schema of the `perfetto`
wheel (perfetto.protos.perfetto.trace.perfetto_trace_pb2), checks its structure and prints what
it holds as JSON.

usage: check_perfetto.py FILE [--cut BYTES]

The file is read as Perfetto's trace processor reads it: a sequence of `Trace.packet` records
(field 1, length-delimited). With --cut only the first BYTES bytes are read, as for a trace cut
off mid-file: every complete packet must decode, the incomplete tail is dropped.

Checks: every track_uuid is declared by a TrackDescriptor before use; counter tracks have
unit UNIT_SIZE_BYTES; SLICE_BEGIN/SLICE_END balance per track and never go below zero;
timestamps never decrease within a packet sequence; an interned name id is defined on its
sequence before use; the first packet of a sequence clears incremental state; each flow id
joins exactly two events; process pids are unique.

Output: {"packets", "complete_bytes", "processes": {pid: name}, "counters": {track name:
[[ts, value], ...]}, "slices": {track name: count}, "instants": {track name: [names]},
"flows": count}. Counter and slice names are prefixed with the process's pid (`<pid>/<name>`).
"""
import json
import sys

try:
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
except ImportError as e:  # the test names the missing package
    print(f"missing Python package for the Perfetto test ({e}); pip install protobuf perfetto",
          file=sys.stderr)
    sys.exit(3)


def varint(b, i):
    v, shift = 0, 0
    while True:
        if i >= len(b):
            return None, i
        x = b[i]
        i += 1
        v |= (x & 0x7F) << shift
        if x < 0x80:
            return v, i
        shift += 7


def packets(data):
    i = 0
    while i < len(data):
        tag, j = varint(data, i)
        if tag is None:
            return i
        if tag != 0x0A:
            raise SystemExit(f"byte {i}: record tag {tag:#x} is not Trace.packet")
        n, j = varint(data, j)
        if n is None or j + n > len(data):
            return i
        p = pb.TracePacket()
        p.ParseFromString(data[j:j + n])
        yield p
        i = j + n
    return i


def fail(msg):
    print(msg, file=sys.stderr)
    sys.exit(1)


def main():
    path = sys.argv[1]
    data = open(path, "rb").read()
    if "--cut" in sys.argv:
        data = data[:int(sys.argv[sys.argv.index("--cut") + 1])]
    tracks = {}       # uuid -> (name, is_counter, parent)
    proc_of = {}      # uuid -> pid of its process track
    processes = {}
    depth = {}
    last_ts = {}
    names = {}        # seq -> {iid: name}
    seen_seq = set()
    counters, slices, instants, flows = {}, {}, {}, {}
    n = 0
    gen = packets(data)
    complete = 0
    while True:
        try:
            p = next(gen)
        except StopIteration as stop:
            complete = stop.value if stop.value is not None else len(data)
            break
        n += 1
        seq = p.trusted_packet_sequence_id
        if seq not in seen_seq:
            seen_seq.add(seq)
            if not p.sequence_flags & pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED:
                fail(f"packet {n}: first packet of sequence {seq} does not clear incremental state")
            names[seq] = {}
        for en in p.interned_data.event_names:
            if en.iid == 0:
                fail(f"packet {n}: interned name id 0")
            names[seq][en.iid] = en.name
        if p.HasField("track_descriptor"):
            td = p.track_descriptor
            if td.uuid in tracks:
                fail(f"packet {n}: track {td.uuid} declared twice")
            if td.HasField("process"):
                pid = td.process.pid
                if pid in processes:
                    fail(f"packet {n}: pid {pid} used by two processes")
                processes[pid] = td.process.process_name
                proc_of[td.uuid] = pid
                tracks[td.uuid] = (td.process.process_name, False)
            else:
                if td.parent_uuid not in tracks:
                    fail(f"packet {n}: track {td.uuid} has undeclared parent {td.parent_uuid}")
                proc_of[td.uuid] = proc_of.get(td.parent_uuid)
                is_counter = td.HasField("counter")
                if is_counter and td.counter.unit != pb.CounterDescriptor.UNIT_SIZE_BYTES:
                    fail(f"packet {n}: counter track {td.name} not in bytes")
                tracks[td.uuid] = (f"{proc_of[td.uuid]}/{td.name}", is_counter)
        if not p.HasField("track_event"):
            continue
        te = p.track_event
        if te.track_uuid not in tracks:
            fail(f"packet {n}: track {te.track_uuid} used before it is declared")
        if p.timestamp < last_ts.get(seq, 0):
            fail(f"packet {n}: timestamp goes back on sequence {seq}")
        last_ts[seq] = p.timestamp
        tname, is_counter = tracks[te.track_uuid]
        name = te.name
        if te.name_iid:
            if te.name_iid not in names[seq]:
                fail(f"packet {n}: name id {te.name_iid} not interned on sequence {seq}")
            if not p.sequence_flags & pb.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE:
                fail(f"packet {n}: interned name without SEQ_NEEDS_INCREMENTAL_STATE")
            name = names[seq][te.name_iid]
        for f in te.flow_ids:
            flows[f] = flows.get(f, 0) + 1
        t = te.type
        if t == pb.TrackEvent.TYPE_COUNTER:
            if not is_counter:
                fail(f"packet {n}: counter value on slice track {tname}")
            counters.setdefault(tname, []).append([p.timestamp, te.counter_value])
        elif t == pb.TrackEvent.TYPE_SLICE_BEGIN:
            depth[te.track_uuid] = depth.get(te.track_uuid, 0) + 1
            slices[tname] = slices.get(tname, 0) + 1
        elif t == pb.TrackEvent.TYPE_SLICE_END:
            depth[te.track_uuid] = depth.get(te.track_uuid, 0) - 1
            if depth[te.track_uuid] < 0:
                fail(f"packet {n}: SLICE_END without a begin on {tname}")
        elif t == pb.TrackEvent.TYPE_INSTANT:
            instants.setdefault(tname, []).append(name)
        else:
            fail(f"packet {n}: event type {t}")
    if "--cut" not in sys.argv:
        open_tracks = [tracks[u][0] for u, d in depth.items() if d != 0]
        if open_tracks:
            fail(f"slices left open on {open_tracks}")
        odd = [f for f, c in flows.items() if c != 2]
        if odd:
            fail(f"flows {odd[:5]} do not join exactly two events")
    print(json.dumps({
        "packets": n,
        "complete_bytes": complete,
        "processes": processes,
        "counters": counters,
        "slices": slices,
        "instants": instants,
        "flows": len(flows),
    }))


if __name__ == "__main__":
    main()
