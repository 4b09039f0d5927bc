"""msMemScope users' scripts, as they call its API (issue 27 tests).

Usage: python api_parity.py MODE SIM_NPU_EXAMPLE_DIR
  config    config(analysis="decompose", output_path="./output") then a window of PTA blocks
            (run under `memscope run`: the settings apply unless a flag set them explicitly)
  describe  describer(owner="x").__enter__() ... describer(owner="x").__exit__() on other
            objects, with a level opened inside it; an __exit__ of an owner never entered
  tracer    tracer.start()/stop() and RecordFunction with no start() window; RecordFunction
            with neither a window nor the tracer
Prints `api_parity: ok` at the end; `blocks:` lines name the blocks' addresses.
"""
import sys
import warnings

sys.path.insert(0, sys.argv[2])
import memscope  # noqa: E402

MiB = 1 << 20
mode = sys.argv[1]

if mode == "config":
    memscope.config(analysis="decompose", output_path="./output")
import train  # noqa: E402


def pool():
    npu = train.Npu(train.find_sim_npu_dir())
    c = train.Counters()
    train.check(npu.aclInit(None), "aclInit")
    train.check(npu.aclrtSetDevice(0), "aclrtSetDevice")
    return train.CachingAllocator(npu, c, "ptaCaching", train.CACHING_SEGMENT)


def work(n):
    return sum(range(n))


if mode == "config":
    caching = pool()
    memscope.start()
    with memscope.describer(owner="model"):
        (a,) = caching.alloc(0, [MiB])
    memscope.step()
    caching.free([a])
    memscope.stop()
elif mode == "describe":
    caching = pool()
    memscope.start()
    memscope.describer(owner="x").__enter__()
    (a,) = caching.alloc(0, [MiB])
    with memscope.describer(owner="inner"):
        memscope.describer(owner="x").__exit__(None, None, None)
        (b,) = caching.alloc(0, [2 * MiB])
    (c,) = caching.alloc(0, [3 * MiB])
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        memscope.describer(owner="never").__exit__(None, None, None)
    assert any("no describer with this owner" in str(x.message) for x in w), w
    caching.free([a, b, c])
    memscope.stop()
elif mode == "tracer":
    memscope.tracer.start()
    work(10)
    with memscope.RecordFunction("block"):
        work(20)
    memscope.tracer.stop()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with memscope.RecordFunction("nowhere"):
            work(30)
    assert any("not recorded" in str(x.message) and "tracer.start()" in str(x.message)
               for x in w), [str(x.message) for x in w]
else:
    raise SystemExit("unknown mode %s" % mode)
print("api_parity: ok")
