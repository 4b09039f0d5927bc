#!/usr/bin/env python3
"""Committed bytes of memscope stream files (layout: memscope_wire).

usage: stream_stats.py FILE... -> prints "committed_bytes <sum> chunks <n> dropped <sum>"
"""
import struct
import sys

FILE_HEADER_SIZE = 4096
CHUNK_SIZE = 256 * 1024
CHUNK_MAGIC = struct.unpack("<I", b"MSCK")[0]
FH_DROPPED = 32

total = chunks = dropped = 0
for path in sys.argv[1:]:
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"MSCOPEST":
        continue
    dropped += struct.unpack_from("<Q", data, FH_DROPPED)[0]
    off = FILE_HEADER_SIZE
    while off + CHUNK_SIZE <= len(data):
        magic, committed = struct.unpack_from("<II", data, off)
        if magic == CHUNK_MAGIC:
            chunks += 1
            total += committed
        off += CHUNK_SIZE
print(f"committed_bytes {total} chunks {chunks} dropped {dropped}")
