"""Review of the shim's port to DuckDB 2.0 (one code base for 1.5.5 and 2.0.1): differential tests
that run the same SQL on a skade table and on a native DuckDB table in the same connection and
compare, plus one test per defect found. Runs under either host (make test runs the Python tests in
each); a test here fails only where the defect is (see each docstring)."""
import time

import pytest

from conftest import connect


@pytest.fixture
def lake(tmp_path):
    con = connect()
    con.execute(f"ATTACH '{tmp_path}/lake.skade' AS lake (TYPE skade)")
    con.execute("ATTACH ':memory:' AS nat")
    yield con
    con.close()


def both(con, sql):
    """Runs `sql` (with {db}) on the skade and the native database: (skade rows, native rows)."""
    out = []
    for db in ("lake", "nat"):
        out.append(sorted(map(repr, con.execute(sql.replace("{db}", db)).fetchall())))
    return out


def run_both(con, sql):
    for db in ("lake", "nat"):
        con.execute(sql.replace("{db}", db))


# ---- defects ---------------------------------------------------------------------------------


def test_at_timestamp_without_time_zone_is_in_the_session_time_zone(lake):
    """AT (TIMESTAMP => <TIMESTAMP>) reads the value as UTC, not in the session's TimeZone as every
    other cast to TIMESTAMPTZ does (skade_changelog's time bounds included), so east of UTC it
    silently reads a later snapshot and west of it fails with "did not exist at that time".
    Both 1.5.5 and 2.0.1: SkadeTableEntry::GetScanFunction (cpp/skade_table_entry.cpp) casts with
    Value::DefaultCastAs(TIMESTAMP_TZ), which has no client context (no ICU time zone)."""
    con = lake
    con.execute("SET TimeZone = 'Asia/Tokyo'")
    con.execute("CREATE TABLE lake.t (id INTEGER)")
    con.execute("INSERT INTO lake.t VALUES (1)")
    time.sleep(0.05)
    # the wall-clock time in the session's time zone, between the two commits
    mid = con.execute("SELECT (now() AT TIME ZONE current_setting('TimeZone'))::VARCHAR").fetchone()[0]
    time.sleep(0.05)
    con.execute("INSERT INTO lake.t VALUES (2)")
    # the same instant, explicitly cast (with the session's time zone): the first snapshot
    assert con.execute(f"SELECT count(*) FROM lake.t AT (TIMESTAMP => TIMESTAMP '{mid}'::TIMESTAMPTZ)").fetchone()[0] == 1
    # skade_changelog reads a TIMESTAMP bound in the session's time zone too
    assert con.execute(f"SELECT id FROM skade_changelog('lake.t', NULL, TIMESTAMP '{mid}')").fetchall() == [(1,)]
    # ... but AT reads it as UTC (9 hours later here: the current snapshot)
    assert con.execute(f"SELECT count(*) FROM lake.t AT (TIMESTAMP => TIMESTAMP '{mid}')").fetchone()[0] == 1


def test_named_parameters_are_case_insensitive(lake):
    """Named parameters match case-insensitively in DuckDB (the binder accepts COLLAPSE := ...),
    but on 1.5.5 the binds compare the name as written (`param.first == "collapse"` in
    cpp/functions/skade_changelog.cpp, skade_lookup.cpp, skade_expire_snapshots.cpp), so
    COLLAPSE := true and AS_OF := n are silently ignored (wrong rows) and RETAIN_LAST := n is an
    error. 2.0.1 (Identifier comparison) is right."""
    con = lake
    con.execute("CREATE TABLE lake.t (id BIGINT PRIMARY KEY, v VARCHAR)")
    con.execute("INSERT INTO lake.t VALUES (1, 'a')")
    first = con.execute("SELECT max(snapshot_id) FROM skade_snapshots('lake.t')").fetchone()[0]
    con.execute("INSERT INTO lake.t VALUES (2, 'b')")
    con.execute("UPDATE lake.t SET v = 'bb' WHERE id = 2")

    def changes(name):
        return con.execute(f"SELECT _change_type FROM skade_changelog('lake.t', {first}, {name} := true)").fetchall()

    assert changes("collapse") == [("INSERT",)]
    assert changes("COLLAPSE") == changes("collapse")
    assert changes("Collapse") == changes("collapse")
    assert con.execute(f"SELECT * FROM skade_lookup('lake.t', 2, as_of := {first})").fetchall() == []
    assert con.execute(f"SELECT * FROM skade_lookup('lake.t', 2, AS_OF := {first})").fetchall() == []
    con.execute("SELECT * FROM skade_expire_snapshots('lake.t', RETAIN_LAST := 1)").fetchall()
    assert con.execute("SELECT count(*) FROM skade_snapshots('lake.t')").fetchone()[0] == 1


# ---- broad differential tests (pass on both hosts) --------------------------------------------

FILTER_TABLE = """CREATE TABLE {db}.t (id INTEGER, b BIGINT, d DOUBLE, s VARCHAR, dt DATE, ts TIMESTAMP,
    tz TIMESTAMPTZ, dec DECIMAL(10,2), bo BOOLEAN, u UUID, bl BLOB, f FLOAT)"""
FILTER_ROWS = """INSERT INTO {db}.t SELECT i, i * 1000000000,
    CASE WHEN i % 97 = 0 THEN NULL WHEN i % 101 = 0 THEN 'NaN'::DOUBLE ELSE i / 7.0 END,
    CASE WHEN i % 50 = 0 THEN NULL WHEN i % 51 = 0 THEN '' WHEN i % 53 = 0 THEN 'héllo✓' || i ELSE 's' || i END,
    DATE '2020-01-01' + i::INTEGER, TIMESTAMP '2020-01-01' + INTERVAL (i) MINUTE,
    TIMESTAMPTZ '2020-03-08 01:00:00-05' + INTERVAL (i) MINUTE, (i / 3.0)::DECIMAL(10,2),
    CASE WHEN i % 3 = 0 THEN NULL ELSE i % 2 = 0 END,
    ('00000000-0000-0000-0000-' || lpad((i + 1000)::VARCHAR, 12, '0'))::UUID,
    ('\\x' || lpad(to_hex((i + 1000) % 256), 2, '0'))::BLOB, i / 4.0
    FROM range({lo}, {hi}) r(i)"""
FILTERS = """id = 5|5 = id|9990 < id|id <= -495|id <> 7|id BETWEEN 999 AND 1001|id IN (1, 1000, 2999, 99999)
id IN (1, NULL, 7)|id NOT IN (1, 2, 3)|id = 1.5|id = 2.0|id > 2.5 AND id < 4.5|b = '12000000000'
b < 9999000000000.5|d > 1428|d IS NULL|d = 'NaN'::DOUBLE|d > 1e300|s = ''|s = 'héllo✓53'|s > 's9'
s IS NULL|s LIKE 's10%'|prefix(s, 's99')|s IN ('s1', '', 'zz')|dt = '2020-01-06'
dt BETWEEN '2020-02-01' AND '2020-02-03'|ts = DATE '2020-01-02'|ts > '2020-01-07 22:00:00'
tz = TIMESTAMPTZ '2020-03-08 01:30:00-05'|tz = '2020-03-08 03:30:00'|tz < '2020-03-08 02:00:00'
dec = 3.33|dec = 3.333|dec IN (1, 2, 3.33)|bo|NOT bo|bo IS NULL|u = '00000000-0000-0000-0000-000000001005'
u > '00000000-0000-0000-0000-000000010990'|bl = '\\x05'::BLOB|bl > '\\xfe'::BLOB|f = 1.25|f > 2499.5
id = 5 OR id = 9000|(id < 10 OR id > 9995) AND s IS NOT NULL|NOT (id = 5 OR id = 6)|id + 1 = 11
CAST(id AS DOUBLE) = 10.0|coalesce(s, 'x') = 'x'|id = (SELECT 5)|id IN (SELECT 5 UNION SELECT 9000)"""


def test_filters_match_a_native_table(lake):
    con = lake
    con.execute("SET TimeZone = 'America/New_York'")
    run_both(con, FILTER_TABLE)
    for lo, hi in [(0, 1000), (1000, 3000), (5000, 10000), (-500, 0)]:
        run_both(con, FILTER_ROWS.format(db="{db}", lo=lo, hi=hi))
    big = ",".join(str(i * 7) for i in range(1500))
    conds = [c for line in FILTERS.split("\n") for c in line.split("|")]
    conds += [f"id IN ({big})", f"id NOT IN ({big})", f"id IN (1, {big}) AND s IS NOT NULL"]
    for cond in conds:
        skade, native = both(con, f"SELECT id, s FROM {{db}}.t WHERE {cond}")
        assert skade == native, cond


def test_dml_matches_a_native_table(lake):
    con = lake
    run_both(con, "CREATE TABLE {db}.p (id INTEGER PRIMARY KEY, v VARCHAR, n INTEGER)")
    run_both(con, "CREATE TABLE {db}.l (k INTEGER, v VARCHAR)")
    run_both(con, "INSERT INTO {db}.p SELECT i, 'v' || i, i % 10 FROM range(0, 5000) r(i)")
    run_both(con, "INSERT INTO {db}.p SELECT i, 'w' || i, i % 10 FROM range(5000, 8000) r(i)")
    run_both(con, "INSERT INTO {db}.l SELECT i % 100, 'l' || i FROM range(0, 3000) r(i)")
    statements = """UPDATE {db}.p SET n = n * 2 WHERE id IN (SELECT k FROM {db}.l WHERE v LIKE 'l1%') AND n > 3
DELETE FROM {db}.p WHERE id > 7990 OR (n = 0 AND id < 50)
UPDATE {db}.p SET id = id + 100000 WHERE id BETWEEN 10 AND 11
INSERT OR REPLACE INTO {db}.p VALUES (2, 'rep2', 99), (9000, 'new', 1), (5001, 'rep5001', 98)
INSERT INTO {db}.p VALUES (3, 'x', 0), (9001, 'n9001', 0) ON CONFLICT DO NOTHING
INSERT INTO {db}.p VALUES (4, 'x', 0), (9002, 'n', 0) ON CONFLICT (id) DO UPDATE SET v = excluded.v || '_c', n = {db}.p.n + 1000
INSERT OR REPLACE INTO {db}.p SELECT id, 'bulk' || id, -1 FROM range(7000, 9500) r(id)
MERGE INTO {db}.p t USING (SELECT i AS id, 'm' || i AS v FROM range(0, 60) r(i)) s ON t.id = s.id WHEN MATCHED AND t.n = 3 THEN DELETE WHEN MATCHED AND t.n > 5 THEN UPDATE SET v = s.v, n = 42 WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.v, 77)
MERGE INTO {db}.p t USING (SELECT i AS id FROM range(9995, 10020) r(i)) s ON t.id = s.id WHEN MATCHED THEN UPDATE SET n = 5 WHEN NOT MATCHED BY SOURCE AND t.id > 9000 AND t.id < 9200 THEN DELETE WHEN NOT MATCHED THEN INSERT VALUES (s.id, 'x2', 2)
DELETE FROM {db}.l USING {db}.p WHERE {db}.l.k = {db}.p.id AND {db}.p.n = 4
UPDATE {db}.l SET v = {db}.p.v FROM {db}.p WHERE {db}.l.k = {db}.p.id AND {db}.p.n = 6
MERGE INTO {db}.l t USING (SELECT 7 AS k) s ON t.k = s.k WHEN MATCHED THEN UPDATE SET v = 'merged' WHEN NOT MATCHED THEN INSERT VALUES (s.k, 'mi')"""
    checks = ["SELECT count(*), sum(id), sum(n), min(v), max(v), count(DISTINCT v) FROM {db}.p",
              "SELECT count(*), sum(k), min(v), max(v) FROM {db}.l",
              "SELECT * FROM {db}.p WHERE id < 12 OR id > 7995 OR id BETWEEN 4998 AND 5002"]
    for statement in statements.split("\n"):
        run_both(con, statement)
        for check in checks:
            skade, native = both(con, check)
            assert skade == native, (statement, check)


def test_large_scans_projections_and_time_travel(lake):
    con = lake
    run_both(con, "CREATE TABLE {db}.p (id BIGINT PRIMARY KEY, v VARCHAR, n INTEGER)")
    run_both(con, "INSERT INTO {db}.p SELECT i, 'v' || i, i % 13 FROM range(0, 130000) r(i)")
    run_both(con, "INSERT INTO {db}.p SELECT i, 'v' || i, i % 13 FROM range(130000, 133000) r(i)")
    first = con.execute("SELECT max(snapshot_id) FROM skade_snapshots('lake.p')").fetchone()[0]
    before = con.execute("SELECT count(*), sum(id), sum(n) FROM lake.p").fetchall()
    run_both(con, "DELETE FROM {db}.p WHERE id BETWEEN 500 AND 129500 AND n <> 3")
    run_both(con, "UPDATE {db}.p SET v = 'u' WHERE id % 1000 = 7")
    for sql in ["SELECT count(*), sum(id), count(v), min(v), max(v) FROM {db}.p",
                "SELECT count(*) FROM (SELECT v FROM {db}.p LIMIT 10 OFFSET 12000)",
                "SELECT id FROM (SELECT id FROM {db}.p ORDER BY id DESC LIMIT 3)",
                "SELECT * FROM {db}.p WHERE id IN (7, 1007, 129999, 130001, -1)",
                "SELECT n, count(*) FROM {db}.p WHERE v LIKE 'v13%' GROUP BY n"]:
        skade, native = both(con, sql)
        assert skade == native, sql
    assert con.execute(f"SELECT count(*), sum(id), sum(n) FROM lake.p AT (VERSION => {first})").fetchall() == before
    run_both(con, "DELETE FROM {db}.p")
    for sql in ["SELECT count(*) FROM {db}.p", "SELECT * FROM {db}.p WHERE id = 5", "SELECT * FROM {db}.p LIMIT 3"]:
        skade, native = both(con, sql)
        assert skade == native, sql


def test_names_match_a_native_catalog(lake):
    con = lake
    for sql in ['CREATE SCHEMA {db}."My Schema"', "CREATE SCHEMA {db}.ünï", 'CREATE SCHEMA {db}."a.b"',
                'CREATE TABLE {db}."My Schema"."My Table" (id INTEGER, "Col A" VARCHAR)',
                "INSERT INTO {db}.\"My Schema\".\"My Table\" VALUES (1, 'x')",
                "CREATE TABLE {db}.ünï.täble (ñ INTEGER)", "INSERT INTO {db}.ünï.täble VALUES (7)",
                'CREATE TABLE {db}."a.b"."c.d" (x INTEGER)', 'INSERT INTO {db}."a.b"."c.d" VALUES (3)',
                'CREATE TABLE {db}."with ""quote""" (a INTEGER)',
                'CREATE TABLE {db}.ünï."CTAS Tbl" AS SELECT * FROM {db}."My Schema"."My Table"',
                "DROP TABLE IF EXISTS {db}.ünï.nope", 'DROP SCHEMA {db}."a.b" CASCADE']:
        run_both(con, sql)
    for sql in ['SELECT "Col A" FROM {db}."my schema"."my table"', "SELECT * FROM {db}.ünï.täble",
                'SELECT * FROM {db}.ünï."CTAS Tbl"',
                "SELECT schema_name FROM duckdb_schemas() WHERE database_name = '{db}'",
                "SELECT schema_name, table_name, column_count FROM duckdb_tables() WHERE database_name = '{db}'",
                "SELECT table_schema, table_name, column_name, data_type FROM information_schema.columns "
                "WHERE table_catalog = '{db}'",
                'DESCRIBE {db}."My Schema"."My Table"', "SHOW TABLES FROM {db}.ünï"]:
        skade, native = both(con, sql)
        assert skade == native, sql
    con.execute('USE lake."My Schema"')
    assert con.execute('SELECT * FROM "My Table"').fetchall() == [(1, "x")]
    con.execute("USE memory")
    assert con.execute("SELECT count(*) FROM skade_snapshots('lake.\"My Schema\".\"My Table\"')").fetchone()[0] == 1


def test_named_parameters_null_wrong_type_and_misspelled(lake):
    con = lake
    con.execute("CREATE TABLE lake.t (id BIGINT PRIMARY KEY, v VARCHAR)")
    con.execute("INSERT INTO lake.t VALUES (1, 'a')")
    first = con.execute("SELECT max(snapshot_id) FROM skade_snapshots('lake.t')").fetchone()[0]
    con.execute("UPDATE lake.t SET v = 'b' WHERE id = 1")
    # an explicit NULL is the argument left out
    assert con.execute(f"SELECT count(*) FROM skade_changelog('lake.t', {first}, collapse := NULL)").fetchone()[0] == 2
    assert con.execute("SELECT * FROM skade_lookup('lake.t', 1, as_of := NULL)").fetchall() == [(1, "b")]
    assert con.execute(f"SELECT * FROM skade_lookup('lake.t', 1, as_of := {first})").fetchall() == [(1, "a")]
    with pytest.raises(Exception, match="older_than|retain_last"):
        con.execute("SELECT * FROM skade_expire_snapshots('lake.t', retain_last := NULL, older_than := NULL)")
    with pytest.raises(Exception, match="retain_last must be at least 1"):
        con.execute("SELECT * FROM skade_expire_snapshots('lake.t', retain_last := 0)")
    for sql, message in [(f"SELECT * FROM skade_changelog('lake.t', {first}, colapse := true)", "colapse"),
                         ("SELECT * FROM skade_lookup('lake.t', 1, asof := 1)", "asof"),
                         ("SELECT * FROM skade_expire_snapshots('lake.t', retain_lst := 1)", "retain_lst"),
                         ("SELECT * FROM skade_lookup('lake.t', 1, as_of := 'abc')", "abc"),
                         ("SELECT * FROM skade_lookup('lake.t', 1, 1)", "skade_lookup"),
                         ("SELECT * FROM skade_lookup('lake.t', 1, as_of := 999999)", "no snapshot 999999")]:
        with pytest.raises(Exception, match=message):
            con.execute(sql)
    assert con.execute("SELECT count(*) FROM skade_snapshots('lake.t')").fetchone()[0] == 2
