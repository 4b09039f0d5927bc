"""Argument checks shared by the API functions."""

MAX_NAME = 128


def label(func, arg, value, max_len=MAX_NAME):
    """Checks a label/name argument: a non-empty ``str`` of at most ``max_len`` characters
    that does not start with ``= + - @`` (msMemScope's rule against formula injection)."""
    if not isinstance(value, str):
        raise TypeError("memscope.%s(%s=...): expected a str, not %s"
                        % (func, arg, type(value).__name__))
    if not value:
        raise ValueError("memscope.%s(%s=...): must not be empty" % (func, arg))
    if len(value) > max_len:
        raise ValueError("memscope.%s(%s=...): longer than %d characters" % (func, arg, max_len))
    if value[0] in "=+-@":
        raise ValueError("memscope.%s(%s=%r): must not start with = + - @" % (func, arg, value))
    if "\0" in value:
        raise ValueError("memscope.%s(%s=...): contains a NUL character" % (func, arg))
    return value.encode("utf-8")
