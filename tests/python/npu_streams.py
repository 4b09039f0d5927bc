"""Issue 36: the sim-npu demo's Npu wrapper (examples/sim-npu/train.py) calls the ACL stream
and event functions: one stream, one event, record / wait on the default stream / the three
synchronisations, then the destroys. argv[1]: the sim-npu install directory."""
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
print("s 0x%x\ne 0x%x\nstreams ok" % (s.value, e.value))
