"""The PEP 517 build backend of the `memscope` wheel: maturin, plus the libraries it cannot build.

maturin builds the `memscope` CLI (a `bin` crate) and packs the Python package; the preload
library (`memscope-probe`) and the shipped adapter libraries (`adapters/pymem`) are cdylib crates
of the same workspace that no crate depends on, so this backend builds them first and stages
them as wheel data (`<pyproject dir>/wheeldata/data/lib/memscope/`, which `[tool.maturin] data`
names; the CLI finds them at `<prefix>/lib/memscope/`). `pip install .` (from `python/`), `pip
install <sdist>` and `python/build-wheel.sh` all go through `stage()`.

The sdist is maturin's, completed with the sources of those crates (maturin takes only the CLI's
own path dependencies).

Run as a script it stages only: `python3 memscope_build.py --profile P [--target T]
[--glibc V]` (what `python/build-wheel.sh` calls).
"""

import io
import json
import os
import shutil
import subprocess
import sys
import tarfile

if __name__ != "__main__":  # as the build backend (staging alone needs no maturin module)
    import maturin
    from maturin import (  # noqa: F401  (the rest of the PEP 517 interface is maturin's)
        get_requires_for_build_sdist,
        get_requires_for_build_wheel,
    )

    try:  # PEP 660 editable installs, where this maturin has them
        from maturin import build_editable as _maturin_build_editable  # noqa: F401
        from maturin import get_requires_for_build_editable  # noqa: F401
    except ImportError:  # pragma: no cover
        _maturin_build_editable = None
else:
    _maturin_build_editable = None

#: Library crates shipped in the wheel beside the CLI: (package, library file).
SHIPPED = [
    ("memscope-probe", "libmemscope_probe.so"),
    ("memscope-adapter-pymem", "libmemscope_adapter_pymem.so"),
]
#: Their folders, relative to the workspace root (added to the sdist).
SHIPPED_DIRS = ["memscope-probe", "adapters/pymem"]
#: Files outside every crate folder that crates embed with `include_str!` (the CLI's config
#: schema, torch and framework hooks), added to the sdist at their workspace paths.
EMBEDDED = ["schemas", "python/memscope"]

PYPROJECT_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STAGE = os.path.join(PYPROJECT_DIR, "wheeldata")


def _say(msg):
    print(f"memscope build: {msg}", file=sys.stderr, flush=True)


def workspace_root():
    """The Cargo workspace holding the CLI: the repository root from `python/`, the sdist's own
    root from an unpacked sdist."""
    for d in (os.path.dirname(PYPROJECT_DIR), PYPROJECT_DIR):
        if os.path.isfile(os.path.join(d, "Cargo.toml")) and os.path.isdir(
            os.path.join(d, "memscope-probe")
        ):
            return d
    raise RuntimeError(
        f"memscope build: no Cargo workspace with memscope-probe at or above {PYPROJECT_DIR}"
    )


def stage(profile="release", target=None, glibc=None):
    """Builds the shipped libraries (`cargo build`, or `cargo zigbuild` against glibc `glibc`)
    in `profile` for `target` (default: the host), stripped, and copies them into the wheel
    data folder. Returns the folder."""
    root = workspace_root()
    # pip's PEP 517 build names no target: Cargo's own variable does (a cross build, e.g. an
    # aarch64 pip under qemu driving the host's cargo)
    target = target or os.environ.get("CARGO_BUILD_TARGET") or None
    cmd = ["cargo", "zigbuild"] if glibc else ["cargo", "build"]
    cmd += ["--manifest-path", os.path.join(root, "Cargo.toml"), "--message-format=json-render-diagnostics"]
    if profile == "release":
        cmd.append("--release")
    elif profile != "debug":
        cmd += ["--profile", profile]
    if target or glibc:
        triple = target or _host_triple()
        cmd += ["--target", f"{triple}.{glibc}" if glibc else triple]
    for pkg, _ in SHIPPED:
        cmd += ["-p", pkg]
    _say(" ".join(cmd))
    out = subprocess.run(cmd, cwd=root, stdout=subprocess.PIPE, check=True).stdout
    built = {}
    for line in out.decode().splitlines():
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if msg.get("reason") != "compiler-artifact":
            continue
        for f in msg.get("filenames", []):
            built[os.path.basename(f)] = f
    dest = os.path.join(STAGE, "data", "lib", "memscope")
    shutil.rmtree(STAGE, ignore_errors=True)
    os.makedirs(dest)
    for pkg, lib in SHIPPED:
        if lib not in built:
            raise RuntimeError(f"memscope build: cargo built no {lib} (package {pkg})")
        shutil.copy2(built[lib], os.path.join(dest, lib))
        _strip(os.path.join(dest, lib), target)
    # msMemScope's command name: a shell script (<prefix>/bin/msmemscope), so that `source
    # msmemscope --load-api-env` works in the user's shell.
    scripts = os.path.join(STAGE, "scripts")
    os.makedirs(scripts)
    shutil.copy2(os.path.join(root, "memscope-cli", "msmemscope"), os.path.join(scripts, "msmemscope"))
    return STAGE


def _strip(path, target):
    """Strips the copy at `path` (the dynamic symbol table stays): a small wheel, and the
    build's own file keeps its symbols. binutils' `strip`, or `<arch>-linux-gnu-strip` for
    another architecture."""
    tool = "strip"
    # against the toolchain's host, not uname (an emulated pip's uname is the target's)
    if target and target.split("-")[0] != _host_triple().split("-")[0]:
        tool = target.split("-")[0] + "-linux-gnu-strip"
    try:
        subprocess.run([tool, "--strip-all", path], check=True)
    except OSError as e:
        raise RuntimeError(f"memscope build: cannot run {tool} (binutils): {e}") from e


def _host_triple():
    out = subprocess.run(["rustc", "-vV"], stdout=subprocess.PIPE, check=True).stdout.decode()
    for line in out.splitlines():
        if line.startswith("host: "):
            return line[len("host: "):].strip()
    raise RuntimeError("memscope build: `rustc -vV` names no host")


def _pep517_profile():
    """The Cargo profile of maturin's PEP 517 build: `--profile P` in `MATURIN_PEP517_ARGS`,
    else `release`."""
    args = os.environ.get("MATURIN_PEP517_ARGS", "").split()
    for i, a in enumerate(args):
        if a == "--profile" and i + 1 < len(args):
            return "debug" if args[i + 1] == "dev" else args[i + 1]
        if a.startswith("--profile="):
            p = a.split("=", 1)[1]
            return "debug" if p == "dev" else p
    return "release"


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    """PEP 517: maturin's metadata. It wants the wheel data folder to exist; the libraries are
    staged into it only when the wheel is built."""
    os.makedirs(STAGE, exist_ok=True)
    return maturin.prepare_metadata_for_build_wheel(metadata_directory, config_settings)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    """PEP 517: stage the libraries (in the profile of maturin's PEP 517 build), then let
    maturin build the wheel."""
    stage(_pep517_profile())
    return maturin.build_wheel(wheel_directory, config_settings, metadata_directory)


if _maturin_build_editable is not None:

    def prepare_metadata_for_build_editable(metadata_directory, config_settings=None):
        """PEP 660: as `prepare_metadata_for_build_wheel`."""
        os.makedirs(STAGE, exist_ok=True)
        return maturin.prepare_metadata_for_build_editable(metadata_directory, config_settings)

    def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
        """PEP 660: as `build_wheel`."""
        stage(_pep517_profile())
        return _maturin_build_editable(wheel_directory, config_settings, metadata_directory)


def build_sdist(sdist_directory, config_settings=None):
    """PEP 517: maturin's sdist, with the shipped library crates added to its files and to its
    workspace's members."""
    name = maturin.build_sdist(sdist_directory, config_settings)
    _complete_sdist(os.path.join(sdist_directory, name))
    return name


def _source_files(root, rel):
    """The files of crate folder `rel` (what git tracks, else everything but build output)."""
    try:
        out = subprocess.run(
            ["git", "-C", root, "ls-files", "-z", "--", rel],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            check=True,
        ).stdout.decode()
        files = [f for f in out.split("\0") if f]
        if files:
            return files
    except (OSError, subprocess.CalledProcessError):
        pass
    if os.path.isfile(os.path.join(root, rel)):
        return [rel]
    files = []
    for d, dirs, names in os.walk(os.path.join(root, rel)):
        dirs[:] = [x for x in dirs if x not in ("target", "__pycache__")]
        files += [os.path.relpath(os.path.join(d, n), root) for n in names]
    return sorted(files)


def _complete_sdist(path):
    root = workspace_root()
    with tarfile.open(path, "r:gz") as t:
        members = [(m, t.extractfile(m).read() if m.isfile() else None) for m in t.getmembers()]
    top = members[0][0].name.split("/")[0]
    names = {m.name for m, _ in members}
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz", format=tarfile.PAX_FORMAT) as t:
        for m, data in members:
            if m.name == f"{top}/Cargo.toml":
                data = _add_members(data.decode(), SHIPPED_DIRS).encode()
                m.size = len(data)
            t.addfile(m, io.BytesIO(data) if data is not None else None)
        # The backend itself (maturin packs only the Python package).
        me = f"{top}/_build/{os.path.basename(__file__)}"
        if me not in names:
            t.add(os.path.abspath(__file__), arcname=me, recursive=False)
        for rel in SHIPPED_DIRS + EMBEDDED:
            for f in _source_files(root, rel):
                name = f"{top}/{f}"
                if name in names:
                    continue
                t.add(os.path.join(root, f), arcname=name, recursive=False)
    with open(path, "wb") as f:
        f.write(out.getvalue())


def _add_members(cargo_toml, dirs):
    """`cargo_toml` (maturin's rewritten workspace manifest) with `dirs` among its members."""
    key = "members = ["
    i = cargo_toml.find(key)
    if i < 0:
        raise RuntimeError("memscope build: the sdist's Cargo.toml has no workspace members")
    j = cargo_toml.index("]", i)
    listed = cargo_toml[i + len(key) : j]
    extra = "".join(f', "{d}"' for d in dirs if f'"{d}"' not in listed)
    return cargo_toml[:j] + extra + cargo_toml[j:]


if __name__ == "__main__":
    import argparse

    p = argparse.ArgumentParser(description="stage the wheel's libraries")
    p.add_argument("--profile", default="release")
    p.add_argument("--target")
    p.add_argument("--glibc")
    a = p.parse_args()
    print(stage(a.profile, a.target, a.glibc))
