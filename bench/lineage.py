#!/usr/bin/env python3
"""What lineage costs a commit: one-row INSERTs into a keyed table with lineage off, with the
history table (LINEAGE true), with the history and a loopback OpenLineage collector that answers
at once, and with one that hangs (accepts, never answers). Lineage runs on background workers
from the durable commit log, so the goal is under 5% per commit and no change while the
collector hangs. DuckLake's one-row commit runs in the same rounds for reference. Each round
attaches a fresh lake per setup, in an order turned each round; the figure is the best round's
median. Rounds last several seconds (1000 commits by default), so the history worker's writes,
once a second, fall inside them. Also prints how soon the collector had every event. Prints
figures; asserts nothing.

Usage: python bench/lineage.py [commits per round] [rounds]   (make bench)
"""
import http.server
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import duckdb

from common import EXTENSION, ducklake_extension

ARGS = [a for a in sys.argv[1:] if not a.startswith("--")] if sys.argv[1:2] != ["--serve"] else []
COMMITS = int(ARGS[0]) if ARGS else 1000
ROUNDS = int(ARGS[1]) if len(ARGS) > 1 else 5


def serve(mode):
    """A collector process: answers 201 to each POST, or (hang) holds every request open."""
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            if mode == "hang":
                time.sleep(3600)
            self.send_response(201)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(server.server_port, flush=True)
    server.serve_forever()


class Collector:
    """A loopback collector in its own process (in this one, its threads would take the GIL from
    the commits measured)."""

    def __init__(self, hang=False):
        self.process = subprocess.Popen([sys.executable, __file__, "--serve", "hang" if hang else "up"],
                                        stdout=subprocess.PIPE, text=True)
        self.url = f"http://127.0.0.1:{int(self.process.stdout.readline())}"

    def close(self):
        self.process.kill()
        self.process.wait()


def run(con, root, setup, up, hanging):
    path = os.path.join(root, f"{setup}.skade")
    options = {
        "off": "",
        "history": ", LINEAGE true",
        "history+collector": f", OPENLINEAGE_URL '{up.url}'",
        "history+hanging collector": f", OPENLINEAGE_URL '{hanging.url}'",
    }
    if setup == "ducklake":
        con.execute(f"ATTACH 'ducklake:{path}.ducklake' AS lake (DATA_PATH '{path}.files/', DATA_INLINING_ROW_LIMIT 0)")
    else:
        con.execute(f"ATTACH '{path}' AS lake (TYPE skade{options[setup]})")
    con.execute("CREATE TABLE lake.t (id BIGINT PRIMARY KEY, v VARCHAR, x DOUBLE)" if setup != "ducklake"
                else "CREATE TABLE lake.t (id BIGINT, v VARCHAR, x DOUBLE)")
    latencies = []
    for i in range(COMMITS):
        t = time.perf_counter()
        con.execute(f"INSERT INTO lake.t VALUES ({i}, 'v{i}', {i}.5)")
        latencies.append(time.perf_counter() - t)
    caught_up = None
    if setup == "history+collector":
        t = time.perf_counter()
        con.execute("FROM skade_lineage_flush('lake', 60000)").fetchall()
        caught_up = (time.perf_counter() - t) * 1000
    con.execute("DETACH lake")
    shutil.rmtree(path + ".data", ignore_errors=True)
    return statistics.median(latencies) * 1000, statistics.mean(latencies) * 1000, caught_up


def main():
    root = tempfile.mkdtemp(prefix="skade-lineage-")
    con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
    con.execute(f"LOAD '{EXTENSION}'")
    con.execute(f"LOAD '{ducklake_extension()}'")
    up, hanging = Collector(), Collector(hang=True)
    setups = ["off", "history", "history+collector", "history+hanging collector", "ducklake"]
    best = {s: (float("inf"), float("inf"), None) for s in setups}
    try:
        for r in range(ROUNDS):
            order = setups[r % len(setups):] + setups[:r % len(setups)]
            for s in order:
                sub = os.path.join(root, f"r{r}")
                os.makedirs(sub, exist_ok=True)
                result = run(con, sub, s, up, hanging)
                if result[0] < best[s][0]:
                    best[s] = result
    finally:
        up.close()
        hanging.close()
        shutil.rmtree(root, ignore_errors=True)
    base = best["off"][0]
    print(f"one-row INSERT commits, {COMMITS} per round, best of {ROUNDS} rounds (DuckDB {duckdb.__version__})")
    print(f"{'setup':>26} | {'median ms':>9} {'mean ms':>8} | {'vs off':>7}")
    for s in setups:
        median, mean, _ = best[s]
        print(f"{s:>26} | {median:9.3f} {mean:8.3f} | x{median / base:6.3f}")
    print(f"the collector had every event {best['history+collector'][2]:.0f} ms after the last commit "
          f"(skade_lineage_flush)")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        serve(sys.argv[2])
    else:
        main()
