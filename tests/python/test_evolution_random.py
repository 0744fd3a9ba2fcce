"""Randomized schema evolution (issue 24): random ALTER TABLEs (add, drop, rename, promote a
column, partition the skade table by random transforms or reset it; on a table created without a
key, ADD PRIMARY KEY while ids may repeat, refused by both or taken by both) mixed with INSERT,
UPDATE, DELETE and upserts, run on a skade table and on a DuckDB table side by side. After every statement
the two must hold the same rows, also under a random filter (which partition values may prune);
at the end every snapshot skade wrote must read, through time travel, exactly as the DuckDB table
was when it was written, with the columns it had then. Then the older snapshots are expired, and the
changelog of a window from the start of the kept history to each kept snapshot (a full reload of
it, plain or netted) must hold that snapshot's rows in the table's current columns, each found by
its field id across the renames, drops and adds since (issue 42)."""
import random

import duckdb
import pytest

from conftest import connect

PROMOTIONS = {"INTEGER": "BIGINT", "TINYINT": "SMALLINT", "SMALLINT": "INTEGER", "FLOAT": "DOUBLE",
              "UTINYINT": "USMALLINT", "DECIMAL(9,2)": "DECIMAL(18,2)"}
NEW_TYPES = ["INTEGER", "VARCHAR", "DOUBLE", "TINYINT", "FLOAT", "UTINYINT", "DECIMAL(9,2)", "BIGINT", "BLOB",
             "TIMESTAMP_S"]
# the partition transforms each column type takes (identity: the bare column)
TRANSFORMS = {"BIGINT": ["id", "bucket", "truncate"], "INTEGER": ["id", "bucket", "truncate"],
              "SMALLINT": ["id", "bucket", "truncate"], "TINYINT": ["id", "bucket", "truncate"],
              "UTINYINT": ["id", "bucket"], "USMALLINT": ["id", "bucket"], "VARCHAR": ["id", "bucket", "truncate"],
              "DECIMAL(9,2)": ["id", "bucket", "truncate"], "DECIMAL(18,2)": ["id", "bucket", "truncate"],
              "DOUBLE": ["id"], "FLOAT": ["id"], "BLOB": ["id", "bucket", "truncate"],
              "TIMESTAMP_S": ["id", "bucket"]}


def literal(ty, rng):
    if rng.random() < 0.15:
        return "NULL"
    value = {
        "INTEGER": lambda: str(rng.randint(-1000, 1000)),
        "BIGINT": lambda: str(rng.randint(-10**12, 10**12)),
        "SMALLINT": lambda: str(rng.randint(-3000, 3000)),
        "TINYINT": lambda: str(rng.randint(-128, 127)),
        "UTINYINT": lambda: str(rng.randint(0, 255)),
        "USMALLINT": lambda: str(rng.randint(0, 65535)),
        "VARCHAR": lambda: f"'s{rng.randint(0, 99)}'",
        "DOUBLE": lambda: repr(rng.randint(-100, 100) / 4),
        "FLOAT": lambda: repr(rng.randint(-100, 100) / 4),
        "DECIMAL(9,2)": lambda: f"{rng.randint(-10**6, 10**6) / 100:.2f}",
        "DECIMAL(18,2)": lambda: f"{rng.randint(-10**6, 10**6) / 100:.2f}",
        "BLOB": lambda: f"'b{rng.randint(0, 99)}\\x{rng.randint(0, 255):02X}'",
        # (its infinities were stored as NULL: issue 42)
        "TIMESTAMP_S": lambda: rng.choice(["'infinity'", "'-infinity'", f"'{rng.randint(1900, 2100)}-01-02 03:04:05'"]),
    }[ty]()
    return f"({value})::{ty}"  # (parenthesized: -128::TINYINT casts 128 before it negates)


class Mirror:
    """One statement on both tables; the rows compared after it."""

    def __init__(self, tmp_path, seed, keyed):
        self.rng = random.Random(seed)
        self.keyed = keyed
        self.con = connect()
        self.con.execute(f"ATTACH '{tmp_path / 'lake.skade'}' AS lake (TYPE skade)")
        self.columns = {"id": "BIGINT", "a": "INTEGER", "s": "VARCHAR"}
        self.idents = {"id": 0, "a": 1, "s": 2}  # a column's identity (its field id) by its name now
        self.next_id, self.serial = 0, 0
        self.snapshots = []  # (snapshot id, column names, rows)
        self.history = []
        self.sources = set()  # columns any partition spec used: never dropped or retyped
        self.both(f"CREATE TABLE {{t}} (id BIGINT{' PRIMARY KEY' if keyed else ''}, a INTEGER, s VARCHAR)")

    def both(self, sql):
        self.history.append(sql)
        for t in ("lake.t", "memory.main.t"):
            self.con.execute(sql.format(t=t))

    def rows(self, table, at=""):
        cols = ", ".join(f'"{c}"' for c in self.columns)
        return sorted(self.con.execute(f"SELECT {cols} FROM {table}{at}").fetchall(), key=repr)

    def check(self):
        ours, theirs = self.rows("lake.t"), self.rows("memory.main.t")
        assert ours == theirs, f"after {self.history[-1]}\nhistory: {self.history}"
        c = self.rng.choice(list(self.columns))
        where = f' WHERE "{c}" {self.rng.choice(["=", "<", ">=", "<>"])} {literal(self.columns[c], self.rng)}'
        ours, theirs = self.rows("lake.t", where), self.rows("memory.main.t", where)
        assert ours == theirs, f"{where} after {self.history[-1]}\nhistory: {self.history}"
        described = [(r[0], r[1]) for r in self.con.execute("DESCRIBE lake.t").fetchall()]
        assert described == list(self.columns.items()), f"after {self.history[-1]}"

    def snapshot(self):
        sid = self.con.execute("SELECT max(snapshot_id) FROM skade_snapshots('lake.t')").fetchone()[0]
        if sid is not None and (not self.snapshots or self.snapshots[-1][0] != sid):
            self.snapshots.append((sid, dict(self.columns), self.rows("memory.main.t"), dict(self.idents)))

    def values(self):
        return ", ".join(literal(ty, self.rng) if c != "id" else str(self.new_id()) for c, ty in self.columns.items())

    def new_id(self):
        # without a key, now and then an id already used: ADD PRIMARY KEY must then be refused
        if not self.keyed and self.next_id and self.rng.random() < 0.05:
            return self.rng.randint(1, self.next_id)
        return self.fresh_id()

    def fresh_id(self):
        self.next_id += 1
        return self.next_id

    def step(self):
        rng, others = self.rng, [c for c in self.columns if c != "id"]
        op = rng.choice(["insert", "insert", "update", "delete", "upsert", "add", "drop", "rename", "promote",
                         "partition", "key"])
        if op == "insert":
            rows = ", ".join(f"({self.values()})" for _ in range(rng.randint(1, 20)))
            self.both(f"INSERT INTO {{t}} VALUES {rows}")
        elif op == "update" and others:
            c = rng.choice(others)
            self.both(f'UPDATE {{t}} SET "{c}" = {literal(self.columns[c], rng)} WHERE id % {rng.randint(2, 5)} = 0')
        elif op == "delete":
            self.both(f"DELETE FROM {{t}} WHERE id % {rng.randint(3, 9)} = {rng.randint(0, 2)}")
        elif op == "key" and not self.keyed:
            # refused by both (an id twice) or taken by both
            outcomes = []
            for t in ("lake.t", "memory.main.t"):
                try:
                    self.con.execute(f"ALTER TABLE {t} ADD PRIMARY KEY (id)")
                    outcomes.append(None)
                except duckdb.Error as e:
                    outcomes.append(str(e))
            self.history.append(f"ALTER TABLE {{t}} ADD PRIMARY KEY (id) -> {outcomes}")
            assert (outcomes[0] is None) == (outcomes[1] is None), f"history: {self.history}"
            self.keyed = outcomes[0] is None
            if not self.keyed:  # the next try may take it
                self.both("DELETE FROM {t} WHERE id IN (SELECT id FROM {t} GROUP BY id HAVING count(*) > 1)")
        elif op == "upsert" and self.next_id and self.keyed:
            key = rng.randint(1, self.next_id)
            vals = ", ".join(str(key) if c == "id" else literal(ty, rng) for c, ty in self.columns.items())
            self.both(f"INSERT OR REPLACE INTO {{t}} VALUES ({vals})")
        elif op == "add" and len(self.columns) < 8:
            self.serial += 1
            name, ty = f"c{self.serial}", rng.choice(NEW_TYPES)
            self.both(f'ALTER TABLE {{t}} ADD COLUMN "{name}" {ty}')
            self.columns[name] = ty
            self.idents[name] = 100 + self.serial
        elif op == "drop" and len([c for c in others if c not in self.sources]) > 1:
            c = rng.choice([c for c in others if c not in self.sources])
            self.both(f'ALTER TABLE {{t}} DROP COLUMN "{c}"')
            del self.columns[c]
            del self.idents[c]
        elif op == "rename" and others:
            c = rng.choice(others)
            self.serial += 1
            new = f"r{self.serial}"
            self.both(f'ALTER TABLE {{t}} RENAME COLUMN "{c}" TO "{new}"')
            self.columns = {(new if k == c else k): v for k, v in self.columns.items()}
            self.idents = {(new if k == c else k): v for k, v in self.idents.items()}
            if c in self.sources:
                self.sources = (self.sources - {c}) | {new}
        elif op == "promote":
            promotable = [c for c in others if self.columns[c] in PROMOTIONS and c not in self.sources]
            if promotable:
                c = rng.choice(promotable)
                self.both(f'ALTER TABLE {{t}} ALTER COLUMN "{c}" TYPE {PROMOTIONS[self.columns[c]]}')
                self.columns[c] = PROMOTIONS[self.columns[c]]
        elif op == "partition":
            keys = []
            for c in rng.sample(list(self.columns), rng.randint(0, 2)):
                form = rng.choice(TRANSFORMS[self.columns[c]])
                keys.append({"id": f'"{c}"', "bucket": f'bucket({rng.randint(1, 8)}, "{c}")',
                             "truncate": f'truncate({rng.randint(1, 5)}, "{c}")'}[form])
                self.sources.add(c)
            sql = f"ALTER TABLE lake.t SET PARTITIONED BY ({', '.join(keys)})" if keys else \
                "ALTER TABLE lake.t RESET PARTITIONED BY"
            self.history.append(sql)
            self.con.execute(sql)
        self.check()
        self.snapshot()


@pytest.mark.parametrize("seed,keyed", [(0, True), (1, True), (2, False), (3, False), (4, False)])
def test_random_schema_changes_and_dml_match_duckdb_at_every_snapshot(tmp_path, seed, keyed):
    m = Mirror(tmp_path, seed, keyed)
    for _ in range(70):
        m.step()
    assert len(m.snapshots) > 10
    for sid, columns, expected, _ in m.snapshots:
        cols = ", ".join(f'"{c}"' for c in columns)
        got = sorted(m.con.execute(f"SELECT {cols} FROM lake.t AT (VERSION => {sid})").fetchall(), key=repr)
        assert got == expected, f"snapshot {sid} (seed {seed})\nhistory: {m.history}"
    all_ids = [r[0] for r in m.con.execute("SELECT snapshot_id FROM skade_snapshots('lake.t')").fetchall()]
    keep = m.rng.randint(1, min(6, len(all_ids) - 1))
    m.con.execute(f"SELECT * FROM skade_expire_snapshots('lake.t', retain_last := {keep})")
    kept_ids = {r[0] for r in m.con.execute("SELECT snapshot_id FROM skade_snapshots('lake.t')").fetchall()}
    kept = [s for s in m.snapshots if s[0] in kept_ids]
    assert kept and len(kept_ids) == keep
    now = ", ".join(f'"{c}"' for c in m.columns)
    for sid, columns, expected, idents in kept:
        # the snapshot's rows in the current columns: by identity, NULL where it had no such column
        names_then = {ident: name for name, ident in idents.items()}
        positions = [list(columns).index(names_then[m.idents[c]]) if m.idents[c] in names_then else None
                     for c in m.columns]
        want = sorted((tuple(None if p is None else row[p] for p in positions) for row in expected), key=repr)
        for collapse in ("", ", collapse := true"):
            got = m.con.execute(f"SELECT {now}, _change_type, _full_reload FROM "
                                f"skade_changelog('lake.t', NULL, {sid}{collapse})").fetchall()
            where = f"changelog to {sid}{collapse} after keeping {keep} (seed {seed})\nhistory: {m.history}"
            assert {r[-2] for r in got} <= {"INSERT"}, where
            assert all(r[-1] for r in got) or collapse, where
            assert sorted((r[:-2] for r in got), key=repr) == want, where
    m.con.close()
