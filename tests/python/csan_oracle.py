"""The oracle of memscope's race check (tests/tests/races.rs): PyTorch's CUDA Sanitizer.

Reads sequences of stream operations, one JSON list per line (file named by argv[1]), feeds
each to a fresh torch.cuda._sanitizer.EventHandler method by method (no CUDA needed) and
prints, per sequence, one JSON line: the sorted conflicts [current launch's sequence number,
previous access's sequence number, data pointer, "R"/"W" of the current access, "R"/"W" of the
previous one].
"""

import json
import logging
import sys

from torch.cuda._sanitizer import AccessType, EventHandler

# The handler logs every backfilled stream or event at INFO; keep the output to verdicts.
logging.getLogger("torch.cuda._sanitizer").setLevel(logging.WARNING)


def kind(access):
    return "R" if access.type is AccessType.READ else "W"


def run(ops):
    h = EventHandler()
    found = []
    for op in ops:
        k = op["op"]
        if k == "launch":
            written = set(op["rw"]) | set(op["out"])
            read_only = set(op["ro"]) - written
            aliases = {p: [] for p in read_only | written}
            errs = h._handle_kernel_launch(
                op["stream"], read_only, written, set(op["out"]), op["name"], aliases
            )
            for e in errs:
                c, p = e.current_access, e.previous_access
                found.append([c.seq_num, p.seq_num, e.data_ptr, kind(c), kind(p)])
        elif k == "stream_create":
            h._handle_stream_creation(op["stream"])
        elif k == "event_create":
            h._handle_event_creation(op["event"])
        elif k == "event_delete":
            h._handle_event_deletion(op["event"])
        elif k == "record":
            h._handle_event_record(op["event"], op["stream"])
        elif k == "wait":
            h._handle_event_wait(op["event"], op["stream"])
        elif k == "stream_sync":
            h._handle_stream_synchronization(op["stream"])
        elif k == "event_sync":
            h._handle_event_synchronization(op["event"])
        elif k == "device_sync":
            h._handle_device_synchronization()
        elif k == "alloc":
            h._handle_memory_allocation(op["ptr"])
        elif k == "free":
            h._handle_memory_deallocation(op["ptr"])
        else:
            raise ValueError(f"unknown op {k!r}")
    return sorted(found)


def main():
    out = sys.stdout
    with open(sys.argv[1]) as f:
        for line in f:
            out.write(json.dumps(run(json.loads(line))) + "\n")


if __name__ == "__main__":
    main()
