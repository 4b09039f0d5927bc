#!/usr/bin/env python3
"""Where a capture's bytes go (issue 37): bytes per record of each column of a `.mscap` file.

usage: capture_columns.py CAPTURE.mscap [ZSTD_LEVEL ...]

Reads the blocks (format: memscope-core/stream/src/capture/mod.rs and columns.rs), gathers
each column of every source of every block into one stream and prints, per record, its raw
bytes and its size compressed alone with zstd at each level given (default 3): what each
kind of field costs at rest, and how far a higher level gets. Needs the `zstandard` package
(pip install zstandard).
"""
import os
import struct
import sys

import zstandard

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'host', 'lib'))
from memscope_stream import _var as var  # noqa: E402  (the captures' varints are the stream's)

NAMES = ['TAG', 'TS_LO', 'TS_HI', 'ADDR_LO', 'ADDR_MID', 'ADDR_HI', 'SIZE', 'STACK', 'REF_LO',
         'REF_HI', 'XSRC', 'GENERIC']


def columns(path):
    f = open(path, 'rb').read()
    if f[:8] != b'MSCAPTUR':
        sys.exit(f"{path}: not a memscope capture")
    _, json_len = struct.unpack_from('<II', f, 8)
    pos = 16 + json_len
    cols = [bytearray() for _ in NAMES]
    records = comp = raw_total = 0
    while f[pos:pos + 4] == b'MSCB':
        comp_len, raw_len, nrec = struct.unpack_from('<III', f, pos + 4)
        raw = zstandard.ZstdDecompressor().decompress(f[pos + 32:pos + 32 + comp_len],
                                                      max_output_size=raw_len)
        records += nrec
        comp += 32 + comp_len
        raw_total += len(raw)
        pos += 32 + comp_len
        p = 0
        n_images, p = var(raw, p)
        for _ in range(n_images):
            for _ in range(5):          # image pid ppid start_ns clock_offset
                _, p = var(raw, p)
            n, p = var(raw, p)          # exe
            p += n
        n_src, p = var(raw, p)
        lens = []
        for _ in range(n_src):
            for _ in range(3):          # image tid records
                _, p = var(raw, p)
            row = []
            for _ in NAMES:
                n, p = var(raw, p)
                row.append(n)
            lens.append(row)
        n_def, p = var(raw, p)
        for _ in range(2 * n_def):
            _, p = var(raw, p)
        for c in range(len(NAMES)):
            for s in range(n_src):
                cols[c] += raw[p:p + lens[s][c]]
                p += lens[s][c]
    return len(f), comp, raw_total, records, cols


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    size, comp, raw, records, cols = columns(sys.argv[1])
    if not records:
        sys.exit("no records")
    print(f"{records} records; file {size} B = {size / records:.3f} B/record "
          f"(blocks {comp / records:.3f}, uncompressed columns {raw / records:.3f})")
    for level in [int(x) for x in sys.argv[2:]] or [3]:
        total, parts = 0, []
        for name, col in zip(NAMES, cols):
            if col:
                z = len(zstandard.ZstdCompressor(level=level).compress(bytes(col)))
                total += z
                parts.append(f"{name} {len(col) / records:.2f}->{z / records:.3f}")
        print(f"zstd {level}, each column alone: {total / records:.3f} B/record: " + ", ".join(parts))


if __name__ == '__main__':
    main()
