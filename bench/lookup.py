#!/usr/bin/env python3
"""Point lookups: skade vs DuckLake on the peer workload (../shared/bench), in one process.

32 clustered appends of 31,250 rows, 8 range deletes and 8 range updates, then 200 probes of
random ids (about 10% absent), one SQL query per probe:
  - skade_lookup('sk.orders', k)
  - SELECT * FROM sk.orders WHERE id = k   (skade's scan takes the lookup path)
  - SELECT * FROM dl.orders WHERE id = k   (DuckLake)
  - SELECT * FROM range(1)                 (DuckDB's own per-query floor, no data)
  - SELECT k, 'c7', 1.5 FROM range(1)      (the floor with a row of the lookup's three columns)
  - prepared: execute(sql, [k]) with WHERE id = ?, and SQL EXECUTE of a PREPAREd WHERE id = $1,
    on skade and on a native DuckDB table with a primary key holding the same rows
  - a kept plan: EXECUTE of a PREPAREd statement without parameters (one per key), which DuckDB
    runs again without binding while the catalog version is unchanged; the same for the native
    table and for range(1)
Each variant runs three passes over the keys; its best pass is its figure (the machine is noisy). Prints lookups/s, p50/p99
latency, the ratios, and skade's bytes, reads, file opens and rows decoded per probe
(skade_lookup_stats()). Every probe's rows are checked against a full-scan reference, and the
DuckLake rows against skade's. Ceilings fail the run (exit 1) when pruning or a cache breaks:
they bound what a probe reads, never how long it takes.

Usage: python bench/lookup.py [rows_per_append]   (make bench)
"""
import os
import random
import shutil
import statistics
import sys
import tempfile
import time

import duckdb

from common import EXTENSION, ducklake_extension

ROWS = int(sys.argv[1]) if len(sys.argv) > 1 else 31250
APPENDS, DELS, UPDS, PROBES = 32, 8, 8, 200

# RED-when-broken ceilings per warm probe (the goals are half of the first two).
MAX_BYTES_PER_PROBE = 48 << 10
MAX_READS_PER_PROBE = 4
MAX_OPENS_PER_PROBE = 0.25
MAX_ROWS_DECODED_PER_PROBE = 2 * 4096  # a key page holds at most 4,096 rows (plus a write batch)
GOAL_BYTES_PER_PROBE = 24 << 10
GOAL_READS_PER_PROBE = 2


def stats(con):
    row = con.execute("SELECT * FROM skade_lookup_stats()").fetchone()
    names = [d[0] for d in con.description]
    return dict(zip(names, row))


def summary(name, times):
    total = sum(times)
    p50 = statistics.median(times) * 1e6
    p99 = sorted(times)[int(len(times) * 0.99) - 1] * 1e6
    print(f"{name:<40} {len(times) / total:9.0f} /s   p50 {p50:7.0f} us   p99 {p99:7.0f} us", flush=True)
    return len(times) / total


def main():
    root = tempfile.mkdtemp(prefix="skade-lookup-")
    con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
    con.execute(f"LOAD '{EXTENSION}'")
    con.execute(f"LOAD '{ducklake_extension()}'")
    con.execute(f"ATTACH '{root}/lake.skade' AS sk (TYPE skade)")
    con.execute(f"ATTACH 'ducklake:{root}/meta.ducklake' AS dl (DATA_PATH '{root}/dl/', DATA_INLINING_ROW_LIMIT 0)")
    con.execute("CREATE TABLE sk.orders (id BIGINT PRIMARY KEY, customer VARCHAR, amount DOUBLE)")
    con.execute("CREATE TABLE dl.orders (id BIGINT, customer VARCHAR, amount DOUBLE)")
    con.execute(f"ATTACH '{root}/native.duckdb' AS nat")
    con.execute("CREATE TABLE nat.orders (id BIGINT PRIMARY KEY, customer VARCHAR, amount DOUBLE)")
    for lake in ("sk", "dl"):
        for i in range(APPENDS):
            con.execute(f"""INSERT INTO {lake}.orders SELECT i, 'c' || (i % 997), (i % 1000) * 1.5
                            FROM range({i * ROWS}, {(i + 1) * ROWS}) r(i)""")
        rng = random.Random(7)
        for _ in range(DELS):
            lo = rng.randrange(0, APPENDS * ROWS - 1000)
            con.execute(f"DELETE FROM {lake}.orders WHERE id >= {lo} AND id < {lo + 1000}")
        for _ in range(UPDS):
            lo = rng.randrange(0, APPENDS * ROWS - 1000)
            con.execute(f"UPDATE {lake}.orders SET amount = amount + 1 WHERE id >= {lo} AND id < {lo + 1000}")
    keys = [rng.randrange(0, int(APPENDS * ROWS * 1.1)) for _ in range(PROBES)]
    con.execute("INSERT INTO nat.orders SELECT * FROM sk.orders")
    for lake in ("sk", "nat"):
        con.execute(f"PREPARE {lake}_p AS SELECT * FROM {lake}.orders WHERE id = $1")
        for k in set(keys):
            con.execute(f"PREPARE {lake}_kept_{k} AS SELECT * FROM {lake}.orders WHERE id = {k}")
    con.execute("PREPARE floor_kept AS SELECT * FROM range(1)")

    reference = {row[0]: row for row in con.execute("SELECT * FROM sk.orders").fetchall()}
    dl_rows = con.execute("SELECT count(*), sum(id), sum(amount) FROM dl.orders").fetchone()
    sk_rows = con.execute("SELECT count(*), sum(id), sum(amount) FROM sk.orders").fetchone()
    if dl_rows != sk_rows:
        raise SystemExit(f"tables differ: skade {sk_rows} vs ducklake {dl_rows}")
    expected = [[reference[k]] if k in reference else [] for k in keys]
    print(f"{len(reference):,} rows, {PROBES} probes, {sum(1 for e in expected if not e)} absent", flush=True)

    queries = {
        "skade_lookup": "SELECT * FROM skade_lookup('sk.orders', {k})",
        "skade WHERE id = k": "SELECT * FROM sk.orders WHERE id = {k}",
        "ducklake WHERE id = k": "SELECT * FROM dl.orders WHERE id = {k}",
        "floor: SELECT * FROM range(1)": "SELECT * FROM range(1)",
        "three constants from range(1)": "SELECT {k}::BIGINT AS id, 'c7' AS customer, 1.5::DOUBLE AS amount FROM range(1)",
        "skade WHERE id = ?": ("SELECT * FROM sk.orders WHERE id = ?", True),
        "native PK WHERE id = ?": ("SELECT * FROM nat.orders WHERE id = ?", True),
        "skade EXECUTE p(k)": "EXECUTE sk_p({k})",
        "native PK EXECUTE p(k)": "EXECUTE nat_p({k})",
        "skade EXECUTE of a kept plan": "EXECUTE sk_kept_{k}",
        "native PK EXECUTE of a kept plan": "EXECUTE nat_kept_{k}",
        "floor EXECUTE of a kept plan": "EXECUTE floor_kept",
    }
    # Each variant probes every key in turn, three times; a variant's best pass is its figure
    # (the first pass also fills the caches). Telemetry: skade_lookup_stats() around a pass.
    rates, telemetry = {}, {}
    for attempt in range(3):
        for name, sql in queries.items():
            before = stats(con)
            times, results = [], []
            for k in keys:
                t = time.perf_counter()
                if isinstance(sql, tuple):
                    results.append(con.execute(sql[0], [k]).fetchall())
                else:
                    results.append(con.execute(sql.format(k=k)).fetchall())
                times.append(time.perf_counter() - t)
            after = stats(con)
            for k, got, want in zip(keys, results, expected):
                if (name.startswith("skade") or name.startswith("native")) and got != want:
                    raise SystemExit(f"{name}: key {k}: got {got}, expected {want}")
                if name.startswith("ducklake") and sorted(got) != want:
                    raise SystemExit(f"{name}: key {k}: ducklake {got} vs skade {want}")
            rate = len(times) / sum(times)
            if attempt == 0:
                summary(f"{name} (first pass)", times)
            if rate > rates.get(name, (0,))[0]:
                rates[name] = (rate, times)
            if name in ("skade_lookup", "skade WHERE id = k") and attempt > 0:
                telemetry[name] = {c: (after[c] - before[c]) / PROBES for c in after}
    print("-- best of 3 passes")
    best = rates
    rates = {name: summary(name, times) for name, (_, times) in best.items()}

    floor = rates["floor: SELECT * FROM range(1)"]
    print("-- warm ratios")
    for name in ("skade_lookup", "skade WHERE id = k"):
        print(f"{name:<34} x{rates[name] / rates['ducklake WHERE id = k']:6.1f} DuckLake (goal 20)   "
              f"{100 * rates[name] / floor:5.1f}% of the floor (goal 70%)")
    for name in ("skade WHERE id = ?", "skade EXECUTE p(k)", "skade EXECUTE of a kept plan"):
        native = "native PK" + name[len("skade"):]
        print(f"{name:<34} {100 * rates[name] / floor:5.1f}% of the floor (goal 75%), "
              f"x{rates[name] / rates[native]:5.2f} a native DuckDB table with a primary key")
    print(f"{'floor EXECUTE of a kept plan':<34} {100 * rates['floor EXECUTE of a kept plan'] / floor:5.1f}% of the floor")
    # The two goals agree only where the floor is about 29x DuckLake (where they were set); on a
    # machine where it is less, 20x DuckLake asks for more than DuckDB's own per-query floor.
    lookup_times = best["skade_lookup"][1]
    for label, found in (("present keys", True), ("absent keys", False)):
        times = [t for t, e in zip(lookup_times, expected) if bool(e) == found]
        print(f"{'skade_lookup, ' + label:<34} {len(times) / sum(times):8.0f} /s   "
              f"{100 * len(times) / sum(times) / floor:5.1f}% of the floor")
    # What DuckDB alone takes to bind, plan and hand back a row of three columns rather than one:
    # the part of a lookup's cost no extension can remove.
    print(f"{'three constants from range(1)':<34} {100 * rates['three constants from range(1)'] / floor:14.1f}% "
          "of the floor (no table: DuckDB's own cost of a three-column row)")
    twenty = 20 * rates["ducklake WHERE id = k"]
    print(f"20x DuckLake here: {twenty:,.0f} /s = {100 * twenty / floor:.0f}% of the floor"
          + (" (above the floor: no query reaches it on this machine)" if twenty > floor else ""))
    t = telemetry["skade_lookup"]
    print(f"skade_lookup per warm probe: {t['bytes_read']:,.0f} bytes (goal <= {GOAL_BYTES_PER_PROBE:,}), "
          f"{t['reads']:.2f} reads (goal <= {GOAL_READS_PER_PROBE}), {t['file_opens']:.3f} file opens, "
          f"{t['rows_decoded']:.0f} rows decoded")

    before = stats(con)
    key_list = "[" + ",".join(map(str, keys)) + "]"
    seconds = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        batched = con.execute(f"SELECT * FROM skade_lookup('sk.orders', {key_list})").fetchall()
        seconds = min(seconds, time.perf_counter() - t0)
    after = stats(con)
    want = [e[0] for e in expected if e]
    if batched != want:
        raise SystemExit(f"batched lookup: {len(batched)} rows differ from the {len(want)} expected")
    print(f"batched: {PROBES} keys in one skade_lookup call: {seconds * 1000:.2f} ms "
          f"({PROBES / seconds:,.0f} keys/s), {(after['reads'] - before['reads']) // 3} reads, "
          f"{(after['bytes_read'] - before['bytes_read']) // 3:,} bytes per call")

    failures = []
    for name, t in telemetry.items():
        if t["bytes_read"] > MAX_BYTES_PER_PROBE:
            failures.append(f"{name}: {t['bytes_read']:.0f} bytes per probe > {MAX_BYTES_PER_PROBE}")
        if t["reads"] > MAX_READS_PER_PROBE:
            failures.append(f"{name}: {t['reads']:.2f} reads per probe > {MAX_READS_PER_PROBE}")
        if t["file_opens"] > MAX_OPENS_PER_PROBE:
            failures.append(f"{name}: {t['file_opens']:.3f} file opens per probe > {MAX_OPENS_PER_PROBE}")
        if t["rows_decoded"] > MAX_ROWS_DECODED_PER_PROBE:
            failures.append(f"{name}: {t['rows_decoded']:.0f} rows decoded per probe > {MAX_ROWS_DECODED_PER_PROBE}")
    shutil.rmtree(root, ignore_errors=True)
    if failures:
        raise SystemExit("ceilings broken (a pruning step or a cache no longer works):\n  " + "\n  ".join(failures))


if __name__ == "__main__":
    main()
