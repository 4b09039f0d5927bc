#!/usr/bin/env bash
# Python-trace cost on a 1 M-call Python loop (issue 12): the loop's time (in-process) and the
# whole command's wall/CPU time (job start to exit, collector included, what the user waits
# for), for: untraced python, sys.setprofile with a no-op Python function, memscope's tracer in a
# plain `python` (memscope.start() + tracer.start()), and `memscope run --events traceback`.
# All in the same run, REPS repetitions each, interleaved; medians are printed.
# Needs a dist-profile build: cargo build --profile dist -p memscope-cli -p memscope-probe
# Usage: benches/python_trace/run.sh [REPS] [N]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
reps=${1:-5}
n=${2:-1000000}
bin=$repo/target/dist/memscope
[ -x "$bin" ] || { echo "run.sh: build first: cargo build --profile dist -p memscope-cli -p memscope-probe" >&2; exit 1; }
py=${PYTHON:-python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export MEMSCOPE_CLI=$bin PYTHONPATH=$repo/python TMPDIR=$work
echo "load: $(uptime)"
echo "python: $($py --version 2>&1), calls per run: $n, repetitions: $reps"
results=$work/results.jsonl
for r in $(seq "$reps"); do
    for mode in none setprofile memscope launcher; do
        out=$work/out-$mode-$r
        mkdir -p "$out"
        start=$(date +%s%N)
        if [ "$mode" = launcher ]; then
            line=$(cd "$out" && /usr/bin/time -f '%U %S' -o "$work/time" "$bin" run -q -o "$out/d" \
                --events alloc,free,traceback -- "$py" "$here/loop.py" none "$n" | tail -1)
        else
            line=$(cd "$out" && /usr/bin/time -f '%U %S' -o "$work/time" "$py" "$here/loop.py" "$mode" "$n" 2>/dev/null | tail -1)
            # plain mode: the collector finishes after the job; wait for its spool to go.
            while ls -d "$work"/memscope_spool_* >/dev/null 2>&1; do sleep 0.01; done
        fi
        end=$(date +%s%N)
        read -r u s < "$work/time"
        rows=$(cat "$out"/d/*/device_*/dump/python_trace_* "$out"/memscopeDumpResults/*/device_*/dump/python_trace_* 2>/dev/null | wc -l || true)
        echo "$line" | $py -c "
import json,sys
d=json.loads(sys.stdin.read()); d['mode']='$mode'
d.update(cmd_wall_s=($end-$start)/1e9, cmd_cpu_s=$u+$s, trace_rows=max(0,$rows-1))
print(json.dumps(d))" >> "$results"
    done
done
$py - "$results" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
med = {}
for m in ("none", "setprofile", "memscope", "launcher"):
    rs = [r for r in rows if r["mode"] == m]
    med[m] = {k: statistics.median(r[k] for r in rs)
              for k in ("loop_wall_s", "loop_cpu_s", "cmd_wall_s", "cmd_cpu_s", "trace_rows")}
base, prof = med["none"], med["setprofile"]
print("%-11s %11s %11s %11s %11s %10s %9s %9s" % ("mode", "loop wall", "loop cpu", "cmd wall",
      "cmd cpu", "rows", "/untraced", "/setprof"))
for m, v in med.items():
    print("%-11s %10.3fs %10.3fs %10.3fs %10.3fs %10d %8.2fx %8.2fx" % (
        m, v["loop_wall_s"], v["loop_cpu_s"], v["cmd_wall_s"], v["cmd_cpu_s"], v["trace_rows"],
        v["loop_wall_s"] / base["loop_wall_s"], v["loop_wall_s"] / prof["loop_wall_s"]))
print("ratios are of the loop's wall time; cmd = whole command incl. interpreter start and, for "
      "memscope, the collector writing the python_trace rows")
PY
