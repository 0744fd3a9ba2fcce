"""A catalog version (issue 47 item 2, docs/design/many-writers.md): DuckDB runs a prepared
statement's plan again, without binding it, while the lake's catalog version is unchanged. Every
test runs the same statements on a skade lake and on a native DuckDB database and compares: a
plan run again must never miss another connection's commit, its own transaction's changes, a
schema change, a dropped table, or run on column statistics that no longer hold (a sum DuckDB
would compute in 64 bits on stale bounds). SKADE_VERSION_ROUNDS sets the concurrent test's rounds
(small by default: CI's budget)."""
import os
import threading

import duckdb
import pytest

from conftest import connect

ROUNDS = int(os.environ.get("SKADE_VERSION_ROUNDS", "60"))
CATALOGS = ("lake", "nat")
BIG = 2**62  # two of these overflow BIGINT: a sum bounded by stale statistics would wrap


def open_both(tmp_path):
    db = connect()
    db.execute(f"ATTACH '{tmp_path / 'lake.skade'}' AS lake (TYPE skade)")
    db.execute(f"ATTACH '{tmp_path / 'nat.duckdb'}' AS nat")
    for cat in CATALOGS:
        db.execute(f"CREATE TABLE {cat}.t (id BIGINT, v BIGINT)")
        db.execute(f"INSERT INTO {cat}.t VALUES (1, 10), (2, 20)")
    return db


def outcome(cur, sql):
    """A statement's rows, or its error's class (the messages name different catalogs)."""
    try:
        return cur.execute(sql).fetchall()
    except duckdb.Error as e:
        return type(e).__name__


def on_both(tmp_path, steps):
    """Runs `steps(cat, a, b)` (two connections) against each catalog; returns their outcomes."""
    db = open_both(tmp_path)
    seen = {}
    for cat in CATALOGS:
        a, b = db.cursor(), db.cursor()
        seen[cat] = steps(cat, a, b)
    return seen


def test_a_prepared_read_sees_every_commit_of_another_connection(tmp_path):
    def steps(cat, a, b):
        a.execute(f"PREPARE p AS SELECT count(*), sum(v) FROM {cat}.t")
        out = [outcome(a, "EXECUTE p"), outcome(a, "EXECUTE p")]
        b.execute(f"INSERT INTO {cat}.t VALUES (3, {BIG}), (4, {BIG})")
        out.append(outcome(a, "EXECUTE p"))
        b.execute(f"DELETE FROM {cat}.t WHERE id = 3")
        out.append(outcome(a, "EXECUTE p"))
        b.execute(f"UPDATE {cat}.t SET v = -v WHERE id = 4")
        out += [outcome(a, "EXECUTE p"), outcome(a, "EXECUTE p")]
        return out

    seen = on_both(tmp_path, steps)
    assert seen["lake"] == seen["nat"]
    assert seen["lake"][2] == [(4, 30 + 2 * BIG)]


def test_a_prepared_read_sees_its_own_transaction_and_not_a_rolled_back_one(tmp_path):
    def steps(cat, a, b):
        a.execute(f"PREPARE p AS SELECT count(*), sum(v), max(v) FROM {cat}.t")
        out = [outcome(a, "EXECUTE p")]
        a.execute("BEGIN")
        out.append(outcome(a, "EXECUTE p"))
        a.execute(f"INSERT INTO {cat}.t VALUES (3, {BIG}), (4, {BIG})")
        out.append(outcome(a, "EXECUTE p"))
        a.execute(f"DELETE FROM {cat}.t WHERE id = 1")
        out.append(outcome(a, "EXECUTE p"))
        a.execute("ROLLBACK")
        out.append(outcome(a, "EXECUTE p"))
        a.execute("BEGIN")
        a.execute(f"INSERT INTO {cat}.t VALUES (5, 50)")
        out.append(outcome(a, "EXECUTE p"))
        a.execute("COMMIT")
        out.append(outcome(a, "EXECUTE p"))
        out.append(outcome(b, "SELECT count(*), sum(v), max(v) FROM " + cat + ".t"))
        return out

    seen = on_both(tmp_path, steps)
    assert seen["lake"] == seen["nat"]
    assert seen["lake"][2] == [(4, 30 + 2 * BIG, BIG)]


def test_a_prepared_statement_after_schema_changes_and_drops(tmp_path):
    def steps(cat, a, b):
        a.execute(f"PREPARE s AS SELECT * FROM {cat}.t ORDER BY id")
        a.execute(f"PREPARE c AS SELECT count(*) FROM {cat}.t")
        a.execute(f"PREPARE i AS INSERT INTO {cat}.t VALUES (9, 90)")
        out = [outcome(a, "EXECUTE s"), outcome(a, "EXECUTE c")]
        b.execute(f"ALTER TABLE {cat}.t ADD COLUMN w VARCHAR")
        # (DuckDB refuses to run a prepared statement whose result columns changed)
        out += [outcome(a, "EXECUTE s"), outcome(a, "EXECUTE c"), outcome(a, "EXECUTE i")]
        b.execute(f"ALTER TABLE {cat}.t DROP COLUMN w")
        out += [outcome(a, "EXECUTE s"), outcome(a, "EXECUTE c")]
        b.execute(f"DROP TABLE {cat}.t")
        out += [outcome(a, "EXECUTE s"), outcome(a, "EXECUTE c"), outcome(a, "EXECUTE i")]
        b.execute(f"CREATE TABLE {cat}.t (id BIGINT, v BIGINT)")
        b.execute(f"INSERT INTO {cat}.t VALUES (7, 70)")
        out += [outcome(a, "EXECUTE s"), outcome(a, "EXECUTE c"), outcome(a, "EXECUTE i"), outcome(a, "EXECUTE s")]
        # the same connection's own DDL inside a transaction
        a.execute("BEGIN")
        a.execute(f"ALTER TABLE {cat}.t RENAME COLUMN v TO value")
        out += [outcome(a, "EXECUTE c"), outcome(a, f"SELECT value FROM {cat}.t ORDER BY id")]
        a.execute("ROLLBACK")
        out += [outcome(a, "EXECUTE s")]
        return out

    seen = on_both(tmp_path, steps)
    assert seen["lake"] == seen["nat"]


def test_prepared_statements_run_while_other_connections_commit_and_alter(tmp_path):
    """Readers run their prepared plans again while a writer commits and another connection
    creates, alters and drops tables: every result is one a commit produced, counts never go back,
    and nothing a plan points at is freed under it."""
    db = connect()
    db.execute(f"ATTACH '{tmp_path / 'lake.skade'}' AS lake (TYPE skade)")
    db.execute("CREATE TABLE lake.t (id BIGINT, v BIGINT)")
    db.execute("INSERT INTO lake.t VALUES (0, 0)")
    errors, done = [], threading.Event()

    def reader():
        cur = db.cursor()
        cur.execute("PREPARE p AS SELECT count(*), sum(v) FROM lake.t")
        cur.execute("PREPARE q AS SELECT v FROM lake.t WHERE id = 0")
        last = 0
        try:
            while not done.is_set():
                count, total = cur.execute("EXECUTE p").fetchone()
                if count < last or total != (count - 1) * count // 2:
                    errors.append(f"count {count} after {last}, sum {total}")
                last = count
                if cur.execute("EXECUTE q").fetchall() != [(0,)]:
                    errors.append("the key row went missing")
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))

    def writer():
        cur = db.cursor()
        try:
            for n in range(1, ROUNDS + 1):
                cur.execute(f"INSERT INTO lake.t VALUES ({n}, {n})")
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))

    def ddl():
        cur = db.cursor()
        try:
            for n in range(ROUNDS // 3):
                cur.execute(f"CREATE TABLE lake.u{n} (a INT)")
                cur.execute(f"ALTER TABLE lake.u{n} ADD COLUMN b INT")
                cur.execute(f"DROP TABLE lake.u{n}")
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))

    readers = [threading.Thread(target=reader) for _ in range(3)]
    writers = [threading.Thread(target=writer), threading.Thread(target=ddl)]
    for t in readers + writers:
        t.start()
    for t in writers:
        t.join()
    done.set()
    for t in readers:
        t.join()
    assert errors == []
    assert db.execute("SELECT count(*), sum(v) FROM lake.t").fetchone() == (ROUNDS + 1, ROUNDS * (ROUNDS + 1) // 2)


@pytest.mark.parametrize("read", ["sum(id)", "count(*)"])
def test_a_prepared_plan_run_again_notes_its_outside_inputs(tmp_path, read):
    """A plan DuckDB runs again without optimizing it still names the files it read as the
    transaction's lineage inputs; so does a count(*) DuckDB answers from a Parquet footer."""
    db = connect()
    db.execute(f"ATTACH '{tmp_path / 'lake.skade'}' AS lake (TYPE skade)")
    db.execute("CREATE TABLE lake.c (id BIGINT)")
    source = tmp_path / "in.parquet"
    db.execute(f"COPY (SELECT 1::BIGINT AS id) TO '{source}'")

    def inputs_of_a_transaction_that_runs(sql):
        db.execute("BEGIN")
        assert db.execute(sql).fetchone() == (1,)
        db.execute("INSERT INTO lake.c VALUES (1)")
        db.execute("COMMIT")
        return db.execute("SELECT [i.name for i in inputs] FROM skade_lineage('lake') "
                          "ORDER BY commit_seq DESC LIMIT 1").fetchone()[0]

    assert inputs_of_a_transaction_that_runs(f"SELECT {read} FROM read_parquet('{source}')") == [str(source)]
    db.execute(f"PREPARE q AS SELECT {read} FROM read_parquet('{source}')")
    assert db.execute("EXECUTE q").fetchone() == (1,)
    assert inputs_of_a_transaction_that_runs("EXECUTE q") == [str(source)]
    assert inputs_of_a_transaction_that_runs("EXECUTE q") == [str(source)]


@pytest.mark.parametrize("attached", [1, 2])
def test_a_prepared_read_of_a_lake_alone_is_kept_and_right(tmp_path, attached):
    """With one lake a prepared read of it is run again as planned; with two, bound again (one
    lake's table is the other's lineage input). Either way the rows are right."""
    db = connect()
    for n in range(attached):
        db.execute(f"ATTACH '{tmp_path / f'lake{n}.skade'}' AS lake{n} (TYPE skade)")
    db.execute("CREATE TABLE lake0.t AS SELECT range AS id FROM range(5)")
    db.execute("PREPARE p AS SELECT sum(id) FROM lake0.t")
    assert [db.execute("EXECUTE p").fetchone()[0] for _ in range(3)] == [10, 10, 10]
    db.execute("INSERT INTO lake0.t VALUES (5)")
    assert db.execute("EXECUTE p").fetchone()[0] == 15


def test_reads_at_a_time_keep_nothing_once_done(tmp_path):
    """Entries pinned by AT clauses belong to their transaction: a process that reads
    `AT (TIMESTAMP => now())` over and over, with no commit, does not grow (each statement names a
    new time; the entries used to gather in the shared entry set until the next commit)."""
    db = connect()
    db.execute(f"ATTACH '{tmp_path / 'lake.skade'}' AS lake (TYPE skade)")
    db.execute("CREATE TABLE lake.t AS SELECT range AS id FROM range(10)")
    db.execute("PREPARE v AS SELECT count(*) FROM lake.t AT (VERSION => 1)")

    def rss_kb():
        return int(open("/proc/self/status").read().split("VmRSS:")[1].split()[0])

    for _ in range(500):  # (warm: DuckDB's own caches)
        db.execute("SELECT count(*) FROM lake.t AT (TIMESTAMP => now())").fetchall()
    start = rss_kb()
    for _ in range(5000):
        assert db.execute("SELECT count(*) FROM lake.t AT (TIMESTAMP => now())").fetchone() == (10,)
    assert rss_kb() - start < 2048, "about 1.6 kB per statement were kept"
    # a prepared read of a pinned version runs right after commits and in later transactions
    db.execute("INSERT INTO lake.t VALUES (10)")
    assert [db.execute("EXECUTE v").fetchone() for _ in range(3)] == [(10,)] * 3


def test_a_pinned_version_follows_the_table_a_name_means_now(tmp_path):
    """Within one transaction, AT reads the table the name means at that statement, after the
    transaction renamed tables or dropped and created one (review: pinned entries were kept by
    name)."""
    db = connect()
    db.execute(f"ATTACH '{tmp_path / 'lake.skade'}' AS lake (TYPE skade)")
    db.execute("CREATE TABLE lake.t (k BIGINT PRIMARY KEY, s VARCHAR)")
    db.execute("INSERT INTO lake.t VALUES (1, 'first t')")
    db.execute("CREATE TABLE lake.t2 (k BIGINT PRIMARY KEY, s VARCHAR)")
    db.execute("INSERT INTO lake.t2 VALUES (1, 't2')")
    ts = db.execute("SELECT now()").fetchone()[0]
    at = "SELECT s FROM lake.t AT (TIMESTAMP => ?::TIMESTAMPTZ) WHERE k = 1"
    db.execute("BEGIN")
    assert db.execute(at, [ts]).fetchall() == [("first t",)]
    db.execute("ALTER TABLE lake.t RENAME TO t_old")
    db.execute("ALTER TABLE lake.t2 RENAME TO t")
    assert db.execute(at, [ts]).fetchall() == [("t2",)]
    db.execute("COMMIT")
    assert db.execute(at, [ts]).fetchall() == [("t2",)]
    version = db.execute("SELECT max(snapshot_id) FROM skade_snapshots('lake.t_old')").fetchone()[0]
    db.execute("BEGIN")
    assert db.execute(f"SELECT s FROM lake.t_old AT (VERSION => {version})").fetchall() == [("first t",)]
    db.execute("DROP TABLE lake.t_old")
    db.execute("CREATE TABLE lake.t_old (k BIGINT PRIMARY KEY, s VARCHAR)")
    with pytest.raises(duckdb.Error, match="snapshot"):
        db.execute(f"SELECT s FROM lake.t_old AT (VERSION => {version})").fetchall()
    db.execute("ROLLBACK")
