#!/usr/bin/env bash
# End-to-end data-path benchmark (issues 9, 37): whole `memscope run --adapters host` against the
# uninstrumented job and heaptrack, paired runs, then issue 37's targets judged on the figures.
# Usage: benches/datapath/run.sh [-n PAIRS]
# [--workloads churn,threads1,threads4,threads16,threads64,storm64]
# [--tools memscope,memscope-c32,memscope-csv,memscope-db,memscope-agg,memscope-c32-agg,
# memscope-keep,heaptrack] (the -agg tools: --aggregate; -keep: --keep last:64MiB; issue 38).
# BENCH_PROFILE=release (default: the profile README command 1 builds) or dist.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
profile="${BENCH_PROFILE:-release}"
cargo build --profile "$profile" -p memscope-cli -p memscope-probe --manifest-path "$root/Cargo.toml"
build="${BENCH_BUILD:-/tmp/memscope-datapath-build}"
mkdir -p "$build"
gcc -O2 -g -fno-omit-frame-pointer -pthread -o "$build/churn" "$root/benches/host/workloads/churn.c"
gcc -O2 -g -fno-omit-frame-pointer -pthread -o "$build/threads" "$here/threads.c"
gcc -O2 -g -fno-omit-frame-pointer -pthread -o "$build/storm" "$here/storm.c"
gcc -O2 -o "$build/spawn" "$root/benches/host/lib/spawn.c"
echo "profile: $profile; commit: $(git -C "$root" rev-parse --short HEAD)"
exec python3 "$here/bench.py" --build "$build" --memscope "$root/target/$profile/memscope" "$@"
