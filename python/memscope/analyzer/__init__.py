"""``memscope.analyzer``: msMemScope's offline analyzers, run by the memscope CLI's Rust
analyses (``memscope analyze leaks|inefficient``), not re-implemented in Python.

As in msMemScope, ``check_inefficient``, ``analyze("inefficient", ...)`` and
``InefficientAnalyzer`` rewrite the input file with the annotations (``memscope analyze
inefficient --in-place``; the CLI without ``--in-place`` writes a new annotated copy instead), so
a script reads the input afterwards. The file is replaced in one rename: a reader sees the old
file or the annotated one, never a part. Differences from msMemScope: the leak check also reads
memscope's dumps; bad arguments raise ``TypeError``/``ValueError`` naming the argument.

memscope's own additions: ``check_fragmentation`` and ``decompose`` (issue 25).

Called in a process that memscope records in plain-python mode, every analyzer first waits
(bounded) until this process's collector has written everything recorded so far, so a dump read
right after ``memscope.stop()`` holds the whole window.
"""

import inspect
import os
import sys

from .. import _locate
from .. import _session

MAX_FILE_SIZE = 8 << 30
MAX_PATH = 4096
INEFFICIENT_TYPES = ("early_allocation", "late_deallocation", "temporary_idleness")
#: How long an analyzer waits for this process's own collector to write what was recorded (s):
#: a collector with a backlog on a busy machine catches up in seconds, never silently skipped.
SETTLE_S = 60


def _input_path(cls, input_path, suffixes):
    if not isinstance(input_path, (str, os.PathLike)):
        raise TypeError("%s(input_path=...): expected a path (str), not %s"
                        % (cls, type(input_path).__name__))
    p = os.fspath(input_path)
    if len(p) > MAX_PATH:
        raise ValueError("%s(input_path=...): longer than %d characters" % (cls, MAX_PATH))
    if os.path.islink(p):
        raise ValueError("%s(input_path=%r): is a symbolic link" % (cls, p))
    if not os.path.isfile(p):
        raise FileNotFoundError("%s(input_path=%r): not a regular file" % (cls, p))
    if not os.access(p, os.R_OK):
        raise PermissionError("%s(input_path=%r): not readable" % (cls, p))
    if os.path.getsize(p) > MAX_FILE_SIZE:
        raise ValueError("%s(input_path=%r): larger than 8 GiB" % (cls, p))
    if os.path.splitext(p)[1].lower() not in suffixes:
        raise ValueError("%s(input_path=%r): expected a %s file"
                         % (cls, p, " or ".join(suffixes)))
    return os.path.abspath(p)


def _int(cls, name, v, low):
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError("%s(%s=...): expected an int, not %s" % (cls, name, type(v).__name__))
    if v < low:
        raise ValueError("%s(%s=%d): must be at least %d" % (cls, name, v, low))
    return v


class AnalysisConfig:
    """Common part of the analyzer configurations: the dump file."""

    def __init__(self, input_path):
        self.input_path = input_path


class LeaksConfig(AnalysisConfig):
    """Configuration of the mark-range HAL leak check (msMemScope ``LeaksConfig``)."""

    def __init__(self, input_path, mstx_info, start_index):
        super().__init__(_input_path("LeaksConfig", input_path, (".csv",)))
        if not isinstance(mstx_info, str):
            raise TypeError("LeaksConfig(mstx_info=...): expected a str, not %s"
                            % type(mstx_info).__name__)
        if not mstx_info.strip():
            raise ValueError("LeaksConfig(mstx_info=...): must not be empty or blank")
        self.mstx_info = mstx_info
        self.start_index = _int("LeaksConfig", "start_index", start_index, 0)


class InefficientConfig(AnalysisConfig):
    """Configuration of the inefficient-memory check (msMemScope ``InefficientConfig``)."""

    def __init__(self, input_path, mem_size=0, inefficient_type=None, idle_threshold=3000):
        super().__init__(_input_path("InefficientConfig", input_path, (".csv", ".db")))
        # the file is rewritten (msMemScope checks the same)
        if not os.access(self.input_path, os.W_OK):
            raise PermissionError("InefficientConfig(input_path=%r): not writable (the analysis "
                                  "rewrites it)" % self.input_path)
        self.mem_size = _int("InefficientConfig", "mem_size", mem_size, 0)
        if inefficient_type is None:
            types = list(INEFFICIENT_TYPES)
        elif isinstance(inefficient_type, str):
            types = [inefficient_type]
        elif isinstance(inefficient_type, (list, tuple)):
            types = list(inefficient_type)
        else:
            raise TypeError("InefficientConfig(inefficient_type=...): expected a str or a list "
                            "of str, not %s" % type(inefficient_type).__name__)
        if not types:
            raise ValueError("InefficientConfig(inefficient_type=...): must not be empty")
        for t in types:
            if t not in INEFFICIENT_TYPES:
                raise ValueError("InefficientConfig(inefficient_type=%r): not one of %s"
                                 % (t, ", ".join(INEFFICIENT_TYPES)))
        self.inefficient_type = types
        self.idle_threshold = _int("InefficientConfig", "idle_threshold", idle_threshold, 1)


def _settle():
    """The collector (this process's own, or ``memscope run``'s) writes everything recorded so
    far before an analyzer reads its files: records wait a reorder window in the collector."""
    s = _session.SESSION
    if s is not None:
        with s.lock:
            s.settle("memscope.analyzer", SETTLE_S, stacklevel=3)


def _run(args):
    _settle()
    r = _locate.run_cli(args)
    if r.returncode != 0:
        raise RuntimeError("memscope %s failed with exit code %d" % (args[1], r.returncode))


class LeaksAnalyzer:
    """Runs ``memscope analyze leaks FILE --mstx-info M --start-index N`` (prints the report).
    Raises ``RuntimeError`` when it fails, e.g. when no device has the 3 marks the range
    needs."""

    def analyze(self, config):
        if not isinstance(config, LeaksConfig):
            raise TypeError("LeaksAnalyzer.analyze(config): expected a LeaksConfig")
        sys.stdout.flush()
        _run(["analyze", "leaks", config.input_path, "--mstx-info", config.mstx_info,
              "--start-index", str(config.start_index)])


class InefficientAnalyzer:
    """Runs ``memscope analyze inefficient FILE --in-place`` (prints the findings, rewrites the
    input with the annotations, as msMemScope does)."""

    def analyze(self, config):
        if not isinstance(config, InefficientConfig):
            raise TypeError("InefficientAnalyzer.analyze(config): expected an InefficientConfig")
        sys.stdout.flush()
        _run(["analyze", "inefficient", config.input_path, "--in-place",
              "--mem-size", str(config.mem_size),
              "--types", ",".join(config.inefficient_type),
              "--idle-threshold", str(config.idle_threshold)])


_ANALYZERS = {"leaks": (LeaksAnalyzer, LeaksConfig),
              "inefficient": (InefficientAnalyzer, InefficientConfig)}


def list_analyzers():
    """``["leaks", "inefficient"]``."""
    return list(_ANALYZERS)


def _kind(analyzer_type):
    if not isinstance(analyzer_type, str):
        raise TypeError("analyzer_type: expected a str, not %s" % type(analyzer_type).__name__)
    if analyzer_type not in _ANALYZERS:
        raise ValueError("Unknown analyzer type: %s. Available types are %s"
                         % (analyzer_type, list(_ANALYZERS)))
    return _ANALYZERS[analyzer_type]


def get_analyzer_config(analyzer_type):
    """``{"config_class": ..., "parameters": [...]}`` of an analyzer."""
    cls = _kind(analyzer_type)[1]
    params = list(inspect.signature(cls.__init__).parameters)[1:]
    return {"config_class": cls.__name__, "parameters": params}


def analyze(analyzer_type, **kwargs):
    """Builds the analyzer's configuration from ``kwargs`` and runs it."""
    analyzer, cfg = _kind(analyzer_type)
    try:
        config = cfg(**kwargs)
    except TypeError as e:
        if "argument" in str(e):
            raise TypeError("analyze(%r, ...): %s" % (analyzer_type, e)) from None
        raise
    return analyzer().analyze(config)


def check_leaks(input_path, mstx_info, start_index):
    """HAL leaks between the msTX marks ``mstx_info`` number ``start_index`` .. +2."""
    return LeaksAnalyzer().analyze(LeaksConfig(input_path, mstx_info, start_index))


def check_inefficient(input_path, mem_size=0, inefficient_type=None, idle_threshold=3000):
    """Inefficient PTA/ATB blocks of a dump (all three types unless ``inefficient_type``)."""
    return InefficientAnalyzer().analyze(
        InefficientConfig(input_path, mem_size, inefficient_type, idle_threshold))


def _any_input(func, input_path):
    if not isinstance(input_path, (str, os.PathLike)):
        raise TypeError("%s(input_path=...): expected a path (str), not %s"
                        % (func, type(input_path).__name__))
    p = os.fspath(input_path)
    if not os.path.exists(p):
        raise FileNotFoundError("%s(input_path=%r): no such file or directory" % (func, p))
    return os.path.abspath(p)


def _text(args):
    _settle()
    r = _locate.run_cli(args, stdout=-1, stderr=-1)
    if r.returncode != 0:
        msg = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "failed"
        raise RuntimeError("memscope %s: %s" % (" ".join(args[:2]), msg))
    sys.stdout.write(r.stdout)
    sys.stdout.flush()
    return r.stdout.splitlines()


def check_fragmentation(input_path, request=None, at_step=None):
    """memscope's own (issue 25): ``memscope analyze fragmentation`` of a dump, a capture
    (``.mscap``), a process or a run directory — per device and pool the free bytes inside
    segments, free extents, the largest one and the fragmentation, and a verdict at each OOM
    (fragmentation, held by other processes, true shortage); with ``request`` (bytes, or a str
    such as ``"96MiB"``) also the verdict on that request at the end of step ``at_step`` (or of
    the run). Prints the report and returns its lines."""
    args = ["analyze", "fragmentation", _any_input("check_fragmentation", input_path)]
    if request is not None:
        if isinstance(request, bool) or not isinstance(request, (int, str)):
            raise TypeError("check_fragmentation(request=...): expected bytes (int) or a size "
                            "str, not %s" % type(request).__name__)
        args += ["--request", str(request)]
    if at_step is not None:
        if request is None:
            raise ValueError("check_fragmentation(at_step=...): goes with request=...")
        args += ["--at", "step:%d" % _int("check_fragmentation", "at_step", at_step, 1)]
    return _text(args)


def decompose(input_path, output_path="memscopeDumpResults"):
    """memscope's own: ``memscope analyze decompose`` of a dump, a capture or a run directory —
    bytes per owner chain and, when blocks have roles (issue 25), per role (weight, gradient,
    optimizer_state, activation by module, …) at the peak and at the end; writes
    ``decompose_<ts>.csv`` into ``output_path``. Prints the report and returns its lines."""
    if not isinstance(output_path, (str, os.PathLike)):
        raise TypeError("decompose(output_path=...): expected a path (str), not %s"
                        % type(output_path).__name__)
    path = _any_input("decompose", input_path)
    full = ["--full"] if os.path.isdir(path) else []
    return _text(["analyze", "decompose", path, "-o", os.fspath(output_path)] + full)


__all__ = ["analyze", "list_analyzers", "get_analyzer_config", "check_leaks",
           "check_inefficient", "check_fragmentation", "decompose", "LeaksAnalyzer",
           "InefficientAnalyzer", "LeaksConfig", "InefficientConfig"]
