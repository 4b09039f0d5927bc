"""``memscope.framework``: msMemScope's one-click framework hooks (behaviour spec §7).

``init_framework_hooks(framework, version, component, hook_type)`` wraps known methods of a
framework, now if its module is imported already, else as soon as it is:

* ``hook_type="decompose"``: every block allocated while the method runs gets the method's
  owner labels (``PTA@vllm@serve``, ``PTA@fsdp2@gradient``): the decompose analysis splits
  memory by them;
* ``hook_type="snapshot"``: a SNAPSHOT row ``<module>@<Class>@<method>@Start`` before the
  method and ``…@End`` after it.

``cleanup_framework_hooks()`` puts every wrapped method back. The frameworks, versions and
components are msMemScope's: ``vllm_ascend`` 11.0 ``worker`` (decompose, snapshot),
``pytorch`` 2.6+ ``fsdp1`` and 2.6–2.9 / 2.10+ ``fsdp2`` (decompose), ``verl`` 0.7.0
``TaskRunner`` and ``mindspeed_llm`` 0.12.1 ``training`` (snapshot). A version matches a table
key exactly, as ``X+`` (X or later), ``A-B`` (every release of minors A to B) or ``*``.
Where memscope differs: vLLM's ``load_model`` and ``initialize_kv_cache_tensors`` label the
blocks allocated inside them (``vllm@weights``, ``vllm@kv_cache``) instead of tagging the
model's tensors afterwards; bad arguments raise ``ValueError`` naming them (msMemScope prints an
error and returns).
"""

import importlib.abc
import importlib.util
import sys
import threading
import warnings

from ._session import session

# (module, class or "" for a module function, method, owner labels)
_VLLM_RUNNER = "vllm_ascend.worker.model_runner_v1"
_VLLM_WORKER = "vllm_ascend.worker.worker"
_FSDP = "torch.distributed.fsdp."
_FSDP2 = _FSDP + "_fully_shard."
_FSDP2_COMMON = [
    (_FSDP2 + "_fsdp_state", "FSDPState", "_pre_forward", ("fsdp2", "activation")),
    (_FSDP2 + "_fsdp_state", "FSDPState", "_post_forward", ("fsdp2", "activation")),
    (_FSDP2 + "_fsdp_state", "FSDPState", "_pre_backward", ("fsdp2", "backward")),
    (_FSDP2 + "_fsdp_param_group", "FSDPParamGroup", "post_backward", ("fsdp2", "backward")),
    (_FSDP2 + "_fsdp_param", "FSDPParam", "_init_sharded_param", ("fsdp2", "sharded_weight")),
    (_FSDP2 + "_fsdp_param", "FSDPParam", "init_all_gather_outputs",
     ("fsdp2", "all_gather_output")),
]
_MEGATRON_OPT = "megatron.core.optimizer.optimizer"

TABLE = {
    "vllm_ascend": {"11.0": {"worker": {
        "decompose": [
            (_VLLM_RUNNER, "NPUModelRunner", "profile_run", ("vllm", "profile")),
            (_VLLM_RUNNER, "NPUModelRunner", "execute_model", ("vllm", "serve")),
            (_VLLM_WORKER, "NPUWorker", "compile_or_warm_up_model", ("vllm", "warmup")),
            (_VLLM_RUNNER, "NPUModelRunner", "capture_model", ("graph_pool",)),
            (_VLLM_RUNNER, "NPUModelRunner", "load_model", ("vllm", "weights")),
            (_VLLM_RUNNER, "NPUModelRunner", "initialize_kv_cache_tensors",
             ("vllm", "kv_cache")),
        ],
        "snapshot": [(_VLLM_RUNNER, "NPUModelRunner", m, ()) for m in (
            "load_model", "profile_run", "initialize_kv_cache", "execute_model",
            "capture_model")] + [(_VLLM_WORKER, "NPUWorker", "compile_or_warm_up_model", ())],
    }}},
    "verl": {"0.7.0": {"TaskRunner": {
        "snapshot": [("verl.trainer.main_ppo", "TaskRunner", m, ()) for m in (
            "add_actor_rollout_worker", "add_critic_worker", "add_reward_model_worker",
            "add_ref_policy_worker", "run")],
    }}},
    "mindspeed_llm": {"0.12.1": {"training": {
        "snapshot": [
            ("mindspeed_llm.training.training", "", "train", ()),
            ("mindspeed_llm.training.training", "", "train_step", ()),
            ("megatron.training.training", "", "setup_model_and_optimizer", ()),
            ("megatron.training.training", "", "get_model", ()),
            ("megatron.core.optimizer", "", "get_megatron_optimizer", ()),
            ("mindspeed_llm.core.models.gpt.gpt_model", "GPTModel", "forward", ()),
            ("mindspeed_llm.core.transformer.transformer_block", "TransformerBlock", "forward",
             ()),
            ("mindspeed_llm.core.transformer.transformer_layer", "TransformerLayer", "forward",
             ()),
            ("mindspeed_llm.core.transformer.attention", "SelfAttention", "forward", ()),
            ("mindspeed_llm.core.transformer.mlp", "MLP", "forward", ()),
            ("mindspeed_llm.core.transformer.moe.moe_layer", "MoELayer", "forward", ()),
            ("mindspeed_llm.core.transformer.moe.router", "TopKRouter", "forward", ()),
            ("megatron.core.pipeline_parallel.schedules", "", "backward_step", ()),
            ("mindspeed_llm.core.pipeline_parallel.dualpipe.gpt_model", "",
             "gpt_model_backward", ()),
            ("mindspeed_llm.core.models.gpt.gpt_model", "GPTModel",
             "compute_language_model_loss", ()),
            ("megatron.core.tensor_parallel.cross_entropy", "", "vocab_parallel_cross_entropy",
             ()),
        ] + [(_MEGATRON_OPT, c, "step", ()) for c in (
            "MegatronOptimizer", "MixedPrecisionOptimizer", "Float16OptimizerWithFloat16Params",
            "FP32Optimizer", "ChainedOptimizer")] + [
            ("megatron.core.optimizer.distrib_optimizer", "DistributedOptimizer",
             "step_with_ready_grads", ()),
        ],
    }}},
    "pytorch": {
        "2.6+": {"fsdp1": {"decompose": [
            (_FSDP + "fully_sharded_data_parallel", "FullyShardedDataParallel", "forward",
             ("fsdp1", "activation")),
            (_FSDP + "_runtime_utils", "", "_pre_backward_hook", ("fsdp1", "backward")),
            (_FSDP + "_runtime_utils", "", "_post_backward_hook", ("fsdp1", "backward")),
            (_FSDP + "_flat_param", "FlatParamHandle", "_init_flat_param_and_metadata",
             ("fsdp1", "sharded_weight")),
            (_FSDP + "_flat_param", "FlatParamHandle", "_alloc_padded_unsharded_flat_param",
             ("fsdp1", "all_gather")),
            (_FSDP + "_runtime_utils", "", "_reduce_grad", ("fsdp1", "gradient")),
        ]}},
        "2.6-2.9": {"fsdp2": {"decompose": _FSDP2_COMMON + [
            (_FSDP2 + "_fsdp_collectives", "", "foreach_all_gather",
             ("fsdp2", "all_gather_output")),
            (_FSDP2 + "_fsdp_param_group", "", "foreach_all_gather",
             ("fsdp2", "all_gather_output")),
            (_FSDP2 + "_fsdp_collectives", "", "foreach_reduce", ("fsdp2", "gradient")),
            (_FSDP2 + "_fsdp_param_group", "", "foreach_reduce", ("fsdp2", "gradient")),
        ]}},
        "2.10+": {"fsdp2": {"decompose": _FSDP2_COMMON + [
            (_FSDP2 + "_fsdp_collectives", "DefaultAllGather", "allocate",
             ("fsdp2", "all_gather_output")),
            (_FSDP2 + "_fsdp_collectives", "DefaultReduceScatter", "allocate",
             ("fsdp2", "gradient")),
        ]}},
    },
}


def _version(text):
    """``'2.14.0a0'`` → ``(2, 14, 0)``: numeric prefixes of the first three parts."""
    parts = []
    for seg in text.split(".")[:3]:
        digits = ""
        for ch in seg:
            if not ch.isdigit():
                break
            digits += ch
        parts.append(int(digits) if digits else 0)
    return tuple(parts + [0] * (3 - len(parts)))


def version_matches(version, key):
    """Whether ``version`` matches table key ``key`` (exact, ``X+``, ``A-B``, ``*``)."""
    if key == "*":
        return True
    v = _version(version)
    if key.endswith("+"):
        return v >= _version(key[:-1])
    if "-" in key:
        lo, hi = (_version(k) for k in key.split("-", 1))
        return lo <= v < (hi[0], hi[1] + 1, 0)
    return v == _version(key)


def entries(framework, version, component, hook_type):
    """The table's targets for these arguments; ``ValueError`` naming a bad one."""
    for name, value in (("framework", framework), ("version", version),
                        ("component", component), ("hook_type", hook_type)):
        if not isinstance(value, str):
            raise TypeError("init_framework_hooks(%s=...): expected a str, not %s"
                            % (name, type(value).__name__))
    if framework not in TABLE:
        raise ValueError("init_framework_hooks(framework=%r): known: %s"
                         % (framework, ", ".join(sorted(TABLE))))
    versions = TABLE[framework]
    keys = [version] if version in versions else [k for k in versions
                                                  if version_matches(version, k)]
    if not keys:
        raise ValueError("init_framework_hooks(version=%r): %s has %s"
                         % (version, framework, ", ".join(versions)))
    comps = {c: t for k in keys for c, t in versions[k].items()}
    if component not in comps:
        raise ValueError("init_framework_hooks(component=%r): %s %s has %s"
                         % (component, framework, version, ", ".join(sorted(comps))))
    found = [e for k in keys for e in versions[k].get(component, {}).get(hook_type, [])]
    if not found:
        raise ValueError("init_framework_hooks(hook_type=%r): %s %s %s has %s"
                         % (hook_type, framework, version, component,
                            ", ".join(sorted(comps[component]))))
    return found


class _Hooks:
    """The wrapped methods (to put back) and the targets whose module is not imported yet."""

    def __init__(self):
        self.lock = threading.RLock()
        self.wrapped = []           # (owner object, attribute, original)
        self.pending = {}           # module name -> [(class, method, action)]
        self.finder = None

    def add(self, module, cls, method, action):
        with self.lock:
            mod = sys.modules.get(module)
            if mod is not None:
                self.patch(mod, cls, method, action)
                return
            self.pending.setdefault(module, []).append((cls, method, action))
            if self.finder is None:
                self.finder = _Finder()
                sys.meta_path.insert(0, self.finder)

    def imported(self, module):
        with self.lock:
            todo = self.pending.pop(module, [])
        mod = sys.modules.get(module)
        for cls, method, action in todo:
            self.patch(mod, cls, method, action)

    def patch(self, mod, cls, method, action):
        owner = getattr(mod, cls, None) if cls else mod
        original = getattr(owner, method, None) if owner is not None else None
        if original is None:
            warnings.warn("init_framework_hooks: %s.%s%s not found; not hooked"
                          % (mod.__name__, cls + "." if cls else "", method),
                          RuntimeWarning, stacklevel=3)
            return
        name = "%s@%s@%s" % (mod.__name__, cls, method)
        setattr(owner, method, _wrap(original, name, action))
        self.wrapped.append((owner, method, original))

    def clear(self):
        with self.lock:
            for owner, method, original in reversed(self.wrapped):
                setattr(owner, method, original)
            n = len(self.wrapped)
            self.wrapped.clear()
            self.pending.clear()
            if self.finder is not None:
                try:
                    sys.meta_path.remove(self.finder)
                except ValueError:
                    pass
                self.finder = None
            return n


_HOOKS = _Hooks()


class _Finder(importlib.abc.MetaPathFinder):
    """Hooks a target module right after it is first imported."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in _HOOKS.pending:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run = spec.loader.exec_module

        def exec_module(module, _run=run):
            _run(module)
            _HOOKS.imported(fullname)

        spec.loader.exec_module = exec_module
        return spec


def _wrap(original, name, action):
    import functools

    labels, snapshot = action

    @functools.wraps(original)
    def hooked(*args, **kwargs):
        lib = session().lib
        pushed = 0
        if lib is not None:
            for label in labels:
                pushed += lib.memscope_owner_push(label.encode()) == 0
            if snapshot:
                _snapshot(name + "@Start")
        try:
            return original(*args, **kwargs)
        finally:
            if lib is not None:
                if snapshot:
                    _snapshot(name + "@End")
                for _ in range(pushed):
                    lib.memscope_owner_pop()

    hooked.__memscope_original__ = original
    return hooked


def _snapshot(name):
    from .take_snapshot import take_snapshot

    try:
        take_snapshot(name=name)
    except Exception as e:  # noqa: BLE001 - a hook never breaks the framework's call
        warnings.warn("memscope: snapshot %s not taken: %s" % (name, e), RuntimeWarning)


def init_framework_hooks(framework, version, component, hook_type):
    """Wraps the methods msMemScope's table lists for these arguments (see the module docs).
    Raises ``ValueError``/``TypeError`` naming a bad argument."""
    for module, cls, method, labels in entries(framework, version, component, hook_type):
        action = (labels, hook_type == "snapshot")
        _HOOKS.add(module, cls, method, action)


def cleanup_framework_hooks():
    """Puts every method :func:`init_framework_hooks` wrapped back; returns how many."""
    return _HOOKS.clear()


def enable_npu_sanitizer():
    """msMemScope's bridge from ``sanitizer-op:`` msTX marks to torch_npu's NPU sanitizer:
    memscope has none, so this raises ``RuntimeError`` (use torch_npu's own
    ``torch_npu.npu._sanitizer.enable_npu_sanitizer()``)."""
    raise RuntimeError("enable_npu_sanitizer(): memscope does not forward sanitizer-op: marks "
                       "to torch_npu's NPU sanitizer; call "
                       "torch_npu.npu._sanitizer.enable_npu_sanitizer() directly")
