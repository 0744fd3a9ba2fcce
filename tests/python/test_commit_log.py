"""Several processes on one lake through its commit log (issue 23): each attaches it read-write
with COMMIT_LOG, sees the others' commits within the poll interval (and at once in its next
statement), appends from different processes all land, conflicting updates get the retryable
conflict, commit_seq stays gapless across all of them, a read-only attach follows, a consumer's
wait wakes on another process's commit, and kill -9 loses no acknowledged commit."""
import json
import os
import signal
import subprocess
import sys
import threading
import time

import duckdb
import pytest

from conftest import EXTENSION, connect

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sql_worker.py")


class Process:
    """A DuckDB process of its own (tests/python/sql_worker.py)."""

    def __init__(self, env=None):
        self.p = subprocess.Popen([sys.executable, WORKER, EXTENSION], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  env=dict(os.environ, **(env or {})))
        assert json.loads(self.p.stdout.readline()) == {"ready": True}

    def send(self, sql):
        self.p.stdin.write(json.dumps({"sql": sql}) + "\n")
        self.p.stdin.flush()

    def answer(self):
        line = self.p.stdout.readline()
        assert line, f"the worker died (exit status {self.p.poll()})"
        return json.loads(line)

    def sql(self, sql):
        self.send(sql)
        a = self.answer()
        if "error" in a:
            raise RuntimeError(f"{a['type']}: {a['error']}")
        return a["rows"]

    def fails(self, sql):
        self.send(sql)
        a = self.answer()
        assert "error" in a, f"{sql} succeeded"
        return a

    def close(self):
        if self.p.poll() is None:
            self.p.stdin.close()
            self.p.wait(timeout=30)


@pytest.fixture
def lake(tmp_path):
    """The ATTACH statement of a lake through its commit log, and the processes a test starts."""
    attach = (f"ATTACH '{tmp_path / 'lake.skade'}' AS lake "
              f"(TYPE skade, COMMIT_LOG '{tmp_path / 'lake.log'}', COMMIT_LOG_POLL_MS 20)")
    started = []

    def process():
        p = Process()
        started.append(p)
        p.sql(attach)
        return p

    yield attach, process
    for p in started:
        if p.p.poll() is None:
            p.p.kill()
        p.p.wait()


def until(check, timeout=5.0):
    end = time.time() + timeout
    while time.time() < end:
        if check():
            return True
        time.sleep(0.01)
    return check()


def test_each_process_sees_the_others_commits(lake):
    _, process = lake
    a, b = process(), process()
    a.sql("CREATE TABLE lake.t (id BIGINT, v VARCHAR)")
    a.sql("INSERT INTO lake.t VALUES (1, 'a')")
    # at once in b's next statement (it reads the shared catalog file as it begins)
    assert b.sql("SELECT id, v FROM lake.t") == [[1, "a"]]
    b.sql("INSERT INTO lake.t VALUES (2, 'b')")
    assert a.sql("SELECT id FROM lake.t ORDER BY id") == [[1], [2]]
    # the commit feed is one gapless sequence across both
    feed = a.sql("SELECT commit_seq, operation FROM skade_commits_since('lake', 0)")
    assert feed == [[1, "create_table"], [2, "append"], [3, "append"]]
    assert b.sql("SELECT commit_seq FROM skade_commits_since('lake', 0)") == [[1], [2], [3]]
    status = a.sql("SELECT provider, checkpoint, log_end FROM skade_commit_log('lake')")
    assert status[0][0] == "skade folder log" and status[0][1] == status[0][2]


def test_appends_from_several_processes_all_land_gaplessly(lake):
    _, process = lake
    first = process()
    first.sql("CREATE TABLE lake.t (id BIGINT, p INT)")
    for n in (2, 4):
        procs = [process() for _ in range(n)]
        per = 30

        def work(i, p):
            for k in range(per):
                p.sql(f"INSERT INTO lake.t VALUES ({n * 1000 + i * 100 + k}, {i})")

        threads = [threading.Thread(target=work, args=(i, p)) for i, p in enumerate(procs)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        got = first.sql(f"SELECT count(*), count(DISTINCT id) FROM lake.t WHERE id BETWEEN {n * 1000} AND {n * 1000 + 999}")
        assert got == [[n * per, n * per]]
        for p in procs:
            p.close()
    seqs = [r[0] for r in first.sql("SELECT commit_seq FROM skade_commits_since('lake', 0)")]
    assert seqs == list(range(1, len(seqs) + 1)) and len(seqs) == 1 + 6 * 30


def test_conflicting_updates_in_two_processes_get_the_retryable_conflict(lake):
    _, process = lake
    a, b = process(), process()
    a.sql("CREATE TABLE lake.kv (k BIGINT PRIMARY KEY, v VARCHAR)")
    a.sql("INSERT INTO lake.kv SELECT i, 'v' || i FROM range(10) r(i)")
    assert b.sql("SELECT count(*) FROM lake.kv") == [[10]]
    a.sql("BEGIN")
    b.sql("BEGIN")
    a.sql("UPDATE lake.kv SET v = 'a' WHERE k = 1")
    b.sql("UPDATE lake.kv SET v = 'b' WHERE k = 1")
    a.sql("COMMIT")
    failed = b.fails("COMMIT")
    assert failed["type"] == "TransactionException", failed
    assert "conflict" in failed["error"] and "retry" in failed["error"], failed
    # nothing of b's landed; a retry on the new head does
    assert b.sql("SELECT v FROM lake.kv WHERE k = 1") == [["a"]]
    b.sql("UPDATE lake.kv SET v = 'b' WHERE k = 1")
    assert a.sql("SELECT v FROM lake.kv WHERE k = 1") == [["b"]]
    # the same key inserted by both: the second is a constraint error or a conflict, never two rows
    a.sql("BEGIN")
    b.sql("BEGIN")
    a.sql("INSERT INTO lake.kv VALUES (100, 'a')")
    b.sql("INSERT INTO lake.kv VALUES (100, 'b')")
    a.sql("COMMIT")
    assert "error" in b.fails("COMMIT")
    assert a.sql("SELECT v FROM lake.kv WHERE k = 100") == [["a"]]


def test_a_read_only_attach_follows_the_writers(lake, tmp_path):
    attach, process = lake
    w = process()
    w.sql("CREATE TABLE lake.t (id BIGINT)")
    r = Process()
    try:
        r.sql(attach.replace("(TYPE skade,", "(TYPE skade, READ_ONLY,"))
        w.sql("INSERT INTO lake.t VALUES (1)")
        assert until(lambda: r.sql("SELECT count(*) FROM lake.t") == [[1]])
        assert "error" in r.fails("INSERT INTO lake.t VALUES (2)")
        status = r.sql("SELECT offers_won, offers_lost FROM skade_commit_log('lake')")
        assert status == [[0, 0]]
    finally:
        r.p.kill()
        r.p.wait()


def test_a_consumers_wait_wakes_on_another_processes_commit(lake):
    _, process = lake
    a, b = process(), process()
    a.sql("CREATE TABLE lake.orders (id BIGINT PRIMARY KEY, amount DOUBLE)")
    a.sql("CALL skade_create_consumer('lake', 'billing', 'orders')")
    b.send("SELECT id, _change_type FROM skade_consume('lake', 'billing', wait := INTERVAL '20 seconds')")
    time.sleep(0.3)  # b is waiting
    start = time.time()
    a.sql("INSERT INTO lake.orders VALUES (7, 1.5)")
    answer = b.answer()
    assert answer.get("rows") == [[7, "INSERT"]], answer
    assert time.time() - start < 5
    # consumed once: the cursor moved for both processes
    assert a.sql("SELECT id FROM skade_consume('lake', 'billing')") == []
    a.sql("INSERT INTO lake.orders VALUES (8, 2.5)")
    assert b.sql("SELECT id FROM skade_consume('lake', 'billing')") == [[8]]


def test_a_plain_attach_is_refused_naming_the_log(lake, tmp_path):
    _, process = lake
    a = process()
    a.sql("CREATE TABLE lake.t (id BIGINT)")
    plain = connect()
    with pytest.raises(duckdb.Error, match="COMMIT_LOG"):
        plain.execute(f"ATTACH '{tmp_path / 'lake.skade'}' AS lake (TYPE skade)")
    plain.close()
    a.close()
    # closed everywhere: still log-resident, still refused without the log
    plain = connect()
    with pytest.raises(duckdb.Error, match="is log-resident"):
        plain.execute(f"ATTACH '{tmp_path / 'lake.skade'}' AS lake (TYPE skade)")
    plain.close()


def test_kill_9_while_committing_loses_no_acknowledged_commit(lake, tmp_path):
    attach, process = lake
    setup = process()
    setup.sql("CREATE TABLE lake.t (id BIGINT, p INT)")
    setup.close()
    for round_ in range(3):
        victim, survivor = process(), process()
        acked = []
        stop = threading.Event()

        def survive():
            for k in range(40):
                survivor.sql(f"INSERT INTO lake.t VALUES ({round_ * 100000 + 50000 + k}, 2)")

        t = threading.Thread(target=survive)
        t.start()
        k = 0
        deadline = time.time() + 0.2 + 0.1 * round_
        while time.time() < deadline:
            victim.sql(f"INSERT INTO lake.t VALUES ({round_ * 100000 + k}, 1)")
            acked.append(round_ * 100000 + k)
            k += 1
        victim.send(f"INSERT INTO lake.t VALUES ({round_ * 100000 + k}, 1)")  # in flight
        os.kill(victim.p.pid, signal.SIGKILL)
        victim.p.wait()
        t.join()
        stop.set()
        check = process()
        ids = {r[0] for r in check.sql("SELECT id FROM lake.t")}
        assert set(acked) <= ids, f"round {round_}: acknowledged commits lost"
        assert all(round_ * 100000 + 50000 + k in ids for k in range(40))
        seqs = [r[0] for r in check.sql("SELECT commit_seq FROM skade_commits_since('lake', 0)")]
        assert seqs == list(range(1, len(seqs) + 1)), "commit_seq has a gap"
        count, distinct = check.sql("SELECT count(*), count(DISTINCT id) FROM lake.t")[0]
        assert count == distinct, "a row landed twice"


@pytest.mark.parametrize("point,lands", [
    ("before_log_offer", False),  # nothing offered: the commit never happened
    ("after_log_offer", True),  # won, not folded: the next process folds it from the log
    ("after_log_fold", True),
])
def test_a_crash_around_the_offer_leaves_a_consistent_lake(lake, point, lands):
    attach, process = lake
    setup = process()
    setup.sql("CREATE TABLE lake.t (id BIGINT)")
    setup.sql("INSERT INTO lake.t VALUES (1)")
    setup.close()
    doomed = Process(env={"SKADE_FAILPOINT": point})
    doomed.sql(attach)
    doomed.send("INSERT INTO lake.t VALUES (2)")
    assert doomed.p.wait(timeout=30) != 0
    assert f"failpoint {point}" in doomed.p.stderr.read()
    after = process()
    assert after.sql("SELECT id FROM lake.t ORDER BY id") == ([[1], [2]] if lands else [[1]])
    seqs = [r[0] for r in after.sql("SELECT commit_seq FROM skade_commits_since('lake', 0)")]
    assert seqs == [1, 2, 3] if lands else seqs == [1, 2]
    after.sql("INSERT INTO lake.t VALUES (3)")
    assert after.sql("SELECT max(commit_seq) FROM skade_commits_since('lake', 0)") == [[len(seqs) + 1]]


def test_lineage_from_several_processes_reaches_the_collector_once(tmp_path):
    """Every process attaching the lake with a collector starts a delivery worker; one of them
    holds the sink's lease and delivers, the others wait: each event arrives once, not once per
    process. Processes that DETACH give their lease up, and one still attached takes over from
    the stored cursor."""
    from openlineage_collector import Collector, validate

    collector = Collector()
    procs = []
    try:
        attach = (f"ATTACH '{tmp_path / 'lake.skade'}' AS lake (TYPE skade, COMMIT_LOG '{tmp_path / 'lake.log'}', "
                  f"COMMIT_LOG_POLL_MS 20, OPENLINEAGE_URL '{collector.url}', LINEAGE true)")
        for _ in range(3):
            procs.append(Process())
            procs[-1].sql(attach)
        procs[0].sql("CREATE TABLE lake.t (id BIGINT)")
        for k in range(10):
            for i, p in enumerate(procs):
                p.sql(f"INSERT INTO lake.t VALUES ({i * 100 + k})")
        events = collector.wait_for(31)
        time.sleep(1.5)  # a duplicate would have arrived by now
        runs = [e["run"]["runId"] for e in collector.events]
        assert len(runs) == len(set(runs)) == 31, f"{len(runs)} deliveries of {len(set(runs))} events"
        for e in events:
            validate(e)
        procs[2].sql("SELECT * FROM skade_lineage_flush('lake', 20000)")
        assert procs[1].sql("SELECT count(*), count(DISTINCT commit_seq) FROM lake.skade_lineage.events") == [[31, 31]]
        for p in procs[:2]:
            p.sql("DETACH lake")
        procs[2].sql("INSERT INTO lake.t VALUES (999)")
        procs[2].sql("SELECT * FROM skade_lineage_flush('lake', 20000)")
        time.sleep(1.0)
        runs = [e["run"]["runId"] for e in collector.events]
        assert len(runs) == len(set(runs)) == 32, f"{len(runs)} deliveries of {len(set(runs))} events"
    finally:
        for p in procs:
            p.p.kill()
            p.p.wait()
        collector.close()


def test_a_slow_collector_keeps_one_process_delivering(tmp_path):
    """A round of deliveries can outlast the sink's lease (a slow or failing collector): the owner
    renews it event by event, so the other processes never take over from a stale cursor while it
    is still sending (each event would reach the collector once per process). The lease is made
    short here (SKADE_LINEAGE_LEASE_MS) so a few seconds show it: the round (81 events of 50 ms)
    outlasts two leases. Not shorter: a lease is renewed when half of it is left, and 300 ms (of a
    600 ms lease) were not always enough on a loaded 2-core machine."""
    from openlineage_collector import Collector

    collector = Collector()
    slow = collector.set_mode
    procs = []
    try:
        attach = (f"ATTACH '{tmp_path / 'lake.skade'}' AS lake (TYPE skade, COMMIT_LOG '{tmp_path / 'lake.log'}', "
                  f"COMMIT_LOG_POLL_MS 20, OPENLINEAGE_URL '{collector.url}')")
        slow(lambda event: (time.sleep(0.05), 201)[1])
        for _ in range(3):
            procs.append(Process(env={"SKADE_LINEAGE_LEASE_MS": "2000"}))
            procs[-1].sql(attach)
        procs[0].sql("CREATE TABLE lake.t (id BIGINT)")
        for k in range(80):
            procs[k % 3].sql(f"INSERT INTO lake.t VALUES ({k})")
        collector.wait_for(81, timeout=60)
        time.sleep(2.5)
        runs = [e["run"]["runId"] for e in collector.events]
        assert len(set(runs)) == 81
        assert len(runs) <= 81 + 3, f"{len(runs)} deliveries of 81 events: processes took the sink from each other"
    finally:
        for p in procs:
            p.p.kill()
            p.p.wait()
        collector.close()


def test_several_processes_flushing_the_history_at_once(lake):
    """skade_lineage_flush writes the history in the calling process, whoever holds the sink: two
    processes writing the same rows meet at the rows' key or the cursor, and the loser looks again
    (never an error to the caller); each event is in the history once."""
    attach, _ = lake
    procs = []
    try:
        for _ in range(3):
            procs.append(Process())
            procs[-1].sql(attach.replace("COMMIT_LOG_POLL_MS 20)", "COMMIT_LOG_POLL_MS 20, LINEAGE true)"))
        procs[0].sql("CREATE TABLE lake.t (id BIGINT)")

        def work(i, p):
            for k in range(15):
                p.sql(f"INSERT INTO lake.t VALUES ({i * 100 + k})")
                p.sql("SELECT * FROM skade_lineage_flush('lake', 20000)")

        threads = [threading.Thread(target=work, args=(i, p)) for i, p in enumerate(procs)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        procs[0].sql("SELECT * FROM skade_lineage_flush('lake', 20000)")
        assert procs[1].sql("SELECT count(*), count(DISTINCT commit_seq) FROM lake.skade_lineage.events") == [[46, 46]]
    finally:
        for p in procs:
            p.p.kill()
            p.p.wait()


def test_a_process_holding_a_tables_turn_does_not_stop_the_others(lake, tmp_path):
    """Processes committing to one table take turns (a byte-range lock of <catalog>.turns); one
    that keeps the turn (stopped, hung) delays the others' commits by at most two seconds, after
    which they commit without it (the log's race decides)."""
    import fcntl

    _, process = lake
    a = process()
    a.sql("CREATE TABLE lake.t (id BIGINT)")
    a.sql("INSERT INTO lake.t VALUES (1)")  # (the turns file exists from the first commit)
    with open(tmp_path / "lake.skade.turns", "r+b") as held:
        fcntl.lockf(held, fcntl.LOCK_EX | fcntl.LOCK_NB, 0, 0)  # every table's turn, kept
        start = time.time()
        a.sql("INSERT INTO lake.t VALUES (2)")
        waited = time.time() - start
    assert 1.5 < waited < 10, waited
    assert a.sql("SELECT count(*) FROM lake.t") == [[2]]
