"""Python stacks on every row (issue 13): allocations from a known function, make_blocks(),
through the sim-npu caching pool (PTA rows via msTX), the driver (HAL rows) and bytearray
(HOST rows), on the main thread, on a thread named worker-7 and in a multiprocessing child.

Usage: stacks_job.py [--thread] [--spawn METHOD]
Prints "make_blocks line: N" (the line of its bytearray call) for the test to check against.
"""

import ctypes
import multiprocessing
import os
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "sim-npu"))
import train  # noqa: E402  (the demo's ctypes stand-ins: Npu, CachingAllocator)

MEMTYPE_DEVICE = 1 << 10


def make_blocks(npu, pool):
    (blk,) = pool.alloc(0, [3 << 20])                     # PTA MALLOC (through train.py)
    ptr = ctypes.c_void_p()
    npu.halMemAlloc(ctypes.byref(ptr), 5 << 20, MEMTYPE_DEVICE)  # HAL MALLOC
    buf = bytearray(7_000_003)                             # HOST MALLOC
    npu.halMemFree(ptr)
    pool.free([blk])
    return len(buf)


def job():
    npu = train.Npu(train.find_sim_npu_dir())
    npu.aclInit(None)
    npu.aclrtSetDevice(0)
    pool = train.CachingAllocator(npu, train.Counters(), "ptaCaching", 64 << 20)
    make_blocks(npu, pool)


def main():
    if "--thread" in sys.argv:
        t = threading.Thread(target=job, name="worker-7")
        t.start()
        t.join()
    elif "--spawn" in sys.argv:
        ctx = multiprocessing.get_context(sys.argv[sys.argv.index("--spawn") + 1])
        p = ctx.Process(target=job)
        p.start()
        p.join()
        print("child pid: %d exit %s" % (p.pid, p.exitcode))
    else:
        job()


if __name__ == "__main__":
    main()
