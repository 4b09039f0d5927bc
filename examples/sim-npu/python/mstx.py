"""ctypes stand-in for the Python ``mstx`` module (abi.md §1.7, §7).

The real module is a C extension carrying its own header-inlined msTX
front end, so it performs its own injection handshake. This shim gets the
same effect by loading ``libmstx_pyfront.so``: a separate build of the
front end with its own private context. It is loaded RTLD_LOCAL, as Python
loads extension modules.

Quirks reproduced from the real module:

* ``message`` omitted -> the tool receives NULL.
* ``message`` not a ``str`` (``None`` included), a string with an embedded
  NUL, or one that cannot be encoded as UTF-8 -> the tool is still called
  with NULL, then ``SystemError`` is raised (the real module ignores its
  argument-parsing failure).
* ``stream``: ``None`` -> NULL; any other object -> its ``id()`` (the raw
  ``PyObject*`` address), never a real stream.
* ``range_start`` returns the id truncated to 32 bits; ``range_end`` takes
  the id modulo 2**32 (keyword ``rangeId``).
* ctypes releases the GIL around each call, like the real module.

Library lookup, first hit wins: ``_use_lib_dir(path)`` if called; the
environment variable ``SIM_NPU_DIR``; ``<dir of this file>/../lib64`` (the
copy installed in ``<SIM_NPU_DIR>/python``); the repository's
``target/{release,debug}/sim-npu`` (newest first).
"""

import ctypes
import os

__all__ = ["mark", "range_start", "range_end", "get_tool_id"]

_LIB_NAME = "libmstx_pyfront.so"
_lib = None
_lib_dir = None
_NOT_GIVEN = object()


def _candidate_dirs():
    if _lib_dir:
        yield _lib_dir
    env = os.environ.get("SIM_NPU_DIR")
    if env:
        yield env
    here = os.path.dirname(os.path.abspath(__file__))
    yield os.path.dirname(here)
    repo = os.path.abspath(os.path.join(here, "..", "..", ".."))
    builds = [os.path.join(repo, "target", p, "sim-npu") for p in ("release", "debug")]
    builds = [b for b in builds if os.path.isfile(os.path.join(b, "lib64", _LIB_NAME))]
    builds.sort(key=lambda b: os.path.getmtime(os.path.join(b, "lib64", _LIB_NAME)),
                reverse=True)
    yield from builds


def _use_lib_dir(path):
    """Pin the stand-in root (the directory holding lib64/) before first use."""
    global _lib_dir
    _lib_dir = path


def _load():
    global _lib
    if _lib is not None:
        return _lib
    for d in _candidate_dirs():
        path = os.path.join(d, "lib64", _LIB_NAME)
        if os.path.isfile(path):
            lib = ctypes.CDLL(path, mode=os.RTLD_LAZY | os.RTLD_LOCAL)
            lib.mstxMarkA.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
            lib.mstxMarkA.restype = None
            lib.mstxRangeStartA.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
            lib.mstxRangeStartA.restype = ctypes.c_uint64
            lib.mstxRangeEnd.argtypes = [ctypes.c_uint64]
            lib.mstxRangeEnd.restype = None
            lib.mstxGetToolId.argtypes = [ctypes.POINTER(ctypes.c_uint64)]
            lib.mstxGetToolId.restype = None
            _lib = lib
            return lib
    raise ImportError(
        "mstx shim: cannot find lib64/%s; build it with `cargo build -p sim-npu` "
        "or set SIM_NPU_DIR" % _LIB_NAME)


def _message_arg(message):
    """Returns (bytes-or-None, error-or-None) following the real parser."""
    if message is _NOT_GIVEN:
        return None, None
    if not isinstance(message, str):
        return None, TypeError("argument 1 must be str, not %s" % type(message).__name__)
    if "\0" in message:
        return None, ValueError("embedded null character")
    try:
        return message.encode("utf-8"), None
    except UnicodeEncodeError as e:
        return None, e


def _stream_arg(stream):
    return None if stream is None else id(stream)


def _raise_system_error(name, cause):
    raise SystemError("<built-in function %s> returned a result with an exception set"
                      % name) from cause


def mark(message=_NOT_GIVEN, stream=None):
    """mstxMarkA(message, stream)."""
    lib = _load()
    msg, err = _message_arg(message)
    lib.mstxMarkA(msg, _stream_arg(stream))
    if err is not None:
        _raise_system_error("mark", err)


def range_start(message=_NOT_GIVEN, stream=None):
    """mstxRangeStartA(message, stream) -> range id truncated to 32 bits."""
    lib = _load()
    msg, err = _message_arg(message)
    rid = lib.mstxRangeStartA(msg, _stream_arg(stream))
    if err is not None:
        _raise_system_error("range_start", err)
    return rid & 0xFFFFFFFF


def range_end(rangeId):  # noqa: N803 - the real keyword is rangeId
    """mstxRangeEnd(rangeId); the id is taken modulo 2**32, unchecked."""
    lib = _load()
    lib.mstxRangeEnd(int(rangeId) & 0xFFFFFFFF)


def get_tool_id():
    """mstxGetToolId(&id) -> id (0 when no tool fills the slot)."""
    lib = _load()
    out = ctypes.c_uint64(0)
    lib.mstxGetToolId(ctypes.byref(out))
    return out.value
