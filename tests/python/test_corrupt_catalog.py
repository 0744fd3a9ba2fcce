"""A damaged catalog file (issue 17, items 3 and 4): every damage is a clean, named error.

A lake (a keyed table of 1,000 rows with a few commits, and a second schema with a table) is
closed, then copies of its catalog file are damaged: each 4 KiB page zeroed in turn, and 64 bytes
changed at random (anywhere, inside the JSON records, and around them). Each damaged file is
opened in a subprocess of its own, so that a crash or an abort is seen and its stderr kept:
ATTACH READ_ONLY, count(*) on each table, skade_check('lake') (on a copy, two at a time); then
ATTACH writable and INSERT into each table. skade refuses a writable copy of a catalog (its
tables' metadata names the original's files), so the writable pass puts the damaged bytes in
the lake's own file, one case at a time, and restores the file and its data folder after each.

For every damaged file: the process ends normally, stderr shows no panic, and every error names the
catalog file or says it is corrupt, never "internal error" or "a bug". Damage to a live record
(the page holding the tables, schemas, commit_log or meta records; bytes inside a JSON record) is
detected: by an error or by skade_check reporting 'damaged'. An error about a JSON record that
does not parse names that record.

Problems are collected over all copies and reported together, each with what reproduces it.
"""
import json
import os
import random
import re
import shutil
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import EXTENSION, connect

PAGE = 4096
TABLES = {"main.t": 1000, "s2.u": 2}
NEW_ROWS = {"main.t": "(100000, 'new')", "s2.u": "(3, 'z')"}

# Runs the steps of one mode on one damaged file and prints one JSON line: what each step gave.
# "ro": ATTACH READ_ONLY, count(*) on each table, skade_check, DETACH; then a writable ATTACH of the
# copy (which must be refused, cleanly). "rw" (the lake's own file): ATTACH writable and DETACH with
# nothing written; ATTACH writable again, INSERT into each table, count(*), DETACH.
PROBE = textwrap.dedent("""
    import json, sys, duckdb
    ext, mode, catalog = sys.argv[1], sys.argv[2], sys.argv[3]
    tables, new_rows = json.loads(sys.argv[4]), json.loads(sys.argv[5])
    steps = []

    def step(name, sql, fetch=False):
        entry = {"step": name, "sql": sql}
        sys.stderr.write(f"[step: {name}]\\n")  # so that what follows on stderr is placed
        sys.stderr.flush()
        try:
            rows = con.execute(sql).fetchall()
            entry["ok"] = True
            entry["rows"] = [list(r) for r in rows] if fetch else None
        except BaseException as e:  # noqa: B902  (everything a step raises is reported)
            entry["ok"] = False
            entry["error"] = f"{type(e).__name__}: {e}"
        steps.append(entry)
        return entry["ok"]

    con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
    con.execute(f"LOAD '{ext}'")
    if mode == "ro" and step("attach read_only", f"ATTACH '{catalog}' AS lake (TYPE skade, READ_ONLY)"):
        for t in tables:
            step(f"count {t}", f"SELECT count(*) FROM lake.{t}", fetch=True)
        step("skade_check", "SELECT part, status, problem FROM skade_check('lake')", fetch=True)
        step("detach read_only", "DETACH lake")
    if mode == "ro" and step("attach copy writable", f"ATTACH '{catalog}' AS lake (TYPE skade)"):
        step("detach copy writable", "DETACH lake")  # (a copy is refused writable: no INSERT into it)
    if mode == "rw" and step("attach writable", f"ATTACH '{catalog}' AS lake (TYPE skade)"):
        step("detach writable, nothing written", "DETACH lake")
    if mode == "rw" and step("attach writable again", f"ATTACH '{catalog}' AS lake (TYPE skade)"):
        for t, row in new_rows.items():
            if step(f"insert {t}", f"INSERT INTO lake.{t} VALUES {row}"):
                step(f"count {t} after insert", f"SELECT count(*) FROM lake.{t}", fetch=True)
        step("detach writable", "DETACH lake")
    sys.stderr.write("[step: close the connection]\\n")
    con.close()
    print("PROBE-RESULT " + json.dumps(steps), flush=True)
""")

BAD_TEXT = ("internal error", "a bug", "panicked")
# A Rust panic's own text, passed on as the reason: says nothing to whoever reads it.
PANIC_TEXT = ("entered unreachable code", "called `Result::unwrap()`", "called `Option::unwrap()`",
              "out of range for slice", "index out of bounds", "attempt to subtract with overflow",
              "attempt to add with overflow", "assertion failed")
RECORD_NAME = re.compile(r"(tables|schemas|commit_log|commits|meta|counters) row")


def build_lake(folder):
    """The lake: a keyed table of 1,000 rows after four commits, a second schema and table."""
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "lake.skade")
    con = connect()
    con.execute(f"ATTACH '{path}' AS lake (TYPE skade)")
    con.execute("CREATE TABLE lake.t (id BIGINT PRIMARY KEY, v VARCHAR)")
    con.execute("INSERT INTO lake.t SELECT i, 'v' || i FROM range(1000) r(i)")
    for k in range(3):
        con.execute(f"UPDATE lake.t SET v = 'u{k}' WHERE id % 10 = {k}")
    con.execute("CREATE SCHEMA lake.s2")
    con.execute("CREATE TABLE lake.s2.u (a INTEGER, b VARCHAR)")
    con.execute("INSERT INTO lake.s2.u VALUES (1, 'x'), (2, 'y')")
    counts = {t: con.execute(f"SELECT count(*) FROM lake.{t}").fetchone()[0] for t in TABLES}
    assert counts == TABLES
    con.execute("DETACH lake")
    con.close()
    return path


def json_records(data):
    """(kind, start, end) of every JSON record in the file, live or left over from older pages."""
    out = []
    for m in re.finditer(rb'\{"(schema|name|seq)":[^{}]*\}', data):
        kind = {b"schema": "tables", b"name": "schemas", b"seq": "commit_log"}[m.group(1)]
        out.append((kind, m.start(), m.end()))
    return out


def live_record_pages(data):
    """The pages holding the current records: the ones whose damage must be detected."""
    records = json_records(data)
    pages = {}

    def pages_holding(kind, wanted):
        by_page = {}
        for k, s, e in records:
            if k == kind:
                by_page.setdefault(s // PAGE, set()).add(data[s:e])
        return sorted(p for p, held in by_page.items() if wanted <= held)

    # tables: the page holding every table's current record (the last version of each).
    current_tables = {}
    for k, s, e in records:
        if k == "tables":
            rec = json.loads(data[s:e])
            key = f"{rec['schema']}.{rec['name']}"
            if key not in current_tables or rec["metadata_location"] > current_tables[key]["metadata_location"]:
                current_tables[key] = rec
    wanted = {data[s:e] for k, s, e in records
              if k == "tables" and json.loads(data[s:e]) in current_tables.values()}
    pages["tables"] = pages_holding("tables", wanted)
    pages["schemas"] = pages_holding("schemas", {data[s:e] for k, s, e in records if k == "schemas"})
    last_seq = max(json.loads(data[s:e])["seq"] for k, s, e in records if k == "commit_log")
    pages["commit_log"] = sorted({s // PAGE for k, s, e in records
                                  if k == "commit_log" and json.loads(data[s:e])["seq"] == last_seq})
    pages["meta"] = sorted({m.start() // PAGE for m in re.finditer(rb"skade-catalog-", data)})
    assert set(current_tables) == set(TABLES), current_tables
    for part, held in pages.items():
        assert held, f"no page holds the {part} records"
    return pages


def probe(mode, catalog):
    """Runs PROBE (mode "ro" or "rw") on `catalog`: (returncode, steps or None, stdout, stderr)."""
    try:
        proc = subprocess.run(
            [sys.executable, "-c", PROBE, EXTENSION, mode, catalog, json.dumps(list(TABLES)), json.dumps(NEW_ROWS)],
            capture_output=True, text=True, timeout=120,
            env={**os.environ, "RUST_BACKTRACE": "0"})
    except subprocess.TimeoutExpired as e:
        return "timeout", None, e.stdout or "", e.stderr or ""
    steps = None
    for line in proc.stdout.splitlines():
        if line.startswith("PROBE-RESULT "):
            steps = json.loads(line[len("PROBE-RESULT "):])
    return proc.returncode, steps, proc.stdout, proc.stderr


class Run:
    """One probe subprocess on one file, and the problems found in what it gave."""

    def __init__(self, mode, catalog, result):
        self.mode, self.catalog = mode, catalog
        self.returncode, self.steps, self.stdout, self.stderr = result
        self.problems = []
        self.errors = []          # (step, message)
        self.damaged_parts = []   # (part, problem) that skade_check reported
        self._judge()

    def _judge(self):
        if self.returncode != 0:
            how = "hung (timeout)" if self.returncode == "timeout" else (
                f"was killed by signal {-self.returncode}" if self.returncode < 0 else f"exited {self.returncode}")
            self.problems.append(f"the process {how}")
        for bad in ("panicked", "RUST_BACKTRACE"):
            if bad in self.stderr:
                self.problems.append(f"stderr shows {bad!r}")
        if self.steps is None:
            self.problems.append("the probe printed no result")
            return
        for s in self.steps:
            if s["step"] == "attach copy writable" and s["ok"]:
                self.problems.append(f"{s['sql']}: a writable ATTACH of a copy was accepted (a healthy copy is "
                                     f"refused, since its tables' metadata names the original's files)")
            elif s["step"] == "attach copy writable" and "was created as" in s["error"]:
                self._judge_message(f"{s['step']} ({s['sql']})", s["error"])  # the expected refusal
            elif not s["ok"]:
                self.errors.append((s["step"], s["error"]))
                self._judge_message(f"{s['step']} ({s['sql']})", s["error"])
                if s["step"].startswith("attach") and "run skade_check" in s["error"]:
                    self.problems.append(f"{s['step']}: the message advises running skade_check, which needs the "
                                         f"catalog attached, and ATTACH just failed: {s['error']}")
            elif s["step"].startswith("count "):
                table = s["step"].split()[1]
                want = TABLES[table] + (1 if s["step"].endswith("after insert") else 0)
                got = s["rows"][0][0]
                if got != want:
                    self.problems.append(f"{s['sql']} ({s['step']}) gave {got} rows without an error, not {want}")
            elif s["step"] == "skade_check":
                for part, status, why in s["rows"]:
                    if status not in ("ok", "damaged"):
                        self.problems.append(f"skade_check status {status!r} for {part}")
                    if status != "ok":
                        self.damaged_parts.append((part, why))
                        self._judge_message(f"skade_check row {part!r}", why or "")

    def _judge_message(self, where, message):
        lower = message.lower()
        for bad in BAD_TEXT:
            if bad in lower:
                self.problems.append(f"{where}: the message says {bad!r}: {message}")
        raw = [t for t in PANIC_TEXT if t.lower() in lower]
        if raw:
            self.problems.append(f"{where}: the message passes on a Rust panic's text {raw}: {message}")
        if self.catalog not in message and "corrupt" not in lower:
            self.problems.append(f"{where}: the message neither names {self.catalog} nor says it is corrupt: "
                                 f"{message}")
        if "does not parse" in lower and not RECORD_NAME.search(message):
            self.problems.append(f"{where}: a record does not parse, but the message does not say which: {message}")

    def report(self):
        lines = [f"  [{self.mode}] {self.catalog}"]
        lines += [f"    PROBLEM: {p}" for p in self.problems]
        for s in self.steps or []:
            lines.append(f"    {s['step']}: " + (("ok " + json.dumps(s["rows"])) if s["ok"] else s["error"]))
        if any(not ln.startswith("[step: ") for ln in self.stderr.strip().splitlines()):
            lines.append("    stderr: " + self.stderr.strip()[:3000].replace("\n", "\n            "))
        return "\n".join(lines)


class Outcome:
    """What one damage gave: read-only on a copy, writable in place."""

    def __init__(self, case, ro, rw):
        self.case, self.ro, self.rw = case, ro, rw
        self.problems = []  # about the case as a whole

    @property
    def runs(self):
        return [self.ro, self.rw]

    @property
    def all_problems(self):
        return self.problems + [p for r in self.runs for p in r.problems]

    @property
    def detected(self):
        return any(r.errors or r.damaged_parts for r in self.runs)

    def messages(self):
        return ([m for r in self.runs for _, m in r.errors]
                + [why or "" for r in self.runs for _, why in r.damaged_parts])

    def report(self):
        return "\n".join([f"--- {self.case}"] + [f"    PROBLEM: {p}" for p in self.problems]
                         + [r.report() for r in self.runs])


class Lake:
    """The lake the damage is done to: its catalog's bytes, and a pristine copy of its data folder."""

    def __init__(self, folder):
        self.path = build_lake(os.path.join(folder, "lake"))
        self.data_dir = self.path + ".data"
        self.pristine_data = os.path.join(folder, "pristine.data")
        shutil.copytree(self.data_dir, self.pristine_data)
        with open(self.path, "rb") as f:
            self.data = f.read()

    def restore(self):
        with open(self.path, "wb") as f:
            f.write(self.data)
        shutil.rmtree(self.data_dir)
        shutil.copytree(self.pristine_data, self.data_dir)

    def run(self, cases, folder):
        """cases: [(name, damaged bytes)] -> [Outcome]. Read-only on copies two at a time, then
        writable in the lake's own file one at a time."""
        copies = []
        for i, (_, damaged) in enumerate(cases):
            copies.append(os.path.join(str(folder), f"case{i:03}.skade"))
            with open(copies[-1], "wb") as f:
                f.write(damaged)
        with ThreadPoolExecutor(max_workers=2) as pool:
            ro = list(pool.map(lambda c: Run("ro", c, probe("ro", c)), copies))
        rw = []
        try:
            for _, damaged in cases:
                with open(self.path, "wb") as f:
                    f.write(damaged)
                rw.append(Run("rw", self.path, probe("rw", self.path)))
                self.restore()
        finally:
            self.restore()
        return [Outcome(name, r, w) for (name, _), r, w in zip(cases, ro, rw)]


def fail_on(outcomes, extra=()):
    bad = [o for o in outcomes if o.all_problems]
    if bad:
        pytest.fail(f"{len(bad)} of {len(outcomes)} damaged catalogs misbehave:\n"
                    + "\n".join([o.report() for o in bad] + list(extra)), pytrace=False)


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    lake = Lake(str(tmp_path_factory.mktemp("base")))
    assert len(lake.data) % PAGE == 0 and len(lake.data) // PAGE >= 8, len(lake.data)
    return lake


def test_check_healthy_lake(tmp_path):
    path = build_lake(str(tmp_path / "lake"))
    con = connect()
    con.execute(f"ATTACH '{path}' AS lake (TYPE skade, READ_ONLY)")
    rows = con.execute("SELECT part, status, problem FROM skade_check('lake')").fetchall()
    assert [d[0] for d in con.description] == ["part", "status", "problem"]
    assert rows, "skade_check returned no rows"
    assert all(status == "ok" and problem is None for _, status, problem in rows), rows
    parts = {p for p, _, _ in rows}
    for t in TABLES:
        assert any(t in p for p in parts), (t, parts)
    con.execute("DETACH lake")
    # Nothing is written, even attached writable: no commit, the file unchanged by the check.
    con.execute(f"ATTACH '{path}' AS lake (TYPE skade)")
    commits = con.execute("SELECT count(*) FROM skade_commits_since('lake', 0)").fetchone()[0]
    before = open(path, "rb").read()
    again = con.execute("SELECT part, status, problem FROM skade_check('lake')").fetchall()
    assert open(path, "rb").read() == before
    assert con.execute("SELECT count(*) FROM skade_commits_since('lake', 0)").fetchone()[0] == commits
    assert sorted(again) == sorted(rows)
    con.execute("DETACH lake")
    con.close()
    # The probe the damaged catalogs get finds nothing on a healthy one, read-only or writable.
    copy = str(tmp_path / "healthy.skade")
    shutil.copyfile(path, copy)
    outcome = Outcome("healthy", Run("ro", copy, probe("ro", copy)), Run("rw", path, probe("rw", path)))
    assert not outcome.detected, outcome.report()
    fail_on([outcome])


def test_zeroed_pages(lake, tmp_path):
    """Zeroes each 4 KiB page of the catalog in turn (page 0, redb's header, included)."""
    data = lake.data
    live = live_record_pages(data)
    cases = []
    for page in range(len(data) // PAGE):
        damaged = data[:page * PAGE] + bytes(PAGE) + data[(page + 1) * PAGE:]
        if damaged != data:  # an all-zero page has nothing to damage
            cases.append((f"page {page} zeroed", damaged))
    outcomes = lake.run(cases, tmp_path)
    by_page = {int(o.case.split()[1]): o for o in outcomes}
    for part, pages in live.items():
        for page in pages:
            o = by_page.get(page)
            if o is not None and not o.detected:
                o.problems.append(f"page {page} holds the live {part} records, but zeroing it went unnoticed")
    summary = (f"{len(data) // PAGE} pages, {len(cases)} not all zero; live record pages {live}; "
               f"damage detected on pages {sorted(p for p, o in by_page.items() if o.detected)}, unnoticed (and "
               f"harmless to every step) on {sorted(p for p, o in by_page.items() if not o.detected)}")
    print(summary)
    fail_on(outcomes, [summary])


def changed(data, offsets, rng):
    out = bytearray(data)
    for off in offsets:
        out[off] ^= rng.randrange(1, 256)  # always a different byte
    return bytes(out)


def test_random_bytes(lake, tmp_path):
    """64 bytes changed at random: anywhere in the file, inside the JSON records, and near them."""
    data = lake.data
    records = json_records(data)
    markers = [m.start() for pat in (rb'"metadata_location"', rb'"name"') for m in re.finditer(pat, data)]
    assert markers
    cases, targeted = [], {}
    for seed in range(6):
        rng = random.Random(seed)
        offsets = rng.sample(range(len(data)), 64)
        cases.append((f"seed {seed}: 64 bytes anywhere", changed(data, offsets, rng)))
    for seed, kind in enumerate(["tables", "schemas", "commit_log"] * 2, start=100):
        rng = random.Random(seed)
        spans = [(s, e) for k, s, e in records if k == kind]
        # At least one byte of every copy of the record (the live one among them), the rest at random.
        offsets = {rng.randrange(s, e) for s, e in spans}
        inside = [i for s, e in spans for i in range(s, e)]
        while len(offsets) < min(64, len(inside)):
            offsets.add(rng.choice(inside))
        name = f"seed {seed}: {len(offsets)} bytes inside the {kind} JSON records"
        targeted[name] = kind
        cases.append((name, changed(data, sorted(offsets), rng)))
    for seed in range(200, 204):
        rng = random.Random(seed)
        offsets = set()
        while len(offsets) < 64:
            offsets.add(min(len(data) - 1, max(0, rng.choice(markers) + rng.randrange(-96, 160))))
        cases.append((f"seed {seed}: 64 bytes near the \"metadata_location\"/\"name\" fields",
                      changed(data, sorted(offsets), rng)))
    outcomes = lake.run(cases, tmp_path)
    for o in outcomes:
        kind = targeted.get(o.case)
        if kind is None:
            continue
        if not o.detected:
            o.problems.append(f"the {kind} records were damaged, but nothing noticed")
        elif not any(f"{kind} row" in m for m in o.messages()):
            o.problems.append(f"the {kind} records were damaged, but no message names a {kind} row: "
                              f"{o.messages()}")
    for o in outcomes:
        print(f"{o.case}: {'detected' if o.detected else 'not detected'}, {len(o.all_problems)} problem(s)")
    fail_on(outcomes)
