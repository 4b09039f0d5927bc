"""Keeps 5 000 strings of ~150 bytes built on one line (tests/tests/export_perfetto.rs: the
PYMEM line tracks of a Perfetto export)."""
keep = []
def fill():
    for i in range(5000):
        keep.append("x" * 140 + str(i))
fill()
print(len(keep))
