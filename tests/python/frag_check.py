"""The fragmentation figures of a memscope dump at its OOM, computed here independently of
memscope (issue 25): argv[1] is a CSV dump; prints one JSON object.

A HAL block becomes a segment of the pool whose block is first allocated inside it; its free
extents are the gaps between that pool's live blocks. At the OOM_Snapshot row: reserved,
allocated, free, extents and the largest one over the device's pools; the request comes from
the OOM_TRIGGER row (`--analysis oom`).
"""

import csv
import json
import sys


def attr(cell):
    out = {}
    for part in cell.strip("{}").split(","):
        if ":" in part:
            k, v = part.split(":", 1)
            out[k] = v
    return out


def main(path):
    rows = sorted(csv.DictReader(open(path, newline="")), key=lambda r: int(r["ID"]))
    hal = {}      # addr -> [size, pool or None]
    pool = {}     # (type, addr) -> size
    result = {}
    for r in rows:
        ev, et, a = r["Event"], r["Event Type"], attr(r["Attr"])
        if r["Device Id"] != "0":
            continue
        if ev in ("MALLOC", "FREE") and a.get("shadow") != "true":
            addr, size = int(a["addr"], 16), int(a["size"])
            if et == "HAL":
                if ev == "MALLOC":
                    hal[addr] = [size, None]
                else:
                    hal.pop(addr, None)
            elif et in ("PTA", "PTA_WORKSPACE", "ATB", "MindSpore"):
                if ev == "MALLOC":
                    pool[(et, addr)] = size
                    for base, seg in hal.items():
                        if base <= addr < base + seg[0] and seg[1] is None:
                            seg[1] = et
                else:
                    pool.pop((et, addr), None)
        elif ev == "SNAPSHOT" and r["Name"] == "OOM_Snapshot":
            gaps, reserved, allocated = [], 0, 0
            for base, (size, owner) in hal.items():
                if owner is None:
                    continue
                reserved += size
                inside = sorted((a2, s) for (t, a2), s in pool.items()
                                if t == owner and base <= a2 < base + size)
                cursor = base
                for a2, s in inside:
                    gaps.append(a2 - cursor)
                    cursor = a2 + s
                    allocated += s
                gaps.append(base + size - cursor)
            gaps = [g for g in gaps if g > 0]
            result = {"id": int(r["ID"]), "reserved": reserved, "allocated": allocated,
                      "free": sum(gaps), "extents": len(gaps), "largest": max(gaps or [0]),
                      "total_mem": int(a.get("total_mem", 0)), "free_mem": int(a.get("free_mem", 0)),
                      "process_hal": sum(s for s, _ in hal.values())}
        elif ev == "OOM_DETAIL" and et == "OOM_TRIGGER":
            result["request"] = int(a["req_size"])
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1])
