#!/usr/bin/env python3
"""Reads the memory samples (`--sample`, issue 25) of a memscope Parquet dataset with DuckDB.

usage: sample_parquet.py DATASET [EVENT_TYPE]

Prints {"samples": [[ts_ns, sampled, other, tracked, untracked, attrs], ...]} in ID order, for
EVENT_TYPE HOST_MEMORY (the default: sampled = rss, other = anon) or DEVICE_MEMORY (sampled =
device_used, other = null: the free bytes are in attrs).
"""
import json
import sys

try:
    import duckdb
except ImportError as e:
    print(f"missing Python package for the Parquet test ({e}); pip install duckdb", file=sys.stderr)
    sys.exit(3)


def main():
    ds = sys.argv[1]
    event_type = sys.argv[2] if len(sys.argv) > 2 else "HOST_MEMORY"
    sampled, other = ("rss", "anon") if event_type == "HOST_MEMORY" else ("device_used", "NULL")
    con = duckdb.connect()
    src = f"read_parquet('{ds}/events/**/*.parquet', hive_partitioning = true)"
    rows = con.sql(
        f"SELECT ts_ns, {sampled}, {other}, tracked, untracked, attrs FROM {src} "
        "WHERE event = 'SAMPLE' AND event_type = ? ORDER BY id",
        params=[event_type],
    ).fetchall()
    print(json.dumps({"samples": [list(r) for r in rows]}))


if __name__ == "__main__":
    main()
