#!/usr/bin/env python3
"""The Iceberg REST catalog server (issue 45): what a PyIceberg client sees, against PyIceberg's
own SQL catalog (SQLite) on the same kind of files, in one run.

1. Table loads/s: `catalog.load_table` of a table with 20 snapshots, N times.
2. Appends/s: one-row `table.append` (PyIceberg writes the data file, manifest and manifest list
   either way; the catalog checks and records the commit), N times.
3. Commit to consumer: a skade consumer waits in `skade_consume(wait := ...)` in another DuckDB
   connection; latency = when it has the row minus when PyIceberg's append returned: p50 / p99.

Both catalogs run in this process's machine, files on local disk; PyIceberg's SQL catalog runs in
this Python process (no HTTP), skade's behind HTTP on loopback. Timings are printed, never
asserted. Usage: python bench/rest.py [n]
"""
import shutil
import statistics
import sys
import tempfile
import threading
import time

import duckdb
import pyarrow as pa
from pyiceberg.catalog import load_catalog
from pyiceberg.catalog.sql import SqlCatalog

from common import EXTENSION

N = int(sys.argv[1]) if len(sys.argv) > 1 else 200
SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("v", pa.string())])


def row(i):
    return pa.table({"id": [i], "v": [f"v{i}"]}, schema=SCHEMA)


def rate(n, fn):
    start = time.perf_counter()
    for i in range(n):
        fn(i)
    return n / (time.perf_counter() - start)


def measure(catalog, name):
    table = catalog.load_table(name)
    for i in range(20):
        table.append(row(-1 - i))
    loads = rate(N, lambda i: catalog.load_table(name))
    table = catalog.load_table(name)
    appends = rate(N, lambda i: table.append(row(i)))
    return loads, appends


def skade(root):
    con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
    con.execute(f"LOAD '{EXTENSION}'")
    con.execute(f"ATTACH '{root}/lake.skade' AS lake (TYPE skade)")
    con.execute("CREATE TABLE lake.t (id BIGINT, v VARCHAR)")
    address = con.execute("CALL skade_serve('lake', port := 0)").fetchone()[0]
    return con, address, load_catalog("bench", type="rest", uri=address)


def sqlite(root):
    catalog = SqlCatalog("bench", uri=f"sqlite:///{root}/catalog.db", warehouse=f"file://{root}/warehouse")
    catalog.create_namespace("main")
    catalog.create_table("main.t", SCHEMA)
    return catalog


def consumer_latency(con, rest, samples=30):
    con.execute("CALL skade_create_consumer('lake', 'bench', 't')")
    waiter = duckdb.connect(config={"allow_unsigned_extensions": "true"})
    waiter.execute(f"LOAD '{EXTENSION}'")
    waiter.execute(f"ATTACH '{con.execute('SELECT path FROM duckdb_databases() WHERE database_name = ?', ['lake']).fetchone()[0]}' AS lake (TYPE skade)")
    table = rest.load_table("main.t")
    got = {}
    latencies = []

    def wait_for(key):
        while True:
            rows = waiter.execute("SELECT id FROM skade_consume('lake', 'bench', wait := INTERVAL 10 SECOND)").fetchall()
            if any(r[0] == key for r in rows):
                got[key] = time.perf_counter()
                return

    for s in range(samples):
        key = 1_000_000 + s
        thread = threading.Thread(target=wait_for, args=(key,))
        thread.start()
        time.sleep(0.005)  # (the consumer is waiting when the commit lands)
        table.append(row(key))
        acknowledged = time.perf_counter()
        thread.join()
        latencies.append((got[key] - acknowledged) * 1000)
    waiter.close()
    latencies.sort()
    return statistics.median(latencies), latencies[int(len(latencies) * 0.99) - 1]


def main():
    root = tempfile.mkdtemp(prefix="skade-rest-bench-")
    try:
        print(f"DuckDB {duckdb.__version__}, skade {EXTENSION}; PyIceberg catalogs; {N} operations per point")
        con, address, rest = skade(root)
        s_loads, s_appends = measure(rest, "main.t")
        sq_loads, sq_appends = measure(sqlite(root), "main.t")
        print(f"  {'':<40}{'skade (REST)':>16}{'SQL catalog':>16}{'skade/SQL':>12}")
        print(f"  {'table loads/s (20 snapshots)':<40}{s_loads:>16.0f}{sq_loads:>16.0f}{s_loads / sq_loads:>12.2f}")
        print(f"  {'one-row appends/s':<40}{s_appends:>16.0f}{sq_appends:>16.0f}{s_appends / sq_appends:>12.2f}")
        p50, p99 = consumer_latency(con, rest)
        print(f"  a REST append to a skade consumer's wait returning: p50 {p50:.1f} ms, p99 {p99:.1f} ms")
        print(f"  goal (issue 45): at least as fast as PyIceberg's SQLite catalog for loads and commits: "
              f"{'met' if s_loads >= sq_loads and s_appends >= sq_appends else 'NOT met'}")
        con.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
