"""``import msmemscope``: msMemScope's Python API, served by memscope (issue 26).

Scripts written for msMemScope run unchanged: every name of its module is memscope's own
function of the same name (:mod:`memscope`), and its submodules are memscope's —
``msmemscope.analyzer`` (``LeaksAnalyzer``, ``LeaksConfig``, ``InefficientAnalyzer``,
``InefficientConfig``), ``msmemscope.describe`` (``describer``), ``msmemscope.watcher``,
``msmemscope.take_snapshot``, ``msmemscope.record_function``. As with msMemScope, run them
after ``source msmemscope --load-api-env`` (every hook, the probe preloaded) or under
``msmemscope python train.py``; plain ``python train.py`` works too, with the sources plain
mode has (see :mod:`memscope`).
"""

import sys

import memscope as _memscope
from memscope import (  # noqa: F401  (msMemScope's names)
    RecordFunction,
    TakeSnapshot,
    analyze,
    analyzer,
    check_inefficient,
    check_leaks,
    config,
    describer,
    get_analyzer_config,
    list_analyzers,
    start,
    step,
    stop,
    take_snapshot,
    tracer,
    watcher,
)
from memscope.framework import (  # noqa: F401
    cleanup_framework_hooks,
    enable_npu_sanitizer,
    init_framework_hooks,
)

__version__ = _memscope.__version__


# `msmemscope.X` is `memscope.X`, the same module object (`import memscope` imports them all).
for _name, _mod in list(sys.modules.items()):
    if _name.startswith("memscope."):
        _alias = __name__ + _name[len("memscope"):]
        sys.modules.setdefault(_alias, _mod)
        _child = _alias[len(__name__) + 1:]
        if "." not in _child and not _child.startswith("_") and _child not in globals():
            globals()[_child] = _mod  # `import msmemscope.describe; msmemscope.describe...`
del _name, _mod, _alias, _child

__all__ = ["config", "start", "stop", "step", "take_snapshot", "TakeSnapshot", "describer",
           "RecordFunction", "tracer", "watcher", "analyzer", "analyze", "list_analyzers",
           "get_analyzer_config", "check_leaks", "check_inefficient", "init_framework_hooks",
           "cleanup_framework_hooks", "enable_npu_sanitizer"]
