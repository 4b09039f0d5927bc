"""Blocks from before a collection window (issue 26 item 5) over the sim-npu stand-in, run under
`memscope run --collect-mode deferred`:

  A = alloc 1 MiB; B = alloc 2 MiB; free B            (before the first window)
  start(); C = alloc 3 MiB; free A; stop()            (window 1)
  free C; D = alloc 4 MiB                             (between the windows)
  start(); free D; E = alloc 5 MiB; free E; stop()    (window 2)

Usage: python history_job.py SIM_NPU_EXAMPLE_DIR
Prints `history_job: ok` at the end.
"""
import sys

sys.path.insert(0, sys.argv[1])
import memscope  # noqa: E402
import train  # noqa: E402

MiB = 1 << 20


def main():
    npu = train.Npu(train.find_sim_npu_dir())
    c = train.Counters()
    train.check(npu.aclInit(None), "aclInit")
    train.check(npu.aclrtSetDevice(0), "aclrtSetDevice")
    caching = train.CachingAllocator(npu, c, "ptaCaching", train.CACHING_SEGMENT)
    (a,) = caching.alloc(0, [1 * MiB])
    (b,) = caching.alloc(0, [2 * MiB])
    caching.free([b])
    memscope.start()
    (c3,) = caching.alloc(0, [3 * MiB])
    caching.free([a])
    memscope.stop()
    caching.free([c3])
    (d,) = caching.alloc(0, [4 * MiB])
    memscope.start()
    caching.free([d])
    (e,) = caching.alloc(0, [5 * MiB])
    caching.free([e])
    memscope.stop()
    print("history_job: ok")


if __name__ == "__main__":
    main()
