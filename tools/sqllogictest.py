#!/usr/bin/env python3
"""Runs DuckDB-dialect sqllogictest files against the DuckDB running it (1.5.5 or 2.0.1, Python
client) with skade loaded.

Supported records (the subset skade's tests use):
  require skade | iceberg | ducklake      load an extension (skade: the built file)
  load <path>                             open a persistent database (default: in memory)
  restart                                 close and reopen the database (extensions reloaded)
  statement ok [conN]                     SQL must succeed
  statement error [conN]                  SQL must fail; text after ---- must be a substring
  query <types> [rowsort|nosort] [conN]   rows after ---- must match (tab-separated), or the one
                                          line `<REGEX>:pattern` match the whole result
  loop <var> <from> <to> ... endloop      repeat, substituting ${var}
  onlyif duckdb <version prefix>          the next statement or query runs only in that DuckDB
  # comment
`__TEST_DIR__` is a fresh directory per file, `__EXTENSION__` the extension path. `--config <file>`
runs the files under a configuration (sql_tests/configs/*.json, as DuckLake's test/configs):
`attach_path` replaces the path of every `ATTACH '<path>' ... (TYPE skade ...)`, to which
`attach_options` are added, `{path}` standing for
the catalog's path and `{unique}` for a name unique to the file and catalog; `s3_server: true`
starts the local S3 server (tools/s3_server.py, moto on 127.0.0.1) with a bucket `skade-tests`
and hands it to every DuckDB through the AWS environment variables (skade's fallback when no
secret is given); `data_path` is where `__TEST_DIR__/<catalog>.data`, a catalog's default
warehouse, went; `setup` runs after skade is loaded (`LOAD httpfs` loads PyPI's, `{s3_endpoint}`
is the server's); `skip` names files (with why) the configuration does not apply to. Values are
compared as DuckDB renders them (CAST AS VARCHAR); NULL is `NULL`, the empty string `(empty)`.
Prints one line per failure and ends with `N passed, N failed, N skipped` (a file that requires a
peer extension not installed is skipped). The extension: --extension, else $SKADE_EXTENSION, else the build
for this DuckDB (tools/hosts.py).
"""
import argparse
import concurrent.futures
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import traceback

import duckdb

from hosts import built_extension, peer_extension

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def site_extension(package: str, name: str) -> str:
    """A peer's extension file; missing, a failure where PyPI has it (1.5.5), else a skip."""
    found = peer_extension(package, name)
    if not found:
        if duckdb.__version__.startswith("1."):  # PyPI has every peer for 1.5.5: make installs them
            raise RuntimeError(f"extension {name} not installed (pip package {package}; make installs it)")
        raise Skipped(f"no {name} extension for DuckDB {duckdb.__version__} on PyPI")
    return found


class Failure(Exception):
    pass


class Skipped(Exception):
    """A `require` of a peer extension that is not installed (e.g. no build for this DuckDB)."""


class Record:
    def __init__(self, kind, args, sql, expected, line, only=None):
        self.kind, self.args, self.sql, self.expected, self.line = kind, args, sql, expected, line
        self.only = only  # a DuckDB version prefix ("1", "2.0") the record is for, or None


def host_is(prefix):
    return (duckdb.__version__ + ".").startswith(prefix + ".")


def parse(path):
    lines = open(path, encoding="utf-8").read().split("\n")
    records, i, only = [], 0, None
    while i < len(lines):
        raw = lines[i]
        line = raw.strip()
        start = i + 1
        i += 1
        if not line or line.startswith("#"):
            continue
        words = line.split()
        kind = words[0]
        if kind == "onlyif":
            if len(words) != 3 or words[1] != "duckdb":
                raise Failure(f"{path}:{start}: expected 'onlyif duckdb <version prefix>'")
            only = words[2]
            continue
        if kind in ("statement", "query"):
            sql_lines = []
            while i < len(lines) and lines[i].strip() and lines[i].strip() != "----":
                sql_lines.append(lines[i])
                i += 1
            expected = None
            if i < len(lines) and lines[i].strip() == "----":
                i += 1
                expected = []
                while i < len(lines) and lines[i].strip():
                    expected.append(lines[i])
                    i += 1
            records.append(Record(kind, words[1:], "\n".join(sql_lines), expected, start, only))
            only = None
        elif kind in ("require", "load", "restart", "loop", "endloop", "mode", "sleep"):
            records.append(Record(kind, words[1:], None, None, start))
        else:
            raise Failure(f"{path}:{start}: unknown record '{line}'")
    return records


def expand_loops(records):
    out, i = [], 0
    while i < len(records):
        r = records[i]
        if r.kind != "loop":
            out.append(r)
            i += 1
            continue
        depth, j = 1, i + 1
        while j < len(records) and depth:
            depth += {"loop": 1, "endloop": -1}.get(records[j].kind, 0)
            j += 1
        body = expand_loops(records[i + 1:j - 1])
        var, lo, hi = r.args[0], int(r.args[1]), int(r.args[2])
        for v in range(lo, hi):
            for b in body:
                sub = lambda s: None if s is None else s.replace("${" + var + "}", str(v))
                out.append(Record(b.kind, b.args, sub(b.sql),
                                  None if b.expected is None else [sub(e) for e in b.expected], b.line, b.only))
        i = j
    return out


def render(v):
    if v is None:
        return "NULL"
    if v == "":
        return "(empty)"
    return str(v)


ATTACH_SKADE = re.compile(r"(ATTACH\s+(?:IF\s+NOT\s+EXISTS\s+)?'([^']*)'\s+AS\s+\w+\s*\(\s*TYPE\s+skade)", re.IGNORECASE)


class Runner:
    def __init__(self, path, extension, test_dir, config=None):
        self.path, self.extension, self.test_dir = path, extension, test_dir
        self.config = config or {}
        self.db_path = ":memory:"
        self.required = []
        self.db = None
        self.cons = {}

    def unique(self, catalog_path):
        """A name for the catalog at `catalog_path`, unique to this file's run."""
        return f"{os.path.basename(self.test_dir)}/{re.sub(r'[^A-Za-z0-9._-]', '_', catalog_path)}"

    def subst(self, s):
        data_path = self.config.get("data_path")
        if data_path:
            # `__TEST_DIR__/lake.skade.data` (a catalog's default warehouse) is where the
            # configuration's DATA_PATH put it
            s = re.sub(r"__TEST_DIR__/([^'\"/\s]+?)\.data",
                       lambda m: data_path.replace("{unique}", self.unique(f"{self.test_dir}/{m.group(1)}")), s)
        s = s.replace("__TEST_DIR__", self.test_dir).replace("__EXTENSION__", self.extension)
        options = self.config.get("attach_options")
        attach_path = self.config.get("attach_path")
        if options or attach_path:
            def add(m):
                head, path = m.group(1), m.group(2)
                if path in ("", ":memory:"):
                    return head  # (no catalog file: the test expects the refusal)
                if attach_path:
                    head = head.replace(f"'{path}'", f"'{attach_path.replace('{unique}', self.unique(path))}'", 1)
                extra = (options or "").replace("{path}", path).replace("{unique}", self.unique(path))
                return f"{head}, {extra}" if extra else head
            s = ATTACH_SKADE.sub(add, s)
        endpoint = os.environ.get("AWS_ENDPOINT_URL", "")
        s = s.replace("{s3_endpoint}", endpoint.split("://", 1)[-1])
        return s

    def open(self):
        self.close()
        self.db = duckdb.connect(self.db_path, config={"allow_unsigned_extensions": "true"})
        for r in self.required:
            self.load(r)

    def close(self):
        for c in self.cons.values():
            c.close()
        self.cons = {}
        if self.db is not None:
            self.db.close()
        self.db = None

    def load(self, what):
        if what == "skade":
            self.db.execute(f"LOAD '{self.extension}'")
            self.setup()
        elif what == "iceberg":
            self.db.execute(f"LOAD '{site_extension('duckdb_extension_avro', 'avro')}'")
            self.db.execute(f"LOAD '{site_extension('duckdb_extension_iceberg', 'iceberg')}'")
        elif what == "httpfs":
            self.db.execute(f"LOAD '{site_extension('duckdb_extension_httpfs', 'httpfs')}'")
        elif what == "ducklake":
            self.db.execute(f"LOAD '{site_extension('duckdb_extension_ducklake', 'ducklake')}'")
        else:
            raise Failure(f"unknown requirement '{what}'")

    def setup(self):
        """The configuration's `setup` statements, after skade is loaded; `LOAD httpfs` loads
        PyPI's. Without httpfs (no build of it for this DuckDB on PyPI) a file that inspects a
        catalog's warehouse cannot run; the others run without the setup."""
        for sql in self.config.get("setup", []):
            if sql.strip().upper() == "LOAD HTTPFS":
                try:
                    self.load("httpfs")
                except Skipped as s:
                    if self.config.get("attach_path", "").startswith("s3://"):
                        raise Skipped(f"DuckDB attaches s3:// paths only with httpfs: {s}")
                    with open(self.path, encoding="utf-8") as f:
                        if INSPECTS_FILES.search(f.read()):
                            raise Skipped(f"it reads the warehouse's files in the bucket, which needs httpfs: {s}")
                    return
            else:
                self.db.execute(self.subst(sql))

    def con(self, args):
        names = [a for a in args if re.fullmatch(r"con\w*", a)]
        if not names:
            return self.db
        name = names[0]
        if name not in self.cons:
            self.cons[name] = self.db.cursor()
        return self.cons[name]

    def run(self):
        records = expand_loops(parse(self.path))
        self.open()
        try:
            for r in records:
                if r.only and not host_is(r.only):
                    continue
                try:
                    self.step(r)
                except Failure as f:
                    raise Failure(f"{self.path}:{r.line}: {f}")
        finally:
            self.close()

    def step(self, r):
        if r.kind == "require":
            self.required.append(r.args[0])
            self.load(r.args[0])
        elif r.kind == "load":
            self.db_path = self.subst(r.args[0]) if r.args else ":memory:"
            self.open()
        elif r.kind == "restart":
            self.open()
        elif r.kind in ("mode", "sleep"):
            pass
        elif r.kind == "statement":
            self.statement(r)
        elif r.kind == "query":
            self.query(r)

    def statement(self, r):
        sql = self.subst(r.sql)
        want_error = r.args and r.args[0] == "error"
        try:
            result = self.con(r.args).execute(sql)
            if result.description:
                # read it all, as DuckDB's own runner does: an error may come with the rows, and
                # DuckDB 2.0's client refuses the next statement while a result is unread
                result.fetchall()
        except duckdb.Error as e:
            if not want_error:
                raise Failure(f"statement failed: {e}\n  SQL: {sql}")
            expected = "\n".join(r.expected or []).strip()
            if expected and self.subst(expected) not in str(e):
                raise Failure(f"wrong error:\n  expected to contain: {expected}\n  got: {e}\n  SQL: {sql}")
            return
        if want_error:
            raise Failure(f"statement should have failed\n  SQL: {sql}")

    def query(self, r):
        sql = self.subst(r.sql)
        types = r.args[0] if r.args else ""
        sort = "rowsort" in r.args or "valuesort" in r.args
        con = self.con(r.args)
        try:
            statements = duckdb.extract_statements(sql)
            if len(statements) == 1 and statements[0].type == duckdb.StatementType.SELECT:
                # rendered by DuckDB itself, exactly as CAST(... AS VARCHAR)
                rel = con.sql(sql)
                n = len(rel.columns)
                rows = rel.select(", ".join(f"CAST(#{i + 1} AS VARCHAR)" for i in range(n))).fetchall()
            else:  # INSERT ... (a row count): plain values
                result = con.execute(sql)
                n = len(result.description or [])
                rows = result.fetchall()
        except duckdb.Error as e:
            raise Failure(f"query failed: {e}\n  SQL: {sql}")
        if types and len(types) != n:
            raise Failure(f"query has {n} columns, header says {len(types)} ({types})\n  SQL: {sql}")
        got = ["\t".join(render(v) for v in row) for row in rows]
        want = [self.subst(e) for e in (r.expected or [])]
        if len(want) == 1 and want[0].startswith("<REGEX>:"):
            # DuckDB's convention: the whole result, rows on lines, must match the pattern
            if not re.fullmatch(want[0][len("<REGEX>:"):], "\n".join(got), re.DOTALL):
                raise Failure(f"result does not match {want[0]!r}\n  SQL: {sql}\n  got: {got!r}")
            return
        want = ["\t".join(re.split(r"\t| {2,}", w.strip())) if "\t" not in w else w for w in want]
        if sort:
            got, want = sorted(got), sorted(want)
        if got != want:
            diff = "\n".join(f"    {'==' if g == w else '!='} got  {g!r}\n       want {w!r}"
                             for g, w in zip(got + [None] * (len(want) - len(got)), want + [None] * (len(got) - len(want))))
            raise Failure(f"wrong result ({len(got)} rows, expected {len(want)})\n  SQL: {sql}\n{diff}")


def run_file(args):
    path, extension, config = args
    skip = (config or {}).get("skip", {}).get(os.path.relpath(path, ROOT).replace(os.sep, "/"))
    if skip:
        return path, None, f"not under config {config['name']}: {skip}"
    test_dir = tempfile.mkdtemp(prefix="skade-slt-")
    try:
        Runner(path, extension, test_dir, config).run()
        return path, None, None
    except Skipped as s:
        return path, None, str(s)
    except Failure as f:
        return path, str(f), None
    except Exception:
        return path, traceback.format_exc(), None
    finally:
        shutil.rmtree(test_dir, ignore_errors=True)


S3_BUCKET = "skade-tests"
# What a test reads the warehouse's files with (DuckDB's own readers: in a bucket, through httpfs).
INSPECTS_FILES = re.compile(r"\.skade\.data|\b(read_text|read_blob|glob|parquet_metadata|parquet_schema|read_parquet|iceberg_scan)\s*\(")


def start_s3_server():
    """The local S3 server for a configuration that needs one, reached through the AWS
    environment variables the worker processes inherit; stopped when this process ends."""
    python = os.path.join(ROOT, "build", "venv", "bin", "python")  # (moto is installed there)
    proc = subprocess.Popen([python, os.path.join(HERE, "s3_server.py"), "--bucket", S3_BUCKET, "--exit-with-stdin"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if not line.startswith("port "):
        sys.exit(f"the local S3 server did not start (tools/s3_server.py): {line!r}")
    os.environ.update({
        "AWS_ACCESS_KEY_ID": "skadetest", "AWS_SECRET_ACCESS_KEY": "skadetestsecret", "AWS_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{int(line.split()[1])}", "AWS_ALLOW_HTTP": "true",
    })
    return proc


def main():
    p = argparse.ArgumentParser()
    p.add_argument("paths", nargs="*", default=[os.path.join(ROOT, "sql_tests")])
    p.add_argument("--extension", default=built_extension(), help="default: the build for this DuckDB")
    p.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 2)
    p.add_argument("--config", help="a configuration file (sql_tests/configs/*.json)")
    a = p.parse_args()
    config = None
    if a.config:
        import json
        with open(a.config, encoding="utf-8") as f:
            config = json.load(f)
        config["name"] = os.path.splitext(os.path.basename(a.config))[0]
        print(f"== configuration {config['name']}: {config.get('description', '')}", flush=True)
        if config.get("s3_server"):
            server = start_s3_server()  # noqa: F841 (kept alive until main returns)
    files = []
    for path in a.paths:
        files += sorted(glob.glob(os.path.join(path, "**", "*.test"), recursive=True)) if os.path.isdir(path) else [path]
    extension = os.path.abspath(a.extension)
    passed = failed = skipped = 0
    with concurrent.futures.ProcessPoolExecutor(max_workers=a.jobs) as pool:
        for path, error, skip in pool.map(run_file, [(f, extension, config) for f in files]):
            rel = os.path.relpath(path, ROOT)
            if skip:
                skipped += 1
                print(f"skip {rel}: {skip}", flush=True)
            elif error:
                failed += 1
                print(f"FAIL {rel}\n{error}\n", flush=True)
            else:
                passed += 1
                print(f"ok   {rel}", flush=True)
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    sys.exit(1 if failed or not files else 0)


if __name__ == "__main__":
    main()
