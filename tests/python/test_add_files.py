"""skade_add_files: Parquet files written without Iceberg field ids (DuckDB's COPY), adopted where
they lie, read the same in skade, PyIceberg and DuckDB's iceberg extension: the table's name
mapping (`schema.name-mapping.default`) maps their columns to field ids for every reader, and
their footer's bounds and partition values prune in PyIceberg's plan."""
import json

import duckdb
import pytest
from pyiceberg.expressions import EqualTo, GreaterThanOrEqual
from pyiceberg.table import StaticTable

from conftest import connect, needs_iceberg, site_extension


def metadata_location(con, table):
    return con.execute(
        "SELECT metadata_location FROM skade_tables('lake') WHERE table_name = ?", [table]
    ).fetchone()[0]


def rows(con, sql):
    return sorted(con.execute(sql).fetchall())


def arrow_rows(table):
    return sorted(zip(*(table.column(c).to_pylist() for c in table.column_names)))


@pytest.fixture
def lake(tmp_path):
    con = connect()
    con.execute("SET TimeZone = 'UTC'")
    con.execute(f"ATTACH '{tmp_path / 'lake.skade'}' AS lake (TYPE skade)")
    exports = tmp_path / "exports"
    exports.mkdir()
    # A table with rows of its own, then two files: narrower types, another column order, a
    # column missing (NULL), and a name spelt in capitals.
    con.execute("CREATE TABLE lake.t (id BIGINT, name VARCHAR, amount DOUBLE, day DATE)")
    con.execute("INSERT INTO lake.t VALUES (0, 'own', 1.5, DATE '2024-01-01')")
    con.execute(
        f"COPY (SELECT i::INTEGER AS ID, 'n' || i AS name, DATE '2024-01-01' + (i % 60)::INTEGER AS day, "
        f"(i / 4)::FLOAT AS amount FROM range(1, 1001) r(i)) TO '{exports / 'a.parquet'}'"
    )
    con.execute(f"COPY (SELECT i AS id, 'm' || i AS name FROM range(1001, 3001) r(i)) TO '{exports / 'b.parquet'}'")
    con.execute(f"CALL skade_add_files('lake.t', '{exports}/*.parquet')")
    yield con, exports
    con.close()


def test_pyiceberg_reads_adopted_files_through_the_name_mapping(lake):
    con, exports = lake
    meta = metadata_location(con, "t")
    static = StaticTable.from_metadata(meta)
    mapping = json.loads(static.properties["schema.name-mapping.default"])
    by_id = {f["field-id"]: f["names"] for f in mapping}
    # (file a spells id in capitals: both spellings map to the column)
    assert sorted(by_id[1]) == ["ID", "id"] and by_id[2] == ["name"], mapping
    ours = rows(con, "SELECT * FROM lake.t")
    assert len(ours) == 3001
    assert arrow_rows(static.scan().to_arrow()) == ours
    # the files' bounds are the manifest's: a filter beyond file a's ids plans file b alone (and
    # the table's own file, whose bounds do not reach either)
    planned = [t.file.file_path for t in static.scan(row_filter=GreaterThanOrEqual("id", 2000)).plan_files()]
    assert planned == [str((exports / "b.parquet").resolve())], planned
    filtered = static.scan(row_filter=EqualTo("name", "n77")).to_arrow()
    assert arrow_rows(filtered) == rows(con, "SELECT * FROM lake.t WHERE name = 'n77'")


@needs_iceberg
def test_duckdb_iceberg_scan_reads_adopted_files(lake):
    con, _ = lake
    con.execute(f"LOAD '{site_extension('duckdb_extension_avro', 'avro')}'")
    con.execute(f"LOAD '{site_extension('duckdb_extension_iceberg', 'iceberg')}'")
    meta = metadata_location(con, "t")
    assert rows(con, f"SELECT * FROM iceberg_scan('{meta}')") == rows(con, "SELECT * FROM lake.t")
    assert rows(con, f"SELECT count(*), sum(id) FROM iceberg_scan('{meta}') WHERE id > 2500") == [(500, 1375250)]


def test_adopted_files_keep_their_partition_for_other_readers(tmp_path):
    """A partitioned table: the partition value computed from a file's bounds is in its manifest
    entry, so PyIceberg prunes the adopted file by it."""
    con = connect()
    con.execute(f"ATTACH '{tmp_path / 'lake.skade'}' AS lake (TYPE skade)")
    con.execute("CREATE TABLE lake.p (id BIGINT, day DATE) PARTITIONED BY (month(day))")
    for month in (1, 2, 3):
        path = tmp_path / f"m{month}.parquet"
        con.execute(
            f"COPY (SELECT {month} * 100 + i AS id, DATE '2024-0{month}-01' + i::INTEGER AS day "
            f"FROM range(28) r(i)) TO '{path}'"
        )
        con.execute(f"CALL skade_add_files('lake.p', '{path}')")
    static = StaticTable.from_metadata(metadata_location(con, "p"))
    assert arrow_rows(static.scan().to_arrow()) == rows(con, "SELECT * FROM lake.p")
    march = [t.file.file_path for t in static.scan(row_filter=GreaterThanOrEqual("day", "2024-03-01")).plan_files()]
    assert march == [str((tmp_path / "m3.parquet").resolve())], march
    partitions = sorted(t.file.partition[0] for t in static.scan().plan_files())
    assert partitions == [648, 649, 650]  # months since 1970: January to March 2024
    con.close()


def test_two_transactions_adopting_one_file_cannot_both_commit(tmp_path):
    """(review) each checks the file is no data file of the table when it adopts it; the second to
    commit must find the first's snapshot holds it (else the file's rows would count twice)."""
    con = connect()
    con.execute(f"ATTACH '{tmp_path / 'lake.skade'}' AS lake (TYPE skade)")
    con.execute("CREATE TABLE lake.t (id BIGINT, v VARCHAR)")
    f = tmp_path / "f1.parquet"
    con.execute(f"COPY (SELECT i AS id, 'v' || i AS v FROM range(5) r(i)) TO '{f}'")
    a, b = con.cursor(), con.cursor()
    a.execute("BEGIN")
    a.execute(f"CALL skade_add_files('lake.t', '{f}')")
    b.execute("BEGIN")
    b.execute(f"CALL skade_add_files('lake.t', '{tmp_path}/../{tmp_path.name}/f1.parquet')")
    a.execute("COMMIT")
    with pytest.raises(duckdb.Error, match="a concurrent transaction added file .*f1.parquet to it first"):
        b.execute("COMMIT")
    assert con.execute("SELECT count(*) FROM lake.t").fetchone() == (5,)
    assert {r[1] for r in con.execute("SELECT * FROM skade_check('lake')").fetchall()} == {"ok"}
