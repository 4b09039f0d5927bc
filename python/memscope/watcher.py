"""``memscope.watcher``: msMemScope's memory watch (behaviour spec §3, §9.9).

``watch(tensor, name=..., dump_nums=N)`` or ``watch(addr, length=L, name=..., dump_nums=N)``
dumps the watched memory's checksum before and after every Aten operator (through the torch
hooks, so torch must be imported and :func:`memscope.start` called), ``dump_nums`` times at
most (default: no limit), into ``device_<n>/watch_dump/watch_dump_data_check_sum_<ts>.csv``;
``config(watch="...,full-content")`` writes the bytes instead. ``remove(tensor | addr,
length=L)`` stops it.

An address range is device memory, copied out through the runtime's ``aclrtMemcpy``, when the
ACL runtime is in the process; in a process without it, it is CPU memory of the process,
copied directly (``ValueError`` when the range is not readable memory of the process). A copy
the runtime refuses is said once on stderr, naming the watch.
"""

from . import _aten as _mod


def _is_tensor(x):
    return type(x).__name__ == "Tensor" and type(x).__module__.startswith("torch")


def watch(target, *, name, length=None, dump_nums=-1):
    """Watches a tensor, or ``length`` bytes at the integer address ``target``."""
    if not isinstance(name, str) or not name or len(name) > 64:
        raise ValueError("memscope.watcher.watch(name=...): a non-empty str of at most 64 "
                         "characters is required")
    if not isinstance(dump_nums, int) or dump_nums == 0 or dump_nums < -1:
        raise ValueError("memscope.watcher.watch(dump_nums=%r): a positive int, or -1 for no "
                         "limit" % (dump_nums,))
    _aten = _mod.hooks()
    full = bool(_aten._state and _aten._state.watch_cfg and _aten._state.watch_cfg[3])
    if length is not None:
        if not isinstance(target, int) or isinstance(target, bool):
            raise TypeError("memscope.watcher.watch(addr, length=...): addr must be an int")
        if not isinstance(length, int) or length <= 0:
            raise ValueError("memscope.watcher.watch(length=%r): must be > 0" % (length,))
        _aten.watch(name, addr=target, length=length, dump_nums=dump_nums, full=full)
    elif _is_tensor(target):
        _aten.watch(name, tensor=target, dump_nums=dump_nums, full=full)
    else:
        raise TypeError("memscope.watcher.watch(): a torch.Tensor, or an int address with "
                        "length=...")


def remove(target, *, length=None):
    """Stops watching a tensor, or the range at the int address ``target``."""
    _aten = _mod.hooks()
    if length is not None or isinstance(target, int):
        _aten.remove(addr=target)
    elif _is_tensor(target):
        _aten.remove(tensor=target)
    else:
        raise TypeError("memscope.watcher.remove(): a torch.Tensor or an int address")
