#!/usr/bin/env bash
# The race check's cost (issue 36): memscope_races::check over LAUNCHES (default
# 1 000 000) generated launches of a training-like program, offline, streamed (see
# src/main.rs for the program and the modes gen / synced / racy / frozen). Each mode runs in
# its own process, REPS times (default 5) interleaved; reported: the median wall time of the
# check (generation included; `gen` is generation alone), the median peak resident memory
# (VmHWM), findings, and the state left at the end, with the load average before and after.
# Needs: cargo build --profile dist -p memscope-bench-races
# Usage: benches/races/run.sh [REPS] [LAUNCHES]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
bin=${CARGO_TARGET_DIR:-$repo/target}/dist/races-bench
[ -x "$bin" ] || { echo "run.sh: build first: cargo build --profile dist -p memscope-bench-races" >&2; exit 1; }
exec python3 - "$bin" "${1:-5}" "${2:-1000000}" <<'PY'
import os, statistics, subprocess, sys
bin, reps, n = sys.argv[1], int(sys.argv[2]), sys.argv[3]
modes = ["gen", "synced", "racy", "frozen"]
print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
runs = {m: [] for m in modes}
for _ in range(reps):
    for m in modes:
        out = subprocess.run([bin, n, m], capture_output=True, text=True, check=True).stdout.split()
        runs[m].append(out)
print(f"load average after:  {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
print(f"{reps} runs each, {n} launches\n")
print("| mode | launches | operations | findings | median s | min s | max s | ns/launch | median peak RSS MiB | live pointers | records held |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for m in modes:
    r = runs[m]
    secs = [float(x[4]) for x in r]
    rss = statistics.median(int(x[5]) for x in r) / 1024
    med = statistics.median(secs)
    launches = int(r[0][1])
    print(f"| {m} | {launches} | {r[0][2]} | {r[0][3]} | {med:.3f} | {min(secs):.3f} | {max(secs):.3f} "
          f"| {med / launches * 1e9:.0f} | {rss:.1f} | {r[0][6]} | {r[0][7]} |")
PY
