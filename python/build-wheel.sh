#!/usr/bin/env bash
# Builds the memscope wheel into target/wheels/<profile>[-<target>]/ and prints its path on its
# last line: stages the probe and the shipped adapter libraries as wheel data
# (_build/memscope_build.py), then runs maturin (from PyPI: pip install maturin).
#
#   python/build-wheel.sh [--release] [--glibc V | --host-glibc] [--target TRIPLE]
#
# --release   the `dist` profile (fat LTO: what a user should install), linked against glibc 2.17
#             and tagged manylinux2014 (zig: `pip install ziglang cargo-zigbuild`)
# (default)   the dev profile (what the tests use), linked against the host's glibc, tagged
#             linux (a local wheel)
# --glibc V   link every ELF against glibc V with zig and tag the wheel manylinux_V
# --host-glibc  with --release: the host's glibc and a `linux` tag (no zig)
# --target T  build for T (aarch64-unknown-linux-gnu: in the aarch64 chroot, .ci/aarch64-env.sh)
# Every binary is stripped.
set -euo pipefail
cd "$(dirname "$0")/.."
profile=debug
glibc=""
target=""
host_glibc=0
while [ $# -gt 0 ]; do
    case "$1" in
    --release) profile=dist; glibc=${glibc:-2.17} ;;
    --glibc) glibc=$2; shift ;;
    --host-glibc) host_glibc=1 ;;
    --target) target=$2; shift ;;
    *) echo "build-wheel.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
[ "$host_glibc" = 1 ] && glibc=""
command -v maturin >/dev/null 2>&1 || python3 -m maturin --version >/dev/null 2>&1 || {
    echo "build-wheel.sh: maturin is not installed (pip install maturin)" >&2
    exit 1
}
maturin() { if command -v maturin >/dev/null 2>&1; then command maturin "$@"; else python3 -m maturin "$@"; fi; }
args=()
[ "$profile" = debug ] || args+=(--profile "$profile")
if [ -n "$glibc" ]; then
    command -v cargo-zigbuild >/dev/null 2>&1 && { command -v zig >/dev/null 2>&1 || python3 -m ziglang version >/dev/null 2>&1 || [ -n "${CARGO_ZIGBUILD_ZIG_PATH:-}" ]; } || {
        echo "build-wheel.sh: linking against glibc $glibc needs zig and cargo-zigbuild (pip install ziglang cargo-zigbuild), or pass --host-glibc" >&2
        exit 1
    }
    args+=(--zig --compatibility "manylinux_${glibc/./_}")
    # zig links: a linker or C compiler set for the target (the aarch64 chroot sets gcc's)
    # would take its place.
    t=${target:-$(rustc -vV | sed -n 's/^host: //p')}
    tu=$(echo "$t" | tr 'a-z-' 'A-Z_')
    unset "CARGO_TARGET_${tu}_LINKER" "CC_${t//-/_}" "CXX_${t//-/_}" "AR_${t//-/_}"
else
    args+=(--compatibility linux)
fi
[ -n "$target" ] && args+=(--target "$target")
stage=(--profile "$profile")
[ -n "$target" ] && stage+=(--target "$target")
[ -n "$glibc" ] && stage+=(--glibc "$glibc")
python3 python/_build/memscope_build.py "${stage[@]}" >&2
out=$PWD/target/wheels/$profile${target:+-$target}${glibc:+-glibc$glibc}
rm -rf "$out"
(cd python && maturin build "${args[@]}" --out "$out" >&2)
ls "$out"/memscope-*.whl
