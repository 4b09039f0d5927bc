#!/usr/bin/env bash
# Build the workloads and the LD_PRELOAD floor shims, then measure every
# available tool on them.  Writes results-<UTC date>.md next to this script
# (and results-<date>.json with the raw numbers).
#
#   ./run.sh                          # everything available, 5 paired runs per cell
#   ./run.sh -n 3 --tools heaptrack,shim-count --workloads churn
#   MEMSCOPE_LIB=/path/libmemscope.so ./run.sh --tools memscope,shim-record,heaptrack
#
# Environment: BENCH_PYTHON (interpreter for the Python workload and memray;
# default: the python3 on PATH, resolved to the real binary), BYTEHOUND_DIR
# (directory with libbytehound.so and the bytehound CLI), MEMSCOPE_LIB,
# BENCH_SCRATCH (scratch dir, default /tmp/membench; profiles of several
# hundred MiB are written there).
set -euo pipefail
cd "$(dirname "$0")"
make -s -k -C workloads || echo "note: some targets did not build (e.g. shim_unw needs libunwind-dev); their tools are skipped"
PY=${BENCH_PYTHON:-$(python3 -c 'import os,sys; print(os.path.realpath(sys.executable))')}
export BENCH_PYTHON=$PY
command -v heaptrack >/dev/null || echo "note: heaptrack not installed (apt-get install heaptrack) - skipped"
command -v valgrind  >/dev/null || echo "note: valgrind not installed (apt-get install valgrind) - skipped"
"$PY" -c 'import memray' 2>/dev/null || echo "note: memray not installed ($PY -m pip install memray) - skipped"
[ -e "${BYTEHOUND_DIR:-/tmp/bytehound/src/target/release}/libbytehound.so" ] || \
  echo "note: bytehound not built (see tools/build-bytehound.sh) - skipped"
date=$(date -u +%F)
exec "$PY" bench.py --out "results-$date.md" --json "results-$date.json" "$@"
