#!/usr/bin/env python3
"""Probe-alone cost on churn: paired runs of the plain workload and of the workload with the
probe preloaded (HOST adapter only, records into a spool, no collector), without and with C
stacks (MEMSCOPE_C_STACK=32). Rounds rotate plain / probe / probe c:32 so that drift in the
machine's speed hits all three alike; ratios are taken round by round.

Prints, per variant: wall and CPU (user+sys of the process) medians and minimums, the median
of the per-round ratios to the plain run, and the stream's committed bytes per heap call.

usage: benches/probe/paired.py [-n ROUNDS] [--probe LIB] [--other LIB] [--churn BIN] [-- ARGS]
  LIB   default target/dist/libmemscope_probe.so (cargo build --profile dist -p memscope-probe);
        --other adds a second probe build to the same rounds (e.g. main's, for a before/after)
  BIN   default: ../shared/bench/workloads/churn.c compiled here (gcc -O2 -g
        -fno-omit-frame-pointer -pthread) into target/probe-bench/churn
  ARGS  churn arguments, default 5 2 42 (10.6 M heap calls on 2 threads)
"""
import argparse
import os
import re
import resource
import statistics
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FILE_HEADER, CHUNK, CHUNK_HEADER = 4096, 256 * 1024, 64
CHUNK_MAGIC = struct.unpack("<I", b"MSCK")[0]


def committed_bytes(spool):
    total = 0
    for f in os.listdir(spool):
        if not f.endswith(".stream"):
            continue
        with open(os.path.join(spool, f), "rb") as fh:
            data = fh.read()
        off = FILE_HEADER
        while off + CHUNK <= len(data):
            magic, committed = struct.unpack_from("<II", data, off)
            if magic == CHUNK_MAGIC:
                total += committed
            off += CHUNK
    return total


def run(argv, env):
    """(wall s, cpu s, stdout) of one run, CPU from the child's rusage."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    p = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        sys.exit(f"{argv}: exit {p.returncode}: {p.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, p.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=5)
    ap.add_argument("--probe", default=os.path.join(ROOT, "target/dist/libmemscope_probe.so"))
    ap.add_argument("--other")
    ap.add_argument("--churn")
    ap.add_argument("args", nargs="*", default=["5", "2", "42"])
    a = ap.parse_args()
    churn = a.churn
    if not churn:
        src = os.path.join(ROOT, "..", "shared", "bench", "workloads", "churn.c")
        out = os.path.join(ROOT, "target", "probe-bench")
        os.makedirs(out, exist_ok=True)
        churn = os.path.join(out, "churn")
        subprocess.run(["gcc", "-O2", "-g", "-fno-omit-frame-pointer", "-pthread", src, "-o", churn],
                       check=True)
    if not os.path.isfile(a.probe):
        sys.exit(f"{a.probe} is missing: cargo build --profile dist -p memscope-probe")
    argv = [churn, *a.args]
    variants = {"plain": (None, None), "probe": (a.probe, "0"), "probe c:32": (a.probe, "32")}
    if a.other:
        variants["other"] = (a.other, "0")
        variants["other c:32"] = (a.other, "32")
    res = {k: [] for k in variants}
    bpe = {}
    calls = None
    load = os.getloadavg()
    for r in range(a.n + 1):  # round 0 warms the page cache and is not counted
        for name, (lib, depth) in variants.items():
            env = dict(os.environ)
            spool = None
            if lib is not None:
                spool = tempfile.mkdtemp(prefix="probe-bench-")
                env.update(LD_PRELOAD=lib, MEMSCOPE_SPOOL=spool, MEMSCOPE_ADAPTERS="64",
                           MEMSCOPE_C_STACK=depth)
            wall, cpu, out = run(argv, env)
            m = re.search(r"total=(\d+)", out)
            calls = int(m.group(1)) if m else calls
            if spool:
                if r == a.n and calls:
                    bpe[name] = committed_bytes(spool) / calls
                subprocess.run(["rm", "-rf", spool])
            if r > 0:
                res[name].append((wall, cpu))
    print(f"churn {' '.join(a.args)}: {calls} heap calls; {a.n} rounds; load before "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, after {os.getloadavg()[0]:.2f}")
    base = res["plain"]
    for name, v in res.items():
        walls, cpus = [x[0] for x in v], [x[1] for x in v]
        line = (f"{name:12s} wall median {statistics.median(walls):6.3f} s (min {min(walls):.3f})"
                f"  cpu median {statistics.median(cpus):6.3f} s (min {min(cpus):.3f})")
        if name != "plain":
            rw = statistics.median(x[0] / b[0] for x, b in zip(v, base))
            rc = statistics.median(x[1] / b[1] for x, b in zip(v, base))
            line += f"  ratio wall {rw:.2f}x cpu {rc:.2f}x  {bpe.get(name, 0):.2f} B/call"
        print(line)


if __name__ == "__main__":
    main()
