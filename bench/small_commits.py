#!/usr/bin/env python3
"""1,000 small commits to one table: does a commit, or a scan, get slower as they pile up?

Each commit inserts one row; every 10th also deletes one. skade merges small manifests on commit
(at most 16 small ones per content and tier are carried forward), so a snapshot's manifest count stays
bounded. metadata.json still lists every snapshot, so a second skade table runs the same work with
`skade_expire_snapshots(retain_last := 100)` after every 100 commits. The same work runs on DuckLake
in the same run. Every 100 commits it prints the mean commit latency of the last 100, a full
scan's time, and skade's manifest count and metadata.json size; at the end, skade_compact and a
scan after it. Prints figures; asserts nothing
about speed.

Usage: python bench/small_commits.py [commits]   (make bench)
"""
import json
import os
import shutil
import sys
import tempfile
import time

import duckdb

from common import EXTENSION, ducklake_extension, load_iceberg

COMMITS = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
WINDOW = 100


def main():
    root = tempfile.mkdtemp(prefix="skade-small-commits-")
    con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
    con.execute(f"LOAD '{EXTENSION}'")
    con.execute(f"LOAD '{ducklake_extension()}'")
    load_iceberg(con)
    con.execute(f"ATTACH '{root}/lake.skade' AS sk (TYPE skade)")
    con.execute(f"ATTACH 'ducklake:{root}/meta.ducklake' AS dl (DATA_PATH '{root}/dl/', DATA_INLINING_ROW_LIMIT 0)")
    con.execute(f"ATTACH '{root}/expiring.skade' AS ske (TYPE skade)")
    lakes = ("sk", "ske", "dl")
    for lake in lakes:
        con.execute(f"CREATE TABLE {lake}.t AS SELECT i AS id, 'v' || i AS v FROM range(100000) r(i)")

    def scan(lake):
        best = float("inf")
        for _ in range(3):
            t = time.perf_counter()
            result = con.execute(f"SELECT count(*), sum(id) FROM {lake}.t").fetchall()
            best = min(best, time.perf_counter() - t)
        return best, result

    rows = []
    print(f"{'commits':>7} | {'skade ms/commit':>15} {'scan ms':>8} {'manifests':>9} {'metadata KB':>11} | "
          f"{'+expiry ms/commit':>17} {'metadata KB':>11} | {'ducklake ms/commit':>18} {'scan ms':>8}")
    for window in range(COMMITS // WINDOW):
        row = {"commits": (window + 1) * WINDOW}
        for lake in lakes:
            t = time.perf_counter()
            for i in range(window * WINDOW, (window + 1) * WINDOW):
                con.execute(f"INSERT INTO {lake}.t VALUES ({10 ** 9 + i}, 'new')")
                if i % 10 == 9:
                    con.execute(f"DELETE FROM {lake}.t WHERE id = {i * 97}")
            row[f"{lake}_ms_per_commit"] = round((time.perf_counter() - t) * 1000 / (WINDOW * 1.1), 3)
            row[f"{lake}_scan_ms"], row[f"{lake}_result"] = scan(lake)
            row[f"{lake}_scan_ms"] = round(row[f"{lake}_scan_ms"] * 1000, 2)
        con.execute("SELECT * FROM skade_expire_snapshots('ske.t', retain_last := 100)").fetchall()
        if not row["sk_result"] == row["ske_result"] == row["dl_result"]:
            raise SystemExit(f"results differ after {row['commits']} commits: {row['sk_result']} vs {row['dl_result']}")
        for lake in ("sk", "ske"):
            meta = con.execute(f"SELECT metadata_location FROM skade_tables('{lake}') WHERE table_name = 't'").fetchone()[0]
            row[f"{lake}_manifests"] = con.execute(
                f"SELECT count(DISTINCT manifest_path) FROM iceberg_metadata('{meta}')").fetchone()[0]
            row[f"{lake}_metadata_kb"] = round(os.path.getsize(meta.removeprefix("file://")) / 1024, 1)
        result = row["sk_result"]
        for lake in lakes:
            del row[f"{lake}_result"]
        rows.append(row)
        print(f"{row['commits']:>7} | {row['sk_ms_per_commit']:>15.2f} {row['sk_scan_ms']:>8.2f} {row['sk_manifests']:>9} "
              f"{row['sk_metadata_kb']:>11.1f} | {row['ske_ms_per_commit']:>17.2f} {row['ske_metadata_kb']:>11.1f} | "
              f"{row['dl_ms_per_commit']:>18.2f} {row['dl_scan_ms']:>8.2f}", flush=True)
    first, last = rows[0], rows[-1]
    print(f"last/first window: skade commit x{last['sk_ms_per_commit'] / first['sk_ms_per_commit']:.2f}, "
          f"scan x{last['sk_scan_ms'] / first['sk_scan_ms']:.2f}; with expiry commit "
          f"x{last['ske_ms_per_commit'] / first['ske_ms_per_commit']:.2f}; ducklake commit "
          f"x{last['dl_ms_per_commit'] / first['dl_ms_per_commit']:.2f}, scan x{last['dl_scan_ms'] / first['dl_scan_ms']:.2f}")
    # Compaction: the table's live rows rewritten into one file, deletes applied.
    t = time.perf_counter()
    report = con.execute("SELECT * FROM skade_compact('sk.t')").fetchone()
    compact_ms = (time.perf_counter() - t) * 1000
    scan_ms, after = scan("sk")
    if after != result:
        raise SystemExit(f"compaction changed the rows: {after} vs {result}")
    print(f"skade_compact: {report[0]} data + {report[1]} delete files -> {report[2]} in {compact_ms:.0f} ms; "
          f"scan {rows[-1]['sk_scan_ms']:.2f} -> {scan_ms * 1000:.2f} ms (ducklake {rows[-1]['dl_scan_ms']:.2f} ms)")
    rows.append({"compact_ms": round(compact_ms, 1), "sk_scan_ms_compacted": round(scan_ms * 1000, 2)})
    print(json.dumps(rows))
    con.close()
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
