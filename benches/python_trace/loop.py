"""The workload: a 1 M-call Python loop (one call of a tiny function per iteration).

Usage: python loop.py MODE [N]
MODE: none | setprofile (sys.setprofile with a no-op function) | memscope (plain python:
memscope.start() + memscope.tracer.start()) | launcher (under `memscope run --events
traceback`: the tracer runs from interpreter start).
Prints one JSON line: the loop's wall and CPU seconds.
"""
import json
import sys
import time


def f(x):
    return x


def loop(n):
    for i in range(n):
        f(i)


def noop(frame, event, arg):
    pass


def main():
    mode = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 1_000_000
    if mode == "memscope":
        import memscope

        memscope.config(events="alloc,free")
        memscope.start()
        memscope.tracer.start()
    elif mode == "setprofile":
        sys.setprofile(noop)
    t0, c0 = time.perf_counter(), time.process_time()
    loop(n)
    t1, c1 = time.perf_counter(), time.process_time()
    if mode == "setprofile":
        sys.setprofile(None)
    elif mode == "memscope":
        import memscope

        memscope.tracer.stop()
        memscope.stop()
    print(json.dumps({"mode": mode, "calls": n, "loop_wall_s": t1 - t0, "loop_cpu_s": c1 - c0}))


if __name__ == "__main__":
    main()
