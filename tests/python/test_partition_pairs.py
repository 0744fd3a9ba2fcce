"""Every (partition transform, column type) pair: accepted means writable (issue 42 item 3).

`truncate(3, bl)` on a BLOB column was accepted as a partition spec, then every INSERT failed
(the iceberg crate's truncate had no case for the Arrow type of skade's binary columns). For each
column type skade stores and each transform DuckDB's syntax can name, the spec is either refused up
front with a message naming the transform and the column, or the table takes rows (NULL
included), reads them back as written, answers an equality filter on the column (partition
pruning must keep the row), and DuckDB's iceberg_scan reads the same rows from the metadata."""
import duckdb
import pytest

from conftest import PEERS_ON_PYPI, connect, site_extension

# type -> two distinct values (SQL literals), of which the transforms put some in one partition
VALUES = {
    "BOOLEAN": ["true", "false"],
    "TINYINT": ["-7", "100"],
    "SMALLINT": ["-300", "12345"],
    "INTEGER": ["-2147483000", "17"],
    "BIGINT": ["-9000000000", "42"],
    "UTINYINT": ["0", "255"],
    "USMALLINT": ["1", "65535"],
    "UINTEGER": ["3", "4294967295"],
    "UBIGINT": ["5", "18446744073709551615"],
    "HUGEINT": ["-170141183460469231731687303715884105", "99"],
    "FLOAT": ["1.5", "-2.25"],
    "DOUBLE": ["3.125", "-1e300"],
    "DECIMAL(4,1)": ["-123.4", "5.0"],
    "DECIMAL(18,3)": ["123456789012345.678", "-0.001"],
    "DECIMAL(38,6)": ["12345678901234567890123456789012.123456", "-7.000001"],
    "DATE": ["DATE '2026-12-06'", "DATE '1969-07-20'"],
    "TIME": ["TIME '23:59:59.999999'", "TIME '00:00:01'"],
    "TIMESTAMP": ["TIMESTAMP '2026-12-06 01:02:03.456789'", "TIMESTAMP '1900-01-01 00:00:00'"],
    "TIMESTAMPTZ": ["TIMESTAMPTZ '2026-12-06 01:02:03.456789+00'", "TIMESTAMPTZ '1950-05-05 05:05:05.5+00'"],
    "TIMESTAMP_S": ["TIMESTAMP_S '2026-12-06 01:02:03'", "TIMESTAMP_S '1900-01-01 00:00:00'"],
    "TIMESTAMP_MS": ["TIMESTAMP_MS '2026-12-06 01:02:03.456'", "TIMESTAMP_MS '1960-01-01 00:00:00.001'"],
    "VARCHAR": ["'héllo wörld'", "''"],
    "BLOB": ["'\\x00\\x01\\x02\\xFF'::BLOB", "'ab'::BLOB"],
    "UUID": ["UUID '01234567-89ab-cdef-0123-456789abcdef'", "UUID 'ffffffff-ffff-ffff-ffff-ffffffffffff'"],
}
# values some transforms cannot place: refused naming the range, or written and read back
SPECIALS = {t: [f"'infinity'::{t}", f"'-infinity'::{t}"]
            for t in ["DATE", "TIMESTAMP", "TIMESTAMPTZ", "TIMESTAMP_S", "TIMESTAMP_MS"]}
SPECIALS["DATE"].append("DATE '270000-01-01'")
SPECIALS["TIMESTAMP"].append("TIMESTAMP '270000-01-01'")
TRANSFORMS = ["{c}", "bucket(4, {c})", "truncate(3, {c})", "year({c})", "month({c})", "day({c})", "hour({c})"]


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    con = connect()
    con.execute("SET TimeZone = 'UTC'")
    con.execute(f"ATTACH '{tmp_path_factory.mktemp('pairs') / 'lake.skade'}' AS lake (TYPE skade)")
    if PEERS_ON_PYPI:
        con.execute(f"LOAD '{site_extension('duckdb_extension_avro', 'avro')}'")
        con.execute(f"LOAD '{site_extension('duckdb_extension_iceberg', 'iceberg')}'")
    yield con
    con.close()


@pytest.mark.parametrize("type_name", list(VALUES))
def test_every_transform_is_refused_up_front_or_writable(lake, type_name):
    accepted = []
    kind = list(VALUES).index(type_name)
    for n, transform in enumerate(TRANSFORMS):
        table = f"t_{kind}_{n}"
        key = transform.format(c="c")
        try:
            lake.execute(f"CREATE TABLE lake.{table} (id INTEGER, c {type_name}) PARTITIONED BY ({key})")
        except duckdb.Error as e:
            assert "cannot partition" in str(e) and ("\"c\"" in str(e) or " c" in str(e)), (type_name, key, str(e))
            continue
        accepted.append(key)
        a, b = VALUES[type_name]
        try:  # (two files: a scan of one file is not pruned by partition)
            lake.execute(f"INSERT INTO lake.{table} VALUES (1, {a}), (2, {b})")
            lake.execute(f"INSERT INTO lake.{table} VALUES (3, NULL), (4, {a})")
        except duckdb.Error as e:
            pytest.fail(f"{type_name} PARTITIONED BY ({key}) was accepted, but an INSERT fails: {e}")
        expected = lake.execute(f"SELECT * FROM (VALUES (1, {a}::{type_name}), (2, {b}::{type_name}), "
                                f"(3, NULL), (4, {a}::{type_name})) v(id, c) ORDER BY id").fetchall()
        assert lake.execute(f"SELECT * FROM lake.{table} ORDER BY id").fetchall() == expected, key
        found = lake.execute(f"SELECT id FROM lake.{table} WHERE c = {b} ORDER BY id").fetchall()
        assert found == [(2,)], (key, found)
        found = lake.execute(f"SELECT id FROM lake.{table} WHERE c = {a} ORDER BY id").fetchall()
        assert found == [(1,), (4,)], (key, found)
        rows = f"(VALUES (1, {a}::{type_name}), (2, {b}::{type_name}), (3, NULL), (4, {a}::{type_name})) v(id, c)"
        for value in SPECIALS.get(type_name, []):
            for op in ("<", ">=", "="):  # (the filter's value projected by the transform)
                got = lake.execute(f"SELECT count(*) FROM lake.{table} WHERE c {op} {value}").fetchall()
                assert got == lake.execute(f"SELECT count(*) FROM {rows} WHERE c {op} {value}").fetchall(), (key, op)
        for value in SPECIALS.get(type_name, []):
            try:
                lake.execute(f"INSERT INTO lake.{table} VALUES (5, {value})")
            except duckdb.Error as e:
                assert "outside the range that transform takes" in str(e), (key, value, str(e))
                continue
            got = lake.execute(f"SELECT c = {value} FROM lake.{table} WHERE id = 5").fetchall()
            assert got == [(True,)], (key, value, got)
            # and a filter on it (partition pruning projects the value) finds the row
            assert lake.execute(f"SELECT id FROM lake.{table} WHERE c >= {value} AND id = 5").fetchall() == [(5,)]
            lake.execute(f"DELETE FROM lake.{table} WHERE id = 5")
        if PEERS_ON_PYPI:
            meta = lake.execute("SELECT metadata_location FROM skade_tables('lake') WHERE table_name = ?",
                                [table]).fetchone()[0]
            theirs = lake.execute(f"SELECT id, c::{type_name} FROM iceberg_scan('{meta}') ORDER BY id").fetchall()
            assert theirs == expected, key
    # every type takes at least identity or bucket: a blanket refusal would pass the loop above
    assert accepted, type_name
