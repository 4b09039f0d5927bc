#!/usr/bin/env bash
# Builds the memscope wheel into target/wheels/: stages the probe library as wheel data, then
# runs maturin (from PyPI: pip install maturin). `--release` builds optimised binaries in the
# `dist` profile (fat LTO: what a user should install); without it the dev profile is used (what
# the tests use, reusing target/debug). Prints the wheel's path on its last line.
set -euo pipefail
cd "$(dirname "$0")/.."
profile=debug
args=()
if [ "${1:-}" = "--release" ]; then
    profile=dist
    args+=(--profile dist)
fi
command -v maturin >/dev/null 2>&1 || python3 -m maturin --version >/dev/null 2>&1 || {
    echo "build-wheel.sh: maturin is not installed (pip install maturin)" >&2
    exit 1
}
cargo build -p memscope-probe -p memscope-adapter-pymem ${args[@]+"${args[@]}"}
stage=target/wheeldata/data/lib/memscope
rm -rf target/wheeldata
mkdir -p "$stage"
cp "target/$profile/libmemscope_probe.so" "$stage/"
# the PYMEM adapter (`--adapters pymem`, `pytest --memscope-pymem`) is found next to the probe
cp "target/$profile/libmemscope_adapter_pymem.so" "$stage/"
# msMemScope's command name (issue 26): a script, so that `source msmemscope --load-api-env` works
mkdir -p target/wheeldata/scripts
cp memscope-cli/msmemscope target/wheeldata/scripts/
out=$PWD/target/wheels/$profile
rm -rf "$out"
(cd python && python3 -m maturin build ${args[@]+"${args[@]}"} --compatibility linux \
    --out "$out" >&2)
ls "$out"/memscope-*.whl
