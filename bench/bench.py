#!/usr/bin/env python3
"""skade vs DuckLake on the peer workload (../shared/bench), side by side in one process.

Both extensions are loaded into one DuckDB instance; every step runs on a skade catalog and on a
DuckLake catalog (DATA_INLINING_ROW_LIMIT 0: files, not inlined rows) and prints the time of each,
and skade's speed as a ratio of DuckLake's (>1: skade is faster). Timings are printed, never
asserted; each result is checked to be the same on both sides. The first line names the DuckDB
version and the engines compared.

Where DuckLake is not installed (PyPI has it for DuckDB 1.5.5 only), every step runs on skade alone
and prints skade's figures, with a note in DuckLake's column; the checks against DuckLake are
skipped, skade's own (the changelogs against the snapshots' full scans) still run.

Usage: python bench/bench.py [rows_per_append]   (make bench)
"""
import json
import os
import random
import shutil
import sys
import tempfile
import time

import duckdb

from common import EXTENSION
from hosts import peer_extension  # tools/, on the path once common is imported

DUCKLAKE = peer_extension("duckdb_extension_ducklake", "ducklake")
LAKES = ("sk", "dl") if DUCKLAKE else ("sk",)
NO_DUCKLAKE = f"(no DuckLake for DuckDB {duckdb.__version__})"

ROWS = int(sys.argv[1]) if len(sys.argv) > 1 else 31250
APPENDS = 32
MUTATIONS = 8


def timed(fn, repeat=1):
    best, result = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t)
    return best, result


def main():
    print(f"DuckDB {duckdb.__version__}: " + ("skade vs DuckLake" if DUCKLAKE else
                                             "skade only (no DuckLake extension installed for this DuckDB)"), flush=True)
    root = tempfile.mkdtemp(prefix="skade-bench-")
    con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
    con.execute(f"LOAD '{EXTENSION}'")
    con.execute(f"ATTACH '{root}/lake.skade' AS sk (TYPE skade)")
    if DUCKLAKE:
        con.execute(f"LOAD '{DUCKLAKE}'")
        con.execute(f"ATTACH 'ducklake:{root}/meta.ducklake' AS dl (DATA_PATH '{root}/dl/', DATA_INLINING_ROW_LIMIT 0)")
    figures = {}

    def show(label, skade, ducklake, tail=""):
        # One step's line: skade's figure, then DuckLake's column (ducklake() is called only when
        # DuckLake ran: it reads DuckLake's figures) or the note that it did not, then the tail.
        print(f"{label:<28} skade {skade}   {ducklake() if DUCKLAKE else NO_DUCKLAKE}" + (f"   {tail}" if tail else ""),
              flush=True)

    def show_ms(label, step):
        sk = figures[f"{step}.sk_s"]
        show(label, f"{sk * 1000:10.1f} ms", lambda: f"ducklake {figures[f'{step}.dl_s'] * 1000:10.1f} ms   "
             f"skade/ducklake speed x{figures[f'{step}.dl_s'] / sk:.2f}")

    def same_rows(what, ours, reference):
        # The two queries' rows as multisets: nothing in one that is not in the other.
        extra, missing = con.execute(f"""
            SELECT (SELECT count(*) FROM (SELECT * FROM ({ours}) EXCEPT ALL SELECT * FROM ({reference}))),
                   (SELECT count(*) FROM (SELECT * FROM ({reference}) EXCEPT ALL SELECT * FROM ({ours})))""").fetchone()
        if extra or missing:
            raise SystemExit(f"{what}: {extra} rows not in the reference, {missing} reference rows missing")

    def both(step, sql_for, repeat=1, check=True):
        # Repeats alternate between the two (best of each): a slow phase of this shared machine
        # then hits both rather than one.
        results, best = {}, {lake: float("inf") for lake in LAKES}
        for _ in range(repeat):
            for lake in LAKES:
                seconds, results[lake] = timed(lambda: con.execute(sql_for(lake)).fetchall())
                best[lake] = min(best[lake], seconds)
        for lake in LAKES:
            figures[f"{step}.{lake}_s"] = round(best[lake], 4)
        if DUCKLAKE:
            if check and results["sk"] != results["dl"]:
                raise SystemExit(f"{step}: results differ: skade {results['sk']} vs ducklake {results['dl']}")
            figures[f"{step}.ratio"] = round(figures[f"{step}.dl_s"] / figures[f"{step}.sk_s"], 2)
        show_ms(step, step)

    for lake in LAKES:
        con.execute(f"CREATE TABLE {lake}.bulk (id BIGINT, customer VARCHAR, amount DOUBLE)")
        con.execute(f"CREATE TABLE {lake}.orders (id BIGINT, customer VARCHAR, amount DOUBLE)")

    gen = "SELECT i, 'c' || (i % 997), (i % 1000) * 1.5 FROM range({lo}, {hi}) r(i)"
    both("insert 1M rows (1 stmt)", lambda l: f"INSERT INTO {l}.bulk " + gen.format(lo=0, hi=APPENDS * ROWS))

    def appends(lake):
        for k in range(APPENDS):
            con.execute(f"INSERT INTO {lake}.orders " + gen.format(lo=k * ROWS, hi=(k + 1) * ROWS))
        return con.execute(f"SELECT count(*) FROM {lake}.orders").fetchall()

    for lake in LAKES:
        seconds, _ = timed(lambda: appends(lake))
        figures[f"append 32x.{lake}_s"] = round(seconds, 4)
    show_ms(f"append 32 x {ROWS} rows", "append 32x")

    # The peer workload's mutations (same seed, same ranges): 8 DELETEs and 8 UPDATEs of 1,000
    # consecutive ids, each its own commit; the scans below then read through their deletes.
    def mutate(lake):
        rng = random.Random(7)
        for _ in range(MUTATIONS):
            lo = rng.randrange(0, APPENDS * ROWS - 1000)
            con.execute(f"DELETE FROM {lake}.orders WHERE id >= {lo} AND id < {lo + 1000}")
        for _ in range(MUTATIONS):
            lo = rng.randrange(0, APPENDS * ROWS - 1000)
            con.execute(f"UPDATE {lake}.orders SET amount = amount + 1 WHERE id >= {lo} AND id < {lo + 1000}")
        return con.execute(f"SELECT count(*), sum(amount) FROM {lake}.orders").fetchall()

    mutated = {}
    for lake in LAKES:
        seconds, mutated[lake] = timed(lambda: mutate(lake))
        figures[f"mutate.{lake}_s"] = round(seconds, 4)
    if DUCKLAKE and mutated["sk"] != mutated["dl"]:
        raise SystemExit(f"mutate: results differ: {mutated}")
    show_ms("8 deletes + 8 updates x1000", "mutate")

    # The peer's changelog: every change from the 16th append on (DuckLake's start snapshot is
    # inclusive, skade's from_snapshot exclusive), all columns read; rows/s, best of 3. skade's
    # window is found from its own snapshots, DuckLake's from DuckLake's.
    fifteenth = con.execute("SELECT snapshot_id FROM skade_snapshots('sk.orders') ORDER BY sequence_number "
                            f"LIMIT 1 OFFSET {APPENDS // 2 - 2}").fetchone()[0]
    changes = {"sk": f"skade_changelog('sk.orders', {fifteenth})"}
    if DUCKLAKE:
        last = con.execute("SELECT max(snapshot_id) FROM dl.snapshots()").fetchone()[0]
        sixteenth = last - 2 * MUTATIONS - APPENDS // 2
        changes["dl"] = f"ducklake_table_changes('dl', 'main', 'orders', {sixteenth}, {last})"
    both("changelog 2nd half", lambda l: "SELECT count(*), sum(id), sum(amount), sum(length(customer)) "
         f"FROM {changes[l]}", repeat=7)
    rows = con.execute(f"SELECT count(*) FROM {changes['sk']}").fetchone()[0]
    if DUCKLAKE:
        # Row for row, the plain feed is DuckLake's (which pairs an update's rows by row id even
        # without a key: its pre- and post-images are skade's DELETE and INSERT on such a table).
        kind = "CASE change_type WHEN 'update_preimage' THEN 'DELETE' WHEN 'update_postimage' THEN 'INSERT' ELSE upper(change_type) END"
        same_rows("plain changelog vs DuckLake's",
                  f"SELECT id, customer, amount, _change_type FROM {changes['sk']}",
                  f"SELECT id, customer, amount, {kind} FROM {changes['dl']}")
    for lake in LAKES:
        figures[f"changelog.{lake}_rows_per_s"] = round(rows / figures[f"changelog 2nd half.{lake}_s"])
    show("  changelog rows/s", f"{figures['changelog.sk_rows_per_s']:>12,}",
         lambda: f"ducklake {figures['changelog.dl_rows_per_s']:>12,}", f"({rows:,} rows)")
    # Collapsed (net effect of the window; DuckLake has no equivalent, so against its plain feed).
    collapsed = f"skade_changelog('sk.orders', {fifteenth}, collapse := true)"
    seconds, _ = timed(lambda: con.execute(f"SELECT count(*), sum(id) FROM {collapsed}").fetchall(), 7)
    figures["changelog collapsed.sk_s"] = round(seconds, 4)
    show("changelog 2nd half, netted", f"{seconds * 1000:10.1f} ms",
         lambda: f"(DuckLake's plain feed x{figures['changelog 2nd half.dl_s'] / seconds:.2f} slower)")
    # The netted window must be exactly the multiset difference of the two snapshots' full scans,
    # row for row.
    at = f"(SELECT id, customer, amount FROM sk.orders AT (VERSION => {fifteenth}))"
    now = "(SELECT id, customer, amount FROM sk.orders)"
    same_rows("netted changelog vs the diff of full scans",
              f"SELECT id, customer, amount, _change_type FROM {collapsed}",
              f"SELECT *, 'DELETE' FROM ({at} EXCEPT ALL {now}) UNION ALL SELECT *, 'INSERT' FROM ({now} EXCEPT ALL {at})")

    both("full scan sum+count", lambda l: f"SELECT sum(amount), count(*) FROM {l}.orders", repeat=5)
    both("scan, 1 column filtered", lambda l: f"SELECT count(*) FROM {l}.orders WHERE customer = 'c5'", repeat=5)
    both("scan, pruned by id range", lambda l: f"SELECT sum(amount) FROM {l}.orders WHERE id BETWEEN 500000 AND 510000",
         repeat=5)

    # Single DELETE and UPDATE statements over the 1M-row table: 1,000 and 100,000 rows each.
    for n in (1000, 100000):
        both(f"delete {n} rows", lambda l: f"DELETE FROM {l}.bulk WHERE id >= {n} AND id < {2 * n}")
        both(f"update {n} rows", lambda l: f"UPDATE {l}.bulk SET amount = -amount WHERE id >= {3 * n} AND id < {4 * n}")
    both("scan after those", lambda l: f"SELECT sum(amount), count(*) FROM {l}.bulk", repeat=5)

    # skade only (DuckLake has no primary keys): the same on a keyed table, where deletes are
    # equality deletes of the key and every UPDATE checks the new keys.
    con.execute("CREATE TABLE sk.keyed (id BIGINT PRIMARY KEY, customer VARCHAR, amount DOUBLE)")
    con.execute("INSERT INTO sk.keyed " + gen.format(lo=0, hi=APPENDS * ROWS))
    for n in (1000, 100000):
        for verb, sql in (("delete", f"DELETE FROM sk.keyed WHERE id >= {n} AND id < {2 * n}"),
                          ("update", f"UPDATE sk.keyed SET amount = -amount WHERE id >= {3 * n} AND id < {4 * n}")):
            seconds, _ = timed(lambda: con.execute(sql).fetchall())
            figures[f"keyed {verb} {n}.sk_s"] = round(seconds, 4)
            print(f"{'keyed ' + verb + ' ' + str(n) + ' rows':<28} skade {seconds * 1000:10.1f} ms", flush=True)
    seconds, _ = timed(lambda: con.execute("SELECT sum(amount), count(*) FROM sk.keyed").fetchall(), 5)
    figures["keyed scan.sk_s"] = round(seconds, 4)
    print(f"{'keyed scan after those':<28} skade {seconds * 1000:10.1f} ms", flush=True)
    # The keyed table's changelog since its load (101k deletes, 101k update pairs), plain and
    # netted per key; both checked against the two snapshots' full scans.
    loaded = con.execute("SELECT snapshot_id FROM skade_snapshots('sk.keyed') ORDER BY sequence_number LIMIT 1").fetchone()[0]
    query = "SELECT _change_type, count(*), sum(id), sum(amount) FROM skade_changelog('sk.keyed', {}, collapse := {}) GROUP BY ALL ORDER BY ALL"
    for collapse in ("false", "true"):
        seconds, result = timed(lambda: con.execute(query.format(loaded, collapse)).fetchall(), 5)
        figures[f"keyed changelog collapse={collapse}.sk_s"] = round(seconds, 4)
        rows = sum(r[1] for r in result)
        print(f"{'keyed changelog' + (', netted' if collapse == 'true' else ''):<28} skade {seconds * 1000:10.1f} ms   "
              f"({rows:,} rows, {rows / seconds:,.0f} rows/s)", flush=True)
    before = f"(SELECT * FROM sk.keyed AT (VERSION => {loaded}))"
    reference = con.execute(f"""
        WITH b AS {before}, a AS (SELECT * FROM sk.keyed)
        SELECT 'DELETE', count(*), sum(b.id), sum(b.amount) FROM b ANTI JOIN a USING (id)
        UNION ALL SELECT 'UPDATE_AFTER', count(*), sum(a.id), sum(a.amount) FROM a JOIN b USING (id) WHERE a.amount::VARCHAR IS DISTINCT FROM b.amount::VARCHAR
        UNION ALL SELECT 'UPDATE_BEFORE', count(*), sum(b.id), sum(b.amount) FROM a JOIN b USING (id) WHERE a.amount::VARCHAR IS DISTINCT FROM b.amount::VARCHAR
        ORDER BY 1""").fetchall()
    if result != reference:
        raise SystemExit(f"keyed netted changelog differs from the snapshots' difference: {result} vs {reference}")

    def one_row_commits(lake):
        for i in range(200):
            con.execute(f"INSERT INTO {lake}.orders VALUES ({10 ** 9 + i}, 'x', 1.0)")
    for lake in LAKES:
        seconds, _ = timed(lambda: one_row_commits(lake))
        figures[f"commits.{lake}_per_s"] = round(200 / seconds, 1)
    show("200 one-row commits", f"{figures['commits.sk_per_s']:8.1f} /s  ",
         lambda: f"ducklake {figures['commits.dl_per_s']:8.1f} /s     "
                 f"skade/ducklake x{figures['commits.sk_per_s'] / figures['commits.dl_per_s']:.2f}")

    print(json.dumps(figures))
    con.close()
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
