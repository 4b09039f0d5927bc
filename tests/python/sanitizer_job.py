"""msMemScope's ``enable_npu_sanitizer()`` (issue 36): without torch_npu it says so in one line
and returns False; with the torch_npu-shaped stand-in (tests/python/fake_torch_npu, added to
sys.path by argv[1]) it enables the sanitizer and hands every well-formed ``sanitizer-op:`` mark
made through ``torch_npu.npu.mstx.mark`` to its kernel-launch handler; a malformed mark is one
warning naming the field and is still written; a mark made from C (``mstxMarkA``) reaches the
handler with its stream. Prints ``sanitizer_job: ok``."""
import sys
import warnings

import msmemscope

assert msmemscope.enable_npu_sanitizer() is False  # no torch_npu yet
sys.path.insert(0, sys.argv[1])
sys.path.insert(0, sys.argv[2])  # sim-npu's python/ (the mstx module)
import torch_npu.npu as npu  # noqa: E402
import torch_npu.npu._sanitizer as san  # noqa: E402

assert msmemscope.enable_npu_sanitizer() is True and san.enabled == [True]
msmemscope.start()
op = ("sanitizer-op: name=my_ext.my_fused_op;read=input_a:0x7f00:1024,input_b:32516:512;"
      "write=output:0x7f08:2048,input_a:0x7f00:1024")
npu.mstx.mark(op, npu.Stream(5))
npu.mstx.mark("sanitizer-op: name=ext.copy;read=src:4096:64;write=dst:8192:64")  # current
npu.mstx.mark("an ordinary mark")
bad = [
    ("sanitizer-op: read=a:1:2", "name: missing"),
    ("sanitizer-op: name=x;read=a:0xZZ:2", "read item 1 address"),
    ("sanitizer-op: name=x;write=a:1", "write item 1"),
    ("sanitizer-op: name=x;read=" + "a" * 40 + ":1:2", "alias"),
    ("sanitizer-op: name=x;size=3", "unknown field"),
    ("sanitizer-op: name=x", "accesses nothing"),
    ("sanitizer-op: name=x;name=y;read=a:1:2", "name: given twice"),
    ("sanitizer-op: name=x;read=a:1:2;" + "x" * 1100, "message"),
]
for msg, field in bad:
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        npu.mstx.mark(msg)
    assert len(w) == 1 and field in str(w[0].message), (msg, [str(x.message) for x in w])
# the sanitizer's errors surface as its own exception, as for an operator it dispatches
san.answer.append("unsynchronized access")
try:
    npu.mstx.mark("sanitizer-op: name=racy;write=o:64:8")
except san.NPUSanitizerErrors as e:
    assert e.errors == ["unsynchronized access"]
else:
    raise SystemExit("the handler's errors were not raised")
# a mark made from C (a C++ extension's mstxMarkA) reaches the handler with its aclrtStream
san.answer.clear()
import ctypes  # noqa: E402
import os  # noqa: E402
front = ctypes.CDLL(os.path.join(os.environ["SIM_NPU_DIR"], "lib64", "libms_tools_ext.so"))
front.mstxMarkA.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
front.mstxMarkA(b"sanitizer-op: name=cxx.ext_op;read=x:0x100:16;write=y:0x200:16", 0x1234)
front.mstxMarkA(b"an ordinary C mark", None)
msmemscope.stop()
assert san.calls[0] == (5, [32516], [0x7f00, 0x7f08], [0x7f08], "my_ext.my_fused_op",
                        {0x7f00: ["input_a"], 0x7f08: ["output"], 32516: ["input_b"]}), san.calls[0]
assert san.calls[1] == (7, [4096], [8192], [8192], "ext.copy",
                        {4096: ["src"], 8192: ["dst"]}), san.calls[1]
assert san.calls[3] == (0x1234, [0x100], [0x200], [0x200], "cxx.ext_op",
                        {0x100: ["x"], 0x200: ["y"]}), san.calls[3:]
assert len(san.calls) == 4, san.calls
print("sanitizer_job: ok")
