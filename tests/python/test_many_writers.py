"""Many writers into one table (issue 47, docs/design/many-writers.md): appends of concurrent
transactions build on the one still in flight, yet each keeps its own snapshot, commit_seq,
changelog rows and consumer delivery; deletes and updates alongside decide their conflicts as
before; every acknowledged row survives a reopen. SKADE_WRITERS_ROWS sets the rows per writer
(small by default: CI's budget)."""
import os
import threading

import duckdb

from conftest import connect

ROWS = int(os.environ.get("SKADE_WRITERS_ROWS", "25"))


def test_eight_writers_into_one_table_keep_a_commit_each(tmp_path):
    db = connect()
    db.execute(f"ATTACH '{tmp_path / 'lake.skade'}' AS lake (TYPE skade)")
    db.execute("CREATE TABLE lake.t (id BIGINT PRIMARY KEY, v VARCHAR)")
    db.execute("INSERT INTO lake.t SELECT -i - 1, 'old' FROM range(20) r(i)")
    db.execute("CALL skade_create_consumer('lake', 'c', 't', start := 'beginning')")
    first = db.execute("SELECT max(commit_seq) FROM skade_commits_since('lake', 0)").fetchone()[0]
    acknowledged, raced, errors = [], [], []

    def writer(k):
        cur = db.cursor()
        for n in range(ROWS):
            try:
                cur.execute(f"INSERT INTO lake.t VALUES ({k * 1_000_000 + n + 1_000}, 'w{k}')")
                acknowledged.append(k * 1_000_000 + n + 1_000)
                # every writer also races the others for one shared key per round
                cur.execute(f"INSERT INTO lake.t VALUES ({n}, 'w{k}')")
                raced.append(n)
            except duckdb.ConstraintException:
                pass  # (the key was live already)
            except duckdb.TransactionException:
                pass  # (the key landed concurrently: a conflict, retryable)
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(repr(e))

    def deleter():
        cur = db.cursor()
        for i in range(20):
            try:
                cur.execute(f"DELETE FROM lake.t WHERE id = {-i - 1}")
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(repr(e))

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(8)] + [threading.Thread(target=deleter)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(raced) == list(range(ROWS)), "each shared key landed exactly once"
    expected = sorted(acknowledged + raced)
    assert [r[0] for r in db.execute("SELECT id FROM lake.t ORDER BY id").fetchall()] == expected
    # one commit each, gapless, each its own snapshot, in one chain of snapshots
    commits = db.execute("SELECT commit_seq, snapshot_id FROM skade_commits_since('lake', ?) ORDER BY commit_seq",
                         [first]).fetchall()
    assert [c[0] for c in commits] == list(range(first + 1, first + 1 + len(expected) + 20))
    assert len({c[1] for c in commits}) == len(commits)
    snapshots = db.execute("SELECT snapshot_id, parent_id FROM skade_snapshots('lake.t')").fetchall()
    parents = {s[1] for s in snapshots if s[1] is not None}
    assert len([s for s in snapshots if s[0] not in parents]) == 1, "one chain, no fork"
    # the changelog and the consumer see each row once
    changes = db.execute("SELECT _change_type, count(*) FROM skade_changelog('lake.t', NULL) "
                         "GROUP BY ALL ORDER BY ALL").fetchall()
    assert changes == [("DELETE", 20), ("INSERT", 20 + len(expected))]
    delivered = db.execute("SELECT id FROM skade_consume('lake', 'c') WHERE _change_type = 'INSERT' "
                           "ORDER BY id").fetchall()
    assert sorted(r[0] for r in delivered if r[0] >= 0) == expected
    path = db.execute("SELECT path FROM duckdb_databases() WHERE database_name = 'lake'").fetchone()[0]
    db.execute("DETACH lake")
    db.execute(f"ATTACH '{path}' AS lake (TYPE skade)")
    assert db.execute("SELECT count(*) FROM lake.t").fetchone()[0] == len(expected)
    db.close()


def run_for(seconds, *workers):
    """Runs each worker (a function of a stop time) in its own thread; fails on a hang."""
    import time
    stop = time.monotonic() + seconds
    threads = [threading.Thread(target=w, args=(stop,), daemon=True) for w in workers]
    for t in threads:
        t.start()
    deadline = stop + 60
    for t in threads:
        t.join(timeout=max(0.0, deadline - time.monotonic()))
    assert not any(t.is_alive() for t in threads), "a committer hangs"


def test_transactions_over_two_tables_in_both_orders_never_deadlock(tmp_path):
    """A transaction that must wait for a table to settle holds no turn meanwhile: it once waited
    holding the other table's turn, which a transaction in flight on both needed to settle."""
    import time
    db = connect()
    db.execute(f"ATTACH '{tmp_path / 'lake.skade'}' AS lake (TYPE skade)")
    for t in ("a", "b"):
        db.execute(f"CREATE TABLE lake.{t} (id BIGINT, v INTEGER)")
        db.execute(f"INSERT INTO lake.{t} SELECT i, 0 FROM range(10) r(i)")
    done, errors = {"appends": 0, "mixed": 0}, []

    def both_appends(stop):
        cur = db.cursor()
        while time.monotonic() < stop:
            cur.execute("BEGIN; INSERT INTO lake.a VALUES (100, 1); INSERT INTO lake.b VALUES (100, 1); COMMIT")
            done["appends"] += 1

    def append_and_update(first, second):
        def work(stop):
            cur = db.cursor()
            while time.monotonic() < stop:
                try:
                    cur.execute(f"BEGIN; INSERT INTO lake.{first} VALUES (200, 2); "
                                f"UPDATE lake.{second} SET v = v + 1 WHERE id = 1; COMMIT")
                    done["mixed"] += 1
                except duckdb.TransactionException:
                    pass  # (a conflict with the other UPDATE: retried)
                except Exception as e:  # noqa: BLE001 - reported below
                    errors.append(repr(e))
        return work

    run_for(2, both_appends, both_appends, append_and_update("a", "b"), append_and_update("b", "a"))
    assert errors == [] and done["appends"] > 0 and done["mixed"] > 0


def test_alter_table_lands_through_a_stream_of_appends(tmp_path):
    """ALTER TABLE while two writers append to the table without a pause: each ALTER is made
    again on the table's head at commit (only snapshots came between), so none is starved into a
    conflict; every acknowledged row is there, in the columns the last ALTER left."""
    import time
    db = connect()
    db.execute(f"ATTACH '{tmp_path / 'lake.skade'}' AS lake (TYPE skade)")
    db.execute("CREATE TABLE lake.t (id BIGINT PRIMARY KEY, w INTEGER)")
    acknowledged, altered, errors = [], [], []

    def appender(w):
        def work(stop):
            cur, n = db.cursor(), w * 1_000_000
            while time.monotonic() < stop:
                try:
                    cur.execute(f"INSERT INTO lake.t (id, w) VALUES ({n}, {w})")
                    acknowledged.append(n)
                except Exception as e:  # noqa: BLE001 - reported below
                    errors.append(repr(e))
                n += 1
        return work

    def alterer(stop):
        cur, k = db.cursor(), 0
        while time.monotonic() < stop or k < 3:
            for sql in (f"ALTER TABLE lake.t ADD COLUMN c{k} VARCHAR",
                        f"ALTER TABLE lake.t RENAME COLUMN c{k} TO d{k}",
                        f"ALTER TABLE lake.t DROP COLUMN d{k}"):
                try:
                    cur.execute(sql)
                    altered.append(sql)
                except Exception as e:  # noqa: BLE001 - reported below
                    errors.append(f"{sql}: {e!r}")
            k += 1

    run_for(2, appender(1), appender(2), alterer)
    assert errors == [], errors[:5]
    assert len(altered) >= 9 and len(acknowledged) > 10
    assert sorted(r[0] for r in db.execute("SELECT id FROM lake.t").fetchall()) == sorted(acknowledged)
    assert [r[0] for r in db.execute("DESCRIBE lake.t").fetchall()] == ["id", "w"]
    ops = [r[0] for r in db.execute("SELECT operation FROM skade_commits_since('lake', 1)").fetchall()]
    assert ops.count("add_column") == len(altered) // 3 and ops.count("append") == len(acknowledged)
    assert {r[1] for r in db.execute("SELECT * FROM skade_check('lake')").fetchall()} == {"ok"}
    db.close()


def test_appends_chained_on_a_request_that_fails_are_rebuilt_not_failed(tmp_path):
    """Two transactions race to create one table while appending to t: the loser fails at the
    group commit, after other appends chained on it; those are rebuilt on the committed head (they
    once failed with "Snapshot already exists")."""
    import time
    db = connect()
    db.execute(f"ATTACH '{tmp_path / 'lake.skade'}' AS lake (TYPE skade)")
    db.execute("CREATE TABLE lake.t (id BIGINT, w INTEGER)")
    appended, won, errors = [], [], []
    barrier = threading.Barrier(2)

    def racer(i):
        def work(stop):
            cur = db.cursor()
            for r in range(10_000):
                if time.monotonic() >= stop:
                    barrier.abort()
                    return
                try:
                    barrier.wait(timeout=10)
                except threading.BrokenBarrierError:
                    return
                try:
                    cur.execute(f"BEGIN; CREATE TABLE lake.n{r} (x INTEGER); "
                                f"INSERT INTO lake.t VALUES ({-(r * 10 + i) - 1}, -1); COMMIT")
                    won.append(r)
                except duckdb.TransactionException:
                    pass  # (the other racer created it: a conflict)
        return work

    def appender(w):
        def work(stop):
            cur = db.cursor()
            n = 0
            while time.monotonic() < stop:
                try:
                    cur.execute(f"INSERT INTO lake.t VALUES ({w * 1_000_000 + n}, {w})")
                    appended.append(w * 1_000_000 + n)
                except Exception as e:  # noqa: BLE001 - appends never fail
                    errors.append(repr(e))
                n += 1
        return work

    run_for(2, racer(0), racer(1), *[appender(w) for w in range(6)])
    assert errors == []
    assert sorted(won) == sorted(set(won)), "one racer wins each race"
    ids = [r[0] for r in db.execute("SELECT id FROM lake.t WHERE id >= 0 ORDER BY id").fetchall()]
    assert ids == sorted(appended)
    assert db.execute("SELECT count(*) FROM lake.t WHERE id < 0").fetchone()[0] == len(won)


THREADED_WRITER = """
import sys, threading, duckdb
ext, lake, start = sys.argv[1], sys.argv[2], int(sys.argv[3])
con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
con.execute(f"LOAD '{ext}'")
con.execute(f"ATTACH '{lake}' AS lake (TYPE skade)")
con.execute("CREATE TABLE IF NOT EXISTS lake.t (id BIGINT PRIMARY KEY, w INTEGER)")
print("ready", flush=True)
out = threading.Lock()
def write(w):
    cur = con.cursor()
    n = start + w * 1_000_000
    while True:
        cur.execute(f"INSERT INTO lake.t VALUES ({n}, {w})")
        with out:   # acknowledged (one line each: threads' prints would interleave)
            sys.stdout.write(f"{n}\\n")
            sys.stdout.flush()
        n += 1
for w in range(6):
    threading.Thread(target=write, args=(w,), daemon=True).start()
threading.Event().wait()
"""


def test_sigkill_of_writers_chained_on_one_table_loses_no_acknowledged_row(tmp_path):
    """Appends chained on one table write their manifest lists and metadata.json after handing
    the turn on: killed at any moment, every acknowledged row is there, commit_seq has no gap,
    every pointer names a file that exists and skade_check finds nothing wrong."""
    import random
    import signal
    import subprocess
    import sys
    import time
    from conftest import EXTENSION
    lake = tmp_path / "lake.skade"
    rng = random.Random(47)
    start = 0
    for trial in range(int(os.environ.get("SKADE_WRITERS_KILLS", "3"))):
        proc = subprocess.Popen([sys.executable, "-c", THREADED_WRITER, EXTENSION, str(lake), str(start)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        acked = []
        reader = threading.Thread(target=lambda: acked.extend(int(line) for line in proc.stdout
                                                              if line.strip() and line.strip() != "ready"),
                                  daemon=True)
        reader.start()
        deadline = time.monotonic() + 60
        while len(acked) < 20 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(rng.uniform(0.1, 0.6))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        reader.join(timeout=10)
        assert acked, f"trial {trial}: no commit acknowledged: {proc.stderr.read()[-2000:]}"
        con = connect()
        con.execute(f"ATTACH '{lake}' AS lake (TYPE skade)")
        ids = {r[0] for r in con.execute("SELECT id FROM lake.t").fetchall()}
        lost = sorted(set(acked) - ids)
        assert not lost, f"trial {trial}: acknowledged rows lost: {lost[:10]}"
        seqs = [r[0] for r in con.execute("SELECT commit_seq FROM skade_commits_since('lake', 0)").fetchall()]
        assert seqs == list(range(1, len(seqs) + 1)), "commit_seq has a gap"
        for (location,) in con.execute("SELECT metadata_location FROM skade_tables('lake')").fetchall():
            assert os.path.exists(location), f"a pointer references a missing file: {location}"
        assert {r[1] for r in con.execute("SELECT * FROM skade_check('lake')").fetchall()} == {"ok"}
        # every snapshot's rows, one commit each
        assert con.execute("SELECT count(*) FROM lake.t").fetchone()[0] == len(ids)
        con.close()
        start += 100_000


FAILING_WRITER = """
import sys, threading, time, duckdb
ext, lake = sys.argv[1], sys.argv[2]
con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
con.execute(f"LOAD '{ext}'")
con.execute(f"ATTACH '{lake}' AS lake (TYPE skade)")
con.execute("CREATE TABLE lake.t (id BIGINT, w INTEGER)")
out = threading.Lock()
stop = time.monotonic() + 2
def write(w):
    cur = con.cursor()
    n = w * 1_000_000
    while time.monotonic() < stop:
        try:
            cur.execute(f"INSERT INTO lake.t VALUES ({n}, {w})")
            line = f"ok {n}"
        except Exception as e:
            line = "error " + str(e).replace(chr(10), " ")
        with out:
            sys.stdout.write(line + chr(10))
            sys.stdout.flush()
        n += 1
threads = [threading.Thread(target=write, args=(w,)) for w in range(8)]
[t.start() for t in threads]
[t.join() for t in threads]
"""


def test_an_append_whose_files_could_not_be_written_fails_alone(tmp_path):
    """Every fifth chained append fails to write its manifest list and metadata.json (as on a full
    disk), after the next appends may have taken the turn and read its pointer: only it fails.
    The others were once refused, reading files that were never written."""
    import subprocess
    import sys
    from conftest import EXTENSION
    lake = tmp_path / "lake.skade"
    env = dict(os.environ, SKADE_FAILPOINT="chained_metadata_write:every=5")
    proc = subprocess.run([sys.executable, "-c", FAILING_WRITER, EXTENSION, str(lake)],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    acked = [int(line.split()[1]) for line in lines if line.startswith("ok ")]
    errors = [line for line in lines if line.startswith("error ")]
    assert errors, "the failure point was never reached"
    others = [e for e in errors if "failure injected at chained_metadata_write" not in e]
    assert not others, f"{len(others)} appends failed for another's failure, e.g. {others[0][:300]}"
    con = connect()
    con.execute(f"ATTACH '{lake}' AS lake (TYPE skade)")
    ids = sorted(r[0] for r in con.execute("SELECT id FROM lake.t").fetchall())
    assert ids == sorted(acked), "exactly the acknowledged rows"
    seqs = [r[0] for r in con.execute("SELECT commit_seq FROM skade_commits_since('lake', 0)").fetchall()]
    assert seqs == list(range(1, len(seqs) + 1)), "commit_seq has a gap"
    assert {r[1] for r in con.execute("SELECT * FROM skade_check('lake')").fetchall()} == {"ok"}
