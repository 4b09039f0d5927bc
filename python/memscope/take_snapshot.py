"""``memscope.take_snapshot`` and ``TakeSnapshot`` (behaviour spec §3): SNAPSHOT rows whose
Attr keys are the seed's ``total_mem, free_mem, reserved, peak_reserved, allocated,
peak_allocated, device_utilization, pt_utilization``.

Where the figures come from, first that works:

1. ``torch_npu`` (when importable): ``current_device``, ``mem_get_info``, ``memory_reserved``,
   ``max_memory_reserved``, ``memory_allocated``, ``max_memory_allocated`` — all six.
2. The ACL runtime in the process (``aclrtGetDevice``/``aclrtGetMemInfo`` in the global scope,
   as with the sim-npu stand-in): device, total and free.
3. ``torch`` on CPU: the host's total and available memory.

Figures the framework did not give are filled by the collector from memscope's own PTA pool
accounting of that device (reserved = bytes the pool holds, allocated = bytes handed out, and
their maxima so far), so a snapshot is complete even without torch_npu.
"""

import ctypes
import functools
import sys

from . import _text
from ._session import session

_UNKNOWN_DEVICE = 0xFFFFFFFF
_ACL_HBM_MEM = 1


def _from_torch_npu():
    try:
        import torch_npu  # noqa: F401  (registers torch.npu)
        import torch
    except ImportError:
        return None
    npu = torch.npu
    d = npu.current_device()
    free, total = npu.mem_get_info(d)
    vals = [total, free, npu.memory_reserved(d), npu.max_memory_reserved(d),
            npu.memory_allocated(d), npu.max_memory_allocated(d)]
    return d, 0x3F, vals


def _from_acl():
    try:
        g = ctypes.CDLL(None)
        get_dev, get_mem = g.aclrtGetDevice, g.aclrtGetMemInfo
    except (OSError, AttributeError):
        return None
    get_dev.argtypes = [ctypes.POINTER(ctypes.c_int32)]
    get_dev.restype = ctypes.c_int
    get_mem.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_size_t),
                        ctypes.POINTER(ctypes.c_size_t)]
    get_mem.restype = ctypes.c_int
    dev = ctypes.c_int32(0)
    d = dev.value if get_dev(ctypes.byref(dev)) == 0 else 0
    free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
    if get_mem(_ACL_HBM_MEM, ctypes.byref(free), ctypes.byref(total)) != 0:
        return d, 0, [0] * 6
    return d, 0x3, [total.value, free.value, 0, 0, 0, 0]


def _from_host():
    if "torch" not in sys.modules:
        return None
    info = {}
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                k, v = line.split(":", 1)
                info[k] = int(v.split()[0]) * 1024
    except (OSError, ValueError):
        return None
    return 0, 0x3, [info.get("MemTotal", 0), info.get("MemAvailable", 0), 0, 0, 0, 0]


def _figures():
    for f in (_from_torch_npu, _from_acl, _from_host):
        r = f()
        if r is not None:
            return r
    return None, 0, [0] * 6


def _mask(device_mask):
    if device_mask is None:
        return None
    if isinstance(device_mask, bool):
        items = None
    elif isinstance(device_mask, int):
        items = [device_mask]
    elif isinstance(device_mask, (list, tuple)):
        items = list(device_mask)
    else:
        items = None
    if items is None:
        raise TypeError("memscope.take_snapshot(device_mask=...): expected None, an int, or a "
                        "list/tuple of ints, not %s" % type(device_mask).__name__)
    for d in items:
        if isinstance(d, bool) or not isinstance(d, int):
            raise TypeError("memscope.take_snapshot(device_mask=...): device ids are ints, not %s"
                            % type(d).__name__)
        if not 0 <= d < 32:
            raise ValueError("memscope.take_snapshot(device_mask=...): device %d is not in 0..31"
                             % d)
    return items


def take_snapshot(device_mask=None, name="Memory Snapshot"):
    """Records a SNAPSHOT row of the current device named ``name`` — only when the current
    device is in ``device_mask`` (an int, or a list/tuple of ints; ``None``: any), as msMemScope.
    Needs no :func:`memscope.start`. Returns ``True`` when a row was recorded.

    memscope differences: works without torch_npu (see the module docs); bad arguments raise
    ``TypeError``/``ValueError`` naming the argument instead of a log line.
    """
    mask = _mask(device_mask)
    b = _text.label("take_snapshot", "name", name)
    dev, known, vals = _figures()
    if mask is not None and (dev if dev is not None else 0) not in mask:
        return False
    arr = (ctypes.c_uint64 * 6)(*[max(0, int(v)) for v in vals])
    lib = session().require()
    device = _UNKNOWN_DEVICE if dev is None else dev
    return lib.memscope_py_snapshot(b, device, known, arr) == 0


class TakeSnapshot:
    """Context manager / decorator: ``take_snapshot(device_mask, name + " Start")`` before and
    ``name + " End"`` after the block."""

    def __init__(self, device_mask=None, name="Memory Snapshot"):
        _mask(device_mask)
        _text.label("TakeSnapshot", "name", name, max_len=_text.MAX_NAME - 6)
        self.device_mask = device_mask
        self.name = name

    def __enter__(self):
        take_snapshot(self.device_mask, self.name + " Start")
        return self

    def __exit__(self, *exc):
        take_snapshot(self.device_mask, self.name + " End")
        return False

    def __call__(self, func):
        if not callable(func):
            raise TypeError("memscope.TakeSnapshot(...) decorates a callable, not %s"
                            % type(func).__name__)

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with self:
                return func(*args, **kwargs)

        return wrapper
