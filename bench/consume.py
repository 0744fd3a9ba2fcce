#!/usr/bin/env python3
"""Change streams: how fast a named consumer reads, and how soon it sees a commit.

1. Throughput on the peer workload's second half (../shared/bench: 32 appends of 31,250 rows, 8
   range deletes, 8 range updates): a consumer placed after the 15th append reads every change
   from there with skade_peek and skade_consume (all columns, summed), against skade_changelog
   over the same window and DuckLake's ducklake_table_changes over the same rows, in one run:
   median and best of 15 rounds, each round running every reader once (in a shuffled order). A
   consuming read is a peek plus its cursor's durable commit (about a millisecond here), a fixed
   cost that best-of figures magnify: the median is what a loop of reads sees. The four must
   give the same count and sums.
2. Commit-to-consumer latency in one process: a producer connection commits one-row inserts (a
   pause of 1-3 ms after each, so the consumer is waiting when the next lands); a consumer
   connection loops on skade_consume(wait := ...). Latency = when the consumer has the row minus
   when the producer's INSERT returned (its commit acknowledged): p50, p99, max.

Timings are printed, never asserted. Usage: python bench/consume.py [rows_per_append] [commits]
"""
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time

import duckdb

from common import EXTENSION
from hosts import peer_extension  # tools/, on the path once common is imported

DUCKLAKE = peer_extension("duckdb_extension_ducklake", "ducklake")
ROWS = int(sys.argv[1]) if len(sys.argv) > 1 else 31250
COMMITS = int(sys.argv[2]) if len(sys.argv) > 2 else 500
APPENDS, MUTATIONS = 32, 8
SUMS = "count(*), sum(id), sum(amount), sum(length(customer))"


def best_of(n, fn):
    best, result = float("inf"), None
    for _ in range(n):
        t = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t)
    return best, result


def peer_workload(con, lake):
    """The peer's appends and mutations (same seed, same ranges)."""
    con.execute(f"CREATE TABLE {lake}.orders (id BIGINT, customer VARCHAR, amount DOUBLE)")
    for k in range(APPENDS):
        con.execute(f"INSERT INTO {lake}.orders SELECT i, 'c' || (i % 997), (i % 1000) * 1.5 "
                    f"FROM range({k * ROWS}, {(k + 1) * ROWS}) r(i)")
    rng = random.Random(7)
    for _ in range(MUTATIONS):
        lo = rng.randrange(0, APPENDS * ROWS - 1000)
        con.execute(f"DELETE FROM {lake}.orders WHERE id >= {lo} AND id < {lo + 1000}")
    for _ in range(MUTATIONS):
        lo = rng.randrange(0, APPENDS * ROWS - 1000)
        con.execute(f"UPDATE {lake}.orders SET amount = amount + 1 WHERE id >= {lo} AND id < {lo + 1000}")


def throughput(con, root):
    peer_workload(con, "sk")
    fifteenth = con.execute("SELECT snapshot_id FROM skade_snapshots('sk.orders') ORDER BY sequence_number "
                            f"LIMIT 1 OFFSET {APPENDS // 2 - 2}").fetchone()[0]
    con.execute(f"CALL skade_create_consumer('sk', 'half', 'orders', at_snapshot := {fifteenth})")
    queries = {
        "skade_changelog": f"SELECT {SUMS} FROM skade_changelog('sk.orders', {fifteenth})",
        "skade_peek": f"SELECT {SUMS} FROM skade_peek('sk', 'half')",
    }
    if DUCKLAKE:
        con.execute(f"LOAD '{DUCKLAKE}'")
        con.execute(f"ATTACH 'ducklake:{root}/meta.ducklake' AS dl (DATA_PATH '{root}/dl/', DATA_INLINING_ROW_LIMIT 0)")
        peer_workload(con, "dl")
        last = con.execute("SELECT max(snapshot_id) FROM dl.snapshots()").fetchone()[0]
        sixteenth = last - 2 * MUTATIONS - APPENDS // 2
        queries["ducklake_table_changes"] = f"SELECT {SUMS} FROM ducklake_table_changes('dl', 'main', 'orders', {sixteenth}, {last})"
    queries["skade_consume"] = f"SELECT {SUMS} FROM skade_consume('sk', 'half')"
    figures = {}
    # Each round runs every reader once, in an order shuffled each round: a slow phase of the
    # machine, or what the reader before leaves in the caches (a turned order would put the same
    # reader after DuckLake's every round), hits all alike.
    times = {name: [] for name in queries}
    results = {}
    names = list(queries)
    rng = random.Random(11)
    for round in range(15):
        rng.shuffle(names)
        for name in names:
            # The consuming read moves the cursor: put it back (untimed) before a consumer's read.
            con.execute(f"CALL skade_reset_consumer('sk', 'half', at_snapshot := {fifteenth})")
            seconds, results[name] = best_of(1, lambda: con.execute(queries[name]).fetchall())
            times[name].append(seconds)
    reference = results["skade_changelog"]
    for name, rows in results.items():
        # DuckLake's sums match too: its pre/post-images carry the same rows as skade's changes.
        if rows[0][0] != reference[0][0] or (name != "ducklake_table_changes" and rows != reference):
            raise SystemExit(f"{name} gave {rows}, skade_changelog {reference}")
    n = reference[0][0]
    median = {name: statistics.median(t) for name, t in times.items()}
    best = {name: min(t) for name, t in times.items()}
    for name in median:
        figures[name] = median[name]
        ratio = median["skade_changelog"] / median[name]
        print(f"  {name:<24} {median[name] * 1000:8.1f} ms (best {best[name] * 1000:5.1f})  "
              f"{n / median[name]:>14,.0f} rows/s   skade_changelog/this speed x{ratio:.2f} "
              f"(best x{best['skade_changelog'] / best[name]:.2f})", flush=True)
    if not DUCKLAKE:
        print(f"  (no DuckLake for DuckDB {duckdb.__version__})")
    return figures, n


def latency(db):
    producer, consumer = db.cursor(), db.cursor()
    producer.execute("CREATE TABLE sk.ticks (i BIGINT)")
    consumer.execute("CALL skade_create_consumer('sk', 'tick', 'ticks')")
    acked = [0.0] * COMMITS
    seen = [0.0] * COMMITS
    failure = []

    def produce():
        try:
            rng = random.Random(3)
            for i in range(COMMITS):
                producer.execute(f"INSERT INTO sk.ticks VALUES ({i})")
                acked[i] = time.perf_counter()
                time.sleep(rng.uniform(0.001, 0.003))
        except Exception as e:  # reported by the main thread
            failure.append(e)

    thread = threading.Thread(target=produce)
    got = 0
    thread.start()
    while got < COMMITS and not failure:
        rows = consumer.execute("SELECT i FROM skade_consume('sk', 'tick', wait := INTERVAL '2 seconds')").fetchall()
        now = time.perf_counter()
        for (i,) in rows:
            seen[i] = now
        got += len(rows)
    thread.join()
    if failure:
        raise failure[0]
    if got != COMMITS:
        raise SystemExit(f"the consumer got {got} rows of {COMMITS}")
    # Latency from the acknowledgement; a consumer can see a commit before the producer's
    # statement has returned to Python (the broadcast wakes it first): those count as 0.
    lat = sorted(max(0.0, s - a) * 1000 for s, a in zip(seen, acked))
    p = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))]  # noqa: E731
    print(f"  {COMMITS} one-row commits: p50 {p(0.50):.3f} ms  p99 {p(0.99):.3f} ms  max {lat[-1]:.3f} ms  "
          f"mean {statistics.mean(lat):.3f} ms", flush=True)
    return {"p50_ms": p(0.5), "p99_ms": p(0.99), "max_ms": lat[-1]}


def main():
    print(f"DuckDB {duckdb.__version__}: skade consumers" + (" vs DuckLake" if DUCKLAKE else ""), flush=True)
    root = tempfile.mkdtemp(prefix="skade-consume-")
    db = duckdb.connect(config={"allow_unsigned_extensions": "true"})
    db.execute(f"LOAD '{EXTENSION}'")
    db.execute(f"ATTACH '{root}/lake.skade' AS sk (TYPE skade)")
    try:
        print(f"consume the peer workload's 2nd half ({ROWS} rows per append), median (best) of 15:", flush=True)
        _, rows = throughput(db, root)
        print(f"  ({rows:,} rows)")
        print("commit-to-consumer latency, one process:", flush=True)
        latency(db)
    finally:
        db.close()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
