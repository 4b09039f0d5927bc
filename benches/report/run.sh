#!/usr/bin/env bash
# Benchmark of `memscope report` (issue 14) on a generated dump: wall and CPU time, peak RSS
# and the size of the page, next to `memscope analyze gap` on the same dump (one read in ID
# order through one analysis: the floor the report's single pass is measured against), and
# the time headless Chromium takes to load the page to its ready marker.
#
# usage: benches/report/run.sh [ROWS] [WORKDIR] [--id-order]
#   default 10000000 rows in /tmp/memscope-bench (the dump is reused when present); rows in
#   msMemScope's order (external sort) or, with --id-order, in ID order as memscope writes them.
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
(cd "$ROOT" && cargo build --profile dist --features parquet -p memscope-cli >/dev/null)
BIN="$ROOT/target/dist/memscope"
echo "load before: $(uptime)"
measure() { # name, command...
    local name=$1; shift
    /usr/bin/time -v "$@" >"$WORK/out_$name.txt" 2>"$WORK/time_$name.txt"
    local wall user sys rss
    wall=$(grep 'Elapsed (wall clock)' "$WORK/time_$name.txt" | awk '{print $NF}')
    user=$(grep 'User time' "$WORK/time_$name.txt" | awk '{print $NF}')
    sys=$(grep 'System time' "$WORK/time_$name.txt" | awk '{print $NF}')
    rss=$(grep 'Maximum resident set size' "$WORK/time_$name.txt" | awk '{print $NF}')
    echo "$name: wall=$wall user_s=$user sys_s=$sys peak_rss_kib=$rss"
}
OUT="$WORK/report_${ROWS}${ORDER:+_idorder}.html"
rm -f "$OUT"
measure gap env TMPDIR="$WORK" "$BIN" analyze gap "$DUMP"
measure report env TMPDIR="$WORK" "$BIN" report "$DUMP" -o "$OUT"
cat "$WORK/out_report.txt"
echo "page: $(stat -c %s "$OUT") bytes"
if command -v chromium >/dev/null 2>&1; then
    # the page's own time from navigation start to its ready marker (performance.now()), and
    # the wall time of the whole headless run (browser start included)
    PROFILE=$(mktemp -d)
    START=$(date +%s%N)
    READY_MS=$(chromium --headless --no-sandbox --disable-gpu --no-first-run --disable-background-networking \
        --host-resolver-rules="MAP * ~NOTFOUND" --user-data-dir="$PROFILE" \
        --dump-dom "file://$OUT" 2>/dev/null | grep -o 'data-ready-ms="[0-9]*"' | grep -o '[0-9]*' || echo none)
    END=$(date +%s%N)
    rm -rf "$PROFILE"
    echo "chromium: page_ready_ms=$READY_MS headless_run_s=$(python3 -c "print(round(($END - $START) / 1e9, 2))")"
fi
echo "load after: $(uptime)"
