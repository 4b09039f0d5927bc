#!/usr/bin/env bash
# Cost per pool region event on the recording thread (issue 3; target <= 150 ns).
#
# Builds the probe in the `dist` profile and the sim-npu stand-ins, compiles bench.c against
# the stand-in msTX front end, then runs it twice:
#   plain  - no tool: every msTX slot is NULL, the call returns at once;
#   probe  - LD_PRELOAD=target/dist/libmemscope_probe.so with adapters
#            mstx+pta selected, recording into a throw-away spool directory
#            (no collector runs: this measures the traced thread only).
# Prints ns/event both ways, the overhead (probe - plain) and the ratio.
#
# usage: benches/pool_event_cost/run.sh [pairs] [repeats]
set -euo pipefail
cd "$(dirname "$0")/../.."
PAIRS=${1:-1000000}
REPEATS=${2:-5}

cargo build --profile dist -q -p memscope-probe -p sim-npu
ROOT=$PWD
LIB64=$ROOT/target/dist/sim-npu/lib64
PROBE=$ROOT/target/dist/libmemscope_probe.so
BIN=$ROOT/target/dist/pool_event_cost
cc -O2 -g -Wall -I examples/sim-npu/csrc benches/pool_event_cost/bench.c -o "$BIN" \
    -L"$LIB64" -Wl,-rpath,"$LIB64" -lms_tools_ext
nm -D "$PROBE" | grep ' T InitInjectionMstx$' >/dev/null || { echo "probe lacks InitInjectionMstx" >&2; exit 1; }

# Selection mask: the mstx adapter's SOURCE (SourceId(0), adapters/mstx) = bit 0, pta's
# (SourceId(1), adapters/pta) = bit 1.
MASK=$(( (1 << 0) | (1 << 1) ))
SPOOL=$(mktemp -d)
trap 'rm -rf "$SPOOL"' EXIT

plain=$(env -u LD_PRELOAD -u MSTX_INJECTION_PATH -u MEMSCOPE_SPOOL "$BIN" "$PAIRS" "$REPEATS")
probe=$(env MEMSCOPE_SPOOL="$SPOOL" MEMSCOPE_ADAPTERS=$MASK MEMSCOPE_COLLECT_MODE=immediate \
        MSTX_INJECTION_PATH="$PROBE" LD_PRELOAD="$PROBE" "$BIN" "$PAIRS" "$REPEATS")
bytes=$(du -sb "$SPOOL" | cut -f1)

field() { sed -n "s/.*$1=\([0-9.]*\).*/\1/p" <<<"$2"; }
p=$(field median_ns_per_event "$plain")
q=$(field median_ns_per_event "$probe")
echo "plain: $plain"
echo "probe: $probe"
total=$(( 2 * (PAIRS * REPEATS + PAIRS / 10 + 1) ))
echo "spool: $bytes bytes for $total region events ($(awk -v b="$bytes" -v e="$total" \
    'BEGIN { printf "%.1f", b / e }') bytes/event, file header and heap records included)"
awk -v p="$p" -v q="$q" 'BEGIN {
    printf "median ns/event: plain %.2f, probe %.2f, overhead %.2f ns, ratio %.1fx (target <= 150 ns)\n",
           p, q, q - p, (p > 0 ? q / p : 0)
}'
