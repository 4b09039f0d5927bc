#!/usr/bin/env bash
# Python stacks on every row (issue 13): a 1 M-allocation Python workload (alloc.py), in one
# run, interleaved REPS times:
#   none      untraced python
#   host      memscope run --adapters host (HOST rows, no stacks: what the stacks add is the
#             difference to the next line)
#   memscope  memscope run --adapters host --call-stack python:32 (default CSV output written)
#   memray    memray run (PyPI; its Python stacks on every allocation, capture file written)
# Reported per mode: the whole command's wall and CPU time (job start to the tool's exit,
# user+sys of the process tree), the workload loop's own time, the output size; ratios against
# `none` of the same repetition (paired), medians.
# Needs a dist-profile build (cargo build --profile dist -p memscope-cli -p memscope-probe); memray is
# installed into target/bench-venv from PyPI on first use.
# Usage: benches/python_stacks/run.sh [REPS] [N]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
reps=${1:-5}
n=${2:-1000000}
bin=$repo/target/dist/memscope
[ -x "$bin" ] || { echo "run.sh: build first: cargo build --profile dist -p memscope-cli -p memscope-probe" >&2; exit 1; }
venv=$repo/target/bench-venv
if ! "$venv/bin/python" -c 'import memray' 2>/dev/null; then
    python3 -m venv "$venv" && "$venv/bin/pip" install -q memray
fi
py=$venv/bin/python   # the same interpreter for every mode
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "load: $(uptime)"
echo "python: $($py --version 2>&1), memray $($py -c 'import memray; print(memray.__version__)'), allocations per run: $n, repetitions: $reps"
results=$work/results.jsonl
for r in $(seq "$reps"); do
    for mode in none host memscope memray; do
        out=$work/out-$mode-$r
        mkdir -p "$out"
        case $mode in
            none) cmd=("$py" "$here/alloc.py" "$n") ;;
            host) cmd=("$bin" run -q --adapters host -o "$out/d" -- "$py" "$here/alloc.py" "$n") ;;
            memscope) cmd=("$bin" run -q --adapters host --call-stack python:32 -o "$out/d" -- "$py" "$here/alloc.py" "$n") ;;
            memray) cmd=("$py" -m memray run -q -o "$out/capture.bin" "$here/alloc.py" "$n") ;;
        esac
        start=$(date +%s%N)
        line=$(cd "$out" && /usr/bin/time -f '%U %S' -o "$work/time" "${cmd[@]}" | tail -1)
        end=$(date +%s%N)
        read -r u s < "$work/time"
        size=$(du -sb "$out" | cut -f1)
        echo "$line" | $py -c "
import json,sys
d=json.loads(sys.stdin.read()); d['mode']='$mode'; d['rep']=$r
d.update(cmd_wall_s=($end-$start)/1e9, cmd_cpu_s=$u+$s, out_bytes=$size)
print(json.dumps(d))" >> "$results"
        rm -rf "$out"
    done
done
$py - "$results" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
by = {(r["mode"], r["rep"]): r for r in rows}
reps = sorted({r["rep"] for r in rows})
print("%-9s %9s %9s %9s %9s %9s %19s %19s %19s %19s" % ("mode", "cmd wall", "cmd cpu",
      "loop wall", "loop cpu", "output", "wall ratio", "cpu ratio", "loop wall ratio",
      "loop cpu ratio"))
for m in ("none", "host", "memscope", "memray"):
    rs = [by[(m, k)] for k in reps]
    med = lambda key: statistics.median(x[key] for x in rs)
    ratio = lambda key: [by[(m, k)][key] / by[("none", k)][key] for k in reps]
    fmt = lambda v: "%.2fx (%.2f-%.2f)" % (statistics.median(v), min(v), max(v))
    print("%-9s %8.2fs %8.2fs %8.2fs %8.2fs %8.1fM %19s %19s %19s %19s" % (
        m, med("cmd_wall_s"), med("cmd_cpu_s"), med("loop_wall_s"), med("loop_cpu_s"),
        med("out_bytes") / 1e6, fmt(ratio("cmd_wall_s")), fmt(ratio("cmd_cpu_s")),
        fmt(ratio("loop_wall_s")), fmt(ratio("loop_cpu_s"))))
print("ratios: paired per repetition against `none`, median (min-max); cmd = whole command "
      "(interpreter start to the tool's exit: memscope's collector writing its default outputs — the capture and the summaries, HOST rows off since issue 9 — "
      "memray writing its capture); loop = the workload's own loop in the traced process "
      "(its CPU time leaves out the collector running beside it)")
PY
