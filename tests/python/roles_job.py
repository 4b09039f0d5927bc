"""The role decomposition's job on plain CPU torch (issue 25): examples/sim-npu/python/
torch_loop.py's small transformer and AdamW, 3 steps; writes the figures torch measured itself
to argv[1] (JSON). The job changes nothing for memscope: the role tags come from memscope's
framework hooks."""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "examples", "sim-npu", "python"))
import torch_loop  # noqa: E402

with open(sys.argv[1], "w") as f:
    json.dump(torch_loop.train(3), f)
