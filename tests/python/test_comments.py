"""Comments (issue 43) as other Iceberg readers see them: COMMENT ON TABLE is the table property
`comment` and COMMENT ON COLUMN the field's `doc`, the names Iceberg's Java API and Spark use, so
PyIceberg shows them; the schema a column comment makes keeps every field id, and the rows read
the same before and after."""
from pyiceberg.table import StaticTable

from conftest import connect


def metadata_location(con, table):
    return con.execute(
        "SELECT metadata_location FROM skade_tables('lake') WHERE table_name = ?", [table]
    ).fetchone()[0]


def test_pyiceberg_reads_table_and_column_comments(tmp_path):
    con = connect()
    con.execute(f"ATTACH '{tmp_path / 'lake.skade'}' AS lake (TYPE skade)")
    con.execute("CREATE TABLE lake.orders (id BIGINT PRIMARY KEY, customer VARCHAR, amount DOUBLE)")
    con.execute("INSERT INTO lake.orders SELECT i, 'c' || i % 7, i * 1.5 FROM range(100) t(i)")
    before = StaticTable.from_metadata(metadata_location(con, "orders")).schema()

    con.execute("COMMENT ON TABLE lake.orders IS 'one row per order'")
    con.execute("COMMENT ON COLUMN lake.orders.customer IS 'who ordered'")
    con.execute("COMMENT ON COLUMN lake.orders.amount IS ''")
    con.execute("INSERT INTO lake.orders VALUES (100, 'z', 1.0)")

    table = StaticTable.from_metadata(metadata_location(con, "orders"))
    assert table.properties["comment"] == "one row per order"
    schema = table.schema()
    assert schema.find_field("customer").doc == "who ordered"
    assert schema.find_field("amount").doc == ""
    assert schema.find_field("id").doc is None
    assert [(f.field_id, f.name) for f in schema.fields] == [(f.field_id, f.name) for f in before.fields]
    assert schema.schema_id != before.schema_id
    assert schema.identifier_field_ids == before.identifier_field_ids
    theirs = sorted(table.scan().to_arrow().to_pylist(), key=lambda r: r["id"])
    ours = con.execute("SELECT id, customer, amount FROM lake.orders ORDER BY id").fetchall()
    assert [tuple(r.values()) for r in theirs] == ours

    # IS NULL removes them from the metadata
    con.execute("COMMENT ON TABLE lake.orders IS NULL")
    con.execute("COMMENT ON COLUMN lake.orders.customer IS NULL")
    table = StaticTable.from_metadata(metadata_location(con, "orders"))
    assert "comment" not in table.properties
    assert table.schema().find_field("customer").doc is None
    con.close()
