#!/usr/bin/env python3
"""One-row commits per second: skade under each DURABILITY mode with 1, 2, 4 and 8 concurrent
writers (threads, each with its own connection), next to DuckLake on the same work in the same
run. Writers insert into their own table (group commit shares the fsync) and, separately, into
one shared table, plain and with a primary key (appends build on the one still in flight:
docs/design/many-writers.md). Prints figures; asserts nothing about speed.

Usage: python bench/commits.py [seconds_per_point]   (make bench)
"""
import json
import os
import shutil
import sys
import tempfile
import threading
import time

import duckdb

from common import EXTENSION, ducklake_extension

SECONDS = float(sys.argv[1]) if len(sys.argv) > 1 else 1.5
WRITERS = [1, 2, 4, 8]



def measure(con, lake, writers, shared, keyed=False):
    # fresh tables for every point: a table's metadata grows with its snapshots
    point = f"{'s' if shared else 'o'}{'k' if keyed else ''}{writers}"
    for w in range(writers):
        con.execute(f"CREATE TABLE {lake}.t_{point}_{w} (id BIGINT, v VARCHAR)")
    key = " PRIMARY KEY" if keyed else ""
    con.execute(f"CREATE TABLE {lake}.shared_{point} (id BIGINT{key}, v VARCHAR)")
    counts = [0] * writers
    errors = []
    stop = time.monotonic() + SECONDS

    def writer(w):
        cur = con.cursor()
        table = f"{lake}.shared_{point}" if shared else f"{lake}.t_{point}_{w}"
        n = 0
        while time.monotonic() < stop:
            try:
                cur.execute(f"INSERT INTO {table} VALUES ({w * 10**9 + n}, 'x')")
                n += 1
            except duckdb.Error as e:  # a conflict is reported, never hidden
                errors.append(str(e))
        counts[w] = n

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(writers)]
    start = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - start
    if errors:
        print(f"  {lake} {writers} writers: {len(errors)} failed commits, e.g. {errors[0][:120]}")
    return sum(counts) / elapsed


def main():
    root = tempfile.mkdtemp(prefix="skade-commits-")
    con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
    con.execute(f"LOAD '{EXTENSION}'")
    con.execute(f"LOAD '{ducklake_extension()}'")
    lakes = {}
    for mode in ("immediate", "eventual", "none"):
        con.execute(f"ATTACH '{root}/{mode}.skade' AS sk_{mode} (TYPE skade, DURABILITY '{mode}')")
        lakes[f"skade {mode}"] = f"sk_{mode}"
    con.execute(f"ATTACH 'ducklake:{root}/meta.ducklake' AS dl (DATA_PATH '{root}/dl/', DATA_INLINING_ROW_LIMIT 0)")
    lakes["ducklake"] = "dl"

    figures = {}
    for shared, keyed in ((False, False), (True, False), (True, True)):
        title = "one shared table" if shared else "a table per writer"
        title += " with a primary key (DuckLake has none)" if keyed else ""
        kind = "shared-keyed" if keyed else "shared" if shared else "own"
        print(f"one-row commits/s, {title}:")
        print(f"  {'':<18}" + "".join(f"{w:>9} w" for w in WRITERS) + "   8w/1w   8w vs own 8w")
        for name, lake in lakes.items():
            if keyed and name == "ducklake":
                continue
            row = [measure(con, lake, w, shared, keyed) for w in WRITERS]
            figures[f"{name}|{kind}"] = [round(r, 1) for r in row]
            own = figures.get(f"{name}|own", [0] * len(WRITERS))[-1]
            versus = f"   x{row[-1] / own:.2f}" if shared and own else ""
            print(f"  {name:<18}" + "".join(f"{r:>11.1f}" for r in row) + f"   x{row[-1] / row[0]:.2f}{versus}",
                  flush=True)
    print(json.dumps(figures))
    con.close()
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
