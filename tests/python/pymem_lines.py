"""A Python workload whose growth by line memscope's PYMEM rows and tracemalloc must agree on
(issue 24). Between point 1 and point 2 twelve lines each keep a few MB of objects of
their own size.

Usage: python pymem_lines.py memscope             (under memscope run --adapters pymem: the
                                                   points are memscope_step() calls)
       python pymem_lines.py tracemalloc OUT.json (snapshots at the points; writes the top
                                                   lines of compare_to(..., "lineno"))
"""
import json
import sys

KEEP = []


def work():
    KEEP.append([bytearray(96_000) for _ in range(60)])   # 5.8 MB
    KEEP.append([bytearray(80_000) for _ in range(60)])   # 4.8 MB
    KEEP.append([bytes(66_000) for _ in range(60)])       # 4.0 MB
    KEEP.append(["a" * 56_000 for _ in range(60)])        # 3.4 MB
    KEEP.append([bytearray(2_300) for _ in range(1200)])  # 2.8 MB
    KEEP.append([bytes(1_900) for _ in range(1200)])      # 2.3 MB
    KEEP.append(list(range(240_000)))                     # 1.9 MB (list + ints)
    KEEP.append({i: None for i in range(40_000)})         # 1.3 MB (dict + ints)
    KEEP.append([bytearray(600) for _ in range(1500)])    # 1.0 MB
    KEEP.append([bytes(430) for _ in range(1500)])        # 0.7 MB
    KEEP.append([bytearray(330) for _ in range(1500)])    # 0.6 MB
    KEEP.append([bytearray(200) for _ in range(1200)])    # 0.3 MB


def main():
    mode = sys.argv[1]
    if mode == "memscope":
        import ctypes

        step = ctypes.PyDLL(None).memscope_step
        step()
        work()
        step()
        return
    import tracemalloc

    tracemalloc.start(1)
    s1 = tracemalloc.take_snapshot()
    work()
    s2 = tracemalloc.take_snapshot()
    here = __file__
    stats = s2.filter_traces([tracemalloc.Filter(True, here)]).compare_to(
        s1.filter_traces([tracemalloc.Filter(True, here)]), "lineno")
    top = [{"line": s.traceback[0].lineno, "size_diff": s.size_diff, "count_diff": s.count_diff}
           for s in stats[:10]]
    with open(sys.argv[2], "w") as f:
        json.dump(top, f)


if __name__ == "__main__":
    main()
