"""Sizes, device scopes and the checks of the markers (no pytest, no memscope imports)."""

import math
import re

# memscope's one size grammar (memscope_analysis::thresholds::parse_size; both are checked
# against tests/fixtures/size_grammar.json): units are case-sensitive, as written here.
_UNITS = {
    "": 1, "B": 1,
    "K": 1 << 10, "KiB": 1 << 10, "k": 1 << 10, "M": 1 << 20, "MiB": 1 << 20,
    "G": 1 << 30, "GiB": 1 << 30, "T": 1 << 40, "TiB": 1 << 40,
    "KB": 10 ** 3, "kB": 10 ** 3, "MB": 10 ** 6, "GB": 10 ** 9, "TB": 10 ** 12,
}
_SIZE = re.compile(r"^\s*([0-9.]+)\s*([A-Za-z]*)\s*$")
DEVICES = "None, 'npu', 'npu:N', 'cpu' or 'pymem'"


def parse_size(text, what="limit"):
    """Bytes of ``text``: ``1048576``, ``"1 MiB"``, ``"1.5GiB"``, ``"2 GB"`` (``K/M/G/T`` and
    ``KiB…TiB`` are powers of 1024, ``KB…TB`` powers of 1000), as ``memscope run --fail-on``
    reads them. ``ValueError`` naming ``what`` otherwise."""
    if isinstance(text, bool):
        raise ValueError("%s: %r is not a size" % (what, text))
    if isinstance(text, int):
        if text < 0:
            raise ValueError("%s: %r is negative" % (what, text))
        return text
    m = _SIZE.match(str(text))
    unit = m.group(2) if m else None
    try:
        number = float(m.group(1)) if m else None
    except ValueError:
        number = None
    if number is None or unit not in _UNITS:
        raise ValueError("%s: %r is not a size (e.g. 512, '64 KiB', '1.5 GiB', '2 GB')"
                         % (what, text))
    if _UNITS[unit] == 1 and "." in m.group(1):
        # a byte count is whole: `1.5` is a typo for a unit, never rounded
        raise ValueError("%s: %r is not a whole number of bytes (e.g. 512, '1.5 KiB')"
                         % (what, text))
    b = math.floor(number * _UNITS[unit] + 0.5)  # half away from zero, as Rust's round()
    if b >= 1.8e19:
        raise ValueError("%s: %r is not a size (e.g. 512, '64 KiB', '1.5 GiB', '2 GB')"
                         % (what, text))
    return int(b)


def size(n):
    """``4.0 MiB`` for people."""
    if n < 1024:
        return "%d B" % n
    v = float(n)
    for u in ("KiB", "MiB", "GiB", "TiB"):
        v /= 1024.0
        if v < 1024.0 or u == "TiB":
            return "%.1f %s" % (v, u)
    return "%d B" % n  # pragma: no cover


def check_device(device, what):
    """``device`` if it is a scope the plugin knows, else ``ValueError`` naming ``what``."""
    if device is None or device in ("npu", "cpu", "pymem"):
        return device
    if isinstance(device, str) and re.match(r"^npu:[0-9]+$", device):
        return device
    raise ValueError("%s: device=%r: expected %s" % (what, device, DEVICES))


def device_name(alloc):
    """``npu:N`` or ``cpu`` of an allocator record."""
    d = alloc["device"]
    return "npu:" + d if d.isdigit() else d


def covers(device, alloc):
    """Whether an allocator record of a window is in scope ``device`` (``None``: all).
    Allocators nest (pool blocks live in driver memory), so each is checked on its own."""
    name = device_name(alloc)
    pymem = alloc["allocator"].startswith("PYMEM")
    if device is None:
        return not alloc["allocator"].endswith("_ARENA")
    if device == "npu":
        return name.startswith("npu:")
    if device == "cpu":
        return name == "cpu" and not pymem
    if device == "pymem":
        return alloc["allocator"] == "PYMEM"
    return name == device


class Limit:
    """One limit of a test: ``kind`` ``memory`` (peak) or ``leaks``, from a marker or the
    ini default."""

    def __init__(self, kind, text, device, origin, warmup=0):
        self.kind = kind
        self.text = text
        self.max = parse_size(text, origin)
        self.device = check_device(device, origin)
        self.origin = origin
        self.warmup = warmup

    def describe(self):
        dev = "" if self.device is None else ", device=%r" % self.device
        return "limit_%s(%r%s)" % (self.kind, self.text, dev)

    def recorded(self, record):
        """Whether the window recorded any allocator this limit looks at (else it was not
        checked: the table says "not recorded", never "ok")."""
        field = "peak_bytes" if self.kind == "memory" else "leaked_bytes"
        return any(covers(self.device, a) and a.get(field) is not None
                   for a in record.get("allocators", []))

    def check(self, record, test_file=None):
        """``None`` when kept, else the failure message (which allocator, by how much, the
        allocating line, the test's own line — the first frame in ``test_file`` — and the
        stack down to pytest)."""
        field = "peak_bytes" if self.kind == "memory" else "leaked_bytes"
        sites = "peak_sites" if self.kind == "memory" else "leak_sites"
        allocs = [a for a in record.get("allocators", [])
                  if covers(self.device, a) and a.get(field) is not None]
        if not allocs:
            return None
        worst = max(allocs, key=lambda a: a[field])
        value = worst[field]
        if value <= self.max:
            return None
        what = "peaked at" if self.kind == "memory" else "leaked"
        lines = ["memscope: %s crossed (%s): %s %s on %s %s, %s over the limit"
                 % (self.describe(), self.origin, what, size(value), device_name(worst),
                    worst["allocator"], size(value - self.max))]
        for s in worst.get(sites, [])[:3]:
            lines.append("  %s in %d block(s) allocated at %s"
                         % (size(s["bytes"]), s["blocks"], s["site"]))
            stack = []
            for f in s.get("stack", "").splitlines():
                if "/_pytest/" in f or "/pluggy/" in f:
                    break
                if f.strip():
                    stack.append(f.strip())
            own = [f for f in stack if test_file and f.startswith(test_file + "(")]
            if own and own[0] != s["site"]:
                lines.append("    in the test at %s" % own[0])
            for f in stack[:12]:
                lines.append("      %s" % f)
        return "\n".join(lines)
