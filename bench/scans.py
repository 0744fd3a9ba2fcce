#!/usr/bin/env python3
"""Analytic scans: skade vs DuckLake vs read_parquet vs DuckDB's native tables, in one process.

Sections (--only picks some, comma-separated):
  tpch     TPC-H at --sf (the tpch extension's dbgen and 22 queries) on five engines: DuckDB native
           tables, read_parquet views over files COPY wrote, DuckLake, skade, and read_parquet views
           over skade's own data files (the files skade itself reads: the limit skade is held to).
  onefile  one table of --rows rows (id BIGINT, s VARCHAR, x DOUBLE) written by ONE INSERT; a full
           scan that decodes every column of every row, skade vs read_parquet over skade's file(s)
           vs DuckLake (vs native, for reference).
  peer     the peer workload's table (../shared/bench: 32 appends of 31,250 rows, skade's with a
           PRIMARY KEY (DuckLake has none), 8 range DELETEs, 8 range UPDATEs) on skade and DuckLake,
           a full all-column scan of each, and skade's same table built without the deletes and
           updates (what the deletes cost), with read_parquet over that table's files.
  keys     on the peer table: WHERE id IN (1,000 keys) and a JOIN with a 1,000-row keys table.

Every step's query runs once to warm up, then --repeat times per engine, the repeats alternating
between engines (a slow phase of this shared machine then hits all of them); the best time is
printed. Ratios are skade's SPEED relative to a peer: peer seconds / skade seconds (>1: skade is
faster; 0.91 = skade takes 1.1x the peer's time). Times are printed, never asserted; results are
checked to be identical on every engine (rows sorted, floats and decimals rounded to 6 significant
digits); any difference or error is listed at the end and makes the exit status 1.

Usage: python bench/scans.py [--sf 1] [--rows 1000000] [--only tpch,onefile,peer,keys]
                             [--repeat 3] [--keep]
"""
import argparse
import decimal
import math
import os
import random
import shutil
import sys
import tempfile
import time

import duckdb

from common import EXTENSION, load_iceberg
from hosts import peer_extension  # tools/, on the path once common is imported

SECTIONS = ("tpch", "onefile", "peer", "keys")
TPCH_TABLES = ("customer", "lineitem", "nation", "orders", "part", "partsupp", "region", "supplier")
PEER_ROWS, PEER_APPENDS, PEER_MUTATIONS = 31250, 32, 8
KEYS = 1000


def required_extension(package, name):
    found = peer_extension(package, name)
    if not found:
        raise SystemExit(f"the {name} extension is not installed for DuckDB {duckdb.__version__}: "
                         f"pip install {package.replace('_', '-')}=={duckdb.__version__}")
    return found


def norm_value(v):
    if isinstance(v, float):
        return float(f"{v:.6g}") if math.isfinite(v) else v
    if isinstance(v, decimal.Decimal):
        return float(f"{v:.6g}")
    if isinstance(v, (list, tuple)):
        return tuple(norm_value(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, norm_value(x)) for k, x in v.items()))
    return v


def normalized(rows):
    """Rows as a comparable multiset: values rounded, rows sorted."""
    return sorted((tuple(norm_value(v) for v in row) for row in rows), key=repr)


def ms(seconds):
    return "error" if seconds is None else f"{seconds * 1000:.1f}"


def speed(peer, skade):
    """skade's speed relative to a peer (peer time / skade time), or None."""
    return None if not peer or not skade else peer / skade


def fmt_ratio(r):
    return "-" if r is None else f"x{r:.2f}"


class Bench:
    def __init__(self, args):
        self.args = args
        self.root = tempfile.mkdtemp(prefix="skade-scans-")
        self.con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
        self.summary = []    # (label, ratio, meaning)
        self.problems = []   # mismatches and failures, reported at the end
        self.peer_built = False
        self.iceberg_loaded = False
        con = self.con
        if not os.path.exists(EXTENSION):
            raise SystemExit(f"skade extension not built: {EXTENSION}")
        con.execute(f"LOAD '{EXTENSION}'")
        con.execute(f"LOAD '{required_extension('duckdb_extension_ducklake', 'ducklake')}'")
        con.execute(f"ATTACH '{self.root}/lake.skade' AS sk (TYPE skade)")
        con.execute(f"ATTACH 'ducklake:{self.root}/meta.ducklake' AS dl "
                    f"(DATA_PATH '{self.root}/dl/', DATA_INLINING_ROW_LIMIT 0)")

    # ---- helpers -------------------------------------------------------------------------

    def sql(self, q):
        return self.con.execute(q).fetchall()

    def timed_sql(self, q):
        t = time.perf_counter()
        self.con.execute(q)
        return time.perf_counter() - t

    def problem(self, text):
        self.problems.append(text)
        print(f"  !! {text}", flush=True)

    def skade_files(self, table):
        """The live data files of skade table `table` (in sk.main), from its Iceberg metadata,
        checked against the table's row count."""
        if not self.iceberg_loaded:
            load_iceberg(self.con)
            self.iceberg_loaded = True
        rows = self.sql(f"SELECT metadata_location FROM skade_tables('sk') "
                        f"WHERE schema_name = 'main' AND table_name = '{table}'")
        if not rows:
            raise SystemExit(f"skade_tables('sk') does not list main.{table}")
        meta = rows[0][0]
        files = self.sql(f"""
            SELECT file_path, record_count FROM iceberg_metadata('{meta}')
            WHERE manifest_content = 'DATA' AND status <> 'DELETED' AND content <> 'DELETED'
            ORDER BY file_path""")
        # Same files through the warehouse folder, to catch a metadata reading that missed some.
        listed = sorted(os.path.join(dp, f) for dp, _, fs in os.walk(os.path.dirname(os.path.dirname(meta)) + "/data")
                        for f in fs if f.endswith(".parquet"))
        n = self.sql(f"SELECT count(*) FROM sk.{table}")[0][0]
        if sum(r[1] for r in files) != n:
            self.problem(f"skade table {table}: its data files' record counts sum to {sum(r[1] for r in files)}, "
                         f"the table has {n} rows (files: {len(files)}; in the folder: {len(listed)})")
        return [r[0] for r in files], listed

    @staticmethod
    def file_list(files):
        return "[" + ", ".join(f"'{f}'" for f in files) + "]"

    def file_stats(self, files):
        """(files, row groups, min rows/group, max rows/group, MB) of Parquet files."""
        if not files:
            return (0, 0, 0, 0, 0.0)
        groups, lo, hi = self.sql(f"""
            SELECT count(*), min(n), max(n) FROM (
                SELECT file_name, row_group_id, any_value(row_group_num_rows) AS n
                FROM parquet_metadata({self.file_list(files)}) GROUP BY ALL)""")[0]
        size = sum(os.path.getsize(f) for f in files) / 1e6
        return (len(files), groups, lo, hi, size)

    def race(self, label, engines, repeat=None, fetch=None, check=True):
        """Times each engine's query: a warm-up, then `repeat` alternating rounds, best of each.
        engines: {name: (use_statement or None, sql)}. Returns ({name: seconds or None}, {name: rows})."""
        repeat = repeat or self.args.repeat
        fetch = fetch or (lambda cur: cur.fetchall())
        best = {e: float("inf") for e in engines}
        results, failed = {}, {}
        for rnd in range(repeat + 1):
            for e, (use, q) in engines.items():
                if e in failed:
                    continue
                try:
                    if use:
                        self.con.execute(use)
                    t = time.perf_counter()
                    r = fetch(self.con.execute(q))
                    seconds = time.perf_counter() - t
                except duckdb.Error as err:
                    failed[e] = f"{type(err).__name__}: {err}".splitlines()[0]
                    self.problem(f"{label}: {e} failed: {failed[e]}\n     SQL: {' '.join(q.split())}")
                    continue
                finally:
                    if use:
                        self.con.execute("USE memory.main")
                if rnd == 0:
                    results[e] = r
                else:
                    best[e] = min(best[e], seconds)
        times = {e: (None if e in failed else best[e]) for e in engines}
        if check:
            ok = [e for e in engines if e not in failed]
            if ok:
                ref = ok[0]
                want = normalized(results[ref])
                for e in ok[1:]:
                    got = normalized(results[e])
                    if got != want:
                        extra = [r for r in got if r not in want][:3]
                        missing = [r for r in want if r not in got][:3]
                        self.problem(f"{label}: {e} differs from {ref}: {len(got)} vs {len(want)} rows; "
                                     f"e.g. only in {e}: {extra}; only in {ref}: {missing}")
        return times, results

    # ---- 1. TPC-H ------------------------------------------------------------------------

    def tpch(self):
        con, args = self.con, self.args
        print(f"\n== 1. TPC-H sf={args.sf} ==", flush=True)
        con.execute(f"LOAD '{required_extension('duckdb_extension_tpch', 'tpch')}'")
        con.execute("USE memory.main")
        seconds = self.timed_sql(f"CALL dbgen(sf={args.sf})")
        counts = {t: self.sql(f"SELECT count(*) FROM memory.main.{t}")[0][0] for t in TPCH_TABLES}
        print(f"dbgen {seconds:.1f} s; rows: " + ", ".join(f"{t} {n:,}" for t, n in counts.items()), flush=True)

        pq = f"{self.root}/pq"
        os.makedirs(pq)
        load = {"read_parquet": 0.0, "DuckLake": 0.0, "skade": 0.0}
        con.execute("CREATE SCHEMA memory.pq")
        con.execute("CREATE SCHEMA memory.skf")
        for t in TPCH_TABLES:
            load["read_parquet"] += self.timed_sql(f"COPY memory.main.{t} TO '{pq}/{t}.parquet' (FORMAT parquet)")
            con.execute(f"CREATE VIEW memory.pq.{t} AS SELECT * FROM read_parquet('{pq}/{t}.parquet')")
            load["DuckLake"] += self.timed_sql(f"CREATE TABLE dl.{t} AS SELECT * FROM memory.main.{t}")
            load["skade"] += self.timed_sql(f"CREATE TABLE sk.{t} AS SELECT * FROM memory.main.{t}")
        print("load (8 CTAS / COPY): " + ", ".join(f"{e} {s:.2f} s" for e, s in load.items())
              + f"   skade write speed vs DuckLake {fmt_ratio(speed(load['DuckLake'], load['skade']))}, "
              f"vs COPY {fmt_ratio(speed(load['read_parquet'], load['skade']))}", flush=True)
        self.summary.append(("tpch load: skade vs DuckLake (CTAS)", speed(load["DuckLake"], load["skade"]), ""))
        self.summary.append(("tpch load: skade vs COPY TO parquet", speed(load["read_parquet"], load["skade"]), ""))

        # Types must survive the round trip (a different type would also change results).
        native_types = {t: self.sql(f"SELECT column_name, data_type FROM information_schema.columns "
                                    f"WHERE table_catalog = 'memory' AND table_schema = 'main' AND table_name = '{t}' "
                                    f"ORDER BY ordinal_position") for t in TPCH_TABLES}
        for cat in ("sk", "dl"):
            for t in TPCH_TABLES:
                got = self.sql(f"SELECT column_name, data_type FROM information_schema.columns WHERE table_catalog = "
                               f"'{cat}' AND table_schema = 'main' AND table_name = '{t}' ORDER BY ordinal_position")
                if got != native_types[t]:
                    self.problem(f"column types of {cat}.{t} differ from native: {got} vs {native_types[t]}")

        # read_parquet over skade's own files of each table.
        for t in TPCH_TABLES:
            files, listed = self.skade_files(t)
            if sorted(files) != listed:
                print(f"  note: {t}: {len(files)} live data files in the metadata, {len(listed)} .parquet in its folder")
            con.execute(f"CREATE VIEW memory.skf.{t} AS SELECT * FROM read_parquet({self.file_list(files)})")
            if t == "lineitem":
                sk_stats = self.file_stats(files)
        dl_files = [r[0] for r in self.sql("SELECT data_file FROM ducklake_list_files('dl', 'lineitem')")]
        for name, st in (("skade", sk_stats), ("DuckLake", self.file_stats(dl_files)),
                         ("COPY", self.file_stats([f"{pq}/lineitem.parquet"]))):
            print(f"lineitem files by {name:<8}: {st[0]} files, {st[1]} row groups "
                  f"({st[2]:,}..{st[3]:,} rows each), {st[4]:.1f} MB", flush=True)

        engines = {"native": "USE memory.main", "read_parquet": "USE memory.pq", "DuckLake": "USE dl",
                   "skade": "USE sk", "rp skade files": "USE memory.skf"}
        queries = self.sql("SELECT query_nr, query FROM tpch_queries() ORDER BY query_nr")
        cols = list(engines)
        print(f"\nms, best of {args.repeat} after a warm-up; ratios: skade's speed (peer time / skade time)")
        head = f"{'q':>3} " + "".join(f"{c:>15}" for c in cols) + f"{'sk vs DL':>10}{'sk vs rp':>10}{'sk vs rpsk':>11}"
        print(head)
        totals = {e: 0.0 for e in engines}
        per_query = {"DuckLake": [], "read_parquet": [], "rp skade files": []}
        complete = True
        for nr, q in queries:
            times, _ = self.race(f"TPC-H Q{nr}", {e: (use, q) for e, use in engines.items()})
            for e, s in times.items():
                if s is None:
                    complete = False
                else:
                    totals[e] += s
            for peer in per_query:
                r = speed(times[peer], times["skade"])
                if r:
                    per_query[peer].append(r)
            print(f"{nr:>3} " + "".join(f"{ms(times[c]):>15}" for c in cols)
                  + f"{fmt_ratio(speed(times['DuckLake'], times['skade'])):>10}"
                  + f"{fmt_ratio(speed(times['read_parquet'], times['skade'])):>10}"
                  + f"{fmt_ratio(speed(times['rp skade files'], times['skade'])):>11}", flush=True)
        print("sum " + "".join(f"{ms(totals[c]):>15}" for c in cols)
              + f"{fmt_ratio(speed(totals['DuckLake'], totals['skade'])):>10}"
              + f"{fmt_ratio(speed(totals['read_parquet'], totals['skade'])):>10}"
              + f"{fmt_ratio(speed(totals['rp skade files'], totals['skade'])):>11}"
              + ("" if complete else "   (some queries failed: sums are partial)"))
        geo = {p: (math.exp(sum(map(math.log, v)) / len(v)) if v else None) for p, v in per_query.items()}
        print("geomean of per-query ratios: " + ", ".join(f"vs {p} {fmt_ratio(r)}" for p, r in geo.items()))
        print(f"read_parquet over skade's own files: total {ms(totals['rp skade files'])} ms "
              f"(vs read_parquet over COPY's files {ms(totals['read_parquet'])} ms)", flush=True)
        self.summary += [
            (f"tpch sf={args.sf} total: skade vs DuckLake", speed(totals["DuckLake"], totals["skade"]), "target >= 1.2"),
            (f"tpch sf={args.sf} total: skade vs read_parquet (COPY files)", speed(totals["read_parquet"], totals["skade"]),
             "target >= 0.91 (within 1.1x)"),
            (f"tpch sf={args.sf} total: skade vs read_parquet (skade's files)",
             speed(totals["rp skade files"], totals["skade"]), "target >= 0.91"),
            (f"tpch sf={args.sf} total: skade vs native", speed(totals["native"], totals["skade"]), ""),
            (f"tpch sf={args.sf} geomean per query: skade vs DuckLake", geo["DuckLake"], ""),
        ]
        for t in TPCH_TABLES:  # free the memory for the sections after
            con.execute(f"DROP TABLE memory.main.{t}")

    # ---- 2. one-file table ---------------------------------------------------------------

    def onefile(self):
        con, n = self.con, self.args.rows
        print(f"\n== 2. one table of {n:,} rows written by ONE INSERT ==", flush=True)
        gen = (f"SELECT i AS id, 'customer-' || (i * 7919 % 100003) || repeat('x', (i % 23)::INTEGER) AS s, "
               f"i / 7.0 + (i % 1000) * 1.5 AS x FROM range({n}) r(i)")
        create = "CREATE TABLE {}.onefile (id BIGINT, s VARCHAR, x DOUBLE)"
        load = {}
        for cat in ("memory.main", "dl", "sk"):
            con.execute(create.format(cat))
            load[cat] = self.timed_sql(f"INSERT INTO {cat}.onefile {gen}")
        print(f"insert: skade {ms(load['sk'])} ms, DuckLake {ms(load['dl'])} ms, native {ms(load['memory.main'])} ms  "
              f"skade vs DuckLake {fmt_ratio(speed(load['dl'], load['sk']))}")
        files, listed = self.skade_files("onefile")
        st = self.file_stats(files)
        print(f"skade wrote {st[0]} data file(s), {st[1]} row groups ({st[2]:,}..{st[3]:,} rows each), {st[4]:.1f} MB"
              + (f"; {len(listed)} .parquet in its folder" if len(listed) != len(files) else ""), flush=True)
        rp = f"read_parquet({self.file_list(files)})"
        sources = {"skade": "sk.onefile", "rp skade files": rp, "DuckLake": "dl.onefile", "native": "memory.main.onefile"}
        # Every column of every row decoded and consumed: a hash of all three per row, summed.
        q1 = "SELECT count(*), sum(hash(id, s, x)), max(length(s)) FROM {}"
        print(f"full scan, every column decoded: {q1.format('t')}")
        t1, _ = self.race("onefile hash scan", {e: (None, q1.format(src)) for e, src in sources.items()})
        # ... and every value materialized in the client: the whole table fetched as Arrow.
        q2 = "SELECT * FROM {}"
        print(f"full scan into an Arrow table in Python: {q2.format('t')}  (checked: row count and a hash of the rows)")
        t2, r2 = self.race("onefile to Arrow", {e: (None, q2.format(src)) for e, src in sources.items()},
                           fetch=lambda cur: cur.to_arrow_table(), check=False)
        arrow_digest = {}
        for e, table in r2.items():
            con.register("arrow_result", table)
            arrow_digest[e] = self.sql("SELECT count(*), sum(hash(id, s, x)) FROM arrow_result")
            con.unregister("arrow_result")
        for e, d in arrow_digest.items():
            if d != arrow_digest.get("skade", d):
                self.problem(f"onefile to Arrow: {e} gives {d}, skade {arrow_digest['skade']}")
        for label, times in (("hash scan", t1), ("to Arrow", t2)):
            print(f"{label:<10} " + "  ".join(f"{e} {ms(s)} ms" for e, s in times.items())
                  + f"   skade vs rp-skade-files {fmt_ratio(speed(times['rp skade files'], times['skade']))}"
                  f", vs DuckLake {fmt_ratio(speed(times['DuckLake'], times['skade']))}", flush=True)
            self.summary += [(f"onefile {label}: skade vs read_parquet (skade's files)",
                              speed(times["rp skade files"], times["skade"]), "target >= 0.91"),
                             (f"onefile {label}: skade vs DuckLake", speed(times["DuckLake"], times["skade"]), "")]

    # ---- 3. peer table after deletes and updates ----------------------------------------

    def build_peer(self):
        if self.peer_built:
            return
        con = self.con
        gen = "SELECT i, 'c' || (i % 997), (i % 1000) * 1.5 FROM range({lo}, {hi}) r(i)"
        tables = {"skade": ("sk.peer", "id BIGINT PRIMARY KEY"), "DuckLake": ("dl.peer", "id BIGINT"),
                  "skade clean": ("sk.peer_clean", "id BIGINT PRIMARY KEY")}
        for name, (t, key) in tables.items():
            con.execute(f"CREATE TABLE {t} ({key}, customer VARCHAR, amount DOUBLE)")
            s = 0.0
            for k in range(PEER_APPENDS):
                s += self.timed_sql(f"INSERT INTO {t} " + gen.format(lo=k * PEER_ROWS, hi=(k + 1) * PEER_ROWS))
            m = 0.0
            if name != "skade clean":
                rng = random.Random(7)  # the peer workload's seed and ranges
                for _ in range(PEER_MUTATIONS):
                    lo = rng.randrange(0, PEER_APPENDS * PEER_ROWS - 1000)
                    m += self.timed_sql(f"DELETE FROM {t} WHERE id >= {lo} AND id < {lo + 1000}")
                for _ in range(PEER_MUTATIONS):
                    lo = rng.randrange(0, PEER_APPENDS * PEER_ROWS - 1000)
                    m += self.timed_sql(f"UPDATE {t} SET amount = amount + 1 WHERE id >= {lo} AND id < {lo + 1000}")
            print(f"built {t:<14}: {PEER_APPENDS} appends {s:.2f} s" + (f", 8 deletes + 8 updates {m:.2f} s" if m else "")
                  + f"; {self.sql(f'SELECT count(*) FROM {t}')[0][0]:,} rows", flush=True)
        self.peer_built = True

    def peer(self):
        print(f"\n== 3. peer table: {PEER_APPENDS} appends x {PEER_ROWS:,} rows, 8 range deletes, 8 range updates ==",
              flush=True)
        self.build_peer()
        files, _ = self.skade_files("peer_clean")
        st = self.file_stats(files)
        print(f"skade's clean table: {st[0]} data files, {st[1]} row groups ({st[2]:,}..{st[3]:,} rows each), "
              f"{st[4]:.1f} MB", flush=True)
        q = "SELECT count(*), sum(hash(id, customer, amount)), sum(amount) FROM {}"
        print(f"full all-column scan: {q.format('t')}")
        times, res = self.race("peer full scan", {"skade": (None, q.format("sk.peer")),
                                                  "DuckLake": (None, q.format("dl.peer"))})
        clean, res2 = self.race("peer clean full scan", {"skade clean": (None, q.format("sk.peer_clean")),
                                                         "rp skade files": (None, q.format(
                                                             f"read_parquet({self.file_list(files)})"))})
        rows = {e: r[0][0] for e, r in {**res, **res2}.items()}
        for e, s in {**times, **clean}.items():
            print(f"  {e:<15} {ms(s):>10} ms   {rows.get(e, 0):>10,} rows"
                  + (f"   {rows[e] / s / 1e6:.1f} M rows/s" if s and e in rows else ""))
        cost = speed(clean["skade clean"], times["skade"])
        print(f"skade vs DuckLake {fmt_ratio(speed(times['DuckLake'], times['skade']))}; "
              f"with deletes vs without {fmt_ratio(cost)} (the time the deletes/updates add: "
              f"{fmt_ratio(None if not cost else 1 / cost)}); clean skade vs read_parquet on its files "
              f"{fmt_ratio(speed(clean['rp skade files'], clean['skade clean']))}", flush=True)
        self.summary += [
            ("peer full scan: skade vs DuckLake", speed(times["DuckLake"], times["skade"]), ""),
            ("peer full scan: skade with deletes vs without (speed)", cost, "1.0 = deletes cost nothing"),
            ("peer clean full scan: skade vs read_parquet (skade's files)",
             speed(clean["rp skade files"], clean["skade clean"]), "target >= 0.91"),
        ]

    # ---- 4. keys -------------------------------------------------------------------------

    def keys(self):
        print(f"\n== 4. {KEYS:,} keys on the peer table (after its deletes and updates) ==", flush=True)
        self.build_peer()
        con = self.con
        keys = random.Random(11).sample(range(int(PEER_APPENDS * PEER_ROWS * 1.1)), KEYS)  # ~10% absent
        con.execute("CREATE OR REPLACE TABLE memory.main.keys (id BIGINT)")
        con.execute("INSERT INTO memory.main.keys SELECT unnest(?)", [keys])
        in_list = ", ".join(map(str, keys))
        qs = {"IN list": "SELECT * FROM {} WHERE id IN (" + in_list + ")",
              "JOIN keys": "SELECT t.* FROM {} t JOIN memory.main.keys USING (id)"}
        print("queries: SELECT * FROM t WHERE id IN (<1,000 keys>);  SELECT t.* FROM t JOIN keys USING (id)")
        for label, q in qs.items():
            times, res = self.race(f"keys {label}", {"skade": (None, q.format("sk.peer")),
                                                     "DuckLake": (None, q.format("dl.peer"))})
            n = len(res.get("skade", []))
            print(f"{label:<10} skade {ms(times['skade'])} ms   DuckLake {ms(times['DuckLake'])} ms   "
                  f"skade vs DuckLake {fmt_ratio(speed(times['DuckLake'], times['skade']))}   ({n} rows)", flush=True)
            self.summary.append((f"keys {label}: skade vs DuckLake", speed(times["DuckLake"], times["skade"]), ""))
        # For reference: skade's own point lookup, all keys in one call, against the same rows.
        times, res = self.race("keys skade_lookup", {
            "skade_lookup": (None, f"SELECT * FROM skade_lookup('sk.peer', [{in_list}])"),
            "skade IN": (None, qs["IN list"].format("sk.peer"))})
        print(f"skade_lookup(list of {KEYS}) {ms(times['skade_lookup'])} ms   (skade IN list {ms(times['skade IN'])} ms)",
              flush=True)

    # ---- run -----------------------------------------------------------------------------

    def close(self):
        try:
            self.con.close()
        finally:
            if self.args.keep:
                print(f"kept {self.root}")
            else:
                shutil.rmtree(self.root, ignore_errors=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sf", type=float, default=1.0, help="TPC-H scale factor (default 1)")
    p.add_argument("--rows", type=int, default=1_000_000, help="rows of the one-file table (default 1,000,000)")
    p.add_argument("--only", default=",".join(SECTIONS), help=f"sections, comma-separated: {','.join(SECTIONS)}")
    p.add_argument("--repeat", type=int, default=3, help="timed runs per query and engine, after a warm-up")
    p.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = p.parse_args()
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = [s for s in only if s not in SECTIONS]
    if unknown:
        p.error(f"unknown section(s) {unknown}; choose from {','.join(SECTIONS)}")
    if args.repeat < 1 or args.rows < 1 or args.sf <= 0:
        p.error("--repeat, --rows and --sf must be positive")

    print(f"DuckDB {duckdb.__version__}, skade {EXTENSION}; sections {','.join(only)}; "
          f"{os.cpu_count()} cores; best of {args.repeat}", flush=True)
    bench = Bench(args)
    started = time.perf_counter()
    try:
        for section in SECTIONS:
            if section in only:
                getattr(bench, section)()
    finally:
        bench.close()
    print("\n== summary: skade's speed relative to each peer (peer time / skade time; >1 = skade faster) ==")
    for label, r, note in bench.summary:
        print(f"  {label:<62} {fmt_ratio(r):>8}" + (f"   ({note})" if note else ""))
    print(f"total run time {time.perf_counter() - started:.0f} s")
    if bench.problems:
        print(f"\n{len(bench.problems)} problem(s):")
        for text in bench.problems:
            print(f"  - {text}")
        sys.exit(1)
    print("all results identical across engines")


if __name__ == "__main__":
    main()
