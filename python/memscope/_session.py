"""The process's connection to the probe and its collector.

Three ways this process can be traced:

* ``launcher``: started by ``memscope run`` (the probe is ``LD_PRELOAD``-ed and a collector
  follows ``MEMSCOPE_SPOOL``). Every hook works: driver (HAL), ACL, kernel launches, host
  ``malloc``, msTX, pools.
* ``attached``: ``MEMSCOPE_SPOOL`` is inherited from a traced parent but the probe is not
  preloaded (``LD_PRELOAD`` was cleared): the probe is loaded here and writes to the parent's
  collector.
* ``preloaded``: ``source msmemscope --load-api-env`` (or ``LD_PRELOAD`` set by hand) put the
  probe into every process, but no collector follows it: the probe waits, dormant, until this
  module points ``MEMSCOPE_SPOOL`` at a private spool and wakes it at import
  (``memscope_py_attach``); the first :func:`memscope.start` starts the collector as in plain
  mode. Every hook works, as under the launcher (msMemScope's Python-API mode); what happened
  before the import is not seen.
* ``plain``: ``python train.py``. At import this module sets ``MSTX_INJECTION_PATH`` to the
  probe (before the framework loads its msTX front end; the front end reads it at its first
  call), points ``MEMSCOPE_SPOOL`` at a private spool and loads the probe without making it
  global (so it interposes nothing). The first :func:`memscope.start` starts a collector
  (``memscope collect``) on that spool. What works: msTX marks and ranges, framework pool
  blocks reported through msTX (PTA, MindSpore, ATB pools), owners, steps, snapshots, the Python
  trace. What needs the launcher: driver memory (HAL) and pinned host memory, ACL events and
  kernel launches, ATB operator hooks, host ``malloc`` and C call stacks — they are hooked by
  symbol interposition, which only ``LD_PRELOAD`` gives.
"""

import atexit
import ctypes
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import warnings

from . import _locate

#: How long a plain-python process waits at exit for its collector's summary, ms.
EXIT_WAIT_MS = 30000

#: Adapters that work without the launcher (bit masks of the adapters' SOURCE ids,
#: memscope_wire::SourceId::bit).
PLAIN_ADAPTERS = "mstx,pta,mindspore,atb"
_PLAIN_MASK = (1 << 0) | (1 << 1) | (1 << 2) | (1 << 3)
#: The launcher's default adapters (all built-in ones but host): a preloaded probe's selection.
_PRELOADED_MASK = _PLAIN_MASK | (1 << 4) | (1 << 5)
PRELOADED_ADAPTERS = PLAIN_ADAPTERS + ",hal,acl"
#: Adapters shipped as plugins: their library (next to the probe), loaded when the process
#: starts if it is in ``MEMSCOPE_PLUGINS``.
PLUGIN_ADAPTERS = {"pymem": "libmemscope_adapter_pymem.so"}

LAUNCHER_NOTE = (
    "memscope: plain-python mode records msTX marks/ranges, framework pool blocks (PTA, "
    "MindSpore, ATB pools), owners, steps, snapshots and the Python trace; driver memory (HAL), "
    "ACL and kernel launches, ATB operators, host malloc and C stacks need the launcher: "
    "memscope run -- python %s" % (os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "script.py"))

_FUNCS = {
    "memscope_start": ([], ctypes.c_int),
    "memscope_stop": ([], ctypes.c_int),
    "memscope_step": ([], ctypes.c_int),
    "memscope_owner_push": ([ctypes.c_char_p], ctypes.c_int),
    "memscope_owner_pop": ([], ctypes.c_int),
    "memscope_py_status": ([], ctypes.c_int),
    "memscope_py_defer": ([], ctypes.c_int),
    "memscope_py_wait_at_exit": ([ctypes.c_int], ctypes.c_int),
    "memscope_py_barrier": ([], ctypes.c_int),
    "memscope_py_attach": ([], ctypes.c_int),
    "memscope_py_set_c_stack": ([ctypes.c_int], ctypes.c_int),
    "memscope_py_set_sample": ([ctypes.c_uint64], ctypes.c_int),
    "memscope_py_load_plugin": ([ctypes.c_char_p], ctypes.c_int),
    "memscope_py_last_error": ([], ctypes.c_char_p),
    "memscope_py_trace_start": ([], ctypes.c_int),
    "memscope_py_trace_thread": ([], ctypes.c_int),
    "memscope_py_stacks_start": ([], ctypes.c_int),
    "memscope_py_stacks_start_with": ([ctypes.c_int], ctypes.c_int),
    "memscope_py_trace_stop": ([], ctypes.c_int),
    "memscope_py_trace_active": ([], ctypes.c_int),
    "memscope_py_trace_standalone": ([ctypes.c_int], ctypes.c_int),
    "memscope_py_owner_addr": ([ctypes.c_uint64, ctypes.c_char_p], ctypes.c_int),
    "memscope_py_record_function": ([ctypes.c_char_p, ctypes.c_int], ctypes.c_int),
    "memscope_py_snapshot": ([ctypes.c_char_p, ctypes.c_uint32, ctypes.c_uint32,
                              ctypes.POINTER(ctypes.c_uint64)], ctypes.c_int),
}


class Session:
    """State of this process: mode, probe handle, collector, effective configuration."""

    def __init__(self):
        self.lock = threading.RLock()
        self.mode = None
        self.lib = None
        self.error = None
        #: shipped plugins started by config(adapters=...) after the process started
        self.late_plugins = []
        self.spool = None
        self.collector = None
        self.config = None          # effective config (memscope config.json keys), or None
        self.config_set_once = set()  # format/output_path set by config() already
        self.window = False
        self.api_started = False
        self.note_printed = False
        # extra arguments of `memscope collect` (the pytest plugin's `--windows FILE`)
        self.collect_args = []
        self._setup()

    # ---- set-up -----------------------------------------------------------------------
    def _bind(self, lib):
        for name, (args, res) in _FUNCS.items():
            f = getattr(lib, name)
            f.argtypes = args
            f.restype = res
        self.lib = lib

    def _setup(self):
        spool = os.environ.get("MEMSCOPE_SPOOL")
        try:
            glob = ctypes.PyDLL(None)
            glob.memscope_py_status  # noqa: B018 - probe preloaded?
            preloaded = True
        except AttributeError:
            preloaded = False
        if spool and preloaded:
            self.mode = "launcher"
            self.spool = spool  # `memscope run`'s: its collector answers barriers too
            self._bind(glob)
            return
        if preloaded and not spool:
            self._setup_preloaded(glob)
            return
        try:
            probe = _locate.probe()
        except RuntimeError as e:
            self.mode = "unavailable"
            self.error = str(e)
            return
        if spool and os.path.isdir(spool):
            self.mode = "attached"
        else:
            self.mode = "plain"
            self.spool = tempfile.mkdtemp(prefix="memscope_spool_")
            os.environ["MEMSCOPE_SPOOL"] = self.spool
            os.environ["MEMSCOPE_ADAPTERS"] = str(_PLAIN_MASK)
            os.environ["MEMSCOPE_COLLECT_MODE"] = "deferred"
            os.environ.pop("MEMSCOPE_C_STACK", None)
            os.environ.pop("MEMSCOPE_SAMPLE_NS", None)  # config(sample=...) turns it on
            mstx = os.environ.get("MSTX_INJECTION_PATH")
            if mstx and os.path.realpath(mstx) != os.path.realpath(probe):
                warnings.warn("memscope: MSTX_INJECTION_PATH is already set to %s (another tool); "
                              "msTX marks and framework pools are not recorded by memscope"
                              % mstx, RuntimeWarning, stacklevel=3)
            else:
                os.environ["MSTX_INJECTION_PATH"] = probe
            late = [m for m in ("torch_npu", "mindspore", "mstx") if m in sys.modules]
            if late:
                warnings.warn("memscope: imported after %s; msTX marks and framework pools are "
                              "recorded only if that framework had not called msTX yet: import "
                              "memscope first" % ", ".join(late), RuntimeWarning, stacklevel=3)
            atexit.register(self._at_exit)
        self._bind(ctypes.PyDLL(probe, mode=os.RTLD_NOW | os.RTLD_LOCAL))

    def _setup_preloaded(self, glob):
        """The probe is preloaded without a collector: give it a private spool and wake it."""
        self.mode = "preloaded"
        self.spool = tempfile.mkdtemp(prefix="memscope_spool_")
        os.environ["MEMSCOPE_SPOOL"] = self.spool
        os.environ["MEMSCOPE_ADAPTERS"] = str(_PRELOADED_MASK)
        os.environ["MEMSCOPE_COLLECT_MODE"] = "deferred"
        os.environ.pop("MEMSCOPE_SAMPLE_NS", None)  # config(sample=...) turns it on
        probe = _preloaded_probe()
        mstx = os.environ.get("MSTX_INJECTION_PATH")
        if probe and not mstx:
            os.environ["MSTX_INJECTION_PATH"] = probe
        self._bind(glob)
        atexit.register(self._at_exit)
        if not self.lib.memscope_py_attach():
            self.error = "memscope: the preloaded probe could not start recording (%s)" % (
                self.last_error() or "see the messages above")

    def _at_exit(self):
        try:
            if self.lib is not None and self.lib.memscope_py_trace_active():
                self.lib.memscope_py_trace_stop()
            if self.window and self.lib is not None:
                self.lib.memscope_stop()
        finally:
            if self.collector is None and self.spool:
                shutil.rmtree(self.spool, ignore_errors=True)
            elif self.collector is not None and self.collector.poll() is not None:
                # the collector is gone (killed): what this process recorded stays in the spool
                print(self.lost_collector_line(), file=sys.stderr)
            elif self.collector is not None:
                self._barrier()
                # The collector prints the summary once this process has its exit status,
                # which only exit() knows: the probe's exit handler waits for it (bounded),
                # so the summary comes before the shell prompt (issue 23).
                self.lib.memscope_py_wait_at_exit(EXIT_WAIT_MS)

    def lost_collector_line(self):
        """What to do when the collector died before this process ended: its records are in
        the spool, and ``memscope recover`` writes them."""
        return ("memscope: this process's collector ended (exit code %s) before it wrote "
                "everything; what was recorded is kept in %s: run `memscope recover %s` once "
                "this process has ended" % (self.collector.returncode, self.spool, self.spool))

    def _barrier(self, timeout=10.0):
        """Waits until the collector (this process's own, or ``memscope run``'s) has written
        everything this process recorded so far; returns whether it said so in time. The
        request travels in this process's stream behind what it recorded
        (``memscope_py_barrier``), and the collector answers in ``barrier.<pid>.done`` once it
        has emitted and flushed it. Callable any number of times (``stop()``, an analyzer, the
        pytest plugin after each test with a limit)."""
        if not self.spool or self.lib is None:
            return False
        n = self.lib.memscope_py_barrier()
        if n <= 0:
            return False
        done = os.path.join(self.spool, "barrier.%d.done" % os.getpid())
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and (self.collector is None
                                               or self.collector.poll() is None):
            try:
                with open(done) as f:
                    if int(f.read() or 0) >= n:
                        return True
            except (OSError, ValueError):
                pass
            time.sleep(0.005)
        return False

    def settle(self, who, timeout, stacklevel):
        """Has the collector write everything recorded so far before ``who`` returns or reads
        the files; a ``RuntimeWarning`` when it cannot (it is gone, or ``timeout`` s passed).
        Nothing to do without a collector (a passive process)."""
        if self.collector is not None and self.collector.poll() is not None:
            warnings.warn(self.lost_collector_line(), RuntimeWarning, stacklevel=stacklevel + 1)
        elif (self.collector is not None or self.mode == "launcher") and not self._barrier(timeout):
            warnings.warn("%s: the collector had not written everything recorded so far within "
                          "%d s; the files may miss the last records" % (who, timeout),
                          RuntimeWarning, stacklevel=stacklevel + 1)

    # ---- helpers ----------------------------------------------------------------------
    def require(self):
        """The probe handle; ``RuntimeError`` when memscope cannot record in this process."""
        if self.lib is None:
            raise RuntimeError(self.error or "memscope: the probe is not available")
        return self.lib

    def last_error(self):
        lib = self.require()
        msg = lib.memscope_py_last_error()
        return msg.decode("utf-8", "replace") if msg else ""

    def run_config(self):
        """The configuration ``memscope run`` was started with (launcher mode), or None."""
        text = os.environ.get("MEMSCOPE_RUN_CONFIG")
        if not text:
            return None
        try:
            return json.loads(text)
        except ValueError:
            return None

    def ask_collector(self, settings, timeout=30.0):
        """Asks the collector of ``memscope run`` to apply ``settings`` (config.json keys) to
        this process's outputs (``memscope.config()``, issue 27); returns its answer,
        ``"applied"`` or the reason it was not."""
        spool = os.environ.get("MEMSCOPE_SPOOL")
        if not spool or not os.path.isdir(spool):
            return "no collector spool"
        self.requests = getattr(self, "requests", 0) + 1
        base = os.path.join(spool, "api-config-%d-%d" % (os.getpid(), self.requests))
        try:
            with open(base + ".json.tmp", "w") as f:
                json.dump(settings, f)
            os.rename(base + ".json.tmp", base + ".json")
        except OSError as e:
            return "cannot write %s.json: %s" % (base, e)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with open(base + ".done") as f:
                    return f.read().strip() or "no answer"
            except OSError:
                time.sleep(0.01)
        return "the collector did not answer in %d s" % timeout

    def loaded_adapters(self):
        """The names of the adapters this process's probe started with (``memscope run``'s
        ``--adapters``; without the launcher, the mode's set and the shipped plugins in
        ``MEMSCOPE_PLUGINS``), or None when unknown."""
        if self.mode in ("launcher", "attached"):
            run = self.run_config()
            if run is None:
                return None
            names = list(run.get("adapters") or [])
            return names + [n for n in self.late_plugins if n not in names]
        if self.mode == "plain":
            names = PLAIN_ADAPTERS.split(",")
        elif self.mode == "preloaded":
            names = PRELOADED_ADAPTERS.split(",")
        else:
            return None
        plugins = {os.path.basename(p) for p in
                   os.environ.get("MEMSCOPE_PLUGINS", "").split(":") if p}
        return names + [n for n, lib in sorted(PLUGIN_ADAPTERS.items())
                        if lib in plugins or n in self.late_plugins]

    def load_plugin(self, name):
        """Starts the shipped plugin ``name`` (its library next to the probe) now, for
        ``config(adapters=...)``; True when it runs. Its hooks see what is allocated from then
        on."""
        lib_name = PLUGIN_ADAPTERS.get(name)
        if lib_name is None or self.lib is None:
            return False
        try:
            path = os.path.join(os.path.dirname(_locate.probe()), lib_name)
        except (OSError, RuntimeError):
            return False
        if not os.path.isfile(path) or self.lib.memscope_py_load_plugin(path.encode()) != 0:
            return False
        # pymem puts its allocator hooks in at the first audit event of an initialised
        # interpreter, with the GIL held: this one
        sys.audit("memscope.load_plugin", name)
        self.late_plugins.append(name)
        return True

    # ---- the collector of plain mode --------------------------------------------------
    def ensure_collector(self, cfg):
        """Starts ``memscope collect`` on the private spool (plain and preloaded modes, first
        start())."""
        if self.mode not in ("plain", "preloaded") or self.collector is not None:
            return
        cfg = dict(cfg)
        cfg["collect_mode"] = "deferred"
        if self.mode == "plain":
            if not self.note_printed:
                print(LAUNCHER_NOTE, file=sys.stderr)
                self.note_printed = True
            # and a shipped plugin loaded at start that config(adapters=...) named
            cfg["adapters"] = PLAIN_ADAPTERS.split(",") + [
                a for a in cfg.get("adapters") or [] if a in PLUGIN_ADAPTERS
                and a in (self.loaded_adapters() or [])]
        path = os.path.join(self.spool, "memscope-config.json")
        with open(path, "w") as f:
            json.dump(cfg, f)
        # Own session: a Ctrl-C to the job must not kill its collector before it has read
        # everything the job recorded.
        p = subprocess.Popen([_locate.cli(), "collect", "--spool", self.spool, "--pid",
                              str(os.getpid()), "--config", path] + list(self.collect_args),
                             stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
                             universal_newlines=True, start_new_session=True,
                             env=_locate.child_env())
        line = p.stdout.readline().strip()
        if line != "ready":
            p.wait()
            raise RuntimeError("memscope: the collector did not start (exit code %s)"
                               % p.returncode)
        self.collector = p


def _preloaded_probe():
    """The ``LD_PRELOAD`` entry that is memscope's probe (loaded, exporting its Python API)."""
    for entry in os.environ.get("LD_PRELOAD", "").replace(" ", ":").split(":"):
        if not entry:
            continue
        try:
            lib = ctypes.CDLL(entry, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
        except OSError:
            continue
        if hasattr(lib, "memscope_py_attach"):
            return entry
    return None


SESSION = None


def session():
    """The process-wide :class:`Session` (created on first use, i.e. at ``import memscope``)."""
    global SESSION
    if SESSION is None:
        SESSION = Session()
    return SESSION
