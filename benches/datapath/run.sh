#!/usr/bin/env bash
# End-to-end data-path benchmark (issue 9): whole `memscope run --adapters host` against the
# uninstrumented job and heaptrack, paired runs. Usage: benches/datapath/run.sh [-n PAIRS]
# [--workloads churn,threads4] [--tools memscope,memscope-c32,memscope-csv,memscope-agg,
# memscope-c32-agg,memscope-keep,heaptrack] (the -agg tools: --aggregate; -keep: --keep last:64MiB;
# issue 38)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cargo build --profile dist --features parquet -p memscope-cli -p memscope-probe --manifest-path "$root/Cargo.toml"
build="${BENCH_BUILD:-/tmp/memscope-datapath-build}"
mkdir -p "$build"
gcc -O2 -g -fno-omit-frame-pointer -pthread -o "$build/churn" "$root/benches/host/workloads/churn.c"
gcc -O2 -g -fno-omit-frame-pointer -pthread -o "$build/threads4" "$here/threads4.c"
gcc -O2 -o "$build/spawn" "$root/benches/host/lib/spawn.c"
exec python3 "$here/bench.py" --build "$build" --memscope "$root/target/dist/memscope" "$@"
