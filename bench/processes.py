#!/usr/bin/env python3
"""Several processes on one lake (issues 23 and 47): one-row commits per second with 1, 2, 4 and 8
processes committing through skade's commit log (each into its own table, and all into one
table), next to the single-process plain catalog and to DuckLake over a SQLite catalog (its
multi-process setup) with the same processes, in one run;
then the time from a commit in one process to its visibility in another (p50, p99), by a query
that polls and by a wait (`skade_wait`, woken by the commit log's poll). Each process is a
DuckDB of its own (this script run with --worker). Prints figures; asserts nothing about speed.

Usage: python bench/processes.py [seconds_per_point] [latency_samples]   (make bench)
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import duckdb

from common import EXTENSION, ducklake_extension, site_extension

SECONDS = float(sys.argv[1]) if len(sys.argv) > 1 and not sys.argv[1].startswith("--") else 2.0
SAMPLES = int(sys.argv[2]) if len(sys.argv) > 2 and not sys.argv[1].startswith("--") else 200
PROCESSES = [1, 2, 4, 8]


def sqlite_extension():
    return site_extension("duckdb_extension_sqlite_scanner", "sqlite_scanner")


def connect():
    con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
    con.execute(f"LOAD '{EXTENSION}'")
    con.execute(f"LOAD '{ducklake_extension()}'")
    con.execute(f"LOAD '{sqlite_extension()}'")
    return con


def attach_sql(setup, root, poll_ms=None):
    if setup == "ducklake":
        return (f"ATTACH 'ducklake:sqlite:{root}/meta.sqlite' AS lake "
                f"(DATA_PATH '{root}/dl/', DATA_INLINING_ROW_LIMIT 0)")
    log = f", COMMIT_LOG '{root}/lake.log'" if setup == "log" else ""
    poll = f", COMMIT_LOG_POLL_MS {poll_ms}" if poll_ms else ""
    return f"ATTACH '{root}/lake.skade' AS lake (TYPE skade{log}{poll})"


def worker(args):
    """--worker <attach sql> <mode> ...: runs in its own process, prints one JSON line."""
    attach, mode = args[0], args[1]
    con = connect()
    for attempt in range(200):  # DuckLake's SQLite catalog can be busy while others attach
        try:
            con.execute(attach)
            break
        except duckdb.Error:
            if attempt == 199:
                raise
            time.sleep(0.05)
    print(json.dumps({"ready": True}), flush=True)
    go = float(sys.stdin.readline())
    while time.time() < go:
        time.sleep(0.001)
    if mode == "commit":  # one-row commits into its own table until the deadline
        table, seconds = args[2], float(args[3])
        n, failed, stop = 0, 0, time.monotonic() + seconds
        start = time.monotonic()
        while time.monotonic() < stop:
            try:
                con.execute(f"INSERT INTO lake.{table} VALUES ({n}, 'x')")
                n += 1
            except duckdb.Error:
                failed += 1
        print(json.dumps({"commits": n, "failed": failed, "seconds": time.monotonic() - start}), flush=True)
    elif mode == "write":  # commits when told to, answering each with its acknowledgment time
        for line in sys.stdin:
            i = int(line)
            con.execute(f"INSERT INTO lake.latency VALUES ({i})")
            print(json.dumps({"acked": time.monotonic()}), flush=True)
    elif mode in ("poll", "wait"):  # reports when each row becomes visible
        seen = 0
        while seen < int(args[2]):
            if mode == "poll":
                got = con.execute("SELECT max(id) FROM lake.latency").fetchone()[0]
            else:
                since = con.execute("SELECT max(commit_seq) FROM skade_commits_since('lake', 0)").fetchone()[0]
                con.execute(f"FROM skade_wait('lake', {since}, timeout := INTERVAL '5 seconds')").fetchall()
                got = con.execute("SELECT max(id) FROM lake.latency").fetchone()[0]
            if got is not None and got > seen:
                seen = got
                print(json.dumps({"seen": got, "at": time.monotonic()}), flush=True)
            elif mode == "poll":
                time.sleep(0.0005)  # (a reader that never pauses starves a writer of locks)
    con.close()


def spawn(*args):
    p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", *args],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert json.loads(p.stdout.readline()) == {"ready": True}
    return p


def prepare(setup, root):
    """DuckLake's SQLite catalog in WAL mode (readers then never block its writer: the setup a
    user would pick for several processes; in the default rollback mode 2-4 processes managed
    1-2 commits/s here, each waiting out the others' locks)."""
    if setup == "ducklake":
        import sqlite3
        db = sqlite3.connect(f"{root}/meta.sqlite")
        db.execute("PRAGMA journal_mode=WAL")
        db.close()


def commits_per_second(setup, n, shared=False):
    root = tempfile.mkdtemp(prefix=f"skade-procs-{setup}-")
    try:
        prepare(setup, root)
        con = connect()
        con.execute(attach_sql(setup, root))
        for w in range(n):
            con.execute(f"CREATE TABLE lake.t{w} (id BIGINT, v VARCHAR)")
        con.close()
        tables = [f"t{0 if shared else w}" for w in range(n)]
        procs = [spawn(attach_sql(setup, root), "commit", t, str(SECONDS)) for t in tables]
        go = time.time() + 0.2
        for p in procs:
            p.stdin.write(f"{go}\n")
            p.stdin.flush()
        results = [json.loads(p.stdout.readline()) for p in procs]
        for p in procs:
            p.stdin.close()
            p.wait()
        failed = sum(r["failed"] for r in results)
        return sum(r["commits"] for r in results) / max(r["seconds"] for r in results), failed
    finally:
        shutil.rmtree(root, ignore_errors=True)


def visibility(setup, how, poll_ms=None):
    """Milliseconds from a commit's acknowledgment in one process to its visibility in another."""
    root = tempfile.mkdtemp(prefix=f"skade-vis-{setup}-")
    try:
        prepare(setup, root)
        con = connect()
        con.execute(attach_sql(setup, root))
        con.execute("CREATE TABLE lake.latency (id BIGINT)")
        con.close()
        reader = spawn(attach_sql(setup, root, poll_ms), how, str(SAMPLES))
        writer = spawn(attach_sql(setup, root, poll_ms), "write")
        for p in (reader, writer):
            p.stdin.write(f"{time.time()}\n")
            p.stdin.flush()
        delays = []
        for i in range(1, SAMPLES + 1):
            writer.stdin.write(f"{i}\n")
            writer.stdin.flush()
            acked = json.loads(writer.stdout.readline())["acked"]
            while True:
                seen = json.loads(reader.stdout.readline())
                if seen["seen"] >= i:
                    break
            delays.append(max(0.0, seen["at"] - acked) * 1000)
            time.sleep(0.002)
        for p in (reader, writer):
            p.stdin.close()
            p.wait()
        delays.sort()
        return delays[len(delays) // 2], delays[int(len(delays) * 0.99) - 1]
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main():
    figures = {}
    print(f"one-row commits/s, {SECONDS:.1f} s per point:")
    print(f"  {'':<44}" + "".join(f"{n:>8} proc" for n in PROCESSES))
    plain, _ = commits_per_second("plain", 1)
    figures["skade plain catalog, one process"] = [round(plain, 1)]
    print(f"  {'skade, plain catalog (one process)':<44}{plain:>13.1f}", flush=True)
    for setup, name in (("log", "skade through its commit log"), ("ducklake", "DuckLake, SQLite catalog")):
        for shared in (False, True):
            row, failures = [], 0
            for n in PROCESSES:
                rate, failed = commits_per_second(setup, n, shared)
                row.append(rate)
                failures += failed
            label = f"{name}, {'one shared table' if shared else 'own tables'}"
            figures[label] = [round(r, 1) for r in row]
            note = f"   ({failures} failed commits, retried)" if failures else ""
            print(f"  {label:<44}" + "".join(f"{r:>13.1f}" for r in row) + note, flush=True)
    log1 = figures["skade through its commit log, own tables"][0]
    print(f"  the log costs a single process x{log1 / plain:.2f} of the plain catalog's rate")
    own, one = figures["skade through its commit log, own tables"], figures["skade through its commit log, one shared table"]
    print(f"  skade, one shared table: x{one[-1] / one[0]:.2f} of one process with {PROCESSES[-1]} processes, "
          f"x{one[-1] / own[-1]:.2f} of {PROCESSES[-1]} processes into their own tables")
    print(f"visibility in another process after a commit is acknowledged (ms, p50 / p99, {SAMPLES} commits):")
    for setup, how, poll, name in (
        ("log", "poll", None, "skade, a query polling"),
        ("log", "wait", None, "skade, skade_wait (poll 100 ms)"),
        ("log", "wait", 10, "skade, skade_wait (poll 10 ms)"),
        ("ducklake", "poll", None, "DuckLake, a query polling"),
    ):
        p50, p99 = visibility(setup, how, poll)
        figures[f"visibility|{name}"] = [round(p50, 2), round(p99, 2)]
        print(f"  {name:<44}{p50:>9.2f} / {p99:.2f}", flush=True)
    print(json.dumps(figures))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(sys.argv[2:])
    else:
        main()
