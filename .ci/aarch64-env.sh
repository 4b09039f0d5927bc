#!/usr/bin/env bash
# The aarch64 build environment (../shared/design/aarch64.md): a debootstrapped Debian bookworm
# chroot with Debian's rustc-web (>= 1.89, from bookworm-security) and its arm64 standard
# library, the aarch64 C/C++ cross compilers, qemu-user-static as the test runner, and zig (PyPI
# `ziglang` + `cargo-zigbuild`, .ci/zig-env.sh) to link against an old glibc. The host gets only
# debootstrap, qemu-user-static and binfmt-support (fork+exec of aarch64 children); arm64 is
# added inside the chroot alone. zig is the host's (.ci/zig-env.sh), mounted at /opt/zig.
#
#   .ci/aarch64-env.sh setup          create or update the chroot (kept in the cache, reused)
#   .ci/aarch64-env.sh run CMD...     run CMD in the repository (mounted at its own path),
#                                     inside the chroot
#
# The chroot and the aarch64 target directory live outside the clone, in
# ${MEMSCOPE_CI_CACHE:-$HOME/.cache/memscope-ci}, so a second CI run on the same machine reuses
# both. Needs root (debootstrap, chroot, mount --bind).
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE=${MEMSCOPE_CI_CACHE:-$HOME/.cache/memscope-ci}
ROOT=${MEMSCOPE_A64_ROOT:-$CACHE/a64-bookworm}
BUILD=${MEMSCOPE_A64_BUILD:-$CACHE/a64-build}
# Bump when the package list below changes: an older chroot is then upgraded in place.
STAMP_VERSION=4

host_setup() {
    local need=()
    command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
    command -v qemu-aarch64-static >/dev/null 2>&1 || need+=(qemu-user-static)
    command -v update-binfmts >/dev/null 2>&1 || need+=(binfmt-support)
    if [ ${#need[@]} -gt 0 ]; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"
    fi
    # fork+exec of an aarch64 program from an aarch64 job: the kernel hands it to qemu
    # (registered with the F flag, so it works inside the chroot too).
    if [ ! -e /proc/sys/fs/binfmt_misc/register ]; then
        mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc 2>/dev/null || true
    fi
    if [ ! -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]; then
        update-binfmts --enable qemu-aarch64 >/dev/null 2>&1 || true
    fi
}

mirror() { # URI of the host's Debian mirror (security or not), else Debian's defaults
    local srcs=/etc/apt/sources.list.d/debian.sources want=$1 uri=""
    if [ -f "$srcs" ]; then
        if [ "$want" = security ]; then
            uri=$(awk '/^URIs:/ && /security/ {print $2; exit}' "$srcs")
        else
            uri=$(awk '/^URIs:/ && !/security/ {print $2; exit}' "$srcs")
        fi
    fi
    if [ -z "$uri" ]; then
        if [ "$want" = security ]; then uri=http://deb.debian.org/debian-security; else uri=http://deb.debian.org/debian; fi
    fi
    echo "$uri"
}

chroot_setup() {
    local stamp="$ROOT/.memscope-chroot-$STAMP_VERSION"
    [ -f "$stamp" ] && return 0
    if [ ! -x "$ROOT/usr/bin/apt-get" ]; then
        rm -rf "$ROOT"
        mkdir -p "$(dirname "$ROOT")"
        debootstrap --variant=minbase --include=ca-certificates bookworm "$ROOT" "$(mirror main)" >/dev/null
        echo "deb $(mirror security) bookworm-security main" >>"$ROOT/etc/apt/sources.list"
        chroot "$ROOT" dpkg --add-architecture arm64
    fi
    chroot "$ROOT" apt-get update -qq
    chroot "$ROOT" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        rustc-web cargo-web libstd-rust-web-dev:arm64 gcc g++ libc6-dev make binutils \
        gcc-aarch64-linux-gnu g++-aarch64-linux-gnu libc6-dev-arm64-cross binutils-aarch64-linux-gnu \
        libstdc++6:arm64 qemu-user-static python3 python3-venv file procps >/dev/null
    chroot "$ROOT" apt-get clean
    touch "$stamp"
}

# The repository is mounted at its own path, so the x86_64 test binaries built outside (which
# know their sources by absolute path) run inside unchanged. Mounts left by an interrupted run
# are dropped first; all are dropped (lazily: a job that outlived its test may still hold one)
# on exit.
unmount_all() {
    local m
    for _ in 1 2 3; do
        for m in $(awk -v r="$ROOT/" 'index($2, r) == 1 {print $2}' /proc/mounts | sort -r -u); do
            umount -l "$m" 2>/dev/null || true
        done
    done
}

mounts() {
    unmount_all
    mkdir -p "$ROOT$PWD" "$ROOT/build" "$ROOT/root/.cargo/registry" "$BUILD" "$ROOT/opt/zig"
    local reg=${CARGO_HOME:-$HOME/.cargo}/registry
    mkdir -p "$reg"
    trap unmount_all EXIT
    mount --bind /proc "$ROOT/proc"
    mount --bind /dev "$ROOT/dev"
    mount --bind "$PWD" "$ROOT$PWD"
    mount --bind "$BUILD" "$ROOT/build"
    mount --bind "$reg" "$ROOT/root/.cargo/registry"
    mount --bind "$ZIG" "$ROOT/opt/zig"
}

case "${1:-}" in
setup)
    host_setup
    chroot_setup
    ZIG=$(.ci/zig-env.sh)
    ;;
run)
    shift
    host_setup
    chroot_setup
    ZIG=$(.ci/zig-env.sh)
    mounts
    chroot "$ROOT" env -C "$PWD" \
        PATH=/opt/zig/bin:/opt/zig/ziglang:/usr/local/bin:/usr/bin:/bin \
        CARGO_ZIGBUILD_ZIG_PATH=/opt/zig/ziglang/zig \
        HOME=/root CARGO_TARGET_DIR=/build/target \
        CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc \
        CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER=qemu-aarch64-static \
        CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc \
        CXX_aarch64_unknown_linux_gnu=aarch64-linux-gnu-g++ \
        AR_aarch64_unknown_linux_gnu=aarch64-linux-gnu-ar \
        MEMSCOPE_TEST_CC=aarch64-linux-gnu-gcc \
        "$@"
    ;;
*)
    echo "usage: $0 setup | run CMD..." >&2
    exit 2
    ;;
esac
