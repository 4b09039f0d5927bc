"""A job over the sim-npu stand-in that drives memscope's Python API (issue 12 tests).

Usage: python api_job.py SIM_NPU_EXAMPLE_DIR [--trace] [--stacks]
Prints one line `api_job: ok` at the end.
"""
import sys

sys.path.insert(0, sys.argv[1])
import memscope  # noqa: E402  (sets MSTX_INJECTION_PATH before the framework loads)
import train  # noqa: E402  (the sim-npu job's building blocks)

MiB = 1 << 20


def forward_block(caching):
    return caching.alloc(0, [2 * MiB])


def main():
    trace = "--trace" in sys.argv
    extra = {"call_stack": "python:8"} if "--stacks" in sys.argv else {}
    memscope.config(events="alloc,free,launch" + (",traceback" if trace else ""), level="op",
                    **extra)
    npu = train.Npu(train.find_sim_npu_dir())
    c = train.Counters()
    train.check(npu.aclInit(None), "aclInit")
    train.check(npu.aclrtSetDevice(0), "aclrtSetDevice")
    caching = train.CachingAllocator(npu, c, "ptaCaching", train.CACHING_SEGMENT)
    memscope.start()
    kept = []
    for step in range(1, 4):
        with memscope.describer(owner="model"):
            (a,) = forward_block(caching)
        with memscope.RecordFunction("optimizer"):
            (b,) = caching.alloc(0, [MiB])
        memscope.take_snapshot(name="step%d" % step)
        caching.free([a, b])
        memscope.step()
    with memscope.TakeSnapshot(0, "final"):
        kept.extend(caching.alloc(0, [4 * MiB]))
    memscope.describer(kept[0], owner="kept")
    caching.free(kept)
    memscope.stop()
    print("api_job: ok")


if __name__ == "__main__":
    main()
