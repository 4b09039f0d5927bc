#!/usr/bin/env python3
"""Reads the memory samples (`--sample`, issue 25) of a memscope Parquet dataset with DuckDB.

usage: sample_parquet.py DATASET

Prints {"samples": [[ts_ns, rss, anon, tracked, untracked, attrs], ...]} in ID order.
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
    con = duckdb.connect()
    src = f"read_parquet('{ds}/events/**/*.parquet', hive_partitioning = true)"
    rows = con.sql(
        f"SELECT ts_ns, rss, anon, tracked, untracked, attrs FROM {src} "
        "WHERE event = 'SAMPLE' AND event_type = 'HOST_MEMORY' ORDER BY id"
    ).fetchall()
    print(json.dumps({"samples": [list(r) for r in rows]}))


if __name__ == "__main__":
    main()
