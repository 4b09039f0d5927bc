#!/usr/bin/env bash
# Aggregate mode's output size against the number of events (issue 38): churn_sites (four
# allocation sites) with N allocations (2N HOST events) under `memscope run --adapters host
# --call-stack c:8 --aggregate`, for each N given (default 500000 5000000 50000000: 10^6 to
# 10^8 events). Prints events, wall seconds, the aggregate file's lines and bytes, and the
# whole output directory's bytes. Usage: benches/datapath/aggregate_size.sh [N...]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cargo build --profile dist -p memscope-cli -p memscope-probe --manifest-path "$root/Cargo.toml"
build="${BENCH_BUILD:-/tmp/memscope-datapath-build}"
mkdir -p "$build"
gcc -O2 -g -fno-omit-frame-pointer -o "$build/churn_sites" "$root/tests/programs/churn_sites.c"
[ $# -gt 0 ] || set -- 500000 5000000 50000000
echo "load at start: $(uptime)"
printf '| allocations | HOST events | wall s | aggregate lines | aggregate bytes | output bytes |\n|---|---|---|---|---|---|\n'
for n in "$@"; do
    out=$(mktemp -d)
    start=$(date +%s.%N)
    "$root/target/dist/memscope" run -q --adapters host --call-stack c:8 --aggregate -o "$out" -- \
        "$build/churn_sites" "$n" >/dev/null 2>"$out.err"
    wall=$(echo "$(date +%s.%N) - $start" | bc)
    f=$(find "$out" -name 'memscope_aggregate_*.csv' | head -n 1)
    # events: the MALLOC and FREE rows the aggregate summed (its own totals)
    read -r lines events < <(python3 -c 'import csv, sys
rows = list(csv.DictReader(open(sys.argv[1], newline="")))
print(len(rows), sum(int(r["Allocations"]) + int(r["Frees"]) for r in rows))' "$f")
    printf '| %s | %s | %.1f | %s | %s | %s |\n' "$n" "$events" "$wall" "$lines" "$(stat -c %s "$f")" \
        "$(du -sb "$out" | cut -f1)"
    rm -rf "$out" "$out.err"
done
echo "load at end: $(uptime)"
