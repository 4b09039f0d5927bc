"""The workload: N (default 1 M) heap allocations from Python, each a bytearray of 1000 bytes
(above pymalloc's 512-byte limit, so each is a real malloc + free), made DEPTH (default 8)
Python calls deep, in batches of 100 live blocks.

Usage: python alloc.py [N] [DEPTH]
Prints one JSON line: the loop's wall and CPU seconds.
"""
import json
import sys
import time


def leaf(k):
    return [bytearray(1000) for _ in range(k)]


def down(d, k):
    if d <= 1:
        return leaf(k)
    return down(d - 1, k)


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    depth = int(sys.argv[2]) if len(sys.argv) > 2 else 8
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(n // 100):
        down(depth, 100)
    t1, c1 = time.perf_counter(), time.process_time()
    print(json.dumps({"allocs": n, "depth": depth, "loop_wall_s": t1 - t0,
                      "loop_cpu_s": c1 - c0}))


if __name__ == "__main__":
    main()
