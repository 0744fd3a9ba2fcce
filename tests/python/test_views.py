"""Views (issue 43) as other Iceberg readers see them: a view is an Iceberg view metadata file that
PyIceberg's view model parses, its current version's SQL of dialect `duckdb`, its default namespace
the view's schema, its schema the columns DuckDB bound (aliases applied, comments as docs), and
CREATE OR REPLACE / COMMENT ON add versions to one history (the same view uuid)."""
import json
import os

from pyiceberg.view.metadata import ViewMetadata

from conftest import connect


def view_metadata(con, view):
    # the newest metadata file of the view's folder is the one the catalog points at
    folder = os.path.join(con.execute("SELECT path FROM duckdb_databases() WHERE database_name = 'lake'")
                          .fetchone()[0] + ".data", "main", view, "metadata")
    newest = sorted(os.listdir(folder))[-1]
    with open(os.path.join(folder, newest)) as f:
        text = f.read()
    return ViewMetadata.model_validate_json(text), json.loads(text)


def test_a_view_is_iceberg_view_metadata_pyiceberg_reads(tmp_path):
    con = connect()
    con.execute(f"ATTACH '{tmp_path / 'lake.skade'}' AS lake (TYPE skade)")
    con.execute("CREATE TABLE lake.orders (id BIGINT, customer VARCHAR, amount DOUBLE, tags VARCHAR[])")
    con.execute("CREATE VIEW lake.totals (who) AS SELECT customer, sum(amount) AS total, "
                "list(tags) AS tags FROM orders GROUP BY customer")
    md, raw = view_metadata(con, "totals")
    assert md.format_version == 1
    version = next(v for v in md.versions if v.version_id == md.current_version_id)
    reps = [r.root for r in version.representations]
    assert [(r.type, r.dialect) for r in reps] == [("sql", "duckdb")]
    assert reps[0].sql.startswith("SELECT customer, sum(amount) AS total")
    assert list(version.default_namespace) == ["main"]
    schema = next(s for s in md.schemas if s.schema_id == version.schema_id)
    assert [f.name for f in schema.fields] == ["who", "total", "tags"]
    assert [str(f.field_type) for f in schema.fields][:2] == ["string", "double"]
    assert json.loads(md.properties["skade.duckdb-aliases"]) == ["who"]
    uuid = md.view_uuid

    con.execute("CREATE OR REPLACE VIEW lake.totals AS SELECT customer AS who FROM orders")
    con.execute("COMMENT ON VIEW lake.totals IS 'per customer'")
    con.execute("COMMENT ON COLUMN lake.totals.who IS 'the customer'")
    md, raw = view_metadata(con, "totals")
    assert md.view_uuid == uuid, "a replaced view keeps its identity"
    assert len(md.versions) == 4 and len(raw["version-log"]) == 4
    version = next(v for v in md.versions if v.version_id == md.current_version_id)
    schema = next(s for s in md.schemas if s.schema_id == version.schema_id)
    assert [(f.name, f.doc) for f in schema.fields] == [("who", "the customer")]
    assert md.properties["comment"] == "per customer"
    assert "skade.duckdb-aliases" not in md.properties

    # the catalog points at the newest file: what DuckDB reads is what PyIceberg parsed
    assert con.execute("SELECT comment FROM duckdb_views() WHERE view_name = 'totals'").fetchone()[0] == "per customer"
