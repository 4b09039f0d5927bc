"""``memscope.describer``: user owner labels (behaviour spec §3, §7)."""

import functools
import threading
import warnings

from . import _text
from ._session import session

#: Labels a thread can stack (USER_DEFINED_1..3); msMemScope drops extras silently.
MAX_DEPTH = 3
_depth = threading.local()


class _Context:
    def __init__(self, owner):
        self.owner = owner
        self._label = _text.label("describer", "owner", owner)
        self._pushed = []

    def __enter__(self):
        lib = session().require()
        d = getattr(_depth, "n", 0)
        if d >= MAX_DEPTH:
            warnings.warn("memscope.describer(owner=%r): more than %d nested labels on this "
                          "thread; this one is dropped" % (self.owner, MAX_DEPTH),
                          RuntimeWarning, stacklevel=2)
            self._pushed.append(False)
            return self
        ok = lib.memscope_owner_push(self._label) == 0
        if ok:
            _depth.n = d + 1
        self._pushed.append(ok)
        return self

    def __exit__(self, *exc):
        if self._pushed.pop():
            session().require().memscope_owner_pop()
            _depth.n = getattr(_depth, "n", 1) - 1
        return False

    def __call__(self, func):
        if not callable(func):
            raise TypeError("memscope.describer(owner=...) decorates a callable, not %s"
                            % type(func).__name__)

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with self:
                return func(*args, **kwargs)

        return wrapper


class Describe:
    """``describer(owner="x")``: a context manager / decorator that pushes a user owner level
    on the calling thread, so blocks allocated inside get ``owner:<FRAMEWORK>@...@x``.

    ``describer(tensor_or_addr, owner="x")`` tags one live block (its start address, or a
    tensor's ``data_ptr()``) at the user level: the block's FREE row carries the owner chain
    with that level (memscope writes MALLOC rows when they happen, msMemScope only when the
    block dies, so the MALLOC row keeps the owner it had).

    Differences from msMemScope: a fourth nested label warns instead of vanishing silently;
    bad arguments raise ``TypeError``/``ValueError`` naming the argument.
    """

    def __call__(self, obj=None, owner=None):
        if owner is None:
            raise TypeError("memscope.describer(): the owner=... argument is required")
        if obj is None:
            return _Context(owner)
        label = _text.label("describer", "owner", owner)
        if isinstance(obj, bool):
            raise TypeError("memscope.describer(obj, ...): expected a tensor or an int address")
        if isinstance(obj, int):
            addr = obj
        else:
            ptr = getattr(obj, "data_ptr", None)
            if not callable(ptr):
                raise TypeError("memscope.describer(obj, ...): expected a tensor (with "
                                "data_ptr()) or an int address, not %s" % type(obj).__name__)
            addr = ptr()
        if not 0 < addr < 1 << 64:
            raise ValueError("memscope.describer(%r, ...): not a valid address" % obj)
        lib = session().require()
        lib.memscope_py_owner_addr(addr, label)
        return None


describer = Describe()
