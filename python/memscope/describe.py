"""``memscope.describer``: user owner labels (behaviour spec §3, §7)."""

import functools
import threading
import warnings

from . import _text
from ._session import session

#: Labels a thread can stack (USER_DEFINED_1..3); msMemScope drops extras silently.
MAX_DEPTH = 3
#: Per thread: the open ``describer(owner=...)`` levels, innermost last, as
#: ``[owner label bytes, pushed on the probe's owner stack]``.
_open = threading.local()


def _levels():
    v = getattr(_open, "levels", None)
    if v is None:
        v = _open.levels = []
    return v


class _Context:
    def __init__(self, owner):
        self.owner = owner
        self._label = _text.label("describer", "owner", owner)

    def __enter__(self):
        lib = session().require()
        levels = _levels()
        if sum(1 for _, pushed in levels if pushed) >= MAX_DEPTH:
            warnings.warn("memscope.describer(owner=%r): more than %d nested labels on this "
                          "thread; this one is dropped" % (self.owner, MAX_DEPTH),
                          RuntimeWarning, stacklevel=2)
            levels.append([self._label, False])
            return self
        levels.append([self._label, lib.memscope_owner_push(self._label) == 0])
        return self

    def __exit__(self, *exc):
        # msMemScope undescribes by owner string: the innermost open level with this owner
        # ends, whichever describer object opened it (way 2 of its user guide:
        # describer(owner="x").__enter__() ... describer(owner="x").__exit__()).
        levels = _levels()
        at = next((i for i in range(len(levels) - 1, -1, -1) if levels[i][0] == self._label),
                  None)
        if at is None:
            warnings.warn("memscope.describer(owner=%r).__exit__(): no describer with this owner "
                          "is open on this thread; nothing to end" % (self.owner,),
                          RuntimeWarning, stacklevel=2)
            return False
        above = levels[at + 1:]
        _, pushed = levels[at]
        del levels[at:]
        if pushed:
            lib = session().require()
            # the probe's owner stack is a stack: take the inner levels off, end this one,
            # and put the inner levels back in their order
            for _, p in reversed(above):
                if p:
                    lib.memscope_owner_pop()
            lib.memscope_owner_pop()
            for entry in above:
                if entry[1]:
                    entry[1] = lib.memscope_owner_push(entry[0]) == 0
        levels.extend(above)
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

    As in msMemScope, a level ends by its owner string: ``describer(owner="x").__exit__()`` on
    another object than the one entered ends the innermost open ``"x"`` level of the thread
    (levels opened inside it stay open).

    Differences from msMemScope: a fourth nested label warns instead of vanishing silently, an
    ``__exit__`` with no open level of its owner warns instead of a log line; bad arguments
    raise ``TypeError``/``ValueError`` naming the argument.
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
