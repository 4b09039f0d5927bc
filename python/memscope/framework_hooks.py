"""What holds the memory (issue 25): framework hooks that tag blocks by role, without changes
to the job's code, and msMemScope's ``init_framework_hooks`` / ``cleanup_framework_hooks``.

With the decompose analysis on (``memscope run --analysis decompose``, or
``memscope.config(analysis="decompose")`` then ``start()``), when torch is imported:

* every ``nn.Module`` forward runs under the owner labels ``activation@<module path>`` (the
  innermost module; paths as ``named_modules()`` names them from the outermost module called,
  e.g. ``model.layers.3.mlp``), so the blocks it allocates are ``PTA@activation@...`` (``HOST@``
  for CPU tensors with ``--device cpu``);
* the parameters of a module are tagged ``weight`` when it is first called;
* after every ``optimizer.step()`` each parameter is tagged ``weight``, its gradient
  ``gradient`` and each optimizer state tensor ``optimizer_state``;
* the decompose entries of the framework table (FSDP1, FSDP2, vLLM-Ascend) are hooked where
  their modules exist.

A tag names a live block by its start address (the tensor's storage); the collector writes a
``MEMORY_OWNER`` row and the analyses count the block under that role from its MALLOC on.
Everything else is ``temp``.

Self-contained (only the standard library, and torch when the job has it): ``memscope run``
writes this file into the job's Python bootstrap as ``memscope_framework_hooks``; the
``memscope`` package uses that copy when it is loaded, so hooks are never installed twice.
A hook never breaks the job: any error in it is reported once and the job goes on.
"""

import ctypes
import functools
import sys
import threading
import weakref

_lib = None
_enabled = False
_local = threading.local()
_roots = weakref.WeakKeyDictionary()
_handles = []
_warned = set()
snapshot_fn = None  # set by the memscope package (take_snapshot), for snapshot hooks


def hooks():
    """The framework-hook module in force in this process: the launcher's bootstrap copy
    (``memscope_framework_hooks``) when ``memscope run`` installed it, else this one."""
    return sys.modules.get("memscope_framework_hooks") or sys.modules[__name__]


def _say_once(key, msg):
    if key not in _warned:
        _warned.add(key)
        print("memscope: %s" % msg, file=sys.stderr)


# ---- the probe's owner API ---------------------------------------------------------------

def _bind(lib):
    for name, args in (("memscope_owner_push", [ctypes.c_char_p]),
                       ("memscope_owner_pop", []),
                       ("memscope_py_owner_addr", [ctypes.c_uint64, ctypes.c_char_p])):
        f = getattr(lib, name)
        f.argtypes, f.restype = args, ctypes.c_int
    return lib


def _push(labels):
    for label in labels:
        _lib.memscope_owner_push(label.encode("utf-8", "replace"))


def _pop(n):
    for _ in range(n):
        _lib.memscope_owner_pop()


def _tensor_addr(t):
    """Start of a tensor's storage (a DTensor's local shard); None for meta tensors and empty
    storages."""
    local = getattr(t, "_local_tensor", None)
    if local is not None:
        t = local
    try:
        if t.device.type == "meta":
            return None
        addr = t.untyped_storage().data_ptr()
    except Exception:  # noqa: BLE001 - not a plain tensor
        return None
    return addr or None


def tag(tensor, label, seen=None):
    """Tags the live block holding ``tensor`` with owner ``label`` (levels joined by ``@``).
    The leading ``@`` sent marks a framework tag: the collector ignores it quietly when no
    block it follows starts there (a CPU tensor without ``--device cpu``)."""
    addr = _tensor_addr(tensor)
    if addr is None or (seen is not None and addr in seen):
        return
    if seen is not None:
        seen.add(addr)
    _lib.memscope_py_owner_addr(addr, ("@" + label).encode("utf-8", "replace"))


# ---- activations by module, weights at first call ------------------------------------------

def _stack():
    s = getattr(_local, "stack", None)
    if s is None:
        s = _local.stack = []
    return s


def _path(module, stack):
    if stack:
        names = _roots.get(stack[0][0])
        if names is not None:
            name = names.get(id(module))
            if name is not None:
                return name or type(stack[0][0]).__name__
        return "%s.%s" % (stack[-1][1], type(module).__name__)
    return None


def _root(module):
    names = _roots.get(module)
    if names is None:
        names = {id(m): n for n, m in module.named_modules()}
        _roots[module] = names
        seen = set()
        for p in module.parameters():
            tag(p, "weight", seen)
    return type(module).__name__


def _pre_forward(module, args):
    if not _enabled:
        return None
    try:
        stack = _stack()
        path = _path(module, stack) if stack else _root(module)
        if stack:
            _pop(2)
        _push(("activation", path))
        stack.append((module, path))
    except Exception as e:  # noqa: BLE001 - never break the job's forward
        _say_once("pre", "framework hooks: module hook failed (%s); activations untagged" % e)
    return None


def _post_forward(module, args, output):
    if not _enabled:
        return None
    try:
        stack = _stack()
        if stack and stack[-1][0] is module:
            stack.pop()
            _pop(2)
            if stack:
                _push(("activation", stack[-1][1]))
    except Exception as e:  # noqa: BLE001
        _say_once("post", "framework hooks: module hook failed (%s)" % e)
    return None


def _optimizer_step(opt, args, kwargs):
    if _lib is None:
        return
    try:
        seen = set()
        for group in opt.param_groups:
            for p in group["params"]:
                tag(p, "weight", seen)
                if p.grad is not None:
                    tag(p.grad, "gradient", seen)
                for v in opt.state.get(p, {}).values():
                    if hasattr(v, "untyped_storage"):
                        tag(v, "optimizer_state", seen)
    except Exception as e:  # noqa: BLE001
        _say_once("opt", "framework hooks: optimizer hook failed (%s)" % e)


def _install_torch(torch):
    mod = torch.nn.modules.module
    try:
        _handles.append(mod.register_module_forward_pre_hook(_pre_forward))
        try:
            _handles.append(mod.register_module_forward_hook(_post_forward, always_call=True))
        except TypeError:  # torch < 2.1: no always_call
            _handles.append(mod.register_module_forward_hook(_post_forward))
    except AttributeError:
        _say_once("mod", "framework hooks: this torch has no global module hooks; "
                         "activations untagged")
    _install_optimizer(torch)


_optimizer_handle = []


def _install_optimizer(torch):
    if _optimizer_handle:
        return
    import importlib

    try:
        # by module name: torch.optim does not always keep the submodule as an attribute
        reg = importlib.import_module("torch.optim.optimizer").register_optimizer_step_post_hook
    except (ImportError, AttributeError):
        reg = None
    if reg is None:
        _say_once("optreg", "framework hooks: this torch has no optimizer step hooks; "
                            "gradients and optimizer state stay untagged")
    else:
        h = reg(_optimizer_step)
        _handles.append(h)
        _optimizer_handle.append(h)


# ---- the framework table ------------------------------------------------------------------
# framework -> version key -> component -> hook type -> [(module, class or "", function, what)]
# `what` of a decompose entry: the owner labels pushed around the call ("fsdp2@activation"),
# or a callback ("@vllm_weights") that tags blocks by address after it. Snapshot entries take
# a snapshot `<module>@<class>@<function>@Start` before the call and `...@End` after it.
# Version keys: "2.6" (that version), "2.6+" (from it on), "2.6-2.9" (those minor versions),
# "*" (any).

_FSDP = "torch.distributed.fsdp"
_F2 = _FSDP + "._fully_shard"
_FSDP2 = [
    (_F2 + "._fsdp_state", "FSDPState", "_pre_forward", "fsdp2@activation"),
    (_F2 + "._fsdp_state", "FSDPState", "_pre_backward", "fsdp2@backward"),
    (_F2 + "._fsdp_param", "FSDPParam", "_init_sharded_param", "fsdp2@sharded_weight"),
    (_F2 + "._fsdp_param", "FSDPParam", "init_all_gather_outputs", "fsdp2@all_gather"),
]
_VLLM = "vllm_ascend.worker.model_runner_v1"
_MEGATRON = "megatron.core.optimizer"

TABLE = {
    "pytorch": {
        # every optimizer, through torch's global step post hook
        "2.0+": {"optimizer": {"decompose": [("torch", "", "", "@optimizer")]}},
        "2.6+": {"fsdp1": {"decompose": [
            (_FSDP + ".fully_sharded_data_parallel", "FullyShardedDataParallel", "forward",
             "fsdp1@activation"),
            (_FSDP + "._runtime_utils", "", "_pre_backward_hook", "fsdp1@backward"),
            (_FSDP + "._flat_param", "FlatParamHandle", "_init_flat_param_and_metadata",
             "fsdp1@sharded_weight"),
            (_FSDP + "._flat_param", "FlatParamHandle", "_alloc_padded_unsharded_flat_param",
             "fsdp1@all_gather"),
            (_FSDP + "._runtime_utils", "", "_reduce_grad", "fsdp1@gradient"),
        ]}},
        "2.6-2.9": {"fsdp2": {"decompose": _FSDP2 + [
            (_F2 + "._fsdp_collectives", "", "foreach_all_gather", "fsdp2@all_gather"),
            (_F2 + "._fsdp_param_group", "", "foreach_all_gather", "fsdp2@all_gather"),
            (_F2 + "._fsdp_collectives", "", "foreach_reduce", "fsdp2@gradient"),
            (_F2 + "._fsdp_param_group", "", "foreach_reduce", "fsdp2@gradient"),
        ]}},
        "2.10+": {"fsdp2": {"decompose": _FSDP2 + [
            (_F2 + "._fsdp_collectives", "DefaultAllGather", "allocate", "fsdp2@all_gather"),
            (_F2 + "._fsdp_collectives", "DefaultReduceScatter", "allocate", "fsdp2@gradient"),
        ]}},
    },
    "vllm_ascend": {"11.0": {"worker": {
        "decompose": [
            (_VLLM, "NPUModelRunner", "profile_run", "vllm@profile"),
            (_VLLM, "NPUModelRunner", "execute_model", "vllm@serve"),
            (_VLLM, "NPUModelRunner", "compile_or_warm_up_model", "vllm@warmup"),
            (_VLLM, "NPUModelRunner", "capture_model", "vllm@graph_pool"),
            (_VLLM, "NPUModelRunner", "load_model", "@vllm_weights"),
            (_VLLM, "NPUModelRunner", "initialize_kv_cache_tensors", "@vllm_kv_cache"),
        ],
        "snapshot": [(_VLLM, "NPUModelRunner", m, "") for m in (
            "load_model", "profile_run", "initialize_kv_cache", "capture_model",
            "compile_or_warm_up_model", "execute_model")],
    }}},
    "verl": {"0.7.0": {"TaskRunner": {"snapshot": [
        ("verl.trainer.main_ppo", "TaskRunner", m, "") for m in (
            "add_actor_rollout_worker", "add_critic_worker", "add_reward_model_worker",
            "add_ref_policy_worker", "run")]}}},
    "mindspeed_llm": {"0.12.1": {"training": {"snapshot": [
        ("mindspeed_llm.training.training", "", "train", ""),
        ("mindspeed_llm.training.training", "", "train_step", ""),
        ("megatron.training.training", "", "setup_model_and_optimizer", ""),
        ("megatron.training.training", "", "get_model", ""),
        (_MEGATRON, "", "get_megatron_optimizer", ""),
        ("megatron.core.pipeline_parallel.schedules", "", "backward_step", ""),
        (_MEGATRON + ".optimizer", "MegatronOptimizer", "step", ""),
        (_MEGATRON + ".distrib_optimizer", "DistributedOptimizer", "step_with_ready_grads", ""),
    ]}}},
}


def _version(v):
    out = []
    for part in str(v).split("."):
        digits = ""
        for ch in part:
            if not ch.isdigit():
                break
            digits += ch
        out.append(int(digits) if digits else 0)
    return tuple((out + [0, 0, 0])[:3])


def version_matches(version, key):
    """Whether ``version`` (``2.7.1+cpu``) falls under table key ``key``."""
    if key == "*":
        return True
    v = _version(version)
    if key.endswith("+"):
        return v >= _version(key[:-1])
    if "-" in key:
        lo, hi = key.split("-", 1)
        hi = _version(hi)
        return _version(lo) <= v < (hi[0], hi[1] + 1, 0)
    return v == _version(key)


# ---- callbacks: tags by address after a framework call -------------------------------------

def _vllm_weights(ret, runner=None, *a, **k):
    seen = set()
    drafter = getattr(getattr(runner, "drafter", None), "model", None)
    for model, label in ((drafter, "vllm@weights@drafter"),
                         (getattr(runner, "model", None), "vllm@weights")):
        if model is not None:
            for t in list(model.parameters()) + list(model.buffers()):
                tag(t, label, seen)


def _vllm_kv_cache(ret, runner=None, *a, **k):
    if not isinstance(ret, dict):
        return
    seen = set()
    for name, caches in ret.items():
        kind = "mamba" if "mamba" in str(name).lower() else "attn"
        if isinstance(caches, dict):
            caches = list(caches.values())
        elif not isinstance(caches, (list, tuple)):
            caches = [caches]
        for t in caches:
            tag(t, "vllm@kv_cache@" + kind, seen)


_CALLBACKS = {"@vllm_weights": _vllm_weights, "@vllm_kv_cache": _vllm_kv_cache}


# ---- lazy patching -----------------------------------------------------------------------

_patched = {}   # (module, class, function) -> (owner object, name, original raw attribute)
_pending = {}   # module name -> [(entry, hook type, source)]
_manual = []    # entries registered by init_framework_hooks (hook type, entry)


def _wrap(entry, hook_type):
    module, cls, func, what = entry
    ident = "%s@%s@%s" % (module, cls, func)
    labels = [x for x in what.split("@") if x] if not what.startswith("@") else []
    callback = _CALLBACKS.get(what)

    def make(orig):
        def wrapper(*args, **kwargs):
            snap = hook_type == "snapshot" and snapshot_fn is not None
            tags = hook_type == "decompose" and _lib is not None
            if snap:
                _snap(ident + "@Start")
            if tags and labels:
                _push(labels)
            try:
                ret = orig(*args, **kwargs)
            finally:
                if tags and labels:
                    _pop(len(labels))
            if tags and callback is not None:
                try:
                    callback(ret, *args, **kwargs)
                except Exception as e:  # noqa: BLE001 - never break the job
                    _say_once(ident, "framework hooks: tagging after %s failed (%s)" % (ident, e))
            if snap:
                _snap(ident + "@End")
            return ret
        functools.update_wrapper(wrapper, orig)
        return wrapper
    return make


def _snap(name):
    try:
        snapshot_fn(name=name)
    except Exception as e:  # noqa: BLE001 - a hook never breaks the framework's call
        _say_once(name, "framework hooks: snapshot %s not taken (%s)" % (name, e))


def _patch(entry, hook_type):
    """Patches one entry of an imported module; False when its target does not exist."""
    module, cls, func, _ = entry
    key = (module, cls, func, hook_type)
    if key in _patched:
        return True
    owner = sys.modules.get(module)
    if owner is not None and cls:
        owner = getattr(owner, cls, None)
    if owner is None:
        return False
    raw = owner.__dict__.get(func)
    if raw is None:
        return False
    make = _wrap(entry, hook_type)
    if isinstance(raw, (staticmethod, classmethod)):
        new = type(raw)(make(raw.__func__))
    elif callable(raw):
        new = make(raw)
    else:
        return False
    setattr(owner, func, new)
    _patched[key] = (owner, func, raw)
    return True


_TOP = {"pytorch": "torch"}


def _installed_version(framework):
    top = sys.modules.get(_TOP.get(framework, framework))
    return getattr(top, "__version__", None)


def _apply(module, items):
    skipped = {}
    for entry, hook_type, source in items:
        automatic = isinstance(source, tuple)
        if automatic:
            # automatic registration: other versions' entries and targets this version lacks
            # are left out quietly
            fw, key = source[:2]
            v = _installed_version(fw)
            if v is not None and not version_matches(v, key):
                continue
        if callable(entry):
            entry(sys.modules[module])
        elif entry[3] == "@optimizer":
            _install_optimizer(sys.modules[module])
        elif not _patch(entry, hook_type) and not automatic:
            skipped.setdefault(source, []).append("%s.%s" % (entry[1] or module, entry[2]))
    for source, names in skipped.items():
        print("memscope: framework hooks %s: skipped %d target(s) this version of %s lacks: %s"
              % (source, len(names), module, ", ".join(names)), file=sys.stderr)


class _Finder:
    """Installs a module's pending hooks right after it is imported."""

    def find_spec(self, name, path=None, target=None):
        if name not in _pending:
            return None
        import importlib.util

        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        exec_module = spec.loader.exec_module

        def run(mod):
            exec_module(mod)
            try:
                _apply(name, _pending.pop(name, []))
            except Exception as e:  # noqa: BLE001 - never break the job's import
                print("memscope: framework hooks for %s not installed: %s" % (name, e),
                      file=sys.stderr)

        spec.loader.exec_module = run
        return spec


_finder = _Finder()


def _register(items_by_module):
    for module, items in items_by_module.items():
        if module in sys.modules:
            _apply(module, items)
        else:
            _pending.setdefault(module, []).extend(items)
    if _pending and _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)


def _entries(entries, hook_type, source):
    by = {}
    for e in entries:
        by.setdefault(e[0], []).append((e, hook_type, source))
    return by


# ---- the API ------------------------------------------------------------------------------

def enable(lib, cfg):
    """Turns the automatic decompose hooks on when ``cfg`` (a config.json dict) asks for the
    decompose analysis: now if torch is imported, else when it is. Returns whether it did."""
    global _lib, _enabled
    if "decompose" not in (cfg.get("analysis") or []):
        return False
    if _enabled:
        return True
    _lib = _bind(lib)
    _enabled = True
    _register({"torch": [(_install_torch, "torch", "torch")]})
    if not any(k == "decompose" for k, _ in _manual):
        # every decompose entry of the table but the optimizer's (the global step hook above
        # covers every optimizer); targets a version lacks are skipped
        for fw, versions in TABLE.items():
            for key, comps in versions.items():
                for comp, kinds in comps.items():
                    if comp != "optimizer":
                        _register(_entries(kinds.get("decompose", []), "decompose",
                                           (fw, key, comp)))
    return True


def init_framework_hooks(lib, framework, version, component, hook_type):
    """msMemScope's ``init_framework_hooks``: hooks the entries of the table for
    ``framework`` at ``version``, ``component`` and ``hook_type`` (``decompose`` or
    ``snapshot``), now or when their modules are imported. An unknown framework, component or
    hook type raises ``ValueError`` naming it; a version the table does not know hooks nothing
    and says so in one line, and so does a target the installed version lacks. Returns the
    number of entries registered."""
    global _lib
    for name, v in (("framework", framework), ("version", version), ("component", component),
                    ("hook_type", hook_type)):
        if not isinstance(v, str):
            raise TypeError("init_framework_hooks(%s=...): expected a str, not %s"
                            % (name, type(v).__name__))
    if hook_type not in ("decompose", "snapshot"):
        raise ValueError("init_framework_hooks(hook_type=%r): decompose or snapshot"
                         % hook_type)
    what = "init_framework_hooks(%s, %s, %s, %s)" % (framework, version, component, hook_type)
    versions = TABLE.get(framework)
    if versions is None:
        raise ValueError("init_framework_hooks(framework=%r): known: %s"
                         % (framework, ", ".join(sorted(TABLE))))
    components = sorted({c for cs in versions.values() for c in cs})
    if component not in components:
        raise ValueError("init_framework_hooks(component=%r): %s has %s"
                         % (component, framework, ", ".join(components)))
    keys = [k for k in versions if version_matches(version, k)
            and hook_type in versions[k].get(component, {})]
    if not keys:
        # a version the table does not know: hook nothing and say so (issue 25)
        known = sorted("%s %s %s" % (k, c, t) for k, cs in versions.items()
                       for c, ts in cs.items() for t in ts)
        print("memscope: %s: no hooks for this version/component; nothing hooked (known: %s)"
              % (what, "; ".join(known)), file=sys.stderr)
        return 0
    if _lib is None:
        _lib = _bind(lib)
    n = 0
    missing = set()
    for k in keys:
        entries = versions[k][component][hook_type]
        _manual.extend((hook_type, e) for e in entries)
        _register(_entries(entries, hook_type, "%s %s %s" % (framework, k, component)))
        n += len(entries)
        missing.update(e[0].split(".")[0] for e in entries if not _importable(e[0]))
    if missing:
        # the hooks wait for an import that may never come: say so once (issue 35)
        print("memscope: %s: %s not installed in this Python (%s); its %d hook(s) wait for "
              "its import" % (what, ", ".join(sorted(missing)), sys.executable, n),
              file=sys.stderr)
    return n


def _importable(module):
    """Whether the top-level package of ``module`` is imported or can be."""
    import importlib.util
    top = module.split(".")[0]
    if top in sys.modules:
        return True
    try:
        return importlib.util.find_spec(top) is not None
    except (ImportError, ValueError):
        return False


def cleanup_framework_hooks():
    """msMemScope's ``cleanup_framework_hooks``: removes every hook installed (the automatic
    ones included) and forgets those still waiting for their module. Returns how many."""
    global _enabled
    n = len(_patched) + len(_handles)
    # newest first: a method hooked twice (decompose, then snapshot) ends with its original
    for owner, func, raw in reversed(list(_patched.values())):
        setattr(owner, func, raw)
    _patched.clear()
    for h in _handles:
        h.remove()
    _handles.clear()
    _optimizer_handle.clear()
    _pending.clear()
    _manual.clear()
    _enabled = False
    if _finder in sys.meta_path:
        sys.meta_path.remove(_finder)
    return n
