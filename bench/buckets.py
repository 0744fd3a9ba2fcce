#!/usr/bin/env python3
"""Lakes in an S3 bucket (issue 44; docs/design/object-storage.md, "Benchmark plan"), against the
local S3 server (tools/s3_server.py: moto on loopback, in memory), hosts being DuckDB processes
(this script run with --worker), each with a cache of its own (CACHE_PATH):

  commits     one-row commits/s (INSERT ... VALUES in autocommit) with 1, 2 and 4 hosts into their
              own tables and into one shared table of a bucket lake (`ATTACH 's3://...'`); beside
              them, DuckLake 1.5.5 with its data on the server: over a PostgreSQL catalog with the
              same 1, 2 and 4 hosts (a throwaway cluster of PostgreSQL's own binaries, found on PATH
              or in /usr/lib/postgresql/*/bin; skipped, with a line saying so, where there are none),
              and its DuckDB-file catalog (one process only: 1 host); and 1 host of skade with a
              local catalog and DATA_PATH in the bucket. The goal (issue 44): commits/s from 4 hosts
              into one shared table at least DuckLake's over PostgreSQL
  requests    from the server's request log, the requests per commit by class (PUT, GET, HEAD,
              LIST, ...) of each commit point above (the same runs), against the design's table;
              and the requests per second of a host in use that commits nothing (its log polls)
  visibility  the time from a commit's acknowledgment in one host to a polling query in another
              seeing its row, and to skade_wait there returning it (p50/p99), with
              COMMIT_LOG_POLL_MS 20 and the default (100)
  tpch        TPC-H (the tpch extension's dbgen and 22 queries) on a bucket lake (CTAS), on
              DuckLake with its data on the server (CTAS), and on read_parquet views over Parquet
              files COPY wrote to the server; first (cold, a fresh process) and best of --repeat
              (DuckDB's external file cache, on by default, serves DuckLake's and read_parquet's
              repeats from memory; --no-file-cache turns it off)
  lookups     a keyed table (id BIGINT PRIMARY KEY + 4 columns) in a bucket lake: requests, bytes
              and time per `SELECT * FROM lake.kv WHERE id = k` and per skade_lookup, cold (the
              first lookup of a fresh host) and warm, from the server's log and skade_lookup_stats()
  hosts       (not in the default) the multi-host rows of `commits` alone: skade's and DuckLake's
              over PostgreSQL, and the goal; no 1-host-only rows, no in-use requests

Every commit, visibility and lookup point runs with no added latency and again with --delay
seconds (15 ms) injected into every request (a fault of the server's), since moto on loopback
answers far faster than any network. Prints figures; asserts nothing about speed.

Usage: python bench/buckets.py [--seconds 2] [--samples 50] [--sf 0.1] [--rows 1000000]
           [--lookups 50] [--repeat 3] [--delay 0.015] [--scan-delay 0] [--no-file-cache]
           [--only commits,visibility,tpch,lookups | --only hosts]
       (`requests` comes with `commits`; SF1: --sf 1; the multi-host rows alone, quickly:
        --only hosts --seconds 1 --delay 0)
"""
import argparse
import glob
import json
import os
import pwd
import random
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from urllib.parse import parse_qs, unquote

import duckdb

from common import EXTENSION, ROOT, ducklake_extension, site_extension
from scans import TPCH_TABLES, normalized

sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
from conftest import s3_control, start_s3_server, stop_s3_server  # noqa: E402

BUCKET = "bench"
HOSTS = [1, 2, 4]
KEY_ID, SECRET = "skadebench", "skadebenchsecret"
SECTIONS = ("commits", "visibility", "tpch", "lookups")
EXTRA_SECTIONS = ("hosts",)  # (a part of `commits`: not run by default)
CLASSES = ("PUT", "GET", "HEAD", "LIST", "POST", "DelObjs", "DELETE")  # (a request is one of these)


def httpfs_extension():
    return site_extension("duckdb_extension_httpfs", "httpfs")


def postgres_extension(folder):
    """DuckDB's postgres extension from PyPI, through a link in `folder`: the wheel names its file
    postgres.duckdb_extension, while DuckDB takes the entry point's name from the file's
    (postgres_scanner_duckdb_cpp_init)."""
    link = os.path.join(folder, "postgres_scanner.duckdb_extension")
    if not os.path.lexists(link):
        os.symlink(site_extension("duckdb_extension_postgres", "postgres"), link)
    return link


# ---- what every host (process) does --------------------------------------------------------

def connect(endpoint, tpch=False, postgres=None):
    """A DuckDB with skade, httpfs (DuckDB attaches s3:// paths only with it), DuckLake and an S3
    secret for the server (httpfs's reads and writes; skade uses it too where httpfs is loaded);
    `postgres`: the postgres extension's file to load too (DuckLake over a PostgreSQL catalog)."""
    con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
    con.execute(f"LOAD '{EXTENSION}'")
    con.execute(f"LOAD '{httpfs_extension()}'")
    con.execute(f"LOAD '{ducklake_extension()}'")
    if postgres:
        con.execute(f"LOAD '{postgres}'")
    if tpch:
        con.execute(f"LOAD '{site_extension('duckdb_extension_tpch', 'tpch')}'")
    con.execute(f"CREATE SECRET bench_s3 (TYPE s3, KEY_ID '{KEY_ID}', SECRET '{SECRET}', REGION 'us-east-1', "
                f"ENDPOINT '{endpoint}', URL_STYLE 'path', USE_SSL false)")
    return con


def bucket_attach(prefix, cache, poll_ms=None, alias="lake"):
    poll = f", COMMIT_LOG_POLL_MS {poll_ms}" if poll_ms else ""
    return f"ATTACH 's3://{BUCKET}/{prefix}' AS {alias} (TYPE skade, READ_WRITE, CACHE_PATH '{cache}'{poll})"


def attach_sql(setup, prefix, root, host, poll_ms=None, catalog=None):
    """The ATTACH of host `host` (its own cache) for a setup whose objects live under `prefix`;
    `catalog`: the libpq connection string of DuckLake's PostgreSQL database (ducklake_pg*)."""
    if setup == "bucket":
        return bucket_attach(prefix, f"{root}/cache-{host}", poll_ms)
    if setup == "data_path":
        return f"ATTACH '{root}/lake.skade' AS lake (TYPE skade, DATA_PATH 's3://{BUCKET}/{prefix}/wh')"
    # ducklake_inlined, ducklake_pg_inlined: DuckLake's default data inlining
    inline = ", DATA_INLINING_ROW_LIMIT 0" if setup in ("ducklake", "ducklake_pg") else ""
    meta = f"postgres:{catalog}" if setup.startswith("ducklake_pg") else f"{root}/meta.ducklake"
    return f"ATTACH 'ducklake:{meta}' AS lake (DATA_PATH 's3://{BUCKET}/{prefix}/dl/'{inline})"


def ratio(skade, peer):
    """skade's time over a peer's, printed (`-` when either is missing)."""
    return f"{skade / peer:.2f}" if skade and peer else "-"


class Failed(Exception):
    pass


class Host:
    """The worker's connection; remembers the statement that failed."""

    def __init__(self, endpoint, tpch=False, postgres=None):
        self.con = connect(endpoint, tpch, postgres)

    def sql(self, q):
        try:
            return self.con.execute(q).fetchall()
        except duckdb.Error as e:
            raise Failed(json.dumps({"error": f"{type(e).__name__}: {e}", "sql": " ".join(q.split())}))


def say(obj):
    print(json.dumps(obj), flush=True)


def worker(spec):
    """--worker <json>: one host; attaches, says it is ready, waits for the start time on stdin,
    does its `mode` and prints JSON lines."""
    try:
        host = Host(spec["endpoint"], tpch=spec["mode"] == "tpch_load", postgres=spec.get("postgres"))
        for q in spec.get("attach", []):
            host.sql(q)
        say({"ready": True})
        go = float(sys.stdin.readline())
        while time.time() < go:
            time.sleep(0.001)
        MODES[spec["mode"]](host, spec)
        host.con.close()
    except Failed as f:
        print(str(f), flush=True)
        sys.exit(1)


def w_commit(host, spec):
    """One-row commits into spec['table'] until the time is up."""
    con, table = host.con, spec["table"]
    n, failed, first_error, stop = 0, 0, None, time.monotonic() + spec["seconds"]
    start = time.monotonic()
    while time.monotonic() < stop:
        try:
            con.execute(f"INSERT INTO lake.{table} VALUES ({n}, 'x')")
            n += 1
        except duckdb.Error as e:
            failed += 1
            first_error = first_error or str(e).splitlines()[0]
    say({"commits": n, "failed": failed, "error": first_error, "seconds": time.monotonic() - start})


def w_write(host, spec):
    """Commits when told to, answering each with its acknowledgment time."""
    for line in sys.stdin:
        host.sql(f"INSERT INTO lake.latency VALUES ({int(line)})")
        say({"acked": time.monotonic()})


def w_poll(host, spec):
    """Reports when each row becomes visible: to a query of the table polling every ms (`table`),
    or to skade_wait, woken by the host's poll of the commit log (`wait`). Gives up after 30 s
    without progress (an error naming the statement, not a hang)."""
    seen, last = 0, time.monotonic()
    since = base = host.sql("SELECT max(commit_seq) FROM skade_commits_since('lake', 0)")[0][0]
    while seen < spec["samples"]:
        if spec["what"] == "table":
            # (only the rows not seen yet: the files of those seen are pruned by their manifest
            # bounds, so a poll reads the new file alone, not one more one-row file per commit)
            q = f"SELECT max(id) FROM lake.latency WHERE id > {seen}"
            got = host.sql(q)[0][0]
        else:
            q = f"SELECT max(commit_seq) FROM skade_wait('lake', {since}, timeout := INTERVAL '1 second')"
            got = host.sql(q)[0][0]
            since = max(since, got or since)
            got = got - base if got is not None else None
        if got is not None and got > seen:
            seen, last = got, time.monotonic()
            say({"seen": got, "at": time.monotonic()})
        elif time.monotonic() - last > 30:
            raise Failed(json.dumps({"error": f"no commit past {seen} of {spec['samples']} seen for 30 s", "sql": q}))
        elif spec["what"] == "table":
            time.sleep(0.001)


def w_use(host, spec):
    """In use, committing nothing: a query of lake.t0 every half second until the time is up."""
    stop = time.monotonic() + spec["seconds"]
    while time.monotonic() < stop:
        host.sql("SELECT count(*) FROM lake.t0")
        time.sleep(0.5)
    say({"done": True})


def w_tpch_load(host, spec):
    """dbgen, then each table into the three setups on the server, timed."""
    t = time.perf_counter()
    host.sql(f"CALL dbgen(sf={spec['sf']})")
    say({"dbgen": time.perf_counter() - t,
         "rows": {tb: host.sql(f"SELECT count(*) FROM memory.main.{tb}")[0][0] for tb in TPCH_TABLES}})
    load = {"skade": 0.0, "DuckLake": 0.0, "read_parquet": 0.0}
    for tb in TPCH_TABLES:
        for setup, q in (("skade", f"CREATE TABLE sk.{tb} AS FROM memory.main.{tb}"),
                         ("DuckLake", f"CREATE TABLE dl.{tb} AS FROM memory.main.{tb}"),
                         ("read_parquet", f"COPY memory.main.{tb} TO '{spec['pq']}/{tb}.parquet' (FORMAT parquet)")):
            t = time.perf_counter()
            host.sql(q)
            load[setup] += time.perf_counter() - t
    say({"load": load})


def w_tpch_query(host, spec):
    """The 22 queries on each setup, rounds alternating between setups; one line per query."""
    if not spec["file_cache"]:
        host.sql("SET enable_external_file_cache = false")
    host.sql("CREATE SCHEMA memory.pq")
    for tb in TPCH_TABLES:
        host.sql(f"CREATE VIEW memory.pq.{tb} AS FROM read_parquet('{spec['pq']}/{tb}.parquet')")
    host.con.execute(f"LOAD '{site_extension('duckdb_extension_tpch', 'tpch')}'")
    queries = host.sql("SELECT query_nr, query FROM tpch_queries() ORDER BY query_nr")
    uses = {"skade": "USE sk.main", "DuckLake": "USE dl.main", "read_parquet": "USE memory.pq"}
    for nr, q in queries:
        first, best, rows, errors = {}, {}, {}, {}
        for rnd in range(spec["repeat"]):
            for setup, use in uses.items():
                if setup in errors:
                    continue
                host.sql(use)
                t = time.perf_counter()
                try:
                    got = host.con.execute(q).fetchall()
                except duckdb.Error as e:
                    errors[setup] = f"{type(e).__name__}: {e}".splitlines()[0]
                    continue
                finally:
                    host.con.execute("USE memory.main")
                s = time.perf_counter() - t
                if rnd == 0:
                    first[setup], rows[setup] = s, normalized(got)
                best[setup] = min(best.get(setup, s), s)
        differ = [s for s in rows if rows[s] != rows.get("read_parquet", rows[s])]
        say({"q": nr, "first": first, "best": best, "errors": errors, "differ": differ,
             "sql": " ".join(q.split()) if errors or differ else None})
    say({"done": True})


def log_requests(endpoint, prefix):
    """The logged requests for objects under `prefix`, and those naming no object (bulk deletes)."""
    return [r for r in s3_control(endpoint, "GET", "requests")
            if key_of(r)[1].startswith(prefix + "/") or not key_of(r)[1]]


def w_lookup(host, spec):
    """Cold then warm point lookups on lake.kv by spec['how'], counted from the server's log
    (the warehouse's requests; the commit log's polls apart) and skade_lookup_stats()."""
    endpoint, prefix, rows = spec["endpoint"], spec["prefix"], spec["rows"]
    sql = ("SELECT * FROM lake.kv WHERE id = {k}" if spec["how"] == "where"
           else "SELECT * FROM skade_lookup('lake.kv', {k})")
    rng = random.Random(11)
    present = [2 * rng.randrange(rows) for _ in range(spec["lookups"])]
    absent = [2 * rng.randrange(rows) + 1 for _ in range(spec["lookups"])]
    if spec["delay"]:
        s3_control(endpoint, "POST", "faults", {"delay": spec["delay"], "count": 10 ** 9})

    def stats():
        cur = host.con.execute("SELECT * FROM skade_lookup_stats()")
        return dict(zip([d[0] for d in cur.description], cur.fetchone()))

    def probe(keys, want_rows):
        s3_control(endpoint, "DELETE", "requests")
        before, times = stats(), []
        for k in keys:
            t = time.perf_counter()
            got = host.sql(sql.format(k=k))
            times.append(time.perf_counter() - t)
            if len(got) != want_rows or (got and got[0][0] != k):
                raise Failed(json.dumps({"error": f"key {k}: got {got}", "sql": sql.format(k=k)}))
        after = stats()
        log = log_requests(endpoint, prefix)
        data = [r for r in log if "/warehouse/" in "/" + key_of(r)[1]]
        n = len(keys)
        return {"n": n, "ms_p50": sorted(times)[n // 2] * 1000, "ms_mean": sum(times) / n * 1000,
                "requests": len(data) / n, "gets": sum(key_of(r)[0] == "GET" for r in data) / n,
                "bytes": sum(r["sent"] for r in data) / n, "log_requests": (len(log) - len(data)) / n,
                "classes": by_class(data, n),
                "stats": {c: (after[c] - before[c]) / n for c in after}}

    result = {"cold": probe(present[:1], 1)}
    result["warm present"] = probe(present[1:], 1)
    result["warm absent"] = probe(absent, 0)
    if spec["delay"]:
        s3_control(endpoint, "DELETE", "faults")
    say(result)


MODES = {"commit": w_commit, "use": w_use, "write": w_write, "poll": w_poll, "tpch_load": w_tpch_load,
         "tpch_query": w_tpch_query, "lookup": w_lookup}


# ---- the server's request log --------------------------------------------------------------

def key_of(r):
    """(class, object key or LIST prefix) of a logged request."""
    q = parse_qs(r["query"], keep_blank_values=True)
    parts = r["path"].split("/", 2)
    key = unquote(parts[2]) if len(parts) > 2 else ""
    if r["method"] == "GET" and "list-type" in q:
        return "LIST", q.get("prefix", [""])[0]
    if r["method"] == "POST" and "delete" in q:
        return "DelObjs", key  # (a bulk DeleteObjects: its keys are in its body)
    return r["method"], key


def by_class(log, per):
    out = {}
    for r in log:
        c = key_of(r)[0]
        out[c] = out.get(c, 0) + 1
        if c == "GET" and r["status"] == 404:
            out["GET 404"] = out.get("GET 404", 0) + 1
        if c == "PUT" and r["status"] in (409, 412):
            out["PUT lost"] = out.get("PUT lost", 0) + 1
        if c == "PUT" and "/log/" in "/" + key_of(r)[1]:
            out["PUT log"] = out.get("PUT log", 0) + 1
    return {c: v / per for c, v in out.items()}


# ---- DuckLake's PostgreSQL catalog: a throwaway cluster -------------------------------------

PG_NO_BINARIES = "no PostgreSQL server binaries (Debian: apt install postgresql)"


class PostgresSkipped(Exception):
    """No PostgreSQL server can be run here (the reason, for the line saying it is skipped)."""


def postgres_binaries():
    """The folder with initdb, pg_ctl and postgres: initdb's on PATH, then /usr/lib/postgresql/*/bin
    (Debian's, newest first); None if there is none."""
    found = shutil.which("initdb")
    folders = [os.path.dirname(os.path.realpath(found))] if found else []
    version = lambda f: [int(x) for x in re.findall(r"\d+", f)]  # noqa: E731
    folders += sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=version, reverse=True)
    for folder in folders:
        if all(os.access(os.path.join(folder, b), os.X_OK) for b in ("initdb", "pg_ctl", "postgres")):
            return folder
    return None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Postgres:
    """A PostgreSQL cluster in a temporary folder: trust authentication, superuser `postgres`,
    listening on 127.0.0.1 at a free port (its unix socket in the folder), default settings
    otherwise (fsync on). As root (PostgreSQL refuses to run as root) its binaries run as the
    user `postgres`, owning the folder. stop() ends it (pg_ctl stop -m fast) and removes the folder."""

    def __init__(self):
        self.bin = postgres_binaries()
        if not self.bin:
            raise PostgresSkipped(PG_NO_BINARIES)
        self.user = None
        if os.geteuid() == 0:
            try:
                self.user = pwd.getpwnam("postgres")
            except KeyError:
                raise PostgresSkipped("running as root, which PostgreSQL refuses, and no user `postgres` "
                                      "to run it as") from None
            if not (shutil.which("runuser") or shutil.which("su")):
                raise PostgresSkipped("running as root, which PostgreSQL refuses, and neither runuser "
                                      "nor su to run it as user `postgres`")
        self.dir = tempfile.mkdtemp(prefix="skade-pg-")
        self.data, self.log = os.path.join(self.dir, "data"), os.path.join(self.dir, "server.log")
        self.port, self.started = None, False
        try:
            if self.user:
                os.chown(self.dir, self.user.pw_uid, self.user.pw_gid)
            self.run("initdb", "-D", self.data, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--locale=C",
                     "--no-sync")
            self.port = free_port()
            self.started = True  # (from here on, stop() tries pg_ctl stop even if the start failed)
            self.run("pg_ctl", "-D", self.data, "-l", self.log, "-w", "-t", "60", "-o",
                     f"-c listen_addresses=127.0.0.1 -p {self.port} -k {shlex.quote(self.dir)}", "start")
            self.version = self.run("postgres", "--version").strip()
        except BaseException:
            self.stop()
            raise

    def run(self, binary, *args, check=True):
        cmd = [os.path.join(self.bin, binary), *args]
        if self.user:
            cmd = (["runuser", "-u", "postgres", "--", *cmd] if shutil.which("runuser") else
                   ["su", "postgres", "-s", "/bin/sh", "-c", shlex.join(cmd)])
        r = subprocess.run(cmd, cwd=self.dir, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=120)
        if check and r.returncode:
            log = ""
            if os.path.exists(self.log):
                with open(self.log) as f:
                    log = "; server log: " + " | ".join(f.read().splitlines()[-5:])
            raise RuntimeError(f"{binary} {' '.join(args)}: exit {r.returncode}: "
                               f"{(r.stderr or r.stdout).strip()[-400:]}{log}")
        return r.stdout

    def dsn(self, database):
        return f"dbname={database} host=127.0.0.1 port={self.port} user=postgres"

    def create_database(self, name, extension):
        """A new database (DuckDB's postgres extension: CREATE DATABASE outside a transaction)."""
        con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
        try:
            con.execute(f"LOAD '{extension}'")
            con.execute(f"ATTACH '{self.dsn('postgres')}' AS pg (TYPE postgres)")
            con.execute(f"CALL postgres_execute('pg', 'CREATE DATABASE {name}', use_transaction := false)")
        finally:
            con.close()
        return self.dsn(name)

    def stop(self):
        if not self.dir:
            return
        try:
            if self.started:
                try:
                    self.run("pg_ctl", "-D", self.data, "-m", "fast", "-w", "-t", "60", "stop", check=False)
                except subprocess.TimeoutExpired:
                    pass
                self.kill_leftover()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def kill_leftover(self):
        """The postmaster this cluster started, if pg_ctl could not stop it: an immediate shutdown
        (SIGQUIT, its children follow), then SIGKILL."""
        try:
            with open(os.path.join(self.data, "postmaster.pid")) as f:
                pid = int(f.readline())
        except (OSError, ValueError):
            return
        for sig in (signal.SIGQUIT, signal.SIGKILL):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                return
            for _ in range(50):
                time.sleep(0.1)
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    return


# ---- the orchestrator ----------------------------------------------------------------------

class Bench:
    def __init__(self, args):
        self.args = args
        self.root = tempfile.mkdtemp(prefix="skade-buckets-")
        self.server, self.endpoint = start_s3_server("--bucket", BUCKET)
        # skade's route when no secret is found (workers inherit them)
        os.environ.update({"AWS_ACCESS_KEY_ID": KEY_ID, "AWS_SECRET_ACCESS_KEY": SECRET, "AWS_REGION": "us-east-1",
                           "AWS_ENDPOINT_URL": f"http://{self.endpoint}", "AWS_ALLOW_HTTP": "true"})
        self.points = 0
        self.figures = {}
        self.problems = []
        self.workers = []
        self.goals = []  # (the summary's lines)
        self.pg = None  # DuckLake's PostgreSQL cluster, while the commit points run
        self.pg_skipped = None  # why DuckLake over PostgreSQL is not measured

    def close(self):
        for p in self.workers:
            if p.poll() is None:
                p.kill()
            p.wait()
        self.stop_postgres()
        stop_s3_server(self.server)
        shutil.rmtree(self.root, ignore_errors=True)

    def problem(self, text):
        self.problems.append(text)
        print(f"  !! {text}", flush=True)

    def fresh(self, label):
        """A new prefix in the bucket and a new local folder for one point."""
        self.points += 1
        prefix = f"p{self.points:03d}-{label}"
        root = os.path.join(self.root, prefix)
        os.makedirs(root)
        return prefix, root

    def control(self, method, what, body=None):
        return s3_control(self.endpoint, method, what, body)

    def latency(self, delay):
        self.control("DELETE", "faults")
        if delay:
            self.control("POST", "faults", {"delay": delay, "count": 10 ** 9})

    def setup_sql(self, attach, statements, postgres=None):
        con = connect(self.endpoint, postgres=postgres)
        try:
            con.execute(attach)
            for q in statements:
                con.execute(q)
        except duckdb.Error as e:
            raise Failed(json.dumps({"error": f"{type(e).__name__}: {e}", "sql": "; ".join([attach, *statements])}))
        finally:
            con.close()

    def spawn(self, mode, attach, **spec):
        spec.update(mode=mode, endpoint=self.endpoint, attach=attach if isinstance(attach, list) else [attach])
        p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", json.dumps(spec)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.workers.append(p)
        self.read(p, "ready")
        return p

    def read(self, p, want=None):
        line = p.stdout.readline()
        if not line:
            p.wait()
            raise Failed(json.dumps({"error": f"a worker ended (exit {p.returncode}) without an answer", "sql": ""}))
        got = json.loads(line)
        if "error" in got and "sql" in got:
            raise Failed(line)
        if want and not got.get(want):
            raise Failed(json.dumps({"error": f"unexpected answer {got}", "sql": ""}))
        return got

    def go(self, procs):
        at = time.time() + 0.2
        for p in procs:
            p.stdin.write(f"{at}\n")
            p.stdin.flush()

    def finish(self, procs):
        for p in procs:
            if p.stdin and not p.stdin.closed:
                p.stdin.close()
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            self.workers.remove(p)

    def failure(self, what, f):
        e = json.loads(str(f))
        self.problem(f"{what}: {e['error']}" + (f"\n     SQL: {e['sql']}" if e.get("sql") else ""))

    # ---- 1 and 2: commits and their requests ---------------------------------------------

    def start_postgres(self):
        """DuckLake's PostgreSQL cluster for the commit points; None (and a line saying why) where
        no server can run here."""
        if self.pg or self.pg_skipped:
            return self.pg
        try:
            if not postgres_binaries():
                raise PostgresSkipped(PG_NO_BINARIES)
            try:
                extension = postgres_extension(self.root)
            except RuntimeError as e:
                raise PostgresSkipped(str(e)) from None
            self.pg = Postgres()
            self.pg.extension = extension
            print(f"  DuckLake over PostgreSQL: {self.pg.version}, {self.pg.bin}, 127.0.0.1:{self.pg.port}"
                  f"{' (run as user postgres)' if self.pg.user else ''}", flush=True)
        except PostgresSkipped as e:
            self.pg_skipped = str(e)
            print(f"DuckLake over PostgreSQL: skipped, {e}", flush=True)
        except (RuntimeError, OSError, subprocess.SubprocessError, duckdb.Error) as e:
            self.pg_skipped = f"its server did not start: {e}"
            self.problem(f"DuckLake over PostgreSQL: {self.pg_skipped}")
        return self.pg

    def stop_postgres(self):
        if self.pg:
            self.pg.stop()
            self.pg = None

    def commit_point(self, setup, n, shared, delay):
        prefix, root = self.fresh(f"{setup}-{n}{'s' if shared else 'o'}")
        tables = [f"t{0 if shared else w}" for w in range(n)]
        extra, catalog = {}, None
        if setup.startswith("ducklake_pg"):  # a database of its own in the cluster, per point
            extra["postgres"] = self.pg.extension
            try:
                catalog = self.pg.create_database(prefix.replace("-", "_"), self.pg.extension)
            except duckdb.Error as e:
                raise Failed(json.dumps({"error": f"{type(e).__name__}: {e}", "sql": "CREATE DATABASE"}))
        self.setup_sql(attach_sql(setup, prefix, root, "setup", catalog=catalog),
                       [f"CREATE TABLE lake.{t} (id BIGINT, v VARCHAR)" for t in sorted(set(tables))],
                       postgres=extra.get("postgres"))
        procs = []
        try:
            for w, t in enumerate(tables):
                procs.append(self.spawn("commit", attach_sql(setup, prefix, root, w, catalog=catalog), table=t,
                                        seconds=self.args.seconds, **extra))
            self.latency(delay)
            self.control("DELETE", "requests")
            self.go(procs)
            results = [self.read(p) for p in procs]
            log = log_requests(self.endpoint, prefix)
        finally:
            self.latency(0)
            self.finish(procs)
        commits = sum(r["commits"] for r in results)
        rate = commits / max(r["seconds"] for r in results)
        failed = sum(r["failed"] for r in results)
        errors = {r["error"] for r in results if r["error"]}
        return rate, failed, errors, by_class(log, max(commits, 1))

    def hosts(self):
        """The multi-host rows of `commits` alone (skade's and DuckLake's over PostgreSQL) and the goal."""
        self.commits(multi_only=True)

    def commits(self, multi_only=False):
        a = self.args
        setups = [("bucket", False, HOSTS, "skade bucket lake, own tables"),
                  ("bucket", True, HOSTS, "skade bucket lake, one shared table"),
                  ("ducklake_pg", False, HOSTS, "DuckLake, PostgreSQL catalog, own tables"),
                  ("ducklake_pg", True, HOSTS, "DuckLake, PostgreSQL catalog, one shared table"),
                  ("ducklake_pg_inlined", True, HOSTS, "  the same, data inlined in PostgreSQL (default)"),
                  ("data_path", False, [1], "skade, local catalog, DATA_PATH in the bucket"),
                  ("ducklake", False, [1], "DuckLake, DuckDB-file catalog, data on server"),
                  ("ducklake_inlined", False, [1], "  the same, DuckLake's default data inlining")]
        if multi_only:
            setups = [s for s in setups if s[2] == HOSTS]
        if not self.start_postgres():
            setups = [s for s in setups if not s[0].startswith("ducklake_pg")]
        try:
            requests = self.commit_tables(setups)
        finally:
            self.stop_postgres()
        self.requests_table(requests, in_use=not multi_only)

    def commit_tables(self, setups):
        """The commits/s tables (one per added latency) and the goal; the requests of each point."""
        a = self.args
        requests = {}
        for delay in self.delays():
            print(f"\n== one-row commits/s, {a.seconds:.1f} s per point, {self.delay_label(delay)} ==", flush=True)
            print(f"  {'':<52}" + "".join(f"{n:>7} host" for n in HOSTS), flush=True)
            rates = {}
            for setup, shared, hosts, label in setups:
                row, notes = [], []
                for n in hosts:
                    try:
                        rate, failed, errors, req = self.commit_point(setup, n, shared, delay)
                    except Failed as f:
                        self.failure(f"commits {setup} {n} hosts, {self.delay_label(delay)}", f)
                        row.append(None)
                        continue
                    row.append(rate)
                    requests[(setup, n, shared, delay)] = req
                    if failed:
                        notes.append(f"{n} hosts: {failed} failed commits ({'; '.join(sorted(errors))[:160]})")
                self.figures[f"commits/s|{label.strip()}|{self.delay_label(delay)}"] = \
                    [None if r is None else round(r, 1) for r in row]
                rates[(setup, shared)] = dict(zip(hosts, row))
                print(f"  {label:<52}" + "".join(f"{'error' if r is None else f'{r:.1f}':>12}" for r in row), flush=True)
                for note in notes:
                    print(f"      ({note})", flush=True)
            if any(s[0] == "ducklake" for s in setups):
                print("  DuckLake with its DuckDB-file catalog allows one process only: no 2- and 4-host points")
            if not self.pg_skipped:  # (skipped: said once, above, and in the goal's line)
                print("  DuckLake over PostgreSQL: its catalog in a local PostgreSQL (default settings, fsync on; "
                      "no added latency there), its data on the server;\n  a failed commit (a conflict) is "
                      "counted apart, not in commits/s")
            self.goal(rates, delay)
        return requests

    def goal(self, rates, delay):
        """Issue 44's goal: commits/s from 4 hosts into one shared table, skade >= DuckLake over PostgreSQL."""
        n = HOSTS[-1]
        sk = rates.get(("bucket", True), {}).get(n)
        dl = rates.get(("ducklake_pg", True), {}).get(n)
        inl = rates.get(("ducklake_pg_inlined", True), {}).get(n)
        head = f"goal, {n} hosts into one shared table, skade >= DuckLake over PostgreSQL ({self.delay_label(delay)}): "
        if self.pg_skipped:
            text = head + f"not measured (DuckLake over PostgreSQL skipped: {self.pg_skipped})"
        elif sk is None or dl is None:
            text = head + "not measured (a point failed)"
        else:
            text = (head + f"skade {sk:.1f} vs DuckLake {dl:.1f} commits/s (x{sk / dl:.2f}): "
                    + ("met" if sk >= dl else "NOT met")
                    + (f"; DuckLake with its data inlined in PostgreSQL {inl:.1f} (x{sk / inl:.2f})" if inl else ""))
        self.goals.append(text)
        self.figures[f"goal 4 hosts shared|{self.delay_label(delay)}"] = {
            "skade": None if sk is None else round(sk, 1), "ducklake_pg": None if dl is None else round(dl, 1),
            "ducklake_pg_inlined": None if inl is None else round(inl, 1),
            "met": None if sk is None or dl is None else sk >= dl}
        print(f"  {text}", flush=True)

    def requests_table(self, requests, in_use=True):
        print("\n== requests per one-row commit, from the server's log (the commit points above; "
              "background log polls included) ==", flush=True)
        print("  design (docs/design/object-storage.md): a one-row INSERT with no race is 5 PUT "
              "(data file, manifest, manifest list, metadata.json, log position)")
        cols = ["PUT", "PUT log", "PUT lost", "GET", "GET 404", "HEAD", "LIST", "POST", "DelObjs", "DELETE"]
        print(f"  {'':<58}" + "".join(f"{c:>9}" for c in cols) + f"{'total':>9}")
        for delay in self.delays():
            for (setup, n, shared, d), req in requests.items():
                if d != delay or (setup in ("bucket", "ducklake_pg") and n == 1 and shared):
                    continue
                hosts = f"{n} host{'s' if n > 1 else ''}" + ((", one table" if shared else ", own tables") if n > 1 else "")
                label = {"bucket": f"bucket lake, {hosts}",
                         "ducklake_pg": f"DuckLake PG (files), {hosts}",
                         "ducklake_pg_inlined": f"DuckLake PG (inlined), {hosts}",
                         "data_path": "skade DATA_PATH in the bucket",
                         "ducklake": "DuckLake (files)", "ducklake_inlined": "DuckLake (inlined)"}[setup]
                label += f", {self.delay_label(delay)}"
                total = sum(v for c, v in req.items() if c in CLASSES)
                print(f"  {label:<58}" + "".join(f"{req.get(c, 0):>9.2f}" for c in cols) + f"{total:>9.2f}", flush=True)
                self.figures[f"requests/commit|{label}"] = {c: round(v, 3) for c, v in req.items()}
        print("  (PUT log: PUTs of log positions; PUT lost: 412/409 answers, a position another host won; "
              "GET 404: a position not written yet; DelObjs: bulk DeleteObjects; DuckLake PG: the bucket's "
              "requests only, its catalog's queries go to PostgreSQL)")
        if not in_use:
            return
        print(f"  a bucket-lake host in use that commits nothing (a query every 0.5 s, {self.args.seconds:.0f} s), "
              "requests per second, by class; design: +1 GET (404) per poll", flush=True)
        for delay in self.delays():
            for poll in (None, 20):
                try:
                    per_s = self.use_point(poll, delay)
                except Failed as f:
                    self.failure("a host in use", f)
                    continue
                label = f"COMMIT_LOG_POLL_MS {poll or '100 (default)'}, {self.delay_label(delay)}"
                self.figures[f"requests/s in use|{label}"] = {c: round(v, 2) for c, v in per_s.items()}
                print(f"    {label:<52}" + ", ".join(f"{c} {v:.1f}" for c, v in per_s.items()), flush=True)

    def use_point(self, poll, delay):
        prefix, root = self.fresh("use")
        self.setup_sql(attach_sql("bucket", prefix, root, "setup"), ["CREATE TABLE lake.t0 (id BIGINT, v VARCHAR)"])
        procs = []
        try:
            procs.append(self.spawn("use", attach_sql("bucket", prefix, root, 0, poll), seconds=self.args.seconds))
            self.latency(delay)
            self.control("DELETE", "requests")
            start = time.monotonic()
            self.go(procs)
            self.read(procs[0], "done")
            seconds = time.monotonic() - start - 0.2
            log = log_requests(self.endpoint, prefix)
        finally:
            self.latency(0)
            self.finish(procs)
        return by_class(log, seconds)

    # ---- visibility ------------------------------------------------------------------------

    def visibility(self):
        a = self.args
        print(f"\n== visibility in another host after a commit is acknowledged (ms, p50 / p99 of {a.samples} "
              f"commits; two readers at once: a query polling every ms, and skade_wait) ==", flush=True)
        print(f"  {'':<62}{'a query sees the row':>28}{'skade_wait returns it':>28}", flush=True)
        for delay in self.delays():
            for poll in (20, None):
                label = f"bucket lake, COMMIT_LOG_POLL_MS {poll or '100 (default)'}, {self.delay_label(delay)}"
                try:
                    found = self.visibility_point(poll, delay)
                except Failed as f:
                    self.failure(f"visibility {label}", f)
                    continue
                cells = []
                for what in ("table", "wait"):
                    p50, p99 = found[what]
                    self.figures[f"visibility {what}|{label}"] = [round(p50, 1), round(p99, 1)]
                    cells.append(f"{p50:.1f} / {p99:.1f}")
                print(f"  {label:<62}" + "".join(f"{c:>28}" for c in cells), flush=True)

    def visibility_point(self, poll, delay):
        """One writer, two readers: a query of the table and skade_wait; {reader: (p50, p99)}."""
        samples = self.args.samples
        prefix, root = self.fresh("vis")
        self.setup_sql(attach_sql("bucket", prefix, root, "setup"), ["CREATE TABLE lake.latency (id BIGINT)"])
        procs = []
        try:
            readers = {what: self.spawn("poll", attach_sql("bucket", prefix, root, f"reader-{what}", poll),
                                        samples=samples, what=what) for what in ("table", "wait")}
            writer = self.spawn("write", attach_sql("bucket", prefix, root, "writer", poll))
            procs = [*readers.values(), writer]
            self.latency(delay)
            self.go(procs)
            time.sleep(0.3)
            delays = {what: [] for what in readers}
            for i in range(1, samples + 1):
                writer.stdin.write(f"{i}\n")
                writer.stdin.flush()
                acked = self.read(writer)["acked"]
                for what, reader in readers.items():
                    while True:
                        seen = self.read(reader)
                        if seen["seen"] >= i:
                            break
                    delays[what].append(max(0.0, seen["at"] - acked) * 1000)
                time.sleep(0.01)
        finally:
            self.latency(0)
            self.finish(procs)
        for d in delays.values():
            d.sort()
        return {what: (d[len(d) // 2], d[max(0, int(len(d) * 0.99) - 1)]) for what, d in delays.items()}

    # ---- 3. TPC-H ----------------------------------------------------------------------------

    def tpch(self):
        a = self.args
        lat = f"+{a.scan_delay * 1000:.0f} ms/request during the queries" if a.scan_delay else "no added latency"
        cache = ("DuckDB's external file cache off" if a.no_file_cache else
                 "DuckDB's external file cache on, its default: DuckLake's and read_parquet's repeats read memory")
        print(f"\n== TPC-H sf={a.sf} on the server ({lat}; {cache}) ==", flush=True)
        prefix, root = self.fresh("tpch")
        attach = [bucket_attach(f"{prefix}/sk", f"{root}/cache-load", alias="sk"),
                  f"ATTACH 'ducklake:{root}/meta.ducklake' AS dl (DATA_PATH 's3://{BUCKET}/{prefix}/dl/', "
                  f"DATA_INLINING_ROW_LIMIT 0)"]
        pq = f"s3://{BUCKET}/{prefix}/pq"
        try:
            p = self.spawn("tpch_load", attach, sf=a.sf, pq=pq)
            self.go([p])
            gen = self.read(p)
            print(f"  dbgen {gen['dbgen']:.1f} s; rows: " + ", ".join(f"{t} {n:,}" for t, n in gen["rows"].items()),
                  flush=True)
            load = self.read(p)["load"]
            self.finish([p])
        except Failed as f:
            self.failure("TPC-H load", f)
            return
        print("  load (8 tables): skade bucket lake CTAS {skade:.2f} s, DuckLake CTAS {DuckLake:.2f} s, "
              "COPY to Parquet {read_parquet:.2f} s".format(**load), flush=True)
        stored = {}
        for r in self.control("GET", "requests"):
            cls, key = key_of(r)
            if cls == "PUT" and key.startswith(prefix + "/"):
                part = key[len(prefix) + 1:].split("/")[0]
                stored[part] = stored.get(part, 0) + r["bytes"]
        print("  bytes PUT: " + ", ".join(f"{k} {v / 1e6:.1f} MB" for k, v in sorted(stored.items())), flush=True)

        # queries in a fresh host: the first round is cold (no DuckDB file cache, no skade cache)
        attach[0] = bucket_attach(f"{prefix}/sk", f"{root}/cache-query", alias="sk")
        setups = ("skade", "DuckLake", "read_parquet")
        totals = {s: 0.0 for s in setups}
        firsts = {s: 0.0 for s in setups}
        complete = True
        try:
            p = self.spawn("tpch_query", attach, pq=pq, repeat=a.repeat, file_cache=not a.no_file_cache)
            self.latency(a.scan_delay)
            self.control("DELETE", "requests")
            self.go([p])
            print(f"  ms: first run (cold) and best of {a.repeat}; rounds alternate between setups")
            print(f"  {'q':>3}" + "".join(f"{s + ' 1st':>18}{s + ' best':>18}" for s in setups)
                  + f"{'sk/DL':>8}{'sk/rp':>8}", flush=True)
            while True:
                r = self.read(p)
                if r.get("done"):
                    break
                for s in setups:
                    if s in r["best"]:
                        totals[s] += r["best"][s]
                        firsts[s] += r["first"][s]
                    else:
                        complete = False
                for s, err in r["errors"].items():
                    self.problem(f"TPC-H Q{r['q']} on {s}: {err}\n     SQL: {r['sql']}")
                for s in r["differ"]:
                    self.problem(f"TPC-H Q{r['q']}: {s}'s rows differ from read_parquet's")
                nan = float("nan")
                cells = "".join(f"{r['first'].get(s, nan) * 1000:>18.1f}{r['best'].get(s, nan) * 1000:>18.1f}"
                                for s in setups)
                b = r["best"]
                print(f"  {r['q']:>3}{cells}{ratio(b.get('skade'), b.get('DuckLake')):>8}"
                      f"{ratio(b.get('skade'), b.get('read_parquet')):>8}", flush=True)
            log = self.control("GET", "requests")
            self.finish([p])
        except Failed as f:
            self.failure("TPC-H queries", f)
            return
        finally:
            self.latency(0)
        print(f"  {'sum':>3}" + "".join(f"{firsts[s] * 1000:>18.1f}{totals[s] * 1000:>18.1f}" for s in setups)
              + f"{ratio(totals['skade'], totals['DuckLake']):>8}{ratio(totals['skade'], totals['read_parquet']):>8}"
              + ("" if complete else "   (some queries failed: sums are partial)"))
        print(f"  totals, best of {a.repeat}: " + ", ".join(f"{s} {totals[s] * 1000:.0f} ms" for s in setups)
              + f"; time ratio skade/DuckLake {ratio(totals['skade'], totals['DuckLake'])}, skade/read_parquet "
              f"{ratio(totals['skade'], totals['read_parquet'])} (<1: skade faster; the goal, 1.2x DuckLake's "
              "speed, is skade/DuckLake <= 0.83)")
        print(f"  first runs (cold): skade/DuckLake {ratio(firsts['skade'], firsts['DuckLake'])}, "
              f"skade/read_parquet {ratio(firsts['skade'], firsts['read_parquet'])}")
        per = {}
        for r in log:
            cls, key = key_of(r)
            for part, s in (("sk", "skade"), ("dl", "DuckLake"), ("pq", "read_parquet")):
                if key.startswith(f"{prefix}/{part}/"):
                    c = per.setdefault(s, {"requests": 0, "bytes": 0})
                    c["requests"] += 1
                    c["bytes"] += r["sent"]
        print(f"  requests during the {22 * a.repeat} runs per setup: " + ", ".join(
            f"{s} {c['requests']:,} ({c['bytes'] / 1e6:.1f} MB read)" for s, c in per.items()), flush=True)
        self.figures[f"tpch sf={a.sf}"] = {"best_ms": {s: round(v * 1000, 1) for s, v in totals.items()},
                                           "first_ms": {s: round(v * 1000, 1) for s, v in firsts.items()},
                                           "requests": per, "load_s": {s: round(v, 2) for s, v in load.items()}}

    # ---- 4. point lookups --------------------------------------------------------------------

    def lookups(self):
        a = self.args
        print(f"\n== point lookups on a {a.rows:,}-row keyed table in a bucket lake ==", flush=True)
        prefix, root = self.fresh("kv")
        t = time.perf_counter()
        self.control("DELETE", "requests")
        try:
            self.setup_sql(attach_sql("bucket", prefix, root, "setup"), [
                "CREATE TABLE lake.kv (id BIGINT PRIMARY KEY, name VARCHAR, category VARCHAR, amount DOUBLE, "
                "created TIMESTAMP)",
                f"INSERT INTO lake.kv SELECT 2 * i, 'name-' || i, 'category-' || (i % 100), i * 0.25, "
                f"TIMESTAMP '2026-01-01' + to_seconds(i) FROM range({a.rows}) r(i)"])
        except Failed as f:
            self.failure("lookups: the table's load", f)
            return
        data = [r for r in log_requests(self.endpoint, prefix)
                if key_of(r)[0] in ("PUT", "POST") and "/data/" in key_of(r)[1]]
        print(f"  loaded in {time.perf_counter() - t:.1f} s (one INSERT; ids even, absent keys odd); "
              f"{sum(r['bytes'] for r in data) / 1e6:.1f} MB of data PUT in {len(data)} requests", flush=True)
        print("  per lookup, each in a fresh host: the warehouse's requests and bytes (log req: the commit log's "
              "requests meanwhile);\n  design: warm present 1 GET (goal <= 2), bloom-dropped absent 0, the first "
              "lookup in a file +1 GET (64 KB tail), rarely +1")
        print(f"  {'':<52}{'ms p50':>9}{'requests':>10}{'GET':>7}{'KB read':>9}{'log req':>9}"
              "   skade_lookup_stats per lookup")
        for delay in self.delays():
            for how, name in (("where", "WHERE id = k"), ("fn", "skade_lookup")):
                try:
                    p = self.spawn("lookup", attach_sql("bucket", prefix, root, f"lookup-{how}-{delay}"),
                                   prefix=prefix, rows=a.rows, lookups=a.lookups, how=how, delay=delay)
                    self.go([p])
                    res = self.read(p)
                    self.finish([p])
                except Failed as f:
                    self.failure(f"lookups {name}, {self.delay_label(delay)}", f)
                    continue
                for phase, r in res.items():
                    label = f"{name}, {phase} ({r['n']}), {self.delay_label(delay)}"
                    st = r["stats"]
                    stat = ", ".join(f"{c} {v:.2f}" for c, v in st.items() if v)
                    print(f"  {label:<52}{r['ms_p50']:>9.1f}{r['requests']:>10.2f}{r['gets']:>7.2f}"
                          f"{r['bytes'] / 1024:>9.1f}{r['log_requests']:>9.2f}   {stat}", flush=True)
                    self.figures[f"lookup|{label}"] = {k: (round(v, 3) if isinstance(v, float) else v)
                                                       for k, v in r.items() if k != "stats"}

    # ---- helpers -----------------------------------------------------------------------------

    def delays(self):
        return [0.0] + ([self.args.delay] if self.args.delay else [])

    @staticmethod
    def delay_label(delay):
        return f"+{delay * 1000:.0f} ms/request" if delay else "no added latency"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=2.0, help="seconds per commit point")
    p.add_argument("--samples", type=int, default=50, help="commits per visibility point")
    p.add_argument("--sf", type=float, default=0.1, help="TPC-H scale factor (1 for SF1)")
    p.add_argument("--repeat", type=int, default=3, help="runs per TPC-H query and setup (best of)")
    p.add_argument("--rows", type=int, default=1_000_000, help="rows of the lookup table")
    p.add_argument("--lookups", type=int, default=50, help="warm lookups per point")
    p.add_argument("--delay", type=float, default=0.015, help="latency injected per request (0: none)")
    p.add_argument("--scan-delay", type=float, default=0.0, help="latency per request during TPC-H's queries")
    p.add_argument("--no-file-cache", action="store_true",
                   help="TPC-H with DuckDB's external file cache off (DuckLake's and read_parquet's repeats read the server)")
    p.add_argument("--only", default=",".join(SECTIONS), help="sections, comma-separated: " + ",".join(SECTIONS)
                   + " (the default), or hosts: the multi-host commit rows of `commits` alone")
    args = p.parse_args()
    only = [s for s in args.only.split(",") if s]
    if any(s not in SECTIONS + EXTRA_SECTIONS for s in only):
        p.error(f"sections: {','.join(SECTIONS + EXTRA_SECTIONS)}")
    if "commits" in only and "hosts" in only:
        only.remove("hosts")  # (`commits` has them)
    print(f"DuckDB {duckdb.__version__}, skade {EXTENSION}, {os.cpu_count()} cores; "
          f"S3: tools/s3_server.py (moto on loopback)", flush=True)
    started = time.perf_counter()
    bench = Bench(args)
    try:
        for s in SECTIONS + EXTRA_SECTIONS:
            if s in only:
                getattr(bench, s)()
    finally:
        bench.close()
    print(f"\ntotal run time {time.perf_counter() - started:.0f} s")
    for text in bench.goals:
        print(text)
    print(json.dumps(bench.figures))
    if bench.problems:
        print(f"\n{len(bench.problems)} problem(s):")
        for text in bench.problems:
            print(f"  - {text}")
        sys.exit(1)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--worker":
        worker(json.loads(sys.argv[2]))
    else:
        main()
