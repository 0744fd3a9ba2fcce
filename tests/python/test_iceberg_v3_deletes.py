"""Deletes on Iceberg v3 tables (issue 46, increment 2): skade writes deletion vectors, one
Puffin file per data file, merged with the file's live deletes on every DELETE (the old one
removed in the same snapshot), so a data file never has two; DuckDB's iceberg extension and
PyIceberg read the rows skade reads, compared against the same statements on a native table."""
import glob
import os

import pytest
from pyiceberg.table import StaticTable

from conftest import connect, needs_iceberg
from test_iceberg_v3 import iceberg_reader, metadata_of, v3  # noqa: F401 (v3: the fixture)

STATEMENTS = [
    "INSERT INTO {t} SELECT i, 's' || i, i * 1.5 FROM range(200) r(i)",
    "INSERT INTO {t} SELECT i, 'second', 0 FROM range(200, 260) r(i)",
    "DELETE FROM {t} WHERE id % 7 = 0",
    "DELETE FROM {t} WHERE id % 7 = 1",                  # the same files again: merged
    "UPDATE {t} SET s = 'upd', v = v + 1 WHERE id % 5 = 2",
    "UPDATE {t} SET v = -1 WHERE id BETWEEN 100 AND 120",  # rows updated twice
    "INSERT OR REPLACE INTO {t} VALUES (3, 'replaced', 3), (1000, 'new', 9)",
    "MERGE INTO {t} USING (SELECT i AS id FROM range(240, 270) r(i)) src USING (id) "
    "WHEN MATCHED THEN UPDATE SET s = 'merged' WHEN NOT MATCHED THEN INSERT VALUES (src.id, 'ins', 1)",
    "DELETE FROM {t} WHERE s = 'upd' AND id > 200",
]


def live_entries(location):
    """The live entries of a table's current snapshot, through PyIceberg's manifest reader."""
    table = StaticTable.from_metadata(location)
    snapshot = table.current_snapshot()
    out = []
    for manifest in snapshot.manifests(table.io):
        out.extend(e for e in manifest.fetch_manifest_entry(table.io, discard_deleted=True))
    return out


def delete_files(location):
    return [e.data_file for e in live_entries(location) if e.data_file.content.value != 0]


def referenced_file(dv):
    """The data file a deletion vector deletes from, as its bounds name it (PyIceberg 0.12's
    DataFile has no referenced_data_file property)."""
    low, high = dv.lower_bounds[2147483546], dv.upper_bounds[2147483546]
    assert low == high
    return low.decode()


def test_dml_on_v3_writes_deletion_vectors_read_like_a_native_table(v3):
    v3.execute("CREATE TABLE lake.t (id BIGINT PRIMARY KEY, s VARCHAR, v DOUBLE)")
    v3.execute("CREATE TABLE native (id BIGINT PRIMARY KEY, s VARCHAR, v DOUBLE)")
    for sql in STATEMENTS:
        v3.execute(sql.format(t="lake.t"))
        v3.execute(sql.format(t="native"))
        assert v3.execute("FROM lake.t ORDER BY id").fetchall() == v3.execute("FROM native ORDER BY id").fetchall(), sql
    expected = v3.execute("FROM native ORDER BY id").fetchall()
    location, md = metadata_of(v3, "t")
    assert md["format-version"] == 3
    deletes = delete_files(location)
    # every delete a deletion vector, at most one live for each data file
    assert deletes and all(f.file_format.value == "PUFFIN" for f in deletes)
    referenced = [referenced_file(f) for f in deletes]
    assert len(referenced) == len(set(referenced))
    folder = os.path.dirname(os.path.dirname(location))
    assert not glob.glob(f"{folder}/**/*-deletes.parquet", recursive=True)
    rows = StaticTable.from_metadata(location).scan().to_arrow().sort_by("id").to_pylist()
    assert [tuple(r.values()) for r in rows] == expected


@needs_iceberg
def test_duckdb_iceberg_extension_reads_skades_deletion_vectors(v3):
    v3.execute("CREATE TABLE lake.t (id BIGINT PRIMARY KEY, s VARCHAR, v DOUBLE)")
    for sql in STATEMENTS:
        v3.execute(sql.format(t="lake.t"))
    expected = v3.execute("FROM lake.t ORDER BY id").fetchall()
    location, _ = metadata_of(v3, "t")
    peer = iceberg_reader()
    try:
        assert peer.execute(f"FROM iceberg_scan('{location}') ORDER BY id").fetchall() == expected
        # (row ids stay unique over every live row)
        ids = peer.execute(f"SELECT count(DISTINCT _row_id), count(*) FROM iceberg_scan('{location}')").fetchone()
        assert ids[0] == ids[1] == len(expected)
    finally:
        peer.close()


def test_a_second_delete_merges_and_removes_the_first(v3):
    v3.execute("CREATE TABLE lake.t (id BIGINT)")
    v3.execute("INSERT INTO lake.t SELECT * FROM range(100)")
    v3.execute("DELETE FROM lake.t WHERE id < 10")
    location, _ = metadata_of(v3, "t")
    [first] = delete_files(location)
    assert first.record_count == 10
    v3.execute("DELETE FROM lake.t WHERE id >= 90")
    location, md = metadata_of(v3, "t")
    [merged] = delete_files(location)
    assert merged.record_count == 20 and merged.file_path != first.file_path
    assert referenced_file(merged) == referenced_file(first)
    [summary] = [s["summary"] for s in md["snapshots"] if s["snapshot-id"] == md["current-snapshot-id"]]
    assert summary["added-dvs"] == "1" and summary["removed-dvs"] == "1"
    assert summary["total-delete-files"] == "1" and summary["total-position-deletes"] == "20"
    assert "added-position-delete-files" not in summary       # (Iceberg counts deletion vectors apart)
    assert v3.execute("SELECT count(*), min(id), max(id) FROM lake.t").fetchone() == (80, 10, 89)
    # (the changelog: each DELETE's own rows, once)
    got = v3.execute("SELECT _commit_snapshot_id, count(*) FROM skade_changelog('lake.t', NULL) "
                     "WHERE _change_type = 'DELETE' GROUP BY 1 ORDER BY 1").fetchall()
    assert [n for _, n in got] == [10, 10]


def test_deletes_in_one_transaction_make_one_deletion_vector(v3):
    v3.execute("CREATE TABLE lake.t (id BIGINT)")
    v3.execute("INSERT INTO lake.t SELECT * FROM range(100)")
    v3.execute("DELETE FROM lake.t WHERE id = 0")
    location, _ = metadata_of(v3, "t")
    folder = os.path.dirname(os.path.dirname(location))
    v3.execute("BEGIN")
    for k in range(1, 6):
        v3.execute(f"DELETE FROM lake.t WHERE id = {k}")
        assert v3.execute("SELECT count(*) FROM lake.t").fetchone() == (99 - k,)
    # (the transaction's superseded deletion vectors are gone at once: one staged, one committed)
    assert len(glob.glob(f"{folder}/**/*.puffin", recursive=True)) == 2
    v3.execute("COMMIT")
    location, _ = metadata_of(v3, "t")
    [dv] = delete_files(location)
    assert dv.record_count == 6
    assert v3.execute("SELECT count(*) FROM lake.t").fetchone() == (94,)
    # a rolled-back DELETE leaves nothing behind
    v3.execute("BEGIN")
    v3.execute("DELETE FROM lake.t WHERE id = 50")
    v3.execute("ROLLBACK")
    assert metadata_of(v3, "t")[0] == location
    assert v3.execute("SELECT count(*) FROM lake.t").fetchone() == (94,)
    assert len(glob.glob(f"{folder}/**/*.puffin", recursive=True)) == 2


@needs_iceberg
def test_after_an_upgrade_a_deletion_vector_takes_over_the_position_deletes(tmp_path):
    """DuckDB's iceberg extension lets a file's deletion vector override its position delete
    files: skade's must hold the positions those deleted before the upgrade."""
    con = connect()
    con.execute(f"ATTACH '{tmp_path / 'lake.skade'}' AS lake (TYPE skade)")
    con.execute("CREATE TABLE lake.t (id BIGINT)")
    con.execute("INSERT INTO lake.t SELECT * FROM range(50)")
    con.execute("DELETE FROM lake.t WHERE id < 5")                     # v2 position deletes
    con.execute("SELECT * FROM skade_upgrade_table('lake.t', 3)").fetchall()
    con.execute("DELETE FROM lake.t WHERE id >= 45")                   # a deletion vector
    location, _ = metadata_of(con, "t")
    formats = sorted(f.file_format.value for f in delete_files(location))
    assert formats == ["PARQUET", "PUFFIN"]
    [dv] = [f for f in delete_files(location) if f.file_format.value == "PUFFIN"]
    assert dv.record_count == 10
    expected = list(range(5, 45))
    assert [r[0] for r in con.execute("SELECT id FROM lake.t ORDER BY id").fetchall()] == expected
    peer = iceberg_reader()
    try:
        assert [r[0] for r in peer.execute(f"SELECT id FROM iceberg_scan('{location}') ORDER BY id").fetchall()] \
            == expected
    finally:
        peer.close()
    assert sorted(StaticTable.from_metadata(location).scan().to_arrow().column("id").to_pylist()) == expected
    got = con.execute("SELECT count(*) FROM skade_changelog('lake.t', NULL) WHERE _change_type = 'DELETE'").fetchone()
    assert got == (10,)


def test_concurrent_deletes_of_a_v3_table_conflict_and_lose_nothing(v3):
    v3.execute("CREATE TABLE lake.t (id BIGINT)")
    v3.execute("INSERT INTO lake.t SELECT * FROM range(100)")
    other = v3.cursor()
    v3.execute("BEGIN")
    other.execute("BEGIN")
    v3.execute("DELETE FROM lake.t WHERE id = 1")
    other.execute("DELETE FROM lake.t WHERE id = 2")
    v3.execute("COMMIT")
    with pytest.raises(Exception, match="conflict"):
        other.execute("COMMIT")
    other.execute("DELETE FROM lake.t WHERE id = 2")                   # its retry lands, merged
    location, _ = metadata_of(v3, "t")
    [dv] = delete_files(location)
    assert dv.record_count == 2
    assert v3.execute("SELECT count(*) FROM lake.t").fetchone() == (98,)


def test_consumers_see_each_v3_change_once(v3):
    v3.execute("CREATE TABLE lake.k (id BIGINT PRIMARY KEY, s VARCHAR)")
    v3.execute("INSERT INTO lake.k SELECT i, 'a' FROM range(20) r(i)")
    v3.execute("CALL skade_create_consumer('lake', 'c', 'k')")
    v3.execute("DELETE FROM lake.k WHERE id < 3")
    v3.execute("UPDATE lake.k SET s = 'b' WHERE id IN (5, 6)")
    v3.execute("UPDATE lake.k SET s = 'c' WHERE id = 5")
    got = v3.execute("SELECT _change_type, id, s FROM skade_consume('lake', 'c') ORDER BY _commit_seq, id, "
                     "_change_type").fetchall()
    assert got == [("DELETE", 0, "a"), ("DELETE", 1, "a"), ("DELETE", 2, "a"),
                   ("UPDATE_AFTER", 5, "b"), ("UPDATE_BEFORE", 5, "a"),
                   ("UPDATE_AFTER", 6, "b"), ("UPDATE_BEFORE", 6, "a"),
                   ("UPDATE_AFTER", 5, "c"), ("UPDATE_BEFORE", 5, "b")]
    assert v3.execute("FROM skade_consume('lake', 'c')").fetchall() == []


@needs_iceberg
def test_many_commits_keep_row_ids_through_manifest_merges(v3):
    """A v3 table's small manifests merge as a v2 table's do; the merged entries carry their
    inherited first_row_id, so no row's _row_id changes (read by DuckDB's iceberg extension)."""
    v3.execute("CREATE TABLE lake.t (id BIGINT)")
    peer = iceberg_reader()

    def row_ids():
        location, _ = metadata_of(v3, "t")
        return dict(peer.execute(f"SELECT id, _row_id FROM iceberg_scan('{location}')").fetchall())

    try:
        for i in range(10):
            v3.execute(f"INSERT INTO lake.t VALUES ({i}), ({i + 1000})")
        before = row_ids()
        assert sorted(before.values()) == list(range(20))
        for i in range(10, 40):
            v3.execute(f"INSERT INTO lake.t VALUES ({i}), ({i + 1000})")
        location, _ = metadata_of(v3, "t")
        table = StaticTable.from_metadata(location)
        assert len(table.current_snapshot().manifests(table.io)) <= 20     # merged
        after = row_ids()
        assert {k: after[k] for k in before} == before
        assert len(set(after.values())) == 80
        v3.execute("DELETE FROM lake.t WHERE id = 3")
        after_delete = row_ids()
        assert after_delete == {k: v for k, v in after.items() if k != 3}
    finally:
        peer.close()
