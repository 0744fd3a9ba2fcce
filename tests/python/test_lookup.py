"""skade_lookup from Python: parameters (prepared statements keep their binding), NULL keys, no
descriptor left open on files a rollback removed, and lookups against a full scan: after a random
history of inserts, updates, deletes, upserts, transactions and compactions, every lookup (one key,
a list of keys, `WHERE pk = ...`, `WHERE pk IN (...)`) at sampled snapshots, and inside an open
transaction, gives exactly the rows a full read gives."""
import os
import random
from collections import Counter
from datetime import datetime, timedelta

import pytest

from conftest import connect


def open_parquet_files():
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if ".parquet" in target:
            out.append(target)
    return out


def test_parameters_and_null_keys(tmp_path):
    con = connect()
    con.execute(f"ATTACH '{tmp_path / 'lake.skade'}' AS lake (TYPE skade)")
    con.execute("CREATE TABLE lake.t (id BIGINT PRIMARY KEY, v VARCHAR)")
    con.execute("INSERT INTO lake.t SELECT i, 'v' || i FROM range(10000) r(i)")
    for k in (0, 4096, 9999, 10000):
        rows = con.execute("SELECT * FROM skade_lookup('lake.t', ?)", [k]).fetchall()
        assert rows == ([(k, f"v{k}")] if k < 10000 else [])
    assert con.execute("SELECT * FROM skade_lookup('lake.t', ?::BIGINT[])", [[1, 2]]).fetchall() == [
        (1, "v1"),
        (2, "v2"),
    ]
    assert con.execute("SELECT * FROM skade_lookup('lake.t', ?::BIGINT[])", [None]).fetchall() == []
    assert con.execute("SELECT * FROM skade_lookup('lake.t', ?::BIGINT)", [None]).fetchall() == []


def test_rolled_back_files_are_not_held_open(tmp_path):
    con = connect()
    con.execute(f"ATTACH '{tmp_path / 'lake.skade'}' AS lake (TYPE skade)")
    con.execute("CREATE TABLE lake.t (id BIGINT PRIMARY KEY, v VARCHAR)")
    # a transaction's own files, looked up, then rolled back (removed)
    con.execute("BEGIN")
    con.execute("INSERT INTO lake.t SELECT i, 'x' FROM range(100000) r(i)")
    assert con.execute("SELECT v FROM skade_lookup('lake.t', 5)").fetchall() == [("x",)]
    con.execute("ROLLBACK")
    assert not [f for f in open_parquet_files() if str(tmp_path) in f]


def literal(value):
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, datetime):
        return f"TIMESTAMP '{value.isoformat(sep=' ')}'"
    return str(value)


class Layout:
    """A primary key: its columns, the SQL of the key numbered by a SQL integer expression j, and the
    same key as Python values (as a full scan returns them). The history inserts even j only, so odd
    j are keys between live ones (inside files', row groups' and pages' bounds) that never exist."""

    def __init__(self, columns, types, sql, python):
        self.columns, self.types, self.sql, self.python = columns, types, sql, python

    def create(self):
        columns = ", ".join(f"{c} {t}" for c, t in zip(self.columns, self.types))
        return f"CREATE TABLE lake.t ({columns}, v VARCHAR, n INTEGER, PRIMARY KEY ({', '.join(self.columns)}))"

    def key_sql(self, j):
        return ", ".join(self.sql(j))

    def lookup_key(self, key, rng=None):
        """skade_lookup's key argument: a scalar, or a STRUCT naming each column (in any order)."""
        if len(self.columns) == 1:
            return literal(key[0])
        fields = [f"'{c}': {literal(v)}" for c, v in zip(self.columns, key)]
        if rng is not None:
            rng.shuffle(fields)
        return "{" + ", ".join(fields) + "}"

    def where_eq(self, key):
        return " AND ".join(f"{c} = {literal(v)}" for c, v in zip(self.columns, key))

    def where_in(self, keys):
        """Every key column in a list: for composite keys, the cross product of the lists."""
        return " AND ".join(f"{c} IN ({', '.join(sorted({literal(k[i]) for k in keys}))})"
                            for i, c in enumerate(self.columns))

    def matches_in(self, keys):
        """The test a key passes for where_in(keys)."""
        lists = [{k[i] for k in keys} for i in range(len(self.columns))]
        return lambda key: all(v in values for v, values in zip(key, lists))

    def key_range(self, lo, hi):
        """A range of the first key column from the key numbered lo to the one numbered hi (strings
        compare as strings: where 'k{hi}' < 'k{lo}', the keys that start with 'k{lo}')."""
        a, b = self.python(lo)[0], self.python(hi)[0]
        if b < a:
            b = a + "~"
        return f"{self.columns[0]} BETWEEN {literal(a)} AND {literal(b)}"


EPOCH = datetime(2020, 1, 1)
LAYOUTS = {
    "bigint": Layout(["id"], ["BIGINT"], lambda j: [f"{j}"], lambda j: (j,)),
    "varchar": Layout(["id"], ["VARCHAR"], lambda j: [f"'k' || ({j})"], lambda j: (f"k{j}",)),
    # (a, b) = (j // 16, j % 16): a range of a is a run of consecutive keys
    "composite": Layout(["a", "b"], ["INTEGER", "VARCHAR"],
                        lambda j: [f"(({j}) // 16)::INTEGER", f"'b' || (({j}) % 16)"],
                        lambda j: (j // 16, f"b{j % 16}")),
    # microsecond steps that are not whole seconds: the lookup must compare the full value
    "timestamp": Layout(["id"], ["TIMESTAMP"],
                        lambda j: [f"TIMESTAMP '2020-01-01' + to_microseconds(({j})::BIGINT * 1000003)"],
                        lambda j: (EPOCH + timedelta(microseconds=j * 1000003),)),
}


def scan(con, layout, snapshot=None):
    """The table's rows by key, from a full read (no filter, so not the lookup path)."""
    at = f" AT (VERSION => {snapshot})" if snapshot is not None else ""
    rows = con.execute(f"SELECT * FROM lake.t{at}").fetchall()
    table = {row[:len(layout.columns)]: row for row in rows}
    assert len(table) == len(rows), "a primary key has one live row"
    return table


def check_lookups(con, layout, reference, keys, rng, snapshot=None, where_eq=False):
    """Every way to look keys up agrees with `reference` (the rows of a full read)."""
    as_of = f", as_of := {snapshot}" if snapshot is not None else ""
    source = f"lake.t AT (VERSION => {snapshot})" if snapshot is not None else "lake.t"
    for key in keys:
        expected = [reference[key]] if key in reference else []
        got = con.execute(f"SELECT * FROM skade_lookup('lake.t', {layout.lookup_key(key, rng)}{as_of})").fetchall()
        assert got == expected, (snapshot, key)
        if where_eq:
            got = con.execute(f"SELECT * FROM {source} WHERE {layout.where_eq(key)}").fetchall()
            assert got == expected, (snapshot, key)
    # one call for all keys, one repeated: a row per key found, in the order given, a repeat once
    listed = list(keys)
    listed.insert(rng.randrange(len(listed) + 1), rng.choice(listed))
    expected = [reference[k] for k in dict.fromkeys(listed) if k in reference]
    given = ", ".join(layout.lookup_key(k) for k in listed)
    got = con.execute(f"SELECT * FROM skade_lookup('lake.t', [{given}]{as_of})").fetchall()
    assert got == expected, snapshot
    # WHERE pk IN (...): no order promised, each row once
    got = Counter(con.execute(f"SELECT * FROM {source} WHERE {layout.where_in(keys)}").fetchall())
    matches = layout.matches_in(keys)
    assert got == Counter(row for key, row in reference.items() if matches(key)), snapshot


def sample_keys(rng, reference, before, written, never, count=12):
    """Keys whose row differs from `before` (the state one commit earlier: what a lookup reading the
    wrong files or deletes would get wrong), present keys, keys gone from `reference` (deleted, or
    not inserted yet), keys that never existed (between live ones, past the end, rolled back),
    shuffled, each once."""
    touched = sorted(k for k in reference.keys() | before.keys() if reference.get(k) != before.get(k))
    keys = rng.sample(touched, min(count // 2, len(touched)))
    keys += rng.sample(sorted(reference), min(count, len(reference)))
    gone = sorted(written - reference.keys())
    keys += rng.sample(gone, min(count // 2, len(gone)))
    keys += rng.sample(sorted(never), min(count // 4, len(never)))
    keys = list(dict.fromkeys(keys))
    rng.shuffle(keys)
    return keys


@pytest.mark.parametrize("layout_name", sorted(LAYOUTS))
def test_lookups_agree_with_a_full_read(tmp_path, layout_name):
    """After a random history (appends of 1..300 rows and one of several row groups, key-range and
    key-list updates and deletes, upserts of live, deleted and new keys, committed and rolled-back
    transactions, compactions), skade_lookup at sampled snapshots (one key at a time and as one
    list) and `WHERE pk = ...` / `WHERE pk IN (...)` return exactly the rows of a full read of the
    same snapshot; inside an open transaction they see its own writes and deletes, and after a
    rollback no longer do."""
    layout = LAYOUTS[layout_name]
    con = connect()
    con.execute(f"ATTACH '{tmp_path / 'lake.skade'}' AS lake (TYPE skade)")
    con.execute(layout.create())
    rng = random.Random(23)
    next_i = 0  # keys j = 2 * i for i < next_i have been written (or rolled back)
    never = set()  # keys no committed snapshot ever held

    def insert(verb, lo, hi, v="CASE WHEN i % 9 = 4 THEN NULL ELSE 'v' || i END", n="i % 7"):
        # half the batches in scattered key order (a row group is written sorted by key, so its page
        # bounds stay narrow; files' bounds overlap, bloom filters decide)
        order = rng.choice(["", " ORDER BY hash(i)"])
        con.execute(f"{verb} INTO lake.t SELECT {layout.key_sql('2 * i')}, {v}, {n} FROM range({lo}, {hi}) r(i){order}")

    def live_keys(count):
        # a few live keys (an absent one if none is live), as the transaction sees them
        current = scan(con, layout)
        return rng.sample(sorted(current), min(count, len(current))) or [layout.python(1)]

    ops = ["insert"] * 3 + ["update", "update_keys", "delete", "delete_keys", "upsert", "upsert", "txn",
                            "rollback", "compact"]
    for step in range(40):
        # the first append has several key pages; one compaction at least
        op = "insert" if step == 0 else "compact" if step == 20 else rng.choice(ops)
        if op == "insert":
            count = 4500 if step == 0 else rng.randint(1, 300)
            insert("INSERT", next_i, next_i + count)
            next_i += count
        elif op == "update":
            lo = rng.randrange(next_i)
            con.execute(f"UPDATE lake.t SET n = n + 1, v = v || 'u' WHERE {layout.key_range(2 * lo, 2 * lo + 60)}")
        elif op == "update_keys":
            # by a list of keys: the scan that finds the rows to change pins the key (the lookup path)
            con.execute(f"UPDATE lake.t SET n = -n, v = 'k{step}' WHERE {layout.where_in(live_keys(5))}")
        elif op == "delete":
            lo = rng.randrange(next_i)
            con.execute(f"DELETE FROM lake.t WHERE {layout.key_range(2 * lo, 2 * lo + 40)}")
        elif op == "delete_keys":
            con.execute(f"DELETE FROM lake.t WHERE {layout.where_in(live_keys(5))}")
        elif op == "upsert":
            # live, deleted and new keys: the newest row wins, deleted keys come back
            lo = rng.randrange(next_i)
            hi = lo + rng.randint(1, 80)
            insert("INSERT OR REPLACE", lo, hi, v=f"'r{step}-' || i", n=str(step))
            next_i = max(next_i, hi)
        elif op == "txn":
            # delete, reinsert and update the same key in one commit
            lo = rng.randrange(next_i)
            con.execute("BEGIN")
            con.execute(f"DELETE FROM lake.t WHERE {layout.key_range(2 * lo, 2 * lo + 6)}")
            con.execute(f"INSERT INTO lake.t SELECT {layout.key_sql(str(2 * lo))}, 'back', {step}")
            con.execute(f"UPDATE lake.t SET n = -1 WHERE {layout.where_eq(layout.python(2 * lo))}")
            con.execute("COMMIT")
        elif op == "rollback":
            # nothing of it is ever visible: its keys never exist
            con.execute("BEGIN")
            insert("INSERT", next_i, next_i + 20)
            never |= {layout.python(2 * i) for i in range(next_i, next_i + 20)}
            next_i += 20
            con.execute(f"DELETE FROM lake.t WHERE {layout.where_in(live_keys(5))}")
            con.execute("ROLLBACK")
        else:
            con.execute("SELECT * FROM skade_compact('lake.t')")
    # every key numbered below next_i was committed at some snapshot (appends and upserts take
    # consecutive numbers), except those of rolled-back transactions
    written = {layout.python(2 * i) for i in range(next_i)} - never
    # odd numbers: between live keys; and one far past the end
    never |= {layout.python(2 * rng.randrange(next_i) + 1) for _ in range(10)} | {layout.python(2 * next_i + 10**6)}

    snapshots = [s for (s,) in con.execute(
        "SELECT snapshot_id FROM skade_snapshots('lake.t') ORDER BY sequence_number").fetchall()]
    assert len(snapshots) > 20
    # a compaction rewrote the files (a `replace` snapshot): older snapshots still read the old ones
    assert "replace" in {op for (op,) in con.execute("SELECT operation FROM skade_snapshots('lake.t')").fetchall()}
    chosen = [snapshots[0], snapshots[-1]] + rng.sample(snapshots[1:-1], 10)
    for snapshot in chosen:
        # the reference: a full read of the same snapshot
        reference = scan(con, layout, snapshot)
        index = snapshots.index(snapshot)
        before = scan(con, layout, snapshots[index - 1]) if index else {}
        keys = sample_keys(rng, reference, before, written, never)
        check_lookups(con, layout, reference, keys, rng, snapshot, where_eq=True)

    # the latest snapshot, without as_of
    committed = scan(con, layout)
    assert committed == scan(con, layout, snapshots[-1])
    keys = sample_keys(rng, committed, scan(con, layout, snapshots[-2]), written, never)
    check_lookups(con, layout, committed, keys, rng, where_eq=True)

    # an open transaction: its own inserts, deletes, updates and upserts (some of its own rows)
    con.execute("BEGIN")
    insert("INSERT", next_i, next_i + 200)
    mine = [layout.python(2 * i) for i in range(next_i, next_i + 200)]
    next_i += 200
    lo = rng.randrange(next_i - 200)
    con.execute(f"DELETE FROM lake.t WHERE {layout.key_range(2 * lo, 2 * lo + 40)}")
    con.execute(f"DELETE FROM lake.t WHERE {layout.where_in(live_keys(5) + rng.sample(mine, 5))}")
    con.execute(f"UPDATE lake.t SET v = 'mine' WHERE {layout.where_in(live_keys(5) + rng.sample(mine, 5))}")
    insert("INSERT OR REPLACE", next_i - 210, next_i - 190, v="'txn'", n="-7")
    # a committed key deleted and inserted again: its old row is deleted, its new one is the transaction's
    again = rng.choice(sorted(committed))
    con.execute(f"DELETE FROM lake.t WHERE {layout.where_eq(again)}")
    con.execute(f"INSERT INTO lake.t SELECT {', '.join(literal(v) for v in again)}, 'again', 0")
    inside = scan(con, layout)
    assert inside != committed
    # the keys it changed (its own, live and deleted, among them) and others
    keys = sample_keys(rng, inside, committed, written | set(mine), never, count=24)
    keys = [again] + [k for k in keys if k != again]
    assert inside[again][-2:] == ("again", 0)
    check_lookups(con, layout, inside, keys, rng, where_eq=True)
    # as_of reads the snapshot alone, inside the transaction too
    check_lookups(con, layout, scan(con, layout, snapshots[-1]), keys, rng, snapshots[-1])
    con.execute("ROLLBACK")
    assert scan(con, layout) == committed
    check_lookups(con, layout, committed, keys, rng, where_eq=True)
    con.close()
