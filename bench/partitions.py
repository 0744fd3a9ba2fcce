#!/usr/bin/env python3
"""Partitioned tables: pruning and write throughput, skade vs DuckLake, in one process.

A table of --rows rows (id BIGINT, ts TIMESTAMP over --days days in random order, amount DOUBLE,
customer VARCHAR) is written by one INSERT into:
  skade partitioned by day(ts), skade unpartitioned, DuckLake partitioned by the same days
  (DuckLake's year/month/day are calendar parts: year(ts), month(ts), day(ts) is one day each).
Then a one-day query (count, sum, and a string column) runs on each, --repeat times after a
warm-up, alternating engines; the best time is printed with the files each one read.
Ratios are skade's SPEED relative to a peer (peer seconds / skade seconds: >1 skade is faster).
Times are printed, never asserted; the rows of the query are checked identical everywhere.

Usage: python bench/partitions.py [--rows 10000000] [--days 100] [--repeat 5] [--keep]
"""
import argparse
import os
import shutil
import sys
import tempfile
import time

import duckdb

from common import EXTENSION, ducklake_extension

ROWS = ("SELECT i AS id, TIMESTAMP '2024-01-01' + to_microseconds((hash(i) % ({days} * 86400000000))::BIGINT) AS ts, "
        "(i % 1000) * 0.25 AS amount, 'customer-' || (i % 5000) AS customer FROM range({rows}) r(i)")
QUERY = ("SELECT count(*), sum(amount), count(DISTINCT customer) FROM {table} "
         "WHERE ts >= TIMESTAMP '2024-02-10' AND ts < TIMESTAMP '2024-02-11'")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--days", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--keep", action="store_true", help="keep the working folder")
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="skade-partitions-")
    con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
    con.execute(f"LOAD '{EXTENSION}'")
    con.execute(f"LOAD '{ducklake_extension()}'")
    con.execute(f"ATTACH '{root}/lake.skade' AS sk (TYPE skade)")
    con.execute(f"ATTACH 'ducklake:{root}/meta.ducklake' AS dl (DATA_PATH '{root}/dl/', DATA_INLINING_ROW_LIMIT 0)")
    rows = ROWS.format(days=args.days, rows=args.rows)
    schema = "(id BIGINT, ts TIMESTAMP, amount DOUBLE, customer VARCHAR)"
    tables = {
        "skade day(ts)": ("sk.part", "ALTER TABLE sk.part SET PARTITIONED BY (day(ts))"),
        "skade unpartitioned": ("sk.flat", None),
        "DuckLake day": ("dl.part", "ALTER TABLE dl.part SET PARTITIONED BY (year(ts), month(ts), day(ts))"),
    }
    print(f"# {args.rows:,} rows over {args.days} days, one INSERT each (DuckDB {duckdb.__version__})")
    inserts = {}
    for label, (table, partition) in tables.items():
        con.execute(f"CREATE TABLE {table} {schema}")
        if partition:
            con.execute(partition)
        t = time.perf_counter()
        con.execute(f"INSERT INTO {table} {rows}")
        inserts[label] = time.perf_counter() - t
        print(f"insert  {label:<22} {inserts[label]:7.2f} s  {args.rows / inserts[label] / 1e6:5.2f} M rows/s")
    results, best = {}, {label: float("inf") for label in tables}
    for label, (table, _) in tables.items():
        results[label] = con.execute(QUERY.format(table=table)).fetchall()
    for _ in range(args.repeat):
        for label, (table, _) in tables.items():
            t = time.perf_counter()
            con.execute(QUERY.format(table=table)).fetchall()
            best[label] = min(best[label], time.perf_counter() - t)
    files = {
        "skade day(ts)": scan_tasks(con, QUERY.format(table="sk.part")),
        "skade unpartitioned": scan_tasks(con, QUERY.format(table="sk.flat")),
        "DuckLake day": "-",
    }
    for label in tables:
        print(f"one-day query  {label:<22} {best[label] * 1000:8.1f} ms  scan tasks {files[label]}")
    print(f"ratio one-day query: skade day(ts) vs DuckLake day {best['DuckLake day'] / best['skade day(ts)']:.2f}x, "
          f"vs skade unpartitioned {best['skade unpartitioned'] / best['skade day(ts)']:.2f}x")
    print(f"ratio insert: skade partitioned vs unpartitioned {inserts['skade unpartitioned'] / inserts['skade day(ts)']:.2f}x"
          f" (speed), vs DuckLake day {inserts['DuckLake day'] / inserts['skade day(ts)']:.2f}x")
    first = results["skade day(ts)"]
    wrong = [label for label, r in results.items() if r != first]
    con.close()
    if args.keep:
        print(f"kept {root}")
    else:
        shutil.rmtree(root, ignore_errors=True)
    if wrong:
        print(f"DIFFERENT ROWS: {wrong} vs {first}", file=sys.stderr)
        sys.exit(1)


def scan_tasks(con, query):
    plan = con.execute("EXPLAIN ANALYZE " + query).fetchall()[0][1]
    for line in plan.splitlines():
        if "Scan Tasks:" in line:
            return line.split("Scan Tasks:")[1].strip(" │")
    return "?"


if __name__ == "__main__":
    main()
