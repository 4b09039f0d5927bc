#!/usr/bin/env bash
# Collector CPU per event of a third-party adapter on plugin ABI 1.2 (registered types, compact
# events: examples/adapter-c/demo_pool_compact.c) against the same adapter on text events
# (ABI 1.0 emit: demo_pool_adapter.c) and a built-in adapter (HAL, over the fake driver of
# benches/hal_event_cost), at the same number of events, rows written (default outputs).
#
# Each run is a whole `memscope run` of a job making N alloc+free pairs (2N events, 2N rows):
#   collector CPU = CPU of the process tree (memscope, its collector and the job: the children's
#                   rusage of this script's timer) - the job's own CPU (/usr/bin/time inside)
# reported per event, median of REPS interleaved repetitions, with the load before and after.
# Needs a release build: cargo build --release -p memscope-cli -p memscope-probe
# Usage: benches/plugin_event_cost/run.sh [PAIRS=500000] [REPS=5]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
pairs=${1:-500000}
reps=${2:-5}
bin=${MEMSCOPE_BIN:-$repo/target/release/memscope}
[ -x "$bin" ] || { echo "run.sh: build first: cargo build --release -p memscope-cli -p memscope-probe" >&2; exit 1; }
work=$(mktemp -d /tmp/plugin-cost.XXXXXX)
trap 'rm -rf "$work"' EXIT
cc=${CC:-cc}
pool=$repo/examples/demo-pool
$cc -shared -fPIC -O2 -o "$work/libdemo_pool.so" "$pool/demo_pool.c"
$cc -O2 -I"$pool" -o "$work/demo_job" "$pool/demo_job.c" -L"$work" -ldemo_pool -Wl,-rpath,"$work"
for a in demo_pool_adapter demo_pool_compact; do
    $cc -shared -fPIC -O2 -I"$repo/schemas" -o "$work/lib$a.so" "$repo/examples/adapter-c/$a.c" -ldl
done
hal=$repo/benches/hal_event_cost/csrc
$cc -shared -fPIC -O2 -Wl,-soname,libascend_hal.so -o "$work/libascend_hal.so" "$hal/fake_hal.c"
$cc -O2 -o "$work/hal_loop" "$hal/hal_loop.c" -L"$work" -lascend_hal -Wl,-rpath,"$work"

echo "load before: $(uptime)"
echo "pairs: $pairs ($((2 * pairs)) events), repetitions: $reps, memscope: $bin"
results=$work/results.txt
for r in $(seq "$reps"); do
    for mode in compact text hal; do
        out=$work/out-$mode
        case $mode in
            compact) args=(--device npu,cpu --adapter-path "$work/libdemo_pool_compact.so") job=("$work/demo_job" "$pairs") ;;
            text) args=(--device npu,cpu --adapter-path "$work/libdemo_pool_adapter.so") job=("$work/demo_job" "$pairs") ;;
            # hal_loop makes 10 000 warm-up pairs before its N
            hal) args=(--adapters hal) job=("$work/hal_loop" "$((pairs - 10000))") ;;
        esac
        python3 - "$mode" "$results" "$bin" "$out" "$work/jobtime" "${args[@]}" -- "${job[@]}" <<'PY'
import resource, subprocess, sys, time, shutil
mode, results, binary, out, jobtime = sys.argv[1:6]
rest = sys.argv[6:]
sep = rest.index("--")
args, job = rest[:sep], rest[sep + 1:]
r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
t = time.perf_counter()
p = subprocess.run([binary, "run", *args, "-o", out, "--", "/usr/bin/time", "-f", "%U %S", "-o", jobtime, *job],
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
wall = time.perf_counter() - t
r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
if p.returncode != 0:
    sys.exit(f"{mode} failed: {p.stderr}")
total = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
u, s = map(float, open(jobtime).read().split()[-2:])
rows = [l for l in p.stderr.splitlines() if " rows" in l and "pid" in l]
open(results, "a").write(f"{mode} {wall} {total} {u + s} {rows[0] if rows else ''}\n")
shutil.rmtree(out, ignore_errors=True)
PY
    done
done
echo "load after:  $(uptime)"
python3 - "$results" "$pairs" <<'PY'
import statistics, sys
events = 2 * int(sys.argv[2])
by = {}
for line in open(sys.argv[1]):
    mode, wall, total, job, *_ = line.split(maxsplit=4)
    by.setdefault(mode, []).append((float(wall), float(total), float(job)))
print("%-8s %9s %12s %10s %22s" % ("mode", "wall", "process CPU", "job CPU", "collector CPU / event"))
for mode in ("compact", "text", "hal"):
    v = by[mode]
    coll = [(t - j) / events * 1e9 for _, t, j in v]
    print("%-8s %8.2fs %11.2fs %9.2fs %15.0f ns (%d-%d)" % (mode, statistics.median(w for w, _, _ in v),
          statistics.median(t for _, t, _ in v), statistics.median(j for _, _, j in v),
          statistics.median(coll), min(coll), max(coll)))
print("collector CPU = process tree CPU - the job's own CPU; median over repetitions (min-max)")
PY
tail -3 "$results" | cut -d' ' -f5- | sed 's/^/last rows line: /'
