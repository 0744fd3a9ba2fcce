"""skade_lookup from Python: parameters (prepared statements keep their binding), NULL keys, and
no descriptor left open on files a rollback removed."""
import os

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
