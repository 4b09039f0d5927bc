"""``memscope.RecordFunction(name)``: a named block in the Python trace (spec §3)."""

import functools
import warnings

from . import _text
from ._session import session


class RecordFunction:
    """Context manager / decorator: writes a python_trace row ``name, start, end`` for the block
    while a collection window is open or :data:`memscope.tracer` runs (as msMemScope, whose
    rows are written while tracing); otherwise it warns that nothing was recorded and what to
    call. ``name``: a ``str`` of at most 128 characters (``TypeError``/``ValueError``
    otherwise)."""

    def __init__(self, name):
        self.name = name
        self._b = _text.label("RecordFunction", "name", name)

    def __enter__(self):
        if session().require().memscope_py_record_function(self._b, 0) != 0:
            warnings.warn("memscope.RecordFunction(%r): not recorded: no collection window is "
                          "open and memscope.tracer is not running (call memscope.start() or "
                          "memscope.tracer.start() first)" % (self.name,), RuntimeWarning,
                          stacklevel=2)
        return self

    def __exit__(self, *exc):
        session().require().memscope_py_record_function(self._b, 1)
        return False

    def __call__(self, func):
        if not callable(func):
            raise TypeError("memscope.RecordFunction(...) decorates a callable, not %s"
                            % type(func).__name__)

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with self:
                return func(*args, **kwargs)

        return wrapper
