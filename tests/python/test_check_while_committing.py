"""skade_check reports no damage on a healthy catalog while commits land (it once did).

check.rs reads the commit_seq counter in one read transaction ("counters") and walks the commit
log in a later one ("commit_log"); a commit between them makes the log longer than the counter
read earlier: "its commit log ends at N but its commit_seq counter is M" (M < N), a false
'damaged' finding on a catalog that is fine.
"""
import threading

import pytest

from conftest import connect


@pytest.mark.parametrize("durability", ["eventual", "immediate"])
def test_check_is_clean_while_commits_land(tmp_path, durability):
    con = connect()
    con.execute(f"ATTACH '{tmp_path}/lake.skade' AS lake (TYPE skade, DURABILITY '{durability}')")
    con.execute("CREATE TABLE lake.t (x BIGINT)")
    stop = threading.Event()

    def writer():
        c = con.cursor()
        i = 0
        while not stop.is_set():
            i += 1
            c.execute(f"INSERT INTO lake.t VALUES ({i})")

    th = threading.Thread(target=writer)
    th.start()
    bad = []
    try:
        c = con.cursor()
        for _ in range(400):
            bad += [row for row in c.execute("SELECT * FROM skade_check('lake')").fetchall() if row[1] != "ok"]
            if bad:
                break
    finally:
        stop.set()
        th.join()
    con.execute("DETACH lake")
    assert not bad, bad
