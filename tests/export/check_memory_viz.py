#!/usr/bin/env python3
"""Checks a memory_viz snapshot pickle against what PyTorch's viewer needs.

usage: check_memory_viz.py FILE

1. Opcodes: every opcode is one the viewer's JavaScript unpickler (torch/utils/viz/MemoryViz.js,
   function unpickle) implements; PROTO is 2..4; LONG1 integers fit 8 bytes.
2. Structure: `segments` and `device_traces` as `torch.cuda.memory._snapshot()` writes them;
   frames are {filename: str, line: int, name: str}; `oom` entries carry `device_free`; every
   integer is within i64; when categories are used, "unknown" is one of them (the viewer's
   annotate_snapshot crashes otherwise: `snapshot.categores.push`).
3. Final state: each segment's blocks tile it exactly (torch.cuda._memory_viz.segsum's
   free + allocated == reserved), blocks are inside their segment.
4. Allocator State History: the viewer replays each device trace backwards from `segments`
   (MemoryView.simulate_memory) and draws the state at any event; at every event every block
   must lie in a segment (find_segment), a `free_requested` must find its block, a
   `segment_alloc` its segment. Forward, each `free_requested` names a live block.

Prints a JSON summary on success; exits 1 with the first violation otherwise.
"""
import bisect
import io
import json
import pickle
import pickletools
import sys

ALLOWED = {
    "PROTO", "FRAME", "STOP", "MARK", "EMPTY_DICT", "DICT", "SETITEM", "SETITEMS",
    "EMPTY_LIST", "LIST", "APPEND", "APPENDS", "EMPTY_TUPLE", "TUPLE", "TUPLE1", "TUPLE2",
    "TUPLE3", "BININT", "BININT1", "BININT2", "LONG1", "BINFLOAT", "NONE", "NEWTRUE",
    "NEWFALSE", "SHORT_BINUNICODE", "BINUNICODE", "MEMOIZE", "BINPUT", "LONG_BINPUT",
    "BINGET", "LONG_BINGET",
}
ACTIONS = {"alloc", "free_requested", "free_completed", "segment_alloc", "segment_free",
           "segment_map", "segment_unmap", "oom", "snapshot"}
I64 = (-(1 << 63), (1 << 63) - 1)


class Bad(Exception):
    pass


def need(cond, msg):
    if not cond:
        raise Bad(msg)


def check_opcodes(data):
    try:  # dis also checks the stack and memo discipline (MARKs, MEMOIZE/GET indices)
        pickletools.dis(data, out=io.StringIO())
    except Exception as e:
        raise Bad(f"pickletools.dis: {e}")
    ops = list(pickletools.genops(data))
    need(ops and ops[0][0].name == "PROTO", "the pickle does not start with PROTO")
    need(2 <= ops[0][1] <= 4, f"pickle protocol {ops[0][1]}: the viewer reads 2..4 only")
    gets = 0
    for op, arg, pos in ops:
        need(op.name in ALLOWED, f"opcode {op.name} at byte {pos} is not one the viewer reads")
        if op.name == "LONG1":
            need(I64[0] <= arg <= I64[1], f"LONG1 {arg} at byte {pos} is wider than 8 bytes")
        if op.name in ("BINGET", "LONG_BINGET"):
            gets += 1
    return len(ops), gets


def walk_ints(v, where):
    if isinstance(v, bool) or v is None or isinstance(v, (str, float)):
        return
    if isinstance(v, int):
        need(I64[0] <= v <= I64[1], f"{where}: integer {v} outside i64")
    elif isinstance(v, dict):
        for k, x in v.items():
            need(isinstance(k, str), f"{where}: key {k!r} is not a string")
            walk_ints(x, f"{where}.{k}")
    elif isinstance(v, (list, tuple)):
        for i, x in enumerate(v):
            walk_ints(x, f"{where}[{i}]")
    else:
        raise Bad(f"{where}: value of type {type(v).__name__} (the viewer reads no such type)")


def check_frames(frames, where):
    need(isinstance(frames, list), f"{where}: frames is not a list")
    for f in frames:
        need(isinstance(f, dict), f"{where}: frame is not a dict")
        need(isinstance(f.get("filename"), str), f"{where}: frame filename is not a string")
        need(isinstance(f.get("name"), str), f"{where}: frame name is not a string")
        need(isinstance(f.get("line"), int), f"{where}: frame line is not an int")


def annotate(snap):
    """The viewer's annotate_snapshot: elides free_requested+free_completed into 'free'."""
    categories = []
    traces = []
    for d, trace in enumerate(snap["device_traces"]):
        need(isinstance(trace, list), f"device_traces[{d}] is not a list")
        out = []
        for i, t in enumerate(trace):
            where = f"device_traces[{d}][{i}]"
            need(isinstance(t, dict), f"{where} is not a dict")
            need(t.get("action") in ACTIONS, f"{where}: action {t.get('action')!r}")
            for k in ("addr", "size", "stream"):
                need(isinstance(t.get(k), int), f"{where}: {k} is not an int")
            check_frames(t.get("frames", []), where)
            if t["action"] == "oom":
                need(isinstance(t.get("device_free"), int), f"{where}: oom without device_free")
            if "category" in t:
                need(isinstance(t["category"], str), f"{where}: category is not a string")
                if t["category"] not in categories:
                    categories.append(t["category"])
            e = dict(t)
            if e["action"] == "free_completed" and out and out[-1]["action"] == "free_requested" \
                    and out[-1]["addr"] == e["addr"]:
                out[-1]["action"] = "free"
                continue
            e["idx"] = i
            out.append(e)
        traces.append(out)
    if categories:
        need("unknown" in categories, "categories are used but none is 'unknown' (the viewer crashes)")
    return traces, categories


def final_state(snap):
    per_dev = {}
    for si, s in enumerate(snap["segments"]):
        where = f"segments[{si}]"
        for k in ("device", "address", "total_size", "stream"):
            need(isinstance(s.get(k), int), f"{where}: {k} is not an int")
        need(isinstance(s.get("blocks"), list), f"{where}: blocks is not a list")
        check_frames(s.get("frames", []), where)
        addr = s["address"]
        segs, blocks = per_dev.setdefault(s["device"], ({}, {}))
        need(addr not in segs, f"{where}: two segments at {addr:#x}")
        segs[addr] = s["total_size"]
        total = 0
        for bi, b in enumerate(s["blocks"]):
            bw = f"{where}.blocks[{bi}]"
            need(isinstance(b.get("size"), int) and b["size"] >= 0, f"{bw}: size")
            need(b.get("state") in ("active_allocated", "active_pending_free", "inactive"),
                 f"{bw}: state {b.get('state')!r}")
            need("frames" in b, f"{bw}: no frames (the viewer would read the file as legacy)")
            check_frames(b["frames"], bw)
            need(isinstance(b.get("requested_size"), int), f"{bw}: requested_size")
            if "address" in b:
                need(b["address"] == addr + total, f"{bw}: address is not where the tiling puts it")
            if b["state"] != "inactive":
                blocks[addr + total] = b["size"]
            total += b["size"]
        need(total == s["total_size"],
             f"{where}: blocks cover {total} of {s['total_size']} bytes (free + allocated != reserved)")
    return per_dev


class Segs:
    def __init__(self, segs):
        self.starts = sorted(segs)
        self.size = dict(segs)

    def find(self, addr):
        i = bisect.bisect_right(self.starts, addr) - 1
        if i >= 0 and addr < self.starts[i] + self.size[self.starts[i]]:
            return self.starts[i]
        return None

    def add(self, addr, size):
        need(addr not in self.size, f"segment {addr:#x} mapped twice")
        bisect.insort(self.starts, addr)
        self.size[addr] = size

    def remove(self, addr):
        need(addr in self.size, f"segment_alloc of {addr:#x}, which is not live there "
                                "(the viewer would unmap the wrong segment)")
        self.starts.remove(addr)
        return self.size.pop(addr)


def replay(device, trace, segs, blocks):
    """Backwards from the final state; every intermediate state must be drawable."""
    s = Segs(segs)
    live = dict(blocks)  # addr -> size
    for addr in live:
        need(s.find(addr) is not None, f"device {device}: final block {addr:#x} outside any segment")
    for e in reversed(trace):
        a, act = e["addr"], e["action"]
        where = f"device {device} event {e['idx']} ({act} {a:#x})"
        if act in ("free", "free_completed"):
            live[a] = e["size"]
            need(s.find(a) is not None, f"{where}: block outside any segment before it")
        elif act == "free_requested":
            need(a in live, f"{where}: free_requested of a block the viewer does not know")
        elif act == "alloc":
            live.pop(a, None)
        elif act == "segment_free":
            s.add(a, e["size"])
        elif act == "segment_alloc":
            size = s.remove(a)
            inside = [b for b in live if a <= b < a + size]
            need(not inside, f"{where}: blocks {[hex(b) for b in inside]} live before their segment")
    # forward from the start state: each free_requested names a live block
    fwd = dict(live)
    for e in trace:
        a, act = e["addr"], e["action"]
        if act == "alloc":
            fwd[a] = e["size"]
        elif act == "free_requested":
            need(a in fwd, f"device {device} event {e['idx']}: free_requested of a dead block {a:#x}")
        elif act in ("free", "free_completed"):
            fwd.pop(a, None)
    return len(trace)


def main():
    path = sys.argv[1]
    data = open(path, "rb").read()
    try:
        nops, gets = check_opcodes(data)
        snap = pickle.loads(data)
        need(isinstance(snap, dict), "top level is not a dict")
        need(isinstance(snap.get("segments"), list), "no segments list")
        need(isinstance(snap.get("device_traces"), list), "no device_traces list")
        walk_ints(snap, "snapshot")
        traces, categories = annotate(snap)
        state = final_state(snap)
        for d, trace in enumerate(traces):
            segs, blocks = state.get(d, ({}, {}))
            replay(d, trace, segs, blocks)
        for d in state:
            need(0 <= d < len(traces), f"segment on device {d} without a device_traces entry")
    except Bad as e:
        print(f"{path}: {e}", file=sys.stderr)
        sys.exit(1)
    print(json.dumps({
        "opcodes": nops,
        "memo_gets": gets,
        "entries": [len(t) for t in snap["device_traces"]],
        "actions": sorted({t["action"] for tr in snap["device_traces"] for t in tr}),
        "segments": len(snap["segments"]),
        "categories": categories,
        "allocator_settings": snap.get("allocator_settings", {}),
        "frames": sum(len(t.get("frames", [])) for tr in snap["device_traces"] for t in tr),
    }))


if __name__ == "__main__":
    main()
