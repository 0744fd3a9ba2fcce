"""Scans under many query shapes (tasks of 122,880 positions as batch indexes, per-task Arrow
dictionaries and Decimal32/Decimal64, position deletes on keyed tables, dictionary-encoded numbers):
every skade table is compared with a native DuckDB copy that went through the same statements
(EXCEPT ALL both ways), with 1 and 2 threads; files other writers lay out differently (one large
row group, many small ones with their own dictionaries); insertion order; error messages."""
import glob
import re
import threading

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import connect

DUCKDB_2 = duckdb.__version__.startswith("2")


@pytest.fixture
def lake(tmp_path):
    con = connect()
    con.execute(f"ATTACH '{tmp_path / 'lake.skade'}' AS lake (TYPE skade)")
    yield con
    con.close()


def mismatches(con, a, b):
    """Rows of `a` not in `b` plus rows of `b` not in `a` (multisets)."""
    return con.execute(
        f"SELECT count(*) FROM ((SELECT * FROM {a} EXCEPT ALL SELECT * FROM {b}) "
        f"UNION ALL (SELECT * FROM {b} EXCEPT ALL SELECT * FROM {a}))"
    ).fetchone()[0]


def both(con, sql, lake_table="lake.t", ref="ref"):
    con.execute(sql.format(t=lake_table))
    con.execute(sql.format(t=ref))


def out_of_order(con, relation, column="id"):
    """How many rows of `relation`, in the order it returns them, do not follow a smaller id."""
    return con.execute(
        f"SELECT count(*) FROM (SELECT {column} AS v, lag({column}) OVER () AS p FROM (SELECT * FROM {relation})) "
        f"WHERE v <= p"
    ).fetchone()[0]


def data_files(tmp_path, table):
    return sorted(glob.glob(str(tmp_path / "lake.skade.data" / "main" / table / "data" / "*-00000.parquet")))


def reattach(con, tmp_path):
    con.execute("DETACH lake")
    con.execute(f"ATTACH '{tmp_path / 'lake.skade'}' AS lake (TYPE skade)")


def current_snapshot(con, table="t"):
    return con.execute(
        "SELECT current_snapshot_id FROM skade_tables('lake') WHERE table_name = ?", [table]
    ).fetchone()[0]


COLUMNS = ("i BIGINT, s VARCHAR, s2 VARCHAR, d4 DECIMAL(4,1), d9 DECIMAL(9,3), d18 DECIMAL(18,6), "
           "d38 DECIMAL(38,10), dt DATE, f DOUBLE")

# One INSERT (one file) each: few distinct strings and values (small dictionaries), many (plain or
# large dictionaries), all NULL, extremes with long/empty/unicode strings, few again (other values).
INSERTS = [
    "SELECT i, ['a','b','','ünï','c'][i%5+1], 'x'||(i%3), (i%10)/10.0, (i%1000)/1000.0, (i%50)::DECIMAL(18,6), "
    "(i%20)::DECIMAL(38,10), DATE '2020-01-01' + (i%30)::INT, (i%4)*1.5 FROM range(0, 130000) r(i)",
    "SELECT i, 'many-'||i, md5(i::VARCHAR), ((i%19999)-9999)/10.0, (i*7919 % 999999999)/1000.0, "
    "(i*104729)::DECIMAL(18,6)/7, i::DECIMAL(38,10)/3, DATE '1900-01-01' + (i%40000)::INT, i*0.37 "
    "FROM range(130000, 190000) r(i)",
    "SELECT i, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL FROM range(190000, 195000) r(i)",
    "SELECT i, CASE WHEN i%3=0 THEN NULL WHEN i%3=1 THEN repeat('L', 3000) ELSE '' END, "
    "CASE WHEN i%2=0 THEN '🦆' END, CASE i%3 WHEN 0 THEN 999.9 WHEN 1 THEN -999.9 END, "
    "CASE i%3 WHEN 0 THEN 999999.999 WHEN 1 THEN -999999.999 END, "
    "CASE i%3 WHEN 0 THEN 999999999999.999999 WHEN 1 THEN -999999999999.999999 END, "
    "CASE i%3 WHEN 0 THEN 9999999999999999999999999999.9999999999 WHEN 1 THEN -9999999999999999999999999999.9999999999 END, "
    "CASE WHEN i%2=0 THEN DATE '9999-12-31' ELSE DATE '0001-01-01' END, "
    "CASE WHEN i%2=0 THEN 'nan'::DOUBLE ELSE '-0.0'::DOUBLE END FROM range(195000, 200000) r(i)",
    "SELECT i, ['b','zz','a',NULL][i%4+1], 'y'||(i%2), (i%7)/10.0, (i%3)/1000.0, (i%5)::DECIMAL(18,6), NULL, "
    "DATE '2021-06-01' + (i%3)::INT, 2.5 FROM range(200000, 330000) r(i)",
]

QUERIES = [
    "SELECT * FROM {t}",
    "SELECT s, count(*), sum(i) FROM {t} GROUP BY s",
    "SELECT s, s2, d4, count(*) FROM {t} GROUP BY ALL",
    "SELECT DISTINCT s FROM {t}",
    "SELECT count(DISTINCT s), count(DISTINCT s2), count(DISTINCT d4), count(DISTINCT d18), count(DISTINCT d38) FROM {t}",
    "SELECT d4, count(*), min(d9), max(d18), min(d38), max(dt) FROM {t} GROUP BY d4",
    "SELECT d18, d38, count(*) FROM {t} GROUP BY d18, d38",
    "SELECT dt, count(*) FROM {t} GROUP BY dt",
    "SELECT i, upper(s), length(s), s || s2, substr(s, 1, 2), s LIKE 'a%', signbit(f), isnan(f) FROM {t}",
    "SELECT i FROM {t} WHERE s LIKE '%a%' OR s IN ('', 'zz') OR s IS NULL",
    "SELECT i FROM {t} WHERE s > 'b' AND s2 = 'x1'",
    "SELECT i FROM {t} WHERE d4 BETWEEN -1.0 AND 0.5 OR d38 IN (1, 2, 3) OR d18 > 999999999999",
    "SELECT i FROM {t} WHERE dt = DATE '2020-01-05' OR d9 = 0.002",
    "SELECT a.s, count(*) FROM {t} a JOIN (SELECT DISTINCT s FROM {t} WHERE length(s) < 3) b ON a.s = b.s GROUP BY a.s",
    "SELECT a.d4, a.d18, count(*) FROM {t} a JOIN (SELECT DISTINCT d4, d18 FROM {t} WHERE i % 7 = 0) b "
    "ON a.d4 = b.d4 AND a.d18 = b.d18 GROUP BY ALL",
    "SELECT i, s, row_number() OVER (PARTITION BY s ORDER BY i), sum(d9) OVER (PARTITION BY d4 ORDER BY i) FROM {t}",
    "SELECT * FROM (SELECT s, i FROM {t} ORDER BY s NULLS FIRST, i LIMIT 777)",
    "SELECT * FROM (SELECT d38, d4, i FROM {t} ORDER BY d38 DESC NULLS LAST, d4, i LIMIT 500)",
    "SELECT max(s), min(s), max(s2), arg_max(s, i), arg_min(d4, i) FROM {t}",
    "SELECT s, d4, dt, count(*) FROM {t} GROUP BY ROLLUP (s, d4, dt)",
    "SELECT coalesce(s, '<null>') k, string_agg(DISTINCT s2, ',' ORDER BY s2), count(*) FROM {t} GROUP BY k",
]


def test_mixed_dictionary_and_plain_files_read_like_native(lake):
    lake.execute(f"CREATE TABLE ref ({COLUMNS})")
    lake.execute(f"CREATE TABLE lake.t ({COLUMNS})")
    for sql in INSERTS[:3]:
        both(lake, "INSERT INTO {t} " + sql)
    middle = current_snapshot(lake)
    lake.execute("CREATE TABLE ref_middle AS SELECT * FROM ref")
    for sql in INSERTS[3:]:
        both(lake, "INSERT INTO {t} " + sql)
    failures = []
    for threads in (1, 2):
        lake.execute(f"SET threads = {threads}")
        for q in QUERIES:
            n = mismatches(lake, f"({q.format(t='lake.t')})", f"({q.format(t='ref')})")
            if n:
                failures.append((threads, n, q))
        # time travel to a snapshot before the later files (other encodings) were added
        n = mismatches(lake, f"(SELECT * FROM lake.t AT (VERSION => {middle}))", "ref_middle")
        if n:
            failures.append((threads, n, "AT VERSION"))
    assert failures == []
    # DML on the dictionary and decimal columns, then the same again
    both(lake, "UPDATE {t} SET s = s || '!', d4 = -d4, d18 = -d18 WHERE i % 997 = 3 OR i BETWEEN 122870 AND 122890")
    both(lake, "DELETE FROM {t} WHERE s = 'b' OR d9 = 0.001 OR i IN (122879, 122880, 329999)")
    for threads in (1, 2):
        lake.execute(f"SET threads = {threads}")
        for q in QUERIES[:9]:
            assert mismatches(lake, f"({q.format(t='lake.t')})", f"({q.format(t='ref')})") == 0, q


@pytest.mark.skipif(not DUCKDB_2, reason="vector_type() flattens its argument before 2.0")
def test_small_dictionary_strings_reach_duckdb_as_dictionary_vectors(lake):
    lake.execute("CREATE TABLE lake.t (i BIGINT, s VARCHAR)")
    lake.execute("INSERT INTO lake.t SELECT i, 'v' || (i % 5) FROM range(0, 50000) r(i)")
    lake.execute("INSERT INTO lake.t SELECT i, 'many-' || i FROM range(50000, 100000) r(i)")
    got = dict(lake.execute("SELECT i >= 50000, vector_type(s) FROM lake.t GROUP BY ALL").fetchall())
    assert got == {False: "DICTIONARY_VECTOR", True: "FLAT_VECTOR"}


def test_deletes_row_ids_and_order_across_task_boundaries(lake):
    lake.execute("SET threads = 1")  # one file of 400,000 rows: 4 tasks
    lake.execute("CREATE TABLE lake.t AS SELECT i AS id, 'v' || (i % 5) AS s, (i % 100) / 4 AS d FROM range(400000) r(i)")
    lake.execute("CREATE TABLE ref AS SELECT * FROM lake.t")
    lake.execute("SET threads = 2")
    for sql in [
        "DELETE FROM {t} WHERE id IN (0, 122879, 122880, 245759, 245760, 399999)",
        "DELETE FROM {t} WHERE id BETWEEN 122800 AND 123000 OR id % 1000 = 7",
        "DELETE FROM {t} WHERE id >= 245760 AND id < 368640",  # a whole task
        "DELETE FROM {t} WHERE s = 'v3' AND id < 130000",
    ]:
        both(lake, sql)
        assert mismatches(lake, "lake.t", "ref") == 0, sql
        assert lake.execute("SELECT count(*), count(DISTINCT rowid) FROM lake.t").fetchone() == (
            lake.execute("SELECT count(*) FROM ref").fetchone()[0],) * 2
        # only deletes: a copy still comes out in insertion order, read by both threads
        lake.execute("CREATE OR REPLACE TABLE copied AS SELECT * FROM lake.t")
        assert out_of_order(lake, "copied") == 0
        first = lake.execute("SELECT list(id) FROM (SELECT id FROM lake.t LIMIT 4 OFFSET 122000)").fetchone()
        assert first == lake.execute("SELECT list(id) FROM (SELECT id FROM ref LIMIT 4 OFFSET 122000)").fetchone()
    for threads in (1, 2):
        lake.execute(f"SET threads = {threads}")
        assert lake.execute("SELECT s, count(*), sum(id), sum(d) FROM lake.t GROUP BY s ORDER BY s").fetchall() == \
            lake.execute("SELECT s, count(*), sum(id), sum(d) FROM ref GROUP BY s ORDER BY s").fetchall()


def test_a_row_group_spanning_several_tasks(lake, tmp_path):
    """Another writer's file: one row group of 300,000 rows (3 tasks, the first reads it all)."""
    lake.execute("CREATE TABLE lake.t (id BIGINT, s VARCHAR, d DECIMAL(9,2))")
    lake.execute("INSERT INTO lake.t SELECT i, 'v' || (i % 5), (i % 100) / 4 FROM range(300000) r(i)")
    lake.execute("CREATE TABLE ref AS SELECT * FROM lake.t")
    [path] = data_files(tmp_path, "t")
    pq.write_table(pq.read_table(path), path, row_group_size=1 << 20)  # keeps the field ids
    assert pq.ParquetFile(path).metadata.num_row_groups == 1
    reattach(lake, tmp_path)
    lake.execute("SET threads = 2")
    assert mismatches(lake, "lake.t", "ref") == 0
    both(lake, "DELETE FROM {t} WHERE id IN (0, 122879, 122880, 200000, 299999)")
    both(lake, "UPDATE {t} SET s = 'U', d = -d WHERE id BETWEEN 122870 AND 122890")
    assert mismatches(lake, "lake.t", "ref") == 0
    assert lake.execute("SELECT count(*) FROM lake.t").fetchone() == lake.execute("SELECT count(*) FROM ref").fetchone()


def test_small_row_groups_each_with_its_own_dictionary(lake, tmp_path):
    """Another writer's file: 3,000-row groups, each string chunk a small dictionary of its own, so
    a task's batches span row groups whose dictionaries differ."""
    lake.execute("CREATE TABLE lake.t (id BIGINT, s VARCHAR, d DECIMAL(9,2), e DECIMAL(18,3))")
    lake.execute("INSERT INTO lake.t SELECT i, CASE WHEN i % 13 = 0 THEN NULL ELSE 'g' || (i // 3000) || '-' || (i % 4) END, "
                 "(i % 100) / 4, (i % 7) / 3 FROM range(300000) r(i)")
    lake.execute("CREATE TABLE ref AS SELECT * FROM lake.t")
    [path] = data_files(tmp_path, "t")
    pq.write_table(pq.read_table(path), path, row_group_size=3000, use_dictionary=True, store_decimal_as_integer=True)
    reattach(lake, tmp_path)
    for threads in (1, 2):
        lake.execute(f"SET threads = {threads}")
        for q in ["SELECT * FROM {t}", "SELECT s, count(*), sum(id) FROM {t} GROUP BY s",
                  "SELECT upper(s), d, count(*) FROM {t} GROUP BY ALL", "SELECT id FROM {t} WHERE s LIKE 'g3%-1'",
                  "SELECT s, e, sum(d) FROM {t} GROUP BY ALL"]:
            assert mismatches(lake, f"({q.format(t='lake.t')})", f"({q.format(t='ref')})") == 0, (threads, q)
    both(lake, "DELETE FROM {t} WHERE id % 3000 < 3 OR id BETWEEN 122870 AND 122890")
    both(lake, "UPDATE {t} SET s = s || 'u' WHERE id % 777 = 0")
    assert mismatches(lake, "lake.t", "ref") == 0
    assert mismatches(lake, "(SELECT s, count(*) FROM lake.t GROUP BY s)", "(SELECT s, count(*) FROM ref GROUP BY s)") == 0


def test_keyed_decimal_table_scans_lookups_and_time_travel_agree(lake):
    columns = "k DECIMAL(18,2), s VARCHAR, d4 DECIMAL(4,1), d38 DECIMAL(38,5), PRIMARY KEY (k)"
    lake.execute(f"CREATE TABLE lake.t ({columns})")
    lake.execute(f"CREATE TABLE ref ({columns})")
    both(lake, "INSERT INTO {t} SELECT (i - 65000) / 100, 's' || (i % 5), (i % 19 - 9) / 2, i * 1.00001 FROM range(130000) r(i)")
    snapshots = []
    for sql in [
        "UPDATE {t} SET s = s || 'u', d4 = -d4 WHERE k BETWEEN 578.00 AND 579.00",
        "DELETE FROM {t} WHERE k IN (578.79, 578.80, 0) OR k BETWEEN -10.5 AND -10",
        "INSERT OR REPLACE INTO {t} SELECT (57800 + i) / 100, 'r', 99.9, -1 FROM range(300) r(i)",
        "INSERT OR REPLACE INTO {t} VALUES (999999.99, 'new', -99.9, 1), (578.50, 'again', 0.5, 2)",
    ]:
        both(lake, sql)
        snapshots.append((current_snapshot(lake), sorted(lake.execute("SELECT * FROM ref").fetchall())))
    lake.execute("SET threads = 2")
    assert mismatches(lake, "lake.t", "ref") == 0
    for q in ["SELECT s, count(*), sum(d4), sum(d38) FROM {t} GROUP BY s", "SELECT d4, count(*) FROM {t} GROUP BY d4",
              "SELECT * FROM {t} WHERE k BETWEEN 578 AND 580", "SELECT * FROM {t} WHERE k IN (578.5, 578.79, 999999.99, 1)"]:
        assert mismatches(lake, f"({q.format(t='lake.t')})", f"({q.format(t='ref')})") == 0, q
    keys = [578.5, 578.79, 578.8, 0, -10.25, 999999.99, 577.99, 581.0, -650.0, 649.99, 12.34]
    for key in keys:
        found = lake.execute(f"SELECT * FROM skade_lookup('lake.t', {key}::DECIMAL(18,2))").fetchall()
        assert found == lake.execute(f"SELECT * FROM ref WHERE k = {key}").fetchall(), key
    for snapshot, rows in snapshots:
        assert sorted(lake.execute(f"SELECT * FROM lake.t AT (VERSION => {snapshot})").fetchall()) == rows


def test_changelog_and_compaction_after_dml_on_dictionary_and_decimal_columns(lake):
    lake.execute(f"CREATE TABLE ref ({COLUMNS})")
    lake.execute(f"CREATE TABLE lake.t ({COLUMNS})")
    for sql in (INSERTS[0], INSERTS[2], INSERTS[4]):
        both(lake, "INSERT INTO {t} " + sql.replace("130000)", "60000)").replace("range(200000, 330000)", "range(200000, 260000)"))
    start = current_snapshot(lake)
    lake.execute("CREATE TABLE ref0 AS SELECT * FROM ref")
    both(lake, "UPDATE {t} SET s = s || '!', d4 = -d4 WHERE i % 1000 = 3")
    both(lake, "DELETE FROM {t} WHERE s = 'b' OR d18 = 3")
    changes = ("(SELECT * EXCLUDE (_change_type, _commit_snapshot_id) FROM "
               f"skade_changelog('lake.t', {start}, collapse := true) WHERE _change_type = '{{}}')")
    assert mismatches(lake, changes.format("INSERT"), "(SELECT * FROM ref EXCEPT ALL SELECT * FROM ref0)") == 0
    assert mismatches(lake, changes.format("DELETE"), "(SELECT * FROM ref0 EXCEPT ALL SELECT * FROM ref)") == 0
    lake.execute("SELECT * FROM skade_compact('lake.t')").fetchall()
    assert mismatches(lake, "lake.t", "ref") == 0
    assert mismatches(lake, f"(SELECT * FROM lake.t AT (VERSION => {start}))", "ref0") == 0
    assert mismatches(lake, "(SELECT s, d4, count(*) FROM lake.t GROUP BY ALL)", "(SELECT s, d4, count(*) FROM ref GROUP BY ALL)") == 0


def test_explain_analyze_shows_tasks_and_threads(lake):
    lake.execute("SET threads = 1")
    lake.execute("CREATE TABLE lake.t AS SELECT i AS id, md5(i::VARCHAR) AS s FROM range(1500000) r(i)")
    lake.execute("SET threads = 2")
    for q in ["SELECT * FROM lake.t", "SELECT max(s), sum(id) FROM lake.t"]:
        plan = lake.execute("EXPLAIN ANALYZE " + q).fetchall()[0][1]
        assert re.search(r"Scan Tasks: 13\b", plan), plan
        assert re.search(r"Threads: 2\b", plan), plan


def test_concurrent_readers_see_one_snapshot_per_transaction_while_another_commits(lake):
    lake.execute("SET threads = 2")
    lake.execute("CREATE TABLE lake.t (id BIGINT, s VARCHAR, d DECIMAL(9,2))")
    lake.execute("INSERT INTO lake.t SELECT i, 'v' || (i % 5), (i % 100) / 4 FROM range(300000) r(i)")
    done = threading.Event()
    problems = []
    reads = []

    def reader():
        cur = lake.cursor()
        while not done.is_set():
            try:
                cur.execute("BEGIN")
                a = cur.execute("SELECT count(*), sum(id) FROM lake.t").fetchone()
                b = cur.execute("SELECT sum(c), sum(x) FROM (SELECT s, count(*) c, sum(id) x FROM lake.t GROUP BY s)").fetchone()
                cur.execute("COMMIT")
                reads.append(a)
                if a != b:
                    problems.append((a, b))
            except Exception as e:  # noqa: BLE001 - any error is a finding
                problems.append(repr(e))
                done.set()

    def writer():
        cur = lake.cursor()
        try:
            for j in range(12):
                if j % 3 == 0:
                    cur.execute(f"INSERT INTO lake.t SELECT i, 'w' || (i % 3), 1.25 FROM range({300000 + j * 1000}, {301000 + j * 1000}) r(i)")
                elif j % 3 == 1:
                    cur.execute(f"DELETE FROM lake.t WHERE id % 997 = {j}")
                else:
                    cur.execute(f"UPDATE lake.t SET s = s || 'u' WHERE id % 1009 = {j}")
        except Exception as e:  # noqa: BLE001
            problems.append(repr(e))
        finally:
            done.set()

    threads = [threading.Thread(target=reader), threading.Thread(target=reader), threading.Thread(target=writer)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert problems == []
    assert reads


# ---- order and messages ----------------------------------------------------------------------


def test_rows_of_several_inserts_come_back_in_insertion_order(lake):
    """A plain SELECT returns the rows of several INSERTs in the order they were inserted, as a
    DuckDB table does (manifest lists name the newest files first)."""
    lake.execute("SET threads = 1")
    lake.execute("CREATE TABLE lake.t (id INTEGER)")
    lake.execute("INSERT INTO lake.t VALUES (1), (2), (3)")
    lake.execute("INSERT INTO lake.t VALUES (4), (5), (6)")
    assert [r[0] for r in lake.execute("SELECT * FROM lake.t").fetchall()] == [1, 2, 3, 4, 5, 6]


def test_a_corrupt_data_page_is_reported_without_arrow_internals(lake, tmp_path):
    """A damaged data page is an IO Error naming the file, without Arrow's wrapping of the message
    (as a damaged footer is)."""
    lake.execute("CREATE TABLE lake.t AS SELECT i AS id, md5(i::VARCHAR) AS s FROM range(50000) r(i)")
    [path] = data_files(tmp_path, "t")
    offset = lake.execute(
        f"SELECT data_page_offset FROM parquet_metadata('{path}') WHERE path_in_schema = 's' AND row_group_id = 0"
    ).fetchone()[0]
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(b"\xff" * 32)  # the first page header of column s
    reattach(lake, tmp_path)
    with pytest.raises(duckdb.Error) as failure:
        lake.execute("SELECT max(s) FROM lake.t").fetchall()
    message = str(failure.value)
    assert path in message
    assert "get_next failed" not in message and "External error" not in message, message
