"""``start()``, ``stop()``, ``step()`` (behaviour spec §3)."""

import warnings

from ._session import session

#: Longest wait of ``stop()`` for the collector to write what was recorded before it, seconds.
STOP_WAIT_S = 10


def start():
    """Opens a collection window (msMemScope ``start``): records ``SYSTEM/START_TRACE`` and
    everything the configured sources see until :func:`stop`; several windows are allowed.

    In a plain ``python`` process the first call starts the collector (``memscope collect``) with
    the configuration of :func:`memscope.config`, and says once what needs the launcher.
    Raises ``RuntimeError`` when memscope cannot record in this process (probe not found).
    """
    s = session()
    with s.lock:
        lib = s.require()
        from . import _config, _tracer

        if s.config is None:
            launched = s.run_config() if s.mode in ("launcher", "attached") else None
            s.config = launched or _config._check({})
        s.ensure_collector(s.config)
        if lib.memscope_start() != 0:
            raise RuntimeError("memscope.start(): the probe is passive in this process "
                               "(no collector follows it)")
        s.window = True
        s.api_started = True
        print("[memscope] Info: Start tracing.")
        if _tracer.stacks_wanted:
            _tracer.start_stacks()
        from . import _aten

        # under the launcher s.config is what is in force for this process (its flags, and what
        # config() applied)
        cfg = s.config if s.config is not None else (s.run_config() or {})
        _aten.hooks().enable(lib, cfg)
        from . import framework_hooks

        framework_hooks.hooks().enable(lib, cfg)
        if _tracer.wanted and not lib.memscope_py_trace_active():
            _tracer.tracer._start(standalone=False)


def stop():
    """Closes the collection window (msMemScope ``stop``): records ``SYSTEM/STOP_TRACE``."""
    s = session()
    with s.lock:
        lib = s.require()
        lib.memscope_stop()
        s.window = False
        # what was recorded before stop() is in the files when it returns (issue 39)
        s.settle("memscope.stop()", STOP_WAIT_S, stacklevel=2)
        print("[memscope] Info: Stop tracing.")


def step():
    """Records ``SYSTEM/STEP`` (Name: the 1-based step count), inside a window only.

    msMemScope silently ignores a step outside a window; memscope warns.
    """
    s = session()
    lib = s.require()
    if lib.memscope_step() != 0:
        warnings.warn("memscope.step(): not recorded (outside a start()/stop() window)",
                      RuntimeWarning, stacklevel=2)
