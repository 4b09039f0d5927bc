"""``memscope.RecordFunction(name)``: a named block in the Python trace (spec §3)."""

import functools

from . import _text
from ._session import session


class RecordFunction:
    """Context manager / decorator: writes a python_trace row ``name, start, end`` for the block
    (while a collection window is open, as msMemScope). ``name``: a ``str`` of at most 128
    characters (``TypeError``/``ValueError`` otherwise)."""

    def __init__(self, name):
        self.name = name
        self._b = _text.label("RecordFunction", "name", name)

    def __enter__(self):
        session().require().memscope_py_record_function(self._b, 0)
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
