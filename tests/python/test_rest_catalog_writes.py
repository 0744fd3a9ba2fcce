"""The Iceberg REST catalog server (issue 45, docs/design/rest-catalog.md), tables other engines
create and change: PyIceberg 0.12 and DuckDB's iceberg extension create tables (staged too,
CREATE TABLE AS), evolve their schemas, commit several tables at once, and every table reads back
in skade with their rows; each of their commits is a skade commit."""
import json
import threading

import pyarrow as pa
import pytest
from pyiceberg.catalog import load_catalog
from pyiceberg.exceptions import CommitFailedException, NoSuchNamespaceError, TableAlreadyExistsError
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import DoubleType, IntegerType, LongType, NestedField, StringType, TimestamptzType

from conftest import needs_iceberg
from test_rest_catalog import http, iceberg_peer, plain  # noqa: F401  (plain: the fixture)


def post(address, path, body):
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return http("POST", address + path, raw, {"Content-Type": "application/json"})


def rows(con, sql):
    return sorted(con.execute(sql).fetchall(), key=repr)


@needs_iceberg
def test_duckdb_iceberg_extension_creates_and_writes_tables_as_duckdb_would(plain):
    """Every statement through the server, and the same statements on a native DuckDB table: the
    rows agree, in skade, in the peer and in DuckDB."""
    con, address = plain
    peer = iceberg_peer(address, "AUTHORIZATION_TYPE 'none'")
    native = con  # (a native table in DuckDB's own memory database)
    native.execute("CREATE TABLE memory.main.t (id INTEGER, s VARCHAR)")
    statements = [
        "CREATE TABLE {}.t (id INTEGER, s VARCHAR)",
        "INSERT INTO {}.t VALUES (1, 'a'), (2, 'b'), (3, NULL)",
        "ALTER TABLE {}.t ADD COLUMN c DOUBLE",
        "INSERT INTO {}.t VALUES (4, 'd', 1.5)",
        "UPDATE {}.t SET c = 2 WHERE id <= 2",
        "DELETE FROM {}.t WHERE s IS NULL",
        "MERGE INTO {0}.t USING (SELECT * FROM (VALUES (2, 'bb'), (9, 'new')) v(id, s)) src ON t.id = src.id "
        "WHEN MATCHED THEN UPDATE SET s = src.s WHEN NOT MATCHED THEN INSERT VALUES (src.id, src.s, -1)",
    ]
    try:
        for sql in statements:
            peer.execute(sql.format("ice.main"))
            if not sql.startswith("CREATE"):
                native.execute(sql.format("memory.main"))
        expected = rows(native, "FROM memory.main.t")
        assert expected == [(1, "a", 2.0), (2, "bb", 2.0), (4, "d", 1.5), (9, "new", -1.0)]
        assert rows(con, "FROM lake.t") == expected
        assert rows(peer, "FROM ice.main.t") == expected
        # CREATE TABLE AS: the client writes the rows before its commit creates the table
        peer.execute("CREATE TABLE ice.main.copy AS SELECT range AS a, 'x' || range AS b FROM range(1000)")
        assert con.execute("SELECT count(*), sum(a), min(b) FROM lake.copy").fetchone() == (1000, 499500, "x0")
        # one DuckDB transaction over two tables: one skade commit (transactions/commit), all or none
        before = con.execute("SELECT max(commit_seq) FROM skade_commits_since('lake', 0)").fetchone()[0]
        peer.execute("BEGIN")
        peer.execute("INSERT INTO ice.main.t VALUES (10, 'x', 0)")
        peer.execute("INSERT INTO ice.main.copy VALUES (1000, 'y')")
        peer.execute("COMMIT")
        commits = con.execute("SELECT table_name, actor FROM skade_commits_since('lake', ?) ORDER BY 1",
                              [before]).fetchall()
        assert commits == [("copy", "rest:127.0.0.1"), ("t", "rest:127.0.0.1")]
        assert con.execute("SELECT count(*) FROM lake.copy WHERE a = 1000").fetchone() == (1,)
        # the tables are skade tables: DuckDB writes to them, the peer reads that
        con.execute("INSERT INTO lake.t VALUES (11, 'duck', 3)")
        assert rows(peer, "FROM ice.main.t") == rows(con, "FROM lake.t")
    finally:
        peer.close()


def test_pyiceberg_partitioned_table_lifecycle(plain):
    from pyiceberg.expressions import EqualTo
    con, address = plain
    catalog = load_catalog("lake", type="rest", uri=address)
    catalog.create_namespace("shop")
    schema = Schema(NestedField(1, "id", IntegerType(), required=False),
                    NestedField(2, "region", StringType(), required=False),
                    NestedField(3, "ts", TimestamptzType(), required=False))
    spec = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="region"))
    table = catalog.create_table("shop.sales", schema=schema, partition_spec=spec, properties={"owner": "etl"})
    assert con.execute("SELECT count(*) FROM lake.shop.sales").fetchone() == (0,)
    # a lineage event, naming the client, as for DuckDB's CREATE TABLE
    assert con.execute("SELECT actor, operation, outputs[1].table_name FROM skade_lineage('lake', 0) "
                       "ORDER BY commit_seq DESC LIMIT 1").fetchone() == ("rest:127.0.0.1", "CREATE", "shop.sales")
    with pytest.raises(TableAlreadyExistsError):
        catalog.create_table("shop.sales", schema=schema)
    with pytest.raises(NoSuchNamespaceError):
        catalog.create_table("nope.sales", schema=schema)

    def batch(ids, region):
        return pa.table({"id": pa.array(ids, pa.int32()), "region": [region] * len(ids),
                         "ts": pa.array([1_700_000_000_000_000 + i for i in ids], pa.timestamp("us", tz="UTC"))})

    table.append(batch(list(range(10)), "eu"))
    table.append(batch(list(range(10, 15)), "us"))
    first = table.current_snapshot().snapshot_id
    table.overwrite(batch([100, 101], "eu"), overwrite_filter=EqualTo("region", "eu"))
    table.delete(EqualTo("id", 10))
    # schema evolution: a column added, one renamed, one widened (int -> long)
    with table.update_schema() as update:
        update.add_column("amount", DoubleType())
        update.rename_column("region", "area")
        update.update_column("id", field_type=LongType())
    table = catalog.load_table("shop.sales")
    table.append(pa.table({"id": pa.array([200], pa.int64()), "area": ["ap"],
                           "ts": pa.array([0], pa.timestamp("us", tz="UTC")), "amount": [9.5]}))
    theirs = sorted(table.scan().to_arrow().to_pylist(), key=lambda r: r["id"])
    ours = [dict(zip(("id", "area", "amount"), r)) for r in con.execute(
        "SELECT id, area, amount FROM lake.shop.sales ORDER BY id").fetchall()]
    assert [r["id"] for r in ours] == [11, 12, 13, 14, 100, 101, 200]
    assert [(r["id"], r["area"], r["amount"]) for r in theirs] == [(r["id"], r["area"], r["amount"]) for r in ours]
    assert con.execute("SELECT typeof(id) FROM lake.shop.sales LIMIT 1").fetchone() == ("BIGINT",)
    # time travel: the client's first snapshots read back, in both
    assert table.scan(snapshot_id=first).to_arrow().num_rows == 15
    # a transaction of several updates: one commit
    with table.transaction() as tx:
        tx.set_properties(stage="gold")
        tx.append(pa.table({"id": pa.array([300], pa.int64()), "area": ["eu"],
                            "ts": pa.array([0], pa.timestamp("us", tz="UTC")), "amount": [1.0]}))
    assert catalog.load_table("shop.sales").properties["stage"] == "gold"
    assert con.execute("SELECT count(*) FROM lake.shop.sales").fetchone() == (8,)
    # a staged create with rows: one commit creates the table with them
    staged = catalog.create_table_transaction("shop.staged", schema=pa.schema([("a", pa.int64())]))
    staged.append(pa.table({"a": [1, 2, 3]}))
    staged.commit_transaction()
    assert rows(con, "FROM lake.shop.staged") == [(1,), (2,), (3,)]
    # skade's own changelog sees the client's commits
    kinds = dict(con.execute("SELECT _change_type, count(*) FROM skade_changelog('lake.shop.sales', "
                             "TIMESTAMPTZ '2000-01-01', now()) GROUP BY 1").fetchall())
    assert kinds.get("INSERT", 0) >= 17 and kinds.get("DELETE", 0) >= 10


def test_a_staged_create_loses_to_a_table_created_meanwhile(plain):
    con, address = plain
    catalog = load_catalog("lake", type="rest", uri=address)
    staged = catalog.create_table_transaction("main.race", schema=pa.schema([("a", pa.int64())]))
    staged.append(pa.table({"a": [1]}))
    con.execute("CREATE TABLE lake.race (a BIGINT)")
    con.execute("INSERT INTO lake.race VALUES (42)")
    with pytest.raises(CommitFailedException):
        staged.commit_transaction()
    assert con.execute("FROM lake.race").fetchall() == [(42,)]


def test_bad_creates_are_refused_and_leave_nothing(plain):
    con, address = plain
    before = rows(con, "SELECT table_name, metadata_location FROM skade_tables('lake')")
    schema = {"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "a", "required": False, "type": "long"}]}
    cases = [
        ({"name": "x", "schema": schema, "location": "/tmp/elsewhere"}, 400, "places its tables itself"),
        ({"name": "x", "schema": schema, "properties": {"format-version": "4"}}, 406, "format version 4"),
        ({"name": "x", "schema": schema, "properties": {"format-version": "1"}}, 406, "format version 1"),
        ({"name": "..", "schema": schema}, 400, None),
        ({"name": "a/b", "schema": schema}, 400, None),
        ({"name": "events", "schema": schema}, 409, "already exists"),
        ({"name": "x", "schema": {"type": "struct", "fields": "no"}}, 400, None),
        ({"name": "x"}, 400, None),
    ]
    for body, status, message in cases:
        got, answer = post(address, "/v1/namespaces/main/tables", body)
        assert got == status, (body, answer)
        assert message is None or message in answer["error"]["message"], (body, answer)
    got, answer = post(address, "/v1/namespaces/nope/tables", {"name": "x", "schema": schema})
    assert got == 404 and answer["error"]["type"] == "NoSuchNamespaceException"
    # an assert-create commit whose schema is missing, or that asserts more
    got, answer = post(address, "/v1/namespaces/main/tables/y", {
        "requirements": [{"type": "assert-create"}], "updates": [{"action": "set-properties", "updates": {}}]})
    assert got == 400 and "add-schema" in answer["error"]["message"]
    got, answer = post(address, "/v1/namespaces/main/tables/y", {
        "requirements": [{"type": "assert-create"}, {"type": "assert-table-uuid", "uuid": "0" * 8 + "-0000-0000-0000-" + "0" * 12}],
        "updates": [{"action": "add-schema", "schema": schema}]})
    assert got == 400
    assert rows(con, "SELECT table_name, metadata_location FROM skade_tables('lake')") == before


def test_schema_changes_are_checked_as_alter_table_is(plain):
    con, address = plain
    _, loaded = http("GET", address + "/v1/namespaces/main/tables/events")
    fields = loaded["metadata"]["schemas"][0]["fields"]

    def change(new_fields, more=()):
        return post(address, "/v1/namespaces/main/tables/events", {"requirements": [], "updates": [
            {"action": "add-schema", "schema": {"type": "struct", "schema-id": 7, "fields": new_fields}},
            {"action": "set-current-schema", "schema-id": -1}, *more]})

    long_id = [dict(f) for f in fields]
    got, answer = change([{**long_id[0], "required": True}, *long_id[1:]])
    assert got == 400 and "cannot become required" in answer["error"]["message"]
    got, answer = change([*long_id, {"id": 4, "name": "n", "required": True, "type": "int"}])
    assert got == 400 and "cannot be required" in answer["error"]["message"]
    got, answer = change([*long_id, {"id": 2**31 - 1, "name": "n", "required": False, "type": "int"}])
    assert got == 400 and "new fields take the ids after" in answer["error"]["message"]
    got, answer = change([*long_id, {"id": 4, "name": "ID", "required": False, "type": "int"}])
    assert got == 400 and "differ only in case" in answer["error"]["message"]
    # a new struct may hold required fields (no row has it); its list, a required element
    got, answer = change([*long_id, {"id": 4, "name": "s", "required": False, "type": {
        "type": "struct", "fields": [{"id": 5, "name": "x", "required": True, "type": "int"}]}},
        {"id": 6, "name": "l", "required": False, "type": {
            "type": "list", "element-id": 7, "element": "string", "element-required": True}}])
    assert got == 200, answer
    nested = [*long_id, {"id": 4, "name": "s", "required": False, "type": {
        "type": "struct", "fields": [{"id": 5, "name": "x", "required": True, "type": "int"}]}}]
    # a list's element replaced (another id), a field moved into a struct
    got, answer = change([*nested, {"id": 6, "name": "l", "required": False, "type": {
        "type": "list", "element-id": 8, "element": "int", "element-required": False}}])
    assert got == 400 and "cannot change" in answer["error"]["message"]
    got, answer = change([long_id[0], {"id": 4, "name": "s", "required": False, "type": {
        "type": "struct", "fields": [{"id": 5, "name": "x", "required": True, "type": "int"}, long_id[1]]}},
        long_id[2]])
    assert got == 400 and "cannot move" in answer["error"]["message"]
    con.execute("INSERT INTO lake.events (id, kind, amount, s, l) VALUES (500, 'n', 1, {'x': 1}, ['a'])")
    assert con.execute("SELECT s, l FROM lake.events WHERE id = 500").fetchone() == ({"x": 1}, ["a"])
    got, answer = change([{**long_id[0], "type": "int"}, *long_id[1:]])  # a narrowing
    assert got == 400 and "cannot change" in answer["error"]["message"]
    # dropping a column, then bringing its field id back under another type
    got, _ = change(long_id[:2])
    assert got == 200
    assert [r[0] for r in con.execute("DESCRIBE lake.events").fetchall()] == ["id", "kind"]
    got, answer = change([*long_id[:2], {"id": long_id[2]["id"], "name": "amount2", "required": False, "type": "string"}])
    assert got == 400 and "reuses field id" in answer["error"]["message"]
    assert con.execute("SELECT count(*) FROM lake.events").fetchone() == (101,)
    # a keyed table takes new columns; its key's type, and a narrower DuckDB type, are DuckDB's
    con.execute("CREATE TABLE lake.kv (k INTEGER PRIMARY KEY, v VARCHAR, t TINYINT)")
    con.execute("INSERT INTO lake.kv VALUES (1, 'a', 1)")
    _, kv = http("GET", address + "/v1/namespaces/main/tables/kv")
    kv_fields = kv["metadata"]["schemas"][0]["fields"]

    def change_kv(fields, schema_id):
        return post(address, "/v1/namespaces/main/tables/kv", {"requirements": [], "updates": [
            {"action": "add-schema", "schema": {"type": "struct", "schema-id": schema_id,
                                                "identifier-field-ids": [1], "fields": fields}},
            {"action": "set-current-schema", "schema-id": -1}]})

    got, answer = change_kv([{**kv_fields[0], "type": "long"}, *kv_fields[1:]], 3)
    assert got == 406 and "PRIMARY KEY column" in answer["error"]["message"]
    got, answer = change_kv([*kv_fields[:2], {**kv_fields[2], "type": "long"}], 4)
    assert got == 406 and "narrower" in answer["error"]["message"]
    got, answer = change_kv([*kv_fields, {"id": 4, "name": "w", "required": False, "type": "int"}], 5)
    assert got == 200, answer
    assert con.execute("FROM lake.kv").fetchall() == [(1, "a", 1, None)]
    assert con.execute("SELECT typeof(t) FROM lake.kv").fetchone() == ("TINYINT",)
    with pytest.raises(Exception, match="(?i)duplicate key|primary key"):
        con.execute("INSERT INTO lake.kv VALUES (1, 'again', 2, 3)")


def test_a_transaction_over_several_tables_is_all_or_none(plain):
    con, address = plain
    con.execute("CREATE TABLE lake.other (a BIGINT)")
    _, events = http("GET", address + "/v1/namespaces/main/tables/events")
    change = lambda table, requirements: {"identifier": {"namespace": ["main"], "name": table},
                                          "requirements": requirements,
                                          "updates": [{"action": "set-properties", "updates": {"batch": "1"}}]}
    uuid = events["metadata"]["table-uuid"]
    wrong = {"type": "assert-table-uuid", "uuid": "00000000-0000-0000-0000-000000000000"}
    got, answer = post(address, "/v1/transactions/commit", {"table-changes": [
        change("other", []), change("events", [wrong])]})
    assert got == 409 and answer["error"]["type"] == "CommitFailedException"
    props = lambda t: http("GET", address + f"/v1/namespaces/main/tables/{t}")[1]["metadata"]["properties"]
    assert "batch" not in props("other") and "batch" not in props("events")
    got, answer = post(address, "/v1/transactions/commit", {"table-changes": [
        change("other", []), change("events", [{"type": "assert-table-uuid", "uuid": uuid}])]})
    assert got == 204, answer
    assert props("other")["batch"] == "1" and props("events")["batch"] == "1"
    # bad transactions: empty, a table twice, an unknown table
    assert post(address, "/v1/transactions/commit", {"table-changes": []})[0] == 400
    assert post(address, "/v1/transactions/commit", {"table-changes": [change("other", []), change("other", [])]})[0] == 400
    got, answer = post(address, "/v1/transactions/commit", {"table-changes": [change("nope", [])]})
    assert got == 404 and answer["error"]["type"] == "NoSuchTableException"


def test_concurrent_creates_of_one_name_leave_one_table(plain):
    con, address = plain
    outcomes = []
    schema = {"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "a", "required": False, "type": "long"}]}

    def create():
        outcomes.append(post(address, "/v1/namespaces/main/tables", {"name": "once", "schema": schema})[0])

    threads = [threading.Thread(target=create) for _ in range(6)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert sorted(outcomes) == [200] + [409] * 5
    assert con.execute("SELECT count(*) FROM skade_tables('lake') WHERE table_name = 'once'").fetchone() == (1,)


def test_register_brings_back_a_dropped_table_and_refuses_others(plain):
    import os
    con, address = plain
    catalog = load_catalog("lake", type="rest", uri=address)
    location = lambda t: con.execute(
        "SELECT metadata_location FROM skade_tables('lake') WHERE table_name = ?", [t]).fetchone()[0]
    kept = location("events")
    rows_before = rows(con, "FROM lake.events")
    con.execute("DROP TABLE lake.events")
    table = catalog.register_table("main.events", kept)
    # (the table names skade's copy of the file it checked, beside it)
    assert table.metadata_location != kept
    assert os.path.dirname(table.metadata_location) == os.path.dirname(kept)
    assert rows(con, "FROM lake.events") == rows_before
    con.execute("INSERT INTO lake.events VALUES (1000, 'after', 1)")   # skade commits on top of it
    assert catalog.load_table("main.events").scan().to_arrow().num_rows == 101

    def register(name, metadata_location, **more):
        return post(address, "/v1/namespaces/main/register",
                    {"name": name, "metadata-location": metadata_location, **more})

    got, answer = register("events", kept)
    assert got == 409 and answer["error"]["type"] == "AlreadyExistsException"
    got, answer = register("other", kept)               # another table's folder
    assert got == 400 and "metadata file in" in answer["error"]["message"]
    folder = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(kept))), "other", "metadata")
    os.makedirs(folder)
    # a copy of events' metadata placed in other's folder: it still places the table at events
    with open(kept) as f:
        metadata = json.load(f)
    copied = os.path.join(folder, "00001-copy.metadata.json")
    with open(copied, "w") as f:
        json.dump(metadata, f)
    got, answer = register("other", copied)
    assert got == 400 and "places it at" in answer["error"]["message"]
    # ... and moved to other's location: its uuid is events'
    metadata["location"] = os.path.dirname(folder)
    moved = os.path.join(folder, "00002-moved.metadata.json")
    with open(moved, "w") as f:
        json.dump(metadata, f)
    got, answer = register("other", moved)
    assert got == 400 and "another table's" in answer["error"]["message"]
    # ... with a uuid of its own: its snapshots' files are still events'
    metadata["table-uuid"] = "12345678-1234-1234-1234-123456789abc"
    elsewhere = os.path.join(folder, "00002-elsewhere.metadata.json")
    with open(elsewhere, "w") as f:
        json.dump(metadata, f)
    got, answer = register("other", elsewhere)
    assert got == 400 and "not under the table's location" in answer["error"]["message"]
    damaged = os.path.join(folder, "00003-damaged.metadata.json")
    with open(damaged, "w") as f:
        f.write("{not json")
    got, answer = register("other", damaged)
    assert got == 400 and "cannot read" in answer["error"]["message"]
    got, answer = register("other", os.path.join(folder, "..", "..", "events", "metadata", os.path.basename(kept)))
    assert got == 400
    got, answer = register("other", copied, overwrite=True)
    assert got == 406
    assert con.execute("SELECT count(*) FROM skade_tables('lake') WHERE table_name = 'other'").fetchone() == (0,)


def test_keyed_tables_take_client_rows_that_keep_the_key(plain):
    con, address = plain
    con.execute("CREATE TABLE lake.kv (k BIGINT PRIMARY KEY, v VARCHAR)")
    con.execute("INSERT INTO lake.kv SELECT i, 'v' || i FROM range(1000) r(i)")
    catalog = load_catalog("lake", type="rest", uri=address)
    schema = pa.schema([pa.field("k", pa.int64(), nullable=False), pa.field("v", pa.string())])
    catalog.load_table("main.kv").append(pa.table({"k": [1000, 1001], "v": ["a", "b"]}, schema=schema))
    assert con.execute("SELECT * FROM skade_lookup('lake.kv', 1001)").fetchall() == [(1001, "b")]
    for clash in ([5], [2000, 2000]):   # a live key, a key twice in the client's own rows
        with pytest.raises(Exception, match="PRIMARY KEY"):
            catalog.load_table("main.kv").append(pa.table({"k": clash, "v": ["dup"] * len(clash)}, schema=schema))
    assert con.execute("SELECT count(*), count(DISTINCT k) FROM lake.kv").fetchone() == (1002, 1002)
    # DuckDB's own writes keep checking the key over the client's rows
    with pytest.raises(Exception, match="(?i)duplicate key|primary key"):
        con.execute("INSERT INTO lake.kv VALUES (1000, 'again')")


@needs_iceberg
def test_duckdb_iceberg_extension_updates_a_keyed_table(plain):
    con, address = plain
    con.execute("CREATE TABLE lake.kv (k BIGINT PRIMARY KEY, v VARCHAR)")
    con.execute("INSERT INTO lake.kv SELECT i, 'v' || i FROM range(100) r(i)")
    con.execute("CALL skade_create_consumer('lake', 'mirror', 'kv')")
    peer = iceberg_peer(address, "AUTHORIZATION_TYPE 'none'")
    try:
        peer.execute("UPDATE ice.main.kv SET v = 'changed' WHERE k < 10")   # deletes + the same keys again
        peer.execute("DELETE FROM ice.main.kv WHERE k >= 90")
        peer.execute("INSERT INTO ice.main.kv VALUES (500, 'new')")
        with pytest.raises(Exception, match="PRIMARY KEY"):
            peer.execute("INSERT INTO ice.main.kv VALUES (50, 'dup')")
        ours = rows(con, "FROM lake.kv")
        assert len(ours) == 91 and (500, "new") in ours and (3, "changed") in ours
        assert con.execute("SELECT * FROM skade_lookup('lake.kv', 3)").fetchall() == [(3, "changed")]
        # the client's position deletes and rows reach a consumer as DuckDB's would: paired by key
        got = dict(con.execute("SELECT _change_type, count(*) FROM skade_consume('lake', 'mirror') GROUP BY 1")
                   .fetchall())
        assert got == {"UPDATE_BEFORE": 10, "UPDATE_AFTER": 10, "DELETE": 10, "INSERT": 1}
    finally:
        peer.close()


def test_creates_refuse_what_skade_could_not_show_or_write(plain):
    con, address = plain
    field = lambda i, name, t="long": {"id": i, "name": name, "required": False, "type": t}
    struct = {"type": "struct", "schema-id": 0, "fields": [
        field(1, "a"), field(2, "s", {"type": "struct", "fields": [field(3, "x")]})]}
    cases = [
        ({"type": "struct", "schema-id": 0, "fields": [field(1, "a"), field(2, "A")]}, None, "differ only in case"),
        ({"type": "struct", "schema-id": 0, "fields": []}, None, "at least one column"),
        (struct, {"spec-id": 0, "fields": [{"source-id": 3, "field-id": 1000, "name": "x", "transform": "identity"}]},
         "no column"),
    ]
    for schema, spec, message in cases:
        body = {"name": "bad", "schema": schema, **({"partition-spec": spec} if spec else {})}
        got, answer = post(address, "/v1/namespaces/main/tables", body)
        assert got == 400 and message in answer["error"]["message"], (body, answer)
    assert con.execute("SELECT count(*) FROM skade_tables('lake') WHERE table_name = 'bad'").fetchone() == (0,)


def test_a_created_table_gets_its_own_identity_and_folder(plain):
    con, address = plain
    uuid_of = lambda t: http("GET", address + f"/v1/namespaces/main/tables/{t}")[1]["metadata"]["table-uuid"]
    events = uuid_of("events")
    schema = {"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "a", "required": False, "type": "long"}]}
    # an assert-create commit assigning another table's uuid: the table gets one of its own
    got, answer = post(address, "/v1/namespaces/main/tables/twin", {
        "requirements": [{"type": "assert-create"}],
        "updates": [{"action": "assign-uuid", "uuid": events}, {"action": "add-schema", "schema": schema}]})
    assert got == 200, answer
    assert uuid_of("twin") != events and uuid_of("events") == events
    # ... and a staged create's uuid is kept by its commit, once
    got, staged = post(address, "/v1/namespaces/main/tables", {"name": "later", "schema": schema,
                                                               "stage-create": True})
    assert got == 200 and "metadata-location" not in staged
    metadata = staged["metadata"]
    commit = {"requirements": [{"type": "assert-create"}],
              "updates": [{"action": "assign-uuid", "uuid": metadata["table-uuid"]},
                          {"action": "add-schema", "schema": metadata["schemas"][0]},
                          {"action": "set-location", "location": metadata["location"]}]}
    assert post(address, "/v1/namespaces/main/tables/later", commit)[0] == 200
    assert uuid_of("later") == metadata["table-uuid"]
    # a dropped table's folder is never a new table's: a REST table lies in a folder of its own
    con.execute("ALTER TABLE lake.events RENAME TO old_events")
    created = post(address, "/v1/namespaces/main/tables", {"name": "events", "schema": schema})[1]
    old = con.execute("SELECT metadata_location FROM skade_tables('lake') WHERE table_name = 'old_events'").fetchone()[0]
    assert not old.startswith(created["metadata"]["location"] + "/")
    # and no table is registered in a folder a renamed table's files lie in
    con.execute("DROP TABLE lake.events")
    got, answer = post(address, "/v1/namespaces/main/register", {"name": "events", "metadata-location": old})
    assert got == 400 and "renamed from this name" in answer["error"]["message"]


def test_narrow_duckdb_types_take_client_values_that_fit(plain):
    con, address = plain
    con.execute("CREATE TABLE lake.small (id INTEGER, tiny TINYINT, u USMALLINT, tags TINYINT[])")
    con.execute("INSERT INTO lake.small VALUES (1, 1, 1, [1])")
    table = load_catalog("lake", type="rest", uri=address).load_table("main.small")
    arrow_schema = table.schema().as_arrow()
    batch = lambda tiny, u, tags: pa.table({"id": pa.array([2], pa.int32()), "tiny": pa.array([tiny], pa.int32()),
                                            "u": pa.array([u], pa.int32()),
                                            "tags": pa.array([tags], pa.list_(pa.int32()))}, schema=arrow_schema)
    table.append(batch(-128, 65535, [127]))
    for bad in (batch(128, 1, [1]), batch(1, -1, [1]), batch(1, 1, [1, 1000])):
        with pytest.raises(Exception, match="DuckDB type cannot"):
            load_catalog("lake", type="rest", uri=address).load_table("main.small").append(bad)
    assert rows(con, "FROM lake.small") == [(1, 1, 1, [1]), (2, -128, 65535, [127])]


def test_files_a_table_cannot_own_are_refused(plain, tmp_path):
    import os
    from test_rest_catalog import arrow_rows, tampered
    con, address = plain
    catalog = load_catalog("lake", type="rest", uri=address)
    location = lambda t: con.execute(
        "SELECT metadata_location FROM skade_tables('lake') WHERE table_name = ?", [t]).fetchone()[0]
    # skade's own summary properties (the DuckDB types time travel reads with) stay skade's
    def skade_summary(body):
        for u in body["updates"]:
            if u["action"] == "add-snapshot":
                u["snapshot"]["summary"]["skade.duckdb-types"] = '{"1": "TINYINT"}'
        return body
    before = location("events")
    with pytest.raises(Exception, match="skade's own"):
        tampered(load_catalog("t1", type="rest", uri=address), skade_summary).load_table("main.events").append(
            arrow_rows([900]))
    assert location("events") == before
    # a table whose data folder is a symbolic link to somewhere else takes no commit
    table_folder = os.path.dirname(os.path.dirname(before))
    elsewhere = tmp_path / "elsewhere"
    os.rename(os.path.join(table_folder, "data"), elsewhere)
    os.symlink(elsewhere, os.path.join(table_folder, "data"))
    with pytest.raises(Exception, match="symbolic link"):
        catalog.load_table("main.events").append(arrow_rows([901]))
    assert location("events") == before
    # a registered table's metadata log names only its own files (expiry removes those it trims)
    os.unlink(os.path.join(table_folder, "data"))
    os.rename(elsewhere, os.path.join(table_folder, "data"))
    con.execute("CREATE TABLE lake.victim (a INTEGER)")
    with open(before) as f:
        metadata = json.load(f)
    con.execute("DROP TABLE lake.events")
    metadata["metadata-log"] = [{"timestamp-ms": 0, "metadata-file": location("victim")}]
    logged = os.path.join(os.path.dirname(before), "00099-logged.metadata.json")
    with open(logged, "w") as f:
        json.dump(metadata, f)
    got, answer = post(address, "/v1/namespaces/main/register", {"name": "events", "metadata-location": logged})
    assert got == 400 and "not under the table's location" in answer["error"]["message"]


def test_a_staged_uuid_survives_a_failed_commit(plain):
    con, address = plain
    schema = {"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "a", "required": False, "type": "long"}]}
    _, staged = post(address, "/v1/namespaces/main/tables", {"name": "retry", "schema": schema, "stage-create": True})
    metadata = staged["metadata"]
    commit = lambda more: {"requirements": [{"type": "assert-create"}], "updates": [
        {"action": "assign-uuid", "uuid": metadata["table-uuid"]},
        {"action": "add-schema", "schema": metadata["schemas"][0]},
        {"action": "set-location", "location": metadata["location"]}, *more]}
    bad = [{"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": 12345}]
    got, _ = post(address, "/v1/namespaces/main/tables/retry", commit(bad))
    assert got == 400
    got, answer = post(address, "/v1/namespaces/main/tables/retry", commit([]))
    assert got == 200, answer
    assert answer["metadata"]["table-uuid"] == metadata["table-uuid"]
    # ... and taken once it landed: another table asking for it gets one of its own
    got, answer = post(address, "/v1/namespaces/main/tables/again", commit([]))
    assert got == 400 and "places its tables itself" in answer["error"]["message"]


@needs_iceberg
def test_two_clients_racing_an_update_one_retries(plain):
    """Two DuckDBs update one table at once through the server: the second to commit gets 409
    CommitFailed (nothing of it lands), and its retry on the new state lands."""
    con, address = plain
    a, b = (iceberg_peer(address, "AUTHORIZATION_TYPE 'none'") for _ in range(2))
    try:
        for peer, amount in ((a, -1), (b, -2)):
            peer.execute("BEGIN")
            peer.execute(f"UPDATE ice.main.events SET amount = {amount} WHERE id < 10")
        a.execute("COMMIT")
        with pytest.raises(Exception, match="409|CommitFailed"):
            b.execute("COMMIT")
        assert con.execute("SELECT DISTINCT amount FROM lake.events WHERE id < 10").fetchall() == [(-1.0,)]
        b.execute("UPDATE ice.main.events SET amount = -2 WHERE id < 10")
        assert con.execute("SELECT DISTINCT amount FROM lake.events WHERE id < 10").fetchall() == [(-2.0,)]
        assert con.execute("SELECT count(*) FROM lake.events").fetchone() == (100,)
    finally:
        a.close()
        b.close()
