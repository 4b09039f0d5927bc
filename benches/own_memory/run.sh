#!/usr/bin/env bash
# What accounting host and Python-object memory by default would cost (issue 35, item 1): the
# whole `memscope run` (job start to the CLI's exit, default outputs, -q) of two training-like
# jobs, interleaved REPS times after a warm-up, against the bare job in the same run:
#   bare        the job alone
#   default     memscope run (the default adapters: NPU memory; the resident-memory watch that
#               prints the hint when they record nothing)
#   host,pymem  the default adapters plus host and pymem, accounted without rows (what
#               "account HOST/PYMEM by default" would cost)
# Jobs: the sim-npu demo (train.py --steps 40) and a small torch CPU training loop
# (train_mlp.py: Linear 512-1024-512, AdamW, 300 steps; torch from MEMSCOPE_TORCH_PYTHON or the
# CI's venv). Reported: median wall and CPU (user+sys of the process tree), ratios to bare, and
# the load average before and after.
# Needs: cargo build --profile dist -p memscope-cli -p memscope-probe -p memscope-adapter-pymem -p sim-npu
# Usage: benches/own_memory/run.sh [REPS]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
bin=$repo/target/dist/memscope
[ -x "$bin" ] && [ -f "$repo/target/dist/libmemscope_adapter_pymem.so" ] || {
    echo "run.sh: build first: cargo build --profile dist -p memscope-cli -p memscope-probe -p memscope-adapter-pymem -p sim-npu" >&2
    exit 1
}
torch_py=${MEMSCOPE_TORCH_PYTHON:-$HOME/.cache/memscope-ci/torch-venv/bin/python}
"$torch_py" -c 'import torch' 2>/dev/null || { echo "run.sh: no torch in $torch_py (MEMSCOPE_TORCH_PYTHON)" >&2; exit 1; }
exec python3 - "$bin" "${1:-5}" "$repo" "$torch_py" "$here/train_mlp.py" <<'PY'
import os, resource, shutil, statistics, subprocess, sys, tempfile, time
ms, n, repo, torch_py, mlp = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
jobs = {
    "demo": ["python3", f"{repo}/examples/sim-npu/train.py", "--steps", "40"],
    "torch-mlp": [torch_py, mlp, "300"],
}
modes = {"bare": None, "default": [],
         "host,pymem": ["--adapters", "mstx,pta,mindspore,atb,hal,acl,host,pymem"]}
env = dict(os.environ, SIM_NPU_DIR=f"{repo}/target/dist/sim-npu")
def run(cmd):
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN); t = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, env=env)
    w = time.perf_counter() - t; r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return w, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
print("load before:", os.getloadavg())
for name, job in jobs.items():
    res = {m: [] for m in modes}
    run(job)  # warm-up
    for i in range(n):
        order = list(modes.items()) if i % 2 == 0 else list(reversed(modes.items()))
        for m, flags in order:
            if flags is None:
                res[m].append(run(job))
                continue
            d = tempfile.mkdtemp()
            res[m].append(run([ms, "run", "-q", *flags, "-o", d, "--", *job]))
            shutil.rmtree(d)
    bare_w = statistics.median(x[0] for x in res["bare"])
    bare_c = statistics.median(x[1] for x in res["bare"])
    for m in modes:
        w = statistics.median(x[0] for x in res[m]); c = statistics.median(x[1] for x in res[m])
        print(f"{name:10} {m:11} wall {w:.3f}s ({w / bare_w:.2f}x)  cpu {c:.3f}s ({c / bare_c:.2f}x)")
print("load after:", os.getloadavg())
PY
