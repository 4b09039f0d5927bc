"""memscope's torch hooks (issue 13): Aten operator launches and tensor accesses, CPU tensors,
and memory watch, through one ``TorchDispatchMode`` entered when torch is imported.

* OP_LAUNCH ``ATEN_START``/``ATEN_END`` per operator (``--level op`` with ``launch``), named
  ``<module>.<name>`` (``torch._ops.aten.add.Tensor``) as msMemScope names them.
* ACCESS rows (``--events access``): inputs before the operator runs (``WRITE`` when the
  schema says the operator writes that argument, else ``READ``), outputs after it (``WRITE``;
  outputs that alias an input's storage are views, not accesses), with dtype, shape and size.
* CPU tensors (``--device cpu``): a HOST MALLOC when an operator's output (or ``torch.tensor``)
  has a CPU storage not seen before, its FREE when the storage is released (``weakref``).
* Memory watch: ``--watch start[:outid],end[,full-content]`` and ``memscope.watcher.watch``:
  the probe dumps the watched memory's checksum (or bytes) before and after operators, through
  the runtime's ``aclrtMemcpy`` for device memory.

Self-contained (only ctypes and torch): ``memscope run`` writes this file into the job's Python
bootstrap, the ``memscope`` package uses it in plain ``python`` mode. The dispatch mode is
entered on the thread that imports torch; autograd's threads inherit it.
"""

import ctypes
import sys
import weakref

CPU = 0xFFFFFFFE
UNKNOWN = 0xFFFFFFFF
READ, WRITE = 1, 2

_state = None


def hooks():
    """The torch-hook module in force in this process: the launcher's bootstrap copy
    (``memscope_torch_hooks``) when ``memscope run`` installed it, else this one."""
    return sys.modules.get("memscope_torch_hooks") or sys.modules[__name__]


class _State:
    def __init__(self, lib, ops, access, cpu, watch):
        self.lib, self.ops, self.access, self.cpu = lib, ops, access, cpu
        self.watch_cfg = watch          # (start, outid, end, full) or None
        # [name, tensor-or-None, addr, length, device, dumps left (None: no limit), full, cli]
        self.watched = []
        self.cli_watching = False
        self.refused = set()        # watched names whose memory could not be copied out
        self.calls = {}
        self.live = {}
        self.mode = None
        for name, args in (("memscope_py_aten_op", [ctypes.c_char_p, ctypes.c_int, ctypes.c_uint32]),
                           ("memscope_py_aten_tensor", [ctypes.c_int, ctypes.c_uint32, ctypes.c_uint64,
                                                        ctypes.c_uint64, ctypes.c_char_p]),
                           ("memscope_py_cpu_tensor", [ctypes.c_int, ctypes.c_uint64, ctypes.c_uint64]),
                           ("memscope_py_watch_dump", [ctypes.c_char_p, ctypes.c_uint32, ctypes.c_uint64,
                                                       ctypes.c_uint64, ctypes.c_int])):
            f = getattr(lib, name)
            f.argtypes, f.restype = args, ctypes.c_int


def _device(t):
    d = t.device
    if d.type == "cpu":
        return CPU
    return d.index if d.index is not None else UNKNOWN


def _tensors(x, torch, flatten):
    return [a for a in flatten(x)[0] if isinstance(a, torch.Tensor)]


def _record_tensor(s, kind, t):
    try:
        ptr = t.data_ptr()
    except RuntimeError:
        return
    if not ptr:
        return
    meta = ("%s\n%s" % (t.dtype, t.shape)).encode()
    s.lib.memscope_py_aten_tensor(kind, _device(t), ptr, t.numel() * t.element_size(), meta)


def _cpu_storage(s, t):
    if t.device.type != "cpu":
        return
    try:
        st = t.untyped_storage()
        ptr, size = st.data_ptr(), st.nbytes()
    except (RuntimeError, NotImplementedError):
        return
    if not ptr or ptr in s.live:
        return
    s.live[ptr] = size
    s.lib.memscope_py_cpu_tensor(0, ptr, size)
    weakref.finalize(st, _cpu_freed, ptr, size)


def _cpu_freed(ptr, size):
    s = _state
    if s is not None and s.live.pop(ptr, None) is not None:
        s.lib.memscope_py_cpu_tensor(1, ptr, size)


def _short(name):
    # torch._ops.aten.add.Tensor -> matches "torch._ops.aten.add.Tensor", "aten.add.Tensor",
    # "aten.add", "add"
    parts = name.split(".")
    forms = {name, ".".join(parts[2:]), ".".join(parts[2:4]), parts[3] if len(parts) > 3 else name}
    return forms


def _dump(s, opname, n, when):
    keep = []
    for w in s.watched:
        wname, t, addr, length, dev, left, full, _cli = w
        if t is not None:
            try:
                addr, length, dev = t.data_ptr(), t.numel() * t.element_size(), _device(t)
            except RuntimeError:
                continue
        label = "%s_%d-%s_%s" % (opname, n, wname, when)
        rc = s.lib.memscope_py_watch_dump(label.encode(), dev, addr, length, 1 if full else 0)
        if rc == -2 and wname not in s.refused:
            s.refused.add(wname)
            print("memscope: watch %s: the runtime could not copy 0x%x (%d bytes) out "
                  "(aclrtMemcpy device to host failed); nothing is dumped for it (watch a "
                  "tensor, or device memory of the current device)" % (wname, addr, length),
                  file=sys.stderr)
        if left is not None:
            w[5] = left - 1
        if w[5] is None or w[5] > 0:
            keep.append(w)
    s.watched = keep


def _install(torch):
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    s = _state

    class _Mode(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            name = "%s.%s" % (func.__module__, func.__name__)
            ins = _tensors(args, torch, tree_flatten) + _tensors(kwargs, torch, tree_flatten)
            dev = _device(ins[0]) if ins else UNKNOWN
            n = s.calls.get(name, 0)
            s.calls[name] = n + 1
            if s.ops:
                s.lib.memscope_py_aten_op(name.encode(), 0, dev)
            if s.watched:
                _dump(s, name, n, "before")
            if s.access:
                schema = func._schema.arguments
                for i, a in enumerate(args):
                    if isinstance(a, torch.Tensor):
                        info = schema[i].alias_info if i < len(schema) else None
                        _record_tensor(s, WRITE if info is not None and info.is_write else READ, a)
            out = func(*args, **kwargs)
            outs = _tensors(out, torch, tree_flatten)
            if dev == UNKNOWN and outs:
                dev = _device(outs[0])
            if s.cpu:
                # before the output's ACCESS rows, so they find the block (allocation_id)
                for o in outs:
                    _cpu_storage(s, o)
            if s.access:
                in_ptrs = set()
                for a in ins:
                    try:
                        in_ptrs.add(a.untyped_storage().data_ptr())
                    except (RuntimeError, NotImplementedError):
                        pass
                for o in outs:
                    try:
                        if o.untyped_storage().data_ptr() in in_ptrs:
                            continue
                    except (RuntimeError, NotImplementedError):
                        continue
                    _record_tensor(s, WRITE, o)
            wc = s.watch_cfg
            if wc is not None:
                start, outid, end, full = wc
                forms = _short(name)
                if not s.cli_watching and start and start in forms:
                    picked = outs if outid is None else outs[outid:outid + 1]
                    for i, o in enumerate(picked):
                        s.watched.append(["%s_%d" % (start, outid if outid is not None else i),
                                          o, 0, 0, 0, None, full, True])
                    s.cli_watching = bool(picked)
                    _dump(s, name, n, "after")
                elif s.watched:
                    _dump(s, name, n, "after")
                if s.cli_watching and end in forms:
                    s.watched = [w for w in s.watched if not w[7]]
                    s.cli_watching = False
            elif s.watched:
                _dump(s, name, n, "after")
            if s.ops:
                s.lib.memscope_py_aten_op(name.encode(), 1, dev)
            return out

    s.mode = _Mode()
    s.mode.__enter__()
    if s.cpu:
        orig = torch.tensor

        def tensor(*a, **k):
            t = orig(*a, **k)
            _cpu_storage(s, t)
            return t

        tensor.__doc__ = orig.__doc__
        torch.tensor = tensor


class _TorchFinder:
    """Enters the dispatch mode right after ``import torch`` completes."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        import importlib.util

        spec = importlib.util.find_spec("torch")
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        exec_module = loader.exec_module

        def run(module):
            exec_module(module)
            try:
                _install(module)
            except Exception as e:  # noqa: BLE001 - never break the job's import
                print("memscope: torch hooks not installed: %s" % e, file=sys.stderr)

        loader.exec_module = run
        return spec


def wanted(cfg):
    """(ops, access, cpu, watch) the config.json dict ``cfg`` asks for."""
    events = set(cfg.get("events") or [])
    level = set(cfg.get("level") or [])
    analysis = set(cfg.get("analysis") or [])
    ops = ("launch" in events or "inefficient" in analysis) and "op" in level \
        or "races" in analysis
    access = "access" in events or bool(analysis & {"decompose", "inefficient", "races"})
    cpu = "cpu" in (cfg.get("device") or [])
    watch = None
    w = cfg.get("watch")
    if w:
        parts = w.split(",")
        start, _, outid = parts[0].partition(":")
        watch = (start, int(outid) if outid else None, parts[1],
                 len(parts) > 2 and parts[2] == "full-content")
    return ops, access, cpu, watch


def enable(lib, cfg):
    """Turns the torch hooks on as ``cfg`` (config.json dict) asks, now if torch is imported,
    else when it is. Returns whether anything was wanted."""
    global _state
    ops, access, cpu, watch = wanted(cfg)
    if not (ops or access or cpu or watch):
        return False
    if _state is not None:
        _state.ops, _state.access, _state.cpu, _state.watch_cfg = ops, access, cpu, watch
        return True
    _state = _State(lib, ops, access, cpu, watch)
    if "torch" in sys.modules:
        _install(sys.modules["torch"])
    elif not any(isinstance(f, _TorchFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _TorchFinder())
    return True


def _readable(addr, length):
    """Whether ``[addr, addr+length)`` lies in readable mappings of this process."""
    end, at = addr + length, addr
    try:
        with open("/proc/self/maps") as f:
            spans = []
            for line in f:
                parts = line.split()
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                if parts[1].startswith("r"):
                    spans.append((lo, hi))
    except (OSError, ValueError):
        return False
    for lo, hi in sorted(spans):
        if lo <= at < hi:
            at = hi
            if at >= end:
                return True
    return False


def _addr_device(addr, length):
    """The device of watched memory given by address: device memory (copied out through the
    runtime's ``aclrtMemcpy``) when the ACL runtime is in the process, else CPU memory of this
    process (copied directly). ``ValueError`` when it is neither."""
    try:
        ctypes.CDLL(None).aclrtMemcpy  # noqa: B018 - is the runtime there?
        return UNKNOWN
    except AttributeError:
        pass
    if _readable(addr, length):
        return CPU
    raise ValueError("memscope.watcher.watch(0x%x, length=%d): not memory of this process, and "
                     "no ACL runtime is loaded to copy device memory out (watch a tensor, or "
                     "memory this process can read)" % (addr, length))


def watch(name, tensor=None, addr=0, length=0, dump_nums=-1, full=False):
    """``watcher.watch``: dump ``tensor`` (or ``[addr, addr+length)``) around every operator,
    ``dump_nums`` times at most (-1: no limit)."""
    s = _state
    if s is None:
        raise RuntimeError("memscope.watcher: the torch hooks are not enabled (call "
                           "memscope.start() first, with torch importable)")
    dev = UNKNOWN if tensor is not None else _addr_device(addr, length)
    s.watched.append([name, tensor, addr, length, dev, None if dump_nums < 0 else dump_nums,
                      full, False])


def remove(tensor=None, addr=0):
    """``watcher.remove``: stops watching ``tensor`` (or the range at ``addr``)."""
    s = _state
    if s is None:
        return
    s.watched = [w for w in s.watched
                 if not ((tensor is not None and w[1] is tensor) or (tensor is None and w[2] == addr))]
