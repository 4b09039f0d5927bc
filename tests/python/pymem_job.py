"""Job of tests/tests/pymem.rs (issue 16): 100 000 small objects built in a known function and
kept alive to the end, 20 000 more built and freed, optionally in a forked child, a
multiprocessing spawn child or a sub-interpreter."""
import itertools
import sys
import tracemalloc


def build_objects(n):
    out = []
    for _ in itertools.repeat(None, n):
        out.append(object())  # one PYMEM MALLOC per object
    return out


def churn(n):
    tmp = build_objects(n)
    del tmp


def child():
    keep = build_objects(5000)
    churn(1000)
    return len(keep)


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    kept = build_objects(100000)
    churn(20000)
    if mode == "fork":
        import os
        pid = os.fork()
        if pid == 0:
            child()
            os._exit(0)
        os.waitpid(pid, 0)
    elif mode == "spawn":
        import multiprocessing as mp
        ctx = mp.get_context("spawn")
        p = ctx.Process(target=child)
        p.start()
        p.join()
        assert p.exitcode == 0
    elif mode == "subinterp":
        import _xxsubinterpreters as interpreters
        sub = interpreters.create()
        # 40 blobs of a size nothing else asks for: bytes(3001) is a 3034-byte object
        interpreters.run_string(sub, "blobs = [bytes(3001) for _ in range(40)]\n")
    if tracemalloc.is_tracing():
        cur, peak = tracemalloc.get_traced_memory()
        print("tracemalloc traced", cur > 1_000_000)
    print("kept", len(kept))
