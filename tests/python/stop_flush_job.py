"""Issue 39: after ``memscope.stop()`` returns, every row recorded before it is in the files.
argv: FORMAT (csv or db), the sim-npu example directory[, steps-only]. 10 000 caching-pool
blocks (the demo's allocator, msTX regions) and 1 000 steps inside one window — or, with
``steps-only``, 10 000 steps and nothing else (device-less rows only: the issue's own case) —
then stop() and, at once, the script reads its own dump and counts them. Prints
``stop_flush: ok <pta> <steps>``."""
import glob
import os
import sqlite3
import sys

import memscope

fmt, example = sys.argv[1], sys.argv[2]
steps_only = sys.argv[3:] == ["steps-only"]
sys.path.insert(0, example)
import train  # noqa: E402

out = os.path.abspath("stop_out")
memscope.config(output_path=out, format=fmt)
npu = train.Npu(train.find_sim_npu_dir())
pool = train.CachingAllocator(npu, train.Counters(), "ptaCaching", 64 << 20)
memscope.start()
blocks = []
for i in range(10000):
    if steps_only:
        memscope.step()
        continue
    blocks.extend(pool.alloc(0, [512]))
    if i % 10 == 0:
        memscope.step()
memscope.stop()
files = glob.glob(os.path.join(out, "**", "memscope_dump_*." + fmt), recursive=True)
pta = steps = 0
for f in files:
    if fmt == "csv":
        import csv
        with open(f, newline="") as fh:
            for r in csv.DictReader(fh):
                pta += r["Event"] == "MALLOC" and r["Event Type"] == "PTA"
                steps += r["Event Type"] == "STEP"
    else:
        db = sqlite3.connect("file:%s?mode=ro" % f, uri=True)
        pta += db.execute("SELECT count(*) FROM memscope_dump WHERE \"Event\"='MALLOC' AND "
                          "\"Event Type\"='PTA'").fetchone()[0]
        steps += db.execute("SELECT count(*) FROM memscope_dump WHERE \"Event Type\"='STEP'"
                            ).fetchone()[0]
        db.close()
want = (0, 10000) if steps_only else (10000, 1000)
print("stop_flush: %s %d %d" % ("ok" if (pta, steps) == want else "MISSING", pta, steps))
pool.free(blocks)
