"""memscope: memory analysis for AI jobs, msMemScope-compatible (``import msmemscope`` API).

Three ways to run, same rows: under the launcher (``memscope run -- python train.py``, every
hook available); after ``source msmemscope --load-api-env`` (the probe preloaded, every hook);
or plain ``python train.py``, where the first :func:`start` starts a collector and msTX marks,
framework pools, owners, steps, snapshots and the Python trace are recorded (driver/ACL/kernel/
host hooks need the probe preloaded; see ``memscope._session``).

API: :func:`config`, :func:`start`, :func:`stop`, :func:`step`, :func:`take_snapshot`,
:class:`TakeSnapshot`, :data:`describer`, :class:`RecordFunction`, :data:`tracer`,
:mod:`memscope.analyzer`, :func:`init_framework_hooks`, :func:`cleanup_framework_hooks`
(:mod:`memscope.framework`).
"""

import sys as _sys

if _sys.version_info < (3, 9):
    raise ImportError("memscope needs Python 3.9 or newer")

from . import analyzer, watcher  # noqa: E402
from ._api import start, step, stop  # noqa: E402
from ._config import config  # noqa: E402
from ._session import session as _session  # noqa: E402
from ._tracer import tracer  # noqa: E402
from .analyzer import (  # noqa: E402
    analyze,
    check_inefficient,
    check_leaks,
    get_analyzer_config,
    list_analyzers,
)
from .describe import describer  # noqa: E402
from .framework import (  # noqa: E402
    cleanup_framework_hooks,
    enable_npu_sanitizer,
    init_framework_hooks,
)
from .record_function import RecordFunction  # noqa: E402
from .take_snapshot import TakeSnapshot, take_snapshot  # noqa: E402

__version__ = "0.1.0"

# Set up at import: in a plain `python` process this points the framework's msTX front end
# at the probe before the framework loads (MSTX_INJECTION_PATH).
_session()

_env = __import__("os").environ
if "1" in (_env.get("MEMSCOPE_PY_TRACE"), _env.get("MEMSCOPE_PY_STACK")) \
        and _session().mode != "unavailable":
    # `memscope run --events traceback` / `--call-stack python`: its bootstrap started the
    # tracer or the stacks already when the job
    # runs Python with site enabled; make sure threads of this process get it too.
    from ._tracer import _thread_hook as _h

    __import__("threading").setprofile(_h)

__all__ = ["config", "start", "stop", "step", "take_snapshot", "TakeSnapshot", "describer",
           "RecordFunction", "tracer", "analyzer", "analyze", "list_analyzers",
           "get_analyzer_config", "check_leaks", "check_inefficient", "watcher",
           "init_framework_hooks", "cleanup_framework_hooks", "enable_npu_sanitizer"]
