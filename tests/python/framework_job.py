"""msMemScope's init_framework_hooks / cleanup_framework_hooks on stub frameworks (issue 25).

Writes stub `vllm_ascend` (its worker's model runner, three of its targets missing) and `verl`
(a TaskRunner with `run` only) packages into argv[1], then:

* `init_framework_hooks("vllm_ascend", "11.0", "worker", "decompose")` before the stub is
  imported: load_model's weights become `vllm@weights`, the KV cache `vllm@kv_cache@attn`,
  what execute_model allocates runs under `vllm@serve`; the missing targets are named in one
  line;
* `init_framework_hooks("verl", "0.7.0", "TaskRunner", "snapshot")`: a SNAPSHOT row before and
  after `run()`;
* an unknown version and an unknown framework hook nothing, one line each;
* after `cleanup_framework_hooks()` no hook is left (`run()` takes no snapshot).

Prints `hooks <n>` counts as it goes.
"""

import os
import sys

import torch

stub = sys.argv[1]
for path, text in {
    "vllm_ascend/__init__.py": "__version__ = '11.0.0'\n",
    "vllm_ascend/worker/__init__.py": "",
    "vllm_ascend/worker/model_runner_v1.py": (
        "import torch\n"
        "class NPUModelRunner:\n"
        "    def load_model(self):\n"
        "        self.model = torch.nn.Linear(64, 32)\n"
        "    def initialize_kv_cache_tensors(self):\n"
        "        return {'model.layers.0.self_attn': torch.zeros(4096)}\n"
        "    def execute_model(self):\n"
        "        self.out = torch.ones(2048) * 3\n"
        "        return self.out\n"),
    "verl/__init__.py": "__version__ = '0.7.0'\n",
    "verl/trainer/__init__.py": "",
    "verl/trainer/main_ppo.py": (
        "class TaskRunner:\n"
        "    def run(self):\n"
        "        return 'ran'\n"),
}.items():
    p = os.path.join(stub, path)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "w") as f:
        f.write(text)
sys.path.insert(0, stub)

import memscope  # noqa: E402

print("hooks", memscope.init_framework_hooks("vllm_ascend", "11.0", "worker", "decompose"))
print("hooks", memscope.init_framework_hooks("verl", "0.7.0", "TaskRunner", "snapshot"))
print("hooks", memscope.init_framework_hooks("pytorch", "1.13", "fsdp1", "decompose"))
try:
    memscope.init_framework_hooks("nosuchframework", "1.0", "x", "decompose")
except ValueError as e:
    print("refused:", e)

from vllm_ascend.worker.model_runner_v1 import NPUModelRunner  # noqa: E402
from verl.trainer.main_ppo import TaskRunner  # noqa: E402

runner = NPUModelRunner()
runner.load_model()
caches = runner.initialize_kv_cache_tensors()
runner.execute_model()
assert TaskRunner().run() == "ran"
print("removed", memscope.cleanup_framework_hooks())
assert TaskRunner().run() == "ran"
assert not hasattr(NPUModelRunner.load_model, "__wrapped__")
print("done", runner.model.weight.data_ptr() != 0, len(caches))
