"""Crash safety: processes are killed (SIGKILL) in the middle of commit loops, again and again.

After each kill the catalog must open, hold every acknowledged commit, keep commit_seq gapless,
keep multi-table transactions all-or-nothing, and point only at files that exist.
"""
import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from conftest import EXTENSION, connect

WRITER = textwrap.dedent("""
    import sys, duckdb
    ext, lake, durability, start = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
    con.execute(f"LOAD '{ext}'")
    con.execute(f"ATTACH '{lake}' AS lake (TYPE skade, DURABILITY '{durability}')")
    con.execute("CREATE TABLE IF NOT EXISTS lake.a (x BIGINT)")
    con.execute("CREATE TABLE IF NOT EXISTS lake.b (x BIGINT)")
    i = start
    while True:
        if i % 3 == 0:   # a two-table transaction
            con.execute("BEGIN")
            con.execute(f"INSERT INTO lake.a VALUES ({i})")
            con.execute(f"INSERT INTO lake.b VALUES ({i})")
            con.execute("COMMIT")
        elif i % 7 == 0:  # a snapshot-less commit
            con.execute(f"CREATE SCHEMA lake.s{i}")
        else:
            con.execute(f"INSERT INTO lake.a VALUES ({i})")
        print(i, flush=True)   # acknowledged
        i += 1
""")


def run_writer(lake, durability, start, env=None):
    return subprocess.Popen([sys.executable, "-c", WRITER, EXTENSION, str(lake), durability, str(start)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def kill_after(proc, seconds):
    """Lets the writer commit for about `seconds` after its first ack, then SIGKILLs it. Returns
    the acknowledged commits, each with the time it was read, and the time of the kill."""
    acked = []

    def read():
        for line in proc.stdout:
            if line.strip():
                acked.append((int(line), time.monotonic()))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    deadline = time.monotonic() + 60
    while not acked and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(seconds)
    proc.send_signal(signal.SIGKILL)
    killed_at = time.monotonic()
    proc.wait()
    reader.join(timeout=10)
    return acked, killed_at


def check_catalog(lake):
    con = connect()
    con.execute(f"ATTACH '{lake}' AS lake (TYPE skade)")
    seqs = [r[0] for r in con.execute("SELECT commit_seq FROM skade_commits_since('lake', 0)").fetchall()]
    assert seqs == list(range(1, len(seqs) + 1)), "commit_seq has a gap"
    a = {r[0] for r in con.execute("SELECT x FROM lake.a").fetchall()}
    b = {r[0] for r in con.execute("SELECT x FROM lake.b").fetchall()}
    assert b == {x for x in a if x % 3 == 0}, "a two-table transaction was torn"
    schemas = {r[0] for r in con.execute(
        "SELECT schema_name FROM duckdb_schemas() WHERE database_name = 'lake'").fetchall()}
    for (location,) in con.execute("SELECT metadata_location FROM skade_tables('lake')").fetchall():
        assert os.path.exists(location), f"a pointer references a missing file: {location}"
    con.close()
    return a, schemas


def present(i, a, schemas):
    return f"s{i}" in schemas if (i % 7 == 0 and i % 3 != 0) else i in a


def test_sigkill_during_commits_loses_no_acknowledged_commit(tmp_path):
    lake = tmp_path / "lake.skade"
    rng = random.Random(42)
    start, trials = 1, 12
    for trial in range(trials):
        acked, _ = kill_after(run_writer(lake, "immediate", start), rng.uniform(0.2, 1.0))
        assert acked, f"trial {trial}: the writer never committed"
        a, schemas = check_catalog(lake)
        lost = [i for i, _ in acked if not present(i, a, schemas)]
        assert not lost, f"trial {trial}: acknowledged commits lost: {lost[:10]}"
        start = max(i for i, _ in acked) + 2  # the killed, unacknowledged commit may or may not be there


def test_eventual_durability_loses_at_most_the_last_moments(tmp_path):
    lake = tmp_path / "lake.skade"
    start = 1
    for trial in range(4):
        acked, killed_at = kill_after(run_writer(lake, "eventual", start), 1.5)
        a, schemas = check_catalog(lake)
        # the flush runs every 0.2 s; allow generous slack for a loaded machine
        old = [i for i, t in acked if killed_at - t > 2.0]
        lost = [i for i in old if not present(i, a, schemas)]
        assert not lost, f"trial {trial}: commits acknowledged long before the crash were lost: {lost[:10]}"
        start = max(i for i, _ in acked) + 2


# (before_chained_metadata_write: an append's turn is handed on, its manifest list and
# metadata.json not yet written)
@pytest.mark.parametrize("point", ["before_chained_metadata_write", "before_catalog_commit", "after_catalog_commit"])
def test_crash_between_metadata_and_catalog_commit(tmp_path, point):
    lake = tmp_path / "lake.skade"
    acked, _ = kill_after(run_writer(lake, "immediate", 1), 0.5)
    a, _ = check_catalog(lake)
    env = dict(os.environ, SKADE_FAILPOINT=point)
    proc = run_writer(lake, "immediate", 1000, env)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode != 0 and f"failpoint {point}" in err, err
    a2, _ = check_catalog(lake)
    if point != "after_catalog_commit":
        assert a2 == a, "a commit that never reached the catalog became visible"
    else:
        assert a <= a2
