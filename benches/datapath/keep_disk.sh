#!/usr/bin/env bash
# The flight recorder's disk bound over a long job (issue 38): `memscope run --keep
# last:64MiB` of `tests/programs/keep_job.c` (HAL blocks and msTX step ranges, ~4 rows a step,
# US µs of sleep a step) for SECONDS, the output path's disk use (allocated blocks: the
# spool's punched chunks are free) checked every 10 s; a SIGUSR2 halfway writes a window run,
# SIGTERM at the end stops the job and memscope writes the exit window.
# Usage: benches/datapath/keep_disk.sh [SECONDS] [US] [BOUND]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
secs="${1:-1800}"
us="${2:-50}"
bound="${3:-64MiB}"
cargo build --profile dist --features parquet -p memscope-cli -p memscope-probe -p sim-npu --manifest-path "$root/Cargo.toml" >/dev/null 2>&1
ms="$root/target/dist/memscope"
lib="$root/target/dist/sim-npu/lib64"
build="$(mktemp -d /tmp/memscope-keep-disk.XXXXXX)"
out="$build/out"
cc -O2 -I "$root/examples/sim-npu/csrc" "$root/tests/programs/keep_job.c" -o "$build/keep_job" \
  -L"$lib" -Wl,-rpath,"$lib" -lascend_hal -lms_tools_ext -lpthread -ldl
echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg); bound $bound; $secs s; $us us a step"
"$ms" run -q --adapters hal,mstx --keep "last:$bound" -o "$out" -- "$build/keep_job" 2000000000 "$us" \
  > "$build/memscope.out" 2> "$build/memscope.err" &
pid=$!
start=$(date +%s)
max=0
echo "| t s | disk bytes | without window runs | largest so far (without window runs) |"
echo "|---|---|---|---|"
while :; do
  sleep 10
  now=$(( $(date +%s) - start ))
  d=$(du -s --block-size=1 "$out" 2>/dev/null | cut -f1)
  # the rolling part: the window runs a SIGUSR2 wrote are kept copies, outside the bound
  r=$(du -s --block-size=1 --exclude='window_*' "$out" 2>/dev/null | cut -f1)
  (( r > max )) && max=$r
  echo "| $now | $d | $r | $max |"
  if (( now >= secs / 2 )) && [[ ! -e "$build/usr2" ]]; then kill -USR2 "$pid"; touch "$build/usr2"; fi
  (( now >= secs )) && break
done
kill -TERM "$pid"
wait "$pid" || true
steps=$(grep -o 'done [0-9]*' "$build/memscope.out" || true)
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg); largest disk use without window runs $max bytes; job: ${steps:-killed}"
echo "memscope's messages:"; cat "$build/memscope.err"
echo "outputs:"; (cd "$out" && find . -name 'memscope_window.json' -exec sh -c 'echo "$1"; cat "$1"; echo' _ {} \;)
du -s --block-size=1 "$out"
rm -rf "$build"
