#!/usr/bin/env python3
"""CREATE TABLE AS ... ORDER BY: the ordered write stays parallel (issue 43 item 5).

With preserve_insertion_order on (DuckDB's default) a CTAS keeps its query's order: each thread
writes whole batches of the sort, and the statement orders its files by batch. This times the CTAS
of --rows rows (id BIGINT, k BIGINT, s VARCHAR, ordered by k) on 1 thread and on --threads threads,
and on --threads threads with preserve_insertion_order off (each thread writes its own files, no
order kept), best of --repeat runs, each into a fresh table. DuckLake (its data files on the same
disk) and DuckDB's own table are timed as the references. Times are printed, never asserted; what is checked (and fails loudly) is that the
skade tables read back in the query's order and that the parallel ordered write wrote several
files (one thread per file at a time: one file would mean the write did not run in parallel).

Usage: python bench/ordered_insert.py [--rows 1000000] [--threads 2] [--repeat 3]
"""
import argparse
import shutil
import tempfile
import time

import duckdb

from common import EXTENSION, ducklake_extension

QUERY = "SELECT i AS id, hash(i) % 100000 AS k, 'row-' || i AS s FROM range({rows}) r(i) ORDER BY k, id"


def timed(con, sql):
    t = time.perf_counter()
    con.execute(sql)
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="skade-ordered-insert-")
    try:
        con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
        con.execute(f"LOAD '{EXTENSION}'")
        con.execute(f"ATTACH '{root}/lake.skade' AS lake (TYPE skade)")
        con.execute(f"LOAD '{ducklake_extension()}'")
        con.execute(f"ATTACH 'ducklake:{root}/dl.ducklake' AS dl (DATA_PATH '{root}/dl_data')")
        query = QUERY.format(rows=args.rows)
        con.execute(f"CREATE TABLE ref AS {query}")
        print(f"# CTAS of {args.rows:,} rows ORDER BY k (DuckDB {duckdb.__version__}), best of {args.repeat}")
        runs = [
            ("skade, 1 thread", 1, True, "lake"),
            (f"skade, {args.threads} threads", args.threads, True, "lake"),
            (f"skade, {args.threads} threads, preserve_insertion_order off", args.threads, False, "lake"),
            (f"DuckLake, {args.threads} threads", args.threads, True, "dl"),
            ("DuckDB table, 1 thread", 1, True, "memory"),
            (f"DuckDB table, {args.threads} threads", args.threads, True, "memory"),
        ]
        for n, (label, threads, ordered, db) in enumerate(runs):
            con.execute(f"SET threads = {threads}")
            con.execute(f"SET preserve_insertion_order = {str(ordered).lower()}")
            best = float("inf")
            for r in range(args.repeat):
                table = f"{db}.t{n}_{r}"
                best = min(best, timed(con, f"CREATE TABLE {table} AS {query}"))
            line = f"{label:<60} {best * 1000:8.0f} ms"
            if db == "lake":
                files = con.execute(f"SELECT summary['total-data-files'] FROM skade_snapshots('{table}')").fetchone()[0]
                line += f"   {files} files"
                if ordered:
                    con.execute("SET preserve_insertion_order = true")
                    wrong = con.execute(f"SELECT count(*) FILTER (WHERE a.id IS DISTINCT FROM b.id) "
                                        f"FROM {table} a POSITIONAL JOIN ref b").fetchone()[0]
                    if wrong:
                        raise SystemExit(f"{label}: {wrong} rows out of the query's order")
                    if threads > 1 and int(files) < 2:
                        raise SystemExit(f"{label}: one file: the ordered write did not run in parallel")
            print(line)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
