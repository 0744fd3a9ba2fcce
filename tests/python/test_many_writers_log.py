"""Appends of several processes into one table through a commit log chain as the threads of one
process do (issue 47, docs/design/many-writers.md, "Through a commit log"): a process hands the
table's turn on before its commit lands, the next one (of any process) builds on its pointer and
offers its batch after it. A predecessor that fails or dies costs its successors a rebuild, never
a row, a gap in commit_seq or another error."""
import os
import subprocess
import sys
import time

from conftest import EXTENSION, connect

# (each child process attaches the lake through its commit log, then runs its part)
ATTACHED = """
import sys, threading, time, duckdb
ext, lake, log = sys.argv[1:4]
con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
con.execute(f"LOAD '{ext}'")
con.execute(f"ATTACH '{lake}' AS lake (TYPE skade, COMMIT_LOG '{log}', COMMIT_LOG_POLL_MS 20)")
"""

WRITER = ATTACHED + """
start, threads, seconds = sys.argv[4:7]
out = threading.Lock()
stop = time.monotonic() + float(seconds)
def write(w):
    cur = con.cursor()
    n = int(start) + w * 100_000
    while time.monotonic() < stop:
        try:
            cur.execute(f"INSERT INTO lake.t (id, w) VALUES ({n}, {w})")
            line = f"ok {n}"
        except Exception as e:
            line = "error " + str(e).replace(chr(10), " ")
        with out:
            sys.stdout.write(line + chr(10))
            sys.stdout.flush()
        n += 1
workers = [threading.Thread(target=write, args=(w,)) for w in range(int(threads))]
[t.start() for t in workers]
[t.join() for t in workers]
print("chained", con.execute("SELECT appends_chained FROM skade_commit_log('lake')").fetchone()[0])
"""


def attach(con, tmp_path):
    con.execute(f"ATTACH '{tmp_path / 'lake.skade'}' AS lake "
                f"(TYPE skade, COMMIT_LOG '{tmp_path / 'lake.log'}', COMMIT_LOG_POLL_MS 20)")


def spawn(tmp_path, script, *args, env=None):
    """A child process running `script` (one of the above) on the lake, with `args` after it."""
    return subprocess.Popen([sys.executable, "-c", script, EXTENSION, str(tmp_path / "lake.skade"),
                             str(tmp_path / "lake.log"), *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def writers(tmp_path, envs, threads=2, seconds=2.0):
    """Runs one writer process per environment in `envs` at once; their output lines."""
    procs = [spawn(tmp_path, WRITER, i * 1_000_000, threads, seconds, env=dict(os.environ, **env))
             for i, env in enumerate(envs)]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err[-2000:]
        outs.append(out.splitlines())
    return outs


def check_lake(tmp_path, acked):
    """Exactly the acknowledged rows, commit_seq gapless, skade_check clean."""
    con = connect()
    attach(con, tmp_path)
    ids = sorted(r[0] for r in con.execute("SELECT id FROM lake.t").fetchall())
    assert ids == sorted(acked), "exactly the acknowledged rows, each once"
    seqs = [r[0] for r in con.execute("SELECT commit_seq FROM skade_commits_since('lake', 0)").fetchall()]
    assert seqs == list(range(1, len(seqs) + 1)), "commit_seq has a gap"
    assert {r[1] for r in con.execute("SELECT * FROM skade_check('lake')").fetchall()} == {"ok"}
    con.close()


def create(tmp_path):
    con = connect()
    attach(con, tmp_path)
    con.execute("CREATE TABLE lake.t (id BIGINT PRIMARY KEY, w INTEGER)")
    con.close()


def records(tmp_path):
    """How many tentative heads the turns file holds past its turn bytes (non-zero records)."""
    data = (tmp_path / "lake.skade.turns").read_bytes()[1 << 16:]
    return sum(1 for i in range(0, len(data), 1024) if any(data[i:i + 1024]))


def chained(out):
    return sum(int(line.split()[1]) for line in out if line.startswith("chained "))


def test_processes_appending_to_one_table_chain_and_lose_nothing(tmp_path):
    create(tmp_path)
    outs = writers(tmp_path, [{}, {}, {}])
    errors = [line for out in outs for line in out if line.startswith("error ")]
    assert not errors, errors[:5]
    acked = [int(line.split()[1]) for out in outs for line in out if line.startswith("ok ")]
    assert len(acked) > 30
    check_lake(tmp_path, acked)
    # appends built on others still in flight (of their own process or another) and landed
    assert sum(chained(out) for out in outs) > 0
    # the last one's pointer is left beside the turns
    assert records(tmp_path) == 1


def test_a_chained_append_that_fails_costs_the_others_nothing(tmp_path):
    """Every third append of one process fails after it handed the turn on (as when its files
    cannot be synced), when the others' appends may have built on it: only its own statements
    fail, and the others' appends still chain."""
    create(tmp_path)
    outs = writers(tmp_path, [{"SKADE_FAILPOINT": "chained_metadata_write:every=3"}, {}, {}])
    failing, others = outs[0], outs[1] + outs[2]
    injected = [line for line in failing if line.startswith("error ")]
    assert injected, "the failure point was never reached"
    assert all("failure injected at chained_metadata_write" in line for line in injected), injected[:3]
    errors = [line for line in others if line.startswith("error ")]
    assert not errors, f"{len(errors)} appends failed for another's failure, e.g. {errors[0][:300]}"
    acked = [int(line.split()[1]) for out in outs for line in out if line.startswith("ok ")]
    check_lake(tmp_path, acked)
    assert chained(others) > 0


def test_a_process_killed_after_handing_the_turn_on_stops_no_one(tmp_path):
    """A process aborts after handing the table's turn on, its commit not landed: the next
    process's append sees that the record's writer is gone and builds on the committed head at
    once (records are trusted for 60 s here: only the writer's death can end the wait early)."""
    create(tmp_path)
    env = dict(os.environ, SKADE_CHAIN_WAIT_MS="60000")
    script = ("import sys, time, duckdb\n"
              "con = duckdb.connect(config={'allow_unsigned_extensions': 'true'})\n"
              f"con.execute(\"LOAD '{EXTENSION}'\")\n"
              f"con.execute(\"ATTACH '{tmp_path / 'lake.skade'}' AS lake (TYPE skade, COMMIT_LOG "
              f"'{tmp_path / 'lake.log'}')\")\n"
              "started = time.monotonic()\n"
              "con.execute(f'INSERT INTO lake.t VALUES ({sys.argv[1]}, 1)')\n"
              "print('waited', time.monotonic() - started)\n")

    def insert(k, **extra):
        return subprocess.run([sys.executable, "-c", script, str(k)], capture_output=True, text=True,
                              timeout=120, env=dict(env, **extra))

    assert insert(1).returncode == 0
    doomed = insert(2, SKADE_FAILPOINT="before_chained_metadata_write")
    assert doomed.returncode != 0 and "failpoint before_chained_metadata_write" in doomed.stderr
    assert records(tmp_path) == 1  # (its pointer, left by a process that is gone)
    follower = insert(3)
    assert follower.returncode == 0, follower.stderr[-2000:]
    waited = float(follower.stdout.split()[-1])
    assert waited < 20, f"the append waited {waited:.1f} s for a process that is gone"
    check_lake(tmp_path, [1, 3])


MAINTAINER = ATTACHED + """
stop, k = time.monotonic() + float(sys.argv[4]), 0
while time.monotonic() < stop:
    con.execute(f"DELETE FROM lake.t WHERE id = {-1 - k}")
    print("deleted", -1 - k, flush=True)
    con.execute("SELECT * FROM skade_expire_snapshots('lake.t', retain_last := 5)").fetchall()
    print("expired", flush=True)
    k += 1
    time.sleep(0.1)
"""


ALTERER = ATTACHED + """
stop, k = time.monotonic() + float(sys.argv[4]), 0
while time.monotonic() < stop:
    for sql in (f"ALTER TABLE lake.t ADD COLUMN c{k} VARCHAR", f"ALTER TABLE lake.t DROP COLUMN c{k}"):
        try:
            con.execute(sql)
            print("altered", flush=True)
        except Exception as e:
            print("error", sql, str(e).replace(chr(10), " "), flush=True)
    k += 1
"""


def test_alter_table_goes_through_a_stream_of_chained_appends(tmp_path):
    """A process altering the table's columns while two others append to it without a pause:
    each ALTER drains the appends in flight and is made again on the head it then holds the turn
    of, so none is starved into a conflict, and no append fails."""
    create(tmp_path)
    alterer = spawn(tmp_path, ALTERER, 2)
    outs = writers(tmp_path, [{}, {}], seconds=2.5)
    out, err = alterer.communicate(timeout=120)
    assert alterer.returncode == 0, err[-2000:]
    assert "error" not in out, out[:2000]
    assert out.count("altered") >= 4
    errors = [line for o in outs for line in o if line.startswith("error ")]
    assert not errors, errors[:5]
    check_lake(tmp_path, [int(line.split()[1]) for o in outs for line in o if line.startswith("ok ")])


def test_deletes_and_expiry_go_through_a_stream_of_chained_appends(tmp_path):
    """A process deleting rows and expiring snapshots while two others append to the table
    without a pause: the delete and the expiry wait for the appends in flight to land (they
    decide on the committed head) and are not starved; nothing fails."""
    create(tmp_path)
    con = connect()
    attach(con, tmp_path)
    con.execute("INSERT INTO lake.t SELECT -1 - i, -1 FROM range(100) t(i)")
    con.close()
    maintainer = spawn(tmp_path, MAINTAINER, 2)
    outs = writers(tmp_path, [{}, {}], seconds=2.5)
    out, err = maintainer.communicate(timeout=120)
    assert maintainer.returncode == 0, err[-2000:]
    deleted = {int(line.split()[1]) for line in out.splitlines() if line.startswith("deleted ")}
    assert deleted and out.count("expired") == len(deleted)
    errors = [line for o in outs for line in o if line.startswith("error ")]
    assert not errors, errors[:5]
    acked = [int(line.split()[1]) for o in outs for line in o if line.startswith("ok ")]
    check_lake(tmp_path, acked + [k for k in range(-100, 0) if k not in deleted])
