#!/usr/bin/env python3
"""Iceberg v3 against v2 tables (issue 46), and a key-less v3 table's changelog against DuckLake's.

In one process, on the same disk: a v2 lake, a v3 lake (FORMAT_VERSION 3) and DuckLake
(DATA_INLINING_ROW_LIMIT 0). Two workloads:
  peer   the peer workload (32 appends, 8 DELETEs and 8 UPDATEs of 1,000 consecutive ids, then
         single DELETEs and UPDATEs of 1,000 and 100,000 rows), key-less: the time of each step
         and of full scans after it on v2 (position delete files) and v3 (deletion vectors);
         then the changelog of the window of the mutations: on v3 updates pair by _row_id,
         which DuckLake's table_changes does by its row ids; the pairs are checked to be the
         same (counts and sums of each change type), and the times compared.
  tpch   TPC-H's lineitem (the tpch extension's dbgen at --sf), then UPDATE of 10% of its rows
         (l_orderkey % 10 = 0) and DELETE of 5%: scan all columns after each, v2 vs v3.
Timings are printed (best of --repeat), never asserted; results are checked to be equal.

Usage: python bench/v3.py [--sf 0.1] [--rows 31250] [--repeat 3] [--only peer,tpch]
"""
import argparse
import shutil
import tempfile
import time

import duckdb

from common import EXTENSION
from hosts import peer_extension  # tools/, on the path once common is imported

DUCKLAKE = peer_extension("duckdb_extension_ducklake", "ducklake")
TPCH = peer_extension("duckdb_extension_tpch", "tpch")
MUTATIONS = 8
APPENDS = 32


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sf", type=float, default=0.1)
    parser.add_argument("--rows", type=int, default=31250)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", default="peer,tpch")
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="skade-bench-v3-")
    con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
    con.execute(f"LOAD '{EXTENSION}'")
    con.execute(f"ATTACH '{root}/v2.skade' AS v2 (TYPE skade)")
    con.execute(f"ATTACH '{root}/v3.skade' AS v3 (TYPE skade, FORMAT_VERSION 3)")
    lakes = ["v2", "v3"]
    if DUCKLAKE:
        con.execute(f"LOAD '{DUCKLAKE}'")
        con.execute(f"ATTACH 'ducklake:{root}/meta.ducklake' AS dl (DATA_PATH '{root}/dl/', DATA_INLINING_ROW_LIMIT 0)")
    print(f"DuckDB {duckdb.__version__}: skade Iceberg v2 vs v3" + (" vs DuckLake" if DUCKLAKE else " (no DuckLake)"),
          flush=True)
    try:
        if "peer" in args.only:
            peer(con, lakes + (["dl"] if DUCKLAKE else []), args)
        if "tpch" in args.only:
            tpch(con, lakes, args)
    finally:
        con.close()
        shutil.rmtree(root, ignore_errors=True)


def timed(fn, repeat=1):
    best, result = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t)
    return best, result


def step(con, label, lakes, sql_for, repeat=1, check=True, run=None):
    """Runs one step on every lake (`sql_for(lake)`, or `run(lake)`), prints each time and v3's
    speed against v2 (>1: v3 faster)."""
    run = run or (lambda lake: con.execute(sql_for(lake)).fetchall())
    times, results = {}, {}
    for _ in range(repeat):
        for lake in lakes:
            seconds, results[lake] = timed(lambda: run(lake))
            times[lake] = min(times.get(lake, float("inf")), seconds)
    if check and len({str(r) for r in results.values()}) > 1:
        raise SystemExit(f"{label}: results differ: {results}")
    cells = "  ".join(f"{lake} {times[lake] * 1000:9.1f} ms" for lake in lakes)
    print(f"{label:<34} {cells}   v3/v2 speed x{times['v2'] / times['v3']:.2f}", flush=True)
    return times


def peer(con, lakes, args):
    rows = args.rows
    gen = "SELECT i, 'c' || (i % 997), (i % 1000) * 1.5 FROM range({lo}, {hi}) r(i)"
    for lake in lakes:
        con.execute(f"CREATE TABLE {lake}.orders (id BIGINT, customer VARCHAR, amount DOUBLE)")
        con.execute(f"CREATE TABLE {lake}.bulk (id BIGINT, customer VARCHAR, amount DOUBLE)")
        con.execute(f"INSERT INTO {lake}.bulk " + gen.format(lo=0, hi=APPENDS * rows))
        for k in range(APPENDS):
            con.execute(f"INSERT INTO {lake}.orders " + gen.format(lo=k * rows, hi=(k + 1) * rows))
    first = {lake: current_snapshot(con, lake) for lake in lakes}

    def mutate(lake):
        import random
        rng = random.Random(7)
        for _ in range(MUTATIONS):
            lo = rng.randrange(0, APPENDS * rows - 1000)
            con.execute(f"DELETE FROM {lake}.orders WHERE id >= {lo} AND id < {lo + 1000}")
        for _ in range(MUTATIONS):
            lo = rng.randrange(0, APPENDS * rows - 1000)
            con.execute(f"UPDATE {lake}.orders SET amount = amount + 1 WHERE id >= {lo} AND id < {lo + 1000}")
        return con.execute(f"SELECT count(*), sum(amount) FROM {lake}.orders").fetchall()

    step(con, "8 deletes + 8 updates x1000", lakes, None, run=mutate)
    step(con, "scan all columns after", lakes,
         lambda l: f"SELECT count(*), sum(id), sum(amount), sum(length(customer)) FROM {l}.orders", args.repeat)
    for n in (1000, 100000):
        step(con, f"delete {n} rows", lakes, lambda l: f"DELETE FROM {l}.bulk WHERE id >= {n} AND id < {2 * n}")
        step(con, f"update {n} rows", lakes,
             lambda l: f"UPDATE {l}.bulk SET amount = -amount WHERE id >= {3 * n} AND id < {4 * n}")
    step(con, "scan all columns after those", lakes,
         lambda l: f"SELECT count(*), sum(id), sum(amount), sum(length(customer)) FROM {l}.bulk", args.repeat)

    # The mutations' changelog: v3 pairs each UPDATE by _row_id, as DuckLake does by its row ids.
    kind = ("CASE change_type WHEN 'update_preimage' THEN 'UPDATE_BEFORE' WHEN 'update_postimage' "
            "THEN 'UPDATE_AFTER' ELSE upper(change_type) END")
    feed = {lake: f"skade_changelog('{lake}.orders', {first[lake]})" for lake in ("v2", "v3")}
    if "dl" in lakes:
        last = con.execute("SELECT max(snapshot_id) FROM dl.snapshots()").fetchone()[0]
        feed["dl"] = f"(SELECT *, {kind} AS _change_type FROM ducklake_table_changes('dl', 'main', 'orders', " \
                     f"{first['dl'] + 1}, {last}))"
    query = "SELECT _change_type, count(*), sum(id), sum(amount) FROM {} GROUP BY ALL ORDER BY ALL"
    shown = [lake for lake in ("v3", "dl") if lake in feed]
    times, results = {}, {}
    for lake in ["v2"] + shown:
        times[lake], results[lake] = timed(lambda: con.execute(query.format(feed[lake])).fetchall(), args.repeat)
    pairs = {r[0]: r[1] for r in results["v3"]}
    if "dl" in results and results["dl"] != results["v3"]:
        raise SystemExit(f"changelog: v3's pairs differ from DuckLake's: {results['v3']} vs {results['dl']}")
    total = sum(pairs.values())
    line = "  ".join(f"{lake} {times[lake] * 1000:9.1f} ms" for lake in ["v2"] + shown)
    tail = f"   v3/DuckLake speed x{times['dl'] / times['v3']:.2f}" if "dl" in times else ""
    print(f"{'changelog of the mutations':<34} {line}{tail}   ({total:,} rows; v3 pairs "
          f"{pairs.get('UPDATE_BEFORE', 0):,} updates, v2 none)", flush=True)


def current_snapshot(con, lake):
    if lake == "dl":
        return con.execute("SELECT max(snapshot_id) FROM dl.snapshots()").fetchone()[0]
    return con.execute(f"SELECT snapshot_id FROM skade_snapshots('{lake}.orders') ORDER BY sequence_number DESC "
                       "LIMIT 1").fetchone()[0]


def tpch(con, lakes, args):
    if not TPCH:
        print(f"(no tpch extension for DuckDB {duckdb.__version__}: TPC-H skipped)", flush=True)
        return
    con.execute(f"LOAD '{TPCH}'")
    con.execute(f"CALL dbgen(sf={args.sf})")
    for lake in lakes:
        con.execute(f"CREATE TABLE {lake}.lineitem AS FROM memory.main.lineitem")
    scan = "SELECT count(*), sum(l_quantity), sum(l_extendedprice), sum(length(l_comment)), " \
           "count(DISTINCT l_shipmode), max(l_shipdate) FROM {}.lineitem"
    step(con, f"lineitem sf {args.sf}: scan", lakes, lambda l: scan.format(l), args.repeat)
    step(con, "UPDATE 10% of lineitem", lakes,
         lambda l: f"UPDATE {l}.lineitem SET l_quantity = l_quantity + 1 WHERE l_orderkey % 10 = 0")
    step(con, "scan after the UPDATE", lakes, lambda l: scan.format(l), args.repeat)
    step(con, "DELETE 5% of lineitem", lakes, lambda l: f"DELETE FROM {l}.lineitem WHERE l_orderkey % 20 = 1")
    step(con, "scan after the DELETE", lakes, lambda l: scan.format(l), args.repeat)


if __name__ == "__main__":
    main()
