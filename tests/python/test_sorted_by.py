"""Sorted tables (issue 43) as other Iceberg readers see them: SET SORTED BY is the metadata's
`sort-orders` and `default-sort-order-id` (transforms, directions and NULL orders as the spec
names them), each data file written under it names the order in its manifest entry and holds its
rows in that order, and PyIceberg and DuckDB's iceberg extension read the same rows as skade."""
import json

import pyarrow.parquet as pq
from pyiceberg.table import StaticTable
from pyiceberg.table.sorting import NullOrder, SortDirection

from conftest import connect, needs_iceberg, site_extension


def metadata_location(con, table):
    return con.execute(
        "SELECT metadata_location FROM skade_tables('lake') WHERE table_name = ?", [table]
    ).fetchone()[0]


def test_the_order_is_in_the_metadata_and_every_file_written_under_it_names_it(tmp_path):
    con = connect()
    con.execute("SET TimeZone = 'UTC'")
    con.execute(f"ATTACH '{tmp_path / 'lake.skade'}' AS lake (TYPE skade)")
    con.execute("CREATE TABLE lake.s (id BIGINT, ts TIMESTAMP, name VARCHAR)")
    row = ("i * 7919 % 3000, TIMESTAMP '2024-01-01' + INTERVAL (i) HOUR, "
           "CASE WHEN i % 10 = 0 THEN NULL ELSE 'n' || i END")
    con.execute(f"INSERT INTO lake.s SELECT {row} FROM range(1000) r(i)")  # before the order
    con.execute("ALTER TABLE lake.s SET SORTED BY (day(ts) DESC, bucket(4, id), name NULLS FIRST)")
    con.execute(f"INSERT INTO lake.s SELECT {row} FROM range(1000, 3000) r(i)")

    meta = metadata_location(con, "s")
    with open(meta) as f:
        doc = json.load(f)
    orders = {o["order-id"]: o["fields"] for o in doc["sort-orders"]}
    order_id = doc["default-sort-order-id"]
    assert order_id != 0 and orders[0] == []
    schema = next(s for s in doc["schemas"] if s["schema-id"] == doc["current-schema-id"])
    ids = {f["name"]: f["id"] for f in schema["fields"]}
    assert orders[order_id] == [
        {"transform": "day", "source-id": ids["ts"], "direction": "desc", "null-order": "nulls-last"},
        {"transform": "bucket[4]", "source-id": ids["id"], "direction": "asc", "null-order": "nulls-last"},
        {"transform": "identity", "source-id": ids["name"], "direction": "asc", "null-order": "nulls-first"},
    ]

    static = StaticTable.from_metadata(meta)
    fields = [(str(f.transform), f.direction, f.null_order) for f in static.sort_order().fields]
    assert fields == [
        ("day", SortDirection.DESC, NullOrder.NULLS_LAST),
        ("bucket[4]", SortDirection.ASC, NullOrder.NULLS_LAST),
        ("identity", SortDirection.ASC, NullOrder.NULLS_FIRST),
    ]
    files = [t.file for t in static.scan().plan_files()]
    assert sorted(f.sort_order_id or 0 for f in files)[0] == 0, "the file written before the order: unsorted"
    sorted_files = [f for f in files if f.sort_order_id == order_id]
    assert sorted_files, [f.sort_order_id for f in files]
    for f in sorted_files:
        t = pq.read_table(f.file_path.removeprefix("file://"))
        days = [ts.date() for ts in t.column("ts").to_pylist()]
        assert days == sorted(days, reverse=True), f.file_path

    theirs = static.scan().to_arrow()
    ours = con.execute("SELECT * FROM lake.s").to_arrow_table()
    assert theirs.num_rows == ours.num_rows == 3000
    key = [("id", "ascending"), ("ts", "ascending")]
    assert theirs.sort_by(key).to_pylist() == ours.sort_by(key).to_pylist()

    # RESET: the default is the unsorted order again, the order set stays listed
    con.execute("ALTER TABLE lake.s RESET SORTED BY")
    with open(metadata_location(con, "s")) as f:
        doc = json.load(f)
    assert doc["default-sort-order-id"] == 0
    assert order_id in [o["order-id"] for o in doc["sort-orders"]]
    con.close()


def test_files_hold_their_rows_in_the_order_descending_with_nulls_first(tmp_path):
    con = connect()
    con.execute(f"ATTACH '{tmp_path / 'lake.skade'}' AS lake (TYPE skade)")
    con.execute("CREATE TABLE lake.d (id BIGINT, v INTEGER)")
    con.execute("ALTER TABLE lake.d SET SORTED BY (v DESC NULLS FIRST)")
    con.execute("INSERT INTO lake.d SELECT i, CASE WHEN i % 50 = 0 THEN NULL ELSE i * 37 % 1000 END FROM range(5000) r(i)")
    static = StaticTable.from_metadata(metadata_location(con, "d"))
    for task in static.scan().plan_files():
        values = pq.read_table(task.file.file_path.removeprefix("file://")).column("v").to_pylist()
        nulls = values.count(None)
        assert values[:nulls] == [None] * nulls, "NULLs first"
        assert values[nulls:] == sorted(values[nulls:], reverse=True), "then descending"
    assert con.execute("SELECT count(*), count(v) FROM lake.d").fetchone() == (5000, 4900)
    con.close()


@needs_iceberg
def test_duckdbs_iceberg_extension_reads_a_sorted_table(tmp_path):
    con = connect()
    con.execute(f"ATTACH '{tmp_path / 'lake.skade'}' AS lake (TYPE skade)")
    con.execute("CREATE TABLE lake.t (id BIGINT, s VARCHAR) SORTED BY (truncate(2, s), id)")
    con.execute("INSERT INTO lake.t SELECT i, 'k' || (i % 37) FROM range(2000) r(i)")
    con.execute(f"LOAD '{site_extension('duckdb_extension_avro', 'avro')}'")
    con.execute(f"LOAD '{site_extension('duckdb_extension_iceberg', 'iceberg')}'")
    meta = metadata_location(con, "t")
    ours = sorted(con.execute("SELECT * FROM lake.t").fetchall())
    assert sorted(con.execute(f"SELECT * FROM iceberg_scan('{meta}')").fetchall()) == ours
    assert con.execute(f"SELECT count(*) FROM iceberg_scan('{meta}') WHERE id = 1234").fetchone() == (1,)
    con.close()
