"""Row lineage in skade's own reads (issue 46, increment 3): `_row_id` and
`_last_updated_sequence_number` are hidden columns of a v3 table (not in SELECT *, as rowid is),
computed as Iceberg's spec says and as DuckDB's iceberg extension reads them; a v2 table refuses
them, naming the way out."""
import pytest

from conftest import connect, needs_iceberg
from test_iceberg_v3 import iceberg_reader, metadata_of, v3  # noqa: F401 (v3: the fixture)

LINEAGE = "SELECT _row_id, _last_updated_sequence_number, id FROM {t} ORDER BY id"


def test_row_ids_are_hidden_columns_of_v3_tables(v3):
    v3.execute("CREATE TABLE lake.t (id BIGINT, s VARCHAR)")
    v3.execute("INSERT INTO lake.t SELECT i, 's' FROM range(5) r(i)")
    v3.execute("INSERT INTO lake.t SELECT i, 's' FROM range(5, 8) r(i)")
    assert [d[0] for d in v3.execute("SELECT * FROM lake.t").description] == ["id", "s"]
    got = v3.execute(LINEAGE.format(t="lake.t")).fetchall()
    sequences = sorted({r[1] for r in got})
    assert [r[0] for r in got] == list(range(8)) and len(sequences) == 2
    assert [r[1] for r in got] == [sequences[0]] * 5 + [sequences[1]] * 3
    # filters and expressions on them, alone or with other columns
    assert v3.execute("SELECT id FROM lake.t WHERE _row_id = 6").fetchall() == [(6,)]
    assert v3.execute("SELECT count(*), sum(_row_id) FROM lake.t").fetchone() == (8, 28)
    # rows not committed yet have no id
    v3.execute("BEGIN")
    v3.execute("INSERT INTO lake.t VALUES (100, 'new')")
    assert v3.execute("SELECT _row_id, _last_updated_sequence_number FROM lake.t WHERE id = 100").fetchall() == \
        [(None, None)]
    v3.execute("COMMIT")
    assert v3.execute("SELECT _row_id FROM lake.t WHERE id = 100").fetchall() == [(8,)]


def test_a_v2_table_refuses_row_ids_naming_the_upgrade(tmp_path):
    con = connect()
    con.execute(f"ATTACH '{tmp_path / 'lake.skade'}' AS lake (TYPE skade)")
    con.execute("CREATE TABLE lake.t (id BIGINT)")
    con.execute("INSERT INTO lake.t VALUES (1)")
    with pytest.raises(Exception, match=r"Iceberg v2 table.*skade_upgrade_table\('lake.t', 3\)"):
        con.execute("SELECT _row_id FROM lake.t").fetchall()
    con.execute("SELECT * FROM skade_upgrade_table('lake.t', 3)").fetchall()
    # (the upgrade gives the rows written before their ids)
    assert con.execute("SELECT _row_id FROM lake.t").fetchall() == [(0,)]
    con.execute("INSERT INTO lake.t VALUES (2)")
    assert sorted(r[0] for r in con.execute("SELECT _row_id FROM lake.t").fetchall()) == [0, 1]


def test_a_column_named_row_id_wins_over_the_hidden_one(v3):
    v3.execute("CREATE TABLE lake.t (_row_id VARCHAR, id BIGINT)")
    v3.execute("INSERT INTO lake.t VALUES ('mine', 1)")
    assert v3.execute("SELECT _row_id, _last_updated_sequence_number IS NOT NULL FROM lake.t").fetchall() == \
        [("mine", True)]


@needs_iceberg
def test_row_ids_read_like_duckdbs_iceberg_extension(v3):
    v3.execute("CREATE TABLE lake.t (id BIGINT, s VARCHAR) PARTITIONED BY (s)")
    for k in range(3):
        v3.execute(f"INSERT INTO lake.t SELECT i, 'p' || (i % 3) FROM range({k * 50}, {k * 50 + 50}) r(i)")
    v3.execute("DELETE FROM lake.t WHERE id % 4 = 0")
    location, _ = metadata_of(v3, "t")
    peer = iceberg_reader()
    try:
        expected = peer.execute(LINEAGE.format(t=f"iceberg_scan('{location}')")).fetchall()
    finally:
        peer.close()
    assert len(expected) == 112 and all(r[0] is not None for r in expected)
    assert v3.execute(LINEAGE.format(t="lake.t")).fetchall() == expected


@needs_iceberg
def test_row_ids_duckdb_keeps_through_an_update_over_rest_are_read(v3):
    """DuckDB's iceberg extension writes an updated row's `_row_id` into its new file: skade
    reads the stored id, not the file's first row id plus position."""
    v3.execute("CREATE TABLE lake.t (id BIGINT, s VARCHAR)")
    v3.execute("INSERT INTO lake.t SELECT i, 'a' FROM range(20) r(i)")
    before = dict((r[2], r[0]) for r in v3.execute(LINEAGE.format(t="lake.t")).fetchall())
    address = v3.execute("CALL skade_serve('lake', port := 0)").fetchone()[0]
    peer = iceberg_reader()
    try:
        peer.execute(f"ATTACH '' AS ice (TYPE iceberg, ENDPOINT '{address}', AUTHORIZATION_TYPE 'none', "
                     "DEFAULT_SCHEMA 'main')")
        peer.execute("UPDATE ice.main.t SET s = 'b' WHERE id IN (3, 7)")
        peer.execute("INSERT INTO ice.main.t VALUES (100, 'c')")
        location, _ = metadata_of(v3, "t")
        expected = peer.execute(LINEAGE.format(t=f"iceberg_scan('{location}')")).fetchall()
    finally:
        peer.close()
    got = v3.execute(LINEAGE.format(t="lake.t")).fetchall()
    assert got == expected
    after = dict((r[2], r[0]) for r in got)
    assert {k: after[k] for k in before} == before          # every row keeps its id
    assert after[100] not in before.values()
    updated_seq = {r[2]: r[1] for r in got}
    assert updated_seq[3] == updated_seq[7] > updated_seq[0]


def row_ids_by_id(con, table="lake.t"):
    return {r[2]: (r[0], r[1]) for r in con.execute(LINEAGE.format(t=table)).fetchall()}


def test_update_merge_and_upserts_keep_row_ids(v3):
    v3.execute("CREATE TABLE lake.t (id BIGINT, s VARCHAR)")
    v3.execute("INSERT INTO lake.t SELECT i, 'a' FROM range(10) r(i)")
    v3.execute("INSERT INTO lake.t SELECT i, 'b' FROM range(10, 20) r(i)")
    before = row_ids_by_id(v3)
    v3.execute("UPDATE lake.t SET s = 'u' WHERE id % 3 = 0")
    after = row_ids_by_id(v3)
    assert {k: v[0] for k, v in after.items()} == {k: v[0] for k, v in before.items()}
    updated_seq = after[0][1]
    assert updated_seq > max(v[1] for v in before.values())
    assert {k for k, v in after.items() if v[1] == updated_seq} == {k for k in range(20) if k % 3 == 0}
    # twice in one transaction, and a MERGE that updates and inserts
    v3.execute("BEGIN")
    v3.execute("UPDATE lake.t SET s = 'v' WHERE id = 4")
    v3.execute("UPDATE lake.t SET s = 'w' WHERE id = 4")
    v3.execute("MERGE INTO lake.t USING (SELECT 5 AS id UNION ALL SELECT 50) src USING (id) "
               "WHEN MATCHED THEN UPDATE SET s = 'm' WHEN NOT MATCHED THEN INSERT VALUES (src.id, 'n')")
    v3.execute("COMMIT")
    again = row_ids_by_id(v3)
    assert {k: again[k][0] for k in before} == {k: before[k][0] for k in before}
    assert again[50][0] not in {v[0] for v in before.values()}
    assert v3.execute("SELECT s FROM lake.t WHERE id IN (4, 5) ORDER BY id").fetchall() == [("w",), ("m",)]


def test_upserts_of_a_keyed_table_keep_row_ids(v3):
    v3.execute("CREATE TABLE lake.k (id BIGINT PRIMARY KEY, s VARCHAR)")
    v3.execute("INSERT INTO lake.k SELECT i, 'a' FROM range(10) r(i)")
    before = row_ids_by_id(v3, "lake.k")
    v3.execute("INSERT OR REPLACE INTO lake.k VALUES (3, 'r'), (100, 'new')")
    v3.execute("INSERT INTO lake.k VALUES (4, 'x') ON CONFLICT DO UPDATE SET s = 'conflict'")
    after = row_ids_by_id(v3, "lake.k")
    assert {k: after[k][0] for k in before} == {k: before[k][0] for k in before}
    assert v3.execute("SELECT s FROM lake.k WHERE id IN (3, 4) ORDER BY id").fetchall() == [("r",), ("conflict",)]


def test_a_table_column_named_row_id_survives_an_update(v3):
    v3.execute("CREATE TABLE lake.t (_row_id VARCHAR, id BIGINT)")
    v3.execute("INSERT INTO lake.t VALUES ('mine', 1), ('yours', 2)")
    v3.execute("UPDATE lake.t SET _row_id = 'changed' WHERE id = 1")
    assert v3.execute("SELECT _row_id, id FROM lake.t ORDER BY id").fetchall() == [("changed", 1), ("yours", 2)]


@needs_iceberg
def test_other_engines_read_the_row_ids_skade_keeps(v3):
    v3.execute("CREATE TABLE lake.t (id BIGINT, s VARCHAR)")
    v3.execute("INSERT INTO lake.t SELECT i, 'a' FROM range(30) r(i)")
    v3.execute("UPDATE lake.t SET s = 'u' WHERE id < 10")
    v3.execute("DELETE FROM lake.t WHERE id = 20")
    expected = v3.execute(LINEAGE.format(t="lake.t")).fetchall()
    location, _ = metadata_of(v3, "t")
    peer = iceberg_reader()
    try:
        assert peer.execute(LINEAGE.format(t=f"iceberg_scan('{location}')")).fetchall() == expected
        assert peer.execute(f"FROM iceberg_scan('{location}') ORDER BY id").fetchall() == \
            v3.execute("FROM lake.t ORDER BY id").fetchall()
    finally:
        peer.close()
    from pyiceberg.table import StaticTable
    rows = StaticTable.from_metadata(location).scan().to_arrow()
    assert rows.column_names == ["id", "s"] and rows.num_rows == 29


def test_the_changelog_of_a_keyless_v3_table_pairs_updates_by_row_id(v3):
    v3.execute("CREATE TABLE lake.t (id BIGINT, s VARCHAR)")
    v3.execute("INSERT INTO lake.t SELECT i, 'a' FROM range(6) r(i)")
    v3.execute("CALL skade_create_consumer('lake', 'c', 't')")
    [(first,)] = v3.execute("SELECT DISTINCT _commit_snapshot_id FROM skade_changelog('lake.t', NULL)").fetchall()
    v3.execute("UPDATE lake.t SET id = id + 100 WHERE id IN (1, 2)")   # (the "key" changes too)
    v3.execute("DELETE FROM lake.t WHERE id = 3")
    v3.execute("INSERT INTO lake.t VALUES (7, 'a')")
    got = sorted(v3.execute("SELECT _change_type, id, s FROM skade_changelog('lake.t', NULL) "
                            "WHERE _commit_snapshot_id <> ?", [first]).fetchall())
    assert got == [("DELETE", 3, "a"), ("INSERT", 7, "a"),
                   ("UPDATE_AFTER", 101, "a"), ("UPDATE_AFTER", 102, "a"),
                   ("UPDATE_BEFORE", 1, "a"), ("UPDATE_BEFORE", 2, "a")]
    assert sorted(v3.execute("SELECT _change_type, id, s FROM skade_consume('lake', 'c')").fetchall()) == got


def test_a_v2_table_changelog_does_not_pair_keyless_updates(tmp_path):
    con = connect()
    con.execute(f"ATTACH '{tmp_path / 'lake.skade'}' AS lake (TYPE skade)")
    con.execute("CREATE TABLE lake.t (id BIGINT, s VARCHAR)")
    con.execute("INSERT INTO lake.t VALUES (1, 'a')")
    con.execute("UPDATE lake.t SET s = 'b'")
    got = con.execute("SELECT _change_type, s FROM skade_changelog('lake.t', NULL) ORDER BY _commit_snapshot_id, "
                      "_change_type").fetchall()
    assert got == [("INSERT", "a"), ("DELETE", "a"), ("INSERT", "b")]


def test_compaction_changes_no_row_id_nor_sequence_number(v3):
    v3.execute("CREATE TABLE lake.t (id BIGINT PRIMARY KEY, s VARCHAR)")
    for k in range(4):
        v3.execute(f"INSERT INTO lake.t SELECT i, 'a' FROM range({k * 10}, {k * 10 + 10}) r(i)")
    v3.execute("UPDATE lake.t SET s = 'u' WHERE id % 4 = 1")
    v3.execute("DELETE FROM lake.t WHERE id % 5 = 0")
    before = v3.execute(LINEAGE.format(t="lake.t")).fetchall()
    rows_before = v3.execute("FROM lake.t ORDER BY id").fetchall()
    report = v3.execute("SELECT * FROM skade_compact('lake.t')").fetchall()
    assert report and report[0][0] >= 4
    assert v3.execute(LINEAGE.format(t="lake.t")).fetchall() == before
    assert v3.execute("FROM lake.t ORDER BY id").fetchall() == rows_before
    location, _ = metadata_of(v3, "t")
    from test_iceberg_v3_deletes import delete_files
    assert delete_files(location) == []
    # (a compaction is no change in the changelog)
    got = v3.execute("SELECT count(*) FROM skade_changelog('lake.t', NULL)").fetchone()[0]
    v3.execute("UPDATE lake.t SET s = 'again' WHERE id = 1")
    after = v3.execute(LINEAGE.format(t="lake.t")).fetchall()
    assert [r[0] for r in after] == [r[0] for r in before]
    assert v3.execute("SELECT count(*) FROM skade_changelog('lake.t', NULL)").fetchone()[0] == got + 2


@needs_iceberg
def test_duckdb_reads_a_compacted_v3_table_the_same(v3):
    v3.execute("CREATE TABLE lake.t (id BIGINT, s VARCHAR)")
    for k in range(3):
        v3.execute(f"INSERT INTO lake.t SELECT i, 'a' FROM range({k * 10}, {k * 10 + 10}) r(i)")
    v3.execute("UPDATE lake.t SET s = 'u' WHERE id < 5")
    v3.execute("DELETE FROM lake.t WHERE id = 7")
    v3.execute("SELECT * FROM skade_compact('lake.t')").fetchall()
    expected = v3.execute(LINEAGE.format(t="lake.t")).fetchall()
    location, _ = metadata_of(v3, "t")
    peer = iceberg_reader()
    try:
        assert peer.execute(LINEAGE.format(t=f"iceberg_scan('{location}')")).fetchall() == expected
    finally:
        peer.close()


def test_rows_written_before_an_upgrade_keep_their_ids_through_merges(tmp_path):
    """The manifests of rows written before the upgrade get their ids in the first v3 commit's
    list, after this process cached their entries without: a later merge of them must write the
    ids they got (a review found them moved)."""
    con = connect()
    con.execute(f"ATTACH '{tmp_path / 'lake.skade'}' AS lake (TYPE skade)")
    con.execute("CREATE TABLE lake.t (id BIGINT)")
    for i in range(8):
        con.execute(f"INSERT INTO lake.t VALUES ({i})")
    con.execute("SELECT * FROM skade_upgrade_table('lake.t', 3)").fetchall()
    con.execute("INSERT INTO lake.t VALUES (100)")
    before = dict(con.execute("SELECT id, _row_id FROM lake.t").fetchall())
    assert None not in before.values() and len(set(before.values())) == 9
    for i in range(101, 121):
        con.execute(f"INSERT INTO lake.t VALUES ({i})")           # small manifests merged
    after = dict(con.execute("SELECT id, _row_id FROM lake.t").fetchall())
    assert {k: after[k] for k in before} == before
    assert len(set(after.values())) == len(after) == 29
    fresh = connect()
    fresh.execute(f"ATTACH '{tmp_path / 'lake.skade'}' AS lake (TYPE skade)")
    assert dict(fresh.execute("SELECT id, _row_id FROM lake.t").fetchall()) == after


def test_rows_behind_counts_a_deletion_vectors_new_rows_only(tmp_path):
    con = connect()
    con.execute(f"ATTACH '{tmp_path / 'lake.skade'}' AS lake (TYPE skade)")
    con.execute("CREATE TABLE lake.t (id BIGINT)")
    con.execute("INSERT INTO lake.t SELECT * FROM range(100)")
    con.execute("DELETE FROM lake.t WHERE id < 10")                    # v2 position deletes
    con.execute("SELECT * FROM skade_upgrade_table('lake.t', 3)").fetchall()
    con.execute("CALL skade_create_consumer('lake', 'c', 't')")
    con.execute("DELETE FROM lake.t WHERE id = 50")                    # a deletion vector of 11
    con.execute("DELETE FROM lake.t WHERE id = 51")                    # merged: 12, one new
    assert con.execute("SELECT rows_behind FROM skade_consumers('lake')").fetchone() == (2,)
    assert con.execute("SELECT count(*) FROM skade_consume('lake', 'c')").fetchone() == (2,)


def test_a_netted_changelog_of_a_keyless_v3_table_nets_by_row_id(v3):
    v3.execute("CREATE TABLE lake.t (id BIGINT, s VARCHAR)")
    v3.execute("INSERT INTO lake.t VALUES (1, 'a'), (2, 'a'), (3, 'a'), (4, 'a'), (4, 'a')")
    [(start,)] = v3.execute("SELECT DISTINCT _commit_snapshot_id FROM skade_changelog('lake.t', NULL)").fetchall()
    v3.execute("UPDATE lake.t SET s = 'b' WHERE id = 1")
    v3.execute("UPDATE lake.t SET s = 'c', id = 10 WHERE id = 1")      # twice: one pair, first to last
    v3.execute("UPDATE lake.t SET s = 'x' WHERE id = 2")
    v3.execute("UPDATE lake.t SET s = 'a' WHERE id = 2")               # and back: nothing
    v3.execute("DELETE FROM lake.t WHERE id = 3")
    v3.execute("INSERT INTO lake.t VALUES (7, 'n')")
    v3.execute("DELETE FROM lake.t WHERE rowid IN (SELECT min(rowid) FROM lake.t WHERE id = 4)")  # one of two equal rows
    got = sorted(v3.execute(f"SELECT _change_type, id, s FROM skade_changelog('lake.t', {start}, collapse := true)"
                            ).fetchall())
    assert got == [("DELETE", 3, "a"), ("DELETE", 4, "a"), ("INSERT", 7, "n"),
                   ("UPDATE_AFTER", 10, "c"), ("UPDATE_BEFORE", 1, "a")]
    # the netted window is the difference of its two ends, as rows
    at = v3.execute(f"SELECT id, s FROM lake.t AT (VERSION => {start}) EXCEPT ALL SELECT id, s FROM lake.t").fetchall()
    assert sorted(at) == sorted((i, s) for k, i, s in got if k in ("DELETE", "UPDATE_BEFORE"))


def test_a_filter_on_the_changelog_keeps_update_pairs(v3):
    """A review found a filter on a column pruning one image of a pair away (the other then read
    as an INSERT or a DELETE): a key-less v3 table's changelog prunes no rows."""
    v3.execute("CREATE TABLE lake.t (id BIGINT, v VARCHAR)")
    v3.execute("INSERT INTO lake.t SELECT i, 'a' FROM range(4) r(i)")
    [(start,)] = v3.execute("SELECT DISTINCT _commit_snapshot_id FROM skade_changelog('lake.t', NULL)").fetchall()
    v3.execute("UPDATE lake.t SET v = 'b' WHERE id < 2")
    feed = "SELECT _change_type, id, v FROM skade_changelog('lake.t', {}) WHERE v = '{}' ORDER BY ALL"
    for window in (str(start), f"{start}, collapse := true"):
        assert v3.execute(feed.format(window, "b")).fetchall() == [("UPDATE_AFTER", 0, "b"), ("UPDATE_AFTER", 1, "b")]
        assert v3.execute(feed.format(window, "a")).fetchall() == [("UPDATE_BEFORE", 0, "a"), ("UPDATE_BEFORE", 1, "a")]
    assert v3.execute(feed.format("NULL", "a")).fetchall() == \
        [("INSERT", 0, "a"), ("INSERT", 1, "a"), ("INSERT", 2, "a"), ("INSERT", 3, "a"),
         ("UPDATE_BEFORE", 0, "a"), ("UPDATE_BEFORE", 1, "a")]


@needs_iceberg
def test_row_ids_of_rows_new_in_an_updates_file(v3):
    """An UPDATE's file stores the ids of the rows it carries and none for rows inserted in the
    same transaction (Iceberg's spec: they take the file's first row id plus their position).
    skade finds each by its id; DuckDB's iceberg extension reads the same ids. (Its own filter
    on `_row_id` misses such rows: it filters the stored column before it falls back to the
    position, in its 1.5.5 release; the file has no statistics on the stored column either.)"""
    v3.execute("CREATE TABLE lake.t (id BIGINT, s VARCHAR)")
    v3.execute("INSERT INTO lake.t SELECT i, 'a' FROM range(100) r(i)")
    v3.execute("BEGIN")
    v3.execute("INSERT INTO lake.t SELECT i, 'new' FROM range(100, 103) r(i)")
    v3.execute("UPDATE lake.t SET s = 'u' WHERE id IN (5, 101)")
    v3.execute("COMMIT")
    got = v3.execute("SELECT _row_id, id FROM lake.t WHERE id IN (5, 100, 101, 102) ORDER BY id").fetchall()
    assert len({r[0] for r in got}) == 4 and got[0][0] == 5
    for row_id, id_ in got:
        assert v3.execute(f"SELECT id FROM lake.t WHERE _row_id = {row_id}").fetchall() == [(id_,)]
    location, _ = metadata_of(v3, "t")
    peer = iceberg_reader()
    try:
        assert peer.execute(f"SELECT _row_id, id FROM iceberg_scan('{location}') WHERE id IN (5, 100, 101, 102) "
                            "ORDER BY id").fetchall() == got
    finally:
        peer.close()