"""pytest plugin of memscope (issue 24): ``pytest --memscope`` measures the memory every test
allocates, with memscope's in-process Python API (``import memscope``: no relaunch), and
fails tests over their limits.

* Markers ``limit_memory("2 GiB", device=...)`` (the peak of what the test allocates) and
  ``limit_leaks("1 MiB", warmup=N, device=...)`` (what it allocated and did not free; the
  test body runs N times unmeasured first). ``device``: ``None`` (every allocator),
  ``"npu"``, ``"npu:N"``, ``"cpu"`` or ``"pymem"``.
* Defaults for every test from the ini file (``pytest.ini``, ``[tool.pytest.ini_options]`` of
  ``pyproject.toml``): ``memscope_limit_memory``, ``memscope_limit_leaks``,
  ``memscope_device``; a marker overrides them (``limit_memory(None)`` lifts the default).
* A per-test table of peak and leaks at the end; a failure names the allocating line and its
  stack.

What the in-process API sees: framework pool blocks on NPUs (PTA, MindSpore, ATB pools,
reported through msTX), torch CPU tensors (device ``cpu``), and with ``--memscope-pymem``
Python objects (``pymem``: the PYMEM adapter loaded into this process). What it cannot see:
driver memory (HAL) and pinned host memory, host ``malloc``, ACL, kernel launches and C
stacks — they are hooked by ``LD_PRELOAD``, which only ``memscope run`` gives; the plugin
refuses to run under ``memscope run`` rather than measure half of it.

This module imports nothing of memscope until ``--memscope`` is given: installing the wheel
changes nothing for other pytest runs.
"""

import importlib.util
import json
import os

import pytest

from ._limits import DEVICES, Limit, check_device, device_name, size

SEES = ("framework pool blocks on NPUs (PTA, MindSpore, ATB through msTX), torch CPU tensors "
        "(cpu)%s")
CANNOT = ("driver memory (HAL), pinned and host malloc memory, ACL, kernel launches and C "
          "stacks need the launcher (LD_PRELOAD) and are not measured")


def pytest_addoption(parser):
    g = parser.getgroup("memscope", "memory limits of tests (memscope)")
    g.addoption("--memscope", action="store_true", default=False,
                help="measure each test's memory with memscope and check its limit_memory / "
                     "limit_leaks markers and the ini defaults")
    g.addoption("--memscope-output", metavar="DIR", default=None,
                help="where the dumps go [default: ./memscopeDumpResults]")
    g.addoption("--memscope-pymem", action="store_true", default=None,
                help="also record Python objects (device 'pymem'; slower: every Python "
                     "allocation of a test is recorded)")
    g.addoption("--memscope-stack", metavar="N", type=int, default=16,
                help="Python frames kept per allocation [default: 16]")
    parser.addini("memscope_limit_memory", "default limit_memory of every test (e.g. 2 GiB)",
                  default="")
    parser.addini("memscope_limit_leaks", "default limit_leaks of every test (e.g. 1 MiB)",
                  default="")
    parser.addini("memscope_device", "device of the default limits: npu, npu:N, cpu or pymem "
                  "[default: every allocator]", default="")
    parser.addini("memscope_pymem", "record Python objects too (as --memscope-pymem)",
                  type="bool", default=False)


def _enabled(config):
    return bool(config.getoption("memscope", default=False))


def _pymem_wanted(config, ns=None):
    if ns is not None:
        opt = getattr(ns, "memscope_pymem", None)
    else:
        opt = config.getoption("memscope_pymem", default=None)
    return bool(opt) if opt is not None else bool(config.getini("memscope_pymem"))


def _locate_module():
    """memscope's ``_locate`` without importing the package (whose import loads the probe)."""
    spec = importlib.util.find_spec("memscope")
    if spec is None or not spec.submodule_search_locations:
        raise pytest.UsageError("pytest --memscope: the memscope package is not importable")
    path = os.path.join(list(spec.submodule_search_locations)[0], "_locate.py")
    ls = importlib.util.spec_from_file_location("_memscope_locate_for_pytest", path)
    mod = importlib.util.module_from_spec(ls)
    ls.loader.exec_module(mod)
    return mod


def _prepare(config, ns=None):
    """Sets up memscope before the test modules import their frameworks (msTX injection) and,
    with pymem, loads the PYMEM adapter with the probe. Idempotent. ``ns``: the early
    arguments (before ``config.option`` is filled in)."""
    if getattr(config, "_memscope_ready", False):
        return
    config._memscope_ready = True
    if os.environ.get("MEMSCOPE_SPOOL") and os.environ.get("LD_PRELOAD", "").find(
            "libmemscope_probe") >= 0:
        raise pytest.UsageError(
            "pytest --memscope measures in-process: run pytest directly, not under "
            "`memscope run` (whose collector does not give per-test figures)")
    config._memscope_pymem = False
    if _pymem_wanted(config, ns):
        loc = _locate_module()
        try:
            probe = loc.probe()
        except RuntimeError as e:
            raise pytest.UsageError("pytest --memscope: %s" % e)
        lib = os.path.join(os.path.dirname(probe), "libmemscope_adapter_pymem.so")
        if os.path.isfile(lib):
            old = os.environ.get("MEMSCOPE_PLUGINS")
            os.environ["MEMSCOPE_PLUGINS"] = lib + (":" + old if old else "")
            config._memscope_pymem = True
        else:
            config._memscope_pymem_missing = lib
    import memscope  # noqa: F401 - sets up the probe and MSTX_INJECTION_PATH now


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config, parser, args):
    if getattr(early_config.known_args_namespace, "memscope", False):
        _prepare(early_config, early_config.known_args_namespace)


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "limit_memory(limit, device=None): fail the test when the memory it "
        "allocates peaks above limit (e.g. '2 GiB') on device (%s); needs --memscope" % DEVICES)
    config.addinivalue_line(
        "markers", "limit_leaks(limit, warmup=0, device=None): fail the test when it leaves "
        "more than limit allocated (after warmup unmeasured runs); needs --memscope")
    if _enabled(config):
        _prepare(config)
        config.pluginmanager.register(MemscopePlugin(config), "memscope-plugin")


def _marker_limit(item, kind, default, default_device):
    m = item.get_closest_marker("limit_" + kind)
    origin = "limit_%s marker of %s" % (kind, item.nodeid)
    if m is None:
        if not default:
            return None
        return Limit(kind, default, default_device or None, "memscope_limit_%s in the ini" % kind)
    if not m.args and "limit" not in m.kwargs:
        raise pytest.UsageError("%s: give the limit, e.g. limit_%s('1 MiB')" % (origin, kind))
    text = m.args[0] if m.args else m.kwargs["limit"]
    if text is None:
        return None
    warmup = m.kwargs.get("warmup", 0)
    if kind == "leaks" and (not isinstance(warmup, int) or warmup < 0):
        raise pytest.UsageError("%s: warmup=%r: expected a count >= 0" % (origin, warmup))
    device = m.kwargs.get("device", default_device or None)
    try:
        return Limit(kind, text, device, origin, warmup if kind == "leaks" else 0)
    except ValueError as e:
        raise pytest.UsageError(str(e))


class MemscopePlugin:
    """The per-test windows, the limit checks and the table."""

    def __init__(self, config):
        import memscope

        self.config = config
        self.memscope = memscope
        self.session = memscope._session()
        if self.session.mode != "plain":
            raise pytest.UsageError("pytest --memscope: memscope cannot record in this process "
                                    "(%s)" % (self.session.error or self.session.mode))
        self.lib = self.session.require()
        out = config.getoption("memscope_output") or "memscopeDumpResults"
        self.windows_path = os.path.join(self.session.spool, "memscope_windows.jsonl")
        self.session.collect_args = ["--windows", self.windows_path]
        depth = max(1, min(1000, int(config.getoption("memscope_stack") or 16)))
        self.pymem = bool(getattr(config, "_memscope_pymem", False))
        missing = getattr(config, "_memscope_pymem_missing", None)
        if missing:
            config.issue_config_time_warning(pytest.PytestWarning(
                "memscope: --memscope-pymem: %s is missing; Python objects are not measured"
                % missing), stacklevel=2)
        self.default_memory = config.getini("memscope_limit_memory").strip()
        self.default_leaks = config.getini("memscope_limit_leaks").strip()
        self.default_device = config.getini("memscope_device").strip()
        try:
            check_device(self.default_device or None, "memscope_device in the ini")
            for k, v in (("memory", self.default_memory), ("leaks", self.default_leaks)):
                if v:
                    Limit(k, v, None, "memscope_limit_%s in the ini" % k)
        except ValueError as e:
            raise pytest.UsageError(str(e))
        memscope.config(device="npu,cpu", events="alloc,free", analysis="none",
                        call_stack="python:%d" % depth, output_path=os.path.abspath(out))
        import contextlib
        import io

        self.session.note_printed = True  # the table at the end says what is measured
        with contextlib.redirect_stdout(io.StringIO()):
            memscope.start()
            memscope.stop()
        self.windows = 1          # the start()/stop() above was window 1
        self.records = {}
        self.offset = 0
        self.tests = []           # (nodeid, window, limits)
        self.results = {}         # nodeid -> failure message

    # ---- the windows -------------------------------------------------------------------
    @pytest.hookimpl(hookwrapper=True)
    def pytest_pyfunc_call(self, pyfuncitem):
        limits = [x for x in (
            _marker_limit(pyfuncitem, "memory", self.default_memory, self.default_device),
            _marker_limit(pyfuncitem, "leaks", self.default_leaks, self.default_device),
        ) if x is not None]
        warmup = max([x.warmup for x in limits] + [0])
        if warmup:
            names = pyfuncitem._fixtureinfo.argnames
            args = {n: pyfuncitem.funcargs[n] for n in names}
            for _ in range(warmup):
                pyfuncitem.obj(**args)
        if self.lib.memscope_start() != 0:
            yield
            return
        self.windows += 1
        window = self.windows
        try:
            yield
        finally:
            self.lib.memscope_stop()
        self.tests.append((pyfuncitem.nodeid, window, limits))
        if limits:
            rec = self._record(window)
            msgs = []
            for lim in limits:
                if lim.device == "pymem" and not self.pymem:
                    msgs.append(None)
                    pyfuncitem.warn(pytest.PytestWarning(
                        "memscope: %s not checked: Python objects are recorded only with "
                        "--memscope-pymem (or memscope_pymem = true in the ini)" % lim.describe()))
                    continue
                if rec is None:
                    pyfuncitem.warn(pytest.PytestWarning(
                        "memscope: %s not checked: the collector did not report this test"
                        % lim.describe()))
                    continue
                msgs.append(lim.check(rec, str(pyfuncitem.path)))
            failed = [m for m in msgs if m]
            if failed:
                self.results[pyfuncitem.nodeid] = "\n".join(failed)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        rep = outcome.get_result()
        if call.when != "call" or not rep.passed:
            return
        msg = self.results.get(item.nodeid)
        if msg:
            rep.outcome = "failed"
            rep.longrepr = msg

    # ---- the collector's records -------------------------------------------------------
    def _read(self):
        try:
            with open(self.windows_path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except OSError:
            return
        end = data.rfind(b"\n") + 1
        self.offset += end
        for line in data[:end].splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            self.records[rec.get("window")] = rec

    def _record(self, window, timeout=30.0):
        """The collector's record of ``window`` (waits for the collector to write it)."""
        import time

        deadline = time.monotonic() + timeout
        while True:
            self._read()
            if window in self.records:
                return self.records[window]
            if time.monotonic() > deadline or self.session.collector is None:
                return None
            if self.session.collector.poll() is not None:
                return None
            self.session._barrier(timeout=max(0.1, deadline - time.monotonic()))

    # ---- the table ---------------------------------------------------------------------
    def pytest_terminal_summary(self, terminalreporter):
        tr = terminalreporter
        if self.tests:
            self._record(self.tests[-1][1])
        tr.section("memscope")
        tr.write_line("measured in-process: " + SEES % (
            ", Python objects (pymem)" if self.pymem else
            "; Python objects (pymem) with --memscope-pymem"))
        tr.write_line("not measured: " + CANNOT)
        rows = []
        for nodeid, window, limits in self.tests:
            rec = self.records.get(window)
            allocs = [a for a in (rec or {}).get("allocators", [])
                      if not a["allocator"].endswith("_ARENA")]
            lims = ", ".join("%s %s" % ("peak" if x.kind == "memory" else "leaks", size(x.max))
                             for x in limits) or "-"
            status = _status(nodeid in self.results, limits, rec or {})
            if rec is None:
                rows.append((nodeid, "?", "?", "not reported", "", lims, status))
                continue
            if not allocs:
                rows.append((nodeid, "-", "-", "not recorded", "not recorded", lims, status))
            for a in allocs:
                rows.append((nodeid, device_name(a), a["allocator"], size(a["peak_bytes"]),
                             size(a["leaked_bytes"]) if a.get("leaked_bytes") is not None
                         else "not judged", lims, status))
        head = ("test", "device", "allocator", "peak", "leaked", "limits", "")
        widths = [max(len(str(r[i])) for r in rows + [head]) for i in range(len(head))]
        for r in [head] + rows:
            tr.write_line("  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip())
        out = self.config.getoption("memscope_output") or "memscopeDumpResults"
        tr.write_line("dumps: %s (written when this process exits)" % os.path.abspath(out))


def _status(failed, limits, rec):
    """The table's last column: ``FAILED``, ``ok``, or ``not recorded`` for limits whose
    allocators the test's window did not record (they were not checked)."""
    if failed:
        return "FAILED"
    if not limits:
        return ""
    absent = [x for x in limits if not x.recorded(rec)]
    if not absent:
        return "ok"
    if len(absent) == len(limits):
        return "not recorded"
    return "ok; not recorded: " + ", ".join(x.describe() for x in absent)

