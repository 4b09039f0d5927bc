#!/usr/bin/env python3
"""Two streams over the sim-npu stand-ins, with the classic multi-stream bugs (issue 36).

A data-loading stream copies each batch into a block of the caching pool while the compute
stream runs the model on the previous one; custom operators report what they read and write
with msMemScope's ``sanitizer-op:`` msTX marks, made on their stream (``mstxMarkA``). Per step:

  copy stream     h2d_copy   writes batch                     (a fresh pool block)
  compute stream  matmul     reads batch and weight, writes out
  compute stream  relu_      reads and writes out (in place)
  host            frees batch back to the pool

As written it has two bugs, the ones the race check finds:
  * matmul reads the batch with no wait for the copy (read-after-write across streams);
  * the batch is freed while matmul may still read it, and the pool hands the block to the
    next step's copy on the other stream (a freed block reused while in use).
``--fixed`` orders them: the copy stream records an event that the compute stream waits for,
and the compute stream is synchronised before the batch goes back to the pool.

Usage: python3 two_streams.py [--steps N] [--fixed]
"""
import argparse
import ctypes
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train  # noqa: E402  (the Npu wrapper and the caching allocator of the demo)

BATCH = 1 << 20
WEIGHT = 4 << 20


def main(argv=None):
    p = argparse.ArgumentParser(description="Two streams on the sim-npu stand-ins.")
    p.add_argument("--steps", type=int, default=3, help="steps (default 3)")
    p.add_argument("--fixed", action="store_true", help="add the missing synchronisation")
    args = p.parse_args(argv)
    npu = train.Npu(train.find_sim_npu_dir())
    mark = npu.mstx.mstxMarkA
    mark.restype, mark.argtypes = None, [ctypes.c_char_p, ctypes.c_void_p]
    train.check(npu.aclInit(None), "aclInit")
    train.check(npu.aclrtSetDevice(0), "aclrtSetDevice")
    copy, compute, copied = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
    train.check(npu.aclrtCreateStream(ctypes.byref(copy)), "aclrtCreateStream")
    train.check(npu.aclrtCreateStream(ctypes.byref(compute)), "aclrtCreateStream")
    train.check(npu.aclrtCreateEvent(ctypes.byref(copied)), "aclrtCreateEvent")
    pool = train.CachingAllocator(npu, train.Counters(), "ptaCaching", 32 << 20)
    weight, out = pool.alloc(0, [WEIGHT, BATCH])

    def op(stream, name, read=(), write=()):
        def items(ts):
            return ",".join("%s:0x%x:%d" % t for t in ts)
        fields = ["name=" + name]
        if read:
            fields.append("read=" + items(read))
        if write:
            fields.append("write=" + items(write))
        mark(("sanitizer-op: " + ";".join(fields)).encode(), stream)

    for _ in range(args.steps):
        (batch,) = pool.alloc(0, [BATCH])
        op(copy, "h2d_copy", write=[("batch", batch, BATCH)])
        if args.fixed:
            train.check(npu.aclrtRecordEvent(copied, copy), "aclrtRecordEvent")
            train.check(npu.aclrtStreamWaitEvent(compute, copied), "aclrtStreamWaitEvent")
        op(compute, "matmul", read=[("batch", batch, BATCH), ("weight", weight, WEIGHT)],
           write=[("out", out, BATCH)])
        op(compute, "relu_", read=[("self", out, BATCH)], write=[("self", out, BATCH)])
        if args.fixed:
            train.check(npu.aclrtSynchronizeStream(compute), "aclrtSynchronizeStream")
        pool.free([batch])
    train.check(npu.aclrtSynchronizeDevice(), "aclrtSynchronizeDevice")
    pool.free([weight, out])
    pool.empty_cache()
    train.check(npu.aclrtDestroyEvent(copied), "aclrtDestroyEvent")
    train.check(npu.aclrtDestroyStream(compute), "aclrtDestroyStream")
    train.check(npu.aclrtDestroyStream(copy), "aclrtDestroyStream")
    train.check(npu.aclrtResetDevice(0), "aclrtResetDevice")
    train.check(npu.aclFinalize(), "aclFinalize")
    print("two_streams.py: steps=%d %s" % (args.steps, "fixed" if args.fixed else "racy"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
