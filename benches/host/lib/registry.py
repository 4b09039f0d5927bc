"""Workloads and tools known to the harness.

Adding a tool = appending one Tool(...) to TOOLS.  A tool says
  - which workload languages it applies to ("c": native executables,
    "py": Python scripts run by the interpreter),
  - how to check it is installed (`available`),
  - how to wrap a workload command (`wrap(argv, out) -> (argv, extra_env)`,
    `out` is an empty directory the tool may write its output into),
and optionally how to read back the number of events it recorded
(`events(out)`) and the leak report for the leak workload
(`leaks(out) -> {"sites": {function: {"count": n|None, "bytes": b}}, ...}`).
Everything under `out` counts as the tool's output size.
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BUILD = os.path.join(ROOT, "build")
WL = os.path.join(ROOT, "workloads")
# the real interpreter (a pyenv/venv wrapper script would be timed and preloaded too)
PY = os.path.realpath(os.environ.get("BENCH_PYTHON") or sys.executable)
BYTEHOUND_DIR = os.environ.get("BYTEHOUND_DIR", "/tmp/bytehound/src/target/release")
MEMSCOPE_LIB = os.environ.get("MEMSCOPE_LIB", "")


# ----------------------------------------------------------------- workloads
class Workload:
    def __init__(self, name, lang, argv, desc, env=None):
        self.name, self.lang, self.argv, self.desc = name, lang, argv, desc
        self.env = env or {}   # set for both the plain and the instrumented run


WORKLOADS = [
    Workload("churn", "c", [f"{BUILD}/churn", "5", "2", "42"],
             "5 M malloc/free pairs, 16 B-64 KiB, ~8% calloc, ~4% posix_memalign, ~12% of blocks realloc'd before free, 2 threads"),
    Workload("churn-deep", "c", [f"{BUILD}/churn_deep", "5", "2", "42"],
             "churn with each worker running under 24 extra frames (allocation stacks ~30 frames deep)"),
    Workload("liveset", "c", [f"{BUILD}/liveset", "200000", "2.5"],
             "200k live blocks (16-1024 B) held throughout, 2.5 M free+malloc replacements, 1 thread"),
    Workload("pyalloc", "py", [PY, f"{WL}/alloc_heavy.py", "80"],
             "Python 3.11, default allocator: dicts/lists/strings/bytes built and dropped in a loop "
             "(small objects go to pymalloc arenas, so few malloc calls)"),
    Workload("pyalloc-malloc", "py", [PY, f"{WL}/alloc_heavy.py", "80"],
             "the same script with PYTHONMALLOC=malloc: every Python object allocation is a malloc call",
             env={"PYTHONMALLOC": "malloc"}),
]
# leak check (not timed): native binary, and the same code through ctypes for Python-only tools
LEAK_C = [f"{BUILD}/leak"]
LEAK_PY = [PY, f"{WL}/leak_driver.py"]
EXPECTED_LEAKS = {  # site -> (count, bytes); see workloads/leak.c
    "leak_site_malloc": (100, 100000),
    "leak_site_calloc": (10, 163840),
    "leak_site_realloc": (5, 38885),
    "leak_site_memalign": (1, 4096),
    "leak_site_thread": (20, 6660),
}


# ----------------------------------------------------------------- helpers
def sh_ok(cmd):
    return subprocess.run(cmd, shell=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0


def read_int(path, pattern=r"events (\d+)"):
    try:
        m = re.search(pattern, open(path).read())
        return int(m.group(1)) if m else None
    except OSError:
        return None


def strip_py(argv):
    """[python, script, args...] -> [script, args...] for tools that take a script."""
    return argv[1:] if argv and os.path.realpath(argv[0]) == PY else argv


# ---- shims
def shim_events(out):
    return read_int(f"{out}/shim.count")


def shim_leaks(out):
    sys.path.insert(0, HERE)
    import shimtrace
    r = shimtrace.report(f"{out}/shim")
    return {"sites": r["sites"], "total_count": r["leaked_count"], "total_bytes": r["leaked_bytes"]}


# ---- memscope
MEMSCOPE_BIN = os.environ.get("MEMSCOPE_BIN") or (
    os.path.join(os.path.dirname(MEMSCOPE_LIB), "memscope") if MEMSCOPE_LIB else "")


def memscope_available():
    return bool(MEMSCOPE_LIB) and os.path.exists(MEMSCOPE_LIB)


def memscope_events(out):
    sys.path.insert(0, HERE)
    import memscope_stream
    c, _ = memscope_stream.out_scan(out)
    return c.get("malloc", 0) + c.get("free", 0)


def memscope_run_wrap(argv, out):
    return [MEMSCOPE_BIN, "run", "-q", "-o", f"{out}/run", "--adapters", "host",
            "--call-stack", "c:32", "--"] + list(argv), {}


def memscope_leak_wrap(argv, out):
    return memscope_run_wrap(argv, out)


def memscope_leaks(out):
    """Blocks live at exit from the CSV dumps, keyed by the innermost leak_site_* frame."""
    import csv
    live = {}
    for f in glob.glob(f"{out}/run/**/device_cpu/dump/*.csv", recursive=True):
        with open(f, newline="") as fh:
            for r in csv.DictReader(fh):
                if r["Event Type"] != "HOST":
                    continue
                a = dict(kv.split(":", 1) for kv in r["Attr"].strip("{}").split(","))
                key = (r["Process Id"], a["allocation_id"])
                if r["Event"] == "MALLOC":
                    live[key] = (int(a["size"]), r["Call Stack(C)"])
                elif r["Event"] == "FREE":
                    live.pop(key, None)
    sites, other = {}, 0
    for size, stack in live.values():
        first = (stack.splitlines() or [""])[0].split(" ")[0]
        if first.startswith("leak_site_"):
            s = sites.setdefault(first, {"count": 0, "bytes": 0})
            s["count"] += 1
            s["bytes"] += size
        else:
            other += 1
    return {"sites": sites, "other_blocks": other,
            "total_count": len(live), "total_bytes": sum(v[0] for v in live.values())}


# ---- heaptrack (also used for bytehound, exported to heaptrack format)
_SIZE = {"": 1, "B": 1, "K": 1e3, "M": 1e6, "G": 1e9}


def heaptrack_file(out, stem="ht"):
    f = sorted(glob.glob(f"{out}/{stem}*.zst") + glob.glob(f"{out}/{stem}*.gz") + glob.glob(f"{out}/{stem}*.heaptrack"))
    return f[0] if f else None


def heaptrack_events(out):
    f = heaptrack_file(out)
    if not f:
        return None
    txt = subprocess.run(["heaptrack_print", "-p", "0", "-a", "0", "-T", "0", "-f", f],
                         capture_output=True, text=True).stdout
    m = re.search(r"calls to allocation functions: (\d+)", txt)
    return int(m.group(1)) if m else None


def heaptrack_parse_leaks(f):
    txt = subprocess.run(["heaptrack_print", "-l", "1", "-p", "0", "-a", "0", "-T", "0", "-n", "1000",
                          "-s", "0", "-m", "0", "-f", f], capture_output=True, text=True).stdout
    sites = {}
    for m in re.finditer(r"^([\d.]+)([KMG]?)B? leaked over (\d+) calls from\n\s+(\S+)", txt, re.M):
        fn = m.group(4)
        s = sites.setdefault(fn, {"count": 0, "bytes": 0})
        s["count"] += int(m.group(3))
        s["bytes"] += float(m.group(1)) * _SIZE[m.group(2)]
    # exact bytes per leaf function from the leaked-bytes flamegraph
    fg = f + ".leaked.txt"
    subprocess.run(["heaptrack_print", "-f", f, "-F", fg, "--flamegraph-cost-type", "leaked"],
                   capture_output=True)
    exact = {}
    if os.path.exists(fg):
        for line in open(fg):
            stack, _, cost = line.rstrip("\n").rpartition(" ")
            frames = [x for x in stack.rstrip(";").split(";") if x]
            if frames and cost.isdigit():
                leaf = frames[-1].split(" (")[0]
                exact[leaf] = exact.get(leaf, 0) + int(cost)
        os.unlink(fg)
    for fn, s in sites.items():
        if fn in exact:
            s["bytes"] = exact[fn]
    m = re.search(r"total memory leaked: ([\d.]+)([KMG]?)", txt)
    return {"sites": sites, "total_bytes": float(m.group(1)) * _SIZE[m.group(2)] if m else None}


def heaptrack_leaks(out):
    f = heaptrack_file(out)
    return heaptrack_parse_leaks(f) if f else None


# ---- massif
def massif_leaks(out):
    """Massif is a heap profiler, not a leak checker: read the LAST snapshot's
    tree (bytes live at exit, per call site; no counts)."""
    p = f"{out}/massif.out"
    if not os.path.exists(p):
        return None
    snaps = open(p).read().split("#-----------\nsnapshot=")
    last = snaps[-1]
    m = re.search(r"mem_heap_B=(\d+)", last)
    sites = {}
    for mm in re.finditer(r"^ n\d+: (\d+) 0x[0-9A-F]+: (\S+)", last, re.M):
        sites[mm.group(2)] = {"count": None, "bytes": int(mm.group(1))}
    return {"sites": sites, "total_bytes": int(m.group(1)) if m else None,
            "note": "final snapshot (detailed) of heap live at exit; massif gives no counts"}


# ---- memray
def memray_events(out):
    f = f"{out}/mr.bin"
    if not os.path.exists(f):
        return None
    js = f"{out}/../mr-stats.json"
    subprocess.run([PY, "-m", "memray", "stats", "--json", "-f", "-o", js, f], capture_output=True)
    try:
        v = json.load(open(js))["total_num_allocations"]
        os.unlink(js)
        return v
    except Exception:
        return None


def memray_leaks(out):
    f = f"{out}/mr.bin"
    csvp = f"{out}/../mr-leaks.csv"
    subprocess.run([PY, "-m", "memray", "transform", "csv", "--leaks", "-f", "-o", csvp, f], capture_output=True)
    import csv
    sites = {}
    try:
        rows = list(csv.DictReader(open(csvp)))
    except OSError:
        return None
    total_b = total_n = 0
    for r in rows:
        top = r["stack_trace"].split("|")[0].split(";")[0]
        s = sites.setdefault(top, {"count": 0, "bytes": 0})
        s["count"] += int(r["num_allocations"])
        s["bytes"] += int(r["size"])
        total_n += int(r["num_allocations"])
        total_b += int(r["size"])
    os.unlink(csvp)
    return {"sites": sites, "total_count": total_n, "total_bytes": total_b,
            "note": "run through ctypes from Python (workloads/leak_driver.py); totals include the interpreter's own unfreed blocks"}


# ---- bytehound
def bytehound_file(out):
    f = glob.glob(f"{out}/bh*.dat")
    return f[0] if f else None


def bytehound_leaks(out):
    """`bytehound script` over the data file.  Its script API filters by size but
    has no size accessor, so per site we count leaked blocks and how many of
    them have exactly the expected requested size (bytes = that many x size).
    (`bytehound export-heaptrack` would report usable sizes - jemalloc size
    classes, e.g. 20480 for a 16384-byte calloc - not requested sizes.)"""
    f = bytehound_file(out)
    cli = f"{BYTEHOUND_DIR}/bytehound"
    if not f or not os.path.exists(cli):
        return None
    lines = ['let l = allocations().only_leaked();', 'println("TOTAL {}", l.len());']
    for site, (n, b) in EXPECTED_LEAKS.items():
        each = b // n
        lines.append(f'let a = l.only_passing_through_function("{site}"); '
                     f'println("SITE {site} {{}} {{}}", a.len(), '
                     f'a.only_larger_or_equal({each}).only_smaller_or_equal({each}).len());')
    scr = f"{out}/../bh-leaks.rhai"
    open(scr, "w").write("\n".join(lines) + "\n")
    txt = subprocess.run([cli, "script", "-d", f, scr], capture_output=True, text=True).stdout
    sites, tot = {}, None
    for m in re.finditer(r"^SITE (\S+) (\d+) (\d+)$", txt, re.M):
        site, cnt, exact = m.group(1), int(m.group(2)), int(m.group(3))
        n, b = EXPECTED_LEAKS[site]
        if cnt:
            sites[site] = {"count": cnt, "bytes": exact * (b // n) if exact == cnt else float("nan")}
    m = re.search(r"^TOTAL (\d+)", txt, re.M)
    if m:
        tot = int(m.group(1))
        rest = tot - sum(s["count"] for s in sites.values())
        if rest:
            sites["(other)"] = {"count": rest, "bytes": 0}
    return {"sites": sites, "total_count": tot,
            "note": "`bytehound script`: per-site count, bytes = blocks whose requested size is exactly the expected one"}


# ----------------------------------------------------------------- tools
class Tool:
    def __init__(self, name, desc, langs, available, wrap, events=None, leaks=None,
                 runs=None, warmup=None, leak_wrap=None, events_note=""):
        self.name, self.desc, self.langs = name, desc, langs
        self.available, self.wrap = available, wrap
        self.events, self.leaks = events, leaks
        self.runs, self.warmup = runs, warmup       # per-tool override of -n / --warmup
        self.leak_wrap = leak_wrap or wrap
        self.events_note = events_note


def preload(lib, **env):
    def wrap(argv, out):
        e = {"LD_PRELOAD": lib}
        e.update({k: v.format(out=out) for k, v in env.items()})
        return argv, e
    return wrap


def shim(mode, desc):
    lib = f"{BUILD}/shim_{mode}.so"
    return Tool(f"shim-{mode}", desc, {"c", "py"}, lambda: os.path.exists(lib),
                preload(lib, SHIM_OUT="{out}/shim"), events=shim_events,
                leaks=None if mode == "count" else shim_leaks,
                events_note="calls seen by the shim")


def massif_wrap(argv, out, extra=()):
    return ["valgrind", "--tool=massif", "-q", f"--massif-out-file={out}/massif.out", *extra, *argv], {}


TOOLS = [
    shim("count", "floor (i): interpose malloc & co., bump a thread-local counter"),
    shim("record", "floor (ii): + 32-byte record per event, per-thread 1 MiB buffer, write() to a file"),
    shim("fp", "floor (iii-a): + frame-pointer stack walk (<=64 frames) per event"),
    shim("unw", "floor (iii-b): + libunwind unw_backtrace() stack per event"),
    Tool("heaptrack", "heaptrack 1.4 (Debian), default settings",
         {"c", "py"}, lambda: bool(shutil.which("heaptrack")),
         lambda argv, out: (["heaptrack", "-o", f"{out}/ht", *argv], {}),
         events=heaptrack_events, leaks=heaptrack_leaks,
         events_note="allocation calls (heaptrack_print)"),
    Tool("bytehound", "bytehound 0.11 preload library (koute/bytehound master, built with stable Rust)",
         {"c", "py"}, lambda: os.path.exists(f"{BYTEHOUND_DIR}/libbytehound.so"),
         preload(f"{BYTEHOUND_DIR}/libbytehound.so", MEMORY_PROFILER_OUTPUT="{out}/bh.dat"),
         leaks=bytehound_leaks),
    Tool("massif", "valgrind massif 3.19, default settings",
         {"c"}, lambda: bool(shutil.which("valgrind")), massif_wrap,
         leaks=massif_leaks, runs=3, warmup=0,
         leak_wrap=lambda argv, out: massif_wrap(argv, out, ["--detailed-freq=1"])),
    Tool("memray", "memray 1.20 (pip), `memray run` (Python frames only)",
         {"py"}, lambda: sh_ok(f"{PY} -m memray --version"),
         lambda argv, out: ([PY, "-m", "memray", "run", "-q", "-f", "-o", f"{out}/mr.bin", *strip_py(argv)], {}),
         events=memray_events, events_note="allocations (memray stats)"),
    Tool("memray-native", "memray 1.20, `memray run --native` (native + Python frames)",
         {"py"}, lambda: sh_ok(f"{PY} -m memray --version"),
         lambda argv, out: ([PY, "-m", "memray", "run", "--native", "-q", "-f", "-o", f"{out}/mr.bin",
                             *strip_py(argv)], {}),
         events=memray_events, leaks=memray_leaks, events_note="allocations (memray stats)"),
    # memscope's probe with only the HOST adapter: records go to a per-process stream file in
    # {out} (the stream *is* the output; `memscope run` would also type and write CSV in a
    # collector process). MEMSCOPE_LIB = target/dist/libmemscope_probe.so.
    Tool("memscope", "memscope probe, HOST adapter, no stacks (MEMSCOPE_LIB)",
         {"c", "py"}, memscope_available,
         preload(MEMSCOPE_LIB, MEMSCOPE_SPOOL="{out}", MEMSCOPE_ADAPTERS="64", MEMSCOPE_C_STACK="0"),
         events=memscope_events, leaks=memscope_leaks, leak_wrap=memscope_leak_wrap,
         events_note="HOST malloc+free records in the stream"),
    Tool("memscope-stack", "memscope probe, HOST adapter, C stacks up to 32 frames (MEMSCOPE_C_STACK=32)",
         {"c", "py"}, memscope_available,
         preload(MEMSCOPE_LIB, MEMSCOPE_SPOOL="{out}", MEMSCOPE_ADAPTERS="64", MEMSCOPE_C_STACK="32"),
         events=memscope_events, leaks=memscope_leaks, leak_wrap=memscope_leak_wrap,
         events_note="HOST malloc+free records in the stream"),
    Tool("memscope-run", "`memscope run --adapters host --call-stack c:32` (probe + collector writing CSV)",
         {"c", "py"}, lambda: memscope_available() and os.path.exists(MEMSCOPE_BIN),
         memscope_run_wrap, events=None, leaks=memscope_leaks, leak_wrap=memscope_leak_wrap,
         runs=1, warmup=0),
]
