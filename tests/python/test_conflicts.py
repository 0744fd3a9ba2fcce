"""Concurrent row-level writes: two transactions that delete or update one table cannot both
commit (the later one gets a retryable conflict and changes nothing); appends alongside deletes
keep working, and inserts of disjoint keys commit side by side."""
import duckdb
import pytest

from conftest import connect


@pytest.fixture
def two(tmp_path):
    """Two connections (each its own transactions) to one attached catalog."""
    db = connect()
    db.execute(f"ATTACH '{tmp_path / 'lake.skade'}' AS lake (TYPE skade)")
    db.execute("CREATE TABLE lake.t (id BIGINT, v VARCHAR)")
    db.execute("INSERT INTO lake.t SELECT i, 'v' || i FROM range(100) r(i)")
    db.execute("CREATE TABLE lake.kv (k BIGINT PRIMARY KEY, v VARCHAR)")
    db.execute("INSERT INTO lake.kv SELECT i, 'v' || i FROM range(100) r(i)")
    a, b = db.cursor(), db.cursor()
    yield db, a, b
    db.close()


def snapshot(db, table):
    return db.execute(f"SELECT count(*), sum(id), string_agg(v, ',' ORDER BY id) FROM lake.{table}").fetchone()


@pytest.mark.parametrize("first,second", [
    ("DELETE FROM lake.t WHERE id < 10", "UPDATE lake.t SET v = 'x' WHERE id = 50"),
    ("UPDATE lake.t SET v = 'y' WHERE id = 1", "DELETE FROM lake.t WHERE id = 2"),
    ("UPDATE lake.t SET v = 'y' WHERE id = 1", "UPDATE lake.t SET v = 'z' WHERE id = 1"),
])
def test_the_later_of_two_deleting_transactions_conflicts(two, first, second):
    db, a, b = two
    a.execute("BEGIN")
    b.execute("BEGIN")
    a.execute(first)
    b.execute(second)
    a.execute("COMMIT")
    after_a = snapshot(db, "t")
    with pytest.raises(duckdb.TransactionException, match="conflict.*retry"):
        b.execute("COMMIT")
    assert snapshot(db, "t") == after_a  # nothing of b's is visible, nothing of a's is lost
    # a retry on the new head succeeds
    b.execute(second)
    assert snapshot(db, "t") != after_a


def test_appends_and_deletes_commit_side_by_side(two):
    db, a, b = two
    for n, order in enumerate([(a, b), (b, a)]):
        a.execute("BEGIN")
        b.execute("BEGIN")
        a.execute(f"DELETE FROM lake.t WHERE id % {n + 2} = 0")
        b.execute(f"INSERT INTO lake.t SELECT i, 'n' || i FROM range({1001 + 10 * n}, {1011 + 10 * n}, 2) r(i)")
        order[0].execute("COMMIT")
        order[1].execute("COMMIT")
    # the appended (odd) rows survive the deletes that committed after them
    assert db.execute("SELECT count(*) FROM lake.t WHERE id > 1000").fetchone() == (9,)
    kept = [i for i in range(100) if i % 2 and i % 3]
    assert db.execute("SELECT list(id ORDER BY id) FROM lake.t WHERE id < 100").fetchone() == (kept,)


def test_inserts_of_one_key_table_conflict_only_when_keys_may_collide(two):
    db, a, b = two
    a.execute("BEGIN")
    b.execute("BEGIN")
    a.execute("INSERT INTO lake.kv VALUES (1000, 'a')")
    b.execute("INSERT INTO lake.kv VALUES (2000, 'b')")
    a.execute("COMMIT")
    b.execute("COMMIT")  # disjoint: rebased
    a.execute("BEGIN")
    b.execute("BEGIN")
    a.execute("INSERT INTO lake.kv VALUES (3000, 'a')")
    b.execute("INSERT INTO lake.kv VALUES (3000, 'b')")
    a.execute("COMMIT")
    with pytest.raises(duckdb.TransactionException, match="conflict"):
        b.execute("COMMIT")
    assert db.execute("SELECT k, v FROM lake.kv WHERE k >= 1000 ORDER BY k").fetchall() == [
        (1000, "a"), (2000, "b"), (3000, "a")]
    # an upsert racing a delete of the same table conflicts too
    a.execute("BEGIN")
    b.execute("BEGIN")
    a.execute("DELETE FROM lake.kv WHERE k = 5")
    b.execute("INSERT OR REPLACE INTO lake.kv VALUES (5, 'five')")
    a.execute("COMMIT")
    with pytest.raises(duckdb.TransactionException, match="conflict"):
        b.execute("COMMIT")
    assert db.execute("SELECT count(*) FROM lake.kv WHERE k = 5").fetchone() == (0,)


def test_eight_writers_of_disjoint_keys_never_conflict(tmp_path):
    """Issue 17 item 7: one-row inserts of interleaved key ranges (k * 1e9 + n) from eight
    threads used to conflict 464 times in 500 commits (the key bounds of all concurrent files
    were merged into one range)."""
    import threading
    db = connect()
    db.execute(f"ATTACH '{tmp_path / 'lake.skade'}' AS lake (TYPE skade)")
    db.execute("CREATE TABLE lake.k (id BIGINT PRIMARY KEY, v VARCHAR)")
    conflicts, errors = [], []

    def writer(k):
        cur = db.cursor()
        for n in range(40):
            try:
                cur.execute(f"INSERT INTO lake.k VALUES ({k * 1_000_000_000 + n}, 'w{k}')")
            except duckdb.TransactionException as e:
                conflicts.append(str(e))
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(repr(e))

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and conflicts == []
    assert db.execute("SELECT count(*), count(DISTINCT id) FROM lake.k").fetchone() == (320, 320)
