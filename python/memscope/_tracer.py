"""``memscope.tracer``: the Python tracer (``python_trace_{TID}_{ts}.csv``, spec §5.4).

The probe installs a C-level profile function on every thread of the interpreter
(``PyEval_SetProfileAllThreads`` on 3.12+, each thread state before) and records every Python
and C call and return into its stream, on the clock of the dump; threads started later get it
through ``threading.setprofile``. Rows are written by the collector.
"""

import os
import sysconfig
import threading
import warnings

from ._session import session

#: config(events=...traceback) asked for the tracer (started by start()).
wanted = False
#: config(call_stack=...python) asked for Python stacks on every row (started by start()).
stacks_wanted = False


def start_stacks():
    """Turns Python stacks on every row on (the probe's shadow stacks; they stay on for the
    process). Warns when it cannot work here."""
    s = session()
    if sysconfig.get_config_var("Py_GIL_DISABLED"):
        warnings.warn("memscope: Python stacks: free-threaded Python builds are not supported",
                      RuntimeWarning, stacklevel=3)
        return
    lib = s.require()
    how = 1 if os.environ.get("MEMSCOPE_PY_STACK_HOOK") == "profile" else 0
    rc = lib.memscope_py_stacks_start_with(how)
    if rc < 0:
        warnings.warn("memscope: Python stacks: %s" % s.last_error(), RuntimeWarning,
                      stacklevel=3)
        return
    threading.setprofile(_thread_hook)


def _thread_hook(*_):
    # First profile event of a new thread: replace this Python hook by the probe's C one.
    lib = session().lib
    if lib is not None:
        lib.memscope_py_trace_thread()


class Tracer:
    """``tracer.start()`` / ``tracer.stop()`` (msMemScope's Python tracing).

    As msMemScope's, a tracer started by ``tracer.start()`` works on its own: calls are traced
    whether or not a :func:`memscope.start` window is open (in a plain ``python`` process it
    starts the collector, as :func:`memscope.start` does). The tracer that
    ``config(events="...traceback")`` asks for traces inside the windows only."""

    def start(self):
        """Starts tracing every thread, inside and outside collection windows. Warns (and does
        nothing) when it cannot run here."""
        self._start(standalone=True, stacklevel=3)

    def _start(self, standalone, stacklevel=3):
        s = session()
        if sysconfig.get_config_var("Py_GIL_DISABLED"):
            warnings.warn("memscope.tracer.start(): free-threaded Python builds are not supported",
                          RuntimeWarning, stacklevel=stacklevel)
            return
        lib = s.require()
        if standalone:
            with s.lock:
                if s.mode == "plain" and s.collector is None:
                    from . import _config

                    if s.config is None:
                        s.config = _config._check({})
                    s.ensure_collector(s.config)
            lib.memscope_py_trace_standalone(1)
        rc = lib.memscope_py_trace_start()
        if rc < 0:
            warnings.warn("memscope.tracer.start(): %s" % s.last_error(), RuntimeWarning,
                          stacklevel=stacklevel)
            return
        if rc == 1 and standalone:
            warnings.warn("memscope.tracer.start(): the tracer is already running",
                          RuntimeWarning, stacklevel=stacklevel)
        threading.setprofile(_thread_hook)

    def stop(self):
        """Stops tracing; calls still open are written with EndTime N/A."""
        s = session()
        lib = s.require()
        if not stacks_wanted:
            threading.setprofile(None)
        rc = lib.memscope_py_trace_stop()
        lib.memscope_py_trace_standalone(0)
        if rc == 1:
            warnings.warn("memscope.tracer.stop(): the tracer is not running", RuntimeWarning,
                          stacklevel=2)
        elif rc < 0:
            warnings.warn("memscope.tracer.stop(): %s" % s.last_error(), RuntimeWarning,
                          stacklevel=2)


tracer = Tracer()
