"""Reads memscope stream files (memscope_wire, format version 1) without the CLI:
counts host-allocator records and the bytes actually committed, for the bench harness."""
import glob
import struct

FILE_HEADER = 4096
CHUNK = 256 * 1024
CHUNK_HEADER = 64
MAGIC = b"MSCOPEST"
CHUNK_MAGIC = struct.unpack("<I", b"MSCK")[0]


def _var(b, i):
    v = s = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << s
        s += 7
        if c < 0x80:
            return v, i


def _skip(b, i, tag):
    """Returns (kind, next index); kind 'malloc'/'free'/other; None on an unknown tag."""
    if tag == 1:            # Thread
        _, i = _var(b, i); return "thread", i
    if tag in (14, 15, 23, 24):  # Malloc(+stack)(, /16 address delta): ts addr size [stack]
        for _ in range(3 if tag in (14, 23) else 4):
            _, i = _var(b, i)
        return "malloc", i
    if tag in (16, 25):     # Free: ts addr
        for _ in range(2):
            _, i = _var(b, i)
        return "free", i
    if tag == 17:           # StackDef: id count len raw
        _, i = _var(b, i); _, i = _var(b, i); n, i = _var(b, i)
        return "stackdef", i + n
    if tag == 19:           # Module: ts base start size text text
        for _ in range(4):
            _, i = _var(b, i)
        for _ in range(2):
            n, i = _var(b, i); i += n
        return "module", i
    if tag in (20, 21):     # Mmap
        for _ in range(3 if tag == 20 else 4):
            _, i = _var(b, i)
        return "malloc", i
    if tag == 22:
        for _ in range(3):
            _, i = _var(b, i)
        return "free", i
    return None, i


def scan(paths):
    """Counts per record kind and committed payload bytes over stream files."""
    counts, committed = {}, 0
    for p in paths:
        with open(p, "rb") as f:
            data = f.read()
        if data[:8] != MAGIC:
            continue
        off = FILE_HEADER
        while off + CHUNK_HEADER <= len(data):
            magic, n = struct.unpack_from("<II", data, off)
            if magic == CHUNK_MAGIC:
                committed += n
                b = data[off + CHUNK_HEADER: off + CHUNK_HEADER + n]
                i = 0
                while i < len(b):
                    tag = b[i]
                    kind, i = _skip(b, i + 1, tag)
                    if kind is None:
                        break
                    counts[kind] = counts.get(kind, 0) + 1
            off += CHUNK
    return counts, committed


def out_scan(out):
    return scan(sorted(glob.glob(f"{out}/**/*.stream", recursive=True)))


if __name__ == "__main__":
    import sys
    c, n = scan(sys.argv[1:])
    ev = c.get("malloc", 0) + c.get("free", 0)
    print(c, "committed", n, "bytes/event %.2f" % (n / ev if ev else 0))
