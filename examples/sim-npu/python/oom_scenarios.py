"""Out-of-memory scenarios of the sim-npu caching allocator (`train.py --oom KIND`).

Each scenario runs on device 0 with its own caching allocator (domain ptaCaching) that, like
torch_npu's for large blocks, reserves a segment of exactly the rounded request size, and caps
device memory (SIM_NPU_HBM_LIMIT) at what the process already holds plus the scenario's budget:

  fragmentation   one 390 MiB segment filled with 64 MiB and 1 MiB blocks in turn (6 of
                  each); the 64 MiB blocks are freed: 384 MiB free in 6 extents of 64 MiB.
                  A 96 MiB request finds no extent and the driver refuses a new segment.
  shortage        the same segment holds 5 x (64 + 1) MiB contiguously: one 65 MiB extent
                  free; the 96 MiB request fails and the device has 32 MiB left.
  other-process   as shortage, but 128 MiB of the device are held by "other processes"
                  (SIM_NPU_OTHER_PROCESS_BYTES): without them the request would fit.

The request raises MemoryError (train.py then exits 1 with the driver's message), as a real
job dies on an NPU OOM.
"""

import os

MiB = 1 << 20
SEGMENT = 390 * MiB
DEVICE_SPARE = 32 * MiB
OTHERS = 128 * MiB
KINDS = ("fragmentation", "shortage", "other-process")


def run(kind, npu, allocator_cls, counters):
    """Runs scenario `kind`; raises MemoryError at its OOM."""
    if kind not in KINDS:
        raise ValueError("unknown OOM scenario %r (one of %s)" % (kind, ", ".join(KINDS)))
    dev = 0
    others = OTHERS if kind == "other-process" else 0
    held = npu.sim_hal_live_bytes(dev)
    os.environ["SIM_NPU_OTHER_PROCESS_BYTES"] = str(others)
    os.environ["SIM_NPU_HBM_LIMIT"] = str(held + SEGMENT + DEVICE_SPARE + others)
    pool = allocator_cls(npu, counters, "ptaCaching", 0)
    pool._reserve(dev, SEGMENT)
    big = []
    pairs = 6 if kind == "fragmentation" else 5
    for _ in range(pairs):
        big += pool.alloc(dev, [64 * MiB])
        pool.alloc(dev, [1 * MiB])
    if kind == "fragmentation":
        pool.free(big)
    print("train.py: OOM scenario %s: asking 96 MiB" % kind)
    pool.alloc(dev, [96 * MiB])
