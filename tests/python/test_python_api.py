"""Python (`pip install duckdb==1.5.5`): load, attach, write, read, re-attach; one file, two processes."""
import multiprocessing
import subprocess
import sys
import textwrap
import time

import duckdb
import pytest

from conftest import EXTENSION, connect


def test_python_round_trip(tmp_path, con):
    lake = tmp_path / "lake.skade"
    con.execute(f"ATTACH '{lake}' AS lake (TYPE skade)")
    con.execute("CREATE TABLE lake.t AS SELECT i AS id, 'x' || i AS s FROM range(100000) r(i)")
    assert con.execute("SELECT count(*), sum(id) FROM lake.t").fetchone() == (100000, 4999950000)
    rows = con.execute("SELECT * FROM lake.t WHERE id < 3 ORDER BY id").fetchall()
    assert rows == [(0, "x0"), (1, "x1"), (2, "x2")]
    con.execute("DETACH lake")
    con.execute(f"ATTACH '{lake}' AS lake (TYPE skade)")
    assert con.execute("SELECT max(id) FROM lake.t").fetchone() == (99999,)


def test_two_databases_in_one_process_share_a_catalog(tmp_path):
    lake = tmp_path / "lake.skade"
    a, b = connect(), connect()
    a.execute(f"ATTACH '{lake}' AS lake (TYPE skade)")
    b.execute(f"ATTACH '{lake}' AS lake (TYPE skade)")
    a.execute("CREATE TABLE lake.t AS SELECT 1 AS x")
    assert b.execute("SELECT x FROM lake.t").fetchone() == (1,)
    b.execute("INSERT INTO lake.t VALUES (2)")
    assert a.execute("SELECT sum(x) FROM lake.t").fetchone() == (3,)


HOLDER = textwrap.dedent("""
    import sys, time, duckdb
    con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
    con.execute(f"LOAD '{sys.argv[1]}'")
    options = sys.argv[3] if len(sys.argv) > 3 else ""
    con.execute(f"ATTACH '{sys.argv[2]}' AS lake (TYPE skade{options})")
    print("attached", flush=True)
    time.sleep(60)
""")


def test_a_catalog_held_by_another_process_is_a_clear_error(tmp_path):
    lake = tmp_path / "lake.skade"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, EXTENSION, str(lake)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "attached"
        con = connect()
        start = time.monotonic()
        with pytest.raises(duckdb.Error, match="already open in another process"):
            con.execute(f"ATTACH '{lake}' AS lake (TYPE skade)")
        assert time.monotonic() - start < 5, "the second open must fail fast, not wait"
    finally:
        holder.kill()
        holder.wait()
    # once the holder is gone the catalog opens normally
    con = connect()
    con.execute(f"ATTACH '{lake}' AS lake (TYPE skade)")


def test_a_reader_beside_a_writer_in_another_process_is_told_what_is_allowed(tmp_path):
    lake = tmp_path / "lake.skade"
    maker = connect()
    maker.execute(f"ATTACH '{lake}' AS lake (TYPE skade)")
    maker.execute("CREATE TABLE lake.t AS SELECT 1 AS x")
    maker.close()  # (the file closed with its database)
    con = connect()
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, EXTENSION, str(lake)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "attached"
        # not "one writer at a time", which reads as if readers were let in
        with pytest.raises(duckdb.Error) as refused:
            con.execute(f"ATTACH '{lake}' AS lake (TYPE skade, READ_ONLY)")
        message = str(refused.value)
        assert "already open in another process, which writes to it" in message, message
        assert "any number of processes that attach it READ_ONLY, never both" in message, message
        assert "COMMIT_LOG '<folder>'" in message, message
    finally:
        holder.kill()
        holder.wait()
    # a writer killed leaves recovery to do, which a READ_ONLY attach cannot: it says how
    with pytest.raises(duckdb.Error, match="ATTACH it once without READ_ONLY"):
        con.execute(f"ATTACH '{lake}' AS lake (TYPE skade, READ_ONLY)")
    con.execute(f"ATTACH '{lake}' AS lake (TYPE skade)")
    con.execute("DETACH lake")
    # READ_ONLY attaches of several processes share the file
    reader = subprocess.Popen([sys.executable, "-c", HOLDER, EXTENSION, str(lake), ", READ_ONLY"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert reader.stdout.readline().strip() == "attached"
        con.execute(f"ATTACH '{lake}' AS lake (TYPE skade, READ_ONLY)")
        assert con.execute("SELECT x FROM lake.t").fetchone() == (1,)
        con.execute("DETACH lake")
        with pytest.raises(duckdb.Error, match="already open in another process: without a commit log"):
            con.execute(f"ATTACH '{lake}' AS lake (TYPE skade)")
    finally:
        reader.kill()
        reader.wait()


def test_a_prepared_table_function_survives_detach(tmp_path, con):
    lake = tmp_path / "lake.skade"
    con.execute(f"ATTACH '{lake}' AS lake (TYPE skade)")
    con.execute("CREATE TABLE lake.t AS SELECT 1 AS x")
    con.execute("PREPARE feed AS SELECT count(*) FROM skade_commits_since('lake', 0)")
    assert con.execute("EXECUTE feed").fetchone() == (2,)
    con.execute("DETACH lake")
    with pytest.raises(duckdb.Error, match="no attached database is named"):
        con.execute("EXECUTE feed")
    con.execute(f"ATTACH '{lake}' AS lake (TYPE skade)")
    assert con.execute("EXECUTE feed").fetchone() == (2,)


def test_a_frame_column_iceberg_cannot_store_names_the_way_out(tmp_path, con):
    """A pandas timedelta (INTERVAL) or Categorical (ENUM) column fails a CTAS in DuckDB's terms,
    naming the column and the way out, which then works."""
    import datetime

    import pyarrow as pa

    con.execute(f"ATTACH '{tmp_path / 'lake.skade'}' AS lake (TYPE skade)")
    took = pa.table({"id": [1, 2], "took": pa.array([datetime.timedelta(seconds=90), None], pa.duration("us"))})
    con.register("took", took)
    with pytest.raises(duckdb.Error) as refused:
        con.execute("CREATE TABLE lake.t AS SELECT * FROM took")
    message = str(refused.value)
    assert 'column "took" has type INTERVAL' in message, message
    assert "Iceberg has no INTERVAL type; store it as VARCHAR (or as seconds: epoch(took))" in message, message
    assert "SELECT * REPLACE (CAST(took AS VARCHAR) AS took)" in message, message
    for arrow_speak in ("Arrow", "MonthDayNano", "Interval("):
        assert arrow_speak not in message, message
    con.execute("CREATE TABLE lake.t AS SELECT * REPLACE (epoch(took) AS took) FROM took")
    assert con.execute("SELECT took FROM lake.t ORDER BY id").fetchall() == [(90.0,), (None,)]

    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"id": [1, 2], "kind": pd.Categorical(["a", "b"])})
    con.register("frame", frame)
    with pytest.raises(duckdb.Error) as refused:
        con.execute("CREATE TABLE lake.c AS SELECT * FROM frame")
    message = str(refused.value)
    assert 'column "kind" has type ENUM(' in message, message
    assert "Iceberg has no ENUM type; store it as VARCHAR: CAST(kind AS VARCHAR)" in message, message
    assert "Dictionary" not in message, message
    con.execute("CREATE TABLE lake.c AS SELECT * EXCLUDE (kind) FROM frame")
    assert con.execute("SELECT count(*) FROM lake.c").fetchone() == (2,)


def test_vacuum_and_analyze_do_not_scan_a_skade_table(tmp_path, con):
    """ANALYZE and VACUUM are decided before DuckDB reads the table: with its data files gone, a
    scan would fail, and neither does."""
    import glob
    import os

    lake = tmp_path / "lake.skade"
    con.execute(f"ATTACH '{lake}' AS lake (TYPE skade)")
    con.execute("CREATE TABLE lake.t AS SELECT i AS id FROM range(1000) r(i)")
    files = glob.glob(f"{lake}.data/main/t/data/*.parquet")
    assert files
    for f in files:
        os.remove(f)
    with pytest.raises(duckdb.Error):  # (a scan needs them)
        con.execute("SELECT sum(id) FROM lake.t").fetchall()
    con.execute("ANALYZE lake.t")
    with pytest.raises(duckdb.NotImplementedException, match=r"SELECT \* FROM skade_compact\('lake.t'\)"):
        con.execute("VACUUM lake.t")
