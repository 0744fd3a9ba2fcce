"""Iceberg v3 tables (issue 46, docs/design/iceberg-v3.md), increment 1: tables made v3 by the
ATTACH option FORMAT_VERSION 3 or upgraded in place by skade_upgrade_table, with row lineage
assigned at every commit (first-row-id, next-row-id) that DuckDB's iceberg extension reads as
`_row_id`; PyIceberg reads them too. Deletes (deletion vectors): test_iceberg_v3_deletes.py."""
import json

import pytest
from pyiceberg.table import StaticTable

from conftest import connect, needs_iceberg, site_extension


def metadata_of(con, table):
    location = con.execute("SELECT metadata_location FROM skade_tables('lake') WHERE table_name = ?",
                           [table]).fetchone()[0]
    with open(location) as f:
        return location, json.load(f)


def iceberg_reader():
    peer = connect()
    for name in ("httpfs", "avro", "iceberg"):
        peer.execute(f"LOAD '{site_extension('duckdb_extension_' + name, name)}'")
    return peer


@pytest.fixture
def v3(tmp_path):
    con = connect()
    con.execute(f"ATTACH '{tmp_path / 'lake.skade'}' AS lake (TYPE skade, FORMAT_VERSION 3)")
    yield con
    con.close()


def test_new_tables_are_v3_with_row_lineage(v3):
    v3.execute("CREATE TABLE lake.t (id BIGINT, s VARCHAR)")
    v3.execute("INSERT INTO lake.t SELECT i, 's' || i FROM range(5) r(i)")
    v3.execute("INSERT INTO lake.t SELECT i, 's' || i FROM range(5, 8) r(i)")
    v3.execute("INSERT INTO lake.t VALUES (100, 'x')")
    _, md = metadata_of(v3, "t")
    assert md["format-version"] == 3 and md["next-row-id"] == 9
    ranges = sorted((s["first-row-id"], s["added-rows"]) for s in md["snapshots"])
    assert ranges == [(0, 5), (5, 3), (8, 1)]
    assert v3.execute("SELECT count(*), sum(id) FROM lake.t").fetchone() == (9, 128)


@needs_iceberg
def test_duckdb_iceberg_extension_reads_row_ids(v3):
    v3.execute("CREATE TABLE lake.t (id BIGINT, s VARCHAR) PARTITIONED BY (s)")
    for k in range(4):
        v3.execute(f"INSERT INTO lake.t SELECT i, 'p' || (i % 2) FROM range({k * 10}, {k * 10 + 10}) r(i)")
    location, _ = metadata_of(v3, "t")
    peer = iceberg_reader()
    try:
        got = peer.execute(f"SELECT _row_id, _last_updated_sequence_number, id, s FROM iceberg_scan('{location}') "
                           "ORDER BY _row_id").fetchall()
    finally:
        peer.close()
    # every row an id of its own, 0 .. 39, each commit's rows in the commit's range
    assert [r[0] for r in got] == list(range(40))
    by_commit = {}
    for row_id, sequence, id_, _ in got:
        by_commit.setdefault(sequence, []).append(row_id)
    assert sorted(len(v) for v in by_commit.values()) == [10, 10, 10, 10]
    assert sorted(r[2] for r in got) == list(range(40))
    assert sorted(got, key=lambda r: r[2])[:2] and sorted(v3.execute("SELECT id, s FROM lake.t").fetchall()) == \
        sorted((r[2], r[3]) for r in got)


def test_pyiceberg_reads_v3_tables(v3):
    v3.execute("CREATE TABLE lake.t (id INTEGER, ts TIMESTAMPTZ, tags VARCHAR[])")
    v3.execute("INSERT INTO lake.t SELECT i, TIMESTAMPTZ '2024-01-01 00:00:00+00', ['a'] FROM range(100) r(i)")
    v3.execute("INSERT INTO lake.t VALUES (1000, NULL, NULL)")
    location, _ = metadata_of(v3, "t")
    table = StaticTable.from_metadata(location)
    assert table.metadata.format_version == 3
    rows = table.scan().to_arrow().sort_by("id")
    assert rows.num_rows == 101 and rows.column("id").to_pylist()[-1] == 1000


def test_upgrade_in_place_and_never_back(tmp_path):
    con = connect()
    con.execute(f"ATTACH '{tmp_path / 'lake.skade'}' AS lake (TYPE skade)")
    con.execute("CREATE TABLE lake.t (id BIGINT, s VARCHAR)")
    con.execute("INSERT INTO lake.t SELECT i, 's' FROM range(10) r(i)")
    con.execute("DELETE FROM lake.t WHERE id = 0")       # a v2 position delete, kept across
    assert metadata_of(con, "t")[1]["format-version"] == 2
    seq = con.execute("SELECT max(commit_seq) FROM skade_commits_since('lake', 0)").fetchone()[0]
    assert con.execute("SELECT * FROM skade_upgrade_table('lake.t', 3)").fetchall() == [("lake.t", 2, 3)]
    # one commit, named as an ALTER
    assert con.execute("SELECT operation FROM skade_commits_since('lake', ?)", [seq]).fetchall() == \
        [("upgrade_format_version",)]
    # the upgrade gives the rows written before their ids, in a snapshot that changes no row
    _, md = metadata_of(con, "t")
    assert md["format-version"] == 3 and md["next-row-id"] == 10
    [upgrade] = [s for s in md["snapshots"] if s["snapshot-id"] == md["current-snapshot-id"]]
    assert upgrade["summary"]["operation"] == "replace" and (upgrade["first-row-id"], upgrade["added-rows"]) == (0, 10)
    assert sorted(r[0] for r in con.execute("SELECT _row_id FROM lake.t").fetchall()) == list(range(1, 10))
    assert con.execute("SELECT count(*) FROM skade_changelog('lake.t', ?)", [upgrade["parent-snapshot-id"]]
                       ).fetchone() == (0,)
    con.execute("INSERT INTO lake.t VALUES (100, 'new')")
    _, md = metadata_of(con, "t")
    assert md["next-row-id"] == 11
    assert con.execute("SELECT count(*) FROM lake.t").fetchone() == (10,)
    assert con.execute("SELECT * FROM skade_upgrade_table('lake.t', 3)").fetchall() == [("lake.t", 3, 3)]
    for version, message in [(2, "cannot go back"), (4, "not one skade writes")]:
        with pytest.raises(Exception, match=message):
            con.execute(f"SELECT * FROM skade_upgrade_table('lake.t', {version})")
    with pytest.raises(Exception, match="FORMAT_VERSION '4'"):
        con.execute(f"ATTACH '{tmp_path / 'other.skade'}' AS other (TYPE skade, FORMAT_VERSION 4)")


def test_the_lineage_history_of_a_v3_lake_stays_v2(tmp_path):
    con = connect()
    con.execute(f"ATTACH '{tmp_path / 'lake.skade'}' AS lake (TYPE skade, FORMAT_VERSION 3, LINEAGE true)")
    con.execute("CREATE TABLE lake.t (a INTEGER)")
    for i in range(3):
        con.execute(f"INSERT INTO lake.t VALUES ({i})")
    con.execute("SELECT * FROM skade_lineage_flush('lake')").fetchall()
    assert metadata_of(con, "t")[1]["format-version"] == 3
    assert metadata_of(con, "events")[1]["format-version"] == 2   # (skade's maintenance compacts it)
    con.execute("SELECT * FROM skade_compact('lake.skade_lineage.events')").fetchall()
    assert con.execute("SELECT count(*) FROM lake.skade_lineage.events").fetchone()[0] >= 4


def test_an_upgrade_never_lets_position_deletes_onto_a_v3_table(tmp_path):
    con = connect()
    con.execute(f"ATTACH '{tmp_path / 'lake.skade'}' AS lake (TYPE skade)")
    con.execute("CREATE TABLE lake.t (id BIGINT)")
    con.execute("INSERT INTO lake.t SELECT * FROM range(10)")
    # in the transaction that deletes
    con.execute("BEGIN")
    con.execute("DELETE FROM lake.t WHERE id = 1")
    with pytest.raises(Exception, match="wrote to it"):
        con.execute("SELECT * FROM skade_upgrade_table('lake.t', 3)")
    con.execute("ROLLBACK")
    # in another connection while a DELETE is staged: the DELETE's commit loses
    other = con.cursor()
    con.execute("BEGIN")
    con.execute("DELETE FROM lake.t WHERE id = 2")
    assert other.execute("SELECT * FROM skade_upgrade_table('lake.t', 3)").fetchall() == [("lake.t", 2, 3)]
    # (the upgrade's own snapshot, which gave the rows their ids, is a rewrite it cannot rebase over)
    with pytest.raises(Exception, match="transaction conflict on table lake.t"):
        con.execute("COMMIT")
    assert con.execute("SELECT count(*) FROM lake.t").fetchone() == (10,)
    location, md = metadata_of(con, "t")
    assert md["format-version"] == 3


@needs_iceberg
def test_deletion_vectors_duckdb_writes_over_rest_are_read(v3):
    """DuckDB's iceberg extension deletes from a skade v3 table through the REST server: it writes
    deletion vectors (a second DELETE of a file merges into the first's and removes it), which
    skade reads, in scans, the changelog and consumers; PyIceberg reads the same rows."""
    v3.execute("CREATE TABLE lake.t (id BIGINT, s VARCHAR)")
    v3.execute("INSERT INTO lake.t SELECT i, 's' || i FROM range(100) r(i)")
    v3.execute("CALL skade_create_consumer('lake', 'mirror', 't')")
    address = v3.execute("CALL skade_serve('lake', port := 0)").fetchone()[0]
    peer = iceberg_reader()
    try:
        peer.execute(f"ATTACH '' AS ice (TYPE iceberg, ENDPOINT '{address}', AUTHORIZATION_TYPE 'none', "
                     "DEFAULT_SCHEMA 'main')")
        peer.execute("DELETE FROM ice.main.t WHERE id < 10")
        peer.execute("DELETE FROM ice.main.t WHERE id >= 95")            # the same file: DVs merged
        peer.execute("UPDATE ice.main.t SET s = 'changed' WHERE id = 50")
        peer.execute("INSERT INTO ice.main.t VALUES (1000, 'new')")
        expected = sorted(peer.execute("SELECT id, s FROM ice.main.t").fetchall())
    finally:
        peer.close()
    assert len(expected) == 86 and (50, "changed") in expected and (1000, "new") in expected
    assert sorted(v3.execute("SELECT id, s FROM lake.t").fetchall()) == expected
    location, md = metadata_of(v3, "t")
    assert md["format-version"] == 3
    # (deletion vectors indeed: Puffin files, one for each DELETE's, none of Parquet position deletes)
    import glob
    import os
    folder = os.path.dirname(os.path.dirname(location))
    assert len(glob.glob(f"{folder}/**/*.puffin", recursive=True)) >= 2
    assert sorted(tuple(r.values()) for r in StaticTable.from_metadata(location).scan().to_arrow().to_pylist()) \
        == expected
    got = dict(v3.execute("SELECT _change_type, count(*) FROM skade_consume('lake', 'mirror') GROUP BY 1").fetchall())
    # (DuckDB's UPDATE keeps the row's _row_id: the table has no key, and the update pairs by it)
    assert got == {"DELETE": 15, "INSERT": 1, "UPDATE_BEFORE": 1, "UPDATE_AFTER": 1}, got


@needs_iceberg
def test_after_an_upgrade_other_engines_commit_at_once(tmp_path):
    """DuckDB's iceberg extension counts `added-rows` from its own new manifests only: its commit
    that also gave the rows written before the upgrade their ids claimed too short a range and
    was refused. The upgrade now gives them their ids itself, so its first commit lands."""
    con = connect()
    con.execute(f"ATTACH '{tmp_path / 'lake.skade'}' AS lake (TYPE skade)")
    con.execute("CREATE TABLE lake.t (id BIGINT)")
    con.execute("INSERT INTO lake.t SELECT * FROM range(10)")
    con.execute("SELECT * FROM skade_upgrade_table('lake.t', 3)").fetchall()
    address = con.execute("CALL skade_serve('lake', port := 0)").fetchone()[0]
    peer = iceberg_reader()
    try:
        peer.execute(f"ATTACH '' AS ice (TYPE iceberg, ENDPOINT '{address}', AUTHORIZATION_TYPE 'none', "
                     "DEFAULT_SCHEMA 'main')")
        peer.execute("INSERT INTO ice.main.t VALUES (100)")
        con.execute("INSERT INTO lake.t VALUES (200)")
        peer.execute("INSERT INTO ice.main.t VALUES (300)")
        expected = sorted(peer.execute("SELECT _row_id, id FROM ice.main.t").fetchall())
    finally:
        peer.close()
    assert con.execute("SELECT count(*), max(id) FROM lake.t").fetchone() == (13, 300)
    _, md = metadata_of(con, "t")
    assert md["next-row-id"] == 13
    assert sorted(con.execute("SELECT _row_id, id FROM lake.t").fetchall()) == expected
    assert sorted(r[0] for r in expected) == list(range(13))


@needs_iceberg
def test_tables_created_over_rest_are_v3_when_asked_or_on_a_v3_lake(v3, tmp_path):
    """A table another engine creates through skade_serve is v3 when the client asks for
    format-version 3, and, when it asks for none, on a FORMAT_VERSION 3 lake; DuckDB's iceberg
    extension writes it (deletion vectors, row ids), skade and PyIceberg read it."""
    from pyiceberg.catalog import load_catalog
    import pyarrow as pa
    address = v3.execute("CALL skade_serve('lake', port := 0)").fetchone()[0]
    catalog = load_catalog("lake", type="rest", uri=address)
    catalog.create_table("main.asked2", schema=pa.schema([("a", pa.int64())]), properties={"format-version": "2"})
    catalog.create_table("main.lakes", schema=pa.schema([("a", pa.int64())]))
    peer = iceberg_reader()
    try:
        peer.execute(f"ATTACH '' AS ice (TYPE iceberg, ENDPOINT '{address}', AUTHORIZATION_TYPE 'none', "
                     "DEFAULT_SCHEMA 'main')")
        # (DuckDB asks for version 2 unless told otherwise)
        peer.execute("CREATE TABLE ice.main.duckdbs (id BIGINT)")
        peer.execute("CREATE TABLE ice.main.made (id BIGINT, s VARCHAR) WITH ('format-version' = '3')")
        peer.execute("INSERT INTO ice.main.made SELECT i, 'a' FROM range(20) r(i)")
        peer.execute("DELETE FROM ice.main.made WHERE id < 5")
        peer.execute("UPDATE ice.main.made SET s = 'b' WHERE id = 10")
        expected = sorted(peer.execute("SELECT _row_id, id, s FROM ice.main.made").fetchall())
    finally:
        peer.close()
    assert metadata_of(v3, "made")[1]["format-version"] == 3
    assert metadata_of(v3, "asked2")[1]["format-version"] == 2
    assert metadata_of(v3, "duckdbs")[1]["format-version"] == 2
    assert metadata_of(v3, "lakes")[1]["format-version"] == 3
    assert sorted(v3.execute("SELECT _row_id, id, s FROM lake.made").fetchall()) == expected
    v3.execute("DELETE FROM lake.made WHERE id = 11")          # skade's deletion vector, merged with DuckDB's
    location, _ = metadata_of(v3, "made")
    rows = StaticTable.from_metadata(location).scan().to_arrow()
    assert sorted(rows.column("id").to_pylist()) == [i for i in range(5, 20) if i != 11]
    # on a v2 lake, a client asks for v3
    v2 = connect()
    v2.execute(f"ATTACH '{tmp_path / 'v2.skade'}' AS lake (TYPE skade)")
    address = v2.execute("CALL skade_serve('lake', port := 0)").fetchone()[0]
    catalog = load_catalog("v2lake", type="rest", uri=address)
    catalog.create_table("main.asked3", schema=pa.schema([("a", pa.int64())]), properties={"format-version": "3"})
    catalog.create_table("main.plain", schema=pa.schema([("a", pa.int64())]))
    assert metadata_of(v2, "asked3")[1]["format-version"] == 3
    assert metadata_of(v2, "plain")[1]["format-version"] == 2
    v2.close()


def test_registering_a_v3_table_is_refused_naming_it(v3):
    from test_rest_catalog_writes import post
    v3.execute("CREATE TABLE lake.t (id BIGINT)")
    v3.execute("INSERT INTO lake.t VALUES (1)")
    location, _ = metadata_of(v3, "t")
    v3.execute("DROP TABLE lake.t")
    address = v3.execute("CALL skade_serve('lake', port := 0)").fetchone()[0]
    got, answer = post(address, "/v1/namespaces/main/register", {"name": "t", "metadata-location": location})
    assert got == 406 and "registering an Iceberg v3 table" in answer["error"]["message"], answer
    assert v3.execute("SELECT count(*) FROM skade_tables('lake') WHERE table_name = 't'").fetchone() == (0,)


def test_a_create_by_commit_names_the_version_it_refuses(v3):
    from test_rest_catalog_writes import post
    address = v3.execute("CALL skade_serve('lake', port := 0)").fetchone()[0]
    schema = {"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "a", "required": False, "type": "long"}]}
    for version, status in [(1, 406), (3, 200)]:
        got, answer = post(address, f"/v1/namespaces/main/tables/v{version}", {
            "requirements": [{"type": "assert-create"}],
            "updates": [{"action": "upgrade-format-version", "format-version": version},
                        {"action": "add-schema", "schema": schema}, {"action": "set-current-schema", "schema-id": -1}]})
        assert got == status, answer
        if status != 200:
            assert f"format version {version} is not served" in answer["error"]["message"], answer
    assert metadata_of(v3, "v3")[1]["format-version"] == 3
    assert v3.execute("SELECT count(*) FROM skade_tables('lake') WHERE table_name = 'v1'").fetchone() == (0,)
