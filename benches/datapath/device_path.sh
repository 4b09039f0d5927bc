#!/usr/bin/env bash
# The device path (issue 38's costs): the sim-npu demo (`train.py --steps S`, pool, HAL and
# msTX events) bare, under `memscope run` with the default outputs, with `--aggregate` and with
# `--keep last:64MiB`, alternating, N rounds; wall seconds and output bytes per run.
# Usage: benches/datapath/device_path.sh [N] [STEPS]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
n="${1:-3}"
steps="${2:-3000}"
cargo build --profile dist --features parquet -p memscope-cli -p memscope-probe -p sim-npu --manifest-path "$root/Cargo.toml" >/dev/null 2>&1
ms="$root/target/dist/memscope"
job=(python3 "$root/examples/sim-npu/train.py" --steps "$steps")
export SIM_NPU_DIR="$root/target/dist/sim-npu"
scratch="$(mktemp -d /tmp/memscope-device-path.XXXXXX)"
trap 'rm -rf "$scratch"' EXIT
wall() { local t0 t1; t0=$(date +%s.%N); "$@" >/dev/null 2>&1; t1=$(date +%s.%N); echo "$t1 - $t0" | bc; }
size() { du -s --block-size=1 "$1" | cut -f1; }
echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| round | bare s | default s | --aggregate s | --keep last:64MiB s | default bytes | aggregate bytes | keep bytes |"
echo "|---|---|---|---|---|---|---|---|"
for r in $(seq 1 "$n"); do
  rm -rf "$scratch"/*
  b=$(wall "${job[@]}")
  d=$(wall "$ms" run -q --adapters pta,hal,mstx --call-stack python:8 -o "$scratch/d" -- "${job[@]}")
  a=$(wall "$ms" run -q --adapters pta,hal,mstx --call-stack python:8 --aggregate -o "$scratch/a" -- "${job[@]}")
  k=$(wall "$ms" run -q --adapters pta,hal,mstx --call-stack python:8 --keep last:64MiB -o "$scratch/k" -- "${job[@]}")
  echo "| $r | $b | $d | $a | $k | $(size "$scratch/d") | $(size "$scratch/a") | $(size "$scratch/k") |"
done
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
