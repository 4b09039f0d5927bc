#!/usr/bin/env bash
# Benchmark of the dump reader and the offline analyses (issue 6):
# rows/s and peak RSS for read (file order), read in ID order (external sort), compare
# (the dump against itself, op level), leaks and inefficient, on a generated dump.
#
# usage: benches/analysis/run.sh [ROWS] [WORKDIR] [--id-order]
#   default 10000000 rows in /tmp/memscope-bench; rows in msMemScope's order (a block's rows
#   when it dies), or with --id-order in ID order as memscope writes them.
set -euo pipefail
ROWS=${1:-10000000}
WORK=${2:-/tmp/memscope-bench}
ORDER=${3:-}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$WORK"
DUMP="$WORK/dump_${ROWS}${ORDER:+_idorder}.csv"
if [ ! -f "$DUMP" ]; then
    python3 "$ROOT/benches/analysis/gen_dump.py" "$ROWS" "$DUMP" $ORDER
fi
ls -l "$DUMP"
cd "$ROOT"
BIN=$(cargo test --profile dist -p memscope-analysis --test analysis --no-run --message-format=json 2>/dev/null \
    | python3 -c 'import sys,json
for l in sys.stdin:
    m=json.loads(l)
    if m.get("reason")=="compiler-artifact" and m.get("executable") and "/analysis-" in m["executable"]: print(m["executable"])' | tail -1)
echo "bench binary: $BIN"
MODES=${MODES:-read sorted compare leaks inefficient}
for MODE in $MODES; do
    OUT=$(MEMSCOPE_BENCH_FILE="$DUMP" MEMSCOPE_BENCH_MODE=$MODE TMPDIR="$WORK" /usr/bin/time -v "$BIN" --ignored --exact bench::bench --nocapture 2>"$WORK/time_$MODE.txt" | grep '^mode=')
    RSS=$(grep 'Maximum resident set size' "$WORK/time_$MODE.txt" | awk '{print $6}')
    echo "$OUT peak_rss_kib=$RSS"
done
