"""Bad input to every memscope API function raises ValueError/TypeError naming the argument,
and nothing recorded before or after is lost (issue 12 tests).

Usage: python api_bad_input.py SIM_NPU_EXAMPLE_DIR
"""
import os
import sys
import warnings

sys.path.insert(0, sys.argv[1])
import memscope  # noqa: E402
import train  # noqa: E402

checks = 0


def expect(exc, needle, f, *a, **kw):
    global checks
    try:
        f(*a, **kw)
    except exc as e:
        assert needle in str(e), "%s: %r does not name %r" % (f, str(e), needle)
        checks += 1
        return
    except Exception as e:  # noqa: BLE001
        raise AssertionError("%s(%r, %r) raised %r, expected %s" % (f, a, kw, e, exc.__name__))
    raise AssertionError("%s(%r, %r) did not raise %s" % (f, a, kw, exc.__name__))


npu = train.Npu(train.find_sim_npu_dir())
c = train.Counters()
train.check(npu.aclInit(None), "aclInit")
train.check(npu.aclrtSetDevice(0), "aclrtSetDevice")
caching = train.CachingAllocator(npu, c, "ptaCaching", train.CACHING_SEGMENT)

# config()
expect(ValueError, "at least one", memscope.config)
expect(ValueError, "events", memscope.config, events="allocs")
expect(ValueError, "level", memscope.config, level="ops")
expect(ValueError, "call_stack", memscope.config, call_stack="c:00")
expect(ValueError, "analysis", memscope.config, analysis="leaks, decompose")
expect(ValueError, "device", memscope.config, device="npu:32")
expect(ValueError, "format", memscope.config, format="xlsx")
expect(ValueError, "output_path", memscope.config, output_path="-bad")
expect(ValueError, "steps", memscope.config, steps="1")
expect(ValueError, "adapters", memscope.config, adapters="bogus")
expect(ValueError, "watch", memscope.config, watch="no-end-operator")
expect(ValueError, "length", memscope.watcher.watch, 4096, length=0, name="w")
expect(ValueError, "name", memscope.watcher.watch, 4096, length=8, name="")
expect(TypeError, "watch", memscope.watcher.watch, "not a tensor", name="w")
expect(TypeError, "events", memscope.config, events=3)
memscope.config(events="alloc,free")

memscope.start()
(first,) = caching.alloc(0, [1 << 20])
memscope.step()

# describer
expect(TypeError, "owner", memscope.describer)
expect(TypeError, "owner", memscope.describer, owner=5)
expect(ValueError, "owner", memscope.describer, owner="")
expect(ValueError, "owner", memscope.describer, owner="x" * 129)
expect(ValueError, "owner", memscope.describer, owner="=cmd")
expect(TypeError, "obj", memscope.describer, 1.5, owner="x")
expect(ValueError, "address", memscope.describer, -1, owner="x")
# RecordFunction
expect(TypeError, "name", memscope.RecordFunction, None)
expect(ValueError, "name", memscope.RecordFunction, "n" * 200)
expect(TypeError, "callable", memscope.RecordFunction("ok"), 5)
# take_snapshot / TakeSnapshot
expect(TypeError, "device_mask", memscope.take_snapshot, device_mask="0")
expect(TypeError, "device_mask", memscope.take_snapshot, device_mask=[0, "1"])
expect(ValueError, "device_mask", memscope.take_snapshot, device_mask=99)
expect(TypeError, "name", memscope.take_snapshot, name=7)
expect(ValueError, "name", memscope.take_snapshot, name="")
expect(TypeError, "device_mask", memscope.TakeSnapshot, 1.0)
expect(ValueError, "name", memscope.TakeSnapshot, None, "")
# device_mask only filters: device 0 is current, so no snapshot of it for mask [5]
assert memscope.take_snapshot(device_mask=[5], name="skipped") is False
checks += 1
# analyzer
an = memscope.analyzer
expect(ValueError, "Unknown analyzer type", an.analyze, "nope")
expect(TypeError, "analyzer_type", an.get_analyzer_config, 3)
expect(TypeError, "input_path", an.check_leaks, 5, "m", 0)
expect(FileNotFoundError, "input_path", an.check_leaks, "/no/such.csv", "m", 0)
bad = os.path.abspath("bad.txt")
open(bad, "w").close()
expect(ValueError, "input_path", an.check_leaks, bad, "m", 0)
csv_path = os.path.abspath("x.csv")
open(csv_path, "w").close()
expect(ValueError, "mstx_info", an.check_leaks, csv_path, " ", 0)
expect(TypeError, "mstx_info", an.check_leaks, csv_path, 3, 0)
expect(ValueError, "start_index", an.check_leaks, csv_path, "m", -1)
expect(ValueError, "mem_size", an.check_inefficient, csv_path, mem_size=-1)
expect(ValueError, "inefficient_type", an.check_inefficient, csv_path, inefficient_type=["x"])
expect(ValueError, "idle_threshold", an.check_inefficient, csv_path, idle_threshold=0)
expect(TypeError, "idle_threshold", an.check_inefficient, csv_path, idle_threshold="1")
# step outside a window warns (msMemScope: silently ignored)
memscope.stop()
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    memscope.step()
assert any("step()" in str(x.message) for x in w), w
checks += 1
memscope.start()
caching.free([first])
memscope.stop()
print("bad_input: %d checks ok" % checks)
