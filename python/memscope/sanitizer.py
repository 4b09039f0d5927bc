"""msMemScope's NPU Sanitizer bridge (issue 36): ``enable_npu_sanitizer()`` turns torch_npu's
sanitizer on (``torch_npu.npu._sanitizer``, the NPU port of PyTorch's CUDA Sanitizer) and hands
every well-formed ``sanitizer-op:`` msTX mark made through ``torch_npu.npu.mstx.mark(message,
stream)`` to its kernel-launch handler, so a custom operator the dispatcher cannot see still has
its reads and writes checked for unsynchronized cross-stream access::

    sanitizer-op: name=my_ext.my_fused_op;read=input_a:0x7f00:1024,input_b:0x7f04:512;write=output:0x7f08:2048

``;`` separates fields, ``,`` list items, ``:`` alias, address and bytes; addresses are decimal
or ``0x`` hex; an address both read and written is an in-place access; an alias is shorter than
32 bytes and the message at most 1024 bytes. A malformed mark gets one warning naming the field
and is still written as an ordinary mark. Marks made from C (``mstxMarkA``, e.g. by a C++
extension) reach the handler too, through the probe's listener
(``memscope_set_sanitizer_callback``), with their ``aclrtStream`` as the stream; a mark made
through ``torch_npu.npu.mstx.mark`` is handed over once, from Python, with its ``Stream``
object (the C call below it passes the object's address, not a stream).
"""

import ctypes
import sys
import threading
import warnings

PREFIX = "sanitizer-op:"
MAX_MESSAGE = 1024
MAX_ALIAS = 31

_state = {"patched": None, "listener": None}
# per thread: inside the Python wrapper of mstx.mark (its C call is not routed again), and an
# error the C route could not raise (ctypes swallows a callback's exception)
_tls = threading.local()


def _number(field, text):
    t = text.strip()
    try:
        v = int(t, 16) if t.lower().startswith("0x") else int(t, 10)
    except ValueError:
        raise ValueError("%s: %r is not a number (decimal or 0x hex)" % (field, text)) from None
    if v < 0:
        raise ValueError("%s: %r is negative" % (field, text))
    return v


def _accesses(field, text):
    out = []
    for i, item in enumerate(text.split(",")):
        parts = item.split(":")
        if len(parts) != 3:
            raise ValueError("%s item %d: %r is not alias:address:bytes" % (field, i + 1, item))
        alias = parts[0].strip()
        if not alias or len(alias.encode()) > MAX_ALIAS:
            raise ValueError("%s item %d: alias %r must be 1 to %d bytes"
                             % (field, i + 1, alias, MAX_ALIAS))
        addr = _number("%s item %d address" % (field, i + 1), parts[1])
        size = _number("%s item %d bytes" % (field, i + 1), parts[2])
        out.append((alias, addr, size))
    return out


def parse(message):
    """The operator of a ``sanitizer-op:`` message as a dict (``name``, ``read``, ``write``:
    lists of ``(alias, address, bytes)``), ``None`` for a message without the prefix. Raises
    ``ValueError`` naming the field that is malformed."""
    if not isinstance(message, str) or not message.startswith(PREFIX):
        return None
    if len(message.encode()) > MAX_MESSAGE:
        raise ValueError("message: %d bytes, more than %d" % (len(message.encode()), MAX_MESSAGE))
    op = {"name": None, "read": [], "write": []}
    for field in message[len(PREFIX):].split(";"):
        if not field.strip():
            continue
        key, sep, value = field.partition("=")
        key = key.strip()
        if not sep:
            raise ValueError("%r: expected key=value" % field.strip())
        if key == "name":
            if op["name"] is not None:
                raise ValueError("name: given twice")
            if not value.strip():
                raise ValueError("name: empty")
            op["name"] = value.strip()
        elif key in ("read", "write"):
            if op[key]:
                raise ValueError("%s: given twice" % key)
            op[key] = _accesses(key, value)
        else:
            raise ValueError("%r: unknown field (name, read, write)" % key)
    if op["name"] is None:
        raise ValueError("name: missing")
    if not op["read"] and not op["write"]:
        raise ValueError("read/write: the operator accesses nothing")
    return op


def launch_args(op):
    """``_handle_kernel_launch``'s sets for ``op``: read-only pointers, read-write pointers
    (every write: in place when also read), outputs (written, not read) and the aliases per
    pointer."""
    reads = {addr for _, addr, _ in op["read"]}
    writes = {addr for _, addr, _ in op["write"]}
    aliases = {}
    for alias, addr, _ in op["read"] + op["write"]:
        names = aliases.setdefault(addr, [])
        if alias not in names:
            names.append(alias)
    return reads - writes, set(writes), writes - reads, aliases


def _stream_id(stream, npu):
    if stream is None:
        current = getattr(npu, "current_stream", None)
        stream = current() if current is not None else 0
    for attr in ("npu_stream", "stream_id"):
        if hasattr(stream, attr):
            return int(getattr(stream, attr))
    return int(stream)


def _dispatch(san, npu, message, stream):
    """Parses ``message`` and hands it to the sanitizer's kernel-launch handler; a malformed
    mark is one warning (the mark itself is already written)."""
    try:
        op = parse(message)
    except ValueError as e:
        warnings.warn("memscope: sanitizer-op mark not checked: %s" % e, RuntimeWarning,
                      stacklevel=3)
        return
    if op is None:
        return
    handler = san.npu_sanitizer.dispatch.event_handler
    read_only, read_write, outputs, aliases = launch_args(op)
    errors = handler._handle_kernel_launch(_stream_id(stream, npu), read_only, read_write,
                                           outputs, op["name"], aliases)
    if errors:
        # as the sanitizer's own dispatch does for an operator it sees
        raise_errors = getattr(san, "NPUSanitizerErrors", None)
        if raise_errors is not None:
            raise raise_errors(errors)
        for e in errors:
            print(e, file=sys.stderr)


def _listen(san, npu):
    """Registers the router of C-made marks with the probe, when this process has one."""
    if _state["listener"] is not None:
        return
    try:
        from ._session import session  # the package's `_session` name is a function
        lib = session().lib
        setter = getattr(lib, "memscope_set_sanitizer_callback", None) if lib else None
    except Exception:  # noqa: BLE001 - no probe: Python marks only
        setter = None
    if setter is None:
        return
    callback_type = ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_void_p)

    def from_c(message, stream):
        if getattr(_tls, "in_mark", False):
            return  # torch_npu.npu.mstx.mark: routed by its wrapper
        try:
            _dispatch(san, npu, message.decode("utf-8", "replace"), stream or 0)
        except Exception as e:  # noqa: BLE001 - cannot propagate through C
            print("memscope: NPU sanitizer: %s" % e, file=sys.stderr)

    listener = callback_type(from_c)
    setter.argtypes = [callback_type]
    setter.restype = None
    setter(listener)
    _state["listener"] = listener  # kept alive while the probe may call it


def enable_npu_sanitizer():
    """msMemScope's ``enable_npu_sanitizer()``: turns torch_npu's NPU sanitizer on and routes
    ``sanitizer-op:`` marks made with ``torch_npu.npu.mstx.mark`` to it. Without torch_npu's
    sanitizer it says so in one line on stderr and returns ``False`` (the marks are still
    recorded); ``True`` once enabled (a second call changes nothing)."""
    try:
        import torch_npu.npu as npu
        import torch_npu.npu._sanitizer as san
    except ImportError as e:
        print("memscope: enable_npu_sanitizer(): torch_npu's NPU sanitizer is not importable "
              "(%s); sanitizer-op: marks are recorded as ordinary marks" % e, file=sys.stderr)
        return False
    san.enable_npu_sanitizer()
    _listen(san, npu)
    mstx = getattr(npu, "mstx", None)
    if _state["patched"] is None and mstx is not None and hasattr(mstx, "mark"):
        original = mstx.mark

        def mark(message, stream=None, *args, **kwargs):
            _tls.in_mark = True
            try:
                result = original(message, stream, *args, **kwargs)
            finally:
                _tls.in_mark = False
            _dispatch(san, npu, message, stream)
            return result

        mark.__wrapped__ = original
        mstx.mark = mark
        _state["patched"] = (mstx, original)
    return True
