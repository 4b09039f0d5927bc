#!/usr/bin/env python3
"""Runs the documented multi-rank queries of docs/export.md on a memscope Parquet dataset with
DuckDB, DataFusion and Spark, and checks the files with pyarrow.

usage: query_parquet.py DOCS.md DATASET [--engines=duckdb,datafusion,spark]

Every block preceded by `<!-- query: <engine> <name> -->` in DOCS.md is run as written, its
dataset path `OUT` replaced by DATASET: SQL blocks statement by statement (the last one's rows
are the result), Spark's Python blocks with `exec`, in document order and in one namespace (a
notebook's cells), in a local-mode session (`local[2]`) that the blocks'
`SparkSession.builder.getOrCreate()` returns; the rows a block shows (`DataFrame.show(n)`: its
first n rows) are its result. --engines runs only the blocks of those engines (default: all).
pyarrow checks each events file: no `rank`/`pid` column inside (they are partition keys), ZSTD,
`id` declared as the sorting column, row groups of at most 1 Mi rows, memscope key-value
metadata.

Prints {"duckdb": {name: rows}, "datafusion": {name: rows}, "spark": {name: rows}, "files": n,
"rows": n} with rows as lists of lists. Exits 3, saying what to install, when a Python package
or Java (Spark's) is missing.
"""
import glob
import json
import os
import re
import shutil
import sys

try:
    import datafusion
    import duckdb
    import pyarrow.parquet as pq
except ImportError as e:
    print(f"missing Python package for the Parquet test ({e}); pip install duckdb datafusion pyarrow",
          file=sys.stderr)
    sys.exit(3)


def queries(doc):
    text = open(doc).read()
    pat = re.compile(r"<!-- query: (\w+) (\w+) -->\s*```(?:sql|python)\n(.*?)```", re.S)
    return [(m.group(1), m.group(2), m.group(3)) for m in pat.finditer(text)]


def statements(sql):
    lines = [l for l in sql.splitlines() if not l.strip().startswith("--")]
    return [s.strip() for s in "\n".join(lines).split(";") if s.strip()]


def plain(v):
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, str) and re.fullmatch(r"-?\d+", v):
        return int(v)
    return v


def run_duckdb(sql):
    con = duckdb.connect()
    rows = None
    for st in statements(sql):
        rows = con.sql(st).fetchall()
    return [[plain(v) for v in r] for r in rows]


def run_datafusion(sql):
    ctx = datafusion.SessionContext()
    table = None
    for st in statements(sql):
        table = ctx.sql(st).to_arrow_table()
    cols = [table.column(i).to_pylist() for i in range(table.num_columns)]
    return [[plain(c[i]) for c in cols] for i in range(table.num_rows)]


def spark_runner():
    """A function running a Spark block (Python) in a local-mode session, returning the rows it
    shows."""
    if not (shutil.which("java") or os.environ.get("JAVA_HOME")):
        print("Spark needs Java, and there is no `java` on PATH nor JAVA_HOME; "
              "apt-get install openjdk-17-jre-headless", file=sys.stderr)
        sys.exit(3)
    try:
        from pyspark.sql import SparkSession
    except ImportError as e:
        print(f"missing Python package for the Parquet test's Spark queries ({e}); pip install pyspark",
              file=sys.stderr)
        sys.exit(3)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # no warning about the host's name
    spark = (SparkSession.builder.master("local[2]").appName("memscope-export-test")
             .config("spark.driver.memory", "512m")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    shown = []

    def show(df, n=20, *args, **kwargs):
        shown.append(df.take(n))

    type(spark.range(0)).show = show  # the session's DataFrame class (pyspark 4: classic's)
    namespace = {"__name__": "__spark_block__"}

    def run(code):
        shown.clear()
        exec(compile(code, "<docs spark block>", "exec"), namespace)
        if len(shown) != 1:
            raise SystemExit(f"a Spark block shows {len(shown)} DataFrames, not 1:\n{code}")
        return [[plain(v) for v in row] for row in shown[0]]

    return run


def check_files(dataset):
    files = sorted(glob.glob(os.path.join(dataset, "events", "rank=*", "pid=*", "*.parquet")))
    leftovers = glob.glob(os.path.join(dataset, "**", "*.tmp"), recursive=True)
    if leftovers:
        raise SystemExit(f"temporary files left: {leftovers}")
    rows = 0
    for f in files:
        pf = pq.ParquetFile(f)
        names = pf.schema_arrow.names
        if "rank" in names or "pid" in names:
            raise SystemExit(f"{f}: partition key inside the file ({names})")
        meta = pf.metadata
        kv = {k.decode(): v.decode() for k, v in (meta.metadata or {}).items()}
        for key in ("memscope.schema_version", "memscope.version", "memscope.rank", "memscope.pid"):
            if key not in kv:
                raise SystemExit(f"{f}: no {key} metadata")
        part = f.split(os.sep)
        if f"rank={kv['memscope.rank']}" not in part or f"pid={kv['memscope.pid']}" not in part:
            raise SystemExit(f"{f}: metadata rank/pid {kv['memscope.rank']}/{kv['memscope.pid']} differ from the path")
        for g in range(meta.num_row_groups):
            rg = meta.row_group(g)
            if rg.num_rows > 1024 * 1024:
                raise SystemExit(f"{f}: row group {g} has {rg.num_rows} rows")
            for c in range(rg.num_columns):
                if rg.column(c).compression != "ZSTD":
                    raise SystemExit(f"{f}: column {c} is {rg.column(c).compression}")
            sc = rg.sorting_columns
            if not sc or sc[0].column_index != 0 or sc[0].descending:
                raise SystemExit(f"{f}: row group {g} does not declare id as sorted")
        t = pf.read(columns=["id"])
        ids = t.column(0).to_pylist()
        if ids != sorted(ids):
            raise SystemExit(f"{f}: rows not in ID order")
        rows += meta.num_rows
    return len(files), rows


def main():
    engines = {"duckdb", "datafusion", "spark"}
    args = []
    for a in sys.argv[1:]:
        if a.startswith("--engines="):
            engines = set(a.split("=", 1)[1].split(","))
        else:
            args.append(a)
    doc, dataset = args[0], os.path.abspath(args[1])
    qs = [q for q in queries(doc) if q[0] in engines]
    if not qs:
        raise SystemExit(f"{doc}: no queries of {sorted(engines)} found")
    runners = {"duckdb": run_duckdb, "datafusion": run_datafusion}
    out = {}
    for engine, name, code in qs:
        code = re.sub(r"(['\"])OUT/", lambda m: f"{m.group(1)}{dataset}/", code)
        if engine not in runners and engine == "spark":
            runners["spark"] = spark_runner()
        if engine not in runners:
            raise SystemExit(f"{doc}: query {name} of unknown engine {engine}")
        out.setdefault(engine, {})[name] = runners[engine](code)
    out["files"], out["rows"] = check_files(dataset)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
