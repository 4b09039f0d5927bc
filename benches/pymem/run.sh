#!/usr/bin/env bash
# Python object memory (issue 16): the bench workload alloc_heavy.py (benches/host/workloads/, from the shared
# bench harness; dicts, lists, strings, tuples and bytes, nearly all served by pymalloc), in one
# run, interleaved REPS times, on the same interpreter:
#   none           untraced python
#   memscope       memscope run --adapters pymem --call-stack python:32 (every PYMEM
#                  allocation/free with its Python stack into the capture, the leak and peak
#                  summaries by Python stack; add --host-rows to MEMSCOPE_ARGS to write rows)
#   memscope-nostack  the same without Python stacks (memscope's default)
#   memray-pyalloc memray run --trace-python-allocators (memray's Python stacks on every
#                  allocation of the same allocators: the like-for-like peer)
#   memray         memray run (malloc-family only: fewer allocations, for reference)
# Reported per mode: the whole command's wall and CPU time (user+sys of the process tree, job
# start to the tool's exit), ratios against `none` of the same repetition (paired), medians,
# the output size, the capture's bytes per record (PYMEM mallocs and frees: compare HOST's in
# benches/datapath), and the load (`uptime`) before and after.
# Needs a dist-profile build: cargo build --profile dist -p memscope-cli -p memscope-probe \
#   -p memscope-adapter-pymem. memray comes from PyPI into a venv under /tmp (MEMRAY_VENV to
# reuse one; a venv the script made is deleted at exit).
# Usage: benches/pymem/run.sh [REPS] [ROUNDS]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
workload=$here/../host/workloads/alloc_heavy.py   # the same workload as benches/host
repo=$(cd "$here/../.." && pwd)
reps=${1:-3}
rounds=${2:-40}
bin=$repo/target/dist/memscope
[ -x "$bin" ] && [ -f "$repo/target/dist/libmemscope_adapter_pymem.so" ] || {
    echo "run.sh: build first: cargo build --profile dist -p memscope-cli -p memscope-probe -p memscope-adapter-pymem" >&2
    exit 1
}
work=$(mktemp -d /tmp/pymem-bench.XXXXXX)
venv=${MEMRAY_VENV:-}
cleanup() { rm -rf "$work"; }
trap cleanup EXIT
if [ -z "$venv" ]; then
    venv=$work/venv
    python3 -m venv "$venv" && "$venv/bin/pip" install -q memray
fi
py=$venv/bin/python   # the same interpreter for every mode
echo "load before: $(uptime)"
echo "python: $($py --version 2>&1), memray $($py -c 'import memray; print(memray.__version__)'), alloc_heavy.py rounds: $rounds, repetitions: $reps"
results=$work/results.jsonl
for r in $(seq "$reps"); do
    for mode in none memscope memscope-nostack memray-pyalloc memray; do
        out=$work/out-$mode-$r
        mkdir -p "$out"
        case $mode in
            none) cmd=("$py" "$workload" "$rounds") ;;
            memscope) cmd=("$bin" run --adapters pymem --call-stack python:32 ${MEMSCOPE_ARGS:-} -o "$out/d" -- "$py" "$workload" "$rounds") ;;
            memscope-nostack) cmd=("$bin" run --adapters pymem ${MEMSCOPE_ARGS:-} -o "$out/d" -- "$py" "$workload" "$rounds") ;;
            memray-pyalloc) cmd=("$py" -m memray run -q --trace-python-allocators -o "$out/capture.bin" "$workload" "$rounds") ;;
            memray) cmd=("$py" -m memray run -q -o "$out/capture.bin" "$workload" "$rounds") ;;
        esac
        start=$(date +%s%N)
        (cd "$out" && /usr/bin/time -f '%U %S' -o "$work/time" "${cmd[@]}" > "$work/stdout" 2> "$work/stderr") || {
            echo "$mode failed:"; cat "$work/stderr"; exit 1; }
        end=$(date +%s%N)
        grep -q '^checksum=' "$work/stdout" || { echo "$mode: no checksum"; exit 1; }
        read -r u s < "$work/time"
        size=$(du -sb "$out" | cut -f1)
        events=$(grep -o 'capture: .*(\([0-9]*\) records' "$work/stderr" | grep -o '([0-9]*' | tr -d '(' || true)
        capbytes=$(grep -o 'records, [0-9]* bytes)' "$work/stderr" | grep -o '[0-9]*' || true)
        echo "{\"mode\":\"$mode\",\"rep\":$r,\"wall_s\":$(( (end-start)/1000000 ))e-3,\"cpu_s\":$(awk "BEGIN{print $u + $s}"),\"out_bytes\":$size,\"records\":\"${events:-}\",\"capture_bytes\":\"${capbytes:-}\"}" >> "$results"
        rm -rf "$out"
    done
done
echo "load after:  $(uptime)"
$py - "$results" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
by = {(r["mode"], r["rep"]): r for r in rows}
reps = sorted({r["rep"] for r in rows})
print("%-16s %9s %9s %10s %19s %19s %s" % ("mode", "wall", "cpu", "output", "wall ratio",
      "cpu ratio", "capture records (bytes/record)"))
for m in ("none", "memscope", "memscope-nostack", "memray-pyalloc", "memray"):
    rs = [by[(m, k)] for k in reps]
    med = lambda key: statistics.median(x[key] for x in rs)
    ratio = lambda key: [by[(m, k)][key] / by[("none", k)][key] for k in reps]
    fmt = lambda v: "%.2fx (%.2f-%.2f)" % (statistics.median(v), min(v), max(v))
    rec, cb = rs[-1]["records"], rs[-1].get("capture_bytes", "")
    per = " (%.2f)" % (int(cb) / int(rec)) if rec and cb else ""
    print("%-16s %8.2fs %8.2fs %9.1fM %19s %19s %s%s" % (m, med("wall_s"), med("cpu_s"),
          med("out_bytes") / 1e6, fmt(ratio("wall_s")), fmt(ratio("cpu_s")), rec, per))
print("ratios: paired per repetition against `none`, median (min-max); whole command, "
      "interpreter start to the tool's exit")
PY
