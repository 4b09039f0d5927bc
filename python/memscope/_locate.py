"""Where the memscope CLI and the probe library are.

The wheel installs the CLI as ``<prefix>/bin/memscope`` (``scripts``) and the probe as
``<prefix>/lib/memscope/libmemscope_probe.so`` (``data``), next to this package's
``<prefix>/lib/pythonX.Y/site-packages/memscope/``; a venv and ``pip install --user`` both
have that layout. Overrides: ``MEMSCOPE_CLI``, ``MEMSCOPE_PROBE_PATH``. A source checkout
(``python/memscope`` of the repository) uses ``target/{release,debug}/``.
"""

import os
import shutil
import subprocess
import sys
import sysconfig

_HERE = os.path.dirname(os.path.abspath(__file__))
_cache = {}


def _candidates():
    env = os.environ.get("MEMSCOPE_CLI")
    if env:
        yield env
        return
    # <prefix>/lib/pythonX.Y/site-packages/memscope -> <prefix>
    prefix = os.path.abspath(os.path.join(_HERE, "..", "..", "..", ".."))
    yield os.path.join(prefix, "bin", "memscope")
    for scheme in (None, "posix_user"):
        try:
            d = sysconfig.get_path("scripts", scheme) if scheme else sysconfig.get_path("scripts")
        except KeyError:
            continue
        if d:
            yield os.path.join(d, "memscope")
    repo = os.path.abspath(os.path.join(_HERE, "..", ".."))
    builds = [os.path.join(repo, "target", p, "memscope") for p in ("release", "debug")]
    builds = [b for b in builds if os.path.isfile(b)]
    builds.sort(key=os.path.getmtime, reverse=True)
    yield from builds
    which = shutil.which("memscope")
    if which:
        yield which


def cli():
    """Path of the ``memscope`` executable; ``RuntimeError`` naming where it looked."""
    if "cli" in _cache:
        return _cache["cli"]
    tried = []
    for c in _candidates():
        tried.append(c)
        if os.path.isfile(c) and os.access(c, os.X_OK):
            _cache["cli"] = c
            return c
    raise RuntimeError("memscope: the memscope executable was not found (looked at %s); "
                       "install the wheel (pip install memscope-*.whl) or set MEMSCOPE_CLI"
                       % ", ".join(tried))


def probe():
    """Path of ``libmemscope_probe.so`` (asks the CLI, which knows its own layout)."""
    if "probe" in _cache:
        return _cache["probe"]
    env = os.environ.get("MEMSCOPE_PROBE_PATH")
    if env:
        if not os.path.isfile(env):
            raise RuntimeError("memscope: MEMSCOPE_PROBE_PATH=%s: no such file" % env)
        _cache["probe"] = env
        return env
    r = subprocess.run([cli(), "probe-path"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, env=child_env())
    if r.returncode != 0:
        raise RuntimeError(r.stderr.strip() or "memscope: probe library not found")
    _cache["probe"] = r.stdout.strip()
    return _cache["probe"]


def child_env():
    """This process's environment for a memscope process this package starts (the CLI, the
    collector): without ``MEMSCOPE_SPOOL`` and without the probe in ``LD_PRELOAD``, so it is
    never traced into the job's spool — not when the probe is preloaded everywhere (``source
    msmemscope --load-api-env``), and not as a process of its own under ``memscope run``
    (issue 23)."""
    env = dict(os.environ)
    env.pop("MEMSCOPE_SPOOL", None)
    keep = [p for p in env.get("LD_PRELOAD", "").split(":")
            if p and not os.path.basename(p).startswith("libmemscope")]
    if keep:
        env["LD_PRELOAD"] = ":".join(keep)
    else:
        env.pop("LD_PRELOAD", None)
    return env


def run_cli(args, **kw):
    """Runs the CLI with ``args``; returns the CompletedProcess (text mode)."""
    kw.setdefault("env", child_env())
    return subprocess.run([cli()] + list(args), universal_newlines=True, **kw)


def exec_cli(argv):
    """Replaces this process by the CLI (``python -m memscope ...``)."""
    path = cli()
    os.execv(path, [path] + list(argv))


if sys.version_info < (3, 9):  # pragma: no cover - guarded in __init__ too
    raise ImportError("memscope needs Python 3.9 or newer")
