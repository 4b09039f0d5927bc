#!/usr/bin/env bash
# Cost of one msTX mark, plain vs under the memscope probe (target <= 150 ns per mark).
#
# Builds the probe in the `dist` profile, a copy of the abi.md Appendix A msTX front end
# (libms_tools_ext.so) and mark_cost.c, then runs mark_cost REPEATS times each way:
#   plain - no tool injected: the front end's slot is NULL, the call returns at once;
#   probe - LD_PRELOAD=target/dist/libmemscope_probe.so, MEMSCOPE_SPOOL set, adapter mstx
#           selected (MEMSCOPE_ADAPTERS=1): every mark is recorded into the stream file
#           (no collector runs: this measures the traced thread only).
# Prints the median ns per mark both ways (and of the empty loop), the overhead and ratio,
# and the stream's bytes per event (committed record bytes / marks).
#
# usage: benches/mark_cost/run.sh [marks] [repeats] [threads]
set -euo pipefail
cd "$(dirname "$0")/../.."
N=${1:-2000000}
REPEATS=${2:-5}
THREADS=${3:-1}

cargo build --profile dist -q -p memscope-probe
ROOT=$PWD
PROBE=$ROOT/target/dist/libmemscope_probe.so
BUILD=$(mktemp -d)
SPOOL=$(mktemp -d)
trap 'rm -rf "$BUILD" "$SPOOL"' EXIT
cc -O2 -g -shared -fPIC -o "$BUILD/libms_tools_ext.so" benches/mark_cost/mstx_frontend.c -ldl
cc -O2 -g -Wall -o "$BUILD/mark_cost" benches/mark_cost/mark_cost.c \
    -L"$BUILD" -Wl,-rpath,"$BUILD" -lms_tools_ext -lpthread
nm -D --defined-only "$PROBE" | grep ' T InitInjectionMstx$' >/dev/null \
    || { echo "probe lacks InitInjectionMstx" >&2; exit 1; }

median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
field() { sed -n "s/^$1 //p" <<<"$2"; }

plain_mark=() plain_empty=() probe_mark=() probe_empty=() plain_cpu=() probe_cpu=()
bytes=0 marks=0 dropped=0
for ((r = 0; r < REPEATS; r++)); do
    out=$(env -u LD_PRELOAD -u MSTX_INJECTION_PATH -u MEMSCOPE_SPOOL "$BUILD/mark_cost" "$N" "$THREADS")
    plain_mark+=("$(field mark_ns "$out")"); plain_empty+=("$(field empty_ns "$out")")
    plain_cpu+=("$(field mark_cpu_ns "$out")")
    rm -rf "${SPOOL:?}"/*
    out=$(env -u MSTX_INJECTION_PATH MEMSCOPE_SPOOL="$SPOOL" MEMSCOPE_ADAPTERS=1 \
          MEMSCOPE_COLLECT_MODE=immediate LD_PRELOAD="$PROBE" "$BUILD/mark_cost" "$N" "$THREADS")
    probe_mark+=("$(field mark_ns "$out")"); probe_empty+=("$(field empty_ns "$out")")
    probe_cpu+=("$(field mark_cpu_ns "$out")")
    marks=$(field marks "$out")
    stats=$(python3 benches/mark_cost/stream_stats.py "$SPOOL"/*.stream)
    bytes=$(sed -n 's/^committed_bytes \([0-9]*\).*/\1/p' <<<"$stats")
    dropped=$(sed -n 's/.*dropped \([0-9]*\).*/\1/p' <<<"$stats")
done

pm=$(printf '%s\n' "${plain_mark[@]}" | median)
pe=$(printf '%s\n' "${plain_empty[@]}" | median)
qm=$(printf '%s\n' "${probe_mark[@]}" | median)
qe=$(printf '%s\n' "${probe_empty[@]}" | median)
pc=$(printf '%s\n' "${plain_cpu[@]}" | median)
qc=$(printf '%s\n' "${probe_cpu[@]}" | median)
echo "marks per run: $N x $THREADS thread(s), $REPEATS runs each way (medians)"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPU(s)"
echo "plain: empty loop $pe ns/iter, mstxMarkA $pm ns/mark wall, $pc ns/mark thread CPU"
echo "probe: empty loop $qe ns/iter, mstxMarkA $qm ns/mark wall, $qc ns/mark thread CPU"
awk -v p="$pm" -v q="$qm" -v c="$qc" 'BEGIN {
    printf "overhead %.2f ns/mark wall, ratio %.1fx (probe/plain); target <= 150 ns/mark: %s\n",
           q - p, (p > 0 ? q / p : 0), (q <= 150 ? "met" : (c <= 150 ? "met in CPU time (wall time inflated by other load)" : "NOT met"))
}'
awk -v b="$bytes" -v m="$marks" -v d="$dropped" 'BEGIN {
    printf "stream: %d committed bytes for %d marks = %.2f bytes/event (Thread records included), %d dropped\n",
           b, m, (m > 0 ? b / m : 0), d
}'
