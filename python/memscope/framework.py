"""``memscope.framework``: msMemScope's one-click framework hooks (behaviour spec §7),
``init_framework_hooks`` / ``cleanup_framework_hooks`` over :mod:`memscope.framework_hooks`
(which also holds the table and the automatic role hooks of ``analysis="decompose"``), and
``enable_npu_sanitizer`` (:mod:`memscope.sanitizer`).

Where memscope differs from msMemScope: vLLM's ``load_model`` and
``initialize_kv_cache_tensors`` tag the model's tensors and the KV cache after the call;
a bad framework, component or hook type raises ``ValueError`` naming it (msMemScope prints an
error and returns), a version the table lacks hooks nothing and says so in one line."""

from . import framework_hooks
from ._session import session
from .sanitizer import enable_npu_sanitizer  # noqa: F401
from .take_snapshot import take_snapshot


def _hooks():
    h = framework_hooks.hooks()
    h.snapshot_fn = take_snapshot
    return h


def init_framework_hooks(framework, version, component, hook_type):
    """Hooks the framework table's entries for ``framework`` (``pytorch``, ``vllm_ascend``,
    ``verl``, ``mindspeed_llm``) at ``version`` (``"2.7.1"``), ``component`` (``optimizer``,
    ``fsdp1``, ``fsdp2``, ``worker``, ``TaskRunner``, ``training``) and ``hook_type``
    (``decompose``: owner labels and role tags; ``snapshot``: a SNAPSHOT row before and after
    each hooked call), now or when their modules are imported.

    Only what exists is hooked: a version the table does not know hooks nothing and says so in
    one line on stderr, and so does each target the installed version lacks. A manual
    ``decompose`` registration replaces the automatic one of ``analysis="decompose"``.
    Returns the number of table entries registered (0 when nothing matched).
    Raises ``TypeError`` for an argument that is not a ``str``, ``ValueError`` naming an
    unknown framework, component or hook type.
    """
    return _hooks().init_framework_hooks(session().require(), framework, version, component,
                                         hook_type)


def cleanup_framework_hooks():
    """Removes every framework hook (manual and automatic); returns how many were removed."""
    n = _hooks().cleanup_framework_hooks()
    print("[memscope] Info: %d framework hook(s) removed" % n)
    return n

