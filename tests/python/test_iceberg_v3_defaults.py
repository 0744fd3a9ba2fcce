"""Iceberg v3 column defaults (issue 46 item 5, docs/design/iceberg-v3.md increment 4): ADD COLUMN
... DEFAULT gives the rows a table holds the value (initial-default) and writes that leave the
column out store it (write-default); SET/DROP DEFAULT change the write default only; CREATE TABLE's
defaults are write defaults. Every statement is run beside a native DuckDB table and the rows
compared; other Iceberg readers read the defaults too."""
import json

import duckdb
import pytest
from pyiceberg.table import StaticTable

from conftest import connect, needs_iceberg
from test_iceberg_v3 import iceberg_reader, metadata_of, v3  # noqa: F401 (the fixture)


def both(con, sql):
    """Runs `sql` on the lake's table t and on the native table memory.t."""
    con.execute(sql.replace("TABLE_T", "lake.t"))
    con.execute(sql.replace("TABLE_T", "memory.t"))


def same_rows(con, columns="*", order="id"):
    lake = con.execute(f"SELECT {columns} FROM lake.t ORDER BY {order}").fetchall()
    native = con.execute(f"SELECT {columns} FROM memory.t ORDER BY {order}").fetchall()
    assert lake == native
    return lake


def field_of(con, table, name):
    _, md = metadata_of(con, table)
    schema = next(s for s in md["schemas"] if s["schema-id"] == md["current-schema-id"])
    return next(f for f in schema["fields"] if f["name"] == name)


def test_added_column_default_reads_for_old_rows_and_writes_for_new(v3):
    both(v3, "CREATE TABLE TABLE_T (id INTEGER, s VARCHAR)")
    both(v3, "INSERT INTO TABLE_T SELECT i, 's' || i FROM range(5) r(i)")
    both(v3, "ALTER TABLE TABLE_T ADD COLUMN c INTEGER DEFAULT 7")
    assert same_rows(v3)[0] == (0, "s0", 7)
    both(v3, "INSERT INTO TABLE_T (id, s) VALUES (10, 'new')")
    both(v3, "INSERT INTO TABLE_T VALUES (11, 'explicit', NULL), (12, 'other', 3)")
    both(v3, "INSERT INTO TABLE_T VALUES (13, 'default', DEFAULT)")
    rows = same_rows(v3)
    assert [r[2] for r in rows] == [7] * 5 + [7, None, 3, 7]
    # filters and aggregates see the default of rows in files without the column
    assert v3.execute("SELECT count(*) FROM lake.t WHERE c = 7").fetchone()[0] == 7
    assert v3.execute("SELECT sum(c) FROM lake.t").fetchone() == v3.execute("SELECT sum(c) FROM memory.t").fetchone()
    field = field_of(v3, "t", "c")
    assert field["initial-default"] == 7 and field["write-default"] == 7
    assert v3.execute("SELECT column_default FROM duckdb_columns() WHERE database_name = 'lake' "
                      "AND table_name = 't' AND column_name = 'c'").fetchone()[0] == "7"


@pytest.mark.parametrize("ddl_type, default, shown", [
    ("VARCHAR", "'it''s'", "it's"),
    ("BIGINT", "-9000000000", -9000000000),
    ("DOUBLE", "2.5", 2.5),
    ("BOOLEAN", "true", True),
    ("DECIMAL(9,2)", "14.2", None),
    ("DATE", "DATE '2017-11-16'", None),
    ("TIMESTAMP", "TIMESTAMP '2017-11-16 22:31:08.123456'", None),
    ("TIMESTAMPTZ", "TIMESTAMPTZ '2017-11-16 22:31:08+00'", None),
    ("TIME", "TIME '22:31:08'", None),
    ("BLOB", "'\\x01\\xAB'::BLOB", None),
    ("UUID", "'f79c3e09-677c-4d5e-a5ba-5a6d1a1e3a4f'", None),
    ("SMALLINT", "-3", -3),
    ("FLOAT", "1.5", 1.5),
])
def test_defaults_of_every_type_read_as_duckdb_reads_them(v3, ddl_type, default, shown):
    v3.execute("SET TimeZone = 'UTC'")
    both(v3, "CREATE TABLE TABLE_T (id INTEGER)")
    both(v3, "INSERT INTO TABLE_T VALUES (1), (2)")
    both(v3, f"ALTER TABLE TABLE_T ADD COLUMN c {ddl_type} DEFAULT {default}")
    both(v3, "INSERT INTO TABLE_T (id) VALUES (3)")
    rows = same_rows(v3)
    assert rows[0][1] is not None and rows[0][1] == rows[2][1]
    if shown is not None:
        assert rows[0][1] == shown
    # the default survives a reattach (read back from the metadata)
    path = v3.execute("SELECT path FROM duckdb_databases() WHERE database_name = 'lake'").fetchone()[0]
    v3.execute("DETACH lake")
    v3.execute(f"ATTACH '{path}' AS lake (TYPE skade)")
    both(v3, "INSERT INTO TABLE_T (id) VALUES (4)")
    assert same_rows(v3)[3][1] == rows[0][1]


def test_set_and_drop_default_change_only_the_write_default(v3):
    both(v3, "CREATE TABLE TABLE_T (id INTEGER)")
    both(v3, "INSERT INTO TABLE_T VALUES (1)")
    both(v3, "ALTER TABLE TABLE_T ADD COLUMN c VARCHAR DEFAULT 'first'")
    both(v3, "ALTER TABLE TABLE_T ALTER COLUMN c SET DEFAULT 'second'")
    both(v3, "INSERT INTO TABLE_T (id) VALUES (2)")
    both(v3, "ALTER TABLE TABLE_T ALTER COLUMN c DROP DEFAULT")
    both(v3, "INSERT INTO TABLE_T (id) VALUES (3)")
    assert same_rows(v3) == [(1, "first"), (2, "second"), (3, None)]
    field = field_of(v3, "t", "c")
    assert field["initial-default"] == "first" and "write-default" not in field


def test_create_table_defaults_are_write_defaults(v3):
    both(v3, "CREATE TABLE TABLE_T (id INTEGER, c INTEGER DEFAULT 42, s VARCHAR DEFAULT 'x', d DATE)")
    both(v3, "INSERT INTO TABLE_T (id) VALUES (1)")
    both(v3, "INSERT INTO TABLE_T (id, c) VALUES (2, 5)")
    assert same_rows(v3) == [(1, 42, "x", None), (2, 5, "x", None)]
    field = field_of(v3, "t", "c")
    assert field["write-default"] == 42 and "initial-default" not in field
    # a failed CREATE leaves nothing behind
    with pytest.raises(duckdb.Error, match="one value, a literal"):
        v3.execute("CREATE TABLE lake.bad (id INTEGER, t TIMESTAMP DEFAULT now())")
    assert v3.execute("SELECT count(*) FROM duckdb_tables() WHERE database_name = 'lake' "
                      "AND table_name = 'bad'").fetchone()[0] == 0


def test_a_v2_table_refuses_defaults_naming_the_upgrade(tmp_path):
    con = connect()
    con.execute(f"ATTACH '{tmp_path / 'lake.skade'}' AS lake (TYPE skade)")
    con.execute("CREATE TABLE lake.t (id INTEGER)")
    con.execute("INSERT INTO lake.t VALUES (1)")
    for sql in ("ALTER TABLE lake.t ADD COLUMN c INTEGER DEFAULT 7",
                "ALTER TABLE lake.t ALTER COLUMN id SET DEFAULT 3",
                "CREATE TABLE lake.u (id INTEGER DEFAULT 3)"):
        with pytest.raises(duckdb.NotImplementedException, match=r"skade_upgrade_table\('lake.t', 3\)|"
                           r"skade_upgrade_table\('lake.u', 3\)"):
            con.execute(sql)
    # nothing changed; DEFAULT NULL is no default, DROP DEFAULT of none no change
    con.execute("ALTER TABLE lake.t ADD COLUMN n INTEGER DEFAULT NULL")
    con.execute("ALTER TABLE lake.t ALTER COLUMN n DROP DEFAULT")
    assert con.execute("FROM lake.t").fetchall() == [(1, None)]
    con.execute("CALL skade_upgrade_table('lake.t', 3)")
    con.execute("ALTER TABLE lake.t ADD COLUMN c INTEGER DEFAULT 7")
    assert con.execute("FROM lake.t").fetchall() == [(1, None, 7)]


def test_defaults_that_are_not_one_value_are_refused(v3):
    v3.execute("CREATE TABLE lake.t (id INTEGER, s STRUCT(a INTEGER))")
    v3.execute("INSERT INTO lake.t VALUES (1, {'a': 1})")
    cases = [
        ("ALTER TABLE lake.t ADD COLUMN c TIMESTAMP DEFAULT now()", "one value, a literal"),
        ("ALTER TABLE lake.t ALTER COLUMN id SET DEFAULT random()", "one value, a literal"),
        ("ALTER TABLE lake.t ADD COLUMN c DOUBLE DEFAULT 'nan'::DOUBLE", "NaN"),
        ("ALTER TABLE lake.t ADD COLUMN c INTEGER DEFAULT 'abc'", "not a INTEGER"),
        ("ALTER TABLE lake.t ADD COLUMN s.b INTEGER DEFAULT 1", "top-level columns only"),
        ("ALTER TABLE lake.t ADD COLUMN l INTEGER[] DEFAULT CAST('[1]' AS INTEGER[])", "STRUCT, LIST or MAP"),
    ]
    for sql, message in cases:
        with pytest.raises(duckdb.Error, match=message):
            v3.execute(sql)
        # (DuckDB 1.5 runs ADD COLUMN with a DEFAULT that is no literal as ADD COLUMN, UPDATE and
        # SET DEFAULT in one transaction, which a refusal leaves to roll back, as for its own tables)
        try:
            v3.execute("ROLLBACK")
        except duckdb.Error:
            pass
    assert v3.execute("FROM lake.t").fetchall() == [(1, {"a": 1})]
    assert v3.execute("SELECT column_default FROM duckdb_columns() WHERE database_name = 'lake' "
                      "AND column_name = 'id'").fetchall() == [(None,)]


def test_arithmetic_on_literals_is_a_default(v3):
    both(v3, "CREATE TABLE TABLE_T (id INTEGER)")
    both(v3, "INSERT INTO TABLE_T VALUES (1)")
    both(v3, "ALTER TABLE TABLE_T ADD COLUMN c INTEGER DEFAULT 1 + 1")
    both(v3, "ALTER TABLE TABLE_T ADD COLUMN s VARCHAR DEFAULT 'a' || 'b'")
    both(v3, "INSERT INTO TABLE_T (id) VALUES (2)")
    assert same_rows(v3) == [(1, 2, "ab"), (2, 2, "ab")]


def test_a_widened_column_keeps_its_default(v3):
    both(v3, "CREATE TABLE TABLE_T (id INTEGER)")
    both(v3, "INSERT INTO TABLE_T VALUES (1)")
    both(v3, "ALTER TABLE TABLE_T ADD COLUMN c INTEGER DEFAULT 7")
    both(v3, "ALTER TABLE TABLE_T ALTER COLUMN c TYPE BIGINT")
    both(v3, "INSERT INTO TABLE_T (id) VALUES (2)")
    assert same_rows(v3) == [(1, 7), (2, 7)]
    assert field_of(v3, "t", "c")["type"] == "long"


def test_lookups_changelog_and_consumers_read_the_default(v3):
    v3.execute("CREATE TABLE lake.t (id BIGINT PRIMARY KEY, s VARCHAR)")
    v3.execute("INSERT INTO lake.t VALUES (1, 'a'), (2, 'b')")
    v3.execute("CALL skade_create_consumer('lake', 'c1', 't', start := 'beginning')")
    v3.execute("ALTER TABLE lake.t ADD COLUMN c INTEGER DEFAULT 7")
    # a consumer created before the column reads the rows written before it with the default
    assert sorted(v3.execute("SELECT _change_type, id, c FROM skade_consume('lake', 'c1')").fetchall()) == \
        [("INSERT", 1, 7), ("INSERT", 2, 7)]
    assert v3.execute("SELECT id, s, c FROM skade_lookup('lake.t', 2)").fetchall() == [(2, "b", 7)]
    assert v3.execute("SELECT c FROM lake.t WHERE id = 1").fetchall() == [(7,)]
    changes = v3.execute("SELECT _change_type, id, c FROM skade_changelog('lake.t', NULL) ORDER BY id").fetchall()
    assert changes == [("INSERT", 1, 7), ("INSERT", 2, 7)]
    v3.execute("UPDATE lake.t SET s = 'z' WHERE id = 1")
    changes = v3.execute("SELECT _change_type, id, s, c FROM skade_changelog('lake.t', NULL) "
                         "WHERE id = 1 ORDER BY _change_type").fetchall()
    assert sorted(changes) == [("INSERT", 1, "a", 7), ("UPDATE_AFTER", 1, "z", 7), ("UPDATE_BEFORE", 1, "a", 7)]


@needs_iceberg
def test_duckdb_iceberg_extension_reads_the_defaults(v3):
    v3.execute("CREATE TABLE lake.t (id INTEGER)")
    v3.execute("INSERT INTO lake.t VALUES (1), (2)")
    v3.execute("ALTER TABLE lake.t ADD COLUMN c INTEGER DEFAULT 7")
    v3.execute("ALTER TABLE lake.t ADD COLUMN s VARCHAR DEFAULT 'x'")
    v3.execute("INSERT INTO lake.t (id) VALUES (3)")
    location, _ = metadata_of(v3, "t")
    peer = iceberg_reader()
    try:
        got = peer.execute(f"SELECT id, c, s FROM iceberg_scan('{location}') ORDER BY id").fetchall()
    finally:
        peer.close()
    assert got == v3.execute("SELECT id, c, s FROM lake.t ORDER BY id").fetchall() == \
        [(1, 7, "x"), (2, 7, "x"), (3, 7, "x")]


def test_pyiceberg_reads_the_defaults(v3):
    v3.execute("CREATE TABLE lake.t (id INTEGER)")
    v3.execute("INSERT INTO lake.t VALUES (1), (2)")
    v3.execute("ALTER TABLE lake.t ADD COLUMN c BIGINT DEFAULT 7")
    location, _ = metadata_of(v3, "t")
    table = StaticTable.from_metadata(location)
    field = table.schema().find_field("c")
    assert field.initial_default == 7 and field.write_default == 7
    rows = table.scan().to_arrow().sort_by("id")
    assert rows.column("c").to_pylist() == [7, 7]


def test_values_the_iceberg_crate_cannot_write_are_refused_clearly(v3):
    v3.execute("SET TimeZone = 'UTC'")
    v3.execute("CREATE TABLE lake.odd (id INTEGER, ts TIMESTAMPTZ, tm TIME)")
    v3.execute("INSERT INTO lake.odd VALUES (1, NULL, NULL)")
    for sql in ("ALTER TABLE lake.odd ALTER COLUMN ts SET DEFAULT '1969-12-31 23:59:59.5+00'",
                "ALTER TABLE lake.odd ALTER COLUMN tm SET DEFAULT '24:00:00'"):
        with pytest.raises(duckdb.InvalidInputException, match="has no Iceberg form skade can write"):
            v3.execute(sql)
    # whole seconds before 1970, and years past 9999, are kept (and DuckDB gets the DEFAULT back)
    both(v3, "CREATE TABLE TABLE_T (id INTEGER)")
    both(v3, "INSERT INTO TABLE_T VALUES (1)")
    both(v3, "ALTER TABLE TABLE_T ADD COLUMN ts TIMESTAMPTZ DEFAULT '1969-12-31 23:59:59+00'")
    both(v3, "ALTER TABLE TABLE_T ADD COLUMN d DATE DEFAULT '12000-01-01'")
    both(v3, "INSERT INTO TABLE_T (id) VALUES (2)")
    rows = same_rows(v3)
    assert rows[0][1:] == rows[1][1:] and rows[1][2] is not None


def rest_schema_change(address, fields):
    from test_rest_catalog import http
    body = {"requirements": [], "updates": [
        {"action": "add-schema", "schema": {"type": "struct", "schema-id": 99, "fields": fields}},
        {"action": "set-current-schema", "schema-id": -1}]}
    return http("POST", address + "/v1/namespaces/main/tables/t", json.dumps(body).encode(),
                {"Content-Type": "application/json"})


@pytest.mark.parametrize("version", [2, 3])
def test_rest_schema_changes_keep_the_default_rules(tmp_path, version):
    from test_rest_catalog import http
    con = connect()
    con.execute(f"ATTACH '{tmp_path / 'lake.skade'}' AS lake (TYPE skade, FORMAT_VERSION {version})")
    con.execute("CREATE TABLE lake.t (id BIGINT, c INTEGER)")
    con.execute("INSERT INTO lake.t VALUES (1, NULL)")
    if version == 3:
        con.execute("ALTER TABLE lake.t ADD COLUMN e INTEGER DEFAULT 7")
    address = con.execute("CALL skade_serve('lake', port := 0)").fetchone()[0]
    _, loaded = http("GET", address + "/v1/namespaces/main/tables/t")
    md = loaded["metadata"]
    fields = next(s for s in md["schemas"] if s["schema-id"] == md["current-schema-id"])["fields"]
    new_id = md["last-column-id"] + 1
    before = con.execute("FROM lake.t").fetchall()
    refused = [
        # a default on a field inside a STRUCT (skade fills top-level columns' only)
        fields + [{"id": new_id, "name": "s", "required": False, "type": {"type": "struct", "fields": [
            {"id": new_id + 1, "name": "a", "required": False, "type": "int", "initial-default": 4}]}}],
        # the initial default of a column that exists (Iceberg sets it once)
        [dict(f, **{"initial-default": 5}) if f["name"] == "c" else f for f in fields],
        # a time of day the iceberg crate cannot write
        fields + [{"id": new_id, "name": "x", "required": False, "type": "timestamptz",
                   "initial-default": "1969-12-31T23:59:59.5+00:00"}],
    ]
    if version == 3:
        refused.append([dict(f, **{"initial-default": 8}) if f["name"] == "e" else f for f in fields])
        refused.append([{k: v for k, v in f.items() if k != "initial-default"} for f in fields])
    for change in refused:
        status, answer = rest_schema_change(address, change)
        assert status in (400, 406), answer
    assert con.execute("FROM lake.t").fetchall() == before
    added = fields + [{"id": new_id, "name": "x", "required": False, "type": "int", "initial-default": 3,
                       "write-default": 3}]
    status, answer = rest_schema_change(address, added)
    if version == 2:
        assert status == 406 and "keeps none" in answer["error"]["message"]
        assert con.execute("FROM lake.t").fetchall() == before
    else:
        assert status == 200, answer
        assert con.execute("SELECT x FROM lake.t").fetchall() == [(3,)]
    con.execute("SELECT * FROM skade_serve_stop('lake')")
    con.close()
