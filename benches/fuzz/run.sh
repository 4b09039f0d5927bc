#!/usr/bin/env bash
# Runs each fuzz target for SECONDS (default 600) with memory capped (4 GiB address space).
# Usage: benches/fuzz/run.sh [SECONDS] [TARGET...]   (targets: stream capture)
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${1:-600}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(stream capture)
cargo build --release -p memscope-fuzz
rc=0
for t in "${targets[@]}"; do
    ( ulimit -v $((4 << 20)); ./target/release/fuzz_"$t" "$secs" ) || rc=1
done
exit $rc
