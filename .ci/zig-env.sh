#!/usr/bin/env bash
# zig (PyPI `ziglang`) and cargo-zigbuild (PyPI `cargo-zigbuild`), installed once into
# ${MEMSCOPE_CI_CACHE:-$HOME/.cache/memscope-ci}/zig (outside the clone) and reused: they link
# the shipped binaries against an old glibc (python/build-wheel.sh --glibc); maturin beside them
# (its binary, for the aarch64 chroot). Prints the folder:
# its bin/ has `cargo-zigbuild`, its ziglang/zig the compiler (CARGO_ZIGBUILD_ZIG_PATH).
set -euo pipefail
CACHE=${MEMSCOPE_CI_CACHE:-$HOME/.cache/memscope-ci}
ZIG=${MEMSCOPE_ZIG_DIR:-$CACHE/zig}
if [ ! -x "$ZIG/ziglang/zig" ] || [ ! -x "$ZIG/bin/cargo-zigbuild" ] || [ ! -x "$ZIG/bin/maturin" ]; then
    rm -rf "$ZIG"
    mkdir -p "$ZIG"
    python3 -m pip install -q --disable-pip-version-check --no-warn-script-location \
        --target "$ZIG" ziglang cargo-zigbuild "maturin>=1.0,<2.0" >&2
fi
echo "$ZIG"
