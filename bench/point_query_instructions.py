#!/usr/bin/env python3
"""Instructions per point query (callgrind), skade against a native DuckDB table with a primary
key and DuckDB's floor: counts, unlike times, are the same on a loaded machine.

A 100,000-row keyed table with a VARCHAR of distinct values (its dictionary falls back to plain
pages), on a skade lake and a native DuckDB file; 300 probes spread over the table, one thread.
Each variant runs in its own process under `valgrind --tool=callgrind`; its figure is the process's
instructions minus those of the same process running `SELECT * FROM range(1)` instead, per query.

Usage: python bench/point_query_instructions.py   (needs valgrind)
"""
import os
import re
import subprocess
import sys
import tempfile

import duckdb

from common import EXTENSION

PROBES = 300
QUERIES = {
    "floor": "SELECT * FROM range(1)",
    "skade WHERE id = k": "SELECT * FROM lake.t WHERE id = {k}",
    "native PK WHERE id = k": "SELECT * FROM nat.t WHERE id = {k}",
    "skade_lookup": "SELECT * FROM skade_lookup('lake.t', {k})",
    "skade EXECUTE of a kept plan": "EXECUTE kept_lake",
    "native PK EXECUTE of a kept plan": "EXECUTE kept_nat",
}


def connect(root):
    con = duckdb.connect(config={"allow_unsigned_extensions": "true", "threads": "1"})
    con.execute(f"LOAD '{EXTENSION}'")
    con.execute(f"ATTACH '{root}/lake.skade' AS lake (TYPE skade)")
    con.execute(f"ATTACH '{root}/nat.duckdb' AS nat")
    return con


def probe(root, name):
    con = connect(root)
    for cat in ("lake", "nat"):
        con.execute(f"PREPARE kept_{cat} AS SELECT * FROM {cat}.t WHERE id = 42331")
    for i in range(PROBES):
        con.execute(QUERIES[name].format(k=(i * 331) % 100_000)).fetchall()


def main():
    if len(sys.argv) == 3:
        return probe(sys.argv[1], sys.argv[2])
    root = tempfile.mkdtemp(prefix="skade-pq-")
    con = connect(root)
    for cat in ("lake", "nat"):
        con.execute(f"CREATE TABLE {cat}.t (id BIGINT PRIMARY KEY, v VARCHAR)")
        con.execute(f"INSERT INTO {cat}.t SELECT range, 'x' || range FROM range(100000)")
    con.close()
    counts = {}
    for name in QUERIES:
        out = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable,
                              os.path.abspath(__file__), root, name], capture_output=True, text=True)
        found = re.search(r"Collected : (\d+)", out.stderr)
        if out.returncode != 0 or not found:
            raise SystemExit(f"{name}: {out.stderr[-2000:]}")
        counts[name] = int(found.group(1))
    for name in QUERIES:
        if name != "floor":
            print(f"{name:<36} {(counts[name] - counts['floor']) / PROBES:10,.0f} instructions per query above the floor")
    subprocess.run(["rm", "-rf", root])


if __name__ == "__main__":
    main()
