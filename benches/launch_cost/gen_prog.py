"""A race_prog script (tests/programs/race_prog.c) of N launches for benches/launch_cost:
custom operators on 4 streams (the default one and 1-3) over 64 pool blocks, 1-3 tensors each
(one in three written), an event recorded and waited for before one launch in ten (MODE racy:
most launches conflict with an earlier one) or before every launch (MODE ordered: none do), a
stream synchronised every 100 launches, a block freed and handed out again every 50.
usage: gen_prog.py N SEED [racy|ordered] > script"""
import random
import sys

n, seed = int(sys.argv[1]), int(sys.argv[2])
ordered = sys.argv[3:] == ["ordered"]
rng = random.Random(seed)
blocks = [0x100000 + i * 0x1000 for i in range(64)]
out = sys.stdout
out.write("P 0\n")
for b in blocks:
    out.write("A 0x%x\n" % b)
last = 0
for k in range(1, n + 1):
    s = rng.randrange(4)
    if ordered or rng.randrange(10) == 0:
        out.write("R 1 %d\nW %d 1\n" % (last, s))
    ro, rw = [], []
    for _ in range(1 + rng.randrange(3)):
        (rw if rng.randrange(3) == 0 else ro).append("0x%x" % rng.choice(blocks))
    out.write("L %d k%d %s %s -\n" % (s, k, ",".join(ro) or "-", ",".join(rw) or "-"))
    last = s
    if k % 100 == 0:
        out.write("Y %d\n" % rng.randrange(4))
    if k % 50 == 0:
        b = rng.choice(blocks)
        out.write("F 0x%x\nA 0x%x\n" % (b, b))
