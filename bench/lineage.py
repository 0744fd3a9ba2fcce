#!/usr/bin/env python3
"""What lineage costs a commit: one-row INSERTs into a keyed table with lineage off, with the
history table (LINEAGE true), with the history and a loopback OpenLineage collector that answers
at once, and with one that hangs (accepts, never answers). Lineage runs on background workers
from the durable commit log, so the goal is under 5% per commit and no change while the
collector hangs. DuckLake's one-row commit runs in the same rounds for reference. Each round
attaches a fresh lake per setup, all at once, and commits to them in turn (in an order shuffled
each turn): a disk whose fsync latency drifts by 50% within seconds (this one) then slows every setup
alike, and each setup is compared with lineage off in the same round. The figure is the median
over the rounds of (setup's median latency / off's). What that hides: a worker's own disk writes
slow every lake's fsyncs, not only its own; they are one history snapshot per second (about six
fsyncs, against six per commit), see docs/design/lineage.md. Rounds last several seconds (1000
commits per setup by default), so the history worker's writes fall inside them. Also prints how
soon the collector had every event. Prints figures; asserts nothing.

Usage: python bench/lineage.py [commits per round] [rounds] [--dir D]   (make bench)
       --dir D: the lakes' folder (default: the system's temporary folder; /dev/shm shows the
       CPU cost alone, fsync being free there)
"""
import http.server
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import duckdb

from common import EXTENSION, ducklake_extension

def options(argv):
    """Positional counts and --dir D."""
    positional, folder, i = [], None, 0
    while i < len(argv):
        if argv[i] == "--dir":
            folder, i = argv[i + 1], i + 2
        else:
            positional, i = positional + [argv[i]], i + 1
    return positional, folder


ARGS, DIR = options(sys.argv[1:]) if sys.argv[1:2] != ["--serve"] else ([], None)
COMMITS = int(ARGS[0]) if ARGS else 1000
ROUNDS = int(ARGS[1]) if len(ARGS) > 1 else 7


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


SETUPS = ["off", "history", "history+collector", "history+hanging collector", "ducklake"]


def attach(con, root, setup, up, hanging):
    """Attaches a fresh lake for `setup` as `lake_<i>` and creates its table; returns the name."""
    name = f"lake_{SETUPS.index(setup)}"
    path = os.path.join(root, f"{name}.skade")
    options = {
        "off": "",
        "history": ", LINEAGE true",
        "history+collector": f", OPENLINEAGE_URL '{up.url}'",
        "history+hanging collector": f", OPENLINEAGE_URL '{hanging.url}'",
    }
    if setup == "ducklake":
        con.execute(f"ATTACH 'ducklake:{path}.ducklake' AS {name} (DATA_PATH '{path}.files/', "
                    f"DATA_INLINING_ROW_LIMIT 0)")
        con.execute(f"CREATE TABLE {name}.t (id BIGINT, v VARCHAR, x DOUBLE)")
    else:
        con.execute(f"ATTACH '{path}' AS {name} (TYPE skade{options[setup]})")
        con.execute(f"CREATE TABLE {name}.t (id BIGINT PRIMARY KEY, v VARCHAR, x DOUBLE)")
    return name


def round_(con, root, up, hanging, turn):
    """One round: every setup's lake attached at once, commits taken in turn, in an order shuffled
    for each turn (a commit right after DuckLake's is slower, whoever makes it), so all of them
    see the same disk. Returns per setup its median and mean latency (ms) and, for the working
    collector, how long skade_lineage_flush took after the last commit."""
    rng = random.Random(turn)
    order = list(SETUPS)
    names = {s: attach(con, root, s, up, hanging) for s in order}
    latencies = {s: [] for s in order}
    for i in range(COMMITS):
        rng.shuffle(order)
        for s in order:
            t = time.perf_counter()
            con.execute(f"INSERT INTO {names[s]}.t VALUES ({i}, 'v{i}', {i}.5)")
            latencies[s].append(time.perf_counter() - t)
    t = time.perf_counter()
    con.execute(f"FROM skade_lineage_flush('{names['history+collector']}', 60000)").fetchall()
    caught_up = (time.perf_counter() - t) * 1000
    for s in order:
        con.execute(f"DETACH {names[s]}")
    shutil.rmtree(root, ignore_errors=True)
    return {s: (statistics.median(v) * 1000, statistics.mean(v) * 1000) for s, v in latencies.items()}, caught_up


def main():
    root = tempfile.mkdtemp(prefix="skade-lineage-", dir=DIR)
    con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
    con.execute(f"LOAD '{EXTENSION}'")
    con.execute(f"LOAD '{ducklake_extension()}'")
    up, hanging = Collector(), Collector(hang=True)
    ratios = {s: [] for s in SETUPS}
    medians = {s: [] for s in SETUPS}
    caught = []
    try:
        for r in range(ROUNDS):
            sub = os.path.join(root, f"r{r}")
            os.makedirs(sub)
            figures, caught_up = round_(con, sub, up, hanging, r)
            caught.append(caught_up)
            for s in SETUPS:
                medians[s].append(figures[s][0])
                ratios[s].append(figures[s][0] / figures["off"][0])
    finally:
        up.close()
        hanging.close()
        shutil.rmtree(root, ignore_errors=True)
    print(f"one-row INSERT commits, {COMMITS} per setup and round, taken in turn across the setups, {ROUNDS} "
          f"rounds, lakes in {DIR or tempfile.gettempdir()} (DuckDB {duckdb.__version__})")
    print(f"{'setup':>26} | {'median ms (median of rounds)':>28} | {'vs off, same round: median (min-max)':>36}")
    for s in SETUPS:
        r = ratios[s]
        print(f"{s:>26} | {statistics.median(medians[s]):28.3f} | "
              f"x{statistics.median(r):.3f} (x{min(r):.3f}-x{max(r):.3f})")
    print(f"the collector had every event {statistics.median(caught):.0f} ms after the last commit "
          f"(skade_lineage_flush, median of rounds)")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        serve(sys.argv[2])
    else:
        main()
