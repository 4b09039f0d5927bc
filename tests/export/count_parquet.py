#!/usr/bin/env python3
"""Counts the rows of a memscope Parquet dataset with DuckDB, in all and per event_type.

usage: count_parquet.py DATASET

Prints {"rows": n, "by_type": {event_type: n}}.
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
    rows = con.sql(f"SELECT count(*) FROM {src}").fetchall()[0][0]
    by_type = dict(con.sql(f"SELECT event_type, count(*) FROM {src} GROUP BY event_type").fetchall())
    print(json.dumps({"rows": rows, "by_type": by_type}))


if __name__ == "__main__":
    main()
