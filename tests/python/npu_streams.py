"""Issue 36: the sim-npu demo's Npu wrapper (examples/sim-npu/train.py) calls the ACL stream
and event functions: one stream, one event, record / wait on the default stream / the three
synchronisations, then the destroys. argv[1]: the sim-npu install directory; argv[2] `watch`:
then a watch dump of device memory through the probe (memscope_py_watch_dump), whose own
aclrtSynchronizeDevice is not the job's."""
import ctypes
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../../examples/sim-npu"))
import train  # noqa: E402

npu = train.Npu(sys.argv[1])
s, e = ctypes.c_void_p(), ctypes.c_void_p()
for rc, what in [
    (npu.aclrtSetDevice(0), "aclrtSetDevice"),
    (npu.aclrtCreateStream(ctypes.byref(s)), "aclrtCreateStream"),
    (npu.aclrtCreateEvent(ctypes.byref(e)), "aclrtCreateEvent"),
    (npu.aclrtRecordEvent(e, s), "aclrtRecordEvent"),
    (npu.aclrtStreamWaitEvent(None, e), "aclrtStreamWaitEvent"),
    (npu.aclrtSynchronizeStream(s), "aclrtSynchronizeStream"),
    (npu.aclrtSynchronizeEvent(e), "aclrtSynchronizeEvent"),
    (npu.aclrtSynchronizeDevice(), "aclrtSynchronizeDevice"),
    (npu.aclrtDestroyEvent(e), "aclrtDestroyEvent"),
    (npu.aclrtDestroyStream(s), "aclrtDestroyStream"),
]:
    if rc != 0:
        sys.exit("%s returned %d" % (what, rc))
if sys.argv[2:] == ["watch"]:
    buf = ctypes.c_void_p()
    if npu.aclrtMalloc(ctypes.byref(buf), 64, 0) != 0:
        sys.exit("aclrtMalloc failed")
    dump = ctypes.CDLL(None).memscope_py_watch_dump
    dump.restype = ctypes.c_int
    dump.argtypes = [ctypes.c_char_p, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_uint64,
                     ctypes.c_int]
    print("watch %d" % dump(b"probe_watch", 0, buf.value, 64, 0))
print("s 0x%x\ne 0x%x\nstreams ok" % (s.value, e.value))
