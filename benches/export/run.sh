#!/usr/bin/env bash
# Benchmark of `memscope export` (issue 15): a generated run of ROWS rows exported to each
# format; wall and CPU time, rows/s, peak RSS and output bytes per event, with the plain read of
# the same run (`memscope analyze gap`, which reads every row in ID order) as the baseline.
#
# usage: benches/export/run.sh [ROWS...] [-- WORKDIR]
#   default: 10000000 rows in /tmp/memscope-export-bench. Several sizes show whether peak RSS
#   stays flat as the input grows. The dump is written in ID order into msMemScope's layout
#   (run/msmemscope_4242_<ts>_ascend/device_0/dump/), as `memscope run` writes it.
#   MSORDER=1 writes rows in msMemScope's order instead (every export then sorts).
set -euo pipefail
SIZES=()
WORK=/tmp/memscope-export-bench
while [ $# -gt 0 ]; do
    case "$1" in
        --) WORK=$2; shift 2 ;;
        *) SIZES+=("$1"); shift ;;
    esac
done
[ ${#SIZES[@]} -gt 0 ] || SIZES=(10000000)
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$WORK"
(cd "$ROOT" && cargo build --profile dist --features parquet -p memscope-cli >/dev/null 2>&1)
BIN="$ROOT/target/dist/memscope"
echo "host: $(nproc) cores, load: $(uptime | sed 's/.*load average: //')"
printf '%-10s %-11s %10s %8s %8s %12s %10s %14s %9s\n' rows mode events wall_s cpu_s rows_per_s rss_mib out_bytes B/event
for ROWS in "${SIZES[@]}"; do
    RUN="$WORK/run_${ROWS}${MSORDER:+_ms}"
    DUMP="$RUN/msmemscope_4242_20260101000000_ascend/device_0/dump/memscope_dump_20260101000000.csv"
    if [ ! -f "$DUMP" ]; then
        mkdir -p "$(dirname "$DUMP")"
        ORDER_FLAG=--id-order
        [ -z "${MSORDER:-}" ] || ORDER_FLAG=
        python3 "$ROOT/benches/analysis/gen_dump.py" "$ROWS" "$DUMP" $ORDER_FLAG 2>/dev/null
    fi
    for MODE in read memory-viz perfetto parquet; do
        OUT="$WORK/out_${ROWS}_$MODE"
        rm -rf "$OUT" "$OUT.pickle" "$OUT.pftrace"
        case $MODE in
            read) CMD=("$BIN" analyze gap "$DUMP"); TARGET= ;;
            memory-viz) TARGET="$OUT.pickle"; CMD=("$BIN" export --to memory-viz "$RUN" -o "$TARGET") ;;
            perfetto) TARGET="$OUT.pftrace"; CMD=("$BIN" export --to perfetto "$RUN" -o "$TARGET") ;;
            parquet) TARGET="$OUT"; CMD=("$BIN" export --to parquet "$RUN" -o "$TARGET") ;;
        esac
        TMPDIR="$WORK" /usr/bin/time -v "${CMD[@]}" >"$WORK/stdout_$MODE" 2>"$WORK/time_$MODE"
        T="$WORK/time_$MODE"
        WALL=$(grep 'Elapsed (wall clock)' "$T" | awk '{print $NF}' | awk -F: '{ if (NF==3) print $1*3600+$2*60+$3; else print $1*60+$2 }')
        CPU=$(awk '/User time/ {u=$NF} /System time/ {s=$NF} END {print u+s}' "$T")
        RSS=$(grep 'Maximum resident set size' "$T" | awk '{print $6}')
        if [ "$MODE" = read ]; then
            EV=$(( $(wc -l < "$DUMP") - 1 )); BYTES=$(stat -c %s "$DUMP")
        else
            EV=$(grep -o 'exported [0-9]* event' "$WORK/stdout_$MODE" | awk '{print $2}')
            BYTES=$(du -sb "$TARGET" | awk '{print $1}')
        fi
        awk -v r="$ROWS" -v m="$MODE" -v e="$EV" -v w="$WALL" -v c="$CPU" -v k="$RSS" -v b="$BYTES" 'BEGIN {
            printf "%-10s %-11s %10d %8.1f %8.1f %12.0f %10.1f %14d %9.2f\n", r, m, e, w, c, e / w, k / 1024, b, b / e }'
    done
done
echo "(read: the dump itself as out_bytes)"
