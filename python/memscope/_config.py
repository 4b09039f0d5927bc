"""``memscope.config(**kwargs)``: msMemScope's ``config`` (behaviour spec §3).

Values are parsed by the memscope CLI itself (``memscope config check``), so they mean exactly
what the ``memscope run`` flags of the same name mean.
"""

import os
import sys
import warnings

from . import _locate
from . import _session
from ._session import session

#: config() keys and the ``memscope run`` flag each one is.
KEYS = {
    "device": "--device",
    "level": "--level",
    "events": "--events",
    "call_stack": "--call-stack",
    "analysis": "--analysis",
    "watch": "--watch",
    "format": "--format",
    "output_path": "--output-path",
    "sample": "--sample",
    "adapters": "--adapters",
}
#: msMemScope's deprecated spellings.
ALIASES = {"data_format": "format", "output": "output_path"}
#: Keys msMemScope lets be set only once (later values are ignored with a warning).
ONCE = ("format", "output_path", "watch")
_FLAG_TO_KEY = {v: k for k, v in KEYS.items()}


def _check(values):
    """Validates ``values`` (config() keys) with the CLI; returns memscope's config.json dict."""
    args = ["config", "check"]
    for k, v in values.items():
        args.append("%s=%s" % (KEYS[k], v))
    r = _locate.run_cli(args, stdout=-1, stderr=-1)
    if r.returncode != 0:
        msg = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "invalid value"
        msg = msg.replace("memscope: ", "", 1)
        flag = msg.split(":", 1)[0]
        key = _FLAG_TO_KEY.get(flag, flag)
        raise ValueError("memscope.config(%s=%r): %s" % (key, values.get(key), msg))
    import json

    return json.loads(r.stdout)


def _depth(cfg, which):
    """Frames of ``which[:N]`` (``python`` or ``c``) in a config.json dict's ``call_stack``
    (0: none)."""
    for item in cfg.get("call_stack") or []:
        kind, _, n = item.partition(":")
        if kind == which:
            return int(n) if n else 50
    return 0


def sample_ns(cfg):
    """The memory sampler's interval in ns of a config.json dict's ``sample`` (``100ms``,
    ``1s``, ``250us``, as the CLI writes it; 0: off)."""
    text = cfg.get("sample") or ""
    for unit, scale in (("us", 1000), ("ms", 1000000), ("s", 1000000000)):
        if text.endswith(unit) and text[:-len(unit)].isdigit():
            return int(text[:-len(unit)]) * scale
    return 0


def python_depth(cfg):
    """Frames of ``python[:N]`` in a config.json dict's ``call_stack`` (0: none)."""
    return _depth(cfg, "python")


def _kernel_launches(c):
    """Whether config.json dict ``c`` has the probe hook kernel launches (set at start)."""
    events, level = set(c.get("events") or []), set(c.get("level") or [])
    analysis = set(c.get("analysis") or [])
    return ("launch" in events or "inefficient" in analysis) and "kernel" in level \
        or "races" in analysis


def _under_launcher(s, values, cfg):
    """``config()`` in a process of ``memscope run`` (issue 27): the keys the script gave that
    the run's flags did not set explicitly go to this process's collector; explicit flags win,
    said in one line. Returns the configuration in force for this process."""
    run = s.run_config()
    if run is None:
        return cfg
    explicit = set(filter(None, os.environ.get("MEMSCOPE_RUN_EXPLICIT", "").split(",")))
    conflicts = [k for k in values if k in explicit and cfg.get(k) != run.get(k)]
    if conflicts:
        warnings.warn("memscope.config(): %s set explicitly by `memscope run` (%s); the launcher's "
                      "flags win over the script's config() for the keys they give — drop the "
                      "flag to let config() decide"
                      % (", ".join(conflicts),
                         " ".join("%s=%s" % (KEYS[k], _text_of(run.get(k))) for k in conflicts)),
                      RuntimeWarning, stacklevel=3)
    wanted = {k: cfg[k] for k in values if k not in explicit and cfg.get(k) != run.get(k)}
    effective = dict(run)
    effective.update(wanted)
    fixed = []
    if _kernel_launches(effective) and not _kernel_launches(run):
        fixed.append("kernel launches (--level kernel with launch)")
    if _depth(effective, "c") != _depth(run, "c"):
        fixed.append("C call stacks (--call-stack c:N)")
    if fixed:
        warnings.warn("memscope.config(): %s are set up when the process starts; they stay as "
                      "`memscope run` started it — pass them to memscope run"
                      % " and ".join(fixed), RuntimeWarning, stacklevel=3)
    if not wanted:
        return effective
    answer = s.ask_collector(wanted)
    if answer != "applied":
        warnings.warn("memscope.config(): %s not applied (%s); the flags of `memscope run` stay "
                      "in force" % (", ".join(sorted(wanted)), answer), RuntimeWarning,
                      stacklevel=3)
        return run
    return effective


def _adapters(s, text, cfg):
    """``adapters`` of ``config()``: the adapters are set up when the process starts, so the
    ones its probe started with stay on (``memscope run``'s, or without the launcher the
    mode's); a shipped plugin asked for (``pymem``) is started now, and sees what is allocated
    from then on; each other one asked for that was not started is named in one warning line
    that says how to get it. Returns the adapters in force (``cfg["adapters"]``)."""
    loaded = s.loaded_adapters()
    if loaded is None:
        return cfg.get("adapters") or []
    if any(a not in loaded and s.load_plugin(a) for a in cfg.get("adapters") or []):
        loaded = s.loaded_adapters()
    missing = [a for a in cfg.get("adapters") or [] if a not in loaded]
    if missing:
        wanted = ",".join(loaded + missing)
        if s.mode in ("launcher", "attached"):
            started = [a for a in loaded if a not in s.late_plugins]
            how = ("`memscope run` started this process with --adapters %s; pass %s to memscope "
                   "run: memscope run --adapters %s -- ..." % (",".join(started) or "(none)",
                                                            ", ".join(missing), wanted))
        else:
            script = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "script.py"
            how = ("without `memscope run` this process records %s; pass %s to the launcher: "
                   "memscope run --adapters %s -- python %s"
                   % (", ".join(loaded), ", ".join(missing), wanted, script))
        warnings.warn("memscope.config(adapters=%r): %s not loaded — adapters are set up when "
                      "the process starts; %s" % (text, ", ".join(missing), how),
                      RuntimeWarning, stacklevel=3)
    if s.mode in ("launcher", "attached", "preloaded"):
        return loaded
    return [a for a in loaded if a in cfg.get("adapters") or []
            or a in _session.PLAIN_ADAPTERS.split(",")]


def _text_of(v):
    return ",".join(v) if isinstance(v, list) else str(v)


def config(**kwargs):
    """Sets the collection configuration (msMemScope ``config``).

    Keyword arguments only, every value a ``str`` parsed like the ``memscope run`` flag of the
    same name: ``device``, ``level``, ``events``, ``call_stack``, ``analysis``, ``watch``,
    ``format``, ``output_path`` (``data_format``, ``output``: msMemScope's old names), and
    memscope's ``sample`` (``"100ms"``: the probe's memory sampler, from now on; a call without
    it pauses the sampler unless ``memscope run --sample`` set it) and ``adapters`` (as
    ``memscope run --adapters``: ``"pymem"``, ``"host,pymem"``). The adapters the process
    started with stay on; ``pymem`` (Python objects) is started when asked for, with or
    without the launcher, and sees the objects allocated from then on; any other adapter is
    set up when the process starts, so one asked for that it did not start with is named in one
    ``RuntimeWarning`` that says to pass it to ``memscope run --adapters`` (without the
    launcher, plain ``python`` records ``mstx``, ``pta``, ``mindspore`` and ``atb``).

    As in msMemScope: each call starts from the defaults (it is not a merge), ``format`` and
    ``output_path`` can be set once (later values are ignored with a warning), and the
    configuration gives deferred semantics — nothing is recorded until :func:`memscope.start`.
    ``events`` containing ``traceback`` makes :func:`memscope.start` start the Python tracer
    (one without stops it).

    Raises ``ValueError`` naming the key for an unknown key, a bad value or no arguments;
    ``TypeError`` for a value that is not a ``str``.
    Under ``memscope run`` (msMemScope's documented workflow): the keys the script gives that
    the ``memscope run`` flags (or its ``--config`` file) did not set explicitly apply to this
    process — its output path, format, analyses, events, levels, devices, Python stacks and
    watch — as long as it has not written anything yet; a key the flags set explicitly stays
    the flag's, and one warning line names it (the launcher's explicit flags win). Kernel-launch
    hooks and C stacks are set up when the process starts and stay as the flags set them (one
    warning line says so).

    Where memscope does better than msMemScope: the message names the key and the reason
    (msMemScope: "Set msmemscope trace config failed!"). ``call_stack="python[:N]"`` makes
    :func:`memscope.start` turn Python stacks on every row on (they stay on for the process).
    """
    if not kwargs:
        raise ValueError("memscope.config(): at least one keyword argument is required")
    values = {}
    for k, v in kwargs.items():
        key = ALIASES.get(k, k)
        if key not in KEYS:
            raise ValueError("memscope.config(%s=...): unknown key (known: %s)"
                             % (k, ", ".join(sorted(KEYS))))
        if not isinstance(v, str):
            raise TypeError("memscope.config(%s=...): the value must be a str, not %s"
                            % (k, type(v).__name__))
        if key in values:
            warnings.warn("memscope.config(): %s given twice; the second value is ignored" % k,
                          RuntimeWarning, stacklevel=2)
            continue
        values[key] = v
    s = session()
    with s.lock:
        prev = s.config or {}
        for k in ONCE:
            if k in values and k in s.config_set_once:
                warnings.warn("memscope.config(%s=...): already set once; the new value is ignored"
                              % k, RuntimeWarning, stacklevel=2)
                del values[k]
        for k in ONCE:
            if k not in values and k in s.config_set_once and k in prev:
                values[k] = prev[k] if isinstance(prev[k], str) else ",".join(prev[k])
        cfg = _check(values)
        s.config_set_once.update(k for k in ONCE if k in values)
        adapters = values.pop("adapters", None)
        if adapters is not None:
            cfg["adapters"] = _adapters(s, adapters, cfg)
        if s.mode in ("launcher", "attached"):
            cfg = _under_launcher(s, values, cfg)
            if not s.api_started and s.lib is not None:
                s.lib.memscope_py_defer()
        elif s.mode == "preloaded" and s.lib is not None:
            # every hook is preloaded: C stacks work from now on
            s.lib.memscope_py_set_c_stack(_depth(cfg, "c"))
        if s.mode in ("plain", "preloaded") and s.collector is not None:
            warnings.warn("memscope.config(): the collector of this process is already running; "
                          "the new configuration does not reach it (call config() before the "
                          "first start())", RuntimeWarning, stacklevel=2)
        if s.lib is not None:
            # the probe's memory sampler (issue 25): on, paused or a new interval from now on
            s.lib.memscope_py_set_sample(sample_ns(cfg))
        s.config = cfg
        from . import _tracer

        _tracer.stacks_wanted = python_depth(cfg) > 0
        if _tracer.stacks_wanted and s.window:
            _tracer.start_stacks()
        if "traceback" in cfg.get("events", []):
            _tracer.wanted = True
            if s.window:
                _tracer.tracer._start(standalone=False)
        else:
            _tracer.wanted = False
            if s.lib is not None and s.lib.memscope_py_trace_active():
                _tracer.tracer.stop()
    return None
