#!/usr/bin/env bash
# The aarch64 build environment (../shared/design/aarch64.md): a debootstrapped Debian bookworm
# chroot with Debian's rustc-web (>= 1.89, from bookworm-security) and its arm64 standard
# library, the aarch64 C/C++ cross compilers, qemu-user-static as the test runner, and zig (PyPI
# `ziglang` + `cargo-zigbuild`, .ci/zig-env.sh) to link against an old glibc. The host gets only
# debootstrap, qemu-user-static and binfmt-support (fork+exec of aarch64 children); arm64 is
# added inside the chroot alone. zig is the host's (.ci/zig-env.sh), mounted at /opt/zig.
# An aarch64 CPython 3.11 (Debian's, run by qemu) is at $MEMSCOPE_A64_PYTHON (/opt/py-arm64/bin/
# python3), with pip (`-m venv` works), pytest and maturin in its base (py_setup below).
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
STAMP_VERSION=5
# The aarch64 Python's prefix inside the chroot; bump PY_STAMP_VERSION when py_setup changes.
PY_A64=/opt/py-arm64
PY_STAMP_VERSION=2

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
        libstdc++6:arm64 qemu-user-static python3 python3-venv file procps \
        libpython3.11-stdlib:arm64 libexpat1:arm64 zlib1g:arm64 >/dev/null
    chroot "$ROOT" apt-get clean
    touch "$stamp"
}

# The aarch64 Python. Its standard library (with the aarch64 extension modules) and every
# library it links are Multi-Arch: same, so apt installs them beside the x86_64 ones
# (libpython3.11-stdlib:arm64 above, in lockstep with the x86_64 python3's version). Only the
# interpreter, python3.11-minimal:arm64, cannot be: installing it would replace the x86_64
# python3 the builds run. So its binary alone is unpacked (dpkg-deb -x), into a prefix of its
# own whose lib/python3.11 is the shared /usr/lib/python3.11: sys.prefix is $PY_A64, pip installs
# into $PY_A64/local, never among the x86_64 python3's packages. Rebuilt whenever apt moved the
# arm64 standard library to another version (its version is in the stamp). Run under the mounts
# (qemu and pip want /proc and /dev).
py_setup() {
    local ver stamp tmp pip
    ver=$(chroot "$ROOT" dpkg-query -W -f '${Version}' libpython3.11-minimal:arm64)
    stamp="$ROOT$PY_A64/.memscope-py-$PY_STAMP_VERSION-$ver"
    [ -f "$stamp" ] && return 0
    tmp=$ROOT/tmp/memscope-py-arm64
    rm -rf "$ROOT$PY_A64" "$tmp"
    mkdir -p "$tmp"
    chroot "$ROOT" env -C "${tmp#"$ROOT"}" apt-get download -qq -o APT::Sandbox::User=root \
        "python3.11-minimal:arm64=$ver"
    dpkg-deb -x "$tmp"/python3.11-minimal_*_arm64.deb "$tmp/x"
    mkdir -p "$ROOT$PY_A64/bin" "$ROOT$PY_A64/lib"
    cp "$tmp/x/usr/bin/python3.11" "$ROOT$PY_A64/bin/"
    ln -s python3.11 "$ROOT$PY_A64/bin/python3"
    ln -s /usr/lib/python3.11 "$ROOT$PY_A64/lib/python3.11"
    rm -rf "$tmp"
    # pip, pytest and maturin (the sdist test builds its sdist with this Python) into the base
    # (venvs made with --system-site-packages see pytest), by the
    # pip wheel Debian ships for ensurepip (Debian's ensurepip refuses a system Python; the
    # stdlib's EXTERNALLY-MANAGED marker is Debian's, meant for /usr).
    pip=$(echo "$ROOT"/usr/share/python-wheels/pip-*.whl)
    pip=${pip#"$ROOT"}
    chroot "$ROOT" env -u PIP_FIND_LINKS HOME=/root "$PY_A64/bin/python3" "$pip/pip" install -q \
        --no-cache-dir --break-system-packages --root-user-action=ignore --no-warn-script-location \
        "$pip" pytest maturin
    chroot "$ROOT" "$PY_A64/bin/python3" -c 'import platform, pytest; assert platform.machine() == "aarch64"'
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
    # The host's CA bundle (read-only): pip in the chroot trusts what the host's pip does (a
    # TLS-intercepting proxy's CA, say; PIP_CERT and SSL_CERT_FILE come from the host too).
    local ca=/etc/ssl/certs/ca-certificates.crt
    if [ -f "$ca" ] && [ -f "$ROOT$ca" ]; then
        mount --bind -o ro "$ca" "$ROOT$ca"
    fi
}

case "${1:-}" in
setup)
    host_setup
    chroot_setup
    ZIG=$(.ci/zig-env.sh)
    mounts
    py_setup
    ;;
run)
    shift
    host_setup
    chroot_setup
    ZIG=$(.ci/zig-env.sh)
    mounts
    py_setup
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
        MEMSCOPE_A64_PYTHON=$PY_A64/bin/python3 \
        "$@"
    ;;
*)
    echo "usage: $0 setup | run CMD..." >&2
    exit 2
    ;;
esac
