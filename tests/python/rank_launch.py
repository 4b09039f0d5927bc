#!/usr/bin/env python3
"""A torchrun-like launcher for the multi-rank tests (issue 18): starts N ranks of
examples/sim-npu/train.py with RANK, LOCAL_RANK and WORLD_SIZE set, each with
ASCEND_RT_VISIBLE_DEVICES=<rank> (train.py sets logical device 0, so rank r runs on physical
device r), and waits for them.

usage: rank_launch.py N LEAK_RANKS [TRAIN ARGS...]
LEAK_RANKS: comma-separated ranks that leak (train.py's default); the others get --no-leak
("-" for none). Exits with the largest exit code of the ranks.
"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN = os.path.join(HERE, "..", "..", "examples", "sim-npu", "train.py")


def main():
    n = int(sys.argv[1])
    leak = {int(r) for r in sys.argv[2].split(",") if r not in ("", "-")}
    rest = sys.argv[3:]
    procs = []
    for r in range(n):
        env = dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(n),
                   ASCEND_RT_VISIBLE_DEVICES=str(r))
        args = [sys.executable, TRAIN] + rest + ([] if r in leak else ["--no-leak"])
        procs.append(subprocess.Popen(args, env=env))
    sys.exit(max(p.wait() for p in procs))


main()
