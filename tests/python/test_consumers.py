"""Named consumers: exactly-once across kills, independence, concurrent producers, replay of a
random history from the windows, the wait (woken, pending, interrupted) and expiry's care.

In Python a SELECT of a table function runs only when fetched (DuckDB streams results): calls
made for their effect use CALL, reads are fetched."""
import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time

import duckdb
import pytest

from conftest import EXTENSION, connect

# A consumer that sinks its window into lake.sink in one transaction; it prints "read" once the
# window is in the sink (uncommitted), then waits for a line on stdin before it commits.
SINKER = textwrap.dedent("""
    import sys, duckdb
    ext, lake = sys.argv[1], sys.argv[2]
    con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
    con.execute(f"LOAD '{ext}'")
    con.execute(f"ATTACH '{lake}' AS lake (TYPE skade)")
    con.execute("BEGIN")
    con.execute("INSERT INTO lake.sink SELECT id, _change_type, _commit_seq FROM skade_consume('lake', 'c')")
    print("read", flush=True)
    sys.stdin.readline()
    con.execute("COMMIT")
    print("committed", flush=True)
""")


def lake_with_consumer(path, start="beginning"):
    con = connect()
    con.execute(f"ATTACH '{path}/lake.skade' AS lake (TYPE skade)")
    con.execute("CREATE TABLE lake.t (id BIGINT PRIMARY KEY, v VARCHAR)")
    con.execute("CREATE TABLE lake.sink (id BIGINT, change VARCHAR, seq BIGINT)")
    con.execute(f"CALL skade_create_consumer('lake', 'c', 't', start := '{start}')")
    return con


def sinker(path):
    return subprocess.Popen([sys.executable, "-c", SINKER, EXTENSION, f"{path}/lake.skade"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def reopen(path):
    con = connect()
    con.execute(f"ATTACH '{path}/lake.skade' AS lake (TYPE skade)")
    return con


def test_a_consumer_killed_before_commit_gets_the_same_window_and_after_commit_never_again(tmp_path):
    con = lake_with_consumer(tmp_path)
    con.execute("INSERT INTO lake.t SELECT i, 'v' || i FROM range(100) r(i)")
    con.execute("UPDATE lake.t SET v = 'u' WHERE id < 10")
    window = sorted(con.execute("SELECT id, _change_type, _commit_seq FROM skade_peek('lake', 'c')").fetchall())
    con.close()  # one process opens a lake at a time
    child = sinker(tmp_path)
    assert child.stdout.readline().strip() == "read"
    child.send_signal(signal.SIGKILL)
    child.wait()
    con = reopen(tmp_path)
    assert con.execute("SELECT count(*) FROM lake.sink").fetchone()[0] == 0
    assert sorted(con.execute("SELECT id, _change_type, _commit_seq FROM skade_peek('lake', 'c')").fetchall()) == window
    con.close()
    child = sinker(tmp_path)
    assert child.stdout.readline().strip() == "read"
    child.stdin.write("go\n")
    child.stdin.flush()
    assert child.stdout.readline().strip() == "committed"
    child.send_signal(signal.SIGKILL)  # right after its commit was acknowledged
    child.wait()
    con = reopen(tmp_path)
    assert sorted(con.execute("SELECT * FROM lake.sink").fetchall()) == window
    assert con.execute("SELECT count(*) FROM skade_consume('lake', 'c')").fetchone()[0] == 0
    con.close()


def test_sink_rows_and_cursor_commit_together_or_not_at_all(tmp_path):
    """A failed sink statement and a rolled-back transaction both leave the cursor; the sink
    after many rounds holds every change exactly once."""
    con = lake_with_consumer(tmp_path)
    con.execute("CREATE TABLE lake.strict (id BIGINT NOT NULL)")
    rng = random.Random(5)
    expected = []
    for round_ in range(30):
        con.execute(f"INSERT INTO lake.t VALUES ({round_}, 'x')")
        expected.append((round_, "INSERT"))
        fate = rng.choice(["commit", "rollback", "fail"])
        if fate == "fail":
            # a NULL into a NOT NULL column: the statement fails whole, the cursor stays
            with pytest.raises(duckdb.Error, match="NOT NULL"):
                con.execute("INSERT INTO lake.strict SELECT NULL FROM skade_consume('lake', 'c')")
        con.execute("BEGIN")
        con.execute("INSERT INTO lake.sink SELECT id, _change_type, _commit_seq FROM skade_consume('lake', 'c')")
        con.execute("ROLLBACK" if fate == "rollback" else "COMMIT")
    con.execute("INSERT INTO lake.sink SELECT id, _change_type, _commit_seq FROM skade_consume('lake', 'c')")
    assert sorted(con.execute("SELECT id, change FROM lake.sink").fetchall()) == sorted(expected)
    assert con.execute("SELECT count(*) FROM lake.strict").fetchone()[0] == 0
    con.close()


def test_two_consumers_are_independent(tmp_path):
    con = lake_with_consumer(tmp_path)
    con.execute("CALL skade_create_consumer('lake', 'd', 't', start := 'beginning')")
    con.execute("INSERT INTO lake.t VALUES (1, 'a'), (2, 'b')")
    assert len(con.execute("FROM skade_consume('lake', 'c')").fetchall()) == 2
    assert len(con.execute("FROM skade_peek('lake', 'd')").fetchall()) == 2
    con.execute("DELETE FROM lake.t WHERE id = 1")
    head = con.execute("SELECT max(commit_seq) FROM skade_commits_since('lake', 0)").fetchone()[0]
    con.execute(f"CALL skade_acknowledge('lake', 'd', {head})")
    assert con.execute("SELECT id, _change_type FROM skade_consume('lake', 'c')").fetchall() == [(1, "DELETE")]
    assert con.execute("FROM skade_consume('lake', 'd')").fetchall() == []
    con.execute("CALL skade_drop_consumer('lake', 'd')")
    con.execute("INSERT INTO lake.t VALUES (3, 'c')")
    assert con.execute("SELECT id FROM skade_consume('lake', 'c')").fetchall() == [(3,)]
    con.close()


def test_concurrent_producers_are_delivered_once_in_order_and_never_an_aborted_transaction(tmp_path):
    con = lake_with_consumer(tmp_path)
    con.execute("CREATE TABLE lake.u (id BIGINT)")
    con.execute("CALL skade_reset_consumer('lake', 'c', start := 'now')")
    con.execute("DROP TABLE lake.sink")
    # follow both tables
    con.execute("CALL skade_drop_consumer('lake', 'c')")
    con.execute("CALL skade_create_consumer('lake', 'c', ['t', 'u'])")
    committed, errors = [], []

    def produce(w):
        cur = con.cursor()
        try:
            for i in range(40):
                key = w * 1000 + i
                table = "t" if i % 2 else "u"
                cur.execute("BEGIN")
                if table == "t":
                    cur.execute(f"INSERT INTO lake.t VALUES ({key}, 'p')")
                else:
                    cur.execute(f"INSERT INTO lake.u VALUES ({key})")
                if i % 5 == 0:
                    cur.execute("ROLLBACK")
                    continue
                try:
                    cur.execute("COMMIT")
                    committed.append(key)
                except duckdb.Error:
                    pass  # a conflict: nothing of it committed
        except Exception as e:  # noqa: BLE001
            errors.append(e)
        finally:
            cur.close()

    threads = [threading.Thread(target=produce, args=(w,)) for w in range(3)]
    for t in threads:
        t.start()
    consumer = con.cursor()
    got = []
    while any(t.is_alive() for t in threads):
        got += consumer.execute("SELECT _commit_seq, id FROM skade_consume('lake', 'c', wait := INTERVAL '50 milliseconds')").fetchall()
    for t in threads:
        t.join()
    got += consumer.execute("SELECT _commit_seq, id FROM skade_consume('lake', 'c')").fetchall()
    assert not errors, errors
    assert [s for s, _ in got] == sorted(s for s, _ in got), "commit_seq order"
    assert sorted(i for _, i in got) == sorted(committed), "each committed row once, no aborted one"
    log = {s for (s,) in con.execute("SELECT commit_seq FROM skade_commits_since('lake', 0) WHERE operation = 'append'").fetchall()}
    assert {s for s, _ in got} == log
    con.close()


def test_a_random_history_replayed_from_the_windows_reproduces_the_table_at_every_cursor(tmp_path):
    con = lake_with_consumer(tmp_path)
    rng = random.Random(11)
    replica = {}
    for step in range(60):
        op = rng.choice(["insert", "update", "delete", "upsert", "upsert", "compact", "expire"])
        lo = rng.randrange(0, 200)
        if op == "insert":
            con.execute(f"INSERT INTO lake.t SELECT i, 'i{step}' FROM range({lo}, {lo + 20}) r(i) "
                        "WHERE i NOT IN (SELECT id FROM lake.t)")
        elif op == "update":
            con.execute(f"UPDATE lake.t SET v = 'u{step}' WHERE id BETWEEN {lo} AND {lo + 15}")
        elif op == "delete":
            con.execute(f"DELETE FROM lake.t WHERE id BETWEEN {lo} AND {lo + 10}")
        elif op == "upsert":
            con.execute(f"INSERT OR REPLACE INTO lake.t SELECT i, 'r{step}' FROM range({lo}, {lo + 12}) r(i)")
        elif op == "compact":
            con.execute("CALL skade_compact('lake.t')")
        else:
            con.execute("CALL skade_expire_snapshots('lake.t', retain_last := 1)")
        if rng.random() < 0.4:
            rows = con.execute("SELECT _commit_seq, id, v, _change_type FROM skade_consume('lake', 'c') "
                               "ORDER BY _commit_seq, _commit_ordinal").fetchall()
            for seq in sorted({r[0] for r in rows}):  # each commit's images, before then after
                commit = [r[1:] for r in rows if r[0] == seq]
                for id_, v, change in commit:
                    if change in ("DELETE", "UPDATE_BEFORE"):
                        assert replica.pop(id_) == v, (step, seq, id_)
                for id_, v, change in commit:
                    if change in ("INSERT", "UPDATE_AFTER"):
                        assert id_ not in replica, (step, seq, id_)
                        replica[id_] = v
            assert sorted(replica.items()) == sorted(con.execute("SELECT id, v FROM lake.t").fetchall()), step
    con.close()


def test_a_wait_is_woken_by_a_commit_returns_at_once_when_pending_and_can_be_interrupted(tmp_path):
    con = lake_with_consumer(tmp_path)
    waiter = con.cursor()
    head = con.execute("SELECT max(commit_seq) FROM skade_commits_since('lake', 0)").fetchone()[0]
    result = []
    thread = threading.Thread(target=lambda: result.append(waiter.execute(
        f"SELECT commit_seq FROM skade_wait('lake', {head}, timeout := INTERVAL '60 seconds')").fetchall()))
    thread.start()
    time.sleep(0.2)
    con.execute("INSERT INTO lake.t VALUES (1, 'a')")
    thread.join(timeout=10)
    assert not thread.is_alive() and result == [[(head + 1,)]]
    # pending already: the consumer's wait returns at once (well before its minute)
    started = time.monotonic()
    assert len(waiter.execute("FROM skade_wait('lake', consumer := 'c', timeout := INTERVAL '60 seconds')").fetchall()) == 1
    assert time.monotonic() - started < 30
    # a timeout with nothing new: no rows
    assert waiter.execute(f"FROM skade_wait('lake', {head + 1}, timeout := INTERVAL '10 milliseconds')").fetchall() == []
    # interrupted from another thread
    failure = []

    def wait_long():
        try:
            waiter.execute(f"FROM skade_wait('lake', {head + 1}, timeout := INTERVAL '60 seconds')").fetchall()
        except duckdb.Error as e:
            failure.append(e)

    thread = threading.Thread(target=wait_long)
    thread.start()
    time.sleep(0.2)
    waiter.interrupt()
    thread.join(timeout=10)
    assert not thread.is_alive(), "the interrupted wait returned"
    assert failure and "interrupt" in str(failure[0]).lower(), failure
    con.close()


def test_python_reads_a_window_with_plain_duckdb_calls(tmp_path):
    con = lake_with_consumer(tmp_path)
    con.execute("INSERT INTO lake.t SELECT i, 'v' FROM range(5000) r(i)")
    relation = con.sql("FROM skade_consume('lake', 'c')")  # the relation API: both DuckDB 1.5 and 2
    reader = relation.to_arrow_reader() if hasattr(relation, "to_arrow_reader") else relation.fetch_arrow_reader()
    assert sum(batch.num_rows for batch in reader) == 5000
    reader.close()
    assert con.execute("SELECT commits_behind FROM skade_consumers('lake')").fetchone()[0] == 0
    con.execute("INSERT INTO lake.t VALUES (-1, 'w')")
    table = con.sql("SELECT id FROM skade_consume('lake', 'c')").to_arrow_table()
    assert table.column("id").to_pylist() == [-1]
    pd = pytest.importorskip("pandas")
    con.execute("INSERT INTO lake.t VALUES (-2, 'w')")
    frame = con.execute("FROM skade_consume('lake', 'c')").df()
    assert isinstance(frame, pd.DataFrame) and list(frame["id"]) == [-2]
    con.close()


def test_expiry_keeps_what_a_consumer_needs_until_it_is_dropped(tmp_path):
    con = lake_with_consumer(tmp_path)
    for i in range(6):
        con.execute(f"INSERT INTO lake.t VALUES ({i}, 'a')")
    kept = con.execute("SELECT kept_for_consumers FROM skade_expire_snapshots('lake.t', retain_last := 1)").fetchone()[0]
    assert kept > 0
    assert sorted(i for (i,) in con.execute("SELECT id FROM skade_consume('lake', 'c')").fetchall()) == list(range(6))
    con.execute("INSERT INTO lake.t VALUES (10, 'b')")
    con.execute("CALL skade_drop_consumer('lake', 'c')")
    assert con.execute("SELECT kept_for_consumers FROM skade_expire_snapshots('lake.t', retain_last := 1)").fetchone()[0] == 0
    assert con.execute("SELECT count(*) FROM skade_snapshots('lake.t')").fetchone()[0] == 1
    con.close()


def test_rows_come_in_commit_order_when_many_threads_convert_them(tmp_path):
    """A peek converts batches on every thread: DuckDB must still return them in commit order
    (batch indexes), as the consuming read (one thread) does; and a commit's rows come in one
    order on every read (an UPDATE's and a DELETE's files are not taken in hash order)."""
    con = lake_with_consumer(tmp_path)
    con.execute("SET threads = 4")
    for k in range(6):
        con.execute(f"INSERT INTO lake.t SELECT i, 'v' || i FROM range({k * 40000}, {(k + 1) * 40000}) r(i)")
    con.execute("UPDATE lake.t SET v = 'u' WHERE id % 7 = 0")
    con.execute("DELETE FROM lake.t WHERE id % 11 = 0")
    peeked = con.execute("SELECT _commit_seq, _commit_ordinal, id, _change_type FROM skade_peek('lake', 'c')").fetchall()
    assert [r[:2] for r in peeked] == sorted(r[:2] for r in peeked)
    consumed = con.execute("SELECT _commit_seq, _commit_ordinal, id, _change_type FROM skade_consume('lake', 'c')").fetchall()
    # the same rows under the same ordinals on every read: a sink may dedupe by (seq, ordinal)
    assert consumed == peeked
    assert len(consumed) == 240000 + 2 * len(range(0, 240000, 7)) + len(range(0, 240000, 11))
    con.close()


def test_a_consuming_read_consumes_its_window_when_its_transaction_commits_whatever_the_query_kept(tmp_path):
    """Several threads convert a consuming read's rows. Its window is consumed when the reading
    transaction commits (Snowflake's rule), whatever the query kept: a LIMIT, a WHERE, a join, a
    result read in part; a ROLLBACK moves nothing. Two reads of one consumer in one statement
    (a join of it with itself) are an error, never a silent empty second read."""
    con = lake_with_consumer(tmp_path)
    con.execute("SET threads = 4")
    for k in range(4):
        con.execute(f"INSERT INTO lake.t SELECT i, 'v' || i FROM range({k * 50000}, {(k + 1) * 50000}) r(i)")

    def behind():
        return con.execute("SELECT commits_behind FROM skade_consumers('lake') WHERE consumer_name = 'c'").fetchone()[0]

    con.execute("BEGIN")
    reader = con.execute("SELECT id FROM skade_consume('lake', 'c')")
    assert len(reader.fetchmany(3)) == 3
    con.execute("ROLLBACK")
    assert behind() == 4
    with pytest.raises(duckdb.TransactionException, match='consumer "c" is read twice by one statement'):
        con.execute("SELECT count(*) FROM skade_consume('lake', 'c') a JOIN skade_consume('lake', 'c') b "
                    "USING (_commit_seq, _commit_ordinal)").fetchall()
    assert behind() == 4
    assert con.execute("SELECT count(*) FROM (FROM skade_consume('lake', 'c') LIMIT 10)").fetchall() == [(10,)]
    assert behind() == 0
    con.execute("INSERT INTO lake.t SELECT i, 'w' FROM range(200000, 400000) r(i)")
    ids = [r[0] for r in con.execute("SELECT id FROM skade_consume('lake', 'c')").fetchall()]
    assert ids == list(range(200000, 400000)) and behind() == 0
    con.close()


def test_a_wait_for_a_consumer_ends_when_another_connection_drops_or_moves_it(tmp_path):
    """A consumer's wait (skade_wait and a consuming read's wait :=) does not sleep on through a
    drop of its consumer by another connection (an error naming it) or a reset (it returns)."""
    con = lake_with_consumer(tmp_path, start="now")
    waiter = con.cursor()

    def in_thread(sql):
        out = []

        def run():
            try:
                out.append(waiter.execute(sql).fetchall())
            except duckdb.Error as e:
                out.append(e)
        thread = threading.Thread(target=run)
        thread.start()
        time.sleep(0.3)
        return thread, out

    thread, out = in_thread("FROM skade_wait('lake', consumer := 'c', timeout := INTERVAL '60 seconds')")
    con.execute("CALL skade_reset_consumer('lake', 'c', start := 'now')")
    thread.join(timeout=10)
    assert not thread.is_alive() and out == [[]], out

    thread, out = in_thread("FROM skade_consume('lake', 'c', wait := INTERVAL '60 seconds')")
    con.execute("CALL skade_drop_consumer('lake', 'c')")
    thread.join(timeout=10)
    assert not thread.is_alive(), "the wait slept through the drop"
    assert isinstance(out[0], duckdb.Error) and 'consumer "c" was dropped while' in str(out[0]), out
    con.close()


def test_rows_behind_counts_the_rows_a_read_delivers(tmp_path):
    con = lake_with_consumer(tmp_path)
    con.execute("INSERT INTO lake.t SELECT i, 'v' FROM range(1000) r(i)")
    con.execute("INSERT INTO lake.t SELECT i, 'w' FROM range(1000, 1100) r(i)")
    con.execute("UPDATE lake.t SET v = 'u' WHERE id % 10 = 0")
    con.execute("DELETE FROM lake.t WHERE id >= 1000")  # every row of the second file
    con.execute("DELETE FROM lake.t WHERE id % 7 = 1")
    behind = con.execute("SELECT rows_behind FROM skade_consumers('lake') WHERE consumer_name = 'c'").fetchone()[0]
    delivered = con.execute("SELECT count(*) FROM skade_peek('lake', 'c')").fetchall()[0][0]
    assert behind == delivered
    con.close()
